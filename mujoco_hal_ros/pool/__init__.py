"""Batched MuJoCo environments for sampling planners and RL-style rollouts (no ROS here).

``EnvPool`` owns ``nbatch`` environment states over one shared model or a few variants and
steps them in worker threads with results identical to a serial ``mj_step`` loop.
"""

from .pool import MAX_NBATCH, MAX_NSTEP, MAX_NTHREAD, EnvPool
from .randomization import FIELDS as RANDOMIZABLE_FIELDS
from .results import EvaluateResult, ForwardResult, StepResult

__all__ = ['EnvPool', 'StepResult', 'ForwardResult', 'EvaluateResult', 'RANDOMIZABLE_FIELDS',
           'MAX_NBATCH', 'MAX_NSTEP', 'MAX_NTHREAD']
