"""sim_node stopped at any moment: no traceback, exit code 0, every waiting client answered.

Before: two SIGINTs 50 ms apart, or one during start-up, ended in a KeyboardInterrupt or
``ImportError: initialization failed`` traceback; move_to clients waiting at shutdown got
no result; a camera thread now and then raised ``RCLError`` as its publisher went away.
"""

import signal
import time

import pytest

rclpy = pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from dds_helpers import assert_clean, Client, ended, interrupt, start_sim  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from mujoco_hal_ros.action import MoveTo as MoveToAction  # noqa: E402

CYCLES = 10


@pytest.fixture
def client():
    c = Client()
    yield c
    c.close()


@pytest.mark.parametrize('delay', [0.3, 1.0], ids=['importing', 'starting'])
def test_sigint_during_start_up_exits_quietly(spawn, delay):
    proc = start_sim(spawn)
    time.sleep(delay)
    interrupt(proc)
    code, out = ended(spawn, proc, f'SIGINT {delay} s after start')
    assert code == 0, out[-2000:]
    assert_clean(out, f'SIGINT {delay} s after start')


def test_two_sigints_50_ms_apart_and_sigterm(spawn):
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc = start_sim(spawn, 'log_summary:=true', name=f'sim_node_{sig.name}')
        # this process's own line: the graph may still list the one before for a while
        end = time.monotonic() + 45.0
        while 'serving:' not in spawn.output(proc) and time.monotonic() < end \
                and proc.poll() is None:
            time.sleep(0.05)
        assert 'serving:' in spawn.output(proc), spawn.output(proc)[-2000:]
        interrupt(proc, sig)
        time.sleep(0.05)
        interrupt(proc, sig)
        code, out = ended(spawn, proc, f'two {sig.name}')
        assert code == 0, out[-2000:]
        assert_clean(out, f'two {sig.name}')


def test_waiting_move_to_clients_all_get_a_result(spawn, client):
    proc = start_sim(spawn, 'real_time_factor:=0.1')
    client.wait_graph(['/move_to/_action/send_goal'], proc, spawn)
    actions = [ActionClient(client.node, MoveToAction, '/move_to') for _ in range(5)]
    try:
        for a in actions:
            assert a.wait_for_server(timeout_sec=20.0)
        time.sleep(1.0)                         # the server has matched every client
        handles = []
        for i, a in enumerate(actions):
            goal = MoveToAction.Goal()
            goal.target.x, goal.target.y, goal.target.z = 0.17, 0.03 - 0.01 * i, 0.05
            handles.append(client.wait(a.send_goal_async(goal), 20.0))
        assert all(h.accepted for h in handles)
        results = [h.get_result_async() for h in handles]
        time.sleep(0.5)
        assert not results[-1].done(), 'the last move ended before the shutdown'
        interrupt(proc)
        assert client.answers(results, 15.0) == 5, \
            f'{sum(r.done() for r in results)} of 5 waiting clients got a result'
        last = results[-1].result()
        assert last.status == GoalStatus.STATUS_ABORTED and last.result.code == 'CLOSED'
        code, out = ended(spawn, proc, 'SIGINT with waiting move_to goals')
        assert code == 0
        assert_clean(out, 'SIGINT with waiting move_to goals')
    finally:
        for a in actions:
            a.destroy()


def test_start_stop_cycles_with_a_camera_subscribed(spawn, client):
    frames = []
    client.node.create_subscription(Image, '/overhead/image_raw', frames.append, 2)
    for i in range(CYCLES):
        count = len(frames)
        proc = start_sim(spawn, 'camera_rate:=30.0', name=f'cycle{i}')
        end = time.monotonic() + 45.0
        while len(frames) == count and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.05)
        assert len(frames) > count, f'cycle {i}: no frame:\n{spawn.output(proc)[-2000:]}'
        interrupt(proc)
        code, out = ended(spawn, proc, f'cycle {i}')
        assert code == 0, out[-2000:]
        assert_clean(out, f'cycle {i}')


def test_sigint_during_a_long_step_with_requests_waiting(spawn, client):
    """Requests that wait for the physics thread (reset, pause) behind a long ``step`` do
    not hold the shutdown: it ends within seconds, not when the steps would have."""
    from std_srvs.srv import SetBool, Trigger

    from mujoco_hal_ros.srv import Step
    proc = start_sim(spawn, 'start_paused:=true', 'real_time_factor:=0.0')
    client.wait_graph(['/step', '/reset', '/pause'], proc, spawn)
    stepper = client.node.create_client(Step, '/step')
    others = [client.node.create_client(Trigger, '/reset'),
              client.node.create_client(SetBool, '/pause')]
    for c in [stepper] + others:
        assert c.wait_for_service(timeout_sec=20.0)
    time.sleep(1.0)
    steps = stepper.call_async(Step.Request(steps=1_000_000))
    time.sleep(0.5)
    waiting = [others[0].call_async(Trigger.Request()),
               others[1].call_async(SetBool.Request(data=True))]
    time.sleep(0.5)
    assert not steps.done()
    t0 = time.monotonic()
    interrupt(proc)
    code, out = ended(spawn, proc, 'SIGINT during a long step', timeout=15.0)
    took = time.monotonic() - t0
    assert code == 0, out[-2000:]
    assert_clean(out, 'SIGINT during a long step')
    assert took < 8.0, f'shutdown took {took:.1f} s'
    assert client.answers([steps], 5.0) == 1, 'the step caller got no answer'
    assert not steps.result().success
    del waiting
