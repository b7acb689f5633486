"""sim_node's ``run_policy`` action and ``stop_policy`` service: ``tasks.device_runner``.

Why a worker of its own and not the bridge's: an episode lasts its horizon in simulated
time (seconds to minutes of wall time in real time), and the bridge's one worker carries
every other request's device call (``set_goals``, ``reset``, ``pause``...), which must not
queue behind it. The run (the task loaded, the policy checked, the episode's model compiled,
then the episode) goes to one long-lived worker thread (made at the first goal; one run at a
time, so one thread is all it needs), and the bridge turns its end into an rclpy future, so
the execute coroutine awaits it and no executor thread waits. A refusal
(a bad task or policy, a NaN action, a gravity-compensated device in lockstep) comes back
as the goal's result with its code before the device changes. One run at a time: a goal
while one runs is aborted BUSY and changes nothing. The run swaps the task's model in (as
``load_world`` does) and loads the task file and policy named in the goal on this machine,
so a node with ``world_edits:=false`` refuses it (FORBIDDEN).

What a goal may name is data, never code (``tasks.peer``, doc/security.md): ``zero``,
``random``, a ``.onnx`` file under ``resource_roots``, or a name the operator declared in
the ``policies`` parameter; anything else is refused FORBIDDEN before anything is imported.
A declared policy runs in a worker process (``tasks.policy_process``), each call under
``policy_timeout_s``: a late answer ends the run TIMEOUT.

``stop_policy`` (std_srvs/Trigger) and a cancel end the run between two control steps, or
at once when the policy is computing (its worker is killed); the service answers once the
run has ended and the device holds (``DevicePolicyRunner`` leaves it holding), and the next
goal is accepted. With no run, it answers success false and changes nothing.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import os
import threading
import time
from typing import TYPE_CHECKING

from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from std_srvs.srv import Trigger

from ...action import RunPolicy
from ...errors import BUSY, CLOSED, DeviceError, DONE, FORBIDDEN, INTERNAL_ERROR, STOPPED
from ...tasks.peer import PeerPolicies
from .. import conversions as cv
from ..guard import ActionServer  # every callback guarded
from ..qos import action_queues, REQUEST_QOS

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.node import Node
    from rclpy.task import Future

    from ...sim.device import Device
    from ...tasks.device_runner import DevicePolicyRunner
    from ...tasks.policies import Policy
    from ..bridge import CompletionBridge
    from .params import SimParams

FEEDBACK_S = 0.1            # at most this often, and at the end
STOP_WAIT_S = 10.0          # stop_policy waits this long for the run to end


class PolicyRuns:
    """The run_policy action and the stop_policy service over one Device."""

    def __init__(self, node: Node, device: Device, bridge: CompletionBridge,
                 p: SimParams) -> None:
        # p: the node's checked parameters (the policies a peer may name, their limits)
        self.node, self.device, self.bridge = node, device, bridge
        self._lock = threading.Lock()
        self._busy = False          # a goal is being run (from accept to result)
        self._runner: DevicePolicyRunner | None = None    # its runner, once built
        self._stop_asked = False    # stop_policy came before the runner was built
        self._ended: Future | None = None    # an rclpy future answered when the run ends
        # the runs' one thread, made at the first goal
        self._worker: ThreadPoolExecutor | None = None
        # the run's policy (a worker process may be computing)
        self._policy: str | Policy | None = None
        self._goal: bytes | None = None      # the running goal's id
        self.rules = PeerPolicies.from_parameters(p.policies, p.resource_roots,
                                                  p.policy_timeout_s, p.policy_memory_mb)
        group = ReentrantCallbackGroup()
        self.action = ActionServer(
            node, RunPolicy, 'run_policy', execute_callback=self._execute,
            callback_group=group, goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=self._on_cancel, **action_queues())
        self.stop_service = node.create_service(Trigger, 'stop_policy', self._stop,
                                                callback_group=group, qos_profile=REQUEST_QOS)

    @staticmethod
    def describe() -> list[str]:
        return ['run_policy (action)', 'stop_policy']

    # --- run_policy -----------------------------------------------------------------------
    async def _execute(self, handle):
        goal = handle.request
        result = RunPolicy.Result(task=goal.task, episode=goal.episode, lockstep=goal.lockstep)
        if not getattr(getattr(self.node, 'p', None), 'world_edits', True):
            handle.abort()
            return _error(result, FORBIDDEN, 'run_policy swaps the task\'s model in, a scene '
                          'edit, turned off on this node (world_edits:=false)')
        with self._lock:
            busy = self._busy
            if not busy:
                self._busy, self._runner, self._stop_asked = True, None, False
                self._policy, self._goal = None, bytes(handle.goal_id.uuid)
                self._ended = ended = self.bridge.future()
                if self._worker is None:
                    self._worker = ThreadPoolExecutor(1, thread_name_prefix='sim_node-run_policy')
                worker = self._worker
        if busy:
            handle.abort()
            return _error(result, BUSY, 'a policy is already running on this device; '
                          'nothing was changed: call stop_policy (or cancel its goal) first')
        try:
            done = await self.bridge.wrap(worker.submit(self._work, handle, result))
        finally:
            with self._lock:
                self._busy, self._runner, self._policy, self._goal = False, None, None, None
            self.bridge.complete(ended, True)
        if done is None:
            done = 'abort', _error(result, CLOSED, 'sim_node is shutting down')
        end, result = done
        if end == 'abort' and result.code == STOPPED and handle.is_cancel_requested:
            end = 'canceled'            # a cancel that killed a computing policy
        {'succeed': handle.succeed, 'abort': handle.abort, 'canceled': handle.canceled}[end]()
        return result

    def _work(self, handle, result):
        """The worker: build the runner, run the episode, hand back (end, result)."""
        try:
            return self._run(handle, result)
        except (Exception, SystemExit) as err:  # noqa: BLE001 - to the caller, logged here
            self.node.get_logger().error(f'run_policy: {cv.error_line(err)}')
            return 'abort', _error(result, INTERNAL_ERROR, f'{type(err).__name__}: {err}')

    def _run(self, handle, result):
        goal = handle.request
        policy = None
        try:
            self.rules.policy(goal.policy, start=False)     # FORBIDDEN before anything
            task = self.rules.task(goal.task)
            policy = self.rules.policy(goal.policy)
            with self._lock:
                self._policy = policy
                if self._stop_asked:
                    _cancel(policy)
            return self._episode(handle, result, task, policy)
        except DeviceError as err:
            return 'abort', _error(result, err.code, str(err))
        finally:
            close = getattr(policy, 'close', None)
            if close is not None:
                close()             # a declared policy's worker, and all it started

    def _episode(self, handle, result, task, policy):
        from ...tasks.device_runner import DevicePolicyRunner
        goal = handle.request
        runner = DevicePolicyRunner(self.device, task, policy, int(goal.seed),
                                    int(goal.episode), lockstep=bool(goal.lockstep))
        data = _EpisodeData(self.node, self.device, goal, runner) \
            if goal.dataset_folder else None       # refused here, before the device changes
        with self._lock:
            self._runner = runner
            if self._stop_asked:
                runner.stop()
        horizon = runner.task.horizon
        last = [0.0]

        def progress(steps, ret, sim_time):
            if data is not None:
                data.offer()
            now = time.monotonic()
            if now - last[0] >= FEEDBACK_S or steps == horizon:
                last[0] = now
                handle.publish_feedback(RunPolicy.Feedback(
                    steps=steps, horizon=horizon, episode_return=ret, sim_time=sim_time))
            return not handle.is_cancel_requested
        try:
            run = runner.run(progress)
            saved = data.finish(run) if data is not None else None
        except DeviceError as err:
            return 'abort', _error(result, err.code, f'{err} (after {runner.steps} control '
                                   'steps; the device holds)')
        finally:
            if data is not None:
                data.abandon()       # after finish: nothing; else the episode is discarded
        ep = run.result
        result.task = runner.task.name
        result.episode_success = bool(ep.success)
        result.failure = ep.failure or ''
        result.ended_by = ep.ended_by
        result.episode_return = float(ep.ret)
        result.steps = int(ep.steps)
        result.start_time, result.end_time = float(run.start_time), float(run.end_time)
        if run.completed:
            result.success, result.code = True, DONE
            result.message = (f'{runner.task.name} episode {runner.episode} '
                              f'{"succeeded" if ep.success else "failed: " + ep.failure} '
                              f'({ep.ended_by}) after {ep.steps} control steps, return '
                              f'{ep.ret:.4g}; the device holds'
                              + (f'; written to {saved}' if saved else ''))
            return 'succeed', result
        result.code = STOPPED
        result.message = f'stopped after {ep.steps} control steps; the device holds'
        return ('canceled' if handle.is_cancel_requested else 'abort'), result

    # --- stop_policy and cancel -------------------------------------------------------------
    def stop(self) -> None:
        """Shutdown: the run (if any) stops now, a computing policy's worker killed."""
        self._stop_run()

    def _stop_run(self):
        """Stop the run (between two control steps, or now if its policy is computing);
        False with none running."""
        with self._lock:
            busy, runner, policy = self._busy, self._runner, self._policy
            if busy:
                self._stop_asked = True
        if runner is not None:
            runner.stop()
        elif policy is not None:
            _cancel(policy)
        return busy

    def _on_cancel(self, handle):
        with self._lock:
            ours = self._goal == bytes(handle.goal_id.uuid)
        if ours:
            self._stop_run()
        return CancelResponse.ACCEPT

    async def _stop(self, _request, response):
        with self._lock:
            ended = self._ended
        if not self._stop_run():
            response.success = False
            response.message = 'no policy is running; nothing was changed'
            return response
        finished = await self.bridge.wait(ended, timeout=STOP_WAIT_S)
        response.success = bool(finished)
        response.message = ('stopped; the device holds' if finished else
                            f'asked to stop; the run had not ended after {STOP_WAIT_S:g} s')
        return response

    def destroy(self) -> None:
        with self._lock:
            worker = self._worker
        self._stop_run()
        if worker is not None:
            worker.shutdown(wait=False)
        self.action.destroy()
        self.node.destroy_service(self.stop_service)


