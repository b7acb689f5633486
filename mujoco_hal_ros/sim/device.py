"""The simulated device: a MuJoCo model behind the device file's channels and limits.

``Device`` is what a driver node talks to. Every request is checked in the caller's thread
against the limits kernel and answered with a structured error before anything is posted
to the stepper, so a refused request changes nothing; accepted ones become setpoint paths
that the stepper thread follows in real time. The device wires the pieces together and
owns none of their logic: the channels and limits (``config``), the move_to pipeline
(``motion.move``), the physics thread (``Stepper``) and the render state.
"""

import collections
import copy
import logging
import os
import threading
import time

import mujoco
import numpy as np

from ..config import device_file as devfile, effort, limits
from .. import errors
from ..config.channels import Layout
from ..checks import finite_number, finite_vector, known_name
from ..errors import ConfigError, DeviceError, ModelError
from ..motion import move as moves
from ..motion.move import Move  # noqa: F401 - importable from here, as it always was
from ..motion.trajectory import MinJerkPlan, duration
from ..config.units import parse_quantity
from . import names
from ..sensors import catalog, settings as sensor_settings, wrench
from .render_state import RenderState
from ..world import bounds, pixels as world_pixels, snapshots as world_snapshots, teleport
from ..world import scene as scene_edit
from ..world.scene import Scene
from ..world.world import World
from .stepper import HoldTorque, Impedance, Stepper, VelocityLoop

DEFAULTS = {'action_wait': 8.0, 'tolerance': 1e-3, 'aim_tolerance': np.deg2rad(3.0)}
# The joint loop that makes torque motors hold a goal, as a drive's position mode does: its
# bandwidth, and at most this many radians of it per timestep (it runs once a step).
IMPEDANCE_HZ = 50.0
IMPEDANCE_STEP = 0.5
LOG = logging.getLogger('mujoco_hal_ros.device')


def _implicit_damping(model):
    """Whether the integrator solves joint damping implicitly (1.0) or not (0.0): Euler
    (unless its damping is disabled) and the implicit integrators do, RK4 does not."""
    integ = mujoco.mjtIntegrator(model.opt.integrator)
    if integ == mujoco.mjtIntegrator.mjINT_EULER:
        return 0.0 if model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_EULERDAMP else 1.0
    return 0.0 if integ == mujoco.mjtIntegrator.mjINT_RK4 else 1.0


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


def _builtin_arm():
    """(device file, model) of the built-in bench arm, or ConfigError saying what to pass."""
    from ..menagerie import bench_arm_device_file, bench_arm_path
    device_file, model = bench_arm_device_file(), bench_arm_path()
    if not device_file or not model or not os.path.exists(model):
        raise ConfigError('the built-in bench arm (config/bench_arm.yaml, models/bench_arm.xml)'
                          ' was not found in the source tree or the mujoco_hal_ros share '
                          'directory; source install/setup.bash, or pass a device file or '
                          'model=', where='device')
    return device_file, model


