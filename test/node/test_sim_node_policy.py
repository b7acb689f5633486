"""sim_node's run_policy action and stop_policy service (``ros/sim/policy.py``).

One SimNode on the bench arm (own rclpy Context, a client node beside it). A lockstep
episode must come back as pool evaluation's episode of the same task, policy, seed and
episode, and leave the device on that episode's last state; refusals change nothing; one
run at a time; stop_policy and cancel end a run with the device holding.
"""

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from helpers import ActionNodes, wait_for  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from mujoco_hal_ros.action import RunPolicy  # noqa: E402
from mujoco_hal_ros.ros.guard import GUARDED  # noqa: E402
from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402
from mujoco_hal_ros.tasks import evaluate, load_task  # noqa: E402
from mujoco_hal_ros.tasks.reference import run_episode  # noqa: E402

BUDGET_S = 240.0


class Harness(ActionNodes):
    def __init__(self):
        super().__init__(lambda ctx: SimNode(context=ctx, parameter_overrides=[
            Parameter('real_time_factor', value=1.0), Parameter('publish_rate', value=20.0),
            Parameter('web_viewer', value=0)]),
            'sim_policy_test_client', RunPolicy, 'run_policy', budget=BUDGET_S)
        self.device = self.node.device

    def send(self, feedback=None, **goal):
        return self.send_goal(RunPolicy.Goal(**goal), feedback)

    def run(self, timeout=60.0, **goal):
        return super().run(RunPolicy.Goal(**goal), timeout=timeout)

    def stop(self):
        return self.call(Trigger, 'stop_policy', Trigger.Request())


@pytest.fixture(scope='module')
def h():
    harness = Harness()
    try:
        yield harness
    finally:
        harness.close()


def _state(device):
    snap = device.snapshot
    return device.generation, snap.qpos.copy(), snap.time, device.paused


def test_entry_points_are_guarded(h):
    assert getattr(h.node.policy.stop_service.callback, GUARDED, False)
    assert type(h.node.policy.action).__module__ == 'mujoco_hal_ros.ros.guard'


def test_lockstep_episode_equals_the_pools(h):
    h.device.pause(True)           # so the device keeps the episode's last state to look at
    try:
        got = []
        handle = h.send(feedback=lambda m: got.append(m.feedback.steps), task='reach',
                        policy='random', seed=11, episode=2, lockstep=True)
        res = h.wait(handle.get_result_async(), 60.0)
        r = res.result
        assert res.status == GoalStatus.STATUS_SUCCEEDED, r.message
        assert r.success and r.code == 'DONE' and r.task == 'reach' and r.lockstep
        pool = evaluate(load_task('reach'), 'random', 3, 3, seed=11).episodes[2]
        ref, rows = run_episode(load_task('reach'), 'random', 11, 2, record=True)
        assert pool.to_dict() == ref.to_dict()
        assert (r.episode, r.episode_success, r.failure or None, r.ended_by,
                r.episode_return, r.steps) == (2, pool.success, pool.failure, pool.ended_by,
                                               pool.ret, pool.steps)
        assert wait_for(lambda: got and got[-1] == r.steps, 5.0)
        snap = h.device.snapshot
        nq, nv = snap.qpos.size, snap.qvel.size
        assert h.device.paused and snap.time == r.end_time
        assert np.array_equal(snap.qpos, rows[-1, 1:1 + nq])
        assert np.array_equal(snap.qvel, rows[-1, 1 + nq:1 + nq + nv])
        assert not snap.moving and h.device.audit('hold')
    finally:
        h.device.pause(False)


@pytest.mark.parametrize('task, policy, code, words', [
    ('no_such_task', 'zero', 'CONFIG_ERROR', 'no built-in task'),
    ('reach', 'sometimes', 'FORBIDDEN', 'nothing was opened or imported'),
    ('reach', 'os:getcwd', 'FORBIDDEN', 'nothing was opened or imported'),
    ('reach', 'no_such.onnx', 'INVALID_ARGUMENT', 'no such file'),
])
def test_bad_goals_abort_with_a_code_and_change_nothing(h, task, policy, code, words):
    h.device.pause(True)
    try:
        before = _state(h.device)
        status, r = h.run(task=task, policy=policy, lockstep=True)
        assert status == GoalStatus.STATUS_ABORTED
        assert not r.success and r.code == code and words in r.message, r.message
        after = _state(h.device)
        assert after[0] == before[0] and np.array_equal(after[1], before[1])
        assert after[2:] == before[2:]
    finally:
        h.device.pause(False)


def test_stop_policy_with_nothing_running_changes_nothing(h):
    audit = len(h.device.audit())
    r = h.stop()
    assert not r.success and 'no policy is running' in r.message
    assert len(h.device.audit()) == audit


def test_one_run_at_a_time_and_stop_policy_ends_it_holding(h):
    got = []
    first = h.send(feedback=lambda m: got.append(m.feedback.steps), task='reach',
                   policy='random', seed=1, episode=0, lockstep=False)
    assert wait_for(lambda: got and got[-1] >= 2, 30.0)
    generation = h.device.generation
    status, busy = h.run(task='reach', policy='zero', lockstep=True)
    assert status == GoalStatus.STATUS_ABORTED and busy.code == 'BUSY'
    assert 'already running' in busy.message and h.device.generation == generation
    stopped = h.stop()
    assert stopped.success and 'holds' in stopped.message
    res = h.wait(first.get_result_async(), 30.0)
    assert res.status == GoalStatus.STATUS_ABORTED
    r = res.result
    assert r.code == 'STOPPED' and r.failure == 'stopped' and 2 <= r.steps < 100
    assert not h.device.snapshot.moving and h.device.audit('hold')


def test_cancel_stops_the_run(h):
    got = []
    handle = h.send(feedback=lambda m: got.append(m.feedback.steps), task='reach',
                    policy='zero', lockstep=False)
    assert wait_for(lambda: got and got[-1] >= 1, 30.0)
    h.wait(handle.cancel_goal_async())
    res = h.wait(handle.get_result_async(), 30.0)
    assert res.status == GoalStatus.STATUS_CANCELED
    assert res.result.code == 'STOPPED' and res.result.steps < 100
    assert not h.device.snapshot.moving


def test_refused_where_world_edits_are_off(h, monkeypatch):
    class Off:
        world_edits = False
    monkeypatch.setattr(h.node, 'p', Off())
    generation = h.device.generation
    status, r = h.run(task='reach', policy='zero', lockstep=True)
    assert status == GoalStatus.STATUS_ABORTED and r.code == 'FORBIDDEN'
    assert 'world_edits' in r.message and h.device.generation == generation