class _EpisodeData:
    """A run_policy episode written to a LeRobot dataset (``dataset_folder``): a new folder
    under the node's dataset_root, or a dataset of the same features and fps there to add
    to, checked before the device changes; the recorder starts
    once the task's model is in (at the first control step), at the task's control rate.
    In lockstep the runner steps the physics itself (no chunks), so each control step's
    snapshot is offered through the device's door; in real time the recorder follows the
    chunks. The episode is saved with its outcome (``success``, ``failure``, ``ended_by``,
    ``return``, ``steps``, seed, policy, task) in its metadata, then the dataset finalised."""

    def __init__(self, node, device, goal, runner):
        from ...dataset.recorder import check_folder
        from .dataset import dataset_root, resolve_folder
        self.device, self.goal, self.runner = device, goal, runner
        self.folder = check_folder(resolve_folder(dataset_root(node.p), goal.dataset_folder,
                                                  'dataset_folder'))
        self.recorder = None

    def offer(self):
        from ...dataset.recorder import DatasetRecorder
        runner = self.runner
        if self.recorder is None:
            self.recorder = DatasetRecorder(
                self.device, self.folder, repo_id=f'local/{os.path.basename(self.folder)}',
                fps=1.0 / runner.task.control_dt, task=runner.task.name,
                follow_chunks=not runner.lockstep)
        if runner.lockstep:
            rec = self.recorder
            self.device.on_physics(lambda s: rec.offer(s.snapshot, s), wait=True)

    def finish(self, run):
        """Save the episode with its outcome and finalise; the folder (None: no frames)."""
        rec, self.recorder = self.recorder, None
        if rec is None:
            return None
        ep = run.result
        try:
            rec.save_episode(extra={
                'success': bool(ep.success), 'failure': ep.failure or '',
                'ended_by': ep.ended_by, 'return': float(ep.ret), 'steps': int(ep.steps),
                'completed': bool(run.completed), 'seed': int(self.goal.seed),
                'policy': self.goal.policy, 'task_name': self.runner.task.name,
                'lockstep': bool(self.runner.lockstep)})
        finally:
            rec.close()
        return rec.root

    def abandon(self):
        rec, self.recorder = self.recorder, None
        if rec is not None:
            rec.close()           # the interrupted episode is discarded, never half-written


def _cancel(policy):
    cancel = getattr(policy, 'cancel', None)
    if cancel is not None:
        cancel()


def _error(result, code, message):
    result.success = False
    result.code = code
    result.message = message
    return result
