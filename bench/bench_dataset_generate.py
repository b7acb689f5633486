"""Generated demonstrations: frames per second on the pool against one serial loop.

Run: ``python bench/bench_dataset_generate.py [--quick] [--episodes N] [--nthread N]``

Both contenders run the same episodes (the pick-and-place example: Menagerie Panda, scripted
expert, seed 0) and write them through the same recorder (``dataset.generate_record``) into a
LeRobot dataset of their own:

  serial  one MjData, the expert, ``mj_step`` x decimation, one render per camera and control
          step on this thread (the same fast offscreen settings the pool uses), episode
          after episode: what a user would write
  pool    ``dataset.generate.generate`` on an EnvPool of ``--nthread`` threads and as many
          environments: stepping in the batch library's threads, rendering on the pool's
          rendering threads while the pool steps on (``EnvPool.render_async``), the expert
          on this thread, the writer on a thread of its own

The ratio is frames/s of pool over serial, measured in the same run with the two interleaved
(best of ``--rounds``), with the machine's load average and each contender's cpu/wall (how
many cores it actually got) printed beside it: on a shared machine the second core is often
busy elsewhere, and with a load above the core count the scheduler shares CPU per runnable
thread, so a process with more threads also gets a larger share than a serial loop does.
Both datasets are checked to hold the same actions (the same episodes, not just as many
frames).
"""

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time

import numpy as np

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from mujoco_hal_ros.render import gl  # noqa: E402

gl.ensure_headless_gl()

import mujoco  # noqa: E402

from mujoco_hal_ros.dataset.generate import generate  # noqa: E402
from mujoco_hal_ros.dataset.generate_expert import ScriptedExpert  # noqa: E402
from mujoco_hal_ros.dataset.generate_pick_place import pick_place_task, SCRIPT  # noqa: E402
from mujoco_hal_ros.dataset.generate_record import RolloutRecorder  # noqa: E402
from mujoco_hal_ros.pool.layout import FULLPHYSICS, INTEGRATION  # noqa: E402
from mujoco_hal_ros.pool.render import _ThreadView  # noqa: E402
from mujoco_hal_ros.tasks.evaluate import EpisodeResult  # noqa: E402
from mujoco_hal_ros.tasks.reference import episode_model, verdict  # noqa: E402
from mujoco_hal_ros.tasks.task import Frame  # noqa: E402


def serial(task, episodes, folder, cameras, width, height, seed=0):
    """The same episodes on one MjData, rendered and written on this thread."""
    import copy
    expert = ScriptedExpert(task, SCRIPT, gripper='actuator8')
    sink = RolloutRecorder(task, folder, cameras=cameras, width=width, height=height,
                           seed=seed, policy=expert.name)
    render_model = copy.copy(task.model)
    render_model.vis.quality.offsamples = 0
    view = _ThreadView(render_model, width, height)
    cams = [task.model.camera(c).id for c in cameras]
    amap = task.actions
    frames = 0
    try:
        for e in range(episodes):
            draw = task.draw(seed, e)
            m = episode_model(task, draw.patch)
            d = mujoco.MjData(m)
            mujoco.mj_resetData(m, d)
            mujoco.mj_setState(m, d, draw.state, FULLPHYSICS)
            if task.uses_sensordata:
                mujoco.mj_forward(m, d)
            row = np.empty(mujoco.mj_stateSize(m, INTEGRATION))
            mujoco.mj_getState(m, d, row, INTEGRATION)
            sink.begin(np.array([e]), row[None], [draw])
            slots = np.array([0, -1])
            expert.reset(slots[:1], np.array([e]))
            cmd, last = draw.command[None], np.zeros((1, task.act_size))
            ctrl0 = task.start_ctrl if draw.ctrl is None else draw.ctrl
            setpoint = amap.first_setpoints(1, ctrl0)
            ret, steps, result = 0.0, 0, None
            while steps < task.horizon:
                obs = task.observe(Frame(d.qpos[None].copy(), d.qvel[None].copy(),
                                         d.sensordata[None].copy(), cmd, last, last))
                act = expert.act(np.concatenate([obs, np.zeros_like(obs)]), slots)[:1]
                setpoint = amap.apply(act, setpoint)
                ctrl = amap.full_ctrl(setpoint, ctrl0).astype(np.float32).astype(np.float64)
                images = np.empty((len(cams), 1, height, width, 3), np.uint8)
                mujoco.mj_forward(m, d)      # poses for the scene, as the pool renderer
                for k, cam in enumerate(cams):
                    view.draw(m, d, cam, images[k, 0])
                sink.frames(np.array([e]), d.qpos[None], d.qvel[None], ctrl, images)
                d.ctrl[:] = ctrl[0]
                for _ in range(task.decimation):
                    mujoco.mj_step(m, d)
                if task.uses_sensordata:
                    mujoco.mj_forward(m, d)
                steps += 1
                frames += 1
                after = Frame(d.qpos[None].copy(), d.qvel[None].copy(),
                              d.sensordata[None].copy(), cmd, act, last)
                succ, fail = task.predicates(after)
                ret += float(task.reward(after, succ, fail)[0])
                last = act
                end = verdict(task, succ, fail, False)
                if end is not None:
                    result = EpisodeResult(e, end[0], end[1], ret, steps, end[2])
                    break
            if result is None:
                result = EpisodeResult(e, False, 'horizon', ret, steps, 'horizon')
            sink.end(result)
        sink.finish()
    finally:
        view.free()
    return frames


