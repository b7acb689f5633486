"""joint_trajectory_controller's ROS interface, served by the simulated device.

MoveIt, rviz's motion planning panel and scripts written for a ros2_control arm talk to
``/<controller>/follow_joint_trajectory``, ``/<controller>/joint_trajectory`` and
``/<controller>/controller_state``. Serving the same names, types and behaviour here
(splines, path and goal tolerances, preemption, cancel and hold) is what lets a
configuration move from simulation to the real arm unchanged. One difference by default:
a goal that fails its checks is accepted and aborted at once with the reason in the
result's ``error_string`` (INVALID_JOINTS for a joint the controller does not have), since
a rejected goal carries no reason to the client; ``explain_rejections:=false`` rejects it
in the goal callback as joint_trajectory_controller does. Either way the log says why.

The class only translates: checks, splines and tolerances are ``joint_trajectory`` (core).
Callbacks never wait on motion or on the stepper: the goal and topic callbacks check the
trajectory and hand its start (``jt.follow``, which waits for the stepper to take the plan,
behind a long ``step(n)`` if one runs) to the CompletionBridge's worker, and so do the
holds a cancel or a tolerance violation ends in; an accepted goal's execute coroutine
awaits its start and then a future that the tolerance checks complete through the node's
CompletionBridge (``ros/bridge.py``), whose steady-clock ticks drive those checks, so the
node keeps serving while a trajectory runs, even with the simulation paused (a timer on
simulated time would stop with it). The worker runs jobs in order, so starts, topic
trajectories and holds reach the stepper in the order the callbacks gave them; no check
runs while a start is on its way, since the trajectory it watches is about to be replaced.

Why one module of this size: it is one ROS interface (joint_trajectory_controller's
action, topic and state publisher) over one core module (``motion.joint_trajectory``); the
callbacks share the active goal (``_Active``) and the order the bridge runs them in.
"""

from __future__ import annotations

import array
from collections.abc import Iterable, Mapping, Sequence
import threading
import time
from typing import Any, TYPE_CHECKING, TypeAlias

from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTrajectoryControllerState
import numpy as np
import numpy.typing as npt
from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ...errors import CLOSED, ConfigError, DeviceError, UNKNOWN_NAME
from ...motion import joint_trajectory as jt
from .. import conversions as cv
from ..bridge import CompletionBridge
from ..guard import ActionServer  # every callback guarded
from ..parameters import Bounds, given_under, kind_of, Param, ParameterTable
from ..qos import action_queues

if TYPE_CHECKING:     # the hints only
    from builtin_interfaces.msg import Time
    from rclpy.action.server import ServerGoalHandle
    from rclpy.node import Node
    from rclpy.task import Future

    from ...sim.ports import DeviceApi
    from ...sim.snapshot import Snapshot

    GoalHandle: TypeAlias = ServerGoalHandle
    # a goal's check: (checked trajectory, tolerances, start delay in seconds)
    GoalCheck = tuple[jt.Checked, jt.Tolerances, float]

Result = FollowJointTrajectory.Result
CHECK_HZ = 100.0                 # tolerance checks, steady clock
RESULT_TIMEOUT_S = 5             # a finished goal stays in every status message this long
PREEMPTED = 'Current goal cancelled due to new incoming action.'   # as ros2_controllers says


def _doubles(values: npt.ArrayLike) -> array.array[float]:
    return array.array('d', np.ascontiguousarray(values, dtype=np.float64).tobytes())


def _point(positions: npt.ArrayLike, velocities: npt.ArrayLike | None = None,
           accelerations: npt.ArrayLike | None = None,
           t: float | None = None) -> JointTrajectoryPoint:
    p = JointTrajectoryPoint()
    p.positions = _doubles(positions)
    if velocities is not None:
        p.velocities = _doubles(velocities)
    if accelerations is not None:
        p.accelerations = _doubles(accelerations)
    if t is not None:
        p.time_from_start = cv.stamp(t, Duration)
    return p


