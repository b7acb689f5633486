"""Helpers shared by the node and e2e tiers: bounded waits, node processes, ROS harness parts.

Imported by name (``from helpers import ...``): ``test/conftest.py`` puts this folder on
``sys.path``, whichever tier pytest was started on and from whatever directory. That
conftest is loaded for the core tier too, so this module imports without ROS: rclpy is
imported only by the parts that use it.
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

START_S = 45.0      # import + model load + DDS discovery on a loaded 2-core machine


# --- bounded waits ---------------------------------------------------------------------------
def wait_for(predicate, timeout, period=0.05):
    """Poll ``predicate`` until it is truthy or ``timeout`` seconds pass; returns its value."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > end:
            return value
        time.sleep(period)


def wait_future(future, timeout):
    """The future's result, waited for on an event (an executor spins elsewhere)."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout):
        raise AssertionError(f'no answer within {timeout} s')
    return future.result()


# --- node processes --------------------------------------------------------------------------
def installed_executable(name):
    """<prefix>/lib/mujoco_hal_ros/<name> from AMENT_PREFIX_PATH, or None."""
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        path = os.path.join(prefix, 'lib', 'mujoco_hal_ros', name)
        if prefix and os.access(path, os.X_OK):
            return path
    return None


def node_command(name):
    """The command that runs node ``name`` (sim_node, pool_node): the installed executable,
    or else the ``main`` of ``mujoco_hal_ros.ros.<name>``."""
    exe = installed_executable(name)
    if exe is not None:
        return [sys.executable, exe]
    return [sys.executable, '-c', f'import sys; from mujoco_hal_ros.ros.{name} import main; '
            'sys.exit(main())']


def ros_args(params=(), namespace=None):
    """``--ros-args``, a remap into ``namespace`` if given, and ``-p`` for each parameter."""
    args = ['--ros-args']
    if namespace:
        args += ['-r', f'__ns:={namespace}']
    for p in params:
        args += ['-p', p]
    return args


def child_env():
    """PYTHONPATH for a child: the installed packages only, never the source tree."""
    paths = []
    ver = f'python{sys.version_info[0]}.{sys.version_info[1]}'
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        if prefix:
            paths.append(os.path.join(prefix, 'lib', ver, 'site-packages'))
    paths += [os.path.abspath(p) for p in os.environ.get('PYTHONPATH', '').split(os.pathsep)
              if p]
    keep = []
    for p in paths:
        src = os.path.join(p, 'mujoco_hal_ros')
        if os.path.isdir(src) and not os.path.isdir(os.path.join(src, 'msg')):
            continue                      # a source checkout: no generated interfaces
        if os.path.isdir(p) and p not in keep:
            keep.append(p)
    return {'PYTHONPATH': os.pathsep.join(keep), 'PYTHONUNBUFFERED': '1'}


def exit_lines(spawn, proc, what, timeout=START_S):
    """(exit code, non-blank output lines) of a process ``spawn`` started that should end by
    itself; the test fails with its output if it is still running after ``timeout`` s."""
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f'{what} kept running:\n{spawn.output(proc)[-2000:]}')
    return code, [line for line in spawn.output(proc).splitlines() if line.strip()]


def stop_process(proc, grace=5.0):
    """SIGINT the process group (rclpy eats SIGTERM), wait, then SIGKILL it; returns the
    exit code."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5.0)
    return proc.returncode


# --- in-process ROS --------------------------------------------------------------------------
def duration(t):
    """Seconds as a builtin_interfaces Duration."""
    from builtin_interfaces.msg import Duration
    ns = int(round(t * 1e9))
    return Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


class SpinThread:
    """Spins ``executor`` on a daemon thread until ``stop``, the shutdown of its context, or
    ``budget`` seconds, whichever comes first."""

    def __init__(self, executor, budget):
        self.executor = executor
        self._stop = threading.Event()
        self._deadline = time.monotonic() + budget
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self):
        from rclpy.exceptions import InvalidHandle
        from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
        while not self._stop.is_set() and time.monotonic() < self._deadline \
                and self.executor.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except (InvalidHandle, _rclpy.RCLError, AttributeError):
                # A test destroyed an entity (an ActionClient: "action client pointer is
                # invalid", or its _lock already deleted) while this thread was building
                # the wait set. Before this was caught, that race ended the spin thread and
                # every later test of the module timed out waiting for answers no one took.
                pass

    def stop(self, join_s=10.0):
        self._stop.set()
        self._thread.join(join_s)


