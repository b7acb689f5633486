"""Batched queries (body and site Jacobians, height fields, resets) against per-env MuJoCo loops.

The pool evaluates Jacobians in a compiled loop over its threads (``jacobian``); the
reference is the loop a user would write, one ``mj_jacBody`` / ``mj_jacSite`` per environment and
object on an MjData restored from the environment's row, on the environment's own
(randomized) model.
"""

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.errors import InvalidArgument, UnknownName
from mujoco_hal_ros.pool import engine as engines, EnvPool, jacobian

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


@pytest.fixture(params=['native', 'python'])
def path(request, monkeypatch):
    """Both Jacobian paths: the compiled loop, and the Python loop where it is not built."""
    if request.param == 'python':
        monkeypatch.setattr(jacobian, 'jacobians', jacobian.python_jacobians)
    return request.param


def test_the_compiled_jacobian_loop_is_built_and_in_use():
    """colcon builds src/query_kernels.c beside the package; a build that lost it fails here
    rather than silently answering from the Python loop."""
    assert jacobian.why_unavailable() is None
    assert jacobian.jacobians is jacobian.native_jacobians
    with open('/proc/self/maps') as maps:   # it calls the bindings' libmujoco, no other copy
        assert len({line.split()[-1] for line in maps if 'libmujoco.so' in line}) == 1


def _bit_identical(actual, desired, **_):
    np.testing.assert_array_equal(actual, desired)


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
                # env 4 runs on its variant's model, whose rounding of subtree_com differs
                same = np.testing.assert_allclose if env == 4 else _bit_identical
                same(jacp[p, k], ref_p, rtol=0, atol=1e-12)
                same(jacr[p, k], ref_r, rtol=0, atol=1e-12)
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
                np.testing.assert_array_equal(jacp[p, k], ref_p)
                np.testing.assert_array_equal(jacr[p, k], ref_r)


@pytest.mark.parametrize('nthread', [1, 2, 3])
def test_compiled_loop_equals_the_python_loop_on_variants_and_subsets(panda, nthread):
    """Variants with other link lengths each get their own model, every environment lands in
    its own output slot whatever the order of ``env_ids``, and chunks over threads change
    nothing: the compiled loop and the Python loop agree bit for bit."""
    del panda
    variants = []
    for scale in (1.0, 1.2, 0.8):
        spec = mujoco.MjSpec.from_file(menagerie.model_path('panda'))
        spec.body('link4').pos = [scale * p for p in spec.body('link4').pos]
        spec.body('hand').add_site(name='grip', pos=[0.0, 0.0, 0.1])
        variants.append(spec.compile())
    n = 61
    with EnvPool(variants, n, nthread=nthread, keyframe='home') as pool:
        state = pool.get_state()
        state[:, 1:1 + 7] += np.random.default_rng(5).uniform(-0.6, 0.6, (n, 7))
        pool.set_state(state)
        ids = np.random.default_rng(6).permutation(n)[:47]
        got = pool.site_jacobians(['grip'], env_ids=ids) + pool.body_jacobians(
            ['link7', 'hand'], env_ids=ids)
        full = pool.get_state(full=True)
    expected = []
    for kind, objs in (('site', [variants[0].site('grip').id]),
                       ('body', [variants[0].body(b).id for b in ('link7', 'hand')])):
        jacp, jacr = np.empty((len(ids), len(objs), 3, 9)), np.empty((len(ids), len(objs), 3, 9))
        for p, env in enumerate(ids):
            m = variants[env % 3]
            jacobian.python_jacobians(kind, m, [mujoco.MjData(m)], full, None, np.array([env]),
                                      np.array([p]), np.array(objs), jacp, jacr)
        expected += [jacp, jacr]
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)
    # on the nominal model a variant-1 environment's Jacobian differs: the check is not vacuous
    p = int(np.flatnonzero(ids % 3 == 1)[0])
    nominal = np.empty((1, 1, 3, 9)), np.empty((1, 1, 3, 9))
    jacobian.python_jacobians('site', variants[0], [mujoco.MjData(variants[0])], full, None,
                              ids[p:p + 1], np.array([0]), np.array([variants[0].site('grip').id]),
                              *nominal)
    assert np.abs(nominal[0][0] - got[0][p]).max() > 0.01


MOCAP_XML = """
<mujoco>
  <worldbody>
    <body name="base" mocap="true" pos="0 0 1">
      <geom type="box" size=".05 .05 .05" contype="0" conaffinity="0"/>
      <body name="link" pos="0.1 0 0">
        <joint type="hinge" axis="0 1 0"/>
        <geom type="capsule" size=".02" fromto="0 0 0 .3 0 0"/>
        <site name="tip" pos=".3 0 0"/>
      </body>
    </body>
    <body name="rider" pos="0.5 0 0">
      <freejoint/>
      <geom type="sphere" size=".05"/>
      <site name="on_rider" pos="0 .1 0"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_jacobians_read_positions_and_mocap_poses_from_the_row(path):
    """The compiled loop restores only positions and mocap poses: a model with a mocap body
    and a free body, states that differ in both, and the whole-row mj_jacSite reference."""
    model = mujoco.MjModel.from_xml_string(MOCAP_XML)
    n = 5
    rng = np.random.default_rng(8)
    with EnvPool(model, n, nthread=2) as pool:
        full = pool.get_state(full=True)
        lay = pool.layout
        full[:, lay.columns('qpos')] += rng.uniform(-0.4, 0.4, (n, model.nq))
        full[:, lay.columns('qvel')] = rng.uniform(-1, 1, (n, model.nv))
        full[:, lay.columns('mocap_pos')] = rng.uniform(-1, 1, (n, 3))
        quat = rng.standard_normal((n, 4))
        full[:, lay.columns('mocap_quat')] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        pool.set_state(full, full=True)
        full = pool.get_state(full=True)
        jacp, jacr = pool.site_jacobians(['tip', 'on_rider'])
    for env in range(n):
        _, d = _reference(model, full[env])
        for k, name in enumerate(['tip', 'on_rider']):
            ref_p, ref_r = np.zeros((3, model.nv)), np.zeros((3, model.nv))
            mujoco.mj_jacSite(model, d, ref_p, ref_r, model.site(name).id)
            np.testing.assert_array_equal(jacp[env, k], ref_p)
            np.testing.assert_array_equal(jacr[env, k], ref_r)
    # the hinge under the mocap body turns with the mocap pose: the rows' poses were read
    assert np.abs(jacp[0, 0] - jacp[1, 0]).max() > 0.01
    assert np.abs(jacr[0, 0] - jacr[1, 0]).max() > 0.01


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
