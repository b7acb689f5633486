"""The gripper controllers' ROS interfaces: ``<name>/gripper_cmd`` as GripperCommand
(gripper_action_controller) and as ParallelGripperCommand (parallel_gripper_action_controller).

MoveIt drives a gripper through ``control_msgs/action/GripperCommand`` on the controller
its ``moveit_controllers.yaml`` names (``gripper_controller`` on a ros2_control arm); on
Jazzy it drives a parallel gripper through ``control_msgs/action/ParallelGripperCommand``
on the ``parallel_gripper_action_controller`` its config names. One class serves either:
only the goal and result messages differ (``_Single``, ``_Parallel``).

The semantics are ros2_controllers': the commanded position is the finger joint's
(``gripper.Gripper``: metres for Panda's ``finger_joint1``), the goal succeeds with
``reached_goal`` once the joint is within ``goal_tolerance``, and a finger held still short
of it (an object in the hand) for ``stall_timeout`` seconds is ``stalled``: succeeded with
``allow_stalling``, aborted without, as there. A new goal preempts the running one, on
either action when both drive the same finger; cancel holds the fingers where they are.
GripperCommand's ``max_effort`` and ParallelGripperCommand's velocity and effort limits
(these checked: finite, not negative) are not applied: the simulated actuator has the force
range of the model, and the effort reported is the one it exerts. A ParallelGripperCommand
names its one joint (or nothing) and gives one position; anything else is rejected in the
goal callback with the reason logged.

Like the trajectory controller, callbacks never wait on motion or on the stepper: a goal's
set_goals (and a cancel's hold) runs on the CompletionBridge's worker, and the execute
coroutine awaits a future that the bridge's steady-clock checks complete, so a paused
simulation, a long ``step(n)`` or a single-threaded executor keeps serving.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
import threading
import time
from typing import Any, TYPE_CHECKING, TypeAlias

from control_msgs.action import GripperCommand
from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from sensor_msgs.msg import JointState

from ...errors import ConfigError, DeviceError, UNKNOWN_NAME
from ...motion import gripper as gr
from ..bridge import CompletionBridge, Ticker
from ..guard import ActionServer  # every callback guarded
from ..parameters import Bounds, Param, ParameterTable
from .trajectory_controller import finish_goal

if TYPE_CHECKING:     # the hints only
    from rclpy.action.server import ServerGoalHandle
    from rclpy.node import Node

    from ...config.channels import GoalChannel, Layout
    from ...sim.events import ModelSwapped
    from ...sim.ports import DeviceApi

    GoalHandle: TypeAlias = ServerGoalHandle

try:
    from control_msgs.action import ParallelGripperCommand
except ImportError:          # a control_msgs older than Jazzy's has no such action
    ParallelGripperCommand = None

CHECK_HZ = 50.0
RESULT_TIMEOUT_S = 5
NOT_NEGATIVE: Bounds = {'range': (0.0, float('inf')), 'rule': '0 or more'}

CONTROLLER = Param(
    'gripper_controller', 'string', 'gripper_controller', 'Name of the gripper action '
    'controller this node stands in for: serves <name>/gripper_cmd (GripperCommand) on the '
    'gripper zero-config finds (or <name>.joint). Empty: none.')
PARALLEL = Param(
    'parallel_gripper_controller', 'string', 'parallel_gripper_controller', 'Name of the '
    'parallel_gripper_action_controller this node stands in for: serves <name>/gripper_cmd '
    '(ParallelGripperCommand, what MoveIt on Jazzy drives a parallel gripper with) on the '
    'gripper zero-config finds (or <name>.joint). Empty: none.')


class _Single:
    """GripperCommand: one position in; position and effort out."""

    action = GripperCommand
    kind = 'GripperCommand'

    @staticmethod
    def target(gripper: gr.Gripper, goal: GripperCommand.Goal) -> float:
        gripper.native_goal(goal.command.position)
        return float(goal.command.position)

    @staticmethod
    def result(state: JointState, stalled: bool, reached: bool) -> GripperCommand.Result:
        r = GripperCommand.Result()
        if len(state.position):             # empty: a model swap took the finger
            r.position, r.effort = state.position[0], state.effort[0]
        r.stalled, r.reached_goal = bool(stalled), bool(reached)
        return r

    @staticmethod
    def feedback(state: JointState) -> GripperCommand.Feedback:
        fb = GripperCommand.Feedback()
        if len(state.position):
            fb.position, fb.effort = state.position[0], state.effort[0]
        return fb


class _Parallel:
    """ParallelGripperCommand: a JointState in; the joint's JointState out."""

    action = ParallelGripperCommand
    kind = 'ParallelGripperCommand'

    @staticmethod
    def target(gripper: gr.Gripper, goal: ParallelGripperCommand.Goal) -> float:
        c = goal.command
        return gr.parallel_command(gripper, c.name, c.position, c.velocity, c.effort)

    @staticmethod
    def result(state: JointState, stalled: bool,
               reached: bool) -> ParallelGripperCommand.Result:
        return ParallelGripperCommand.Result(state=state, stalled=bool(stalled),
                                             reached_goal=bool(reached))

    @staticmethod
    def feedback(state: JointState) -> ParallelGripperCommand.Feedback:
        return ParallelGripperCommand.Feedback(state=state)


