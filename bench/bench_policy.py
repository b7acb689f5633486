"""Closed-loop policy evaluation against open-loop stepping and a per-environment loop.

Run: ``python bench/bench_policy.py [--quick] [--envs N] [--nthread N]`` (``--quick`` ~1 min).

Menagerie's Go1 on the built-in ``walk_forward`` task (50 Hz control, 10 physics steps per
control step), a 2x256 tanh MLP as ONNX (47 -> 256 -> 256 -> 12, small seeded weights so Go1
stands and every episode runs its whole horizon), 256 environments. Contenders, each doing
the same number of control steps, interleaved, fastest of several rounds (a slow round on a
shared machine measures the neighbours):

  closed   ``tasks.evaluate``: per control step one batched ONNX call for every environment,
           the action map, ``EnvPool.step(10, ctrl)`` (the trunk is read from qpos/qvel, so
           no sensors), predicates and rewards;
           per-episode draws and sparse resets included (two episodes per environment)
  open     ``EnvPool.step(10, ctrl)`` over the same 256 Go1s with fixed controls: the pool's
           stepping alone, the ceiling for closed (goal: closed / open >= 0.7)
  loop     what single-environment evaluators do: one MjData, episodes one after another,
           per control step the observation, one ONNX call on a batch of one, ``mj_step``
           10 times (goal: closed / loop >= 5 on two cores)

The bounds: the loop times its own ``mj_step`` calls and the closed loop its
``EnvPool.step`` calls. Were the policy and the bookkeeping free, the closed loop would run
at its stepping rate (closed / its stepping share), and an evaluator on ``ncpu`` cores whose
physics is as fast as ``mj_step`` at ``ncpu`` / (the loop's stepping share) times the loop.
A goal above both is out of reach of any evaluator of this task, model and machine.

Rates are control steps per second summed over environments (``env-steps/s``); physics steps
per second are ten times that. The ``cpu/wall`` column says how many cores a contender got
(the pool's C++ threads included): on a shared machine the two-thread contenders get less
than two, while the one-thread loop keeps nearly its whole core, so the wall-clock ratio
against the loop understates what two free cores give. ``per cpu-s`` (env-steps per
CPU-second) is printed beside it for that reason, with the ratio it implies on free cores.
"""

import argparse
import importlib.util
import os
import sys
import tempfile
import time

import mujoco
import numpy as np

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.pool import EnvPool  # noqa: E402
from mujoco_hal_ros.tasks import (  # noqa: E402
    BUILTIN_DIR,
    evaluate,
    make_policy,
    onnx_models,  # noqa: E402
    Task,
)
from mujoco_hal_ros.tasks.task import Frame  # noqa: E402


def walk_task(horizon):
    import yaml
    with open(os.path.join(BUILTIN_DIR, 'walk_forward.yaml'), encoding='utf-8') as f:
        data = yaml.safe_load(f)
    data['horizon'] = horizon
    return Task.from_dict(data, 'walk_forward.yaml', BUILTIN_DIR)


