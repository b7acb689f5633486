"""Reward terms of panda_reach.yaml's own (doc/tasks.md, "Rewards and predicates of your own").

A term gets the batch of running environments as a ``Frame`` (``qpos``, ``qvel``, ``sens``,
``command``, ``action``, ``prev_action``, one row each) and returns one number per row; a
class is made once with the task, to look addresses up in ``task.model``.
"""

import numpy as np

ARM = [f'joint{i}' for i in range(1, 8)]


class ArmSpeed:
    """The arm joints' summed squared speeds (rad/s)^2: large when the arm thrashes."""

    def __init__(self, task):
        m = task.model
        self.cols = np.asarray([m.jnt_dofadr[m.joint(j).id] for j in ARM])

    def __call__(self, frame):
        return (frame.qvel[:, self.cols] ** 2).sum(axis=1)
