"""Scene edits: wall time of a spawn or delete recompile through MjSpec (``world.scene``),
and of carrying the state over, on the built-in bench arm and Menagerie's Panda.

    python bench/bench_world.py [--quick]

The device does not swap its model at run time yet, so the gap such a swap would leave in
``joint_states`` is not measured here; the recompile is the part that gap would be made of.
"""

import argparse
import importlib.util
import os
import sys
import time

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from mujoco_hal_ros.menagerie import bench_arm_path, model_path  # noqa: E402
from mujoco_hal_ros.world import scene  # noqa: E402

BOX = ('<mujoco><worldbody><body name="box"><freejoint/>'
       '<geom type="box" size="0.02 0.02 0.02" mass="0.1"/></body></worldbody></mujoco>')


def measure(path, rounds):
    s = scene.Scene(path)
    old = s.spec.compile()
    old_data = mujoco.MjData(old)
    mujoco.mj_forward(old, old_data)
    spawn, delete, carry = [], [], []
    for i in range(rounds):
        t0 = time.perf_counter()
        spec, model = s.spawn(BOX, f'box{i}', position=[0.3, 0.0, 0.3])
        spawn.append(time.perf_counter() - t0)
        data = mujoco.MjData(model)
        t0 = time.perf_counter()
        scene.carry_state(old, old_data, model, data)
        carry.append(time.perf_counter() - t0)
        s2 = scene.Scene.__new__(scene.Scene)
        s2.spec = spec
        t0 = time.perf_counter()
        s2.delete(f'box{i}/box')
        delete.append(time.perf_counter() - t0)
    return {k: 1000 * float(np.median(v)) for k, v in
            (('spawn_ms', spawn), ('carry_ms', carry), ('delete_ms', delete))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    args = ap.parse_args()
    rounds = 3 if args.quick else 10
    models = [('bench arm', bench_arm_path())]
    panda = model_path('panda')
    if panda:
        models.append(('panda', panda))
    else:
        print('panda skipped: its Menagerie wheel is not installed')
    for label, path in models:
        r = measure(path, rounds)
        print(f'{label}: spawn {r["spawn_ms"]:.1f} ms, carry state {r["carry_ms"]:.2f} ms, '
              f'delete {r["delete_ms"]:.1f} ms (median of {rounds})')


if __name__ == '__main__':
    main()