def per_env_loop(task, policy, episodes, seed, physics=None):
    """A single-environment evaluator: the same task, one environment, one row per call.
    ``physics`` (a one-element list) gets the seconds spent in ``mj_step`` added to it."""
    m = task.model
    d = mujoco.MjData(m)
    amap = task.actions
    steps = 0
    in_step = 0.0
    clock = time.perf_counter
    for e in range(episodes):
        draw = task.draw(seed, e)
        mujoco.mj_resetData(m, d)
        mujoco.mj_setState(m, d, draw.state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        mujoco.mj_forward(m, d)
        last = np.zeros((1, task.act_size))
        setpoint = amap.first_setpoints(1, draw.ctrl)
        cmd = draw.command[None]
        for _ in range(task.horizon):
            frame = Frame(d.qpos[None], d.qvel[None], d.sensordata[None], cmd, last, last)
            act = np.asarray(policy.act(task.observe(frame), np.array([0])), dtype=np.float64)
            setpoint = amap.apply(act, setpoint)
            d.ctrl[:] = amap.full_ctrl(setpoint, draw.ctrl)[0]
            t = clock()
            mujoco.mj_step(m, d, task.decimation)
            in_step += clock() - t
            frame = Frame(d.qpos[None], d.qvel[None], d.sensordata[None], cmd, act, last)
            succ, fail = task.predicates(frame)
            task.reward(frame, succ, fail)
            last = act
            steps += 1
            if succ[0] >= 0 or fail[0] >= 0:
                break
    if physics is not None:
        physics[0] += in_step
    return steps


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    steps = fn()
    return steps, time.perf_counter() - t0, time.process_time() - c0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='short horizon, fewer rounds')
    parser.add_argument('--envs', type=int, default=256)
    parser.add_argument('--nthread', type=int, default=os.cpu_count())
    args = parser.parse_args()
    if menagerie.model_path('go1') is None:
        print('Menagerie go1 not installed (pip install -r requirements-test.txt): skipped')
        return 0
    missing = [m for m in ('onnx', 'onnxruntime') if importlib.util.find_spec(m) is None]
    if missing:
        print(f'{" and ".join(missing)} not installed (pip install -r requirements.txt -r '
              'requirements-test.txt): skipped')
        return 0
    horizon = 40 if args.quick else 150
    rounds = 2 if args.quick else 3
    loop_episodes = 2 if args.quick else 4
    n = args.envs
    task = walk_task(horizon)
    tmp = tempfile.mkdtemp(prefix='bench_policy_')
    path = onnx_models.mlp([task.obs_size, 256, 256, task.act_size],
                           os.path.join(tmp, 'mlp.onnx'), seed=0, scale=0.02)
    policy = make_policy(path, task)
    go1 = mujoco.MjModel.from_xml_path(menagerie.model_path('go1'))
    print(f'mujoco {mujoco.__version__}, {os.cpu_count()} cpus, nthread {args.nthread}, '
          f'Go1 walk_forward, {n} envs, horizon {horizon}, MLP 2x256 ONNX')

    closed_pool = task.make_pool(n, nthread=args.nthread)
    open_pool = EnvPool(go1, n, nthread=args.nthread, keyframe='home')
    ctrl = np.broadcast_to(go1.key_ctrl[0], (n, go1.nu)).copy()
    seed = [0]

    closed_physics = [0.0]      # seconds the last closed round spent in EnvPool.step
    pool_step = closed_pool.step

    def timed_step(*args, **kwargs):
        t = time.perf_counter()
        try:
            return pool_step(*args, **kwargs)
        finally:
            closed_physics[0] += time.perf_counter() - t

    closed_pool.step = timed_step

    def closed():
        seed[0] += 1
        closed_physics[0] = 0.0
        report = evaluate(task, policy, 2 * n, pool=closed_pool, seed=seed[0])
        assert all(e.steps == horizon for e in report.episodes), report.failures()
        return report.env_steps

    def open_loop():
        open_pool.reset(keyframe='home')
        for _ in range(2 * horizon):
            open_pool.step(task.decimation, ctrl=ctrl)
        return 2 * horizon * n

    loop_physics = [0.0]     # seconds the last loop round spent in mj_step

    def loop():
        loop_physics[0] = 0.0
        return per_env_loop(task, policy, loop_episodes, 0, loop_physics)

    best, share_of = {}, {}
    for _ in range(rounds):
        for label, fn in (('closed', closed), ('open', open_loop), ('loop', loop)):
            steps, wall, cpu = timed(fn)
            rate = steps / wall
            if label not in best or rate > best[label][0]:
                best[label] = (rate, cpu / wall)
                share_of[label] = (closed_physics if label == 'closed'
                                   else loop_physics)[0] / wall
    closed_pool.close()
    open_pool.close()
    print(f'{"contender":10s} {"env-steps/s":>12s} {"physics/s":>11s} {"cpu/wall":>9s} '
          f'{"per cpu-s":>10s}')
    per_cpu = {}
    for label in ('closed', 'open', 'loop'):
        rate, share = best[label]
        per_cpu[label] = rate / share if share > 0 else float('nan')
        print(f'{label:10s} {rate:12.0f} {rate * task.decimation:11.0f} {share:9.2f} '
              f'{per_cpu[label]:10.0f}')
    r_open = best['closed'][0] / best['open'][0]
    r_loop = best['closed'][0] / best['loop'][0]
    print(f'closed / open = {r_open:.2f} (goal >= 0.7); per CPU-second '
          f'{per_cpu["closed"] / per_cpu["open"]:.2f}')
    print(f'closed / loop = {r_loop:.2f}x (goal >= 5 on two cores); per CPU-second '
          f'{per_cpu["closed"] / per_cpu["loop"]:.2f}x, so {os.cpu_count()} free cores would '
          f'give about {os.cpu_count() * per_cpu["closed"] / per_cpu["loop"]:.1f}x')
    ncpu = os.cpu_count() or 1
    print(f'bounds with a free policy and free bookkeeping: the closed loop spends '
          f'{100 * share_of["closed"]:.0f} % of its time in EnvPool.step, so at most '
          f'{r_loop / share_of["closed"]:.2f}x the loop; the loop spends '
          f'{100 * share_of["loop"]:.0f} % of its time in mj_step, so {ncpu} cores stepping '
          f'as fast as mj_step give at most {ncpu / share_of["loop"]:.2f}x')
    return 0


if __name__ == '__main__':
    sys.exit(main())
