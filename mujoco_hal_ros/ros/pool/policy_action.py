"""pool_node's ``evaluate_policy`` action: ``tasks.evaluate`` behind EvaluatePolicy.action.

Why a pool of its own per goal: a task runs its own model (the node's model plus the sensors
the task reads, ``tasks.task``), and the node's pool belongs to its ``evaluate`` and ``reset``
clients, whose environments must not change under them. The evaluation runs on the node's
bridge worker like every other pool job, so it queues behind (never beside) an ``evaluate``
and the executor never waits on physics. Feedback goes out when an episode finishes and at
most every FEEDBACK_S otherwise; a cancel stops the evaluation between two control steps and
returns the finished episodes.

What a goal may name is data, never code (``tasks.peer``, doc/security.md): ``zero``,
``random``, a ``.onnx`` file under ``resource_roots``, or a name the operator declared in
the ``policies`` parameter, which runs in a worker process with every call under
``policy_timeout_s`` (TIMEOUT); anything else is refused FORBIDDEN before any import. A
cancel also ends a call the policy is computing (its worker is killed).
"""

from __future__ import annotations

import os
import threading
import time
from typing import cast, Protocol, TYPE_CHECKING

from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

from ...action import EvaluatePolicy
from ...errors import CLOSED, DeviceError, DONE, FORBIDDEN, INTERNAL_ERROR, STOPPED
from ...tasks.peer import PeerPolicies
from .. import conversions as cv
from ..guard import ActionServer
from ..qos import action_queues

if TYPE_CHECKING:     # the hints only
    from rclpy.action.server import ServerGoalHandle
    from rclpy.impl.rcutils_logger import RcutilsLogger

    from ...pool import EnvPool, RayPool
    from ...tasks import EvaluationReport, Policy
    from ..bridge import CompletionBridge
    from ..parameters import Values

FEEDBACK_S = 0.2
MAX_GOALS = 2


class PolicyHost(Protocol):
    """What the action reads of the PoolNode it is attached to (a Node as well; named by
    this protocol, as pool_node imports this module)."""

    @property
    def p(self) -> Values: ...

    @property
    def closing(self) -> bool: ...

    @property
    def bridge(self) -> CompletionBridge | None: ...

    @property
    def pool(self) -> EnvPool | RayPool | None: ...

    def get_logger(self) -> RcutilsLogger: ...


