"""The narrow doors a device's parts see of it: each part gets the protocol it uses.

The parts built with a ``Device`` (the running moves, sensing, the cameras, scene edits,
the world at run time, entities, the robots of the world) used to keep the whole device
and call back into any of it; a reader could not tell what a part depends on, and a part
could not be built over anything else. Each now takes one of the protocols below, which
list exactly what it reads and calls. ``Device`` satisfies them all; ``RobotView``
(``sim.robots``), which stands in for a device for one robot of the world, satisfies
``DeviceApi``, the calls a driver node makes, and every protocol built from the shared
pieces (``DeviceReads``, ``PhysicsDoor``, ``Audit``).

What a closure posted through ``on_physics`` may do on the physics thread is the stepper's
business (``sim/stepper.py``); here the closure's argument is left ``Any``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import threading
from typing import Any, Protocol, TYPE_CHECKING

if TYPE_CHECKING:                      # types only: no import at run time
    import mujoco

    from ..config.channels import Action, Layout
    from ..motion.move import Move
    from ..world.sandbox import Sandbox
    from .events import Swaps
    from .stepper import Snapshot


# --- the shared pieces ------------------------------------------------------------------
class PhysicsDoor(Protocol):
    """The one door to the physics thread: ``fn(stepper)`` runs there between two chunks."""

    def on_physics(self, fn: Callable[[Any], Any], wait: bool = True,
                   timeout: float = 10.0) -> Any: ...


class Audit(Protocol):
    """The device's audit: what was asked and what it set."""

    def record(self, kind: str, request: dict[str, Any], native: dict[str, float],
               sim_time: float | None = None) -> None: ...


class DeviceReads(Protocol):
    """The model that runs now, its channels, and the latest snapshot (read-only)."""

    @property
    def model(self) -> mujoco.MjModel: ...

    @property
    def layout(self) -> Layout: ...

    @property
    def snapshot(self) -> Snapshot: ...


# --- one protocol a part ----------------------------------------------------------------
class RobotOwners(Protocol):
    """Whose actuators are whose (``sim.robots.Robots``)."""

    def same_robot(self, a: Sequence[int], b: Sequence[int]) -> bool: ...


class MoveHost(DeviceReads, PhysicsDoor, Audit, Protocol):
    """What ``motion.runner.MoveRunner`` uses: reads, the door, the audit, the move
    parameters (``tolerance``, ``aim_tolerance``, ``action_wait``) and the robots."""

    @property
    def params(self) -> Mapping[str, float]: ...

    @property
    def robots(self) -> RobotOwners: ...


class TrajectoryHost(DeviceReads, PhysicsDoor, Audit, Protocol):
    """What ``motion.joint_trajectory`` runs a trajectory on: a device or one robot of it
    (``RobotView``): reads, the door, the audit, and ending the moves a trajectory takes
    the actuators of."""

    def preempt_moves_touching(self, actuators: Sequence[int]) -> None: ...


class SensingHost(PhysicsDoor, Audit, Protocol):
    """What ``sensors.device_sensors.Sensing`` uses: the model, the device file (its
    ``sensors:`` and ``lidars:``), the latest snapshot, the door and the audit."""

    @property
    def model(self) -> mujoco.MjModel: ...

    @property
    def spec(self) -> dict[str, Any] | None: ...

    @property
    def snapshot(self) -> Snapshot: ...


class CameraHost(Protocol):
    """What ``render.registry.RenderRegistry`` uses: the image channels, the latest
    snapshot, and whether the device is closed (no renderer after close)."""

    @property
    def layout(self) -> Layout: ...

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def closed(self) -> bool: ...


class ModelSwapper(Protocol):
    """The model swap (``sim.swap.ModelSwap``) as scene edits use it: one lock for every
    change of model, held by an edit from start to end, and the swap itself."""

    lock: threading.RLock

    def replace_model(self, model: Any, *, world: bool = False,
                      why: str = 'the scene changed', model_path: str | None = None,
                      entity: str | None = None,
                      home: tuple[dict[str, float], dict[str, float]] | None = None,
                      ) -> dict[str, Any]: ...


class SceneHost(Protocol):
    """What ``world.edits.SceneEdits`` reads of the device: the model's file, the
    sandbox untrusted resources go through (None: none), and the channels."""

    @property
    def model_path(self) -> str: ...

    @property
    def sandbox(self) -> Sandbox | None: ...

    @property
    def layout(self) -> Layout: ...


