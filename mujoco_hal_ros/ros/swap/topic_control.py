"""The topic_based_ros2_control contract: joint commands in, joint_states out.

A ros2_control set-up that runs its controllers against ``topic_based_ros2_control`` (the
hardware plugin Isaac Sim and other simulators use) publishes a ``sensor_msgs/JointState``
whose positions are the position command interfaces, and reads the robot back from
``joint_states``. sim_node already publishes ``joint_states``; this subscribes the command
topic and puts every message through the device's limits kernel, all or nothing, so a
controller bug cannot drive the simulated arm past its device file.

A message is checked in the subscription callback (a refused one counts and is logged at
once); with the node's CompletionBridge the checked command is then applied on its worker,
since set_goals waits for the stepper (behind a long ``step(n)`` if one runs). The newest
command wins: one the next message replaced before the worker took it is dropped, as a
full subscription queue drops it, and counts in neither ``applied`` nor ``refused``.
"""

from __future__ import annotations

from collections.abc import Iterable
import threading
from typing import Any, TYPE_CHECKING

from sensor_msgs.msg import JointState

from ...checks import unique_names
from ...config import limits
from ...errors import DeviceError, InvalidArgument, UnknownName
from ...motion import joint_trajectory as jt
from .. import conversions as cv
from ..parameters import Param, ParameterTable

if TYPE_CHECKING:     # the hints only
    from rclpy.node import Node
    from rclpy.subscription import Subscription

    from ...sim.ports import DeviceApi
    from ..bridge import CompletionBridge

TABLE = ParameterTable([Param(
    'joint_commands_topic', 'string', 'joint_commands', 'sensor_msgs/JointState topic whose '
    'positions command the joints (the topic_based_ros2_control contract). Empty: not '
    'subscribed.')])


class TopicControl:
    """Subscribes ``joint_commands_topic``; positions go to ``Device.set_goals``."""

    def __init__(self, node: Node, device: DeviceApi, topic: str | None = None,
                 bridge: CompletionBridge | None = None) -> None:
        self.node = node
        self.device = device
        self.bridge = bridge             # None: commands are applied in the callback
        self._lock = threading.Lock()
        # the checked command the worker has not taken
        self._pending: dict[str, float] | None = None
        self.log = node.get_logger()
        if topic is None:
            topic = TABLE.declare(node).joint_commands_topic
        self.topic = topic
        self.goals = jt.trajectory_joints(device.layout)
        self.applied = 0
        self.refused = 0
        self.last_error: str | None = None
        self._sub: Subscription | None = None
        self.not_served = ''       # why nothing is subscribed, for the node's start-up log
        if topic and not self.goals:
            # a passive or torque-only model: nothing a position command could move
            self.not_served = (f'{topic}: not subscribed: no goal channel drives a joint to '
                               'a position')
            self.topic = ''
        elif topic:
            self._sub = node.create_subscription(JointState, topic, self._on_command, 10)

    def command(self, names: Iterable[str], positions: Iterable[float]) -> dict[str, Any]:
        """{joint: position (rad or m)} -> one all-or-nothing ``set_goals`` in channel units."""
        return self.device.set_goals(self.request(names, positions))

    def request(self, names: Iterable[str], positions: Iterable[float]) -> dict[str, float]:
        """The checked ``set_goals`` request of a command (channel units); DeviceError with
        the reason when any of it is refused."""
        names = unique_names(names, 'name', 'joint')   # [pan, pan]: which one applies?
        positions = list(positions)
        if not positions:
            raise InvalidArgument('the command carries no positions; this device takes '
                                  'position commands', where='position')
        if len(positions) != len(names):
            raise InvalidArgument(f'{len(positions)} positions for {len(names)} names',
                                  where='position', allowed='one position per name')
        request: dict[str, float] = {}
        for name, q in zip(names, positions, strict=True):
            goal = self.goals.get(name)
            if goal is None:
                raise UnknownName('joint', name, list(self.goals), where='name')
            value = float(goal.to_unit(q))
            for bound in (goal.min, goal.max):   # radians <-> degrees round trip at a limit
                if bound is not None and abs(value - bound) <= 1e-9 * max(1.0, abs(bound)):
                    value = bound
            request[goal.name] = value
        limits.check_goals(self.device.layout, request)
        return request

    def _on_command(self, msg: JointState) -> None:
        if self.bridge is None:
            try:
                self.command(msg.name, msg.position)
                self.applied += 1
            except DeviceError as exc:
                self._refused(exc)
            return
        try:
            request = self.request(msg.name, msg.position)
        except DeviceError as exc:
            self._refused(exc)
            return
        with self._lock:
            queue = self._pending is None
            self._pending = request
        if queue:
            self.bridge.post(self._apply)

    def _apply(self) -> None:
        """Worker: the newest checked command to the device."""
        with self._lock:
            request, self._pending = self._pending, None
        if request is None:
            return
        try:
            self.device.set_goals(request)
            self.applied += 1
        except DeviceError as exc:
            self._refused(exc)

    def _refused(self, exc: DeviceError) -> None:
        self.refused += 1
        self.last_error = str(exc)
        self.log.warning(f'{self.topic}: command refused, nothing applied: '
                         f'{cv.error_line(exc)}',
                         throttle_duration_sec=1.0)

    def destroy(self) -> None:
        if self._sub is not None:
            self.node.destroy_subscription(self._sub)
            self._sub = None
