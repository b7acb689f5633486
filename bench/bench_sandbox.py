"""What the sandbox costs and what it saves: scene edits from untrusted peers.

    python bench/bench_sandbox.py [--quick]

Prints, for the built-in bench arm as a Device (the node's process):

* the time to refuse an over-limit model (three nested ``<replicate count="100">``: a
  million geoms once expanded; and a 200,000-body MJCF file), and the process's RSS before
  and after (goal: +< 100 MB; parsed in-process the million geoms took the node past 3 GB);
* a normal ``spawn_entity`` (a small free box) with the sandbox ÷ without it, alternated so
  that load from other processes hits both alike, each side its median (goal: < 2x).
"""

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.errors import DeviceError  # noqa: E402
from mujoco_hal_ros.sim.device import Device  # noqa: E402
from mujoco_hal_ros.world.sandbox import Sandbox  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
BOX = ('<mujoco><worldbody><body name="box"><freejoint/>'
       '<geom type="box" size="0.02 0.02 0.02" mass="0.1"/></body></worldbody></mujoco>')
MILLION = ('<mujoco><worldbody>' + '<replicate count="100" offset="0.01 0 0">' * 3 +
           '<geom size=".001"/>' + '</replicate>' * 3 + '</worldbody></mujoco>')
RATIO_GOAL = 2.0
RSS_GOAL_MB = 100.0


def rss_mb():
    with open('/proc/self/status') as handle:
        for line in handle:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024
    return 0.0


def refuse(dev, what, call):
    t0 = time.perf_counter()
    try:
        call()
    except DeviceError as exc:
        dt = time.perf_counter() - t0
        print(f'  {what}: refused in {dt * 1e3:.1f} ms ({exc.code}: {str(exc)[:110]}...)')
        return dt
    raise SystemExit(f'{what} was not refused')


def spawn_cost(dev, sandbox, rounds):
    """Median seconds of spawn + delete of one box, with the sandbox and without."""
    times = {True: [], False: []}
    for i in range(rounds):
        for use in ((True, False) if i % 2 == 0 else (False, True)):
            dev.sandbox = sandbox if use else None
            t0 = time.perf_counter()
            dev.scene.spawn(BOX, f'box{i}_{int(use)}', position=(0.25, -0.15, 0.15))
            times[use].append(time.perf_counter() - t0)
            dev.scene.delete(f'box{i}_{int(use)}')
    dev.sandbox = sandbox
    return statistics.median(times[True]), statistics.median(times[False])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='fewer rounds')
    args = parser.parse_args()
    rounds = 8 if args.quick else 40
    dev = Device(os.path.join(ROOT, 'config', 'bench_arm.yaml'),
                 environ={'OPENHAL_BENCH_ARM': menagerie.bench_arm_path()},
                 real_time_factor=0, start_paused=True)
    sandbox = Sandbox()
    dev.sandbox = sandbox
    ok = True
    try:
        dev.scene.spawn(BOX, 'warmup', position=(0.25, -0.15, 0.15))   # worker up, caches
        dev.scene.delete('warmup')
        print('over-limit models (the sandbox refuses, the node never parses them):')
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'bodies.xml')
            with open(path, 'w') as handle:
                for i in range(200_000):
                    handle.write(('<mujoco><worldbody>' if i == 0 else '') +
                                 f'<body pos="{i % 100} {i // 100} 0"><geom size=".1"/></body>')
                handle.write('</worldbody></mujoco>')
            size = os.path.getsize(path) / 1e6
            before = rss_mb()
            refuse(dev, 'spawn_entity, 1,000,000 geoms by nested <replicate>',
                   lambda: dev.scene.spawn(MILLION, 'pile'))
            refuse(dev, 'load_world, 1,000,000 geoms by nested <replicate>',
                   lambda: dev.scene.load_world(MILLION))
            refuse(dev, f'load_world, a {size:.0f} MB file of 200,000 bodies',
                   lambda: dev.scene.load_world(path))
        after = rss_mb()
        grew = after - before
        print(f'  node RSS: {before:.0f} MB before, {after:.0f} MB after (+{grew:.1f} MB; '
              f'goal +< {RSS_GOAL_MB:g} MB)')
        ok &= grew < RSS_GOAL_MB
        with_sb, without = spawn_cost(dev, sandbox, rounds)
        ratio = with_sb / without
        print(f'normal spawn_entity (a free box on the bench arm), median of {rounds}:')
        print(f'  in-process {without * 1e3:.1f} ms, through the sandbox {with_sb * 1e3:.1f} ms: '
              f'{ratio:.2f}x (goal < {RATIO_GOAL:g}x)')
        ok &= ratio < RATIO_GOAL
        t0 = time.perf_counter()
        fresh = Sandbox()
        fresh.check(BOX)
        print(f'  a worker started per request would cost {time.perf_counter() - t0:.2f} s '
              '(start-up and MuJoCo import): hence one warm worker')
        fresh.close()
    finally:
        dev.close()
    print('OK' if ok else 'GOAL MISSED')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