class SpunNodes:
    """Nodes in a private rclpy Context, spun by one executor on a thread for a bounded time.

    ``make_nodes(ctx)`` returns the nodes (if it raises, the context is shut down);
    ``make_executor(ctx)`` the executor they are added to. ``spin(budget)`` starts the
    thread; ``close`` stops it and the executor, destroys the nodes (last first) and shuts
    the context down. Requests go out from the last node.
    """

    join_s = 10.0       # how long close waits for the spinning thread

    def __init__(self, make_nodes, make_executor):
        import rclpy
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, args=[])
        try:
            self.nodes = list(make_nodes(self.ctx))
        except BaseException:
            rclpy.shutdown(context=self.ctx)
            raise
        self.executor = make_executor(self.ctx)
        for node in self.nodes:
            self.executor.add_node(node)
        self.spinner = None

    def spin(self, budget):
        self.spinner = SpinThread(self.executor, budget)

    def close(self):
        import rclpy
        if self.spinner is not None:
            self.spinner.stop(self.join_s)
        self.executor.shutdown(timeout_sec=2.0)
        for node in reversed(self.nodes):
            node.destroy_node()
        rclpy.shutdown(context=self.ctx)

    def wait(self, future, timeout=20.0):
        return wait_future(future, timeout)

    def call(self, srv_type, name, request, timeout=20.0):
        """Call service ``name`` from the last node; fails if it is not offered in 10 s."""
        node = self.nodes[-1]
        cli = node.create_client(srv_type, name)
        try:
            assert cli.wait_for_service(timeout_sec=10.0), f'{name} not offered'
            return self.wait(cli.call_async(request), timeout)
        finally:
            node.destroy_client(cli)


class ActionNodes(SpunNodes):
    """The node under test (``make_node(ctx)``) and a client node, spun together; an action
    client for ``action_name`` on the client, whose server is found before this returns."""

    def __init__(self, make_node, client_name, action_type, action_name, *, threads=4,
                 budget=240.0):
        import rclpy
        from rclpy.action import ActionClient
        from rclpy.executors import MultiThreadedExecutor
        super().__init__(lambda ctx: [make_node(ctx),
                                      rclpy.create_node(client_name, context=ctx)],
                         lambda ctx: MultiThreadedExecutor(num_threads=threads, context=ctx))
        self.node, self.client = self.nodes
        self.action = ActionClient(self.client, action_type, action_name)
        self.spin(budget)
        assert self.action.wait_for_server(timeout_sec=10.0), f'{action_name} not served'

    def close(self):
        self.spinner.stop(self.join_s)
        self.action.destroy()
        super().close()

    def send_goal(self, goal, feedback=None):
        """The accepted goal's handle (fails if it is rejected)."""
        handle = self.wait(self.action.send_goal_async(goal, feedback_callback=feedback))
        assert handle.accepted
        return handle

    def run(self, goal, feedback=None, timeout=60.0):
        """(status, result) of ``goal`` run to its end."""
        res = self.wait(self.send_goal(goal, feedback).get_result_async(), timeout)
        return res.status, res.result


