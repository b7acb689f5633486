"""Each robot of the world served under its own namespace (``sim.robots`` is the core).

A robot gets what a real arm's driver serves beside it: ``<ns>/joint_states`` (its
joints only, from the node's state thread), ``<ns>/move_to``, ``<ns>/hold``,
``<ns>/set_goals``, ``<ns>/run_action``, ``<ns>/describe``, ``<ns>/goals/<channel>``,
``<ns>/arm_controller/follow_joint_trajectory`` and, where it has fingers,
``<ns>/gripper_controller/gripper_cmd``; ``<ns>/robot_description`` when it came from a
URDF. Every name a robot serves is its own (``waist``, as its URDF or MJCF has it), so the
real arm's controllers file (the robots file's ``controllers_file``) and clients work
unchanged; only ``/tf`` frames carry its prefix (``left/base_link``). The node keeps the
world's own: ``/clock``, one ``/tf`` tree, reset, pause, step, and a hold that holds every
robot.

Robots come from the ``robots`` file at start, and from ``spawn_entity`` with an
``entity_namespace``: every model swap, ``RobotsServed`` makes each spawned entity that
brought actuators under a namespace a robot, and takes down the interfaces of a robot
whose entity was deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
import threading
from typing import Any, TYPE_CHECKING

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from ...errors import ConfigError, DeviceError
from ..swap.gripper_controller import GripperController
from ..swap.trajectory_controller import controller_block, TrajectoryController
from .control import Control

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.node import Node
    from rclpy.publisher import Publisher

    from ...sim.device import Device
    from ...sim.robots import RobotView
    from ...world.robots_file import RobotEntry
    from ..bridge import CompletionBridge
    from . import mobile
    from .streams import StatePublisher

LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                     reliability=ReliabilityPolicy.RELIABLE)


def gripper_settings(entry: RobotEntry | None) -> dict[str, Any]:
    """A robots-file robot's own gripper_controller settings: its controllers file's
    ``gripper_controller`` block (gripper_action_controller's ``joint``, tolerances), its
    ``gripper_joint`` over that; {} without either."""
    out = {}
    controllers = getattr(entry, 'controllers_file', None)
    if controllers:
        try:
            out = controller_block(controllers, 'gripper_controller')
        except ConfigError:
            out = {}                    # the file has no gripper_controller: zero-config's
    joint = getattr(entry, 'gripper_joint', None)
    if joint:
        out = dict(out, joint=joint)
    return out


class RobotInterfaces:
    """One robot's services, actions and topics on ``node`` (its joint_states are the
    state publisher's)."""

    def __init__(self, node: Node, view: RobotView, bridge: CompletionBridge,
                 urdf_text: str | None = None, entry: RobotEntry | None = None,
                 device: Device | None = None) -> None:
        # entry: the robots file's entry (its controllers_file and gripper_joint), or None;
        # device: the world's (a drive controller runs on it)
        self.view = view
        self.node = node
        ns = view.namespace
        log = node.get_logger()
        controllers = getattr(entry, 'controllers_file', None)
        self.control: Control | None = None
        self.trajectory: TrajectoryController | None = None
        self.gripper: GripperController | None = None
        self.description: Publisher | None = None
        self.drives: list[mobile.DriveServed] = []
        try:
            self.control = Control(node, view, bridge, namespace=ns)
            from ...mobile import config as drive_config
            blocks = drive_config.read(controllers).blocks if controllers else {}
            try:
                if controllers and 'arm_controller' not in blocks:
                    # a base's own file (a drive controller only) is fine
                    log.info(f'{ns}/arm_controller not served: {controllers} has no '
                             'arm_controller block')
                else:
                    self.trajectory = TrajectoryController(node, view, 'arm_controller',
                                                           bridge=bridge, namespace=ns,
                                                           controllers_file=controllers)
            except ConfigError as err:        # nothing a joint trajectory could move
                if controllers:
                    raise                     # the user's own file: say what is wrong
                log.info(f'{ns}/arm_controller not served: {err}')
            self.gripper = GripperController(node, view, 'gripper_controller', bridge=bridge,
                                             namespace=ns, defaults=gripper_settings(entry))
            if controllers and device is not None:      # its base's drive controller
                from .mobile import DriveServed, for_robot
                for config in drive_config.read(controllers).drives:
                    self.drives.append(DriveServed(
                        node, device, for_robot(config, ns, view.prefix), None))
            if urdf_text:
                self.description = node.create_publisher(String, f'{ns}/robot_description',
                                                         LATCHED)
                self.description.publish(String(data=urdf_text))
        except BaseException:
            self.destroy()
            raise

    def gripper_text(self) -> str:
        """The gripper joint and range for the start-up log ('no gripper' without one)."""
        g = self.gripper.gripper if self.gripper is not None else None
        return 'no gripper' if g is None else f'gripper {g.joint} [{g.lo:g}, {g.hi:g}]'

    def describe(self) -> list[str]:
        ns = self.view.namespace
        out = [f'{ns}/joint_states'] + (self.control.describe() if self.control is not None
                                        else [])        # destroyed: nothing served
        if self.trajectory is not None:
            out.append(f'{ns}/arm_controller/follow_joint_trajectory')
        out += self.gripper.describe() if self.gripper is not None else []
        return out + [t for d in self.drives for t in d.topics]

    def destroy(self) -> None:
        for part in (*self.drives, self.trajectory, self.gripper, self.control):
            if part is not None:
                part.destroy()
        if self.description is not None:
            self.node.destroy_publisher(self.description)
        self.control = self.trajectory = self.gripper = self.description = None
        self.drives = []


class RobotsServed:
    """The robots of the node's world, each with its ``RobotInterfaces``."""

    def __init__(self, node: Node, device: Device, bridge: CompletionBridge,
                 state: StatePublisher, urdf_texts: Mapping[str, str] | None = None,
                 entries: Mapping[str, RobotEntry] | None = None) -> None:
        self.node, self.device, self.bridge, self.state = node, device, bridge, state
        self.urdf_texts = dict(urdf_texts or {})
        self.entries = dict(entries or {})     # namespace -> its robots file entry
        self.served: dict[str, RobotInterfaces] = {}     # namespace -> RobotInterfaces
        self._lock = threading.Lock()
        self._closed = False
        self.follow()
        self._unsubscribe = device.swaps.subscribe(lambda _event: self.follow())

    def follow(self) -> None:
        """Spawned entities under a namespace that brought actuators become robots; robots
        whose entity went are taken down; the state thread publishes what is left."""
        with self._lock:
            if self._closed:
                return
            robots = self.device.robots
            for entity in self.device.scene.names():
                ns = entity.rsplit('/', 1)[0] if '/' in entity else ''
                if ns and robots.get(ns) is None and not any(
                        v.prefix == f'{entity}/' for v in robots.views()):
                    try:
                        robots.add(ns, prefix=f'{entity}/')
                    except DeviceError:
                        pass        # an object without actuators, or the namespace taken
            views = {v.namespace: v for v in robots.views()}
            for ns in [n for n in self.served if n not in views]:
                self.served.pop(ns).destroy()
                self.node.get_logger().info(f'robot {ns} removed: its entity left the world')
            for ns, view in views.items():
                if ns not in self.served:
                    self.served[ns] = RobotInterfaces(self.node, view, self.bridge,
                                                      self.urdf_texts.get(ns),
                                                      self.entries.get(ns), self.device)
                    self.node.get_logger().info(
                        f'robot {ns}: {len(view.joint_names)} joints, '
                        f'{self.served[ns].gripper_text()}, serving '
                        + ', '.join(self.served[ns].describe()[:4]) + ', ...')
            self.state.set_robots(list(views.values()))

    def describe(self) -> list[str]:
        return [name for r in self.served.values() for name in r.describe()]

    def goals_running(self) -> int:
        return sum(r.control.goals_running for r in self.served.values()
                   if r.control is not None)

    def destroy(self) -> None:
        with self._lock:
            self._closed = True
            self._unsubscribe()
            for r in self.served.values():
                r.destroy()
            self.served.clear()