CONTROLLER = Param(
    'trajectory_controller', 'string', 'arm_controller', 'Name of the joint trajectory '
    'controller this node stands in for: serves <name>/follow_joint_trajectory, '
    '<name>/joint_trajectory and <name>/controller_state. Empty: none.')
# Declared whether or not a trajectory controller runs, so that one launch file with
# controllers_file also starts the node with trajectory_controller:=''.
CONTROLLERS_FILE = Param(
    'controllers_file', 'string', '', 'ros2_control controllers YAML of the real arm: its '
    '"<name>: ros__parameters:" block gives the defaults of every <name>.* parameter (joints, '
    'constraints...), so both run one file.')
NOT_NEGATIVE: Bounds = {'range': (0.0, float('inf')), 'rule': '0 or more'}


def nothing_to_serve(node: Node, device: DeviceApi, name: str,
                     controllers_file: str = '') -> str | None:
    """Why controller ``name`` serves nothing on ``device``, or None when it has joints.

    A model with no position-driven joint (a free box, a torque-only or passive model) is
    still a device worth running: the controller then stays away instead of refusing the
    start. Joints the user named (``<name>.joints`` or a controllers file) are not second
    guessed: the controller is built and refuses them with what it would accept.
    """
    if given_under(node, f'{name}.'):
        return None
    if controllers_file:
        from ...mobile import config as drive_config
        blocks = drive_config.read(controllers_file).blocks
        if name in blocks:
            return None
        return (f'{name}: not served: {controllers_file} has no "{name}: ros__parameters:" '
                'block (a file with only a drive controller is fine; trajectory_controller:='
                '<name> serves another block)')
    if jt.trajectory_joints(device.layout):
        return None
    return (f'{name}: not served: no goal channel drives a joint to a position, so a joint '
            'trajectory could move nothing (give the device file a position goal channel to '
            'serve it)')


def joints_table(name: str) -> ParameterTable:
    """``<name>.joints``: declared first, since the tolerances are per joint."""
    return ParameterTable([Param(
        'joints', 'string_array', [], 'Joints the controller owns, as in the ros2_control '
        'controller config (default: every joint a position goal channel drives).')],
        prefix=f'{name}.')


def controller_table(name: str, joints: Iterable[str]) -> ParameterTable:
    """``<name>.*``: what joint_trajectory_controller reads, for the controller's joints."""
    params = [
        Param('allow_partial_joints_goal', 'bool', False,
              'Accept goals that name only some of the joints.'),
        Param('explain_rejections', 'bool', True, 'A goal that fails its checks is accepted '
              'and aborted at once with INVALID_JOINTS or INVALID_GOAL and the reason in the '
              'result\'s error_string, so the client sees why (the log has it too); false: '
              'rejected in the goal callback, the reason only in the log, as '
              'joint_trajectory_controller does.'),
        Param('smooth_positions', 'bool', False, 'Position-only trajectories as a C2 cubic '
              'spline instead of straight segments (joint_trajectory_controller interpolates '
              'them linearly).'),
        Param('action_monitor_rate', 'double', 20.0,
              'Feedback rate of follow_joint_trajectory in Hz.', **NOT_NEGATIVE),
        Param('state_publish_rate', 'double', 50.0,
              'controller_state rate in Hz (0: not published).', **NOT_NEGATIVE),
        Param('constraints.stopped_velocity_tolerance', 'double', 0.01, 'Joint speed (rad/s '
              'or m/s) below which a finished trajectory counts as stopped.', **NOT_NEGATIVE),
        Param('constraints.goal_time', 'double', 0.0, 'Seconds after the trajectory end '
              'within which every goal tolerance must hold (0: wait as long as it takes).',
              **NOT_NEGATIVE)]
    for j in joints:
        params += [Param(f'constraints.{j}.trajectory', 'double', 0.0,
                         f'Path position tolerance of {j} (0: not checked).', **NOT_NEGATIVE),
                   Param(f'constraints.{j}.goal', 'double', 0.0,
                         f'Goal position tolerance of {j} (0: not checked).', **NOT_NEGATIVE)]
    return ParameterTable(params, prefix=f'{name}.')


