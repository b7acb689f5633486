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

from . import cartesian, device_file as devfile, errors, ik, kernel
from .channels import Action, Layout
from .checks import finite_number, known_name
from .errors import ConfigError, DeviceError, ModelError
from .stepper import Stepper
from .trajectory import MinJerkPlan, WaypointPlan, duration
from .units import parse_quantity

DEFAULTS = {'action_wait': 8.0, 'tolerance': 1e-3, 'aim_tolerance': np.deg2rad(3.0)}
IMPEDANCE_HZ = 4.0   # bandwidth of the joint loop that makes torque motors hold a goal


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


class Move:
    """A move in flight: wait for it, poll it, or read its result."""

    def __init__(self, target, point, action):
        self.target = np.asarray(target, dtype=float)
        self.point = point          # ('site'|'body', id)
        self.action = action
        self.result = None
        self.plan_end = None
        self.accepted_wall = time.monotonic()
        self._done = threading.Event()

    def finish(self, result):
        if self.result is None:
            self.result = result
            self._done.set()

    def done(self):
        return self._done.is_set()

    def wait(self, timeout=None):
        return self._done.wait(timeout)


class Device:
    """A MuJoCo model as a device: goals, move_to, hold, reads and cameras."""

    def __init__(self, device_file=None, *, model=None, keyframe=None, real_time_factor=None,
                 start_paused=False, environ=None, spec=None):
        environ = os.environ if environ is None else environ
        if spec is None and device_file:
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
        if 'timestep' in connect:
            dt = parse_quantity(connect['timestep'], 'time', 'connect.timestep')
            if dt <= 0:
                raise ConfigError('must be above zero', where='connect.timestep')
            self.model.opt.timestep = dt
        self.layout = Layout(self.model, spec)
        keyframe = keyframe if keyframe is not None else connect.get('keyframe')
        self.keyframe = self._keyframe_id(keyframe)
        rtf = connect.get('real_time_factor', 1.0) if real_time_factor is None \
            else real_time_factor
        rtf = kernel.real_time_factor(rtf)
        self.data = mujoco.MjData(self.model)
        if self.keyframe is not None:
            mujoco.mj_resetDataKeyframe(self.model, self.data, self.keyframe)
        mujoco.mj_forward(self.model, self.data)
        self._scratch = mujoco.MjData(self.model)     # IK's private state
        self._ik_lock = threading.Lock()
        self.audit = collections.deque(maxlen=2000)
        self._audit_lock = threading.Lock()
        self.move = None
        self.events = collections.deque(maxlen=200)
        drives = [(self.layout.drive_of(a), int(self.model.jnt_qposadr[
            self.model.actuator_trnid[a, 0]]) if self.model.actuator_trntype[a] == 0 else -1)
            for a in range(self.model.nu)]
        self.stepper = Stepper(self.model, self.data, drives=drives,
                               impedance=self._impedance_loop(),
                               real_time_factor=rtf, start_paused=start_paused,
                               keyframe=self.keyframe, on_chunk=self._after_chunk,
                               on_unstable=self._on_unstable)
        self.stepper.post(lambda s: setattr(s, 'setpoint', s.initial_setpoint()), wait=True)
        self._renderers = {}
        self._render_data = None
        self._render_lock = threading.Lock()
        self._record('connect', {'model': self.model_path, 'keyframe': keyframe}, {})

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
        d = mujoco.MjData(m)
        mujoco.mj_forward(m, d)
        inertia = np.array([d.qM[m.dof_Madr[v]] for v in dofs]) + m.dof_armature[dofs]
        w = 2 * np.pi * IMPEDANCE_HZ
        kp = inertia * w * w
        kd = 2.0 * inertia * w + m.dof_damping[dofs] * 0.0
        gear = m.actuator_gear[acts, 0]
        return (np.array(acts), dofs, kp, kd, gear, qadrs)

    # --- reading ----------------------------------------------------------------------------
    @property
    def snapshot(self):
        return self.stepper.snapshot

    def describe(self):
        desc = self.layout.describe()
        stem = os.path.splitext(os.path.basename(self.model_path))[0]
        desc.update({'device': self.spec['device'] if self.spec else f'{stem} (simulated)',
                     'id': self.spec['id'] if self.spec else stem,
                     'model': self.model_path, 'timestep': self.model.opt.timestep,
                     'keyframe': self.keyframe, 'hazard': self.spec['hazard'] if self.spec
                     else 'none', 'safe_state': (self.spec or {}).get(
                         'safe_state', {'action': 'hold'}), 'params': dict(self.params)})
        return desc

    def read(self, names=None, snapshot=None):
        """Scalar read channels in their own units, from one consistent snapshot."""
        snap = snapshot or self.snapshot
        chans = self.layout.reads
        if names is not None:
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

    def goals(self):
        """Each goal channel's current setpoint in its own unit."""
        sp = self.snapshot.setpoint
        return {g.name: float(g.to_unit(sp[g.actuator])) for g in self.layout.goals.values()}

    def health(self):
        h = self.stepper.health()
        h['moving'] = self.snapshot.moving
        return h

    # --- goals ------------------------------------------------------------------------------
    def set_goals(self, goals):
        """Start min-jerk paths to several goals at once; all-or-nothing."""
        targets = kernel.check_goals(self.layout, goals)
        native = {self.layout.goals[n].actuator_name: v for n, v in targets.items()}
        acts = [self.layout.goals[n].actuator for n in targets]
        values = np.array([targets[n] for n in targets])
        rates = [self.layout.goals[n].native_rate for n in targets]

        def apply(s):
            now = s.data.time
            start = s.setpoint[acts].copy()
            for plan in s.plans:
                hit = np.isin(plan.actuators, acts)
                if hit.any():
                    cur = plan.sample([now])[0]
                    for a, v in zip(plan.actuators[hit], cur[hit]):
                        start[acts.index(a)] = v
            plans = []
            for a, st, en, r in zip(acts, start, values, rates):
                T = duration([en - st], [r])
                plans.append(MinJerkPlan([a], [st], [en], now, T))
            for p in plans:
                s.add_plan(p)
            self._preempt_if_touched(acts)
        self.stepper.post(apply, wait=True)
        self._record('goals', dict(goals), native)
        return {'code': errors.STARTED, 'targets': targets}

    def _preempt_if_touched(self, acts):
        move = self.move
        if move is not None and not move.done():
            touched = set(acts) & set(move.actuators)
            if touched:
                move.finish(self._move_result(move, errors.PREEMPTED, False,
                                              'a newer goal took over its joints'))

    # --- move_to ----------------------------------------------------------------------------
    def action(self, name):
        return self.layout.actions[known_name(name, self.layout.actions, 'action')]

    def move_action(self, site=None):
        """The device file's move_to action, or one built for ``site`` (a site or body)."""
        base = next((a for a in self.layout.actions.values() if a.command == 'move_to'), None)
        if site in (None, '') and base is not None:
            return base
        if site in (None, ''):
            raise DeviceError(errors.INVALID_ARGUMENT,
                              'this device has no move_to action; name a site or body',
                              allowed=', '.join(n for n in self.layout.sites if n) or 'none')
        if site in self.layout.sites:
            amap = {'site': site}
        elif site in self.layout.bodies:
            amap = {'body': site}
        else:
            raise errors.UnknownName('site or body', site,
                                     [n for n in self.layout.sites + self.layout.bodies if n])
        if base is not None:
            spec = {'command': 'move_to', 'effects': base.effects,
                    'args': {n: {'unit': a.unit, 'min': a.min, 'max': a.max}
                             for n, a in base.args.items()},
                    'map': dict(amap, axes={a: 'xyz'[i] for a, i in base.axes.items()},
                                speed=base.speed, path=base.path)}
            act = self.layout._action(base.name, spec, f'actions.{base.name}')
            act.aim, act.at, act.then = base.aim, base.at, {}
            return act
        spec = {'command': 'move_to', 'effects': [], 'args': {}, 'map': amap}
        return self.layout._action('move_to', spec, 'move_to')

    def move_to(self, args=None, *, point=None, site=None, speed=None, aim=None, wait=True,
                timeout=None, path=None):
        """Put the action's site at a point: IK, then a synchronised or Cartesian path.

        ``args`` are the action's arguments in their own units (x, y, z in mm...);
        ``point`` is a target in metres in the world frame, checked against the same limits.
        """
        act = self.move_action(site)
        target, speed_ms = kernel.check_move(act, args, point, speed)
        aim = act.aim if aim is None else kernel.check_aim(aim)
        snap = self.snapshot
        goals = [self._goal_for_joint(j, act) for j in act.joints]
        lower = np.array([g.to_native(min(g.min, g.max)) if g.min is not None
                          else g.native_lo for g in goals])
        upper = np.array([g.to_native(max(g.min, g.max)) if g.max is not None
                          else g.native_hi for g in goals])
        lower, upper = np.minimum(lower, upper), np.maximum(lower, upper)
        jq = [int(self.model.jnt_qposadr[self.layout.joints.index(j)]) for j in act.joints]
        q_now = snap.qpos[jq]
        q_start = np.clip(snap.setpoint[[g.actuator for g in goals]], lower, upper)
        rates = [g.native_rate for g in goals]
        use_path = path or act.path
        with self._ik_lock:
            self._scratch.qpos[:] = snap.qpos
            self._scratch.mocap_pos[:] = snap.mocap_pos
            self._scratch.mocap_quat[:] = snap.mocap_quat
            common = dict(site=act.site, body=act.body, aim=None if aim is None else aim,
                          joints=act.joints, lower=lower, upper=upper,
                          tolerance=self.params['tolerance'],
                          aim_tolerance=self.params['aim_tolerance'])
            sol = ik.solve(self.model, self._scratch, target, q_init=q_start, **common)
            if not sol.success:
                raise DeviceError(errors.UNREACHABLE,
                                  f'no joint configuration within limits puts '
                                  f'{act.site or act.body} at {np.round(target, 4).tolist()} m;'
                                  f' closest miss {sol.pos_error * 1000:.1f} mm at '
                                  f'{np.round(sol.reached, 4).tolist()}',
                                  miss=float(sol.pos_error), reached=sol.reached.tolist(),
                                  aim_error=float(sol.aim_error))
            cart = None
            if use_path == 'cartesian':
                self._scratch.qpos[:] = snap.qpos
                self._scratch.qpos[jq] = q_start
                cart = cartesian.straight_line(
                    self.model, self._scratch, target, max_rates=[
                        np.inf if r is None else r for r in rates],
                    q_start=q_start, max_speed=speed_ms,
                    **{k: v for k, v in common.items()})
                if not cart.success:
                    raise DeviceError(errors.UNREACHABLE, f'no straight line to the target: '
                                      f'{cart.message}', reached_fraction=cart.reached_fraction)
        acts = [g.actuator for g in goals]
        q_goal = sol.qpos
        move = Move(target, ('site', act.site) if act.site else ('body', act.body), act)
        move.actuators = acts
        move.joints_qadr = jq
        move.then = kernel.check_goals(self.layout, act.then) if act.then else {}
        move.q_goal = q_goal
        self._record('move_to', {'action': act.name, 'target_m': target.tolist(),
                                 'speed_m_s': speed_ms, 'path': use_path},
                     {self.layout.actuators[a]: float(v) for a, v in zip(acts, q_goal)})

        def apply(s):
            now = s.data.time
            start = s.setpoint[acts].copy()
            for plan in s.plans:
                hit = np.isin(plan.actuators, acts)
                if hit.any():
                    cur = plan.sample([now])[0]
                    for a, v in zip(plan.actuators[hit], cur[hit]):
                        start[acts.index(a)] = v
            if cart is not None:
                times = np.arange(0.0, cart.duration + 0.004, 0.004)
                qs = np.array([cart.sample(t) for t in times])
                plan = WaypointPlan(acts, times, qs, now)
            else:
                T = duration(q_goal - start, rates)
                if speed_ms:
                    T = max(T, 1.875 * float(np.linalg.norm(
                        target - self._point_pos(snap, move.point))) / speed_ms)
                plan = MinJerkPlan(acts, start, q_goal, now, T)
            old = self.move
            if old is not None and not old.done():
                old.finish(self._move_result(old, errors.PREEMPTED, False,
                                             'a newer move_to took over'))
            s.add_plan(plan)
            move.plan_end = plan.t_end
            move.start_pos = self._point_pos(s.snapshot, move.point)
            self.move = move
        self.stepper.post(apply, wait=True)
        if not wait:
            return move
        move.wait(self.params['action_wait'] if timeout is None else timeout)
        if move.done():
            return move.result
        return self._move_result(move, errors.STARTED, True,
                                 f'still moving after {self.params["action_wait"]:g} s')

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

    def _move_result(self, move, code, success, message):
        snap = self.snapshot
        reached = self._point_pos(snap, move.point)
        return {'success': success, 'code': code, 'message': message,
                'reached': reached.tolist(),
                'miss': float(np.linalg.norm(reached - move.target)),
                'target': move.target.tolist()}

    def distance_to_go(self, move=None):
        move = move or self.move
        if move is None:
            return 0.0
        return float(np.linalg.norm(self._point_pos(self.snapshot, move.point) - move.target))

    def _after_chunk(self, stepper):
        """Stepper thread: finish the move once its path ended and the site settled."""
        move = self.move
        if move is None or move.done() or move.plan_end is None:
            return
        snap = stepper.snapshot
        if snap.time < move.plan_end:
            return
        miss = float(np.linalg.norm(self._point_pos(snap, move.point) - move.target))
        speed = float(np.abs(snap.qvel).max()) if snap.qvel.size else 0.0
        settled = snap.time > move.plan_end + 2.0
        if miss <= self.params['tolerance'] or settled or (speed < 1e-3 and
                                                          snap.time > move.plan_end + 0.2):
            if move.then:
                self._apply_then(stepper, move)
            ok = miss <= self.params['tolerance']
            move.finish(self._move_result(
                move, errors.DONE, ok, 'arrived' if ok else
                f'path ended {miss * 1000:.2f} mm from the target (tolerance '
                f'{self.params["tolerance"] * 1000:g} mm)'))

    def _apply_then(self, stepper, move):
        now = stepper.data.time
        for name, native in move.then.items():
            g = self.layout.goals[name]
            start = stepper.setpoint[g.actuator]
            stepper.add_plan(MinJerkPlan([g.actuator], [start], [native], now,
                                         duration([native - start], [g.native_rate])))

    # --- actions ----------------------------------------------------------------------------
    def run_action(self, name, args=None, **kw):
        act = self.action(name)
        if act.command == 'hold':
            return self.hold()
        return self.move_to(args or {}, site=None if act is self.move_action() else act.site,
                            **kw)

    def hold(self):
        """End every move and freeze every setpoint; always accepted."""
        def apply(s):
            s.hold_now()
            move = self.move
            if move is not None and not move.done():
                move.finish(self._move_result(move, errors.STOPPED, False, 'held'))
            return s.setpoint.copy()
        sp = self.stepper.post(apply, wait=True)
        self._record('hold', {}, {self.layout.actuators[a]: float(v) for a, v in enumerate(sp)})
        return {'success': True, 'code': errors.DONE, 'message': 'holding'}

    def stop(self):
        """What the device file's safe_state names (hold unless it says otherwise)."""
        action = (self.spec or {}).get('safe_state', {}).get('action', 'hold')
        return self.hold() if action == 'hold' else self.run_action(action)

    def _on_unstable(self, stepper):
        move = self.move
        if move is not None and not move.done():
            move.finish(self._move_result(move, errors.UNSTABLE, False,
                                          'the simulation went unstable; reset and held'))
        self.events.append({'time': time.time(), 'code': errors.UNSTABLE,
                            'message': 'simulation unstable (NaN or divergence): reset to '
                            'the keyframe and holding'})
        self._record('unstable', {}, {})

    # --- run-time control -------------------------------------------------------------------
    def pause(self, paused=True):
        if not isinstance(paused, (bool, np.bool_)):
            raise errors.InvalidArgument(f'pause takes true or false, got {paused!r}')
        self.stepper.pause(bool(paused))

    def step(self, n=1):
        n = kernel.step_count(n)
        return self.stepper.step(n)

    def reset(self):
        def on_reset(s):
            move = self.move
            if move is not None and not move.done():
                move.finish(self._move_result(move, errors.STOPPED, False, 'reset'))
        self.stepper.reset(on_reset)
        self._record('reset', {}, {})

    def set_real_time_factor(self, rtf):
        self.stepper.set_real_time_factor(kernel.real_time_factor(rtf))

    # --- cameras ----------------------------------------------------------------------------
    def renderer(self, camera, width=640, height=480, depth=False):
        """A camera renderer owned by the device (closed with it)."""
        from .camera import CameraRenderer
        key = (camera, width, height, depth)
        with self._render_lock:
            if key not in self._renderers:
                self._renderers[key] = CameraRenderer(self.model, camera, width, height,
                                                      depth=depth)
            return self._renderers[key]

    def render_data(self, snap=None):
        """A private MjData posed at the latest snapshot, for rendering off the stepper."""
        snap = snap or self.snapshot
        if self._render_data is None:
            self._render_data = mujoco.MjData(self.model)
        d = self._render_data
        d.qpos[:], d.qvel[:] = snap.qpos, snap.qvel
        d.mocap_pos[:], d.mocap_quat[:] = snap.mocap_pos, snap.mocap_quat
        d.time = snap.time
        mujoco.mj_forward(self.model, d)
        return d

    def render(self, camera, width=640, height=480, png=False):
        r = self.renderer(camera, width, height)
        with self._render_lock:
            d = self.render_data()
            return r.render_png(d) if png else r.render_rgb(d)

    # --- audit ------------------------------------------------------------------------------
    def _record(self, kind, request, native):
        with self._audit_lock:
            self.audit.append({'wall': time.time(), 'sim_time': float(self.data.time),
                               'kind': kind, 'request': request, 'native': native})

    # --- lifetime ---------------------------------------------------------------------------
    def close(self):
        if self.stepper.closed:
            return
        self.stepper.close()
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