class SpinInline:
    """Mixin: spin ``self.ex`` on the calling thread in 10 ms slices, for a bounded time."""

    def spin_until(self, predicate, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f'not done within {timeout} s')
            self.ex.spin_once(timeout_sec=0.01)

    def spin_for(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.ex.spin_once(timeout_sec=0.01)

    def wait(self, future, timeout=10.0):
        self.spin_until(future.done, timeout)
        return future.result()


# --- TF ----------------------------------------------------------------------------------------
def tf_world_poses(transforms, world='world'):
    """frame -> (position (3,), rotation (3, 3)) in ``world``, composed up the TF tree.

    ``transforms`` are TransformStamped (latest per child wins), /tf and /tf_static alike.
    """
    import numpy as np
    edges = {t.child_frame_id: t for t in transforms}
    poses = {world: (np.zeros(3), np.eye(3))}

    def pose(frame):
        if frame not in poses:
            t = edges[frame]
            ppos, prot = pose(t.header.frame_id)
            tr, q = t.transform.translation, t.transform.rotation
            w, x, y, z = q.w, q.x, q.y, q.z
            rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
            poses[frame] = (ppos + prot @ np.array([tr.x, tr.y, tr.z]), prot @ rot)
        return poses[frame]

    for frame in edges:
        pose(frame)
    return poses


# --- reruns ----------------------------------------------------------------------------------
def rerun_once(items, reruns=1):
    """Mark every collected test that has no ``flaky`` marker of its own to run once more
    after a failure (pytest-rerunfailures, which colcon itself depends on).

    Most tests run threads (the stepper, executors, processes over DDS) on a 2-core
    machine shared with whatever else runs there: discovery, scheduling and heartbeats
    depend on how the cores are shared at that moment. Each race found so far was fixed at
    its cause; a rerun shows as ``R`` in the log, and a test that fails twice fails."""
    import importlib.util
    if importlib.util.find_spec('pytest_rerunfailures') is None:
        return
    for item in items:
        if item.get_closest_marker('flaky') is None:
            item.add_marker(pytest.mark.flaky(reruns=reruns, reruns_delay=2))


def zoo_cell(name, check):
    """One (zoo model, check) cell as a test case: the battery runs once per model (the
    checks share one device, in order); a check that does not apply skips with its reason,
    a cell of ``zoo.KNOWN_FAILURES`` that fails is an expected failure with its reason."""
    from mujoco_hal_ros.conformance import zoo
    r = _zoo_results(name)[check]
    if r.skipped_reason:
        pytest.skip(r.skipped_reason)
    known = zoo.KNOWN_FAILURES.get((name, check))
    if known and not r.passed:
        pytest.xfail(f'known: {known} ({r.detail})')
    assert r.passed, f'{name} {check}: {r.detail}'


_ZOO_RESULTS = {}
_ZOO_PLAN = []          # the selected models, in test order (test/conformance/conftest.py)
_ZOO_POOL = None
_ZOO_FUTURES = {}


def zoo_plan(names):
    """The zoo models the selected cells will ask for, in order: the first cell starts them
    all on a process pool (one worker a core; ``MUJOCO_HAL_ROS_ZOO_WORKERS`` overrides), so
    the tier takes about its serial time divided by the cores. Each model's battery is a
    single-threaded simulation at real_time_factor 0, so the workers do not disturb each
    other's results; the cells still pass or fail one by one, in order."""
    _ZOO_PLAN[:] = list(dict.fromkeys(names))


def zoo_close():
    global _ZOO_POOL
    if _ZOO_POOL is not None:
        _ZOO_POOL.shutdown(wait=False, cancel_futures=True)
        _ZOO_POOL = None


def _zoo_workers():
    value = os.environ.get('MUJOCO_HAL_ROS_ZOO_WORKERS')
    if value:
        return max(1, int(value))
    return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()


def _zoo_results(name):
    global _ZOO_POOL
    from mujoco_hal_ros.conformance import battery
    if name not in _ZOO_RESULTS:
        if _ZOO_POOL is None and len(_ZOO_PLAN) > 1 and _zoo_workers() > 1:
            import concurrent.futures
            import multiprocessing
            _ZOO_POOL = concurrent.futures.ProcessPoolExecutor(
                _zoo_workers(), mp_context=multiprocessing.get_context('spawn'))
            for planned in _ZOO_PLAN:
                _ZOO_FUTURES[planned] = _ZOO_POOL.submit(battery.run_named, planned)
        future = _ZOO_FUTURES.pop(name, None)
        _ZOO_RESULTS[name] = future.result() if future else battery.run_named(name)
    return _ZOO_RESULTS[name]
