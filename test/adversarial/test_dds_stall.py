"""A stalled process (stopped and continued) does not pay the stall back in a burst.

Before, a 0.8 s stop was run off at 1.8x real time for a second while diagnostics said
"running"; now the debt beyond ``stepper.MAX_LAG_S`` is dropped, counted and reported.
"""

import signal
import threading
import time

import pytest

rclpy = pytest.importorskip('rclpy')

from dds_helpers import Client, start_sim  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402

STOP_S = 0.8
MAX_RTF = 1.1


@pytest.fixture
def client():
    c = Client()
    yield c
    c.close()


def test_a_stall_is_dropped_not_caught_up_and_reported(spawn, client):
    proc = start_sim(spawn, 'camera_rate:=1.0')
    client.wait_graph(['/clock', '/diagnostics'], proc, spawn)
    clock, diags, lock = [], [], threading.Lock()

    def on_clock(msg):
        with lock:
            clock.append((time.monotonic(), msg.clock.sec + msg.clock.nanosec * 1e-9))
    client.node.create_subscription(Clock, '/clock', on_clock, 100)
    client.node.create_subscription(DiagnosticArray, '/diagnostics', diags.append, 10)
    time.sleep(2.0)                             # running, /clock arriving
    proc.send_signal(signal.SIGSTOP)
    time.sleep(STOP_S)
    proc.send_signal(signal.SIGCONT)
    resumed = time.monotonic()
    time.sleep(1.5)
    with lock:
        before = [(w, s) for w, s in clock if w <= resumed]
        after = [(w, s) for w, s in clock if w > resumed]
    assert before and len(after) > 20, f'{len(after)} /clock messages after the stall'
    # from where simulated time stood when the process stopped, to a second after it went on
    start = before[-1][1]
    end = next((p for p in after if p[0] >= resumed + 1.0), after[-1])
    rtf = (end[1] - start) / (end[0] - resumed)
    assert rtf <= MAX_RTF, f'real-time factor {rtf:.2f} over the second after a stall'

    def dropped():
        for msg in diags:
            for status in msg.status:
                values = {kv.key: kv.value for kv in status.values}
                if float(values.get('dropped_s', 0)) >= 0.5:
                    return status
        return None
    end_wait = time.monotonic() + 5.0
    while dropped() is None and time.monotonic() < end_wait:
        time.sleep(0.1)
    status = dropped()
    assert status is not None, 'diagnostics never reported the dropped time'
    out = spawn.output(proc)
    assert 'stalled:' in out and 'dropped' in out, out[-2000:]


def test_an_unstable_model_is_logged_by_the_node(spawn, client):
    """Before, only MuJoCo's own stderr warning said so; now the node logs one line."""
    import os

    from mujoco_hal_ros.srv import SetGoals
    model = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         'models', 'unstable.xml')
    proc = start_sim(spawn, f'model:={model}', 'keyframe:=zero')
    client.wait_graph(['/set_goals', '/diagnostics'], proc, spawn)
    res = client.call(SetGoals, '/set_goals', SetGoals.Request(channels=['s_goal'],
                                                               values=[0.5]))
    assert res.success, list(res.messages)
    end = time.monotonic() + 10.0
    while 'simulation went unstable' not in spawn.output(proc) and time.monotonic() < end:
        time.sleep(0.1)
    out = spawn.output(proc)
    assert 'simulation went unstable' in out, out[-2000:]
    assert out.count('simulation went unstable') == 1, out[-2000:]
