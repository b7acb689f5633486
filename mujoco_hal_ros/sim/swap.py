"""The model swap: a running device moved onto another ``MjModel`` as one transaction.

A spawn, a delete, a ``load_world`` or an ``unload_world`` (``world.edits``) and a task's
world (``tasks.device_runner``) each end in ``ModelSwap.replace_model``. What a device runs
is one value, ``ModelState`` (the model, its MjData, channels, device file, keyframe,
gravity-compensated bodies, model file, IK planner and scene generation); the swap owns it
(``device.swap.current``, which the device's ``model``, ``layout``... read). A swap builds
the next value whole, on the physics thread between two chunks, and installs it with one
assignment only after nothing can refuse any more; until then a failure leaves the old value
and the old model running, untouched.

Who owns what at a swap: the swap owns ``ModelState`` and the one lock every change of model
holds (scene edits hold it from start to end); the running moves end or go on
(``MoveRunner.end_for_swap``), sensing takes the new lidars, the world's queries and
snapshots follow (``World.follow``, the new generation), the cameras keep the new model
and the one before (``RenderRegistry.follow``), and the stepper takes the new model, data
and drive laws with the plans that go on (``Stepper.swap_model``). After the swap, on the
caller's thread, retired GL contexts are closed and the one "model swapped" event goes out
(``device.swaps``, ``sim.events``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
import logging
import threading
import time
from typing import Any, Protocol, TYPE_CHECKING

import mujoco
import numpy as np

from .. import errors
from ..config.channels import Layout
from ..errors import DeviceError, ModelError
from ..motion import move as moves
from ..sensors.device_sensors import lidar_settings_of
from ..world import scene as scene_edit
from ..world.scene import Scene
from . import drives as drive_laws, keyframes
from .events import ModelSwapped

if TYPE_CHECKING:
    from ..motion.runner import MoveRunner
    from ..render.registry import RenderRegistry
    from ..sensors.device_sensors import Sensing
    from ..world.world import World
    from .events import Swaps
    from .stepper import Snapshot, Stepper

LOG = logging.getLogger('mujoco_hal_ros.device')


@dataclass(frozen=True)
class ModelState:
    """What a device runs now, replaced whole by a swap (never edited in place)."""

    model: mujoco.MjModel
    data: mujoco.MjData             # the stepper's: only the physics thread touches it
    layout: Layout
    spec: dict[str, Any] | None     # the device file the channels come from (None: zero-config)
    keyframe: int | None
    keyframe_name: str | int | None   # as the device file gave it (a name, or an index)
    gravcomp_bodies: list[str]
    model_path: str
    planner: moves.Planner          # IK's private state over this model
    generation: int


def native_of(layout: Layout, setpoint: np.ndarray) -> dict[str, float]:
    """A setpoint as the audit writes it: actuator name (or id) -> value."""
    return {layout.actuators[a] or str(a): float(v) for a, v in enumerate(setpoint)}


class SwapHost(Protocol):
    """The parts of a device a swap tells (each follows the new model in its own way)."""

    @property
    def stepper(self) -> Stepper: ...

    @property
    def runner(self) -> MoveRunner: ...

    @property
    def sensing(self) -> Sensing: ...

    @property
    def world(self) -> World: ...

    @property
    def cameras(self) -> RenderRegistry: ...

    @property
    def swaps(self) -> Swaps: ...

    @property
    def snapshot(self) -> Snapshot: ...

    def record(self, kind: str, request: dict[str, Any], native: dict[str, float],
               sim_time: float | None = None) -> None: ...


class ModelSwap:
    """``device.swap``: the model a device runs now (``current``) and the one way to
    replace it (``replace_model``)."""

    def __init__(self, host: SwapHost, state: ModelState, *, file_spec: dict[str, Any] | None,
                 gravity_compensation: bool) -> None:
        self._host = host
        self.current = state
        self._file_spec = file_spec      # a loaded world uses the device file if it fits
        self.gravity_compensation = gravity_compensation
        self.lock = threading.RLock()    # one change of model at a time (scene edits too)

    def world_layout(self, model: mujoco.MjModel) -> tuple[Layout, dict[str, Any] | None]:
        """``(layout, device file)`` the device would run ``model`` with if it were swapped
        in whole (``replace_model(model, world=True)``): the device file it was opened with
        when its channels fit ``model``, else zero-config (device file None). Nothing
        changes; callers check a world's channels before they load it."""
        try:
            return Layout(model, self._file_spec), self._file_spec
        except DeviceError:
            return Layout(model, None), None

    def replace_model(self, model: Any, *, world: bool = False, why: str = 'the scene changed',
                      model_path: str | None = None, entity: str | None = None,
                      home: tuple[dict[str, float], dict[str, float]] | None = None,
                      ) -> dict[str, Any]:
        """Swap the running device onto ``model`` (an ``MjModel``, or an ``MjSpec`` that is
        compiled first) at a chunk boundary. Scene edits (``world.edits``) make the spec
        they built the next edit's start themselves, under the same ``lock``.

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
        with self.lock:
            return self._replace(model, world, why, model_path, entity, home)

    def _replace(self, model: Any, world: bool, why: str, model_path: str | None,
                 entity: str | None, home: Any) -> dict[str, Any]:
        host = self._host
        if isinstance(model, mujoco.MjSpec):
            model = Scene(spec=model).compile()
        if not isinstance(model, mujoco.MjModel):
            raise errors.InvalidArgument(f'expected an MjModel or MjSpec, got '
                                         f'{type(model).__name__}', where='model')
        now = self.current
        if world:
            layout, device_spec = self.world_layout(model)
            renumber = True
        else:
            device_spec = now.spec
            lost = scene_edit.lost_channels(now.model, model, entity)
            if lost:
                raise errors.InvalidArgument(
                    f'{why} would remove {", ".join(lost)} of the device; nothing was '
                    'changed', where='scene', allowed='edits that keep every actuator and '
                    'sensor')
            model.opt.timestep = now.model.opt.timestep
            model.opt.gravity[:] = now.model.opt.gravity
            layout = Layout(model, device_spec)
            renumber = scene_edit.renumbered(now.model, model)
        code = errors.STOPPED if world else errors.PREEMPTED
        ended = f'{why}: the device changed under the move' if world else \
            f'{why}: the device\'s joints were renumbered; send the goal again'
        t0 = time.perf_counter()
        old = None if world else (now.model, host.stepper.post(lambda s: copy.copy(s.data),
                                                               wait=True))
        scene_edit.trial_swap(model, old, why)
        try:
            # Sim-internal escape: the swap rebinds the stepper itself (Stepper.swap_model),
            # beyond what a closure's Physics offers; it runs on the physics thread all the same.
            stepper = host.stepper
            stepper.post(lambda _p: self._swap(stepper, model, layout, device_spec, world,
                                               renumber, code, ended, model_path, home),
                         wait=True, timeout=30.0)
        except mujoco.FatalError as exc:     # the state moved on since the trial; refused
            raise ModelError(f'{why}: MuJoCo failed on the new model ({exc}); nothing was '
                             f'changed: {scene_edit.memory_fix(model)}', where='scene') from None
        host.cameras.close_retired()   # GL contexts: freed here, never on the physics thread
        new = self.current
        host.record('replace_model', {'why': why, 'world': bool(world)},
                    native_of(new.layout, host.snapshot.setpoint))
        host.swaps.emit(ModelSwapped(new.generation, new.model, new.layout, bool(world)))
        return {'success': True, 'code': errors.DONE, 'generation': new.generation,
                'kept_moves': not renumber, 'swap_s': time.perf_counter() - t0}

    def _next_state(self, model: mujoco.MjModel, layout: Layout,
                    device_spec: dict[str, Any] | None, world: bool, model_path: str | None,
                    old_model: mujoco.MjModel, old_data: mujoco.MjData,
                    home: Any) -> ModelState:
        """The next ``ModelState``, built aside (stepper thread); raises with nothing
        changed when the new model cannot run."""
        now = self.current
        data = mujoco.MjData(model)
        if world:
            connect = (device_spec or {}).get('connect', {})
            name = connect.get('keyframe') if device_spec else keyframes.default_keyframe(model)
            keyframe = keyframes.keyframe_id(model, name)
            keyframe_name = name if keyframe is not None else None
            if keyframe is not None:
                mujoco.mj_resetDataKeyframe(model, data, keyframe)
            data.time = old_data.time
            mujoco.mj_forward(model, data)
            spec, path = device_spec, model_path or now.model_path
        else:
            scene_edit.carry_state(old_model, old_data, model, data)
            if home:
                scene_edit.put_at_home(old_model, model, data, home)
            keyframe, keyframe_name = now.keyframe, now.keyframe_name
            if keyframe is not None and keyframe >= model.nkey:
                keyframe, keyframe_name = None, None
            spec, path = now.spec, now.model_path
        if not (np.isfinite(data.qpos).all() and np.isfinite(data.qacc).all()):
            raise ModelError('the new model is not finite at its start pose; nothing '
                             'was changed', where='model')
        gravcomp = now.gravcomp_bodies
        if self.gravity_compensation:
            gravcomp = drive_laws.servo_gravcomp(model, layout)
            mujoco.mj_forward(model, data)
        return ModelState(model=model, data=data, layout=layout, spec=spec,
                          keyframe=keyframe, keyframe_name=keyframe_name,
                          gravcomp_bodies=gravcomp, model_path=path,
                          planner=moves.Planner(model, layout), generation=now.generation)

    def _swap(self, s: Any, model: mujoco.MjModel, layout: Layout,
              device_spec: dict[str, Any] | None, world: bool, renumber: bool, code: str,
              ended: str, model_path: str | None, home: Any = None) -> None:
        """Stepper thread, between chunks: the new model in, all or nothing."""
        host, old_state = self._host, self.current
        new = self._next_state(model, layout, device_spec, world, model_path, s.model, s.data,
                               home)
        laws = drive_laws.build(model, layout, new.keyframe)
        lidars = lidar_settings_of(model, new.spec)
        # From here on nothing can refuse: the old model's moves end, the new one runs.
        old_sp, old_names = s.setpoint.copy(), old_state.layout.actuators
        old_mode = s.position_mode()
        gone = [a for a, name in enumerate(old_names) if name not in layout.actuators]
        gone = host.runner.end_for_swap(old_state.layout, gone, renumber, code, ended,
                                        s.snapshot)      # their paths stop where they are
        plans = [p for p in s.running_plans() if p.release(gone)] if not renumber else ()
        host.sensing.adopt(lidars)
        generation = host.world.follow(model)
        self.current = new = replace(new, generation=generation)
        host.cameras.follow(model, generation)
        s.swap_model(model, new.data, laws=laws, keyframe=new.keyframe, plans=plans,
                     generation=generation)
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
        LOG.info('scene generation %d: %s', generation,
                 'moves kept' if not renumber else 'moves ended')
