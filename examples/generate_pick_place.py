"""Generate pick-and-place demonstrations on the Menagerie Panda as a LeRobot dataset.

    python examples/generate_pick_place.py --out demos/ --episodes 20 --nthread 2

A scripted expert (``move_to`` and ``gripper`` steps) picks a cube from a random spot and
places it at a random goal, over randomized episodes run in parallel on the pool, with the
camera images rendered on the pool's own threads. Every episode records its success, its
start state and its draw, so the set can be filtered and each episode replayed. The same as
``generate_dataset --example pick_place``; doc/datasets.md explains each piece.
"""

import argparse

from mujoco_hal_ros.dataset.generate import generate
from mujoco_hal_ros.dataset.generate_pick_place import pick_place_task

# over the cube, down, grasp, lift, over the goal, down (the goal's command is its centre)
SCRIPT = [
    {'move_to': {'to': {'body': 'cube', 'offset': [0, 0, 0.12]}, 'duration': 1.2}},
    {'move_to': {'to': {'body': 'cube', 'offset': [0, 0, 0.0]}, 'duration': 0.8}},
    {'gripper': {'value': 0.0, 'duration': 0.6}},         # actuator8: 0 closed, 255 open
    {'move_to': {'to': {'body': 'cube', 'offset': [0, 0, 0.15]}, 'duration': 0.8}},
    {'move_to': {'to': {'command': 'goal', 'offset': [0, 0, 0.15]}, 'duration': 1.2}},
    {'move_to': {'to': {'command': 'goal', 'offset': [0, 0, 0.005]}, 'duration': 0.8}},
    {'gripper': {'value': 255.0, 'duration': 0.5}},
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', required=True, help='a new folder for the dataset')
    ap.add_argument('--episodes', type=int, default=10)
    ap.add_argument('--nthread', type=int, default=2)
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args()
    task = pick_place_task()       # the scene is the Menagerie Panda with a cube and cameras
    report = generate(task, SCRIPT, args.episodes, args.out, nthread=args.nthread,
                      seed=args.seed, cameras=['front', 'wrist'], gripper='actuator8',
                      site='tcp', task_text='Pick up the red cube and place it on the goal.')
    print(report.summary())
    frames = report.env_steps
    print(f'{report.episodes_done} episodes, {frames} frames in {report.wall_s:.1f} s '
          f'({frames * task.control_dt / report.wall_s:.1f}x real time) -> {report.dataset}')


if __name__ == '__main__':
    main()
