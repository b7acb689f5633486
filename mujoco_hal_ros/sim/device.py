"""The simulated device: a MuJoCo model behind the device file's channels and limits.

``Device`` is what a driver node talks to. Every request is checked in the caller's thread
against the limits kernel and answered with a structured error before anything is posted
to the stepper, so a refused request changes nothing; accepted ones become setpoint paths
that the stepper thread follows in real time. The device wires the pieces together and
owns none of their logic: the channels and limits (``config``), the move_to pipeline
(``motion.move``) and its running moves (``motion.runner``), the physics thread
(``Stepper``), the robots of the world (``sim.robots``), the model swap and the model
that runs now (``device.swap``, ``sim.swap``), scene edits, the world at run time, sensing
and rendering (``device.scene``, ``physics``, ``sensing``, ``cameras``). Each part gets the
narrow interface it uses (``sim.ports``), not the device."""

from collections.abc import Callable, Collection, Mapping, Sequence
import logging
import os
import threading
import time
from typing import Any, TYPE_CHECKING
import warnings

import mujoco
import numpy as np

from .. import errors
from ..checks import known_name
from ..config import device_file as devfile, limits
from ..config.channels import Action, Layout
from ..config.units import parse_quantity
from ..errors import ConfigError, DeviceError, ModelError
from ..menagerie import builtin_arm
from ..motion import move as moves
from ..motion.move import Move  # noqa: F401 - importable from here, as it always was
from ..motion.runner import MoveRunner
from ..motion.trajectory import duration, MinJerkPlan
from ..render.registry import RenderRegistry
from ..sensors.device_sensors import Sensing
from ..world import scene as scene_edit
from ..world.edits import SceneEdits
from ..world.runtime import RunTimeWorld
from ..world.scene import load_model  # noqa: F401 - importable from here
from ..world.world import World
from . import drives as drive_laws, keyframes, names
from .events import Log, ModelSwapped, Swaps  # noqa: F401 - importable from here
from .physics import Physics
from .robots import Robots
from .snapshot import Snapshot
from .stepper import Stepper
from .swap import ModelState, ModelSwap, native_of

DEFAULTS = {'action_wait': 8.0, 'tolerance': 1e-3, 'aim_tolerance': np.deg2rad(3.0)}
LOG = logging.getLogger('mujoco_hal_ros.device')


def _log_start(model_path: str, keyframe_name: str | int | None, gravcomp_bodies: list[int],
               gravity_compensation: bool) -> None:
    where = (f'keyframe {keyframe_name!r}' if keyframe_name is not None
             else 'qpos0 (the model has no keyframe)')
    LOG.info('%s: starting at %s', model_path, where)
    if gravity_compensation:
        LOG.info('gravity compensation on (asked for): %d bodies weightless to their '
                 'servos, carried as actuator force, so effort shows it',
                 len(gravcomp_bodies))
    else:
        LOG.info('gravity compensation off: the model as written; position servos add '
                 'the torque that holds the pose to their ctrl, as a position-mode '
                 'driver does, within their force limits')


def _now(field: str, doc: str) -> Any:
    """A read-only attribute of the model that runs now (``device.swap.current``)."""
    return property(lambda self: getattr(self.swap.current, field), doc=doc)


