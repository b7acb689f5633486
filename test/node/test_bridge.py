"""CompletionBridge: core completions answer ROS requests on the executor.

A plain node with a bridge, spun by a MultiThreadedExecutor on a thread, for what the
bridge itself promises (prompt wake-up, errors, time, close); a paused SimNode for many
requests at once and for destroying a node with requests still waiting.
"""

import concurrent.futures
import statistics
import threading
import time

import pytest

rclpy = pytest.importorskip('rclpy')

from helpers import SpunNodes, wait_for  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_srvs.srv import SetBool  # noqa: E402

from mujoco_hal_ros.errors import DeviceError, NOT_PAUSED  # noqa: E402
from mujoco_hal_ros.ros.bridge import CompletionBridge  # noqa: E402
from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402  (sets headless GL first)
from mujoco_hal_ros.srv import MoveTo as MoveToSrv, Step  # noqa: E402

BUDGET_S = 120.0


class Bare(SpunNodes):
    """One plain node with a CompletionBridge, spun on a thread."""

    def __init__(self):
        super().__init__(lambda ctx: [rclpy.create_node('bridge_test', context=ctx)],
                         lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
        self.node = self.nodes[0]
        self.bridge = CompletionBridge(self.node)
        self.spin(BUDGET_S)

    def run(self, coroutine_fn, timeout=10.0):
        """Run ``coroutine_fn()`` as an executor task; its result."""
        task = self.executor.create_task(coroutine_fn)
        assert wait_for(task.done, timeout), 'the coroutine never finished'
        return task.result()

    def close(self):
        self.bridge.close()
        super().close()


@pytest.fixture
def bare():
    h = Bare()
    try:
        yield h
    finally:
        h.close()


def test_a_completion_from_another_thread_wakes_the_coroutine_at_once(bare):
    """The node is idle (nothing else would wake the executor): the awaiting coroutine
    still resumes as soon as the core thread completes its future."""
    lags = []
    for i in range(5):
        core = concurrent.futures.Future()
        resumed = []

        async def waiter(core=core, resumed=resumed):
            value = await bare.bridge.wrap(core)
            resumed.append(time.monotonic())
            return value
        task = bare.executor.create_task(waiter)
        time.sleep(0.2)                          # the executor is waiting on nothing now
        assert not task.done()
        t0 = time.monotonic()
        threading.Thread(target=core.set_result, args=(i,)).start()
        assert wait_for(task.done, 5.0), 'the coroutine was not woken'
        assert task.result() == i
        lags.append(resumed[0] - t0)
    assert statistics.median(lags) < 0.1 and max(lags) < 1.0, lags


def test_an_exception_from_core_work_is_raised_where_it_is_awaited(bare):
    core = concurrent.futures.Future()

    async def step_like():
        try:
            await bare.bridge.wrap(core)
        except DeviceError as err:
            return err.code
        return 'no error'
    task = bare.executor.create_task(step_like)
    core.set_exception(DeviceError(NOT_PAUSED, 'pause first'))
    assert wait_for(task.done, 5.0)
    assert task.result() == NOT_PAUSED

    def broken():
        raise ValueError('bad input')

    async def on_worker():
        try:
            await bare.bridge.run(broken)
        except ValueError as err:
            return str(err)
    assert bare.run(on_worker) == 'bad input'

    async def ok():
        return await bare.bridge.run(lambda a, b: a + b, 2, b=3)
    assert bare.run(ok) == 5


def test_sleep_wait_and_ticks_keep_time(bare):
    bridge = bare.bridge

    async def sleeper():
        t0 = time.monotonic()
        await bridge.sleep(0.1)
        return time.monotonic() - t0
    slept = bare.run(sleeper)
    assert 0.09 <= slept < 1.0, slept

    async def times_out():
        never = bridge.future()
        t0 = time.monotonic()
        done = await bridge.wait(never, timeout=0.1)
        return done, time.monotonic() - t0
    done, took = bare.run(times_out)
    assert done is False and 0.09 <= took < 1.0, (done, took)

    async def finishes_first():
        core = concurrent.futures.Future()
        threading.Timer(0.05, core.set_result, args=(1,)).start()
        t0 = time.monotonic()
        done = await bridge.wait(bridge.wrap(core), bridge.future(), timeout=5.0)
        return done, time.monotonic() - t0
    done, took = bare.run(finishes_first)
    assert done is True and took < 1.0, (done, took)

    ticks = []
    ticker = bridge.every(0.02, lambda: ticks.append(time.monotonic()))
    ticker.start()
    ticker.start()                              # a second start changes nothing
    time.sleep(0.5)
    ticker.stop()
    n = len(ticks)
    assert 3 <= n <= 30, n                      # 25 at 50 Hz; fewer under load, never double
    time.sleep(0.2)
    assert len(ticks) <= n + 1 and not ticker.running, (n, len(ticks))


def test_close_answers_what_is_pending_and_does_not_hang():
    h = Bare()
    release = threading.Event()
    try:
        bridge = h.bridge
        core = concurrent.futures.Future()            # never completed
        results = {}

        async def waiter(i, make):
            results[i] = await make()
        makers = (lambda: bridge.wrap(core), lambda: bridge.sleep(60.0),
                  lambda: bridge.run(release.wait, 30.0),
                  lambda: bridge.wait(bridge.future(), timeout=60.0))
        for i, make in enumerate(makers):
            h.executor.create_task(waiter, i, make)
        ticker = bridge.every(0.01, lambda: None)
        ticker.start()
        time.sleep(0.3)
        assert results == {}
        t0 = time.monotonic()
        bridge.close()
        assert time.monotonic() - t0 < 1.0
        assert wait_for(lambda: len(results) == 4, 5.0), results
        # None: closed; the wait may also see its future answered (None) first: True
        assert [results[i] for i in range(3)] == [None] * 3 and results[3] in (None, True)
        bridge.close()                                  # twice is harmless
        assert bridge.future().result() is None        # after close: answered at once
    finally:
        release.set()
        t0 = time.monotonic()
        h.close()
        assert time.monotonic() - t0 < 15.0


# --- through sim_node -----------------------------------------------------------------------
class Sim(SpunNodes):
    def __init__(self, **overrides):
        params = {'start_paused': True, 'publish_rate': 50.0, 'tf_rate': 50.0,
                  'camera_rate': 1.0, **overrides}
        super().__init__(lambda ctx: [
            SimNode(context=ctx, parameter_overrides=[
                Parameter(k, value=v) for k, v in params.items()]),
            rclpy.create_node('bridge_test_client', context=ctx)],
            lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
        self.node, self.client = self.nodes
        self.spin(BUDGET_S)


def _threads_during(fn):
    """The most threads alive while ``fn()`` runs, sampled every 10 ms."""
    stop, peak = threading.Event(), [0]

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], threading.active_count())
            time.sleep(0.01)
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        out = fn()
    finally:
        stop.set()
        sampler.join()
    return out, peak[0]