SINGLE, PARALLEL_COMMAND = _Single, _Parallel
Interface = type[_Single] | type[_Parallel]     # which action a GripperController serves


def controller_table(name: str) -> ParameterTable:
    return ParameterTable([
        Param('joint', 'string', '', 'Finger joint the gripper is commanded on (default: the '
              'one zero-config finds, e.g. finger_joint1).'),
        Param('goal_tolerance', 'double', 0.002, 'Position tolerance (m or rad) at which a '
              'goal counts as reached.', range=(0.0, float('inf')), min_open=True,
              rule='above 0'),
        Param('stall_timeout', 'double', 1.0, 'Seconds the finger may stand still short of '
              'the goal before the goal is stalled.', **NOT_NEGATIVE),
        Param('stall_velocity_threshold', 'double', 0.001, 'Finger speed (m/s or rad/s) '
              'below which it counts as standing still.', **NOT_NEGATIVE),
        Param('allow_stalling', 'bool', False, 'A stalled goal succeeds (stalled=true) '
              'instead of aborting.'),
    ], prefix=f'{name}.')


def _gripper_for(layout: Layout, joint: str) -> gr.Gripper | None:
    """The zero-config gripper, or the one on ``joint`` (a position goal channel's joint)."""
    found = gr.find_gripper(layout)
    if not joint or (found is not None and found.joint == joint):
        return found
    try:
        return gr.gripper_on_joint(layout, joint)
    except DeviceError as exc:
        raise ConfigError(str(exc), where='gripper joint') from None


class _Goal:
    """One accepted goal: ``started`` once the stepper took its set_goals; ``finish`` from
    any thread hands (outcome, result) to the execute coroutine, once."""

    def __init__(self, handle: GoalHandle, target: float, bridge: CompletionBridge) -> None:
        self.handle, self.target = handle, target
        self._bridge = bridge
        self.future = bridge.future()
        self.started = False
        self.finished = False
        self.last_move = time.monotonic()

    def finish(self, outcome: str, result: Any) -> None:
        if not self.finished:
            self.finished = True
            self._bridge.complete(self.future, (outcome, result))


