"""The simulated device: a MuJoCo model behind the device file's channels and limits.

``Device`` is what a driver node talks to. Every request is checked in the caller's thread
against the limits kernel and answered with a structured error before anything is posted
to the stepper, so a refused request changes nothing; accepted ones become setpoint paths
that the stepper thread follows in real time. The device wires the pieces together and
owns none of their logic: the channels and limits (``config``), the move_to pipeline
(``motion.move``) and its running moves (``motion.runner``), the physics thread
(``Stepper``), the robots of the world (``sim.robots``), scene edits, the world at run
time, sensing and rendering (``device.scene``, ``physics``, ``sensing``, ``cameras``)."""

import copy
import logging
import os
import threading
import time
import warnings

import mujoco
import numpy as np

from ..config import device_file as devfile, limits
from .. import errors
from ..config.channels import Layout
from ..checks import known_name
from ..errors import ConfigError, DeviceError, ModelError
from ..motion import move as moves
from ..motion.move import Move  # noqa: F401 - importable from here, as it always was
from ..motion.runner import MoveRunner
from ..motion.trajectory import MinJerkPlan, duration
from ..config.units import parse_quantity
from . import keyframes, names
from ..sensors.device_sensors import Sensing, lidar_settings_of
from ..render.registry import RenderRegistry
from ..world import scene as scene_edit
from ..world.scene import Scene
from ..world.edits import SceneEdits
from ..world.runtime import RunTimeWorld
from ..world.world import World
from . import drives as drive_laws
from .events import Log, ModelSwapped, Swaps  # noqa: F401 - Log importable from here
from .robots import Robots
from .stepper import Stepper