def _send(client, requests):
    """Five every 200 ms: a service's request queue keeps 10 (rclpy's default) and the
    executor takes one request per wake, so a faster burst loses some before they are
    taken (as it did before the bridge)."""
    futures = []
    for i in range(0, len(requests), 5):
        futures += [client.call_async(r) for r in requests[i:i + 5]]
        time.sleep(0.2)
    return futures


STEPS = 20000


def test_fifty_requests_at_once_are_all_answered_without_a_thread_each():
    sim = Sim()
    step = sim.client.create_client(Step, 'step')
    move = sim.client.create_client(MoveToSrv, 'move_to')
    try:
        assert step.wait_for_service(timeout_sec=10.0)
        assert move.wait_for_service(timeout_sec=10.0)
        assert sim.wait(step.call_async(Step.Request(steps=1))).success   # warm
        # ... and the bridge's one worker, which pause and move_to's start run on
        assert sim.call(SetBool, 'pause', SetBool.Request(data=True)).success
        _, idle = _threads_during(lambda: time.sleep(0.2))

        dt = float(sim.node.device.model.opt.timestep)
        t_start = sim.node.device.snapshot.time

        def burst_steps():
            # long enough that most are still waiting when the last is sent (a step
            # request runs about as fast as a bare mj_step loop)
            futures = _send(step, [Step.Request(steps=STEPS) for _ in range(50)])
            waiting = sum(not f.done() for f in futures)
            wait_for(lambda: all(f.done() for f in futures), 60.0)
            return futures, waiting
        (futures, waiting), peak = _threads_during(burst_steps)
        ran = round((sim.node.device.snapshot.time - t_start) / (STEPS * dt))
        answered = sum(f.done() for f in futures)
        assert answered == 50, f'{answered} of 50 answered; {ran} step requests ran'
        answers = [f.result() for f in futures]
        assert waiting >= 20, waiting                   # many were waiting at the same time
        assert all(a.success for a in answers), [a.message for a in answers if not a.success]
        times = [a.sim_time for a in answers]
        assert len(set(times)) == 50                    # fifty steps, each answered once
        assert peak <= idle + 1, (idle, peak)           # no thread per request

        assert sim.call(SetBool, 'pause', SetBool.Request(data=False)).success

        def burst_moves():
            requests = []
            for i in range(20):
                req = MoveToSrv.Request(wait=True)
                req.target.x, req.target.y, req.target.z = 0.15 + 0.002 * i, 0.0, 0.06
                requests.append(req)
            return [sim.wait(f, 30.0) for f in _send(move, requests)]
        answers, peak = _threads_during(burst_moves)
        codes = [a.code for a in answers]
        # each is preempted by a later one or arrives; the last to start arrives
        assert len(codes) == 20 and 'DONE' in codes, codes
        assert set(codes) <= {'DONE', 'PREEMPTED'}, codes
        assert peak <= idle + 1, (idle, peak)
    finally:
        sim.client.destroy_client(step)
        sim.client.destroy_client(move)
        sim.close()


def test_destroying_sim_node_with_requests_waiting_neither_hangs_nor_raises():
    sim = Sim()
    step = sim.client.create_client(Step, 'step')
    try:
        assert step.wait_for_service(timeout_sec=10.0)
        long_step = step.call_async(Step.Request(steps=1_000_000))
        time.sleep(0.2)
        queued = [step.call_async(Step.Request(steps=1)) for _ in range(5)]
        time.sleep(0.5)
        assert not long_step.done() and not any(f.done() for f in queued)
    finally:
        sim.client.destroy_client(step)
        t0 = time.monotonic()
        sim.close()
        took = time.monotonic() - t0
    assert took < 5.0, took