class GripperController:
    """``<name>/gripper_cmd`` on the device's gripper, as ``interface`` (SINGLE:
    GripperCommand, PARALLEL_COMMAND: ParallelGripperCommand); ``None``-safe to destroy.
    ``peers``: controllers on the same finger, whose goal a new one here preempts."""

    def __init__(self, node: Node, device: DeviceApi, name: str,
                 bridge: CompletionBridge | None = None, interface: Interface = SINGLE,
                 namespace: str = '', defaults: Mapping[str, Any] | None = None) -> None:
        # namespace: one robot of several (``RobotView``): ``<namespace>/<name>/gripper_cmd``,
        # its parameters under ``<namespace>.<name>.``; defaults: that robot's own settings
        # (its controllers file's gripper_controller block, its gripper_joint as ``joint``)
        self.node, self.device = node, device
        self.name = f'{namespace}/{name}' if namespace else name
        name = f'{namespace}.{name}' if namespace else name
        self.interface = interface
        self.peers: list[GripperController] = []
        self._own_bridge = bridge is None           # closed in destroy() if made here
        self.bridge = CompletionBridge(node) if bridge is None else bridge
        self.log = node.get_logger()
        c = controller_table(name).declare(node, defaults=defaults)
        self._joint = c.joint
        self._unsubscribe: Callable[[], None] | None = None
        try:
            self.gripper = _gripper_for(device.layout, c.joint)
        except ConfigError as err:
            raise ConfigError(str(err.args[0]) if err.args else str(err),
                              where=f'parameter {name}.joint') from None
        self.tolerance = c.goal_tolerance
        self.stall_timeout = c.stall_timeout
        self.stall_speed = c.stall_velocity_threshold
        self.allow_stalling = c.allow_stalling
        self._lock = threading.Lock()
        self._active: _Goal | None = None
        # goal id -> its _Goal, until its execute takes it
        self._goals: dict[bytes, _Goal] = {}
        self._server: ActionServer | None = None
        self._checks: Ticker | None = None
        if self.gripper is None:
            self.log.info(f'{self.name}: no gripper in this model, gripper_cmd not served')
            return
        if interface.action is None:
            self.log.warning(f'{self.name}: this control_msgs has no {interface.kind}, '
                             'gripper_cmd not served')
            self.gripper = None
            return
        g = self.gripper
        # by the layout's name: a robot's joint names are its own (``finger``, not
        # ``left/finger``), its layout maps them to the world model's ids
        self._dof = int(device.model.jnt_dofadr[device.layout.joints.index(g.joint)])
        self._channel: GoalChannel = device.layout.goals[g.channel]
        # A spawn, delete or load_world renumbers the finger's addresses (or removes it).
        self._unsubscribe = device.swaps.subscribe(self._follow)
        self._server = ActionServer(
            node, interface.action, f'{self.name}/gripper_cmd',
            execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=lambda _h: CancelResponse.ACCEPT,
            handle_accepted_callback=self._on_accepted,
            callback_group=ReentrantCallbackGroup(), result_timeout=RESULT_TIMEOUT_S)
        # Checks run only while a goal is active (the bridge's one steady-clock timer).
        self._checks = self.bridge.every(1.0 / CHECK_HZ, self._tick)
        self.log.info(f'{self.name}: gripper_cmd ({interface.kind}) on {g.joint} '
                      f'[{g.lo:g}, {g.hi:g}] (goal channel {g.channel})')

    @property
    def served(self) -> bool:
        return self._server is not None

    def describe(self) -> list[str]:
        return [f'{self.name}/gripper_cmd'] if self.served else []

    def _follow(self, event: ModelSwapped) -> None:
        """The model swapped: the finger's qpos and dof addresses and its goal channel
        again from the new layout. A finger that is gone (another world) or is another joint
        now ends the running goal aborted, and new goals are refused until one is back."""
        try:
            layout = self.device.layout      # a robot's own channels, or the device's
            g = _gripper_for(layout, self._joint)
        except ConfigError:
            g = None
        with self._lock:
            old, self.gripper = self.gripper, g
            if g is not None:
                self._dof = int(event.model.jnt_dofadr[layout.joints.index(g.joint)])
                self._channel = layout.goals[g.channel]
            active = None
            if g is None or old is None or g.joint != old.joint:
                active, self._active = self._active, None
        if active is not None:
            active.finish('aborted', self._result(False, False))
        if g is None and old is not None:
            self.log.warning(f'{self.name}: the new model has no gripper; gripper_cmd '
                             'refuses goals until one is back')

    # --- goals ------------------------------------------------------------------------------
    def _on_goal(self, goal: Any) -> GoalResponse:
        if self.gripper is None:
            self.log.warning(f'{self.name}: goal rejected: the model has no gripper now')
            return GoalResponse.REJECT
        try:
            self.interface.target(self.gripper, goal)
        except DeviceError as exc:
            self.log.warning(f'{self.name}: goal rejected: {exc}')
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _set(self, position: float) -> None:
        g = self.gripper
        if g is None:       # a model swap took the finger after the goal was accepted
            raise DeviceError(UNKNOWN_NAME, 'the model has no gripper now',
                              where='gripper joint')
        native = g.native_goal(position)
        self.device.set_goals({g.channel: self._channel.to_unit(native)})

    def _on_accepted(self, handle: GoalHandle) -> None:
        """The new goal preempts the running one at once; its set_goals goes to the worker."""
        g = self.gripper
        if g is None:       # a model swap took the finger since the goal callback
            handle.execute()                # no _Goal: the execute callback aborts it
            return
        goal = _Goal(handle, self.interface.target(g, handle.request), self.bridge)
        with self._lock:
            old, self._active = self._active, goal
            self._goals[bytes(handle.goal_id.uuid)] = goal
        if old is not None:
            old.finish('aborted', self._result(False, False))
        for peer in self.peers:
            peer.abort_active()
        self.bridge.post(self._start, goal)
        handle.execute()

    def _start(self, goal: _Goal) -> None:
        """Worker: the finger goal to the stepper; the checks watch it from then on."""
        if goal.finished:                    # preempted while queued: the next one runs
            return
        try:
            self._set(goal.target)
        except DeviceError as exc:
            self.log.warning(f'{self.name}: goal failed at start: {exc}')
            with self._lock:
                if self._active is goal:
                    self._active = None
            goal.finish('aborted', self._result(False, False))
            return
        goal.last_move = time.monotonic()
        goal.started = True
        if self._checks is not None:        # None once destroyed
            self._checks.start()

    def abort_active(self) -> None:
        """A peer took the finger over: the goal running here ends aborted."""
        with self._lock:
            active, self._active = self._active, None
        if active is not None:
            active.finish('aborted', self._result(False, False))

    def _state(self) -> JointState:
        """The finger joint now, as the JointState both actions report."""
        snap, g, dof = self.device.snapshot, self.gripper, self._dof
        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        if g is None or dof >= len(snap.qvel):      # no finger in the model now
            return msg
        msg.name = [g.joint]
        msg.position = [g.position(snap)]
        msg.velocity = [float(snap.qvel[dof])]
        msg.effort = [float(snap.qfrc_actuator[dof])]
        return msg

    def _result(self, stalled: bool, reached: bool) -> Any:
        return self.interface.result(self._state(), stalled, reached)

    async def _execute(self, handle: GoalHandle) -> Any:
        with self._lock:
            goal = self._goals.pop(bytes(handle.goal_id.uuid), None)
        finished = (await goal.future) if goal is not None else None
        if finished is None:                 # never started, or the node stopped first
            finished = ('aborted', self._result(False, False))
        outcome, result = finished
        finish_goal(handle, outcome)
        return result

    def _hold_then_cancel(self, goal: _Goal, position: float) -> None:
        """Worker: the fingers stay where they are, then the goal ends canceled."""
        try:
            g = self.gripper
            if g is not None:               # else a model swap took the finger: no hold
                self._set(min(max(position, g.lo), g.hi))
        except DeviceError:
            pass
        finally:
            goal.finish('canceled', self._result(False, False))

    def _tick(self) -> None:
        with self._lock:
            a = self._active
            if a is None or a.finished:
                self._active = None
                if self._checks is not None:    # None once destroyed
                    self._checks.stop()
                return
            if not a.started:
                return
            g = self.gripper
            if g is None:       # a swap took the finger as the goal was being accepted
                self._active = None
                a.finish('aborted', self._result(False, False))
                return
            snap = self.device.snapshot
            pos, speed = g.position(snap), abs(float(snap.qvel[self._dof]))
            now = time.monotonic()
            if a.handle.is_cancel_requested:
                self._active = None
                self.bridge.post(self._hold_then_cancel, a, pos)
            elif abs(pos - a.target) <= self.tolerance:
                a.finish('succeeded', self._result(False, True))
            else:
                if speed > self.stall_speed:
                    a.last_move = now
                elif now - a.last_move > self.stall_timeout:
                    a.finish('succeeded' if self.allow_stalling else 'aborted',
                             self._result(True, False))
                    return
                a.handle.publish_feedback(self.interface.feedback(self._state()))

    def destroy(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        with self._lock:
            active, self._active = self._active, None
        if active is not None:
            active.finish('aborted', self._result(False, False))
        if self._checks is not None:
            self._checks.stop()
            self._checks = None
        if self._own_bridge:
            self.bridge.close()
        if self._server is not None:
            self._server.destroy()
            self._server = None
