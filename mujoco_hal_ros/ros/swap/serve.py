"""Everything that lets a robot stack swap the real arm for sim_node with no config change.

One call from the node that owns the Device: the joint_trajectory_controller interface
(what MoveIt and rviz drive), the topic_based_ros2_control command topic (what a
ros2_control set-up drives), simulation_interfaces where that package is installed (what
scenario and test tools drive), and the gripper action controllers (``GripperCommand`` and
``ParallelGripperCommand``, what MoveIt drives a gripper with). Each part declares its own
parameters, once, before sim_node checks the user's parameters for unknown names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TYPE_CHECKING

from ...errors import ConfigError
from ..bridge import CompletionBridge
from ..parameters import Param, ParameterTable
from .gripper_controller import (
    CONTROLLER as GRIPPER,
    GripperController,
    PARALLEL,
    PARALLEL_COMMAND,
)
from .topic_control import TopicControl
from .trajectory_controller import (
    CONTROLLER,
    controller_block,
    CONTROLLERS_FILE,
    nothing_to_serve,
    TrajectoryController,
)

if TYPE_CHECKING:     # the hints only
    from rclpy.node import Node

    from ...sim.ports import DeviceApi
    from ..sim.sim_interfaces import SimInterfaces

# What is attached; each part's own parameters are in its own table.
TABLE = ParameterTable([
    CONTROLLER,
    GRIPPER,
    PARALLEL,
    Param('simulation_interfaces', 'bool', True, 'Serve the simulation_interfaces services and '
          'action (where the package is installed).'),
    CONTROLLERS_FILE])


class SwapInterfaces:
    """What ``attach_swap_interfaces`` built; ``destroy()`` removes all of it."""

    def __init__(self, trajectory: TrajectoryController | None = None,
                 topic: TopicControl | None = None, simulation: SimInterfaces | None = None,
                 gripper: GripperController | None = None,
                 bridge: CompletionBridge | None = None, owns_bridge: bool = False,
                 parallel_gripper: GripperController | None = None) -> None:
        self.bridge = bridge
        self.owns_bridge = owns_bridge      # made for these parts: closed in destroy()
        self.trajectory = trajectory
        # every joint trajectory controller served: the one named by trajectory_controller
        # first (``trajectory``), then the controllers file's other ones (a dual-arm robot's)
        self.trajectories: list[TrajectoryController] = \
            [trajectory] if trajectory is not None else []
        self.gripper = gripper
        self.parallel_gripper = parallel_gripper
        self.topic = topic
        self.simulation = simulation
        # why a part serves nothing (a passive model), for the node to log once it is up
        self.not_served: list[str] = []

    def describe(self) -> list[str]:
        out: list[str] = []
        for trajectory in self.trajectories:
            n = trajectory.name
            out += [f'{n}/follow_joint_trajectory', f'{n}/joint_trajectory',
                    f'{n}/controller_state']
        for gripper in (self.gripper, self.parallel_gripper):
            if gripper is not None:
                out += gripper.describe()
        if self.topic is not None and self.topic.topic:
            out.append(self.topic.topic)
        if self.simulation is not None:
            out.append('simulation_interfaces (reset/step/get+set state/entities/'
                       'simulate_steps)')
        return out

    def destroy(self) -> None:
        for part in [*self.trajectories, self.gripper, self.parallel_gripper, self.topic,
                     self.simulation]:
            if part is not None:
                part.destroy()
        self.trajectories = []
        self.trajectory = self.gripper = self.parallel_gripper = None
        self.topic = self.simulation = None
        if self.bridge is not None and self.owns_bridge:
            self.bridge.close()
        self.bridge = None


def _file_block(path: str, name: str) -> dict[str, Any] | None:
    """The controllers file's ``<name>: ros__parameters:`` block (a gripper controller's
    ``joint`` and tolerances, as gripper_action_controller reads them), or None: the real
    arm's file sets the simulated gripper as it sets the arm's controller."""
    if not path:
        return None
    try:
        return controller_block(path, name)
    except ConfigError:
        return None                 # no such block: zero-config's gripper


def _share_fingers(a: GripperController | None, b: GripperController | None) -> None:
    """Two controllers on one finger: a goal on either preempts the other's."""
    if a is None or b is None or not (a.served and b.served):
        return
    ga, gb = a.gripper, b.gripper         # both served: both have a gripper
    if ga is not None and gb is not None and ga.channel == gb.channel:
        a.peers.append(b)
        b.peers.append(a)


def attach_swap_interfaces(node: Node, device: DeviceApi,
                           params: Mapping[str, Any] | None = None,
                           bridge: CompletionBridge | None = None) -> SwapInterfaces:
    """Attach the real-arm interfaces to ``node`` for ``device`` and return them.

    ``bridge``: the node's CompletionBridge; without one the parts share one of their own.

    ``params`` is unused by the parts (each reads its own ROS parameters) and kept so the
    caller can hand over its checked parameters when a part needs one later.
    """
    del params
    p = TABLE.declare(node)
    name, use_sim = p.trajectory_controller, p.simulation_interfaces
    shared = bridge or CompletionBridge(node)
    parts = SwapInterfaces(bridge=shared, owns_bridge=bridge is None)
    try:
        names = [name] if name else []
        if p.controllers_file:        # the file's every joint_trajectory_controller
            from ...mobile import config as controllers
            names += [n for n in controllers.read(p.controllers_file).of_type(controllers.ARM)
                      if n not in names]
        for each in names:
            why = nothing_to_serve(node, device, each, p.controllers_file)
            if why is not None:
                if each == name:
                    parts.not_served.append(why)
                continue
            parts.trajectories.append(TrajectoryController(node, device, each,
                                                           bridge=parts.bridge))
        parts.trajectory = parts.trajectories[0] if parts.trajectories else None
        if p.gripper_controller and p.gripper_controller == p.parallel_gripper_controller:
            raise ConfigError(f'gripper_controller and parallel_gripper_controller both name '
                              f'{p.gripper_controller!r}: both would serve '
                              f'{p.gripper_controller}/gripper_cmd; give them different '
                              "names, or '' to the one you do not use",
                              where='parameter parallel_gripper_controller')
        if p.gripper_controller:
            parts.gripper = GripperController(
                node, device, p.gripper_controller, bridge=parts.bridge,
                defaults=_file_block(p.controllers_file, p.gripper_controller))
        if p.parallel_gripper_controller:
            parts.parallel_gripper = GripperController(
                node, device, p.parallel_gripper_controller, bridge=parts.bridge,
                interface=PARALLEL_COMMAND,
                defaults=_file_block(p.controllers_file, p.parallel_gripper_controller))
        _share_fingers(parts.gripper, parts.parallel_gripper)
        parts.topic = TopicControl(node, device, bridge=parts.bridge)
        if parts.topic.not_served:
            parts.not_served.append(parts.topic.not_served)
        if use_sim:
            try:
                from ..sim.sim_interfaces import SimInterfaces
            except ImportError as err:
                node.get_logger().warning(f'simulation_interfaces not served: {err}')
            else:
                from ...sim.device import Device
                if isinstance(device, Device):
                    parts.simulation = SimInterfaces(node, device, shared)
                else:    # the world's interfaces: entities, stepping, the whole scene
                    node.get_logger().warning(
                        'simulation_interfaces not served: they are the whole world\'s, '
                        f'and this is {type(device).__name__}, not a Device')
    except BaseException:
        parts.destroy()
        raise
    return parts
