"""Real-time stepping: measured real-time factor over 60 s at 1.0 (goal 0.995..1.005) and the
worst lag of simulated time behind the wall clock, with goals running all the while.

    python bench/bench_realtime.py [--quick] [--seconds S] [--rtf R]

``--quick`` runs 10 s. The device is the built-in bench arm from its device file; goals swing
the pan back and forth so that min-jerk paths are always being followed. The factor is
simulated time over wall time between two reads taken after a settling second; lag is
sampled every 50 ms (from ``health()``) and the stepper's own worst lag is reported too.
"""

import argparse
import importlib.util
import os
import statistics
import sys
import time

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(__file__), '..')))

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.sim.device import Device  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='10 s instead of 60 s')
    parser.add_argument('--seconds', type=float, default=None)
    parser.add_argument('--rtf', type=float, default=1.0)
    args = parser.parse_args(argv)
    seconds = args.seconds or (10.0 if args.quick else 60.0)
    root = os.path.normpath(os.path.join(os.path.dirname(__file__), '..'))
    environ = dict(os.environ, OPENHAL_BENCH_ARM=menagerie.bench_arm_path())
    dev = Device(os.path.join(root, 'config', 'bench_arm.yaml'), environ=environ,
                 real_time_factor=args.rtf)
    try:
        time.sleep(1.0)                                   # settle
        dev.stepper.worst_lag = 0.0
        dev.stepper.overruns = 0
        lags = []
        swing = 1
        w0, s0 = time.monotonic(), dev.snapshot.time
        next_goal = w0
        while True:
            now = time.monotonic()
            if now - w0 >= seconds:
                break
            if now >= next_goal:
                dev.set_goals({'pan_goal': 45 * swing, 'wrist_goal': 30 * swing})
                swing = -swing
                next_goal = now + 1.0
            lags.append(dev.health()['lag_s'])
            time.sleep(0.05)
        # Sim time at a known wall time: the snapshot's own, plus what is due since then.
        w1, s1 = time.monotonic(), dev.snapshot.time
        health = dev.health()
    finally:
        dev.close()
    rtf = (s1 - s0) / (w1 - w0)
    lags.sort()
    p99 = lags[int(0.99 * (len(lags) - 1))] if lags else float('nan')
    ok = abs(rtf / args.rtf - 1.0) <= 0.005
    print(f'load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs')
    print(f'real-time factor {rtf:.4f} over {w1 - w0:.1f} s (target {args.rtf:g}; goal within '
          f'0.5 %: {"OK" if ok else "OUTSIDE"})')
    worst = health['worst_lag_s'] * 1000
    print(f'lag: sampled max {max(lags) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, median '
          f'{statistics.median(lags) * 1000:.2f} ms; stepper worst {worst:.2f} ms, '
          f'overruns {health["overruns"]}, errors {health["errors"]}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