def render_rate(task, nthread, cameras, width, height, states, batch=8):
    """Frames per second of ``EnvPool.render`` alone on ``nthread`` threads: ``batch``
    environments at a time, each at one of ``states`` (episode states the expert reached),
    so every thread has work until the end of each call. Two threads against one is the
    most any pool that renders on them can gain over a serial loop here: the bound."""
    from mujoco_hal_ros.pool import EnvPool
    with EnvPool(task.model, batch, nthread=nthread) as pool:
        pool.set_state(states[:batch])
        pool.render(cameras, width=width, height=height)       # contexts made first
        t0, n = time.perf_counter(), 0
        for k in range(0, len(states) - batch + 1, batch):
            pool.set_state(states[k:k + batch])
            pool.render(cameras, width=width, height=height)
            n += batch
        return n / (time.perf_counter() - t0)


def expert_states(task, episodes=2, every=3):
    """State rows (``mjSTATE_FULLPHYSICS``) an expert's episodes pass through, every
    ``every``-th control step."""
    from mujoco_hal_ros.tasks import evaluate
    expert = ScriptedExpert(task, SCRIPT, gripper='actuator8')
    report = evaluate(task, expert, episodes, envs=1, record=range(episodes))
    return np.concatenate([v[::every] for v in report.states.values()])


def actions_of(folder):
    from mujoco_hal_ros.dataset import DatasetReader
    reader = DatasetReader(folder)
    return np.concatenate([reader.frames(e)['action'] for e in range(len(reader.episodes))])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--episodes', type=int, default=None)
    ap.add_argument('--nthread', type=int, default=2)
    ap.add_argument('--rounds', type=int, default=None)
    ap.add_argument('--cameras', default='front,wrist')
    ap.add_argument('--width', type=int, default=128)
    ap.add_argument('--height', type=int, default=96)
    args = ap.parse_args()
    episodes = args.episodes or (4 if args.quick else 8)
    rounds = args.rounds or (1 if args.quick else 2)
    cameras = [c for c in args.cameras.split(',') if c]
    task = pick_place_task()
    print(f'mujoco {mujoco.__version__}, {os.cpu_count()} cores, pick_place_panda, '
          f'{episodes} episodes, cameras {cameras} at {args.width}x{args.height}, '
          f'pool nthread={args.nthread}', flush=True)
    root = tempfile.mkdtemp(prefix='bench_generate_')
    best = {'serial': 0.0, 'pool': 0.0}
    try:
        for r in range(rounds):
            for name in ('serial', 'pool'):
                folder = os.path.join(root, f'{name}{r}')
                load0 = os.getloadavg()[0]
                t0, c0 = time.perf_counter(), time.process_time()
                if name == 'serial':
                    frames = serial(task, episodes, folder, cameras, args.width, args.height)
                else:
                    report = generate(task, SCRIPT, episodes, folder, nthread=args.nthread,
                                      envs=args.nthread, cameras=cameras, gripper='actuator8',
                                      image_size=(args.width, args.height))
                    frames = report.env_steps
                wall = time.perf_counter() - t0
                cpu = time.process_time() - c0
                fps = frames / wall
                best[name] = max(best[name], fps)
                print(f'round {r} {name:6s}: {frames} frames in {wall:6.2f} s = {fps:6.1f} '
                      f'frames/s ({fps * task.control_dt:5.1f}x real time), cpu/wall '
                      f'{cpu / wall:4.2f}, {frames / cpu:5.1f} frames per CPU second, '
                      f'load average {load0:.2f} -> '
                      f'{os.getloadavg()[0]:.2f}', flush=True)
            from mujoco_hal_ros.dataset import check_dataset
            for name in ('serial', 'pool'):
                problems = check_dataset(os.path.join(root, f'{name}{r}'))
                if problems:
                    print(f'round {r} {name}: the checker found {problems}', flush=True)
            a, b = actions_of(os.path.join(root, f'serial{r}')), \
                actions_of(os.path.join(root, f'pool{r}'))
            print(f'round {r}: the two datasets hold the same actions: '
                  f'{a.shape == b.shape and bool(np.array_equal(a, b))}', flush=True)
        print(f'pool / serial frames per second: {best["pool"] / best["serial"]:.2f}x '
              f'(goal >= 1.8x on two cores; best of {rounds} rounds; load average now '
              f'{", ".join(f"{x:.2f}" for x in os.getloadavg())} on {os.cpu_count()} cores)')
        states = expert_states(task)
        rates = {n: 0.0 for n in (1, args.nthread)}
        for _ in range(rounds):
            for n in rates:
                rates[n] = max(rates[n], render_rate(task, n, cameras, args.width, args.height,
                                                     states))
        print(f'bound: rendering alone (EnvPool.render, 8 environments a call, '
              f'{len(states)} expert states) on {args.nthread} threads / 1 thread = '
              f'{rates[args.nthread] / rates[1]:.2f}x ({rates[args.nthread]:.1f} / '
              f'{rates[1]:.1f} frames/s, best of {rounds}): what the rasteriser gives the '
              f'pool here, before any stepping or IK')
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == '__main__':
    main()
