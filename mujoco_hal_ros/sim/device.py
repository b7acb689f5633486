"""The simulated device: a MuJoCo model behind the device file's channels and limits.

``Device`` is what a driver node talks to. Every request is checked in the caller's thread
against the limits kernel and answered with a structured error before anything is posted
to the stepper, so a refused request changes nothing; accepted ones become setpoint paths
that the stepper thread follows in real time.
"""

import collections
import os
import threading
import time

import mujoco
import numpy as np

from ..motion import cartesian, ik
from ..config import device_file as devfile, limits
from .. import errors
from ..config.channels import Layout
from ..checks import finite_number, known_name
from ..errors import ConfigError, DeviceError, ModelError
from .stepper import Stepper
from ..motion.trajectory import PEAK, MinJerkPlan, WaypointPlan, duration
from ..config.units import parse_quantity

DEFAULTS = {'action_wait': 8.0, 'tolerance': 1e-3, 'aim_tolerance': np.deg2rad(3.0)}
IMPEDANCE_HZ = 4.0   # bandwidth of the joint loop that makes torque motors hold a goal
COLLISION_RETRIES = 6   # IK restarts that look for an answer where the arm misses itself
IK_SHARE = 0.2       # IK solves to this share of the tolerance; the servos get the rest
SETTLE_LIMIT = 30.0  # simulated seconds after its path before a moving arm counts as stuck
SETTLE_QUIET = 0.3   # simulated seconds without progress that count as settled


def load_model(path):
    """Compile an MJCF file, with an error that says what to check."""
    if not isinstance(path, str) or not path:
        raise ModelError(f'expected an MJCF path, got {path!r}')
    if not os.path.isfile(path):
        raise ModelError(f'model file not found: {path}; check the path (or the environment '
                         'variable the device file names)', where='model')
    try:
        return mujoco.MjModel.from_xml_path(path)
    except Exception as exc:  # noqa: BLE001 - MuJoCo raises ValueError and others
        raise ModelError(f'MuJoCo could not load {path}: {exc}', where='model') from None


class Log(collections.deque):
    """A bounded record (audit, events) that also answers when called: ``device.audit()``
    returns a list copy (optionally only entries of one ``kind``), ``device.audit`` iterates."""

    def __init__(self, maxlen):
        super().__init__(maxlen=maxlen)
        self._lock = threading.Lock()

    def add(self, entry):
        with self._lock:
            self.append(entry)

    def __call__(self, kind=None, last=None):
        with self._lock:
            items = list(self)
        if kind is not None:
            items = [e for e in items if e.get('kind', e.get('code')) == kind]
        return items[-last:] if last else items


class Move:
    """A move in flight: wait for it, poll it, be called back, or read its result."""

    def __init__(self, target, point, action):
        self.target = np.asarray(target, dtype=float)
        self.point = point          # ('site'|'body', id)
        self.action = action
        self.result = None
        self.plan_end = None
        self.best_miss = None
        self.best_time = None
        self.planned = None          # where the solved joints put the point, and its miss
        self.planned_miss = None
        self.accepted_wall = time.monotonic()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._callbacks = []

    def finish(self, result):
        with self._lock:
            if self.result is not None:
                return
            self.result = result
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)

    def add_done_callback(self, fn):
        """``fn(move)`` once the move has its result: on the thread that finishes it (the
        stepper's: keep it short), or here at once if it already has one."""
        with self._lock:
            if self.result is None:
                self._callbacks.append(fn)
                return
        fn(self)

    def done(self):
        return self._done.is_set()

    def wait(self, timeout=None):
        return self._done.wait(timeout)