DEFAULTS = {'action_wait': 8.0, 'tolerance': 1e-3, 'aim_tolerance': np.deg2rad(3.0)}
LOG = logging.getLogger('mujoco_hal_ros.device')


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
        if spec and spec.get('cameras'):     # cameras the device file puts on bodies
            from ..description.urdf_in import default_cache_dir
            from ..sensors.declared import with_cameras
            load_model(self.model_path)       # a missing or broken file says so first
            self.model_path = with_cameras(self.model_path, spec['cameras'],
                                           os.path.join(default_cache_dir(), 'cameras'))
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
            self.gravcomp_bodies = drive_laws.servo_gravcomp(self.model, self.layout)
        keyframe = keyframe if keyframe is not None else connect.get('keyframe')
        if keyframe is None and spec is None:
            keyframe = keyframes.default_keyframe(self.model)
        self.keyframe = keyframes.keyframe_id(self.model, keyframe)
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
        self.runner = MoveRunner(self)   # the running moves, one a robot (motion.runner)
        self._chunk_hooks: tuple = ()    # on_every_chunk: read-outs after every chunk
        laws = drive_laws.build(self.model, self.layout, self.keyframe)
        self.stepper = Stepper(self.model, self.data, laws=laws,
                               real_time_factor=rtf, start_paused=bool(start_paused),
                               keyframe=self.keyframe, on_chunk=self._after_chunk,
                               on_unstable=self._on_unstable, on_error=self._on_error)
        try:
            sp = self.stepper.post(lambda s: s.hold_pose(), wait=True)
        except BaseException:
            self.stepper.close()
            raise
        try:
            self.sensing = Sensing(self)   # a device file naming no such sensor stops here
        except BaseException:
            self.stepper.close()
            raise
        self.world = World(self.model)
        self._generation = self.world.snapshots.generation
        self.cameras = RenderRegistry(self, self.model, self._generation)
        self.scene = SceneEdits(self, self.model_path)   # spawn, delete, load, unload
        self.physics = RunTimeWorld(self, self._stop_move, self._native_all)   # states, ...
        self._file_spec = self.spec   # a loaded world uses the device file if it fits
        self._gravcomp_on = bool(gravity_compensation)
        # Untrusted models (scene edits from a ROS peer) are read in a capped process first
        # (world.sandbox); None: this process reads them itself (a trusted Python caller).
        self.sandbox = None
        # Everything that caches this model's addresses follows a swap through here.
        self.swaps = Swaps()
        self.robots = Robots(self)     # the namespaced robots in this world, each a view
        self.record('connect', {'model': self.model_path, 'keyframe': keyframe},
                    self._native_all(sp))

    def _native_all(self, setpoint):
        return {self.layout.actuators[a] or str(a): float(v) for a, v in enumerate(setpoint)}

    # --- set-up helpers ---------------------------------------------------------------------
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

    def read(self, names=None, snapshot=None, *, layout=None):
        """Scalar read channels in their own units, from one consistent snapshot;
        ``layout``: one robot's channels (``RobotView``) instead of the device's."""
        snap = snapshot or self.snapshot
        chans = (layout or self.layout).reads
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

    def goals(self, setpoint=False, *, layout=None):
        """Each goal channel's target in its own unit: the goal it was last given (where its
        path ends), as a device reads back a write channel. ``setpoint=True``: where the
        path is now instead. A velocity servo held to a position keeps its channel's
        meaning, a speed: the one commanded now, and a target at rest. ``layout``: another
        set of channels over this model (a robot's, ``RobotView``)."""
        layout = layout or self.layout
        snap = self.snapshot
        values = (snap.setpoint if setpoint else snap.target).copy()
        held = snap.position_mode
        values[held] = snap.ctrl[held] if setpoint else 0.0
        return {g.name: float(g.to_unit(values[g.actuator]))
                for g in layout.goals.values()}

    def on_physics(self, fn, wait=True, timeout=10.0):
        """The one door to the physics thread for code outside ``sim/``: ``fn(stepper)``
        runs there between two chunks (``Stepper.post``); with ``wait``, its value comes
        back (or its exception is raised here). What a closure may do on that thread is the
        stepper's thread-only methods, checked in debug runs (MUJOCO_HAL_ROS_CHECK_THREADS)."""
        return self.stepper.post(fn, wait=wait, timeout=timeout)

    def on_every_chunk(self, fn):
        """Run ``fn(stepper)`` on the physics thread after every chunk of steps (after the
        moves settle): for light read-outs that must see every chunk, such as a drive
        controller's wheel odometry. Returns the call that removes it."""
        if not callable(fn):
            raise TypeError(f'expected a callable, got {fn!r}')
        self._chunk_hooks = self._chunk_hooks + (fn,)

        def remove():
            self._chunk_hooks = tuple(h for h in self._chunk_hooks if h is not fn)
        return remove

    def _after_chunk(self, stepper):
        self.runner.after_chunk(stepper)
        for hook in self._chunk_hooks:
            hook(stepper)

    @property
    def paused(self):
        """Whether stepping is paused (``pause``); ``step`` then advances it."""
        return self.stepper.paused

    def health(self):
        h = self.stepper.health()
        h['moving'] = self.snapshot.moving
        return h

    # --- goals ------------------------------------------------------------------------------
    def set_goals(self, goals, *, layout=None):
        """Start min-jerk paths to several goals at once; all-or-nothing.

        Each channel's path peaks at its ``max_change_per_s`` (no rate: it jumps in one
        step). Only the named actuators change hands: a running move keeps the rest, though
        it is reported PREEMPTED since it can no longer arrive as planned. ``layout``: the
        channels of one robot of the world (``RobotView``), checked instead of the device's.
        """
        layout = layout or self.layout
        targets = limits.check_goals(layout, goals)
        request = {n: float(v) for n, v in goals.items()}     # checked: plain numbers
        native = {layout.goals[n].actuator_name: v for n, v in targets.items()}
        acts = [layout.goals[n].actuator for n in targets]
        values = np.array([targets[n] for n in targets])
        rates = [layout.goals[n].native_rate for n in targets]

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
        self.runner.preempt_touching(actuators)

    # --- move_to ----------------------------------------------------------------------------
    def action(self, name):
        return self.layout.actions[known_name(name, self.layout.actions, 'action')]

    def move_action(self, site=None, *, layout=None):
        """The device file's move_to action, or one built for ``site`` (a site or body);
        ``layout``: one robot's channels (``RobotView``), whose joints may turn."""
        return moves.action_for(layout or self.layout, site)

    def move_to(self, args=None, *, point=None, site=None, speed=None, aim=None, wait=True,
                timeout=None, path=None, tolerance=None, layout=None, planner=None):
        """Put the action's site at a point: IK, then a synchronised or Cartesian path.

        ``args`` are the action's arguments in their own units (x, y, z in mm...);
        ``point`` is a target in metres in the world frame, checked against the same limits.
        ``tolerance`` (metres) replaces the device's for this goal. Returns the result dict
        (DONE: within tolerance and settled; MISSED with the distance; STARTED when still
        moving after ``action_wait`` or ``timeout`` seconds), or the ``Move`` itself with
        ``wait=False``. ``layout`` and ``planner``: one robot's channels and IK
        (``RobotView.move_to``), whose joints alone may turn.
        """
        return self.runner.start(self.move_action(site, layout=layout), args, point=point,
                                 speed=speed, aim=aim, wait=wait, timeout=timeout,
                                 path=path, tolerance=tolerance,
                                 planner=planner or self._planner)

    def distance_to_go(self, move=None):
        return self.runner.distance_to_go(move)

    @property
    def moves(self):
        """The move_to moves not finished yet (one a robot at most, ``sim.robots``)."""
        return self.runner.running

    @property
    def move(self):
        """The latest move_to (a robot's own: ``RobotView.move``)."""
        return self.runner.latest

    # --- actions ----------------------------------------------------------------------------
    def run_action(self, name, args=None, **kw):
        """Run a device-file action by name: ``hold``, or a move_to with its arguments."""
        act = self.action(name)
        if act.command == 'hold':
            if args:
                raise errors.InvalidArgument('hold takes no arguments', where=name)
            return self.hold()
        return self.runner.start(act, args, planner=self._planner, **kw)

    def hold(self, actuators=None):
        """End every move and freeze every setpoint (velocity servos hold their joints'
        positions, as a driver's position mode does); always accepted. ``actuators`` (ids):
        only these, and the moves that drive any of them (one robot of the world's)."""
        def apply(s):
            if actuators is None:
                s.hold_now()
            else:
                s.hold_actuators(actuators)
            self.runner.end(errors.STOPPED, 'held', actuators=actuators)
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
            self.runner.start(self.action(action), {}, wait=False, planner=self._planner)
        except DeviceError as exc:
            return dict(held, message=f'holding: safe-state action {action!r} could not '
                        f'start ({exc})')
        return {'success': True, 'code': errors.STARTED,
                'message': f'safe-state action {action!r} started'}

    def _on_unstable(self, stepper):
        self.runner.end(errors.UNSTABLE, 'the simulation went unstable; back to the '
                        f'{stepper.last_recovery} and held', stepper.snapshot)
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
            self.runner.start(self.action(action), {}, wait=False, planner=self._planner)
        except DeviceError as exc:
            self.events.add({'time': time.time(), 'sim_time': float(self.snapshot.time),
                             'code': exc.code, 'message': f'safe-state action {action!r} '
                             f'could not start after the instability: {exc}; holding'})

    def _on_error(self, stepper, exc):
        self.runner.end(errors.INTERNAL_ERROR, f'stepper error: {exc}; holding')
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
        Live randomization is undone too: the keyframe comes back on the nominal model.
        Spawned entities go back to their own home (where their spawn put them), not to
        the world's qpos0 for them."""
        homes = self.scene.homes()

        def on_reset(s):
            if self.world.randomizer.undo():
                mujoco.mj_forward(s.model, s.data)     # derived from the nominal model again
                s.publish_snapshot()
            if homes[0] or homes[1]:
                scene_edit.put_at_home(None, s.model, s.data, homes)
                s.hold_pose()                          # the servos hold there
                s.publish_snapshot()
            if self.moves:
                self.runner.end(errors.STOPPED, 'reset', s.publish_snapshot())
            return s.setpoint.copy()
        sp = self.stepper.reset(on_reset)
        self.record('reset', {'keyframe': self.keyframe_name}, self._native_all(sp))

    def set_real_time_factor(self, rtf):
        rtf = limits.real_time_factor(rtf)
        self.stepper.set_real_time_factor(rtf)
        self.record('real_time_factor', {'real_time_factor': rtf}, {})

    # --- the world at run time ------------------------------------------------------------
    def _stop_move(self, s, why):
        """Stepper thread: the state was rewritten under the move; hold where it is now."""
        if self.moves:
            self.runner.end(errors.STOPPED, why, s.publish_snapshot())
        s.hold_now()
        return s.hold_pose()

    # --- scene edits: the model swapped at run time --------------------------------------
    @property
    def generation(self):
        """The scene generation of ``model``: it goes up with every model swapped in, and
        every snapshot carries the one its arrays belong to."""
        return self._generation

    # The scene edits themselves live in world.edits (``self.scene``); these are their doors.
    def entity_names(self):
        """The entities spawned so far (``spawn_entity`` names, namespace included)."""
        return self.scene.names()

    def entity_bodies(self, name):
        """The bodies a spawned entity brought, top one first ([] for any other name)."""
        return self.scene.bodies(name)

    def spawn_entity(self, resource, name, position=(0.0, 0.0, 0.0),
                     quaternion=(1.0, 0.0, 0.0, 0.0), namespace=''):
        """Attach an MJCF at a world pose (``SceneEdits.spawn``)."""
        return self.scene.spawn(resource, name, position, quaternion, namespace)

    def delete_entity(self, name):
        """Remove a spawned entity or a body of the model (``SceneEdits.delete``)."""
        return self.scene.delete(name)

    def load_world(self, resource):
        """Replace the whole model while the device stays open (``SceneEdits.load_world``)."""
        return self.scene.load_world(resource)

    def unload_world(self):
        """Back to the world the device was opened with (``SceneEdits.unload_world``)."""
        return self.scene.unload_world()

    def replace_model(self, model, *, world=False, why='the scene changed', scene_spec=None,
                      model_path=None, entity=None, home=None):
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
        goals on them end, and a move that used them ends PREEMPTED. ``home``: where the
        joints and actuators a spawn brought start (``scene.entity_home``), their servos
        holding there; without it they start at the model's qpos0.
        """
        with self.scene.lock:
            return self._replace_model(model, world, why, scene_spec, model_path, entity,
                                       home)

    def _replace_model(self, model, world, why, scene_spec, model_path, entity, home=None):
        if isinstance(model, mujoco.MjSpec):
            spec_in, model = model, Scene(spec=model).compile()
            scene_spec = scene_spec or spec_in
        if not isinstance(model, mujoco.MjModel):
            raise errors.InvalidArgument(f'expected an MjModel or MjSpec, got '
                                         f'{type(model).__name__}', where='model')
        old = self.model
        device_spec = self._file_spec if world else self.spec
        if world:
            layout, device_spec = self.world_layout(model)
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
        old = None if world else (self.model, self.stepper.post(lambda s: copy.copy(s.data),
                                                                wait=True))
        scene_edit.trial_swap(model, old, why)
        try:
            self.stepper.post(lambda s: self._swap(s, model, layout, device_spec, world,
                                                   renumber, code, ended, model_path, home),
                              wait=True, timeout=30.0)
        except mujoco.FatalError as exc:     # the state moved on since the trial; refused
            raise ModelError(f'{why}: MuJoCo failed on the new model ({exc}); nothing was '
                             f'changed: {scene_edit.memory_fix(model)}', where='scene') from None
        if scene_spec is not None:
            self.scene.adopt(scene_spec)
        self.cameras.close_retired()   # GL contexts: freed here, never on the physics thread
        self.record('replace_model', {'why': why, 'world': bool(world)},
                    self._native_all(self.snapshot.setpoint))
        self.swaps.emit(ModelSwapped(self._generation, self.model, self.layout, bool(world)))
        return {'success': True, 'code': errors.DONE, 'generation': self._generation,
                'kept_moves': not renumber, 'swap_s': time.perf_counter() - t0}

    def world_layout(self, model):
        """``(layout, device file)`` the device would run ``model`` with if it were swapped
        in whole (``replace_model(model, world=True)``): the device file it was opened with
        when its channels fit ``model``, else zero-config (device file None). Nothing
        changes; callers check a world's channels before they load it."""
        try:
            return Layout(model, self._file_spec), self._file_spec
        except DeviceError:
            return Layout(model, None), None

    @property
    def gravity_compensation(self):
        """Whether servos carry their links' weight (``gravity_compensation``): a model
        swapped in then has ``gravcomp`` written into it, so it no longer steps as written."""
        return self._gravcomp_on

    def _swap(self, s, model, layout, device_spec, world, renumber, code, ended,
              model_path, home=None):
        """Stepper thread, between chunks: the new model in, all or nothing."""
        saved = {k: getattr(self, k) for k in (
            'model', 'data', 'layout', 'spec', 'keyframe', 'keyframe_name', 'gravcomp_bodies',
            'model_path', '_planner')}
        old_model, old_data = s.model, s.data
        try:
            data = mujoco.MjData(model)
            if world:
                self.model, self.spec, self.layout = model, device_spec, layout
                connect = (device_spec or {}).get('connect', {})
                keyframe = connect.get('keyframe') if device_spec else \
                    keyframes.default_keyframe(model)
                self.keyframe = keyframes.keyframe_id(model, keyframe)
                self.keyframe_name = keyframe if self.keyframe is not None else None
                if self.keyframe is not None:
                    mujoco.mj_resetDataKeyframe(model, data, self.keyframe)
                data.time = old_data.time
                mujoco.mj_forward(model, data)
                self.model_path = model_path or self.model_path
            else:
                scene_edit.carry_state(old_model, old_data, model, data)
                if home:
                    scene_edit.put_at_home(old_model, model, data, home)
                self.model, self.layout = model, layout
                if self.keyframe is not None and self.keyframe >= model.nkey:
                    self.keyframe, self.keyframe_name = None, None
            if not (np.isfinite(data.qpos).all() and np.isfinite(data.qacc).all()):
                raise ModelError('the new model is not finite at its start pose; nothing '
                                 'was changed', where='model')
            self.data = data
            if self._gravcomp_on:
                self.gravcomp_bodies = drive_laws.servo_gravcomp(model, layout)
                mujoco.mj_forward(model, data)
            laws = drive_laws.build(model, layout, self.keyframe)
            planner = moves.Planner(model, layout)
            lidars = lidar_settings_of(model, self.spec)
        except BaseException:
            for k, v in saved.items():
                setattr(self, k, v)
            raise
        # From here on nothing can refuse: the old model's moves end, the new one runs.
        old_sp, old_names = s.setpoint.copy(), saved['layout'].actuators
        old_mode = s.position_mode()
        gone = [a for a, name in enumerate(old_names) if name not in layout.actuators]
        gone = self.runner.end_for_swap(saved['layout'], gone, renumber, code, ended,
                                        s.snapshot)      # their paths stop where they are
        plans = [p for p in s.running_plans() if p.release(gone)] if not renumber else ()
        self._planner = planner
        self.sensing.adopt(lidars)
        self._generation = self.world.follow(model)
        self.cameras.follow(model, self._generation)
        s.swap_model(model, data, laws=laws, keyframe=self.keyframe, plans=plans,
                     generation=self._generation)
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
        self.runner.close()
        if self.sandbox is not None:
            self.sandbox.close()
        self.cameras.close()

    @property
    def closed(self):
        return self.stepper.closed

    def __getattr__(self, name):
        """The calls that moved to the device's parts (``physics``, ``sensing``,
        ``cameras``) still answer under their old names, with a DeprecationWarning."""
        part = _MOVED.get(name)
        parts = self.__dict__
        if part is None or part not in parts:
            raise AttributeError(f'{type(self).__name__!r} object has no attribute {name!r}')
        warnings.warn(f'Device.{name} moved to Device.{part}.{name}', DeprecationWarning,
                      stacklevel=2)
        return getattr(parts[part], name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_MOVED = {
    **dict.fromkeys(('save_state', 'load_state', 'delete_state', 'state_names',
                     'set_joint_state', 'set_gravity', 'set_timestep', 'gravity', 'timestep',
                     'mass_matrix', 'inverse_dynamics', 'jacobian', 'pixel_to_world',
                     'randomize'), 'physics'),
    **dict.fromkeys(('sensor_groups', 'lidar_settings', 'lidar', 'report_contacts',
                     'apply_wrench', 'clear_wrenches', 'wrenches'), 'sensing'),
    **dict.fromkeys(('renderer', 'model_of', 'render_state', 'render_data', 'render'),
                    'cameras'),
}


def device_file_load(path):
    return devfile.load(path)


def open_device(device_file=None, model=None, **kw):
    """Connect: load the model, reset to the keyframe, check every map, start stepping."""
    return Device(device_file, model=model, **kw)
