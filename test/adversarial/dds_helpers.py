"""What the over-DDS adversarial tests share: sim_node as its own process, a client node.

Every wait is bounded; every process is stopped at teardown (``spawn``). Loopback only: the
tests run on the random ROS_DOMAIN_ID the test runner picked.
"""

import os
import signal
import threading
import time

import pytest

rclpy = pytest.importorskip('rclpy')

from helpers import child_env, node_command, ros_args, SpunNodes, START_S  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402

EXIT_S = 10.0       # a signalled or refused sim_node is gone within this


class Client(SpunNodes):
    """One client node in a private Context, spun on a thread (several: many clients'
    answers are taken at once)."""

    join_s = 5.0

    def __init__(self, budget=120.0):
        super().__init__(lambda ctx: [rclpy.create_node('adversarial_client', context=ctx)],
                         lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
        self.node = self.nodes[0]
        self.spin(budget)

    def wait_graph(self, names, proc, spawn, timeout=START_S):
        end = time.monotonic() + timeout
        missing = names
        while time.monotonic() < end and proc.poll() is None:
            have = set(dict(self.node.get_topic_names_and_types())) | \
                set(dict(self.node.get_service_names_and_types()))
            missing = [n for n in names if n not in have]
            if not missing:
                return
            time.sleep(0.2)
        pytest.fail(f'missing {missing}; sim_node said:\n{spawn.output(proc)[-3000:]}')

    def answers(self, futures, timeout):
        """How many of ``futures`` are done within ``timeout`` s (all at once, one deadline)."""
        done = threading.Semaphore(0)
        for f in futures:
            f.add_done_callback(lambda _f: done.release())
        end = time.monotonic() + timeout
        count = 0
        while count < len(futures) and done.acquire(timeout=max(0.0, end - time.monotonic())):
            count += 1
        return sum(1 for f in futures if f.done())


def start_sim(spawn, *params, name='sim_node', cwd=None):
    """sim_node with ``params`` in its own process group (``spawn`` stops it)."""
    return spawn(node_command('sim_node') + ros_args(params), env=child_env(), name=name,
                 cwd=cwd)


def interrupt(proc, sig=signal.SIGINT):
    os.kill(proc.pid, sig)


def ended(spawn, proc, what, timeout=EXIT_S):
    """(exit code, output) of a process that must end by itself within ``timeout`` s."""
    try:
        code = proc.wait(timeout)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: say what it was doing
        pytest.fail(f'{what}: still running after {timeout} s:\n{spawn.output(proc)[-3000:]}')
    return code, spawn.output(proc)


def assert_clean(out, what):
    """No traceback, no rclpy error, no KeyboardInterrupt in a process's output."""
    for bad in ('Traceback', 'KeyboardInterrupt', 'RCLError', 'initialization failed',
                'Exception ignored'):
        assert bad not in out, f'{what}: {bad} in its output:\n{out[-3000:]}'