class GenerationModels(Protocol):
    """The model of a scene generation (the current one or the one before)."""

    def model_of(self, generation: int) -> mujoco.MjModel: ...


class EntitiesHost(PhysicsDoor, Audit, Protocol):
    """What ``sim.entities.Entities`` uses: the latest snapshot, the models by
    generation (``cameras``), the door and the audit."""

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def cameras(self) -> GenerationModels: ...


class DeviceState(DeviceReads, PhysicsDoor, Audit, Protocol):
    """The state every device answers, a world's or a robot's: its scene generation,
    parameters, swap events, and whether it is closed or paused."""

    @property
    def generation(self) -> int: ...

    @property
    def params(self) -> Mapping[str, float]: ...

    @property
    def swaps(self) -> Swaps: ...

    @property
    def closed(self) -> bool: ...

    @property
    def paused(self) -> bool: ...


class RobotWorld(DeviceState, Protocol):
    """What a ``sim.robots.RobotView`` asks of the world it is a part of: the world's
    reads and requests, each taking the robot's own channels (``layout``, ``planner``)."""

    @property
    def model_path(self) -> str: ...

    @property
    def moves(self) -> list[Move]: ...

    def describe(self) -> dict[str, Any]: ...

    def health(self) -> dict[str, Any]: ...

    def read(self, names: Any = None, snapshot: Snapshot | None = None, *,
             layout: Layout | None = None) -> dict[str, float]: ...

    def goals(self, setpoint: bool = False, *,
              layout: Layout | None = None) -> dict[str, float]: ...

    def set_goals(self, goals: Mapping[str, Any], *,
                  layout: Layout | None = None) -> dict[str, Any]: ...

    def move_to(self, args: Any = None, *, point: Any = None, site: str | None = None,
                speed: Any = None, aim: Any = None, wait: bool = True,
                timeout: float | None = None, path: str | None = None,
                tolerance: float | None = None, layout: Layout | None = None,
                planner: Any = None) -> Any: ...

    def hold(self, actuators: Sequence[int] | None = None) -> dict[str, Any]: ...

    def distance_to_go(self, move: Move | None = None) -> float: ...

    def preempt_moves_touching(self, actuators: Sequence[int]) -> None: ...


class DeviceApi(DeviceState, Protocol):
    """A device as a driver node uses it (``ros/sim``, ``ros/swap``): the world's
    ``Device``, or one robot of it (``RobotView``), which answers the same calls for its
    part only."""

    @property
    def move(self) -> Move | None: ...

    def describe(self) -> dict[str, Any]: ...

    def health(self) -> dict[str, Any]: ...

    def read(self, names: Any = None, snapshot: Snapshot | None = None) -> dict[str, float]:
        ...

    def goals(self, setpoint: bool = False) -> dict[str, float]: ...

    def set_goals(self, goals: Mapping[str, Any]) -> dict[str, Any]: ...

    def action(self, name: str) -> Action: ...

    def move_to(self, args: Any = None, *, point: Any = None, site: str | None = None,
                speed: Any = None, aim: Any = None, wait: bool = True,
                timeout: float | None = None, path: str | None = None,
                tolerance: float | None = None) -> Any: ...

    def run_action(self, name: str, args: Any = None, **kw: Any) -> Any: ...

    def hold(self) -> dict[str, Any]: ...

    def stop(self) -> dict[str, Any]: ...

    def distance_to_go(self, move: Move | None = None) -> float: ...

    def preempt_moves_touching(self, actuators: Sequence[int]) -> None: ...

    def pause(self, paused: bool = True) -> None: ...

    def step(self, n: int = 1, wait: bool = True) -> Any: ...

    def reset(self) -> None: ...


class DriveHost(DeviceReads, PhysicsDoor, Protocol):
    """What a drive controller (``mobile.base.BaseController``) uses of its device: the
    model and snapshots, the door, and a read-out after every chunk."""

    def on_every_chunk(self, fn: Callable[[Any], Any]) -> Callable[[], None]: ...


class RobotsFileHost(Protocol):
    """What the robots file (``world.robots_file.add_to``) uses of its device: the scene
    edits it spawns through and the robot registry it adds to."""

    @property
    def scene(self) -> Any: ...

    @property
    def robots(self) -> Any: ...
