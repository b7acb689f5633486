"""Batched queries (body and site Jacobians, height fields, resets) against per-env MuJoCo loops.

The pool evaluates these for every environment at once (``queries`` + NumPy); the reference
is the loop a user would write, one ``mj_jacBody`` / ``mj_jacSite`` per environment and
object on an MjData restored from the environment's row, on the environment's own
(randomized) model.
"""

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.errors import InvalidArgument, UnknownName
from mujoco_hal_ros.pool import EnvPool
from mujoco_hal_ros.pool import engine as engines
from mujoco_hal_ros.pool import queries

INTEG = mujoco.mjtState.mjSTATE_INTEGRATION
ENGINES = [pytest.param('batch', marks=pytest.mark.skipif(
    not engines.batch_available(), reason='mujoco.batch needs mujoco >= 4.0')), 'threads']


@pytest.fixture(scope='module')
def panda():
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie panda not installed (pip install -r requirements-test.txt)')
    return mujoco.MjModel.from_xml_path(path)


@pytest.fixture(params=ENGINES)
def engine(request):
    return request.param


@pytest.fixture(params=['batched', 'loop'])
def path(request, monkeypatch):
    """Both query paths: mujoco.batch's threads, and the fallback loop of MuJoCo 3.x."""
    if request.param == 'loop':
        monkeypatch.setattr(queries, '_mjbatch', None)
    elif queries._mjbatch is None:
        pytest.skip('mujoco.batch needs mujoco >= 4.0')
    return request.param


def _reference(model, row, mass=None):
    m = model.__copy__()
    if mass is not None:
        m.body_mass[:] = mass
        mujoco.mj_setConst(m, mujoco.MjData(m))
    d = mujoco.MjData(m)
    mujoco.mj_setState(m, d, row, INTEG)
    mujoco.mj_forward(m, d)
    return m, d


def test_body_jacobians_match_mj_jacBody_on_panda(panda, engine, path):
    """Panda has no sites: body Jacobians are how its pool serves Jacobians."""
    assert panda.nsite == 0
    n = 6
    mass = panda.body_mass * 1.3
    with EnvPool(panda, n, nthread=2, keyframe='home', engine=engine) as pool:
        pool.reset([4], keyframe='home', randomization={'body_mass': mass})
        ctrl = np.random.default_rng(1).uniform(-1, 1, (n, panda.nu)) + panda.key_ctrl[0]
        pool.step(40, ctrl=ctrl)
        full = pool.get_state(full=True)
        bodies = ['hand', 'link4', 0, 'left_finger']
        ids = [4, 0, 5]
        jacp, jacr = pool.body_jacobians(bodies, env_ids=ids)
        assert jacp.shape == jacr.shape == (3, 4, 3, panda.nv)
        for p, env in enumerate(ids):
            m, d = _reference(panda, full[env], mass if env == 4 else None)
            for k, body in enumerate(bodies):
                bid = body if isinstance(body, int) else m.body(body).id
                ref_p, ref_r = np.zeros((3, m.nv)), np.zeros((3, m.nv))
                mujoco.mj_jacBody(m, d, ref_p, ref_r, bid)
                np.testing.assert_allclose(jacp[p, k], ref_p, rtol=0, atol=1e-12)
                np.testing.assert_allclose(jacr[p, k], ref_r, rtol=0, atol=1e-12)
        assert not jacp[:, 2].any()             # the world body
        assert np.abs(jacp).max() > 0.1


def test_site_jacobians_of_many_envs_match_a_mj_jacSite_loop(panda, path):
    del panda  # only for the skip when Menagerie is missing
    spec = mujoco.MjSpec.from_file(menagerie.model_path('panda'))
    for body in ('link3', 'hand'):
        spec.body(body).add_site(name=f'{body}_site', pos=[0.0, 0.01, 0.05])
    model = spec.compile()
    n = 64
    with EnvPool(model, n, nthread=2, keyframe='home') as pool:
        state = pool.get_state()
        state[:, 1:1 + 7] += np.random.default_rng(2).uniform(-0.5, 0.5, (n, 7))
        pool.set_state(state)
        ids = np.random.default_rng(3).permutation(n)[:40]
        jacp, jacr = pool.site_jacobians(['hand_site', 'link3_site'], env_ids=ids)
        full = pool.get_state(full=True)
        for p, env in enumerate(ids):
            m, d = _reference(model, full[env])
            for k, name in enumerate(['hand_site', 'link3_site']):
                ref_p, ref_r = np.zeros((3, m.nv)), np.zeros((3, m.nv))
                mujoco.mj_jacSite(m, d, ref_p, ref_r, m.site(name).id)
                np.testing.assert_allclose(jacp[p, k], ref_p, rtol=0, atol=1e-12)
                np.testing.assert_allclose(jacr[p, k], ref_r, rtol=0, atol=1e-12)


def test_bad_body_names_are_refused(panda):
    with EnvPool(panda, 2) as pool:
        with pytest.raises(UnknownName):
            pool.body_jacobians(['nope'])
        with pytest.raises(InvalidArgument):
            pool.body_jacobians([panda.nbody])
        with pytest.raises(InvalidArgument):
            pool.body_jacobians([])
        assert pool.body_names[0] == 'world'


def test_whole_pool_reset_drops_every_randomization_and_equals_a_fresh_pool(panda, engine):
    n = 16
    ctrl = np.random.default_rng(4).uniform(-1, 1, (n, panda.nu))
    with EnvPool(panda, n, nthread=2, keyframe='home', engine=engine) as pool, \
            EnvPool(panda, n, nthread=2, keyframe='home', engine=engine) as fresh:
        pool.reset([1, 9, 14], randomization={'body_mass': panda.body_mass * 1.5,
                                              'dof_damping': panda.dof_damping + 1.0})
        pool.step(10, ctrl=ctrl)
        pool.reset(None, keyframe='home')
        assert not pool.randomized().any()
        np.testing.assert_array_equal(pool.field_values('body_mass'),
                                      np.broadcast_to(panda.body_mass, (n, panda.nbody)))
        np.testing.assert_array_equal(pool.get_state(full=True), fresh.get_state(full=True))
        np.testing.assert_array_equal(pool.step(10, ctrl=ctrl).state,
                                      fresh.step(10, ctrl=ctrl).state)
