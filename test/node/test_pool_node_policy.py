"""pool_node's evaluate_policy action: the evaluator's episodes over ROS, feedback, cancel.

One PoolNode on the bench arm (own rclpy Context, a client node beside it). The per-episode
results must equal an in-process ``tasks.evaluate`` of the same task, policy and seed, and
the node's own pool must not change: the evaluation runs on a pool of its own.
"""

import sys
import tempfile
import textwrap

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from helpers import ActionNodes, wait_for  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from mujoco_hal_ros.action import EvaluatePolicy  # noqa: E402
from mujoco_hal_ros.ros.pool.pool_node import PoolNode  # noqa: E402
from mujoco_hal_ros.tasks import evaluate, load_task  # noqa: E402

BUDGET_S = 120.0
DECLARED = textwrap.dedent('''
    import time
    import numpy as np


    def still(obs):
        return np.zeros((len(obs), 4))


    def blocks(obs):
        time.sleep(1e9)
    ''')


class Harness(ActionNodes):
    def __init__(self):
        super().__init__(lambda ctx: PoolNode(context=ctx, parameter_overrides=[
            Parameter('nbatch', value=4), Parameter('nthread', value=1),
            Parameter('keyframe', value='rest'),
            Parameter('policies', value=['still=pool_node_declared:still',
                                         'blocks=pool_node_declared:blocks']),
            Parameter('policy_timeout_s', value=2.0)]),
            'pool_policy_test_client', EvaluatePolicy, '/evaluate_policy', threads=6,
            budget=BUDGET_S)


@pytest.fixture(scope='module')
def h():
    with tempfile.TemporaryDirectory() as folder:
        with open(f'{folder}/pool_node_declared.py', 'w', encoding='utf-8') as handle:
            handle.write(DECLARED)
        sys.path.insert(0, folder)
        harness = Harness()
        try:
            yield harness
        finally:
            harness.close()
            sys.path.remove(folder)


def test_episodes_equal_in_process_evaluation(h):
    before = h.node.pool.get_state(full=True).copy()
    feedback = []
    status, res = h.run(EvaluatePolicy.Goal(task='reach', policy='random', episodes=5, envs=2,
                                            seed=3), feedback=lambda m: feedback.append(
                                                m.feedback.episodes_done))
    assert status == GoalStatus.STATUS_SUCCEEDED, res.message
    assert res.success and res.code == 'DONE' and res.completed and res.task == 'reach'
    local = evaluate(load_task('reach'), 'random', 5, 2, seed=3)
    assert list(res.episode) == [e.episode for e in local.episodes]
    assert list(res.episode_success) == [e.success for e in local.episodes]
    assert list(res.episode_failure) == [e.failure or '' for e in local.episodes]
    assert list(res.episode_return) == [e.ret for e in local.episodes]
    assert list(res.episode_steps) == [e.steps for e in local.episodes]
    assert res.episodes_done == 5 and res.success_rate == local.success_rate
    assert wait_for(lambda: feedback and feedback[-1] == 5, 5.0)
    assert feedback == sorted(feedback)
    assert np.array_equal(h.node.pool.get_state(full=True), before)


@pytest.mark.parametrize('task, policy, code, words', [
    ('reach', 'sometimes', 'FORBIDDEN', 'nothing was opened or imported'),
    ('no_such_task', 'zero', 'CONFIG_ERROR', 'no built-in task'),
    ('reach', 'os:getcwd', 'FORBIDDEN', 'nothing was opened or imported'),
    ('reach', 'pool_node_declared:still', 'FORBIDDEN', 'still'),
])
def test_bad_goals_abort_with_a_code(h, task, policy, code, words):
    status, res = h.run(EvaluatePolicy.Goal(task=task, policy=policy, episodes=2))
    assert status == GoalStatus.STATUS_ABORTED
    assert not res.success and res.code == code and words in res.message
    assert res.episodes_done == 0


def test_zero_episodes_refused(h):
    status, res = h.run(EvaluatePolicy.Goal(task='reach', policy='zero', episodes=0))
    assert status == GoalStatus.STATUS_ABORTED and res.code == 'INVALID_ARGUMENT'


def test_cancel_stops_between_control_steps(h):
    got = []
    handle = h.wait(h.action.send_goal_async(
        EvaluatePolicy.Goal(task='reach', policy='zero', episodes=100000, envs=2),
        feedback_callback=lambda m: got.append(m.feedback.episodes_done)))
    assert handle.accepted
    assert wait_for(lambda: got and got[-1] >= 2, 60.0)
    h.wait(handle.cancel_goal_async())
    res = h.wait(handle.get_result_async(), 30.0)
    assert res.status == GoalStatus.STATUS_CANCELED
    r = res.result
    assert r.code == 'STOPPED' and not r.completed and 2 <= r.episodes_done < 100000
    assert list(r.episode) == list(range(r.episodes_done))


def test_a_declared_policy_runs_in_its_worker_as_in_process(h):
    """still (all zeros, declared by the operator) gives the built-in zero's episodes."""
    status, res = h.run(EvaluatePolicy.Goal(task='reach', policy='still', episodes=3, envs=2,
                                            seed=4))
    assert status == GoalStatus.STATUS_SUCCEEDED, res.message
    ref = evaluate(load_task('reach'), 'zero', 3, 2, seed=4)
    assert list(res.episode_return) == [e.ret for e in ref.episodes]
    assert list(res.episode_steps) == [e.steps for e in ref.episodes]


def test_a_declared_policy_that_never_answers_ends_timeout_and_the_node_goes_on(h):
    status, res = h.run(EvaluatePolicy.Goal(task='reach', policy='blocks', episodes=2))
    assert status == GoalStatus.STATUS_ABORTED
    assert res.code == 'TIMEOUT' and 'policy_timeout_s' in res.message, res.message
    status, res = h.run(EvaluatePolicy.Goal(task='reach', policy='zero', episodes=2))
    assert status == GoalStatus.STATUS_SUCCEEDED and res.code == 'DONE', res.message