def controller_block(path: str, name: str) -> dict[str, Any]:
    """``<name>: ros__parameters:`` of a ros2_control controllers file, flattened with dots.

    Pointing sim_node at the very file controller_manager loads on the real arm is what
    keeps joints and tolerances identical in both; nothing has to be copied.
    """
    import yaml
    try:
        with open(path, encoding='utf-8') as handle:
            doc = yaml.safe_load(handle) or {}
    except OSError as err:
        raise ConfigError(f'cannot read {path}: {err.strerror}',
                          where='parameter controllers_file') from None
    except yaml.YAMLError as err:
        raise ConfigError(f'{path} is not valid YAML: {err}',
                          where='parameter controllers_file') from None
    block = None
    for key, value in doc.items() if isinstance(doc, dict) else ():
        if str(key).rstrip('/').split('/')[-1] == name and isinstance(value, dict):
            block = value.get('ros__parameters')
    if not isinstance(block, dict):
        raise ConfigError(f'{path} has no "{name}: ros__parameters:" block',
                          where='parameter controllers_file',
                          allowed=', '.join(str(k) for k in doc) if isinstance(doc, dict)
                          else 'a controllers YAML')
    flat: dict[str, Any] = {}

    def walk(prefix: str, node: Mapping[str, Any]) -> None:
        for k, v in node.items():
            if isinstance(v, dict):
                walk(f'{prefix}{k}.', v)
            else:
                flat[f'{prefix}{k}'] = v
    walk('', block)
    return flat


# joint_trajectory_controller parameters a real configuration carries that change nothing
# here (the simulated joints follow the reference exactly as a position interface would);
# accepted so the same YAML loads in both, each logged once when given.
NO_EFFECT = {'command_interfaces': 'string_array', 'state_interfaces': 'string_array',
             'command_joints': 'string_array', 'open_loop_control': 'bool',
             'allow_integration_in_goal_trajectories': 'bool',
             'allow_nonzero_velocity_at_trajectory_end': 'bool',
             'set_last_command_interface_value_as_state_on_activation': 'bool',
             'cmd_timeout': 'double', 'interpolation_method': 'string'}
NO_EFFECT_PREFIXES = ('gains.', 'speed_scaling.')
NO_EFFECT_TEXT = ('Accepted for compatibility with joint_trajectory_controller; no effect in '
                  'simulation.')
ZERO = {'bool': False, 'string': '', 'integer': 0, 'double': 0.0}


def points_of(trajectory: JointTrajectory) -> list[dict[str, Any]]:
    """JointTrajectory points -> the plain dicts the core checks (the float64 arrays are
    handed over as they are, which the core checks in one go)."""
    return [{'time_from_start': cv.to_seconds(p.time_from_start), 'positions': p.positions,
             'velocities': p.velocities, 'accelerations': p.accelerations}
            for p in trajectory.points]


def finish_goal(handle: GoalHandle, outcome: str) -> None:
    """Settle an action goal's state from the plan's outcome: a cancel only counts as
    canceled when the client asked for one; anything else that did not succeed aborts."""
    if not handle.is_active:
        return
    if outcome == 'succeeded':
        handle.succeed()
    elif outcome == 'canceled' and handle.is_cancel_requested:
        handle.canceled()
    else:
        handle.abort()


