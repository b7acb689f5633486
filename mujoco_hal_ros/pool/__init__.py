"""Batched MuJoCo environments for sampling planners and RL-style rollouts (no ROS here).

``EnvPool`` owns ``nbatch`` environment states over one shared model or a few variants and
steps them with ``mujoco.batch.Batch`` (MuJoCo >= 4.0) or its own worker threads, with results
identical to a serial ``mj_step`` loop either way::

    with EnvPool(model, 1024, nthread=os.cpu_count(), keyframe='home') as pool:
        pool.reset(ids, keyframe='home', randomization={'body_mass': masses})  # (len(ids), nbody)
        res = pool.step(10, ctrl=ctrl)            # ctrl (1024, nu); res.qpos (1024, nq) ...
        jacp, jacr = pool.site_jacobians(['FR', 'FL'])              # (1024, 2, 3, nv) each
        flat = pool.get_state()                   # (1024, pool.state_size), see state_layout()

Module map: ``pool`` (the class), ``engine`` (Batch and thread engines), ``randomization``
(per-env model patches), ``layout`` (state vector layout), ``jacobian``, ``hfield``,
``validate`` (argument checks), ``results`` (returned records).
"""

from .pool import MAX_NBATCH, MAX_NSTEP, MAX_NTHREAD, EnvPool
from .randomization import FIELDS as RANDOMIZABLE_FIELDS
from .results import EvaluateResult, ForwardResult, StepResult

__all__ = ['EnvPool', 'StepResult', 'ForwardResult', 'EvaluateResult', 'RANDOMIZABLE_FIELDS',
           'MAX_NBATCH', 'MAX_NSTEP', 'MAX_NTHREAD']
