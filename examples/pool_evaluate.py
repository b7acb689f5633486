#!/usr/bin/env python3
"""A pool evaluation: 64 random control sequences on the bench arm, the best one kept.

    python examples/pool_evaluate.py [--nbatch 64] [--steps 200]

EnvPool steps every environment at once (bit-identical to a serial mj_step loop); evaluate
resets them, rolls the controls forward and scores the final states. Over ROS, pool_node
serves the same call as its ``evaluate`` action (doc/reference/pool_node.md).
"""

import argparse
import os

import mujoco
import numpy as np

from mujoco_hal_ros.menagerie import bench_arm_path
from mujoco_hal_ros.pool import EnvPool


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--nbatch', type=int, default=64)
    ap.add_argument('--steps', type=int, default=200)
    args = ap.parse_args(argv)
    model = mujoco.MjModel.from_xml_path(bench_arm_path())
    target = np.array([0.5, 0.3, 0.6, 0.6])          # pan, lift, elbow, wrist (rad)
    rng = np.random.default_rng(0)
    ctrl = rng.uniform(-1.0, 1.0, (args.nbatch, 1, model.nu)).repeat(args.steps, axis=1)

    def cost(qpos, qvel):                             # distance of the arm joints to target
        return np.sum((qpos[:, :4] - target) ** 2, axis=1)

    with EnvPool(model, args.nbatch, nthread=min(4, os.cpu_count() or 1),
                 keyframe='rest') as pool:
        res = pool.evaluate(ctrl, cost=cost)
        best = int(np.argmin(res.cost))
        print(f'{args.nbatch} rollouts of {res.steps_done} steps on {pool.engine}; '
              f'best #{best}: cost {res.cost[best]:.4f} (median {np.median(res.cost):.4f})')
        print('its controls:', np.round(ctrl[best, 0], 3))


if __name__ == '__main__':
    main()