class _Active:
    """The trajectory that owns the controller's joints now, and who asked for it."""

    def __init__(self, execution: jt.Execution, tolerances: jt.Tolerances | None,
                 handle: GoalHandle | None = None, joints: Sequence[str] | None = None,
                 bridge: CompletionBridge | None = None) -> None:
        self.execution = execution
        self.columns = [joints.index(j) for j in execution.checked.joints] if joints else []
        self.tolerances = tolerances
        self.handle = handle                 # None for a trajectory from the topic
        self._bridge = bridge
        self.future: Future | None = None
        if handle is not None:
            assert bridge is not None        # a goal's result goes through the bridge
            self.future = bridge.future()
        self._finished = False
        self.last_feedback = 0.0

    def finish(self, outcome: str, code: int, text: str) -> None:
        """From any thread: the execute coroutine gets (outcome, Result) on the executor."""
        if self.future is not None and self._bridge is not None and not self._finished:
            self._finished = True
            self._bridge.complete(self.future, (outcome, Result(error_code=code,
                                                                error_string=text)))


# The controller's joints in one model: (actuator ids, qpos addresses, dof addresses).
_Addresses = tuple[np.ndarray, np.ndarray, np.ndarray]


class TrajectoryController:
    """``<name>/follow_joint_trajectory``, ``<name>/joint_trajectory`` and
    ``<name>/controller_state`` on ``node`` for ``device``."""

    def __init__(self, node: Node, device: DeviceApi, name: str | None = None,
                 bridge: CompletionBridge | None = None, namespace: str = '',
                 controllers_file: str | None = None) -> None:
        self.node = node
        self.device = device
        self._own_bridge = bridge is None           # closed in destroy() if made here
        self.bridge = CompletionBridge(node) if bridge is None else bridge
        self.log = node.get_logger()
        self._lock = threading.RLock()
        self._active: _Active | None = None
        # goal id -> its start (a future of its _Active or the exception that kept it from
        # starting), or why it could not start
        self._starts: dict[bytes, Future | DeviceError] = {}
        # (goal message, its check) from the goal callback
        self._checked: list[tuple[FollowJointTrajectory.Goal, GoalCheck]] = []
        self._starting = 0               # starts handed to the worker and not in place yet
        self._closing = False
        self.last_rejection: str | None = None
        self.counts = {'accepted': 0, 'rejected': 0, 'succeeded': 0, 'aborted': 0,
                       'canceled': 0, 'preempted': 0}
        if name is None:
            name = ParameterTable([CONTROLLER]).declare(node).trajectory_controller
        # namespace: one robot of several (``RobotView``): its topics under
        # ``<namespace>/<name>/``, its parameters under ``<namespace>.<name>.``
        topic = f'{namespace}/{name}' if namespace else name
        self.name = topic
        path = ParameterTable([CONTROLLERS_FILE]).declare(node).controllers_file
        given = controller_block(path, name) if path and not namespace else {}
        if controllers_file:        # one robot's own (the robots file's controllers_file)
            given = controller_block(controllers_file, name)
        name = f'{namespace}.{name}' if namespace else name
        p = f'{name}.'
        joints = joints_table(name).declare(node, defaults=given).joints
        self.joints = jt.controller_joints(device.layout, [j for j in joints if j],
                                           where=f'parameter {p}joints')
        c = controller_table(name, self.joints).declare(node, defaults=given)
        self.allow_partial = c.allow_partial_joints_goal
        self.explain = c.explain_rejections
        # (goal message, why) accepted only to say why
        self._refused: list[tuple[FollowJointTrajectory.Goal, DeviceError]] = []
        self.smooth_positions = c.smooth_positions
        self.monitor_rate = c.action_monitor_rate
        self.state_rate = c.state_publish_rate
        stopped = c['constraints.stopped_velocity_tolerance']
        goal_time = c['constraints.goal_time']
        path_tol = [c[f'constraints.{j}.trajectory'] for j in self.joints]
        goal_tol = [c[f'constraints.{j}.goal'] for j in self.joints]
        self._accept_no_effect(node, p, given)
        # (scene generation, its indices): _addresses
        self._addr: tuple[int | None, _Addresses | None] = (None, None)
        self.defaults = jt.Tolerances.defaults(len(self.joints), trajectory=path_tol,
                                               goal=goal_tol, stopped_velocity=stopped,
                                               goal_time=goal_time)
        # Own group: a request never waits behind another part of the node, and the
        # lock below is what orders goal, topic and tick work on the active trajectory.
        requests = ReentrantCallbackGroup()
        self._server = ActionServer(
            node, FollowJointTrajectory, f'{topic}/follow_joint_trajectory',
            execute_callback=self._execute, goal_callback=self._on_goal,
            handle_accepted_callback=self._on_accepted, cancel_callback=self._on_cancel,
            callback_group=requests,
            result_timeout=RESULT_TIMEOUT_S, **action_queues())
        self._sub = node.create_subscription(JointTrajectory, f'{topic}/joint_trajectory',
                                             self._on_topic, 10, callback_group=requests)
        self._state_pub = node.create_publisher(JointTrajectoryControllerState,
                                                f'{topic}/controller_state', 10)
        # Tolerance checks run only while a trajectory is active: an always-on timer wakes
        # the executor at CHECK_HZ and costs a share of a core for nothing (bench/README.md).
        self._checks = self.bridge.every(1.0 / CHECK_HZ, self._tick)
        self._last_state = 0.0
        # controller_state goes out from its own thread (publishing is thread-safe) and only
        # while someone listens, so it never wakes the executor either.
        self._state_stop = threading.Event()
        self._context = node.context
        self._state_thread = threading.Thread(target=self._state_loop, daemon=True,
                                              name=f'{topic}-controller_state')
        if self.state_rate > 0:
            self._state_thread.start()
        self.log.info(f'{topic}: follow_joint_trajectory for {", ".join(self.joints)}')

    def _accept_no_effect(self, node: Node, prefix: str, given: Mapping[str, Any]) -> None:
        """Declare the real controller's parameters that mean nothing in simulation."""
        started = given_under(node, prefix)
        params: list[Param] = []
        for key in sorted(set(given) | set(started)):
            kind = NO_EFFECT.get(key)
            if kind is None and key.startswith(NO_EFFECT_PREFIXES):
                kind = kind_of(given.get(key, started.get(key))) or 'double'
            if kind is None or node.has_parameter(prefix + key):
                continue
            params.append(Param(key, kind, ZERO.get(kind, []), NO_EFFECT_TEXT))
        ParameterTable(params, prefix).declare(node, defaults=given)
        if params:
            self.log.info(f'{self.name}: no effect in simulation: '
                          f'{", ".join(p.name for p in params)}')

    # --- requests -> core ---------------------------------------------------------------
    def _check(self, goal: FollowJointTrajectory.Goal) -> GoalCheck:
        """A goal message -> (checked trajectory, tolerances, delay); DeviceError if bad."""
        traj = goal.trajectory
        checked = jt.check_trajectory(
            self.device.layout, list(traj.joint_names), points_of(traj),
            controller_joints=self.joints, allow_partial=self.allow_partial,
            multi_dof_joints=list(goal.multi_dof_trajectory.joint_names))
        index = [self.joints.index(j) for j in checked.joints]
        tol = jt.goal_tolerances(
            self.defaults.select(index), checked.joints,
            path=[(t.name, t.position, t.velocity, t.acceleration) for t in goal.path_tolerance],
            goal=[(t.name, t.position, t.velocity, t.acceleration) for t in goal.goal_tolerance],
            goal_time=cv.to_seconds(goal.goal_time_tolerance))
        jt.preview(self.device, checked, smooth_positions=self.smooth_positions)
        return checked, tol, self._delay(traj.header.stamp)

    def _delay(self, stamp: Time) -> float:
        """A header stamp in the future delays the start, as on the real controller."""
        t = cv.to_seconds(stamp)
        if t == 0.0:
            return 0.0
        now = self.node.get_clock().now().nanoseconds * 1e-9
        return max(0.0, t - now)

    def _reject(self, where: str, exc: BaseException) -> None:
        self.last_rejection = str(exc)
        self.counts['rejected'] += 1
        self.log.error(f'{self.name}: {where} rejected: {cv.error_line(exc)}')

    def _on_goal(self, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        try:
            checked = self._check(goal)
        except DeviceError as exc:
            self._reject('goal', exc)
            if not self.explain:
                return GoalResponse.REJECT
            # accepted only to abort it at once with the reason: a rejection carries none
            with self._lock:
                self._refused.append((goal, exc))
                del self._refused[:-16]
            return GoalResponse.ACCEPT
        with self._lock:
            # The accepted callback gets this very message object: keep the work done.
            self._checked.append((goal, checked))
            del self._checked[:-16]
        return GoalResponse.ACCEPT

    def _checked_for(self, goal: FollowJointTrajectory.Goal) -> GoalCheck:
        with self._lock:
            for i, (g, checked) in enumerate(self._checked):
                if g is goal:
                    del self._checked[i]
                    return checked
        return self._check(goal)

    def _on_cancel(self, _handle: GoalHandle) -> CancelResponse:
        return CancelResponse.ACCEPT

    def _on_accepted(self, handle: GoalHandle) -> None:
        """Start the trajectory as soon as the goal is accepted, as the real controller does
        in its accepted callback; waiting for the execute task would add an executor
        scheduling delay, long under load, between "accepted" and the first step that
        moves. The start itself runs on the worker; the execute coroutine awaits it."""
        key = bytes(handle.goal_id.uuid)
        with self._lock:
            refused = next((i for i, (g, _) in enumerate(self._refused)
                            if g is handle.request), None)
            if refused is not None:
                self._starts[key] = self._refused.pop(refused)[1]   # nothing starts
                handle.execute()
                return
        if not handle.is_cancel_requested:
            with self._lock:
                self._starting += 1
                self._starts[key] = self.bridge.run(self._start_goal, handle)
        handle.execute()

    def _follow(self, checked: jt.Checked, delay: float) -> jt.Execution:
        """Worker: the plan handed to the stepper (all or nothing), its Execution."""
        return jt.follow(self.device, checked, delay=delay,
                         smooth_positions=self.smooth_positions)

    def _started(self, active: _Active, preempt_text: str) -> None:
        """Worker: ``active`` replaces the running trajectory; the joints the old one still
        drives (a partial goal) then stop where they are."""
        with self._lock:
            try:
                left = self._preempt(preempt_text)
                self._active = active
            finally:
                self._starting -= 1
            self._checks.start()
        if left is not None:
            jt.hold(self.device, left)

    def _start_goal(self, handle: GoalHandle) -> _Active | Exception:
        """Worker: the goal's _Active once in place, or the exception that kept it from
        starting (nothing moved)."""
        try:
            checked, tol, delay = self._checked_for(handle.request)
            execution = self._follow(checked, delay)
        except Exception as exc:  # noqa: BLE001 - the goal must still end, with why
            # The state changed since the goal callback (e.g. a reset): nothing moved.
            with self._lock:
                self._starting -= 1
            self._reject('goal (at start)', exc)
            return exc
        active = _Active(execution, tol, handle, self.joints, self.bridge)
        with self._lock:
            self.counts['accepted'] += 1
        self._started(active, PREEMPTED)
        return active

    async def _execute(self, handle: GoalHandle) -> FollowJointTrajectory.Result:
        start = self._starts.pop(bytes(handle.goal_id.uuid), None)
        if isinstance(start, DeviceError):      # refused in the goal callback: say why
            handle.abort()
            code = Result.INVALID_JOINTS if start.code == UNKNOWN_NAME else Result.INVALID_GOAL
            return Result(error_code=code, error_string=str(start))
        if start is not None:
            start = await start
            if start is None:                   # the node stopped before it started
                start = DeviceError(CLOSED, 'the controller is shutting down')
        if isinstance(start, Exception):
            handle.abort()
            return Result(error_code=Result.INVALID_GOAL, error_string=str(start))
        if start is None:                       # cancelled before it was started
            if handle.is_cancel_requested:
                handle.canceled()
            else:
                handle.abort()
            return Result(error_code=Result.SUCCESSFUL, error_string='canceled before start')
        finished = await start.future
        if finished is None:                    # the node stopped first
            finished = ('aborted', Result(error_code=Result.INVALID_GOAL,
                                          error_string='the controller is shutting down'))
        outcome, result = finished
        finish_goal(handle, outcome)
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        return result

    def _preempt(self, text: str) -> np.ndarray | None:
        """End whatever owns the joints now (lock held): the new plan already took over the
        joints it names; the actuators the old one still drives (a partial goal), for the
        caller to hold, or None."""
        old = self._active
        self._active = None
        if old is None:
            return None
        left = old.execution.plan.actuators
        if old.handle is not None:
            self.counts['preempted'] += 1
            old.finish('aborted', Result.INVALID_GOAL, text)
        if left.size and old.execution.running(self.device):
            return left.copy()
        return None

    def _on_topic(self, msg: JointTrajectory) -> None:
        try:
            checked = jt.check_trajectory(self.device.layout, list(msg.joint_names),
                                          points_of(msg), controller_joints=self.joints,
                                          allow_partial=self.allow_partial)
        except DeviceError as exc:
            self._reject('joint_trajectory message', exc)
            return
        with self._lock:
            self._starting += 1
        self.bridge.post(self._start_topic, checked, self._delay(msg.header.stamp))

    def _start_topic(self, checked: jt.Checked, delay: float) -> None:
        """Worker: a topic trajectory in place, or refused with nothing moved."""
        try:
            execution = self._follow(checked, delay)
        except DeviceError as exc:
            with self._lock:
                self._starting -= 1
            self._reject('joint_trajectory message', exc)
            return
        self._started(_Active(execution, None, None, self.joints),
                      'preempted by a trajectory on the joint_trajectory topic')

    def _hold_then_finish(self, active: _Active, acts: np.ndarray, outcome: str, code: int,
                          text: str) -> None:
        """Worker: the joints stop where they are, then the goal gets its result."""
        try:
            jt.hold(self.device, acts)
        finally:
            active.finish(outcome, code, text)

    # --- monitoring -----------------------------------------------------------------------
    def _tick(self) -> None:
        if self._closing:
            return
        try:
            with self._lock:
                self._monitor()
                if self._active is None:
                    self._checks.stop()
        except Exception as exc:  # noqa: BLE001 - a closed device or a bug: end the goal
            with self._lock:
                if self._active is not None:
                    self._active.finish('aborted', Result.INVALID_GOAL,
                                        f'{type(exc).__name__}: {exc}')
                    self._active = None
            if not self.device.closed and not self._closing:
                self.log.error(f'{self.name}: {cv.error_line(exc)}',
                               throttle_duration_sec=5.0)

    def _monitor(self) -> None:
        a = self._active
        if a is None or self._starting:
            return
        device = self.device
        acts = a.execution.checked.actuators
        if a.handle is None:                       # topic trajectories carry no tolerances
            if a.execution.taken_over(device) or \
                    device.snapshot.time >= a.execution.t_end:
                self._active = None
            return
        if a.handle.is_cancel_requested:
            self._active = None
            self.bridge.post(self._hold_then_finish, a, acts, 'canceled', Result.SUCCESSFUL,
                             'canceled; holding position')
            return
        if a.execution.taken_over(device):
            a.finish('aborted', Result.INVALID_GOAL,
                     'another command took over the joints (reset, hold, set_goals, move_to '
                     'or a stability reset)')
            self._active = None
            return
        assert a.tolerances is not None            # a goal's trajectory carries them
        v = jt.evaluate(a.execution, device.snapshot, a.tolerances)
        now = time.monotonic()
        if self.monitor_rate > 0 and now - a.last_feedback >= 1.0 / self.monitor_rate:
            a.last_feedback = now
            a.handle.publish_feedback(self._feedback(a, v))
        if v.state == 'path':
            self._active = None
            self.bridge.post(self._hold_then_finish, a, acts, 'aborted',
                             Result.PATH_TOLERANCE_VIOLATED, v.message)
        elif v.state == 'goal':
            self._active = None
            self.bridge.post(self._hold_then_finish, a, acts, 'aborted',
                             Result.GOAL_TOLERANCE_VIOLATED, v.message)
        elif v.state == 'succeeded':
            a.finish('succeeded', Result.SUCCESSFUL, 'Goal successfully reached!')
            self._active = None

    def _feedback(self, a: _Active, v: jt.Verdict) -> FollowJointTrajectory.Feedback:
        fb = FollowJointTrajectory.Feedback()
        fb.header.stamp = self.node.get_clock().now().to_msg()
        fb.joint_names = list(a.execution.checked.joints)
        t = max(0.0, v.time - a.execution.t0)
        fb.desired = _point(v.desired[0], v.desired[1], v.desired[2], t)
        fb.actual = _point(v.actual[0], v.actual[1], t=t)
        fb.error = _point(v.error[0], v.error[1], t=t)
        return fb

    def _state_loop(self) -> None:
        period = 1.0 / self.state_rate
        while not self._state_stop.wait(period):
            if self._closing or self.device.closed:
                return
            try:
                if self._state_pub.get_subscription_count() > 0:
                    self._publish_state()
            except Exception as exc:  # noqa: BLE001 - shutting down under us
                if self._closing or not self._context.ok():
                    return              # Ctrl-C shut the context down: nothing to report
                self.log.error(f'{self.name}: controller_state: {cv.error_line(exc)}',
                               throttle_duration_sec=5.0)

    def _addresses(self, snap: Snapshot) -> _Addresses | None:
        """(actuators, qpos and dof addresses) of the controller's joints in the model
        ``snap`` belongs to, or None while that is not the device's model (a swap in
        progress) or when it lacks one of them (a world loaded without this arm: goals are
        then refused by the trajectory check, which reads the device's layout)."""
        if self._addr[0] != snap.generation:
            if snap.generation != self.device.generation:
                return None
            goals = jt.trajectory_joints(self.device.layout)
            found = None
            if all(j in goals for j in self.joints):
                m = self.device.model
                jids = [goals[j].joint for j in self.joints]
                found = (np.array([goals[j].actuator for j in self.joints]),
                         np.asarray(m.jnt_qposadr[jids]), np.asarray(m.jnt_dofadr[jids]))
            self._addr = (snap.generation, found)
        return self._addr[1]

    def _publish_state(self) -> None:
        snap = self.device.snapshot
        addr = self._addresses(snap)
        if addr is None:
            return
        acts, qadr, dadr = addr
        ref_p = snap.joint_setpoint[acts]
        ref_v = np.zeros(len(self.joints))
        ref_a = np.zeros(len(self.joints))
        a = self._active
        if a is not None:
            dp, dv, da = a.execution.desired(snap.time)
            cols = a.columns
            ref_p[cols], ref_v[cols], ref_a[cols] = dp, dv, da
        act_p = snap.qpos[qadr]
        act_v = snap.qvel[dadr]
        msg = JointTrajectoryControllerState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.joint_names = self.joints
        msg.reference = _point(ref_p, ref_v, ref_a)
        msg.feedback = _point(act_p, act_v)
        msg.error = _point(ref_p - act_p, ref_v - act_v)
        msg.output = _point(snap.setpoint[acts])
        self._state_pub.publish(msg)

    # --- lifetime -------------------------------------------------------------------------
    @property
    def active(self) -> _Active | None:
        return self._active

    def destroy(self) -> None:
        self._closing = True
        self._state_stop.set()
        if self._state_thread.is_alive():
            self._state_thread.join(timeout=2.0)
        with self._lock:
            old, self._active = self._active, None
        if old is not None:
            old.finish('aborted', Result.INVALID_GOAL, 'the controller is shutting down')
        self._checks.stop()
        if self._own_bridge:
            self.bridge.close()
        self.node.destroy_subscription(self._sub)
        self.node.destroy_publisher(self._state_pub)
        self._server.destroy()
