"""sim_node stopped in the middle of a flood: exit code 0 and no ERROR line in its log.

Before (issue 39): SIGINT right after a burst of 1000 move_to goals (answered, preempted and
cancelled as they should be) ended with rc 0 but logged ``INTERNAL_ERROR in the executor
... RuntimeError: cannot schedule new futures after shutdown``: the teardown shut the
executor's thread pool down while its spinning thread had just been handed a callback.
The node's own log is the measurement: no ``[ERROR]``, no traceback.

Also SIGTERM during the same flood, and SIGINT while a run_policy episode (sim_node) or an
evaluate_policy evaluation (pool_node) waits on a declared policy computing in its worker
(whose process must not outlive the node).
"""

import os
import signal
import textwrap
import time

import pytest

rclpy = pytest.importorskip('rclpy')

from dds_helpers import assert_clean, Client, ended, interrupt, start_sim  # noqa: E402
from helpers import child_env, node_command, ros_args, wait_for  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402

from mujoco_hal_ros.action import MoveTo as MoveToAction, RunPolicy  # noqa: E402

GOALS = 1000


@pytest.fixture
def client():
    c = Client(budget=240.0)
    yield c
    c.close()


def assert_no_error(out, what):
    assert_clean(out, what)
    for bad in ('[ERROR]', 'INTERNAL_ERROR', 'cannot schedule new futures'):
        assert bad not in out, f'{what}: {bad} in its log:\n{out[-3000:]}'


def _goal(i):
    goal = MoveToAction.Goal()
    goal.target.x, goal.target.y, goal.target.z = 0.17, 0.03 - 0.00004 * (i % 1000), 0.05
    return goal


def _send(action, i):
    """One goal; every third cancelled once its answer came (the server preempts each
    goal with the next)."""
    future = action.send_goal_async(_goal(i))
    if i % 3 == 0:
        future.add_done_callback(
            lambda f: f.result() is not None and f.result().accepted
            and f.result().cancel_goal_async())
    return future


@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
def test_a_signal_right_after_a_flood_of_move_to_goals_logs_no_error(spawn, client, sig):
    """GOALS goals as fast as the client sends them, the signal, and goals and cancels
    still arriving while the node shuts down (its executor busy to the last moment)."""
    proc = start_sim(spawn, 'real_time_factor:=1.0', name=f'flood_{sig.name}')
    client.wait_graph(['/move_to/_action/send_goal'], proc, spawn)
    action = ActionClient(client.node, MoveToAction, '/move_to')
    try:
        assert action.wait_for_server(timeout_sec=30.0)
        time.sleep(1.0)                  # matched
        futures = [_send(action, i) for i in range(GOALS)]
        assert wait_for(lambda: sum(f.done() for f in futures) >= 10, 60.0), \
            spawn.output(proc)[-3000:]
        interrupt(proc, sig)
        end = time.monotonic() + 20.0
        i = GOALS
        while proc.poll() is None and time.monotonic() < end:
            _send(action, i)
            i += 1
            if i % 50 == 0:
                time.sleep(0.01)
        code, out = ended(spawn, proc, f'{sig.name} after {GOALS} move_to goals', timeout=20.0)
        assert code == 0, out[-3000:]
        assert_no_error(out, f'{sig.name} after {GOALS} move_to goals')
    finally:
        action.destroy()


POLICY = '''
import time


def blocks(obs):
    time.sleep(1e9)
'''


def test_sigint_while_a_declared_policy_computes_leaves_no_worker(spawn, client, tmp_path):
    (tmp_path / 'shutdown_policy_adversarial.py').write_text(textwrap.dedent(POLICY))
    env = child_env()
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(tmp_path), env.get('PYTHONPATH'))
                                        if p)
    proc = spawn(node_command('sim_node') + ros_args([
        "policies:=['blocks=shutdown_policy_adversarial:blocks']", 'policy_timeout_s:=3600.0']),
        env=env, name='sim_node_policy')
    client.wait_graph(['/run_policy/_action/send_goal'], proc, spawn)
    action = ActionClient(client.node, RunPolicy, '/run_policy')
    try:
        assert action.wait_for_server(timeout_sec=30.0)
        time.sleep(1.0)
        handle = client.wait(action.send_goal_async(RunPolicy.Goal(
            task='reach', policy='blocks', lockstep=True)), 20.0)
        assert handle.accepted
        result = handle.get_result_async()
        assert wait_for(lambda: _workers_of(proc.pid), 30.0), 'no worker started'
        workers = _workers_of(proc.pid)
        interrupt(proc)
        code, out = ended(spawn, proc, 'SIGINT while a policy computes', timeout=20.0)
        assert code == 0, out[-3000:]
        assert_no_error(out, 'SIGINT while a policy computes')
        assert client.answers([result], 10.0) == 1, 'the run_policy client got no result'
        assert wait_for(lambda: not any(os.path.exists(f'/proc/{w}') and _running(w)
                                        for w in workers), 10.0), 'a policy worker outlived'
    finally:
        action.destroy()


def test_sigint_while_an_evaluation_waits_on_a_declared_policy(spawn, client, tmp_path):
    """pool_node's evaluate_policy with its policy computing in the worker: rc 0, no
    ERROR line, the client answered, the worker gone."""
    from mujoco_hal_ros.action import EvaluatePolicy
    (tmp_path / 'shutdown_policy_adversarial.py').write_text(textwrap.dedent(POLICY))
    env = child_env()
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(tmp_path), env.get('PYTHONPATH'))
                                        if p)
    proc = spawn(node_command('pool_node') + ros_args([
        "policies:=['blocks=shutdown_policy_adversarial:blocks']", 'policy_timeout_s:=3600.0',
        'nbatch:=2', 'nthread:=1']), env=env, name='pool_node_policy')
    client.wait_graph(['/evaluate_policy/_action/send_goal'], proc, spawn)
    action = ActionClient(client.node, EvaluatePolicy, '/evaluate_policy')
    try:
        assert action.wait_for_server(timeout_sec=30.0)
        time.sleep(1.0)
        handle = client.wait(action.send_goal_async(EvaluatePolicy.Goal(
            task='reach', policy='blocks', episodes=2)), 20.0)
        assert handle.accepted
        result = handle.get_result_async()
        assert wait_for(lambda: _workers_of(proc.pid), 30.0), 'no worker started'
        workers = _workers_of(proc.pid)
        interrupt(proc)
        code, out = ended(spawn, proc, 'SIGINT while an evaluation waits', timeout=20.0)
        assert code == 0, out[-3000:]
        assert_no_error(out, 'SIGINT while an evaluation waits')
        assert client.answers([result], 10.0) == 1, 'the evaluate_policy client got no result'
        assert wait_for(lambda: not any(_running(w) for w in workers), 10.0), \
            'a policy worker outlived pool_node'
    finally:
        action.destroy()


def _running(pid):
    try:
        with open(f'/proc/{pid}/stat', encoding='utf-8') as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(')') + 2] != 'Z'


def _workers_of(pid):
    from mujoco_hal_ros.tasks.policy_process import descendants
    found = []
    for child in descendants(pid):
        try:
            with open(f'/proc/{child}/cmdline', 'rb') as handle:
                if b'policy_worker' in handle.read():
                    found.append(child)
        except OSError:
            pass
    return found
