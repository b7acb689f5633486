"""What running a policy in its worker process costs per control step, against in-process.

Run: ``python bench/bench_policy_worker.py [--quick] [--rounds N]`` (``--quick`` ~1 min).

The ``reach`` task on the built-in bench arm (50 Hz control, 10 physics steps per control
step) under a small numpy MLP (18 -> 64 -> 64 -> 4, tanh, seeded weights), run on a
``Device`` by ``DevicePolicyRunner`` as sim_node's ``run_policy`` runs it, once with the
policy in-process (``module:attr``, what the Python API does) and once in its worker
(``ProcessPolicy``, what an operator-declared policy named over ROS gets). Interleaved,
best of several rounds (a slow round on a shared machine measures the neighbours):

  lockstep   the device paused and stepped by the runner as fast as it goes: wall time per
             control step. The harshest view: nothing but the control step is timed, so the
             pipe round trip (two context switches) is the whole difference.
  real time  the device running at real-time factor 1, the loop at its 50 Hz: CPU time
             (this process, the device's physics thread and, for the worker, the worker's)
             per control step. This is what a control step costs on the machine at 50 Hz
             (goal: worker / in-process <= 1.2).

The worker's start (a Python with numpy and the policy's module, once a run) is not a
control step's cost and is not counted; the round trip of one call is printed on its own.

Also printed: the round trip of one call alone (``act`` on a (2, 18) batch).
"""

import argparse
import importlib.util
import os
import sys
import tempfile
import textwrap
import time

import numpy as np

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from mujoco_hal_ros.sim.device import Device  # noqa: E402
from mujoco_hal_ros.tasks import load_task  # noqa: E402
from mujoco_hal_ros.tasks.device_runner import DevicePolicyRunner  # noqa: E402
from mujoco_hal_ros.tasks.policy_process import ProcessPolicy  # noqa: E402

MODULE = 'bench_policy_worker_mlp'
SOURCE = '''
import numpy as np


class Mlp:
    act_size = 4

    def __init__(self):
        rng = np.random.default_rng(7)
        self.w = [rng.normal(0, 0.1, s) for s in ((18, 64), (64, 64), (64, 4))]

    def __call__(self, obs):
        h = np.tanh(obs @ self.w[0])
        h = np.tanh(h @ self.w[1])
        return np.tanh(h @ self.w[2])
'''


def _cpu(pid=None):
    """CPU seconds of this process (every thread: the device's physics one too), and of the
    worker ``pid`` if given (``/proc/<pid>/schedstat``: nanoseconds, not 10 ms ticks)."""
    total = time.process_time()
    if pid is not None:
        with open(f'/proc/{pid}/schedstat', encoding='ascii') as handle:
            total += int(handle.read().split()[0]) * 1e-9
    return total


def one_run(device, task, where, lockstep, episode):
    """(wall s, cpu s, control steps) of one episode, the policy in-process or in a worker;
    the worker's start (one per run: Python, numpy and the module imported) is not counted,
    it is no control step's cost."""
    policy = (ProcessPolicy(f'{MODULE}:Mlp', 5.0) if where == 'worker'
              else f'{MODULE}:Mlp')
    pid = policy.pid if where == 'worker' else None
    try:
        runner = DevicePolicyRunner(device, task, policy, seed=0, episode=episode,
                                    lockstep=lockstep)
        c0, t0 = _cpu(pid), time.perf_counter()
        run = runner.run()
        wall, cpu = time.perf_counter() - t0, _cpu(pid) - c0
    finally:
        if where == 'worker':
            policy.close()
    return wall, cpu, run.result.steps


def round_trip(n):
    obs = np.zeros((2, 18))
    policy = ProcessPolicy(f'{MODULE}:Mlp', 5.0)
    try:
        policy.act(obs, None)
        t0 = time.perf_counter()
        for _ in range(n):
            policy.act(obs, None)
        return (time.perf_counter() - t0) / n
    finally:
        policy.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--rounds', type=int, default=0)
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 7)
    folder = tempfile.mkdtemp(prefix='bench_policy_worker_')
    with open(os.path.join(folder, f'{MODULE}.py'), 'w', encoding='utf-8') as handle:
        handle.write(textwrap.dedent(SOURCE))
    sys.path.insert(0, folder)
    task = load_task('reach')
    print(f'reach: {task.horizon} control steps an episode at {1 / task.control_dt:g} Hz, '
          f'{task.decimation} physics steps each; a 18-64-64-4 numpy MLP; best of {rounds}')
    print(f'one call (a (2, 18) batch), worker round trip: {round_trip(2000) * 1e6:.0f} us')
    results = {}
    for lockstep in (True, False):
        device = Device(real_time_factor=0.0 if lockstep else 1.0)
        try:
            best = {'in-process': [np.inf, np.inf], 'worker': [np.inf, np.inf]}
            for r in range(rounds if lockstep else max(2, rounds // 2)):
                for where in ('in-process', 'worker'):
                    wall, cpu, steps = one_run(device, task, where, lockstep, r)
                    best[where][0] = min(best[where][0], wall / steps)
                    best[where][1] = min(best[where][1], cpu / steps)
        finally:
            device.close()
        mode = 'lockstep' if lockstep else 'real time (50 Hz)'
        k = 0 if lockstep else 1
        what = 'wall' if lockstep else 'cpu'
        ratio = best['worker'][k] / best['in-process'][k]
        results[mode] = ratio
        print(f'{mode:18s} {what} per control step: in-process '
              f'{best["in-process"][k] * 1e6:8.0f} us, worker {best["worker"][k] * 1e6:8.0f} us,'
              f' worker / in-process {ratio:.2f}')
    goal = results['real time (50 Hz)']
    print(f'goal worker / in-process <= 1.2 at 50 Hz: {goal:.2f} '
          f'{"met" if goal <= 1.2 else "NOT met"}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