class Device:
    """A MuJoCo model as a device: goals, move_to, hold, reads and cameras."""

    def __init__(self, device_file=None, *, model=None, keyframe=None, real_time_factor=None,
                 start_paused=False, environ=None, spec=None):
        environ = os.environ if environ is None else environ
        if not hasattr(environ, 'get'):
            raise errors.InvalidArgument(f'environ must be a mapping, got {environ!r}',
                                         where='environ')
        if not isinstance(start_paused, (bool, np.bool_)):
            raise errors.InvalidArgument(f'start_paused takes true or false, got '
                                         f'{start_paused!r}', where='start_paused')
        if model is not None and (not isinstance(model, (str, os.PathLike)) or not str(model)):
            raise ModelError(f'expected an MJCF path, got {model!r}', where='model')
        model = os.fspath(model) if model is not None else None
        if spec is None and isinstance(device_file, dict):
            spec = devfile.parse(device_file)
        elif spec is None and device_file is not None:
            spec = device_file_load(device_file)
        self.spec = spec
        connect = spec['connect'] if spec else {}
        if spec is None and not model:
            raise ConfigError('give a device file or a model path', where='device')
        self.model_path = devfile.model_path(spec, model, environ) if spec else model
        self.model = load_model(self.model_path)
        self.params = dict(DEFAULTS)
        for key, kind in (('action_wait', 'time'), ('tolerance', 'length'),
                          ('aim_tolerance', 'angle')):
            if key in connect:
                self.params[key] = parse_quantity(connect[key], kind, f'connect.{key}')
                if not self.params[key] > 0:
                    raise ConfigError('must be above zero', where=f'connect.{key}')
        if 'timestep' in connect:
            dt = parse_quantity(connect['timestep'], 'time', 'connect.timestep')
            if not dt > 0:
                raise ConfigError('must be above zero', where='connect.timestep')
            self.model.opt.timestep = dt
        self.layout = Layout(self.model, spec)
        self.gravcomp_bodies = []
        if connect.get('gravity_compensation', True):
            self.gravcomp_bodies = self._servo_gravcomp()
        keyframe = keyframe if keyframe is not None else connect.get('keyframe')
        self.keyframe = self._keyframe_id(keyframe)
        self.keyframe_name = keyframe if self.keyframe is not None else None
        rtf = connect.get('real_time_factor', 1.0) if real_time_factor is None \
            else real_time_factor
        rtf = limits.real_time_factor(rtf)
        self.data = mujoco.MjData(self.model)
        if self.keyframe is not None:
            mujoco.mj_resetDataKeyframe(self.model, self.data, self.keyframe)
        mujoco.mj_forward(self.model, self.data)
        if not (np.isfinite(self.data.qpos).all() and np.isfinite(self.data.qacc).all()):
            raise ModelError('the model is not finite at its start pose', where='model')
        self._scratch = mujoco.MjData(self.model)     # IK's private state
        self._ik_lock = threading.Lock()
        self.audit = Log(2000)
        self.events = Log(200)
        self.move = None
        m = self.model
        drives = [(self.layout.drive_of(a), int(m.jnt_qposadr[m.actuator_trnid[a, 0]])
                   if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT else -1)
                  for a in range(m.nu)]
        self.stepper = Stepper(self.model, self.data, drives=drives,
                               impedance=self._impedance_loop(),
                               real_time_factor=rtf, start_paused=bool(start_paused),
                               keyframe=self.keyframe, on_chunk=self._after_chunk,
                               on_unstable=self._on_unstable, on_error=self._on_error)
        try:
            sp = self.stepper.post(self._start_setpoint, wait=True)
        except BaseException:
            self.stepper.close()
            raise
        self._renderers = {}
        self._render_data = None
        self._render_lock = threading.Lock()
        self._record('connect', {'model': self.model_path, 'keyframe': keyframe},
                     self._native_all(sp))

    @staticmethod
    def _start_setpoint(s):
        s.setpoint = s.initial_setpoint()
        s.snapshot = s._snap()
        return s.setpoint.copy()

    def _native_all(self, setpoint):
        return {self.layout.actuators[a] or str(a): float(v) for a, v in enumerate(setpoint)}

    # --- set-up helpers ---------------------------------------------------------------------
    def _keyframe_id(self, name):
        if name is None or name == '':
            return None
        names = [mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_KEY, i)
                 for i in range(self.model.nkey)]
        if name not in names:
            raise ConfigError(f'the model has no keyframe {name!r}', where='connect.keyframe',
                              allowed=', '.join(n for n in names if n) or 'none')
        return names.index(name)

    def _servo_gravcomp(self):
        """Let position servos carry their links' weight, as a real arm's controller does.

        MuJoCo's position actuators are pure PD, so an arm sags under gravity by force/kp
        (millimetres on Panda, centimetres on UR5e) and never reaches an IK target. Bodies
        hanging only from servo-driven hinges or slides get ``gravcomp`` (computed inside
        MuJoCo, no per-step cost); a body with a free, ball or unactuated joint above it (a
        legged robot's trunk, a passive pendulum, a payload) keeps its weight.
        """
        m = self.model
        servo_joints = {int(m.actuator_trnid[a, 0]) for a in range(m.nu)
                        if self.layout.drive_of(a) == 'position'}
        changed = []
        for b in range(1, m.nbody):
            if m.body_gravcomp[b] != 0:
                continue
            joints, body = [], b
            while body > 0:
                joints.extend(range(m.body_jntadr[body],
                                    m.body_jntadr[body] + m.body_jntnum[body]))
                body = m.body_parentid[body]
            if joints and all(j in servo_joints for j in joints):
                m.body_gravcomp[b] = 1.0
                changed.append(self.layout.bodies[b] or str(b))
        if changed and hasattr(m, 'flg_gravcomp'):
            m.flg_gravcomp = True        # MuJoCo skips gravcomp unless the compiler saw some
        return changed

    def _impedance_loop(self):
        """Gains for torque motors: a joint PD with gravity and Coriolis compensation."""
        m = self.model
        acts = [a for a in range(m.nu) if self.layout.drive_of(a) == 'motor_impedance'
                and self.layout.joint_kind(int(m.actuator_trnid[a, 0]))]
        if not acts:
            return None
        jids = m.actuator_trnid[acts, 0]
        dofs = m.jnt_dofadr[jids]
        qadrs = m.jnt_qposadr[jids]
        # Joint-space inertia (armature included) at the start pose: the loop's gains.
        d = mujoco.MjData(m)
        if self.keyframe is not None:
            mujoco.mj_resetDataKeyframe(m, d, self.keyframe)
        mujoco.mj_forward(m, d)
        full = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, full)
        inertia = np.maximum(np.diag(full)[dofs], m.dof_M0[dofs])
        w = 2 * np.pi * IMPEDANCE_HZ
        kp = inertia * w * w
        kd = 2.0 * inertia * w
        gain = m.actuator_gear[acts, 0] * m.actuator_gainprm[acts, 0]   # torque per ctrl
        return (np.array(acts), dofs, kp, kd, gain, qadrs, inertia)

    # --- reading ----------------------------------------------------------------------------
    @property
    def snapshot(self):
        return self.stepper.snapshot

    def describe(self):
        desc = self.layout.describe()
        stem = os.path.splitext(os.path.basename(self.model_path))[0]
        m = self.model
        actuators = []
        for a in range(m.nu):
            g = self.layout.goal_by_actuator.get(a)
            drive = self.layout.drive_of(a)
            joint = (self.layout.joints[int(m.actuator_trnid[a, 0])]
                     if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT else None)
            actuators.append({'name': self.layout.actuators[a], 'drive': drive,
                              'joint': joint, 'goal': g.name if g else None})
        desc.update({'device': self.spec['device'] if self.spec and self.spec['device']
                     else f'{stem} (simulated)',
                     'id': self.spec['id'] if self.spec and self.spec['id'] else stem,
                     'model': self.model_path, 'timestep': self.model.opt.timestep,
                     'keyframe': self.keyframe_name, 'hazard': self.spec['hazard']
                     if self.spec else 'none', 'safe_state': (self.spec or {}).get(
                         'safe_state', {'action': 'hold'}), 'params': dict(self.params),
                     'zero_config': self.layout.zero_config, 'actuators': actuators,
                     'gravity_compensated': list(self.gravcomp_bodies),
                     'real_time_factor': self.stepper.real_time_factor})
        return desc

    def read(self, names=None, snapshot=None):
        """Scalar read channels in their own units, from one consistent snapshot."""
        snap = snapshot or self.snapshot
        chans = self.layout.reads
        if names is not None:
            if isinstance(names, str):
                names = [names]
            if not isinstance(names, (list, tuple, set, frozenset)):
                raise errors.InvalidArgument(
                    f'expected channel names, got {errors.shorten(names)}', where='read')
            known = {c.name: c for c in chans}
            chans = [known[known_name(n, known, 'read channel')] for n in names]
        out = {}
        for c in chans:
            if c.kind == 'joint':
                native = snap.qpos[c.index]
            elif c.kind == 'site':
                native = snap.site_xpos[c.index, 'xyz'.index(c.axis)]
            elif c.kind == 'body':
                native = snap.xpos[c.index, 'xyz'.index(c.axis)]
            else:
                native = snap.sensordata[c.index]
            out[c.name] = float(c.to_unit(native))
        return out

    def goals(self, setpoint=False):
        """Each goal channel's target in its own unit: the goal it was last given (where its
        path ends), as a device reads back a write channel. ``setpoint=True``: where the
        path is now instead."""
        snap = self.snapshot
        values = snap.setpoint if setpoint else snap.target
        return {g.name: float(g.to_unit(values[g.actuator]))
                for g in self.layout.goals.values()}

    def health(self):
        h = self.stepper.health()
        h['moving'] = self.snapshot.moving
        return h

    # --- goals ------------------------------------------------------------------------------
    def set_goals(self, goals):
        """Start min-jerk paths to several goals at once; all-or-nothing.

        Each channel's path peaks at its ``max_change_per_s`` (no rate: it jumps in one
        step). Only the named actuators change hands: a running move keeps the rest, though
        it is reported PREEMPTED since it can no longer arrive as planned.
        """
        targets = limits.check_goals(self.layout, goals)
        request = {n: float(v) for n, v in goals.items()}     # checked: plain numbers
        native = {self.layout.goals[n].actuator_name: v for n, v in targets.items()}
        acts = [self.layout.goals[n].actuator for n in targets]
        values = np.array([targets[n] for n in targets])
        rates = [self.layout.goals[n].native_rate for n in targets]

        def apply(s):
            now = s.data.time
            start = s.setpoint[acts].copy()
            each = [duration([en - st], [r]) for st, en, r in zip(start, values, rates)]
            s.add_plan(MinJerkPlan(acts, start, values, now, each))
            self._preempt_if_touched(acts)
            self._record('goals', request, native, sim_time=now)
        self.stepper.post(apply, wait=True)
        return {'success': True, 'code': errors.STARTED, 'targets': targets}

    def _preempt_if_touched(self, acts):
        move = self.move
        if move is not None and not move.done():
            touched = set(acts) & set(move.actuators)
            if touched:
                move.finish(self._move_result(move, errors.PREEMPTED, False,
                                              'a newer goal took over '
                                              + ', '.join(self.layout.actuators[a]
                                                          for a in sorted(touched))))

    # --- move_to ----------------------------------------------------------------------------
    def action(self, name):
        return self.layout.actions[known_name(name, self.layout.actions, 'action')]

    def move_action(self, site=None):
        """The device file's move_to action, or one built for ``site`` (a site or body)."""
        base = next((a for a in self.layout.actions.values() if a.command == 'move_to'), None)
        if site is not None and not isinstance(site, str):
            raise errors.InvalidArgument(f'expected a site or body name, got {site!r}',
                                         where='site')
        if site in (None, '') and base is not None:
            return base
        if site in (None, ''):
            raise DeviceError(errors.INVALID_ARGUMENT,
                              'this device has no move_to action; name a site or body',
                              where='site', allowed=', '.join(
                                  n for n in self.layout.sites + self.layout.bodies[1:] if n)
                              or 'none')
        if base is not None and site in (base.site, base.body):
            return base
        if site in self.layout.sites:
            amap = {'site': site}
        elif site in self.layout.bodies and site != self.layout.bodies[0]:
            amap = {'body': site}
        else:
            raise errors.UnknownName('site or body', site,
                                     [n for n in self.layout.sites + self.layout.bodies[1:]
                                      if n])
        try:
            if base is not None:
                spec = {'command': 'move_to', 'effects': base.effects,
                        'args': {n: {'unit': a.unit, 'min': a.min, 'max': a.max}
                                 for n, a in base.args.items()},
                        'map': dict(amap, axes={a: 'xyz'[i] for a, i in base.axes.items()},
                                    speed=base.speed, path=base.path)}
                act = self.layout.build_action(base.name, spec, f'actions.{base.name}')
                act.aim, act.at, act.then = base.aim, dict(base.at), {}
                return act
            spec = {'command': 'move_to', 'effects': [], 'args': {}, 'map': amap}
            return self.layout.build_action('move_to', spec, 'move_to')
        except ConfigError as exc:
            raise errors.InvalidArgument(f'cannot move {site!r}: {exc}', where='site') from None

    def move_to(self, args=None, *, point=None, site=None, speed=None, aim=None, wait=True,
                timeout=None, path=None):
        """Put the action's site at a point: IK, then a synchronised or Cartesian path.

        ``args`` are the action's arguments in their own units (x, y, z in mm...);
        ``point`` is a target in metres in the world frame, checked against the same limits.
        Returns the result dict (DONE, or STARTED when still moving after ``action_wait``
        or ``timeout`` seconds), or the ``Move`` itself with ``wait=False``.
        """
        return self._move(self.move_action(site), args, point=point, speed=speed, aim=aim,
                          wait=wait, timeout=timeout, path=path)

    def _move(self, act, args=None, *, point=None, speed=None, aim=None, wait=True,
              timeout=None, path=None):
        if not isinstance(wait, (bool, np.bool_)):
            raise errors.InvalidArgument(f'wait takes true or false, got {wait!r}',
                                         where='wait')
        if timeout is not None:
            timeout = finite_number(timeout, 'timeout')
            if timeout < 0:
                raise errors.InvalidArgument('cannot be negative', where='timeout')
        if path not in (None, 'joint', 'cartesian'):
            raise errors.InvalidArgument(f'unknown path {path!r}', where='path',
                                         allowed='joint, cartesian')
        target, speed_ms = limits.check_move(act, args, point, speed)
        aim = act.aim if aim is None else limits.check_aim(aim)
        snap = self.snapshot
        goals = [self._goal_for_joint(j, act) for j in act.joints]
        lower, upper = [], []
        for g in goals:
            ends = [g.to_native(v) for v in (g.min, g.max) if v is not None]
            lo = max([g.native_lo] + ([min(ends)] if g.min is not None else []))
            hi = min([g.native_hi] + ([max(ends)] if g.max is not None else []))
            lower.append(lo)
            upper.append(hi)
        lower, upper = np.array(lower, dtype=float), np.array(upper, dtype=float)
        jids = [self.layout.joints.index(j) for j in act.joints]
        jq = [int(self.model.jnt_qposadr[j]) for j in jids]
        jdof = [int(self.model.jnt_dofadr[j]) for j in jids]
        q_start = np.clip(snap.setpoint[[g.actuator for g in goals]], lower, upper)
        rates = [g.native_rate for g in goals]
        use_path = path or act.path
        tol, aim_tol = self.params['tolerance'], self.params['aim_tolerance']
        with self._ik_lock:
            self._scratch.qpos[:] = snap.qpos
            self._scratch.mocap_pos[:] = snap.mocap_pos
            self._scratch.mocap_quat[:] = snap.mocap_quat
            # Solve tighter than the tolerance, so the servos' own error still fits in it.
            common = dict(site=act.site, body=act.body, aim=aim, joints=act.joints,
                          lower=lower, upper=upper)
            sol = ik.solve(self.model, self._scratch, target, q_init=q_start,
                           tolerance=IK_SHARE * tol, aim_tolerance=IK_SHARE * aim_tol, **common)
            ok = sol.pos_error <= tol and (aim is None or sol.aim_error <= aim_tol)
            if ok and self._self_collides(act, jq, sol.qpos, snap):
                sol = self._collision_free(act, jq, sol, target, lower, upper, snap, tol,
                                           aim_tol, common)
            if not ok:
                what = act.site or act.body
                if sol.pos_error > tol:
                    text = (f'closest miss {sol.pos_error * 1000:.1f} mm, at '
                            f'{np.round(sol.reached, 4).tolist()} m')
                else:
                    text = (f'the position is reachable but the aim misses by '
                            f'{np.rad2deg(sol.aim_error):.1f} deg (tolerance '
                            f'{np.rad2deg(aim_tol):g} deg)')
                raise DeviceError(errors.UNREACHABLE,
                                  f'no joint configuration within limits puts {what} at '
                                  f'{np.round(target, 4).tolist()} m; {text}',
                                  where=act.name, miss=float(sol.pos_error),
                                  reached=sol.reached.tolist(), target=target.tolist(),
                                  aim_error=float(sol.aim_error))
            cart = None
            if use_path == 'cartesian':
                self._scratch.qpos[:] = snap.qpos
                cart = cartesian.straight_line(
                    self.model, self._scratch, target, max_rates=[
                        np.inf if r is None else r for r in rates],
                    q_start=q_start, max_speed=speed_ms, tolerance=act.path_tolerance,
                    aim_tolerance=aim_tol, **common)
                if not cart.success:
                    raise DeviceError(errors.UNREACHABLE, f'no straight line to the target: '
                                      f'{cart.message}', where=act.name,
                                      reached_fraction=float(cart.reached_fraction),
                                      target=target.tolist())
        acts = [g.actuator for g in goals]
        q_goal = np.clip(sol.qpos, lower, upper)
        move = Move(target, ('site', act.site) if act.site else ('body', act.body), act)
        move.actuators = acts
        move.joints_qadr = jq
        move.joints_dof = jdof
        move.aim = aim
        move.then = limits.check_goals(self.layout, act.then) if act.then else {}
        move.q_goal = q_goal
        move.path = use_path
        move.planned = np.asarray(sol.reached, dtype=float)   # where the IK puts the point
        move.planned_miss = float(sol.pos_error)

        def apply(s):
            now = s.data.time
            start = s.setpoint[acts].copy()
            if cart is not None:
                step = self.model.opt.timestep
                times = np.append(np.arange(0.0, cart.duration, step), cart.duration)
                qs = np.array([cart.sample(t) for t in times])
                qs[0] = start     # from where the setpoints are now (q_start is clipped)
                plan = WaypointPlan(acts, times, qs, now)
            else:
                T = duration(q_goal - start, rates)
                if speed_ms:
                    dist = float(np.linalg.norm(target - self._point_pos(snap, move.point)))
                    T = max(T, PEAK * dist / speed_ms)
                plan = MinJerkPlan(acts, start, q_goal, now, T)
            old = self.move
            if old is not None and not old.done():
                old.finish(self._move_result(old, errors.PREEMPTED, False,
                                             'a newer move_to took over'))
            s.add_plan(plan)
            move.plan_end = plan.t_end
            move.duration = plan.t_end - now
            self.move = move
            self._record('move_to', {'action': act.name, 'target_m': target.tolist(),
                                     'speed_m_s': speed_ms, 'path': use_path},
                         {self.layout.actuators[a]: float(v) for a, v in zip(acts, q_goal)},
                         sim_time=now)
        self.stepper.post(apply, wait=True)
        if not wait:
            return move
        limit = self.params['action_wait'] if timeout is None else timeout
        move.wait(limit)
        if move.done():
            return move.result
        return self._move_result(move, errors.STARTED, True,
                                 f'still moving after {limit:g} s; '
                                 f'{self.distance_to_go(move) * 1000:.1f} mm to go')

    def _self_collides(self, act, jq, q, snap):
        """Whether the arm touches itself at ``q`` where it does not now (scratch data).

        Contacts count only between two bodies of the moving point's own tree; touching
        the table or an object is what a move_to often means to do.
        """
        m, d = self.model, self._scratch
        root = m.body_rootid[m.site_bodyid[self.layout.sites.index(act.site)] if act.site
                             else self.layout.bodies.index(act.body)]

        def pairs():
            mujoco.mj_kinematics(m, d)
            mujoco.mj_collision(m, d)
            out = set()
            for c in d.contact[:d.ncon]:
                b1, b2 = m.geom_bodyid[c.geom1], m.geom_bodyid[c.geom2]
                if m.body_rootid[b1] == root and m.body_rootid[b2] == root:
                    out.add((min(b1, b2), max(b1, b2)))
            return out
        d.qpos[:] = snap.qpos
        now = pairs()
        d.qpos[jq] = q
        return bool(pairs() - now)

    def _collision_free(self, act, jq, sol, target, lower, upper, snap, tol, aim_tol, common):
        """Seeded retries from other starting configurations for an answer where the arm
        does not run into itself; the first answer stands when none is found."""
        rng = np.random.default_rng(0)
        lo = np.where(np.isfinite(lower), lower, -np.pi)
        hi = np.where(np.isfinite(upper), upper, np.pi)
        for k in range(COLLISION_RETRIES):
            self._scratch.qpos[:] = snap.qpos
            alt = ik.solve(self.model, self._scratch, target, q_init=rng.uniform(lo, hi),
                           seed=k + 1, tolerance=IK_SHARE * tol,
                           aim_tolerance=IK_SHARE * aim_tol, **common)
            if alt.pos_error <= tol and (common['aim'] is None or alt.aim_error <= aim_tol) \
                    and not self._self_collides(act, jq, alt.qpos, snap):
                return alt
        return sol

    def _goal_for_joint(self, joint, act):
        jid = self.layout.joints.index(joint)
        for g in self.layout.goals.values():
            if g.joint == jid:
                return g
        raise ConfigError(f'joint {joint!r} has no goal channel', where=f'actions.{act.name}')

    def _point_pos(self, snap, point):
        kind, name = point
        if kind == 'site':
            return snap.site_xpos[self.layout.sites.index(name)].copy()
        return snap.xpos[self.layout.bodies.index(name)].copy()

    def _point_mat(self, snap, point):
        kind, name = point
        if kind == 'site':
            return snap.site_xmat[self.layout.sites.index(name)].reshape(3, 3)
        mat = np.empty(9)
        mujoco.mju_quat2Mat(mat, snap.xquat[self.layout.bodies.index(name)])
        return mat.reshape(3, 3)

    def _aim_error(self, snap, move):
        if move.aim is None:
            return None
        axis, toward = (np.asarray(v, dtype=float) for v in move.aim)
        world = self._point_mat(snap, move.point) @ (axis / np.linalg.norm(axis))
        toward = toward / np.linalg.norm(toward)
        return float(np.arctan2(np.linalg.norm(np.cross(world, toward)), world @ toward))

    def _move_result(self, move, code, success, message, snap=None):
        snap = snap or self.snapshot
        reached = self._point_pos(snap, move.point)
        out = {'success': bool(success), 'code': code, 'message': message,
               'reached': reached.tolist(),
               'miss': float(np.linalg.norm(reached - move.target)),
               'target': move.target.tolist()}
        aim_error = self._aim_error(snap, move)
        if aim_error is not None:
            out['aim_error'] = aim_error
        return out

    def distance_to_go(self, move=None):
        move = move or self.move
        if move is None:
            return 0.0
        return float(np.linalg.norm(self._point_pos(self.snapshot, move.point) - move.target))

    def _after_chunk(self, stepper):
        """Stepper thread: finish the move once its path ended and the point settled."""
        move = self.move
        if move is None or move.done() or move.plan_end is None:
            return
        snap = stepper.snapshot
        if snap.time < move.plan_end:
            return
        tol, aim_tol = self.params['tolerance'], self.params['aim_tolerance']
        miss = float(np.linalg.norm(self._point_pos(snap, move.point) - move.target))
        aim_error = self._aim_error(snap, move)
        arrived = miss <= tol and (aim_error is None or aim_error <= aim_tol)
        # Settled: the joints are still and the miss stopped shrinking (by 2 % of the
        # tolerance) for SETTLE_QUIET s. Stillness alone would end an overdamped servo's
        # slow creep too early; no progress alone, a long swing that first moves away.
        late = snap.time - move.plan_end
        if move.best_miss is None or miss < move.best_miss - 0.02 * tol:
            move.best_miss, move.best_time = miss, snap.time
        speed = float(np.abs(snap.qvel[move.joints_dof]).max()) if move.joints_dof else 0.0
        settled = speed < 1e-2 and snap.time - move.best_time > SETTLE_QUIET
        if not (arrived or late > SETTLE_LIMIT or settled):
            return
        if move.then:
            self._apply_then(stepper, move)
        if arrived:
            message = 'arrived'
        elif miss > tol:
            message = (f'path ended {miss * 1000:.2f} mm from the target (tolerance '
                       f'{tol * 1000:g} mm)')
        else:
            message = (f'arrived, but aimed {np.rad2deg(aim_error):.1f} deg off (tolerance '
                       f'{np.rad2deg(aim_tol):g} deg)')
        move.finish(self._move_result(move, errors.DONE, arrived, message, snap))

    def _apply_then(self, stepper, move):
        now = stepper.data.time
        for name, native in move.then.items():
            g = self.layout.goals[name]
            start = stepper.setpoint[g.actuator]
            stepper.add_plan(MinJerkPlan([g.actuator], [start], [native], now,
                                         duration([native - start], [g.native_rate])))
        self._record('then', {'action': move.action.name, 'then': dict(move.action.then)},
                     {self.layout.goals[n].actuator_name: float(v)
                      for n, v in move.then.items()}, sim_time=now)

    # --- actions ----------------------------------------------------------------------------
    def run_action(self, name, args=None, **kw):
        """Run a device-file action by name: ``hold``, or a move_to with its arguments."""
        act = self.action(name)
        if act.command == 'hold':
            if args:
                raise errors.InvalidArgument('hold takes no arguments', where=name)
            return self.hold()
        return self._move(act, args, **kw)

    def hold(self):
        """End every move and freeze every setpoint (velocity servos stop); always accepted."""
        def apply(s):
            s.hold_now()
            move = self.move
            if move is not None and not move.done():
                move.finish(self._move_result(move, errors.STOPPED, False, 'held'))
            return s.setpoint.copy()
        sp = self.stepper.post(apply, wait=True, urgent=True)   # even inside a step(n)
        self._record('hold', {}, self._native_all(sp))
        return {'success': True, 'code': errors.DONE, 'message': 'holding'}

    def stop(self):
        """What the device file's safe_state names (hold unless it says otherwise).

        Everything is held first; a safe-state move then starts (not waited for). If that
        move cannot start, the device stays held and the result says why.
        """
        action = (self.spec or {}).get('safe_state', {}).get('action', 'hold')
        held = self.hold()
        if action == 'hold':
            return held
        try:
            self._move(self.action(action), {}, wait=False)
        except DeviceError as exc:
            return dict(held, message=f'holding: safe-state action {action!r} could not '
                        f'start ({exc})')
        return {'success': True, 'code': errors.STARTED,
                'message': f'safe-state action {action!r} started'}

    def _on_unstable(self, stepper):
        move = self.move
        if move is not None and not move.done():
            move.finish(self._move_result(move, errors.UNSTABLE, False,
                                          'the simulation went unstable; reset and held',
                                          stepper.snapshot))
        self.events.add({'time': time.time(), 'sim_time': float(stepper.data.time),
                         'code': errors.UNSTABLE,
                         'message': 'simulation unstable (NaN or divergence): reset to '
                         'the keyframe and holding'})
        self._record('unstable', {}, self._native_all(stepper.setpoint),
                     sim_time=stepper.data.time)
        action = (self.spec or {}).get('safe_state', {}).get('action', 'hold')
        if action != 'hold':
            # Already held at the keyframe; the safe-state move starts from a caller thread
            # (this is the stepper's, which must not wait on itself).
            threading.Thread(target=self._safe_state_move, args=(action,), daemon=True,
                             name='mujoco_hal_ros-safe-state').start()

    def _safe_state_move(self, action):
        try:
            self._move(self.action(action), {}, wait=False)
        except DeviceError as exc:
            self.events.add({'time': time.time(), 'sim_time': float(self.snapshot.time),
                             'code': exc.code, 'message': f'safe-state action {action!r} '
                             f'could not start after the instability: {exc}; holding'})

    def _on_error(self, stepper, exc):
        move = self.move
        if move is not None and not move.done():
            move.finish(self._move_result(move, errors.INTERNAL_ERROR, False,
                                          f'stepper error: {exc}; holding'))
        self.events.add({'time': time.time(), 'sim_time': float(stepper.data.time),
                         'code': errors.INTERNAL_ERROR,
                         'message': f'stepper error {type(exc).__name__}: {exc}; holding'})

    # --- run-time control -------------------------------------------------------------------
    def pause(self, paused=True):
        if not isinstance(paused, (bool, np.bool_)):
            raise errors.InvalidArgument(
                f'pause takes true or false, got {errors.shorten(paused)}', where='pause')
        self.stepper.pause(bool(paused))
        self._record('pause', {'paused': bool(paused)}, {})

    def step(self, n=1, wait=True):
        """Advance ``n`` steps while paused (NOT_PAUSED otherwise); returns the sim time, or
        with ``wait=False`` a ``concurrent.futures.Future`` of it. A hold during the steps
        takes effect at once; the steps go on from the held setpoints."""
        n = limits.step_count(n)
        return self.stepper.step(n, wait=wait)

    def reset(self):
        """Back to the keyframe and hold there; simulated time keeps running forward."""
        def on_reset(s):
            move = self.move
            if move is not None and not move.done():
                move.finish(self._move_result(move, errors.STOPPED, False, 'reset',
                                              s._snap()))
            return s.setpoint.copy()
        sp = self.stepper.reset(on_reset)
        self._record('reset', {'keyframe': self.keyframe_name}, self._native_all(sp))

    def set_real_time_factor(self, rtf):
        rtf = limits.real_time_factor(rtf)
        self.stepper.set_real_time_factor(rtf)
        self._record('real_time_factor', {'real_time_factor': rtf}, {})

    # --- cameras ----------------------------------------------------------------------------
    def _image(self, camera, width, height):
        """(camera, width, height): an image channel's own, or a camera of the model's."""
        chan = next((i for i in self.layout.images if i.name == camera), None)
        if chan is not None and camera not in self.layout.cameras:
            camera = chan.camera
        if chan is not None:
            width = chan.width if width is None else width
            height = chan.height if height is None else height
        return camera, 640 if width is None else width, 480 if height is None else height

    def renderer(self, camera, width=None, height=None, depth=False, background=False):
        """A camera renderer owned by the device (closed with it). ``camera`` is a camera
        of the model or an image channel (whose size is then the default); ``background``
        as in ``CameraRenderer``."""
        from ..render.camera import CameraRenderer
        camera, width, height = self._image(camera, width, height)
        key = (camera, width, height, bool(depth), bool(background))
        with self._render_lock:
            if self.closed:
                raise errors.ClosedError('the device')
            if key not in self._renderers:
                self._renderers[key] = CameraRenderer(self.model, camera, width, height,
                                                      depth=depth, background=background)
            return self._renderers[key]

    def render_data(self, snap=None):
        """A private MjData posed at the latest snapshot, for rendering off the stepper
        (shared by every caller: hold the device's render lock, as ``render`` does)."""
        snap = snap or self.snapshot
        if self._render_data is None:
            self._render_data = mujoco.MjData(self.model)
        d = self._render_data
        d.qpos[:], d.qvel[:] = snap.qpos, snap.qvel
        d.mocap_pos[:], d.mocap_quat[:] = snap.mocap_pos, snap.mocap_quat
        d.act[:] = snap.act
        d.time = snap.time
        mujoco.mj_forward(self.model, d)
        return d

    def render(self, camera, width=None, height=None, png=False):
        """RGB array (or PNG bytes) of a camera or image channel at the latest snapshot."""
        r = self.renderer(camera, width, height)
        with self._render_lock:
            d = self.render_data()
            return r.render_png(d) if png else r.render_rgb(d)

    # --- audit ------------------------------------------------------------------------------
    def _record(self, kind, request, native, sim_time=None):
        if sim_time is None:
            snap = getattr(self.stepper, 'snapshot', None) if hasattr(self, 'stepper') \
                else None
            sim_time = snap.time if snap is not None else self.data.time
        self.audit.add({'wall': time.time(), 'sim_time': float(sim_time), 'kind': kind,
                        'request': request, 'native': native})

    # --- lifetime ---------------------------------------------------------------------------
    def close(self):
        if self.stepper.closed:
            return
        self.stepper.close()
        with self._render_lock:
            for r in self._renderers.values():
                r.close()
            self._renderers.clear()

    @property
    def closed(self):
        return self.stepper.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def device_file_load(path):
    return devfile.load(path)


def open_device(device_file=None, model=None, **kw):
    """Connect: load the model, reset to the keyframe, check every map, start stepping."""
    return Device(device_file, model=model, **kw)