class Device:
    """A MuJoCo model as a device: goals, move_to, hold, reads and cameras."""

    def __init__(self, device_file=None, *, model=None, keyframe=None, real_time_factor=None,
                 start_paused=False, environ=None, spec=None, gravity_compensation=None,
                 move_tolerance=None):
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
        if spec is None and device_file is None and not model:
            device_file, model = _builtin_arm()    # as sim_node does with no parameters
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
        if move_tolerance is not None:
            self.params['tolerance'] = limits.tolerance(move_tolerance, 'move_tolerance')
        if 'timestep' in connect:
            dt = parse_quantity(connect['timestep'], 'time', 'connect.timestep')
            if not dt > 0:
                raise ConfigError('must be above zero', where='connect.timestep')
            self.model.opt.timestep = dt
        self.layout = Layout(self.model, spec)
        if gravity_compensation is None:
            gravity_compensation = connect.get('gravity_compensation', False)
        if not isinstance(gravity_compensation, (bool, np.bool_)):
            raise errors.InvalidArgument(f'gravity_compensation takes true or false, got '
                                         f'{gravity_compensation!r}',
                                         where='gravity_compensation')
        self.gravcomp_bodies = []
        if gravity_compensation:
            self.gravcomp_bodies = self._servo_gravcomp()
        keyframe = keyframe if keyframe is not None else connect.get('keyframe')
        if keyframe is None and spec is None:
            keyframe = self._default_keyframe()
        self.keyframe = self._keyframe_id(keyframe)
        self.keyframe_name = keyframe if self.keyframe is not None else None
        self._log_start(gravity_compensation)
        rtf = connect.get('real_time_factor', 1.0) if real_time_factor is None \
            else real_time_factor
        rtf = limits.real_time_factor(rtf)
        self.data = mujoco.MjData(self.model)
        if self.keyframe is not None:
            mujoco.mj_resetDataKeyframe(self.model, self.data, self.keyframe)
        mujoco.mj_forward(self.model, self.data)
        if not (np.isfinite(self.data.qpos).all() and np.isfinite(self.data.qacc).all()):
            raise ModelError('the model is not finite at its start pose', where='model')
        self._planner = moves.Planner(self.model, self.layout)   # IK's private state
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
                               keyframe=self.keyframe, hold_torque=self._hold_torque(),
                               velocity_loop=self._velocity_loop(),
                               on_chunk=self._after_chunk,
                               on_unstable=self._on_unstable, on_error=self._on_error)
        try:
            sp = self.stepper.post(lambda s: s.hold_pose(), wait=True)
        except BaseException:
            self.stepper.close()
            raise
        self._renderers = {}
        self._renderers_lock = threading.Lock()
        try:
            self.sensor_groups()           # a device file naming no such sensor stops here
            self._lidars = self._lidar_settings()
        except BaseException:
            self.stepper.close()
            raise
        self.world = World(self.model)
        self._generation = self.world.snapshots.generation
        self._render_states = {self._generation: RenderState(self.model)}   # by generation
        self._retired = []            # renderers of replaced models: replace_model closes them
        self._scene_spec = None       # the Scene edits start from, parsed on the first edit
        self._spawned = {}            # entity name -> its bodies
        self._edit_lock = threading.RLock()   # one scene edit at a time, start to end
        self._start_path = self.model_path
        self._file_spec = self.spec   # a loaded world uses the device file if it fits
        self._gravcomp_on = bool(gravity_compensation)
        # Untrusted models (scene edits from a ROS peer) are read in a capped process first
        # (world.sandbox); None: this process reads them itself (a trusted Python caller).
        self.sandbox = None
        self.record('connect', {'model': self.model_path, 'keyframe': keyframe},
                    self._native_all(sp))

    def _native_all(self, setpoint):
        return {self.layout.actuators[a] or str(a): float(v) for a, v in enumerate(setpoint)}

    # --- set-up helpers ---------------------------------------------------------------------
    def _keyframe_id(self, name):
        if name is None or name == '':
            return None
        if isinstance(name, (int, np.integer)) and not isinstance(name, bool) \
                and 0 <= name < self.model.nkey:
            return int(name)     # an unnamed first keyframe
        names = [mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_KEY, i)
                 for i in range(self.model.nkey)]
        if name not in names:
            raise ConfigError(f'the model has no keyframe {name!r}', where='connect.keyframe',
                              allowed=', '.join(n for n in names if n) or 'none')
        return names.index(name)

    def _default_keyframe(self):
        """Zero-config starts where the model's author posed it: ``home``, else the first
        keyframe (a model at qpos0 may sit in its floor or at its joint limits)."""
        names = [mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_KEY, i)
                 for i in range(self.model.nkey)]
        if 'home' in names:
            return 'home'
        if names and names[0]:
            return names[0]
        return 0 if names else None

    def _log_start(self, gravity_compensation):
        where = (f'keyframe {self.keyframe_name!r}' if self.keyframe is not None
                 else 'qpos0 (the model has no keyframe)')
        LOG.info('%s: starting at %s', self.model_path, where)
        if gravity_compensation:
            LOG.info('gravity compensation on (asked for): %d bodies weightless to their '
                     'servos, carried as actuator force, so effort shows it',
                     len(self.gravcomp_bodies))
        else:
            LOG.info('gravity compensation off: the model as written; position servos add '
                     'the torque that holds the pose to their ctrl, as a position-mode '
                     'driver does, within their force limits')

    def _servo_gravcomp(self):
        """Let position servos carry their links' weight inside MuJoCo (opt-in).

        Bodies hanging only from servo-driven hinges or slides get ``gravcomp``, and those
        joints ``actuatorgravcomp``, so the compensation is an actuator force: it counts in
        ``qfrc_actuator`` (effort) and within the joint's actuator force range. A body with
        a free, ball or unactuated joint above it (a legged robot's trunk, a passive
        pendulum, a payload) keeps its weight.
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
                m.jnt_actgravcomp[joints] = 1
                changed.append(self.layout.bodies[b] or str(b))
        if changed and hasattr(m, 'flg_gravcomp'):
            m.flg_gravcomp = True        # MuJoCo skips gravcomp unless the compiler saw some
        return changed

    def _joint_inertia(self, dofs):
        """Each dof's own inertia (armature included) at the start pose."""
        m = self.model
        d = mujoco.MjData(m)
        if self.keyframe is not None:
            mujoco.mj_resetDataKeyframe(m, d, self.keyframe)
        mujoco.mj_forward(m, d)
        full = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, full)
        return np.maximum(np.diag(full)[dofs], m.dof_M0[dofs])

    def _hold_torque(self):
        """Position servos: the torque that holds the pose and the lead a moving setpoint
        needs. A joint whose drive carries MuJoCo's own gravcomp (``actgravcomp``) needs
        no gravity offset (``qfrc_gravcomp`` takes it out) but still the lead: without it
        a URDF arm's soft servos lagged a FollowJointTrajectory past its path tolerance."""
        m = self.model
        acts = [a for a in range(m.nu) if self.layout.drive_of(a) == 'position']
        if not acts:
            return None
        jids = m.actuator_trnid[acts, 0]
        lo = np.where(m.actuator_ctrllimited[acts], m.actuator_ctrlrange[acts, 0], -np.inf)
        hi = np.where(m.actuator_ctrllimited[acts], m.actuator_ctrlrange[acts, 1], np.inf)
        dofs = m.jnt_dofadr[jids]
        return HoldTorque(np.array(acts), dofs, m.actuator_gainprm[acts, 0], lo, hi,
                          np.maximum(-m.actuator_biasprm[acts, 2], 0.0) + m.dof_damping[dofs],
                          self._joint_inertia(dofs), m.jnt_bodyid[jids])

    def _impedance_loop(self):
        """Torque motors on joints, and what the stepper's joint loop needs to drive them
        to a position (``Stepper._joint_torque``)."""
        m = self.model
        acts = [a for a in range(m.nu) if self.layout.drive_of(a) == 'motor_impedance'
                and self.layout.joint_kind(int(m.actuator_trnid[a, 0]))]
        if not acts:
            return None
        jids = m.actuator_trnid[acts, 0]
        h = m.opt.timestep
        w = min(2 * np.pi * IMPEDANCE_HZ, IMPEDANCE_STEP / h)
        gain = m.actuator_gear[acts, 0] * m.actuator_gainprm[acts, 0]   # torque per ctrl
        lo, hi = effort.torque_limits(m, acts)
        return Impedance(np.array(acts), m.jnt_dofadr[jids], gain, m.jnt_qposadr[jids], w,
                         lo, hi, h * m.dof_damping * _implicit_damping(m))

    def _velocity_loop(self):
        """Velocity servos on joints, and the outer position loop that holds them to a
        joint goal (``Stepper._joint_speed``). Its gain makes the servo's kv and the joint's
        inertia a critically damped loop (position error to speed to torque), no faster
        than the torque loop's bandwidth and step, so it is stable at the model's timestep."""
        m = self.model
        acts = [a for a in range(m.nu) if self.layout.drive_of(a) == 'velocity']
        if not acts:
            return None
        jids = m.actuator_trnid[acts, 0]
        dofs = m.jnt_dofadr[jids]
        h = m.opt.timestep
        w = min(2 * np.pi * IMPEDANCE_HZ, IMPEDANCE_STEP / h)
        integ = m.actuator_dyntype[acts] == mujoco.mjtDyn.mjDYN_INTEGRATOR
        # A plain velocity servo pushes kv per unit of speed error; an intvelocity one
        # integrates its ctrl into a position it holds with kp, so no speed offset adds
        # torque to it (no hold feed-forward: infinite kv), and kp stands for kv in the gain.
        kv = np.where(integ, m.actuator_gainprm[acts, 0], -m.actuator_biasprm[acts, 2])
        damping = kv + m.dof_damping[dofs]          # what resists the joint's speed
        inertia = self._joint_inertia(dofs)
        kp = np.minimum(damping / (4.0 * inertia), w * w * inertia / damping)
        kp = np.minimum(kp, IMPEDANCE_STEP / h)
        lo = np.where(m.actuator_ctrllimited[acts], m.actuator_ctrlrange[acts, 0], -np.inf)
        hi = np.where(m.actuator_ctrllimited[acts], m.actuator_ctrlrange[acts, 1], np.inf)
        return VelocityLoop(np.array(acts), m.jnt_qposadr[jids], dofs, kp,
                            np.where(integ, np.inf, kv), lo, hi)

    # --- reading ----------------------------------------------------------------------------
    @property
    def snapshot(self):
        return self.stepper.snapshot

    def describe(self):
        desc = self.layout.describe()
        name = names.device_name(self.model, self.model_path)
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
                     else f'{name} (simulated)',
                     'id': self.spec['id'] if self.spec and self.spec['id']
                     else names.device_id(name),
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
        path is now instead. A velocity servo held to a position keeps its channel's
        meaning, a speed: the one commanded now, and a target at rest."""
        snap = self.snapshot
        values = (snap.setpoint if setpoint else snap.target).copy()
        held = snap.position_mode
        values[held] = snap.ctrl[held] if setpoint else 0.0
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
            start = s.goal_setpoint()[acts]
            each = [duration([en - st], [r]) for st, en, r in zip(start, values, rates)]
            s.take_over(MinJerkPlan(acts, start, values, now, each))
            self.preempt_moves_touching(acts)
            self.record('goals', request, native, sim_time=now)
        self.stepper.post(apply, wait=True)
        return {'success': True, 'code': errors.STARTED, 'targets': targets}

    def preempt_moves_touching(self, actuators):
        """A running move_to that drives any of these actuators ends PREEMPTED: another
        command took them over, so it cannot arrive as planned (stepper thread)."""
        move = self.move
        if move is not None and not move.done():
            touched = set(actuators) & set(move.actuators)
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
                timeout=None, path=None, tolerance=None):
        """Put the action's site at a point: IK, then a synchronised or Cartesian path.

        ``args`` are the action's arguments in their own units (x, y, z in mm...);
        ``point`` is a target in metres in the world frame, checked against the same limits.
        ``tolerance`` (metres) replaces the device's for this goal. Returns the result dict
        (DONE: within tolerance and settled; MISSED with the distance; STARTED when still
        moving after ``action_wait`` or ``timeout`` seconds), or the ``Move`` itself with
        ``wait=False``.
        """
        return self._move(self.move_action(site), args, point=point, speed=speed, aim=aim,
                          wait=wait, timeout=timeout, path=path, tolerance=tolerance)

    def _move(self, act, args=None, *, point=None, speed=None, aim=None, wait=True,
              timeout=None, path=None, tolerance=None):
        target, speed_ms, aim, use_path, timeout = moves.check_request(
            act, args, point, speed, aim, wait, timeout, path)
        tol = self.params['tolerance'] if tolerance is None else limits.tolerance(tolerance)
        move = self._planner.plan(act, self.snapshot, target, speed_ms, aim, use_path,
                                  tol, self.params['aim_tolerance'])
        move.tolerance = tol
        acts = move.actuators

        def apply(s):
            now = s.data.time
            plan = moves.start_plan(self.model, move, s.joint_setpoint()[acts], now)
            old = self.move
            if old is not None and not old.done():
                old.finish(self._move_result(old, errors.PREEMPTED, False,
                                             'a newer move_to took over'))
            s.take_over(plan, positions=True)
            move.plan_end = plan.t_end
            move.duration = plan.t_end - now
            self.move = move
            self.record('move_to', {'action': act.name, 'target_m': target.tolist(),
                                    'speed_m_s': speed_ms, 'path': use_path},
                        {self.layout.actuators[a]: float(v)
                         for a, v in zip(acts, move.q_goal)}, sim_time=now)
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

    def _move_result(self, move, code, success, message, snap=None):
        return moves.result(self.layout, move, code, success, message,
                            snap or self.snapshot)

    def distance_to_go(self, move=None):
        move = move or self.move
        if move is None:
            return 0.0
        return moves.distance_to_go(self.layout, move, self.snapshot)

    def _after_chunk(self, stepper):
        """Stepper thread: finish the move once its path ended and the point settled."""
        move = self.move
        if move is None or move.done() or move.plan_end is None:
            return
        snap = stepper.snapshot
        ended = moves.settle(self.layout, move, snap, self.params['tolerance'],
                             self.params['aim_tolerance'])
        if ended is None:
            return
        if not ended[0] and self._re_aim(stepper, move, snap):
            return
        if move.then:
            self._apply_then(stepper, move)
        arrived, message = ended
        if not arrived:
            message += self._why_short(move, snap)
        move.finish(self._move_result(move, errors.DONE if arrived else errors.MISSED,
                                      arrived, message, snap))

    def _why_short(self, move, snap):
        """What held a missed move back, naming the joints: a goal past a joint's range
        (from a re-aim), or a drive at its effort limit."""
        m, parts = self.model, []
        if move.limited:
            parts.append(f'at a joint limit: {", ".join(move.limited)}')
        saturated = []
        for name, a, dof in zip(move.action.joints, move.actuators, move.joints_dof):
            jid = int(m.actuator_trnid[a, 0])
            limit = min(float(np.abs(m.actuator_forcerange[a]).min())
                        if m.actuator_forcelimited[a] else np.inf,
                        float(np.abs(m.jnt_actfrcrange[jid]).min())
                        if m.jnt_actfrclimited[jid] else np.inf)
            if abs(float(snap.qfrc_actuator[dof])) >= limit * (1 - 1e-3):
                saturated.append(name)
        if saturated:
            parts.append(f'at the effort limit: {", ".join(saturated)}')
        return f' ({"; ".join(parts)})' if parts else ''

    def _re_aim(self, stepper, move, snap):
        """Stepper thread: a move that stopped out of tolerance, but near, gets another go
        from where the joints really are (``Planner.correct``); False when it cannot."""
        miss = moves.distance_to_go(self.layout, move, snap)
        speed = float(np.abs(snap.qvel[move.joints_dof]).max()) if move.joints_dof else 0.0
        if move.corrections >= moves.CORRECTIONS or miss > moves.CORRECT_WITHIN \
                or speed >= moves.STILL_SPEED or move.cartesian is not None:
            return False
        tol = self.params['tolerance'] if move.tolerance is None else move.tolerance
        q = self._planner.correct(move, snap, tol, self.params['aim_tolerance'],
                                  setpoint=stepper.joint_setpoint()[move.actuators])
        if q is None:
            return False
        now = stepper.data.time
        plan = moves.correction_plan(move, stepper.joint_setpoint()[move.actuators], q, now)
        stepper.take_over(plan, positions=True)
        move.plan_end = plan.t_end
        move.best_miss = move.best_time = None
        move.corrections += 1
        return True

    def _apply_then(self, stepper, move):
        now = stepper.data.time
        for plan in moves.then_plans(self.layout, move.then, stepper.goal_setpoint(), now):
            stepper.take_over(plan)
        self.record('then', {'action': move.action.name, 'then': dict(move.action.then)},
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
        """End every move and freeze every setpoint (velocity servos hold their joints'
        positions, as a driver's position mode does); always accepted."""
        def apply(s):
            s.hold_now()
            move = self.move
            if move is not None and not move.done():
                move.finish(self._move_result(move, errors.STOPPED, False, 'held'))
            sp = s.setpoint.copy()
            sp[s.position_mode()] = 0.0        # velocity servos: held still (zero speed)
            return sp
        sp = self.stepper.post(apply, wait=True, urgent=True)   # even inside a step(n)
        self.record('hold', {}, self._native_all(sp))
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
                                          'the simulation went unstable; back to the '
                                          f'{stepper.last_recovery} and held',
                                          stepper.snapshot))
        self.events.add({'time': time.time(), 'sim_time': float(stepper.data.time),
                         'code': errors.UNSTABLE, 'recovery': stepper.last_recovery,
                         'message': 'simulation unstable (NaN or divergence): back to '
                         f'the {stepper.last_recovery} and holding'})
        self.record('unstable', {}, self._native_all(stepper.setpoint),
                    sim_time=stepper.data.time)
        action = (self.spec or {}).get('safe_state', {}).get('action', 'hold')
        if action != 'hold':
            # Already held; the safe-state move starts from a caller thread
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
        self.record('pause', {'paused': bool(paused)}, {})

    def step(self, n=1, wait=True):
        """Advance ``n`` steps while paused (NOT_PAUSED otherwise); returns the sim time, or
        with ``wait=False`` a ``concurrent.futures.Future`` of it. A hold during the steps
        takes effect at once; the steps go on from the held setpoints."""
        n = limits.step_count(n)
        return self.stepper.step(n, wait=wait)

    def reset(self):
        """Back to the keyframe and hold there; simulated time keeps running forward.
        Live randomization is undone too: the keyframe comes back on the nominal model."""
        def on_reset(s):
            if self.world.randomizer.undo():
                mujoco.mj_forward(s.model, s.data)     # derived from the nominal model again
                s.publish_snapshot()
            move = self.move
            if move is not None and not move.done():
                move.finish(self._move_result(move, errors.STOPPED, False, 'reset',
                                              s.publish_snapshot()))
            return s.setpoint.copy()
        sp = self.stepper.reset(on_reset)
        self.record('reset', {'keyframe': self.keyframe_name}, self._native_all(sp))

    def set_real_time_factor(self, rtf):
        rtf = limits.real_time_factor(rtf)
        self.stepper.set_real_time_factor(rtf)
        self.record('real_time_factor', {'real_time_factor': rtf}, {})

    # --- sensors, lidars, contacts and pushes ------------------------------------------------
    def sensor_groups(self, seed=None, rate=None):
        """The model's sensors grouped into ROS streams (``sensors.catalog.Group``), with
        the device file's ``sensors:`` settings; ``seed`` and ``rate`` (Hz, for groups
        without their own) replace the file's when given. A fresh list (with fresh, seeded
        noise models) each call, for the one reader that owns it."""
        spec = dict((self.spec or {}).get('sensors') or {'seed': 0, 'rate': None,
                                                         'entries': {}})
        if seed is not None:
            spec['seed'] = int(seed)
        if rate is not None:
            spec['rate'] = float(rate)
        return catalog.configure(self.model, spec)

    def _lidar_settings(self):
        from ..sensors.lidar import Lidar
        lidars = dict((self.spec or {}).get('lidars') or {})
        for cfg in lidars.values():
            Lidar(self.model, cfg)            # the site must exist: ConfigError otherwise
        return lidars

    def lidar_settings(self, extra=None):
        """The device file's lidars (name -> settings), plus ``extra`` entries
        ``{name: {'site': ..., ...}}`` checked as a device file's would be."""
        out = dict(self._lidars)
        for name, entry in (extra or {}).items():
            out[name] = sensor_settings.lidar_entry(name, entry, f'lidars.{name}')
        return out

    def lidar(self, cfg):
        """A ``sensors.lidar.Lidar`` for checked settings, casting on its own MjData."""
        from ..sensors.lidar import Lidar
        return Lidar(self.model, cfg)

    def report_contacts(self, on=True):
        """Snapshots carry the active contacts (``snapshot.contacts``) while on: for a
        contacts topic with a subscriber; off, stepping pays nothing for them."""
        self.stepper.report_contacts(on)

    def apply_wrench(self, body, force=(0.0, 0.0, 0.0), torque=(0.0, 0.0, 0.0),
                     point=(0.0, 0.0, 0.0), frame=wrench.WORLD, duration=0.0):
        """Push ``body``: ``force`` (N) and ``torque`` (N m) in ``frame`` (``world`` or a
        body, whose frame they turn with), at ``point`` (m, in the body's frame), every step
        for ``duration`` simulated seconds (0: until ``clear_wrenches`` or ``reset``). A new
        wrench on a body replaces its old one; wrenches on different bodies add up. All
        arguments are checked first (INVALID_ARGUMENT, UNKNOWN_NAME: nothing changes)."""
        checked = wrench.check(self.model, body, force, torque, point, frame, duration)
        w = self.stepper.post(lambda s: s.push(checked), wait=True)
        self.record('apply_wrench', {'body': body, 'force': list(w.force),
                                     'torque': list(w.torque), 'point': list(w.point),
                                     'frame': w.frame_name, 'duration': float(duration)}, {},
                    sim_time=w.start)
        until = 'until cleared' if w.end == float('inf') else f'until t={w.end:.6g} s'
        return {'success': True, 'code': errors.DONE, 'start_time': w.start,
                'end_time': w.end, 'message': f'pushing {body} {until}'}

    def clear_wrenches(self, bodies=None):
        """End the wrenches on ``bodies`` (names; None or empty: all); every name is
        checked first (UNKNOWN_NAME lists the bodies)."""
        names = wrench.body_names(self.model)
        ids = None
        if bodies:
            if isinstance(bodies, str):
                raise errors.InvalidArgument('expected a list of body names, got a string',
                                             where='bodies')
            ids = [names.index(known_name(b, [n for n in names[1:] if n], 'body'))
                   for b in bodies]
        gone = self.stepper.post(lambda s: s.clear_pushes(ids), wait=True)
        self.record('clear_wrenches', {'bodies': list(bodies or [])}, {})
        return {'success': True, 'code': errors.DONE,
                'message': f'cleared {len(gone)} wrench(es)', 'cleared': [names[b] for b in gone]}

    def wrenches(self):
        """The latched wrenches at the latest snapshot (``sensors.wrench.Wrench``)."""
        return self.snapshot.wrenches

    # --- the world at run time ------------------------------------------------------------
    def _stop_move(self, s, why):
        """Stepper thread: the state was rewritten under the move; hold where it is now."""
        move = self.move
        if move is not None and not move.done():
            move.finish(self._move_result(move, errors.STOPPED, False, why,
                                          s.publish_snapshot()))
        s.hold_now()
        return s.hold_pose()

    def save_state(self, name):
        """Keep the full physics state under ``name`` (overwriting one of that name)."""
        name = world_snapshots.snapshot_name(name)
        state = self.stepper.post(lambda s: world_snapshots.capture(s.model, s.data),
                                  wait=True)
        self.world.snapshots.put(name, state)
        self.record('save_state', {'name': name}, {})
        return {'success': True, 'code': errors.DONE, 'name': name}

    def load_state(self, name):
        """Restore a snapshot bit for bit (time keeps going forward) and hold there; a
        running move ends STOPPED. STALE_SNAPSHOT after a scene change, nothing changed."""
        name = world_snapshots.snapshot_name(name)
        state = self.world.snapshots.get(name)

        def apply(s):
            world_snapshots.restore(s.model, s.data, state)
            sp = self._stop_move(s, f'state {name!r} loaded')
            s.publish_snapshot()
            return sp
        sp = self.stepper.post(apply, wait=True)
        self.record('load_state', {'name': name}, self._native_all(sp))
        return {'success': True, 'code': errors.DONE, 'name': name}

    def delete_state(self, name):
        self.world.snapshots.delete(world_snapshots.snapshot_name(name))

    def state_names(self):
        return self.world.snapshots.names()

    def set_joint_state(self, names, positions, velocities=None):
        """Teleport hinge/slide joints (all-or-nothing, range-checked), forward kinematics
        after; the servos then hold the new pose and a running move ends STOPPED."""
        qadr, dadr, q, v = teleport.check(self.model, self.layout.joints, names, positions,
                                          velocities)
        request = {'names': list(names), 'positions': q.tolist(),
                   'velocities': None if v is None else v.tolist()}

        def apply(s):
            teleport.apply(s.model, s.data, qadr, dadr, q, v)
            sp = self._stop_move(s, 'joints teleported')
            s.publish_snapshot()
            return sp
        sp = self.stepper.post(apply, wait=True)
        self.record('set_joint_state', request, self._native_all(sp))
        return {'success': True, 'code': errors.DONE}

    def set_gravity(self, gravity):
        """World gravity (m/s^2, 3 finite numbers) from the next step on."""
        g = bounds.magnitude(gravity, 3, bounds.MAX_GRAVITY, 'gravity', 'm/s^2')

        def apply(s):
            s.model.opt.gravity[:] = g
        self.stepper.post(apply, wait=True)
        self.record('gravity', {'gravity': g.tolist()}, {})
        return g.tolist()

    def set_timestep(self, timestep):
        """Integration timestep in seconds (0 < dt <= 0.1) from the next step on."""
        dt = finite_number(timestep, 'timestep')
        if not 0 < dt <= 0.1:
            raise errors.InvalidArgument(f'{dt:g} s is not a usable timestep',
                                         where='timestep', allowed='0 < timestep <= 0.1 s')

        def apply(s):
            s.model.opt.timestep = dt
        self.stepper.post(apply, wait=True)
        self.record('timestep', {'timestep': dt}, {})
        return dt

    @property
    def gravity(self):
        return [float(x) for x in self.model.opt.gravity]

    @property
    def timestep(self):
        return float(self.model.opt.timestep)

    def _live_state(self):
        dyn = self.world.dynamics
        return self.stepper.post(lambda s: dyn.capture(s.data), wait=True)

    def mass_matrix(self):
        """(nv, nv) joint-space inertia of the live state."""
        return self.world.dynamics.mass_matrix(self._live_state())

    def inverse_dynamics(self, qacc):
        """(nv,) generalized forces giving ``qacc`` (nv finite numbers) at the live state."""
        qacc = finite_vector(qacc, self.model.nv, 'qacc')
        return self.world.dynamics.inverse_dynamics(self._live_state(), qacc)

    def jacobian(self, name, kind=None):
        """(jacp, jacr), each (3, nv), of a site or body (``kind`` 'site'/'body'; by default
        a site of that name, else a body) at the live state."""
        if kind is None:
            kind = 'site' if name in self.layout.sites else 'body'
        return self.world.dynamics.jacobian(self._live_state(), kind, name,
                                            self.layout.sites, self.layout.bodies)

    def pixel_to_world(self, camera, pixels, width=None, height=None):
        """World points (n, 3) of camera pixels ``[(u, v), ...]`` through the depth render
        at the latest snapshot; background (far-plane) and invalid depths are refused."""
        snap = self.snapshot
        if width is None and height is None:
            return self._pixel_to_world(
                self.renderer(camera, depth=True, generation=snap.generation), pixels, snap)
        # A size of the caller's own gets a renderer of its own, closed after: caching one
        # per size asked would let requests pile up GL contexts without bound.
        from ..render.camera import CameraRenderer
        camera, width, height = self._image(camera, width, height)
        with CameraRenderer(self._state_of(snap.generation).model, camera, width, height,
                            depth=True) as r:
            return self._pixel_to_world(r, pixels, snap)

    def _pixel_to_world(self, r, pixels, snap):
        px = world_pixels.check_pixels(pixels, r.width, r.height)
        intr = r.intrinsics()
        with self.render_state(snap) as d:
            depth = r.render_depth(d)
            pos, rot = r.optical_pose(d)
        return world_pixels.to_world(depth, intr, pos, rot, px,
                                     world_pixels.far_plane(self.model_of(snap.generation)))

    def randomize(self, fields, seed=None):
        """Randomize model fields of the running sim (``world.randomize``); ``reset`` undoes
        it. Checked as a whole first: a bad field changes nothing."""
        rnd = self.world.randomizer
        values = self.stepper.post(lambda s: rnd.check(fields, seed), wait=True)

        def apply(s):
            rnd.apply(values, s.data)
            s.publish_snapshot()
        self.stepper.post(apply, wait=True)
        self.record('randomize', {'fields': sorted(values), 'seed': seed}, {})
        return {k: v.tolist() for k, v in values.items()}

    # --- scene edits: the model swapped at run time --------------------------------------
    @property
    def generation(self):
        """The scene generation of ``model``: it goes up with every model swapped in, and
        every snapshot carries the one its arrays belong to."""
        return self._generation

    def _scene(self):
        if self._scene_spec is None:
            self._scene_spec = Scene(self.model_path)
        return self._scene_spec

    def entity_names(self):
        """The entities spawned so far (``spawn_entity`` names, namespace included)."""
        return sorted(self._spawned)

    def entity_bodies(self, name):
        """The bodies a spawned entity brought, top one first ([] for any other name)."""
        return list(self._spawned.get(name, ())) if isinstance(name, str) else []

    def spawn_entity(self, resource, name, position=(0.0, 0.0, 0.0),
                     quaternion=(1.0, 0.0, 0.0, 0.0), namespace=''):
        """Attach an MJCF (a string, or a file: a body tree, an object, a whole robot) at a
        world pose, its names prefixed ``[<namespace>/]<name>/``; the device goes on with
        its goals and running move. Refused with nothing changed when it does not compile.
        Returns the entity's full name and its bodies."""
        with self._edit_lock:
            return self._spawn_entity(resource, name, position, quaternion, namespace)

    def _vet(self, resource, world=False):
        """The sandbox's look at an untrusted resource (limits, roots), when there is one:
        its compiled model for a world, else None; refused with nothing changed."""
        if self.sandbox is None:
            return None
        if not isinstance(resource, str) or not resource:
            raise errors.InvalidArgument('expected an MJCF string or file path',
                                         where='resource')
        return self.sandbox.check(resource, world=world)['model']

    def _spawn_entity(self, resource, name, position, quaternion, namespace):
        scene = self._scene()
        scene.check_pose(name, position, quaternion, namespace)   # cheap refusals first
        self._vet(resource)
        spec, model = scene.spawn(resource, name, position, quaternion, namespace)
        if self.sandbox is not None:
            self.sandbox.check_totals(model)
        full = f'{namespace.strip("/")}/{name}' if namespace else name
        bodies = scene_edit.entity_bodies(spec, full)
        if not bodies:
            # an entity is its bodies: one without any could never be placed or deleted
            raise errors.InvalidArgument('the MJCF has no body to spawn; nothing was changed',
                                         where='resource', allowed='an MJCF with at least one '
                                         '<body> in its <worldbody>')
        self.replace_model(model, why=f'spawned {full}', scene_spec=spec)
        self._spawned[full] = bodies
        return {'success': True, 'code': errors.DONE, 'name': full, 'bodies': bodies}

    def delete_entity(self, name):
        """Remove a spawned entity (by its full name) or any body of the model and what
        hangs below it; refused when that takes an actuator or sensor of the device."""
        with self._edit_lock:
            return self._delete_entity(name)

    def _delete_entity(self, name):
        if not isinstance(name, str) or not name:
            raise errors.UnknownName('entity', name, self.entity_names())
        scene = Scene(spec=self._scene().spec)
        model = None
        brought = name if name in self._spawned else None
        for body in self._spawned.get(name) or [name]:
            if model is None or mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY,
                                                  body) >= 0:
                spec, model = scene.delete(body, brought)
                scene.commit(spec)
        self.replace_model(model, why=f'deleted {name}', scene_spec=scene, entity=brought)
        self._spawned.pop(name, None)
        return {'success': True, 'code': errors.DONE, 'name': name}

    def load_world(self, resource):
        """Replace the whole model (an MJCF string or file path) while the device stays
        open: the device file's channels if they fit the new model, else zero-config;
        running moves end STOPPED, the state starts at the new model's keyframe."""
        with self._edit_lock:
            return self._load_world(resource)

    def _load_world(self, resource):
        vetted = self._vet(resource, world=True)
        spec, model = Scene(spec=self._scene().spec).load(resource, model=vetted)
        path = resource if not resource.lstrip().startswith('<') else '<string>'
        path = path[len('file://'):] if path.startswith('file://') else path
        self.replace_model(model, world=True, why=f'loaded world {errors.shorten(path)}',
                           scene_spec=spec, model_path=path)
        self._spawned.clear()
        return {'success': True, 'code': errors.DONE, 'model': self.model_path,
                'zero_config': self.layout.zero_config}

    def unload_world(self):
        """Back to the world the device was opened with (the robot stays a device)."""
        with self._edit_lock:
            model = load_model(self._start_path)
            self.replace_model(model, world=True, why='world unloaded',
                               scene_spec=Scene(self._start_path),
                               model_path=self._start_path)
            self._spawned.clear()
        return {'success': True, 'code': errors.DONE, 'model': self.model_path}

    def replace_model(self, model, *, world=False, why='the scene changed', scene_spec=None,
                      model_path=None, entity=None):
        """Swap the running device onto ``model`` (an ``MjModel``, or an ``MjSpec`` that is
        compiled first) at a chunk boundary.

        ``world=False`` (a spawn or delete): every actuator and sensor of the device must
        stay (by name), or the request is refused with nothing changed; the state of what
        stays carries over by name, the timestep and gravity stay, and when nothing that
        stays is renumbered the running move and goals go on untouched (otherwise they end
        PREEMPTED: send them again). ``world=True``: the device is rebuilt from the new
        model as it would open on it (the device file if its channels fit, else
        zero-config), starting at its keyframe; a running move ends STOPPED. Either way
        snapshots saved before are stale from now on (STALE_SNAPSHOT). ``entity``: the
        actuators and sensors named ``<entity>/...`` may go (a spawned entity deleted);
        goals on them end, and a move that used them ends PREEMPTED.
        """
        with self._edit_lock:
            return self._replace_model(model, world, why, scene_spec, model_path, entity)

    def _replace_model(self, model, world, why, scene_spec, model_path, entity):
        if isinstance(model, mujoco.MjSpec):
            spec_in, model = model, Scene(spec=model).compile()
            scene_spec = scene_spec or spec_in
        if not isinstance(model, mujoco.MjModel):
            raise errors.InvalidArgument(f'expected an MjModel or MjSpec, got '
                                         f'{type(model).__name__}', where='model')
        old = self.model
        device_spec = self._file_spec if world else self.spec
        if world:
            try:
                layout = Layout(model, device_spec)
            except DeviceError:
                device_spec = None
                layout = Layout(model, None)
            renumber = True
        else:
            lost = scene_edit.lost_channels(old, model, entity)
            if lost:
                raise errors.InvalidArgument(
                    f'{why} would remove {", ".join(lost)} of the device; nothing was '
                    'changed', where='scene', allowed='edits that keep every actuator and '
                    'sensor')
            model.opt.timestep = old.opt.timestep
            model.opt.gravity[:] = old.opt.gravity
            layout = Layout(model, device_spec)
            renumber = scene_edit.renumbered(old, model)
        code = errors.STOPPED if world else errors.PREEMPTED
        ended = f'{why}: the device changed under the move' if world else \
            f'{why}: the device\'s joints were renumbered; send the goal again'
        t0 = time.perf_counter()
        self._trial(model, world, why)
        try:
            self.stepper.post(lambda s: self._swap(s, model, layout, device_spec, world,
                                                   renumber, code, ended, model_path),
                              wait=True, timeout=30.0)
        except mujoco.FatalError as exc:     # the state moved on since the trial; refused
            raise ModelError(f'{why}: MuJoCo failed on the new model ({exc}); nothing was '
                             f'changed: {scene_edit.memory_fix(model)}', where='scene') from None
        if scene_spec is not None:
            self._scene_spec = scene_spec if isinstance(scene_spec, Scene) \
                else Scene(spec=scene_spec)
        with self._renderers_lock:
            retired, self._retired = self._retired, []
        for r in retired:           # GL contexts: freed here, never on the physics thread
            r.close()
        self.record('replace_model', {'why': why, 'world': bool(world)},
                    self._native_all(self.snapshot.setpoint))
        return {'success': True, 'code': errors.DONE, 'generation': self._generation,
                'kept_moves': not renumber, 'swap_s': time.perf_counter() - t0}

    def _trial(self, model, world, why):
        """Step the new model once on a copy of the state the swap would give it, on this
        (the caller's) thread: a scene that overflows MuJoCo's arena, warns or diverges is
        refused here, and the physics thread never runs it (``world.scene.trial_run``)."""
        data = mujoco.MjData(model)
        if world:                     # where a zero-config device starts: home, else key 0
            key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, 'home')
            if key >= 0 or model.nkey:
                mujoco.mj_resetDataKeyframe(model, data, max(key, 0))
        else:
            old_model = self.model
            old_data = self.stepper.post(lambda s: copy.copy(s.data), wait=True)
            try:
                scene_edit.carry_state(old_model, old_data, model, data)
            except mujoco.FatalError:
                pass                   # trial_run's forward meets it again and says why
            del old_data
        scene_edit.trial_run(model, data, f'the new scene ({why})')

    def _swap(self, s, model, layout, device_spec, world, renumber, code, ended,
              model_path):
        """Stepper thread, between chunks: the new model in, all or nothing."""
        saved = {k: getattr(self, k) for k in (
            'model', 'data', 'layout', 'spec', 'keyframe', 'keyframe_name', 'gravcomp_bodies',
            'model_path', '_planner', '_lidars')}
        old_model, old_data = s.model, s.data
        try:
            data = mujoco.MjData(model)
            if world:
                self.model, self.spec, self.layout = model, device_spec, layout
                connect = (device_spec or {}).get('connect', {})
                keyframe = connect.get('keyframe') if device_spec else \
                    self._default_keyframe()
                self.keyframe = self._keyframe_id(keyframe)
                self.keyframe_name = keyframe if self.keyframe is not None else None
                if self.keyframe is not None:
                    mujoco.mj_resetDataKeyframe(model, data, self.keyframe)
                data.time = old_data.time
                mujoco.mj_forward(model, data)
                self.model_path = model_path or self.model_path
            else:
                scene_edit.carry_state(old_model, old_data, model, data)
                self.model, self.layout = model, layout
                if self.keyframe is not None and self.keyframe >= model.nkey:
                    self.keyframe, self.keyframe_name = None, None
            if not (np.isfinite(data.qpos).all() and np.isfinite(data.qacc).all()):
                raise ModelError('the new model is not finite at its start pose; nothing '
                                 'was changed', where='model')
            self.data = data
            if self._gravcomp_on:
                self.gravcomp_bodies = self._servo_gravcomp()
                mujoco.mj_forward(model, data)
            m = model
            drives = [(layout.drive_of(a), int(m.jnt_qposadr[m.actuator_trnid[a, 0]])
                       if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT else -1)
                      for a in range(m.nu)]
            impedance, hold_torque = self._impedance_loop(), self._hold_torque()
            velocity_loop = self._velocity_loop()
            planner = moves.Planner(model, layout)
            lidars = self._lidar_settings()
        except BaseException:
            for k, v in saved.items():
                setattr(self, k, v)
            raise
        # From here on nothing can refuse: the old model's moves end, the new one runs.
        old_sp, old_names = s.setpoint.copy(), saved['layout'].actuators
        old_mode = s.position_mode()
        gone = [a for a, name in enumerate(old_names) if name not in layout.actuators]
        move = self.move
        running = move is not None and not move.done()
        if running and (renumber or set(gone) & set(move.actuators)):
            if not renumber:
                ended = f'{ended.split(":")[0]}: the move\'s actuators went with the entity'
            move.finish(moves.result(saved['layout'], move, code, False, ended, s.snapshot))
            gone = gone + list(move.actuators)       # its path stops where it is now
        plans = [p for p in s.running_plans() if p.release(gone)] if not renumber else ()
        self._planner, self._lidars = planner, lidars
        self._generation = self.world.follow(model)
        self._render_states[self._generation] = RenderState(model)
        for g in [g for g in self._render_states if g < self._generation - 1]:
            del self._render_states[g]
        with self._renderers_lock:
            # renderers two generations old: nobody draws them any more (closed by the caller)
            old = [k for k in self._renderers if k[-1] < self._generation - 1]
            self._retired.extend(self._renderers.pop(k) for k in old)
        s.swap_model(model, data, drives=drives, impedance=impedance,
                     hold_torque=hold_torque, keyframe=self.keyframe, plans=plans,
                     generation=self._generation, velocity_loop=velocity_loop)
        if not world:
            sp = s.setpoint
            for a, name in enumerate(old_names):
                b = layout.actuators.index(name) if name in layout.actuators else -1
                to = None
                if name and b >= 0:
                    to = b
                elif not name and not renumber and a < len(sp):
                    to = a                    # unnamed, and nothing was renumbered
                if to is not None:
                    sp[to] = old_sp[a]
                    if old_mode[a]:       # its setpoint (and path) are joint positions
                        s.set_position_mode([to], True)
        s.publish_snapshot()
        LOG.info('scene generation %d: %s', self._generation,
                 'moves kept' if not renumber else 'moves ended')

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

    def renderer(self, camera, width=None, height=None, depth=False, background=False,
                 generation=None):
        """A camera renderer owned by the device (closed with it). ``camera`` is a camera
        of the model or an image channel (whose size is then the default); ``background``
        as in ``CameraRenderer``. It draws the model of ``generation`` (by default the
        latest snapshot's): pose it only from snapshots of that generation."""
        from ..render.camera import CameraRenderer
        if generation is None:
            generation = self.snapshot.generation
        model = self._state_of(generation).model
        camera, width, height = self._image(camera, width, height)
        key = (camera, width, height, bool(depth), bool(background), generation)
        with self._renderers_lock:
            if self.closed:
                raise errors.ClosedError('the device')
            if key not in self._renderers:
                self._renderers[key] = CameraRenderer(model, camera, width, height,
                                                      depth=depth, background=background)
            return self._renderers[key]

    def model_of(self, generation):
        """The model of a scene generation (the current one or the one before), for
        readers that pose their own MjData from a snapshot (``snapshot.generation``)."""
        return self._state_of(generation).model

    def _state_of(self, generation):
        state = self._render_states.get(generation)
        if state is None:
            raise DeviceError(world_snapshots.STALE_SNAPSHOT, f'scene generation {generation} '
                              'was replaced; use the latest snapshot', where='snapshot')
        return state

    def render_state(self, snap=None):
        """``with device.render_state(snap) as data:`` the device's render MjData posed at
        ``snap`` (the latest snapshot by default), for as long as the block runs: the one
        way to draw from it, so two cameras never pose it under each other. The MjData is
        of the model ``snap`` belongs to (its ``generation``)."""
        snap = snap or self.snapshot
        return self._state_of(snap.generation).posed(snap)

    def render_data(self, snap=None):
        """A new MjData of its own posed at ``snap`` (the latest by default): for a caller
        that keeps it; ``render_state`` draws without the copy."""
        snap = snap or self.snapshot
        return self._state_of(snap.generation).copy_of(snap)

    def render(self, camera, width=None, height=None, png=False):
        """RGB array (or PNG bytes) of a camera or image channel at the latest snapshot."""
        snap = self.snapshot
        r = self.renderer(camera, width, height, generation=snap.generation)
        with self.render_state(snap) as d:
            return r.render_png(d) if png else r.render_rgb(d)

    # --- audit ------------------------------------------------------------------------------
    def record(self, kind, request, native, sim_time=None):
        """Add an audit entry: what was asked (``request``, in the caller's units) and what
        it set (``native``: actuator -> value), at ``sim_time`` (the latest snapshot's)."""
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
        if self.sandbox is not None:
            self.sandbox.close()
        with self._renderers_lock:
            for r in list(self._renderers.values()) + self._retired:
                r.close()
            self._renderers.clear()
            self._retired.clear()

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