class Device:
    """A MuJoCo model as a device: goals, move_to, hold, reads and cameras."""

    def __init__(self, device_file: str | os.PathLike[str] | dict[str, Any] | None = None, *,
                 model: str | os.PathLike[str] | None = None,
                 keyframe: str | int | None = None, real_time_factor: float | None = None,
                 start_paused: bool = False, environ: Mapping[str, str] | None = None,
                 spec: dict[str, Any] | None = None, gravity_compensation: bool | None = None,
                 move_tolerance: float | None = None) -> None:
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
            device_file, model = builtin_arm()    # as sim_node does with no parameters
        if spec is None and device_file is not None:
            spec = (devfile.parse(device_file) if isinstance(device_file, dict)
                    else device_file_load(device_file))
        connect = spec['connect'] if spec else {}
        if spec is None and not model:
            raise ConfigError('give a device file or a model path', where='device')
        model_path = devfile.model_path(spec, model, environ) if spec else model
        if not model_path:    # an empty device file and no model: what load_model says
            raise ModelError(f'expected an MJCF path, got {model_path!r}')
        if spec and spec.get('cameras'):     # cameras the device file puts on bodies
            from ..description.urdf_in import default_cache_dir
            from ..sensors.declared import with_cameras
            load_model(model_path)            # a missing or broken file says so first
            model_path = with_cameras(model_path, spec['cameras'],
                                      os.path.join(default_cache_dir(), 'cameras'))
        mj = load_model(model_path)
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
            mj.opt.timestep = dt
        layout = Layout(mj, spec)
        if gravity_compensation is None:
            gravity_compensation = connect.get('gravity_compensation', False)
        if not isinstance(gravity_compensation, (bool, np.bool_)):
            raise errors.InvalidArgument(f'gravity_compensation takes true or false, got '
                                         f'{gravity_compensation!r}',
                                         where='gravity_compensation')
        gravcomp = drive_laws.servo_gravcomp(mj, layout) if gravity_compensation else []
        keyframe = keyframe if keyframe is not None else connect.get('keyframe')
        if keyframe is None and spec is None:
            keyframe = keyframes.default_keyframe(mj)
        key_id = keyframes.keyframe_id(mj, keyframe)
        _log_start(model_path, keyframe if key_id is not None else None, gravcomp,
                   bool(gravity_compensation))
        rtf = connect.get('real_time_factor', 1.0) if real_time_factor is None \
            else real_time_factor
        rtf = limits.real_time_factor(rtf)
        data = mujoco.MjData(mj)
        if key_id is not None:
            mujoco.mj_resetDataKeyframe(mj, data, key_id)
        mujoco.mj_forward(mj, data)
        if not (np.isfinite(data.qpos).all() and np.isfinite(data.qacc).all()):
            raise ModelError('the model is not finite at its start pose', where='model')
        self.world = World(mj)
        # What runs now (model, data, channels, keyframe...): one value the swap owns
        self.swap = ModelSwap(self, ModelState(
            model=mj, data=data, layout=layout, spec=spec, keyframe=key_id,
            keyframe_name=keyframe if key_id is not None else None, gravcomp_bodies=gravcomp,
            model_path=model_path, planner=moves.Planner(mj, layout),
            generation=self.world.snapshots.generation),
            file_spec=spec, gravity_compensation=bool(gravity_compensation))
        self.audit = Log(2000)
        self.events = Log(200)
        self.runner = MoveRunner(self)   # the running moves, one a robot (motion.runner)
        self._chunk_hooks: tuple[Callable[[Physics], Any], ...] = ()  # on_every_chunk's
        laws = drive_laws.build(mj, layout, key_id)
        self.stepper = Stepper(mj, data, laws=laws,
                               real_time_factor=rtf, start_paused=bool(start_paused),
                               keyframe=key_id, on_chunk=self._after_chunk,
                               on_unstable=self._on_unstable, on_error=self._on_error,
                               relaw=lambda m: drive_laws.build(m, self.layout, self.keyframe))
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
        self.cameras = RenderRegistry(self, mj, self.generation)
        self.scene = SceneEdits(self, self.swap, model_path)   # spawn, delete, load, unload
        self.physics = RunTimeWorld(self, self.world, self.cameras, self._stop_move,
                                    self._native_all)   # states, teleports, queries...
        # Untrusted models (scene edits from a ROS peer) are read in a capped process first
        # (world.sandbox); None: this process reads them itself (a trusted Python caller).
        self.sandbox: Sandbox | None = None
        # Everything that caches this model's addresses follows a swap through here.
        self.swaps = Swaps()
        self.robots = Robots(self)     # the namespaced robots in this world, each a view
        self.record('connect', {'model': model_path, 'keyframe': keyframe},
                    self._native_all(sp))

    # --- what runs now: the swap's ModelState (``swap.current``), read-only here ------------
    model = _now('model', 'The MjModel that runs now.')
    data = _now('data', "The stepper's MjData: read it on the physics thread only (on_physics).")
    layout = _now('layout', 'The channels (config.channels.Layout) over the model.')
    spec = _now('spec', 'The device file the channels come from (None: zero-config).')
    keyframe = _now('keyframe', 'The keyframe id the device starts and resets at (or None).')
    keyframe_name = _now('keyframe_name', 'Its name (None without one).')
    gravcomp_bodies = _now('gravcomp_bodies', 'Bodies whose weight their servos carry.')
    model_path = _now('model_path', "The model's file.")
    generation = _now('generation', 'The scene generation of ``model``: it goes up with every '
                      'model swapped in, and every snapshot carries the one of its arrays.')
    _planner = _now('planner', "IK's private state over the model now.")

    @property
    def gravity_compensation(self) -> bool:
        """Whether servos carry their links' weight (``gravity_compensation``): a model
        swapped in then has ``gravcomp`` written into it, so it no longer steps as written."""
        return self.swap.gravity_compensation

    def _native_all(self, setpoint: np.ndarray) -> dict[str, float]:
        return native_of(self.layout, setpoint)

    # --- reading ----------------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot:
        return self.stepper.snapshot

    def describe(self) -> dict[str, Any]:
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

    def read(self, names: str | Collection[str] | None = None, snapshot: Snapshot | None = None,
             *, layout: Layout | None = None) -> dict[str, float]:
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

    def goals(self, setpoint: bool = False, *, layout: Layout | None = None) -> dict[str, float]:
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

    def on_physics(self, fn: Callable[[Physics], Any], wait: bool = True,
                   timeout: float = 10.0) -> Any:
        """The one door to the physics thread for code outside ``sim/``: ``fn(physics)``
        runs there between two chunks (``Stepper.post``); with ``wait``, its value comes
        back (or its exception is raised here). What a closure may do on that thread is
        what ``physics`` offers, one typed protocol (``sim.physics.Physics``); the object
        refuses use off that thread and after ``fn`` returned."""
        return self.stepper.post(fn, wait=wait, timeout=timeout)

    def on_every_chunk(self, fn: Callable[[Physics], Any]) -> Callable[[], None]:
        """Run ``fn(physics)`` (``sim.physics.Physics``) on the physics thread after every
        chunk of steps (after the moves settle): for light read-outs that must see every
        chunk, such as a drive controller's wheel odometry. Returns the call that removes it."""
        if not callable(fn):
            raise TypeError(f'expected a callable, got {fn!r}')
        self._chunk_hooks = self._chunk_hooks + (fn,)

        def remove() -> None:
            self._chunk_hooks = tuple(h for h in self._chunk_hooks if h is not fn)
        return remove

    def _after_chunk(self, stepper: Physics) -> None:
        self.runner.after_chunk(stepper)
        for hook in self._chunk_hooks:
            hook(stepper)

    @property
    def paused(self) -> bool:
        """Whether stepping is paused (``pause``); ``step`` then advances it."""
        return self.stepper.paused

    def health(self) -> dict[str, Any]:
        h = self.stepper.health()
        h['moving'] = self.snapshot.moving
        return h

    # --- goals ------------------------------------------------------------------------------
    def set_goals(self, goals: Mapping[str, float], *,
                  layout: Layout | None = None) -> dict[str, Any]:
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

        def apply(s: Physics) -> None:
            now = s.data.time
            start = s.goal_setpoint[acts]
            each = [duration([en - st], [r])
                    for st, en, r in zip(start, values, rates, strict=True)]
            s.take_over(MinJerkPlan(acts, start, values, now, each))
            self.preempt_moves_touching(acts)
            self.record('goals', request, native, sim_time=now)
        self.stepper.post(apply, wait=True)
        return {'success': True, 'code': errors.STARTED, 'targets': targets}

    def preempt_moves_touching(self, actuators: Sequence[int]) -> None:
        """A running move_to that drives any of these actuators ends PREEMPTED: another
        command took them over, so it cannot arrive as planned (stepper thread)."""
        self.runner.preempt_touching(actuators)

    # --- move_to ----------------------------------------------------------------------------
    def action(self, name: str) -> Action:
        return self.layout.actions[known_name(name, self.layout.actions, 'action')]

    def move_to(self, args: Mapping[str, Any] | None = None, *,
                point: Sequence[float] | np.ndarray | None = None, site: str | None = None,
                speed: float | None = None, aim: Sequence[float] | np.ndarray | None = None,
                wait: bool = True, timeout: float | None = None, path: str | None = None,
                tolerance: float | None = None, layout: Layout | None = None,
                planner: moves.Planner | None = None) -> Any:
        """Put the action's site at a point: IK, then a synchronised or Cartesian path.

        ``args`` are the action's arguments in their own units (x, y, z in mm...);
        ``point`` is a target in metres in the world frame, checked against the same limits.
        ``tolerance`` (metres) replaces the device's for this goal. Returns the result dict
        (DONE: within tolerance and settled; MISSED with the distance; STARTED when still
        moving after ``action_wait`` or ``timeout`` seconds), or the ``Move`` itself with
        ``wait=False``. ``layout`` and ``planner``: one robot's channels and IK
        (``RobotView.move_to``), whose joints alone may turn.
        """
        return self.runner.start(moves.action_for(layout or self.layout, site), args,
                                 point=point,
                                 speed=speed, aim=aim, wait=wait, timeout=timeout,
                                 path=path, tolerance=tolerance,
                                 planner=planner or self.swap.current.planner)

    def distance_to_go(self, move: Move | None = None) -> float:
        return self.runner.distance_to_go(move)

    @property
    def moves(self) -> list[Move]:
        """The move_to moves not finished yet (one a robot at most, ``sim.robots``)."""
        return self.runner.running

    @property
    def move(self) -> Move | None:
        """The latest move_to (a robot's own: ``RobotView.move``)."""
        return self.runner.latest

    # --- actions ----------------------------------------------------------------------------
    def run_action(self, name: str, args: Mapping[str, Any] | None = None, **kw: Any) -> Any:
        """Run a device-file action by name: ``hold``, or a move_to with its arguments."""
        act = self.action(name)
        if act.command == 'hold':
            if args:
                raise errors.InvalidArgument('hold takes no arguments', where=name)
            return self.hold()
        return self.runner.start(act, args, planner=self.swap.current.planner, **kw)

    def hold(self, actuators: Sequence[int] | None = None) -> dict[str, Any]:
        """End every move and freeze every setpoint (velocity servos hold their joints'
        positions, as a driver's position mode does); always accepted. ``actuators`` (ids):
        only these, and the moves that drive any of them (one robot of the world's)."""
        def apply(s: Physics) -> np.ndarray:
            if actuators is None:
                s.hold_now()
            else:
                s.hold_actuators(actuators)
            self.runner.end(errors.STOPPED, 'held', actuators=actuators)
            sp = s.setpoint.copy()
            sp[s.position_mode] = 0.0          # velocity servos: held still (zero speed)
            return sp
        sp = self.stepper.post(apply, wait=True, urgent=True)   # even inside a step(n)
        self.record('hold', {}, self._native_all(sp))
        return {'success': True, 'code': errors.DONE, 'message': 'holding'}

    def stop(self) -> dict[str, Any]:
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

    def _on_unstable(self, stepper: Stepper) -> None:
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

    def _safe_state_move(self, action: str) -> None:
        try:
            self.runner.start(self.action(action), {}, wait=False, planner=self._planner)
        except DeviceError as exc:
            self.events.add({'time': time.time(), 'sim_time': float(self.snapshot.time),
                             'code': exc.code, 'message': f'safe-state action {action!r} '
                             f'could not start after the instability: {exc}; holding'})

    def _on_error(self, stepper: Stepper, exc: BaseException) -> None:
        self.runner.end(errors.INTERNAL_ERROR, f'stepper error: {exc}; holding')
        self.events.add({'time': time.time(), 'sim_time': float(stepper.data.time),
                         'code': errors.INTERNAL_ERROR,
                         'message': f'stepper error {type(exc).__name__}: {exc}; holding'})

    # --- run-time control -------------------------------------------------------------------
    def pause(self, paused: bool = True) -> None:
        if not isinstance(paused, (bool, np.bool_)):
            raise errors.InvalidArgument(
                f'pause takes true or false, got {errors.shorten(paused)}', where='pause')
        self.stepper.pause(bool(paused))
        self.record('pause', {'paused': bool(paused)}, {})

    def step(self, n: int = 1, wait: bool = True) -> Any:
        """Advance ``n`` steps while paused (NOT_PAUSED otherwise); returns the sim time, or
        with ``wait=False`` a ``concurrent.futures.Future`` of it. A hold during the steps
        takes effect at once; the steps go on from the held setpoints."""
        n = limits.step_count(n)
        return self.stepper.step(n, wait=wait)

    def reset(self) -> None:
        """Back to the keyframe and hold there; simulated time keeps running forward.
        Live randomization is undone too: the keyframe comes back on the nominal model.
        Spawned entities go back to their own home (where their spawn put them), not to
        the world's qpos0 for them."""
        homes = self.scene.homes()

        def on_reset(s: Physics) -> np.ndarray:
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

    def set_real_time_factor(self, rtf: float) -> None:
        rtf = limits.real_time_factor(rtf)
        self.stepper.set_real_time_factor(rtf)
        self.record('real_time_factor', {'real_time_factor': rtf}, {})

    # --- the world at run time ------------------------------------------------------------
    def _stop_move(self, s: Physics, why: str) -> np.ndarray:
        """Stepper thread: the state was rewritten under the move; hold where it is now."""
        if self.moves:
            self.runner.end(errors.STOPPED, why, s.publish_snapshot())
        s.hold_now()
        return s.hold_pose()

    # --- audit ------------------------------------------------------------------------------
    def record(self, kind: str, request: dict[str, Any], native: dict[str, float],
               sim_time: float | None = None) -> None:
        """Add an audit entry: what was asked (``request``, in the caller's units) and what
        it set (``native``: actuator -> value), at ``sim_time`` (the latest snapshot's)."""
        if sim_time is None:
            snap = getattr(self.stepper, 'snapshot', None) if hasattr(self, 'stepper') \
                else None
            sim_time = snap.time if snap is not None else self.data.time
        self.audit.add({'wall': time.time(), 'sim_time': float(sim_time), 'kind': kind,
                        'request': request, 'native': native})

    # --- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        if self.stepper.closed:
            return
        self.stepper.close()
        self.runner.close()
        if self.sandbox is not None:
            self.sandbox.close()
        self.cameras.close()

    @property
    def closed(self) -> bool:
        return self.stepper.closed

    def __getattr__(self, name: str) -> Any:
        """The calls that moved to the device's parts (``physics``, ``sensing``,
        ``cameras``, ``scene``, ``swap``) still answer under their old names, with a
        DeprecationWarning naming the new one."""
        part, new = _MOVED.get(name, (None, name))
        parts = self.__dict__
        if part is None or part not in parts:
            raise AttributeError(f'{type(self).__name__!r} object has no attribute {name!r}')
        warnings.warn(f'Device.{name} moved to Device.{part}.{new}', DeprecationWarning,
                      stacklevel=2)
        return getattr(parts[part], new)

    def __enter__(self) -> 'Device':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_MOVED = {
    **{name: ('physics', name) for name in (
        'save_state', 'load_state', 'delete_state', 'state_names', 'set_joint_state',
        'set_gravity', 'set_timestep', 'gravity', 'timestep', 'mass_matrix',
        'inverse_dynamics', 'jacobian', 'pixel_to_world', 'randomize')},
    **{name: ('sensing', name) for name in (
        'sensor_groups', 'lidar_settings', 'lidar', 'report_contacts', 'apply_wrench',
        'clear_wrenches', 'wrenches')},
    **{name: ('cameras', name) for name in (
        'renderer', 'model_of', 'render_state', 'render_data', 'render')},
    'entity_names': ('scene', 'names'), 'entity_bodies': ('scene', 'bodies'),
    'spawn_entity': ('scene', 'spawn'), 'delete_entity': ('scene', 'delete'),
    'load_world': ('scene', 'load_world'), 'unload_world': ('scene', 'unload_world'),
    'replace_model': ('swap', 'replace_model'), 'world_layout': ('swap', 'world_layout'),
}


if TYPE_CHECKING:
    from ..world.sandbox import Sandbox
    from . import ports
    from .swap import SwapHost

    def _is_a_device(device: Device) -> tuple[
            ports.DeviceApi, ports.MoveHost, ports.TrajectoryHost, ports.SensingHost,
            ports.CameraHost, ports.SceneHost, ports.EntitiesHost, ports.RobotWorld,
            SwapHost]:
        """Type-checked: the device answers what its nodes and its parts use (mypy)."""
        return device, device, device, device, device, device, device, device, device


def device_file_load(path: str | os.PathLike[str]) -> dict[str, Any]:
    return devfile.load(path)


def open_device(device_file: str | os.PathLike[str] | dict[str, Any] | None = None,
                model: str | os.PathLike[str] | None = None, **kw: Any) -> Device:
    """Connect: load the model, reset to the keyframe, check every map, start stepping."""
    return Device(device_file, model=model, **kw)
