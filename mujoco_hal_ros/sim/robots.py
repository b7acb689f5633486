"""Several robots in one world: each a device of its own over its part of the model.

The world (``Device``) owns the model, the data and the physics thread; a robot spawned
into it under a name (``<namespace>/...``, as ``spawn_entity`` or sim_node's ``robots``
put it there) becomes a ``RobotView``: the joints, actuators, sites and cameras whose
names start with its prefix, with channels of its own (a ``Layout`` over the same model
that names only them), its own goals, move_to, hold and running move. A robot's requests
go through the world's one door, so two robots' moves run side by side, each preempting
only its own, and a hold on one robot leaves the other moving. ``Robots`` is the
registry: which prefixes are robots, and whose an actuator is.

A robot speaks its own names, as a real arm's driver in its namespace does: the world's
MjModel names the joint ``left/waist`` (one model holds both arms), the robot's channels,
joints, sites and goals say ``waist``, the name its URDF or MJCF gives, so the real arm's
device file, controllers file and clients work unchanged and two copies of one
description run side by side. Only TF frames carry the prefix (``left/base_link``), as
robot_state_publisher's ``frame_prefix`` does.

A ``RobotView`` sees of its world only ``sim.ports.RobotWorld`` and stands in for a device
where a driver node takes one (``sim.ports.DeviceApi``: it has every call listed there).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Collection, Mapping, Sequence
import threading
from typing import Any, NoReturn, TYPE_CHECKING

import mujoco
import numpy as np

from .. import errors
from ..checks import known_name
from ..config.channels import Action, Layout
from ..errors import DeviceError
from ..motion.gripper import finger_joints
from ..motion.move import Planner
from .physics import Physics

if TYPE_CHECKING:
    from ..motion.move import Move
    from .events import ModelSwapped, Swaps
    from .ports import DeviceApi, RobotWorld, TrajectoryHost
    from .snapshot import Snapshot


def _names(model: mujoco.MjModel, objtype: mujoco.mjtObj, count: int) -> list[str]:
    return [mujoco.mj_id2name(model, objtype, i) or '' for i in range(count)]


def robot_layout(model: mujoco.MjModel, prefix: str,
                 spec: dict[str, Any] | None = None) -> Layout:
    """A Layout over the world's ``model`` for the robot under ``prefix``, in the robot's
    own names (``prefix`` stripped; the rest of the world unnamed to it): zero-config (a
    read channel per hinge or slide joint, an image per camera, a ``<actuator>_goal`` per
    actuator), or ``spec``, a device file of the robot written for the real arm."""
    return Layout(model, spec, prefix=prefix)


class RobotView:
    """One robot of the world as a device: what ``Device`` answers, for its part only.

    Reads (``snapshot``, ``model``, ``generation``) are the world's; requests are checked
    against this robot's channels before they reach the world, so a goal for another
    robot's joint is UNKNOWN_NAME here and nothing moves."""

    def __init__(self, world: RobotWorld, prefix: str, namespace: str,
                 spec: dict[str, Any] | None = None) -> None:
        self.world = world
        self.prefix = prefix
        self.namespace = namespace
        self.spec = spec                    # the robot's own device file, or None
        self._layout: tuple[int, Layout] | None = None      # (generation, Layout)
        self._planner: tuple[Layout, Planner] | None = None   # (its Layout, Planner)
        self._lock = threading.Lock()

    # --- what it is -------------------------------------------------------------------
    @property
    def layout(self) -> Layout:
        """This robot's channels on the world's current model (rebuilt after a swap)."""
        gen = self.world.generation
        with self._lock:
            if self._layout is None or self._layout[0] != gen:
                self._layout = (gen, robot_layout(self.world.model, self.prefix, self.spec))
            return self._layout[1]

    @property
    def planner(self) -> Planner:
        """IK over this robot's joints on the world's current model (rebuilt after a swap):
        its own lock, so two robots' solves never wait on each other."""
        layout = self.layout
        with self._lock:
            if self._planner is None or self._planner[0] is not layout:
                self._planner = (layout, Planner(self.world.model, layout))
            return self._planner[1]

    @property
    def actuators(self) -> list[int]:
        """The world's actuator ids of this robot."""
        return [g.actuator for g in self.layout.goals.values()]

    @property
    def joint_names(self) -> list[str]:
        """This robot's joints, by its own names (``waist``, as its URDF has them)."""
        return [r.target for r in self.layout.reads if r.kind == 'joint']

    def world_name(self, name: str) -> str:
        """The world model's name of one of this robot's own names (``left/waist``)."""
        return f'{self.prefix}{name}'

    def tool(self) -> str:
        """Where move_to puts a point unless told: of this robot's sites (else bodies), the
        one at the end of its arm: the most actuated joints above it that are not fingers,
        then the fewest fingers (a hand, not a finger), then the last written."""
        m, prefix = self.world.model, self.prefix
        fingers = set(finger_joints(m))
        driven = {int(m.actuator_trnid[a, 0]) for a in range(m.nu)
                  if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT}

        def score(body: int) -> tuple[int, int]:
            arm = hand = 0
            while body > 0:
                for j in range(m.body_jntadr[body], m.body_jntadr[body] + m.body_jntnum[body]):
                    if j in fingers:
                        hand += 1
                    elif j in driven:
                        arm += 1
                body = int(m.body_parentid[body])
            return arm, -hand
        for kind, count, body_of in ((mujoco.mjtObj.mjOBJ_SITE, m.nsite, m.site_bodyid),
                                     (mujoco.mjtObj.mjOBJ_BODY, m.nbody, range(m.nbody))):
            mine = [(score(int(body_of[i])), i, mujoco.mj_id2name(m, kind, i))
                    for i in range(count)
                    if (mujoco.mj_id2name(m, kind, i) or '').startswith(prefix)]
            mine = [c for c in mine if c[0][0] > 0]
            if mine:
                return max(mine)[2][len(prefix):]          # the robot's own name
        raise DeviceError(errors.INVALID_ARGUMENT, f'robot {self.namespace!r} has no site '
                          'or body that its joints move', where='site')

    def describe(self) -> dict[str, Any]:
        desc = self.layout.describe()
        snap = self.world.snapshot
        desc.update({'device': f'{self.namespace} (simulated, in {self.world.model_path})',
                     'id': f'{self.world.describe()["id"]}/{self.namespace}',
                     'namespace': self.namespace, 'prefix': self.prefix,
                     'model': self.world.model_path,
                     'timestep': self.world.model.opt.timestep, 'keyframe': None,
                     'hazard': 'none', 'safe_state': {'action': 'hold'},
                     'params': dict(self.world.params), 'zero_config': self.spec is None,
                     'actuators': [{'name': g.actuator_name, 'drive': g.drive,
                                    'joint': self.layout.joints[g.joint] if g.joint >= 0
                                    else None, 'goal': g.name}
                                   for g in self.layout.goals.values()],
                     'gravity_compensated': [], 'real_time_factor':
                         self.world.describe()['real_time_factor'],
                     'joints': self.joint_names, 'sim_time': float(snap.time)})
        return desc

    # --- reading ------------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot:
        return self.world.snapshot

    @property
    def model(self) -> mujoco.MjModel:
        return self.world.model

    @property
    def generation(self) -> int:
        return self.world.generation

    @property
    def params(self) -> Mapping[str, float]:
        return self.world.params

    @property
    def swaps(self) -> Swaps:
        return self.world.swaps

    @property
    def closed(self) -> bool:
        return self.world.closed

    @property
    def paused(self) -> bool:
        return self.world.paused

    def on_physics(self, fn: Callable[[Physics], Any], wait: bool = True,
                   timeout: float = 10.0) -> Any:
        """The world's door to the physics thread (``Device.on_physics``)."""
        return self.world.on_physics(fn, wait=wait, timeout=timeout)

    def preempt_moves_touching(self, actuators: Sequence[int]) -> None:
        """Stepper thread: a trajectory took these actuators (``Device``'s)."""
        self.world.preempt_moves_touching(actuators)

    def record(self, kind: str, request: dict[str, Any], native: dict[str, float],
               sim_time: float | None = None) -> None:
        """An audit entry in the world's log, marked with this robot's namespace."""
        self.world.record(kind, dict(request, robot=self.namespace), native, sim_time)

    def read(self, names: str | Collection[str] | None = None,
             snapshot: Snapshot | None = None) -> dict[str, float]:
        mine = [r.name for r in self.layout.reads]
        if names is None:
            names = mine
        elif isinstance(names, str):
            names = [names]
        if isinstance(names, (list, tuple, set, frozenset)):
            for n in names:
                known_name(n, mine, 'read channel')
        return self.world.read(names, snapshot, layout=self.layout)

    def goals(self, setpoint: bool = False) -> dict[str, float]:
        mine = self.layout.goals
        return {n: v for n, v in self.world.goals(setpoint, layout=self.layout).items()
                if n in mine}

    def health(self) -> dict[str, Any]:
        h = self.world.health()
        h['moving'] = self.move is not None
        return h

    # --- requests -----------------------------------------------------------------------
    def set_goals(self, goals: Mapping[str, float]) -> dict[str, Any]:
        """``Device.set_goals`` on this robot's channels only (all or nothing)."""
        return self.world.set_goals(goals, layout=self.layout)

    def action(self, name: str) -> Action:
        return self.layout.actions[known_name(name, self.layout.actions, 'action')]

    def move_to(self, args: Mapping[str, Any] | None = None, *,
                point: Sequence[float] | np.ndarray | None = None, site: str | None = None,
                **kw: Any) -> Any:
        """``Device.move_to`` for a site or body of this robot (its ``tool()`` unless
        named, by its own name): IK turns this robot's joints only."""
        layout = self.layout
        if site in (None, ''):
            site = self.tool()
        elif not isinstance(site, str) or site not in layout.sites + layout.bodies:
            mine = [n for n in layout.sites + layout.bodies if n]
            raise errors.UnknownName('site or body of this robot', site, mine)
        return self.world.move_to(args, point=point, site=site, layout=self.layout,
                                  planner=self.planner, **kw)

    def run_action(self, name: str, args: Mapping[str, Any] | None = None,
                   **_kw: Any) -> dict[str, Any]:
        """A robot's one action is ``hold`` (it has no device file of its own)."""
        self.action(name)                      # UNKNOWN_NAME for any other
        if args:
            raise errors.InvalidArgument('hold takes no arguments', where=name)
        return self.hold()

    def hold(self) -> dict[str, Any]:
        """Hold this robot: its setpoints freeze and its move ends; the others go on."""
        return self.world.hold(actuators=self.actuators)

    def stop(self) -> dict[str, Any]:
        return self.hold()

    @property
    def move(self) -> Move | None:
        """This robot's running move_to, or None."""
        mine = set(self.actuators)
        running = [m for m in self.world.moves if set(m.actuators) & mine]
        return running[-1] if running else None

    def distance_to_go(self, move: Move | None = None) -> float:
        return self.world.distance_to_go(move or self.move)

    def pause(self, *_args: Any, **_kw: Any) -> NoReturn:
        """Pause, step and reset are the world's: refused here, nothing changes."""
        raise DeviceError(errors.INVALID_ARGUMENT, 'pause, step and reset act on the whole '
                          'world: call them on the node\'s own namespace', where='robot')

    step = reset = pause


