"""The pool's Jacobians on every zoo model, against MuJoCo's own on the model as given.

The pool's compiled loop takes two shortcuts (``pool/jacobian.py``): it runs on a copy of
the model whose bodies own no geoms, and it restores only the positions and mocap poses of
each state row. Both are exact on the arms they were measured on; here they meet hands,
humanoids, quadrupeds, mocap-driven Sawyers and whatever else the zoo holds. Every body and
site Jacobian of a few environments, moved off their initial pose (random controls for a few
steps, then every hinge and slide and every mocap body displaced), must equal bit for bit
``mj_jacBody`` / ``mj_jacSite`` after ``mj_forward`` of the same row on the original model.
"""

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.conformance import zoo
from mujoco_hal_ros.pool import EnvPool

INTEG = mujoco.mjtState.mjSTATE_INTEGRATION
HINGE_SLIDE = (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
NENV = 3
MAX_OBJECTS = 40    # the first bodies and sites of a large model: every chain is in them


def _moved_states(pool, model, rng):
    """Integration rows off the initial pose, as a user's rollouts leave them."""
    if model.nu:
        lo, hi = np.where(model.actuator_ctrllimited[:, None].astype(bool),
                          model.actuator_ctrlrange, [-1.0, 1.0]).T
        pool.step(5, ctrl=rng.uniform(lo, hi, (NENV, model.nu)))
    full = pool.get_state(full=True)
    qpos = full[:, pool.layout.columns('qpos')]     # views: the edits land in ``full``
    for j in range(model.njnt):
        if model.jnt_type[j] in HINGE_SLIDE:
            qpos[:, model.jnt_qposadr[j]] += rng.uniform(-0.3, 0.3, NENV)
    if model.nmocap:
        mocap = full[:, pool.layout.columns('mocap_pos')]
        mocap += rng.uniform(-0.05, 0.05, mocap.shape)
    pool.set_state(full, full=True)
    return pool.get_state(full=True)


@pytest.mark.parametrize('name', [z.name for z in zoo.models(include_variants=False)])
def test_pool_jacobians_equal_mujocos_on_every_zoo_model(name):
    z = zoo.by_name(name)
    if z.path is None:
        pytest.skip(z.missing)
    model = mujoco.MjModel.from_xml_path(z.path)
    bodies = list(range(min(model.nbody, MAX_OBJECTS)))
    sites = list(range(min(model.nsite, MAX_OBJECTS)))
    rng = np.random.default_rng(11)
    with EnvPool(model, NENV, nthread=2) as pool:
        full = _moved_states(pool, model, rng)
        got = {'body': pool.body_jacobians(bodies)}
        if sites:
            got['site'] = pool.site_jacobians(sites)
    data = mujoco.MjData(model)
    moving = 0
    for env in range(NENV):
        mujoco.mj_setState(model, data, full[env], INTEG)
        mujoco.mj_forward(model, data)
        for kind, objs, jac in (('body', bodies, mujoco.mj_jacBody),
                                ('site', sites, mujoco.mj_jacSite)):
            if kind not in got:
                continue
            jacp, jacr = got[kind]
            for k, obj in enumerate(objs):
                ref_p, ref_r = np.zeros((3, model.nv)), np.zeros((3, model.nv))
                jac(model, data, ref_p, ref_r, obj)
                np.testing.assert_array_equal(jacp[env, k], ref_p, err_msg=f'{kind} {obj}')
                np.testing.assert_array_equal(jacr[env, k], ref_r, err_msg=f'{kind} {obj}')
                moving += bool(ref_p.any() or ref_r.any())
    assert moving or model.nv == 0, 'no Jacobian moved: the comparison would prove nothing'
