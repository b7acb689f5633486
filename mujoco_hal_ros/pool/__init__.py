"""Batched MuJoCo environments for sampling planners and RL-style rollouts (no ROS here).

``EnvPool`` owns ``nbatch`` environment states over one shared model or a few variants and
steps them with ``mujoco.batch.Batch`` (MuJoCo >= 4.0) or its own worker threads, with results
identical to a serial ``mj_step`` loop either way::

    with EnvPool(model, 1024, nthread=os.cpu_count(), keyframe='home') as pool:
        pool.reset(ids, keyframe='home', randomization={'body_mass': masses})  # (len(ids), nbody)
        res = pool.step(10, ctrl=ctrl)            # ctrl (1024, nu); res.qpos (1024, nq) ...
        jacp, jacr = pool.site_jacobians(['FR', 'FL'])              # (1024, 2, 3, nv) each
        jacp, jacr = pool.body_jacobians(['trunk'])                 # models without sites
        flat = pool.get_state()                   # (1024, pool.state_size), see state_layout()

``RayPool`` (``ray_pool``) is the same API with the environments split over Ray actors on a
cluster, for when one machine is not enough.

Module map: ``pool`` (the class), ``ray_pool`` (over Ray), ``engine`` (Batch and thread
engines), ``jacobian`` (MuJoCo's Jacobian loop compiled, ``src/query_kernels.c``),
``queries`` (batched kinematics for height fields), ``randomization`` (per-env model
patches), ``layout`` (state vector layout), ``hfield``,
``requests`` (every call's argument checks, shared by both pools), ``validate`` (the checks'
building blocks), ``results`` (returned records).
"""

from .pool import EnvPool, MAX_NBATCH, MAX_NSTEP, MAX_NTHREAD
from .randomization import FIELDS as RANDOMIZABLE_FIELDS
from .ray_pool import RayPool
from .results import EvaluateResult, ForwardResult, StepResult

__all__ = ['EnvPool', 'RayPool', 'StepResult', 'ForwardResult', 'EvaluateResult',
           'RANDOMIZABLE_FIELDS', 'MAX_NBATCH', 'MAX_NSTEP', 'MAX_NTHREAD']