class Robots:
    """The robots of one world by namespace; whose an actuator is."""

    def __init__(self, world: RobotWorld) -> None:
        self.world = world
        self._views: dict[str, RobotView] = {}   # namespace -> RobotView
        self._prefixes: tuple[str, ...] = ()   # read on the physics thread: replaced whole
        self._lock = threading.Lock()
        # (namespace, why): a swap took them
        self.removed: collections.deque[tuple[str, str]] = collections.deque(maxlen=100)
        self._unsubscribe = world.swaps.subscribe(self._follow)

    def _follow(self, event: ModelSwapped) -> None:
        """A model swap: a robot whose actuators are all gone (its entity deleted, another
        world loaded) stops being one."""
        names = set(event.layout.actuators)
        for view in self.views():
            if not any(a.startswith(view.prefix) for a in names):
                self.remove(view.namespace)
                self.removed.append((view.namespace, 'its actuators left the world'))

    def add(self, namespace: str, prefix: str | None = None,
            spec: dict[str, Any] | None = None) -> RobotView:
        """Make the entity under ``prefix`` (``<namespace>/`` unless given) a robot of its
        own, on ``spec`` (its device file, in its own names) or zero-config; refused when
        the world has no actuator of it, the namespace is taken or the device file does not
        fit it (nothing changed)."""
        if not isinstance(namespace, str) or not namespace.strip('/'):
            raise errors.InvalidArgument(f'a robot needs a namespace, got {namespace!r}',
                                         where='namespace')
        namespace = namespace.strip('/')
        prefix = prefix or f'{namespace}/'
        actuators = _names(self.world.model, mujoco.mjtObj.mjOBJ_ACTUATOR,
                           self.world.model.nu)
        if not any(a.startswith(prefix) for a in actuators):
            raise errors.InvalidArgument(f'nothing in the world is named {prefix}...: a '
                                         'robot needs actuators of its own', where='namespace')
        with self._lock:
            if namespace in self._views:
                raise errors.InvalidArgument(f'robot {namespace!r} exists already',
                                             where='namespace')
            view = RobotView(self.world, prefix, namespace, spec)
            if spec is not None and not view.layout.goals:   # builds it: a misfit refused
                raise errors.InvalidArgument(f'the device file of robot {namespace!r} has '
                                             'no goal channel', where='device_file')
            self._views[namespace] = view
            self._prefixes = tuple(v.prefix for v in self._views.values())
        return view

    def remove(self, namespace: str) -> RobotView | None:
        with self._lock:
            view = self._views.pop(namespace, None)
            self._prefixes = tuple(v.prefix for v in self._views.values())
        return view

    def get(self, namespace: str) -> RobotView | None:
        return self._views.get(namespace)

    def names(self) -> list[str]:
        return list(self._views)

    def views(self) -> list[RobotView]:
        return list(self._views.values())

    def claimed(self, name: str) -> bool:
        """Whether a joint, actuator or body name belongs to one of the robots."""
        return any(name.startswith(p) for p in self._prefixes)

    def owner(self, actuators: Sequence[int]) -> str:
        """The prefix of the robot these actuator ids belong to ('' for the world's own)."""
        names = self.world.layout.actuators
        for p in self._prefixes:
            if all(names[a].startswith(p) for a in actuators if a < len(names)):
                return p
        return ''

    def same_robot(self, a: Sequence[int], b: Sequence[int]) -> bool:
        """Whether a move over actuators ``a`` is preempted by one over ``b``: they share
        an actuator, or both are the same robot's."""
        if set(np.asarray(a).tolist()) & set(np.asarray(b).tolist()):
            return True
        return self.owner(a) == self.owner(b)


if TYPE_CHECKING:
    def _stands_in(view: RobotView) -> tuple[DeviceApi, TrajectoryHost]:
        """Type-checked: a robot of the world answers every call of a device (mypy)."""
        return view, view