class PolicyAction:
    """The action server and its goal bookkeeping, attached to a PoolNode."""

    def __init__(self, node: PolicyHost) -> None:
        self.node = node
        self._lock = threading.Lock()
        self._reserved = 0
        # goal id bytes -> its policy, while it evaluates
        self._running: dict[bytes, str | Policy] = {}
        p = node.p
        self.rules = PeerPolicies.from_parameters(p['policies'], p['resource_roots'],
                                                  p['policy_timeout_s'], p['policy_memory_mb'])
        self.server = ActionServer(
            cast(Node, node), EvaluatePolicy, 'evaluate_policy', self._execute,
            callback_group=MutuallyExclusiveCallbackGroup(), goal_callback=self._on_goal,
            cancel_callback=self._on_cancel, result_timeout=10, **action_queues())

    def _on_cancel(self, handle: ServerGoalHandle) -> CancelResponse:
        """Accept; a policy computing for that goal now is interrupted (its worker killed)."""
        with self._lock:
            policy = self._running.get(bytes(handle.goal_id.uuid))
        cancel = getattr(policy, 'cancel', None)
        if cancel is not None:
            cancel()
        return CancelResponse.ACCEPT

    def _on_goal(self, _goal: EvaluatePolicy.Goal) -> GoalResponse:
        with self._lock:
            if self.node.closing or self._reserved >= MAX_GOALS:
                return GoalResponse.REJECT
            self._reserved += 1
            return GoalResponse.ACCEPT

    async def _execute(self, handle):
        try:
            done = await self.node.bridge.run(self._evaluate, handle)
        finally:
            with self._lock:
                self._reserved = max(0, self._reserved - 1)
        if done is None:
            done = 'abort', _error(EvaluatePolicy.Result(), CLOSED, 'pool_node is shutting down')
        end, result = done
        {'succeed': handle.succeed, 'abort': handle.abort, 'canceled': handle.canceled}[end]()
        return result

    def _evaluate(self, handle):
        from ...tasks import evaluate
        goal, result = handle.request, EvaluatePolicy.Result()
        if handle.is_cancel_requested:
            return 'canceled', _error(result, STOPPED, 'canceled before it started')
        last = [0.0, -1]

        def progress(done, total):
            now = time.monotonic()
            if done != last[1] or now - last[0] >= FEEDBACK_S:
                last[:] = [now, done]
                handle.publish_feedback(EvaluatePolicy.Feedback(
                    episodes_done=done, episodes=total, progress=done / total))
            return not (handle.is_cancel_requested or self.node.closing)

        key = bytes(handle.goal_id.uuid)
        policy = None
        try:
            self.rules.policy(goal.policy, start=False)     # FORBIDDEN before anything
            dataset_path(self.node.p['dataset_folder'], goal.dataset)
            task = self.rules.task(goal.task)
            policy = self.rules.policy(goal.policy)
            with self._lock:
                self._running[key] = policy
            if handle.is_cancel_requested:
                _cancel(policy)
            folder = dataset_path(self.node.p['dataset_folder'], goal.dataset)
            report = evaluate(task, policy, int(goal.episodes), int(goal.envs) or None,
                              int(goal.seed), nthread=self.node.pool.nthread,
                              progress=progress, dataset=folder,
                              cameras=list(goal.dataset_cameras) or None)
        except DeviceError as err:
            if err.code == STOPPED and handle.is_cancel_requested:
                return 'canceled', _error(result, STOPPED, str(err))
            return 'abort', _error(result, err.code, str(err))
        except Exception as err:  # noqa: BLE001 - reported to the caller, logged here
            self.node.get_logger().error(f'evaluate_policy: {cv.error_line(err)}')
            return 'abort', _error(result, INTERNAL_ERROR, f'{type(err).__name__}: {err}')
        finally:
            with self._lock:
                self._running.pop(key, None)
            close = getattr(policy, 'close', None)
            if close is not None:
                close()
        _fill(result, report)
        if report.completed:
            result.success, result.code = True, DONE
            result.message = report.summary()
            return 'succeed', result
        result.code = STOPPED if handle.is_cancel_requested else CLOSED
        result.message = (f'stopped after {len(report.episodes)} of {report.requested} '
                          'episodes')
        return ('canceled' if handle.is_cancel_requested else 'abort'), result

    def cancel_all(self) -> None:
        """Shutdown: a policy computing now is interrupted (its worker killed)."""
        with self._lock:
            running = list(self._running.values())
        for policy in running:
            _cancel(policy)

    def destroy(self) -> None:
        self.cancel_all()
        self.server.destroy()


def dataset_path(root: str, name: str) -> str | None:
    """Where a goal's dataset goes: ``name`` relative, under the operator's ``root``.

    A peer never names an absolute path or climbs out of ``root`` (FORBIDDEN), and with no
    ``dataset_folder`` set the node writes nothing for peers at all.
    """
    if not name:
        return None
    if not root:
        raise DeviceError(FORBIDDEN, 'this node writes no datasets (its dataset_folder '
                          'parameter is empty); nothing was written', where='dataset',
                          allowed='an empty dataset, or a node with dataset_folder set')
    norm = os.path.normpath(name)
    if os.path.isabs(name) or norm == '.' or norm.startswith('..') or '\x00' in name:
        raise DeviceError(FORBIDDEN, f'dataset {name!r} is not a relative name inside the '
                          'node\'s dataset_folder; nothing was written', where='dataset',
                          allowed='a relative folder name such as rollouts/run1')
    os.makedirs(root, exist_ok=True)
    return os.path.join(root, norm)


def _cancel(policy: str | Policy | None) -> None:
    cancel = getattr(policy, 'cancel', None)
    if cancel is not None:
        cancel()


def _fill(result: EvaluatePolicy.Result, report: EvaluationReport) -> None:
    lo, hi = report.interval
    result.task = report.task
    result.completed = bool(report.completed)
    result.episodes_done = len(report.episodes)
    result.success_rate = float(report.success_rate)
    result.success_low, result.success_high = float(lo), float(hi)
    result.mean_return = float(report.mean_return)
    result.env_steps_per_s = float(report.env_steps_per_s)
    result.episode = [e.episode for e in report.episodes]
    result.episode_success = [bool(e.success) for e in report.episodes]
    result.episode_failure = [e.failure or '' for e in report.episodes]
    result.episode_return = [float(e.ret) for e in report.episodes]
    result.episode_steps = [int(e.steps) for e in report.episodes]
    result.dataset = report.dataset or ''


def _error(result: EvaluatePolicy.Result, code: str, message: str) -> EvaluatePolicy.Result:
    result.success = False
    result.code = code
    result.message = message
    return result
