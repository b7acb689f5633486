"""Stepper throughput: steps/s at real-time factor 0 with goals running, divided by a bare
``mujoco.mj_step`` loop on the same model, measured in the same run (goal: >= 0.9).

The device's goals are set with slow rate limits so that min-jerk paths run for the whole
measurement: every step then gets its own setpoint, as in real use. Short rounds alternate
bare and device measurements; the result is the median over rounds of the device's rate
divided by the bare rate measured just before it (neighbours share the machine's load), and
the ratio of the best rounds is printed beside it.
Two ratios are printed: by wall clock (the goal's definition) and by the stepping thread's
own CPU time, which other processes on a busy machine skew less (the load average is printed
too; on an idle machine the two agree).

    python bench/bench_stepper.py [--quick] [--seconds S] [--rounds N]
"""

import argparse
import importlib.util
import os
import statistics
import sys
import time

import mujoco

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(__file__), '..')))

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.sim.device import Device  # noqa: E402


def slow_doc(path, model):
    """A device file whose goals all move at 1 unit/s: paths that outlast the benchmark."""
    write = {}
    for a in range(model.nu):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a)
        write[f'{name}_goal'] = {'max_change_per_s': 0.01, 'map': {'actuator': name}}
    return {'connect': {'model': path}, 'write': write}


def far_goals(dev):
    """Each goal channel's far end of its range (or +1 where it has none)."""
    out = {}
    for name, g in dev.layout.goals.items():
        now = dev.goals()[name]
        lo = g.min if g.min is not None else now - 1.0
        hi = g.max if g.max is not None else now + 1.0
        out[name] = hi if hi - now > now - lo else lo
    return out


def bare_rate(model, seconds, start=None):
    """(steps per wall second, steps per CPU second) of a plain mj_step loop, from a copy
    of ``start`` (the paused device's state, so both step the same scene)."""
    data = mujoco.MjData(model)
    if start is not None:
        mujoco.mj_copyData(data, model, start)
    step = mujoco.mj_step
    n = 0
    t0, c0 = time.perf_counter(), time.thread_time()
    while True:
        for _ in range(200):
            step(model, data)
        n += 200
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return n / elapsed, n / (time.thread_time() - c0)


def device_rate(dev, seconds):
    """(steps per wall second, steps per CPU second of the stepping thread) at rtf 0."""
    clock = time.pthread_getcpuclockid(dev.stepper._thread.ident)
    dev.set_goals(far_goals(dev))
    dev.pause(False)
    time.sleep(0.05)                       # past the first chunks (chunk size settles)
    s0, t0, c0 = dev.stepper.nstep, time.perf_counter(), time.clock_gettime(clock)
    time.sleep(seconds)
    s1, t1, c1 = dev.stepper.nstep, time.perf_counter(), time.clock_gettime(clock)
    moving = dev.snapshot.moving
    dev.pause(True)
    if not moving:
        raise RuntimeError('the goals finished during the measurement; slow them down')
    return (s1 - s0) / (t1 - t0), (s1 - s0) / (c1 - c0)


def run(name, path, seconds, rounds):
    """Alternate bare and device rounds. The result is the median of each round's ratio to
    the bare round just before it (neighbours in time share the machine's load), with the
    ratio of the best rounds beside it (as ``timeit`` takes the best)."""
    model = mujoco.MjModel.from_xml_path(path)
    dev = Device(slow_doc(path, model), real_time_factor=0, start_paused=True)
    try:
        bare, devs = [], []
        bare_rate(dev.model, 0.2)                           # warm-up
        for _ in range(rounds):
            bare.append(bare_rate(dev.model, seconds, dev.data))    # paused: safe to copy
            devs.append(device_rate(dev, seconds))
        h = dev.health()
        chunk = dev.stepper._fast_chunk()
        med = statistics.median
        paired = {k: med(d[k] / b[k] for b, d in zip(bare, devs, strict=True)) for k in (0, 1)}
        best = {k: max(d[k] for d in devs) / max(b[k] for b in bare) for k in (0, 1)}
        print(f'{name:10s} bare {med(b[0] for b in bare):8.0f} steps/s  device '
              f'{med(d[0] for d in devs):8.0f} steps/s (medians)  ratio wall {paired[0]:.3f} '
              f'cpu {paired[1]:.3f}  best rounds: wall {best[0]:.3f} cpu {best[1]:.3f}  '
              f'(chunk {chunk} steps, {h["errors"]} errors)')
        return paired[0], paired[1]
    finally:
        dev.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='short rounds (CI)')
    parser.add_argument('--seconds', type=float, default=None, help='seconds per measurement')
    parser.add_argument('--rounds', type=int, default=None)
    args = parser.parse_args(argv)
    seconds = args.seconds or (0.3 if args.quick else 0.5)
    rounds = args.rounds or (6 if args.quick else 16)
    models = [('bench_arm', menagerie.bench_arm_path()),
              ('panda', menagerie.model_path('panda'))]
    print(f'load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs')
    results = []
    for name, path in models:
        if path is None:
            print(f'{name:10s} skipped: model not installed')
            continue
        results.append(run(name, path, seconds, rounds))
    if not results:
        return 1
    wall = min(r[0] for r in results)
    cpu = min(r[1] for r in results)
    print(f'stepper ratio, worst model: wall {wall:.3f}, cpu {cpu:.3f}  (goal >= 0.9: '
          f'{"OK" if max(wall, cpu) >= 0.9 else "BELOW GOAL"}'
          f'{"; wall clock skewed by load" if cpu >= 0.9 > wall else ""})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
