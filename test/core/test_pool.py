"""EnvPool against plain serial MuJoCo on real Menagerie Panda and Go1.

The reference for every number is an ordinary ``MjData`` driven with ``mj_step`` the way a
user would without the pool, so a threading mistake, a lost warm start or a state row written
to the wrong environment shows up as an exact mismatch, not as a tolerance question.
"""

import threading

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.errors import ClosedError, DeviceError, InvalidArgument, UnknownName
from mujoco_hal_ros.pool import batch_libs, engine as engines, EnvPool
from mujoco_hal_ros.pool.randomization import view

FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS
INTEG = mujoco.mjtState.mjSTATE_INTEGRATION


ENGINES = [pytest.param('batch', marks=pytest.mark.skipif(
    not engines.batch_available(), reason='mujoco.batch needs mujoco >= 4.0')), 'threads']


@pytest.fixture(params=ENGINES)
def engine(request):
    """Both stepping engines must pass every equivalence and semantics test."""
    return request.param


def _load(name):
    path = menagerie.model_path(name)
    if path is None:
        pytest.skip(f'Menagerie {name} not installed (pip install -r requirements-test.txt)')
    return path


@pytest.fixture(scope='module')
def panda():
    return mujoco.MjModel.from_xml_path(_load('panda'))


def go1_spec(thigh_scale=1.0):
    """Real Go1 plus three sensors (Menagerie's has none) so sensordata is non-trivial."""
    spec = mujoco.MjSpec.from_file(_load('go1'))
    spec.add_sensor(name='acc', type=mujoco.mjtSensor.mjSENS_ACCELEROMETER,
                    objtype=mujoco.mjtObj.mjOBJ_SITE, objname='imu')
    spec.add_sensor(name='hip', type=mujoco.mjtSensor.mjSENS_JOINTPOS,
                    objtype=mujoco.mjtObj.mjOBJ_JOINT, objname='FR_hip_joint')
    spec.add_sensor(name='trunk', type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                    objtype=mujoco.mjtObj.mjOBJ_BODY, objname='trunk')
    if thigh_scale != 1.0:
        for body in spec.bodies:
            if body.name.endswith('_calf'):
                body.pos = np.asarray(body.pos) * thigh_scale
    return spec


@pytest.fixture(scope='module')
def go1():
    return go1_spec().compile()


def serial(model, n, keyframe=0):
    datas = []
    for _ in range(n):
        d = mujoco.MjData(model)
        mujoco.mj_resetDataKeyframe(model, d, keyframe)
        datas.append(d)
    return datas


def ctrl_batch(model, n, seed, nstep=None):
    rng = np.random.default_rng(seed)
    shape = (n, model.nu) if nstep is None else (n, nstep, model.nu)
    return model.key_ctrl[0] + 0.2 * rng.standard_normal(shape)


def physics(model, d):
    out = np.empty(mujoco.mj_stateSize(model, FULL))
    mujoco.mj_getState(model, d, out, FULL)
    return out


# ---------------------------------------------------------------------- equivalence
@pytest.mark.parametrize('nthread', [1, 2])
@pytest.mark.parametrize('name', ['panda', 'go1'])
def test_final_states_match_serial_mj_step_bit_for_bit(request, name, nthread, engine):
    model = request.getfixturevalue(name)
    n = 12
    datas = serial(model, n)
    with EnvPool(model, n, nthread=nthread, keyframe='home', engine=engine) as pool:
        assert pool.engine == engine
        for call in range(3):
            ctrl = ctrl_batch(model, n, call)
            res = pool.step(10, ctrl=ctrl)
            for i, d in enumerate(datas):
                d.ctrl[:] = ctrl[i]
                mujoco.mj_step(model, d, 10)
        per_step = ctrl_batch(model, n, 7, nstep=5)
        res = pool.step(5, ctrl=per_step, sensors=True)
        for i, d in enumerate(datas):
            for t in range(5):
                d.ctrl[:] = per_step[i, t]
                mujoco.mj_step(model, d)
        for i, d in enumerate(datas):
            np.testing.assert_array_equal(res.qpos[i], d.qpos)
            np.testing.assert_array_equal(res.qvel[i], d.qvel)
            np.testing.assert_array_equal(res.act[i], d.act)
            assert res.time[i] == d.time
            np.testing.assert_array_equal(res.state[i], physics(model, d))
            # sensors are evaluated at the returned state, on a copy: the run goes on unchanged
            # (the full integration state: acceleration sensors depend on the warm start)
            probe = mujoco.MjData(model)
            full = np.empty(mujoco.mj_stateSize(model, INTEG))
            mujoco.mj_getState(model, d, full, INTEG)
            mujoco.mj_setState(model, probe, full, INTEG)
            mujoco.mj_forward(model, probe)
            np.testing.assert_array_equal(res.sensordata[i], probe.sensordata)
        assert not res.unstable.any()
        # keep going after a sensors=True call: still identical, so the extra mj_forward
        # did not leak into the stored state
        res = pool.step(10)
        for d in datas:
            mujoco.mj_step(model, d, 10)
        np.testing.assert_array_equal(res.qpos, np.stack([d.qpos for d in datas]))


def test_go1_is_in_contact_so_warm_start_matters(go1):
    # guards the equivalence test above: with contacts the solver warm start changes results
    d = serial(go1, 1)[0]
    mujoco.mj_step(go1, d, 20)
    assert d.ncon >= 4


def test_subset_step_leaves_other_environments_alone(go1, engine):
    with EnvPool(go1, 6, nthread=2, keyframe='home', engine=engine) as pool:
        before = pool.get_state(full=True)
        res = pool.step(10, ctrl=ctrl_batch(go1, 2, 1), env_ids=[4, 1])
        after = pool.get_state(full=True)
        np.testing.assert_array_equal(res.env_ids, [4, 1])
        for i in (0, 2, 3, 5):
            np.testing.assert_array_equal(after[i], before[i])
        assert after[1, 0] == after[4, 0] == pytest.approx(0.02)
        np.testing.assert_array_equal(pool.get_state([4, 1]), res.state)


def test_ctrl_none_keeps_each_environments_controls(panda, engine):
    with EnvPool(panda, 3, keyframe='home', engine=engine) as pool:
        ctrl = ctrl_batch(panda, 3, 2)
        pool.step(5, ctrl=ctrl)
        res = pool.step(5)
        datas = serial(panda, 3)
        for i, d in enumerate(datas):
            d.ctrl[:] = ctrl[i]
            mujoco.mj_step(panda, d, 10)
            np.testing.assert_array_equal(res.qpos[i], d.qpos)


# ---------------------------------------------------------------------- state round trip
def test_state_layout_matches_mj_getState(go1, engine):
    with EnvPool(go1, 3, keyframe='home', engine=engine) as pool:
        pool.step(7, ctrl=ctrl_batch(go1, 3, 3))
        assert pool.state_size == mujoco.mj_stateSize(go1, FULL)
        assert pool.full_state_size == mujoco.mj_stateSize(go1, INTEG)
        layout = dict((name, (off, size)) for name, off, size in pool.state_layout())
        assert layout['qpos'] == (1, go1.nq) and layout['qvel'] == (1 + go1.nq, go1.nv)
        assert sum(size for _, _, size in pool.state_layout()) == pool.state_size
        assert 'warmstart' in [c for c, _, _ in pool.state_layout(full=True)]
        full = pool.get_state(full=True)
        d = mujoco.MjData(go1)
        mujoco.mj_setState(go1, d, full[2], INTEG)
        np.testing.assert_array_equal(pool.get_state([2])[0], physics(go1, d))


def test_full_state_copied_to_another_env_continues_identically(go1, engine):
    with EnvPool(go1, 4, nthread=2, keyframe='home', engine=engine) as pool:
        pool.step(10, ctrl=ctrl_batch(go1, 4, 4))
        snap = pool.get_state([1], full=True)
        pool.set_state(snap, [3], full=True)
        res = pool.step(10, ctrl=np.tile(go1.key_ctrl[0], (4, 1)))
        np.testing.assert_array_equal(res.state[1], res.state[3])


def test_physics_state_set_like_reset_plus_mj_setState(go1, engine):
    with EnvPool(go1, 2, keyframe='home', engine=engine) as pool:
        pool.step(10, ctrl=ctrl_batch(go1, 2, 5))
        phys = pool.get_state([0])
        pool.set_state(phys, [1])
        res = pool.step(10, ctrl=go1.key_ctrl[0], env_ids=[1])
        d = mujoco.MjData(go1)
        mujoco.mj_setState(go1, d, phys[0], FULL)
        d.ctrl[:] = go1.key_ctrl[0]
        mujoco.mj_step(go1, d, 10)
        np.testing.assert_array_equal(res.qpos[0], d.qpos)


# ---------------------------------------------------------------------- reset
def test_sparse_reset_touches_only_listed_envs(panda, engine):
    with EnvPool(panda, 8, nthread=2, keyframe='home', engine=engine) as pool:
        pool.step(20, ctrl=ctrl_batch(panda, 8, 6))
        before = pool.get_state(full=True)
        pool.reset([5, 2], keyframe='home')
        after = pool.get_state(full=True)
        ref = serial(panda, 1)[0]
        full_ref = np.empty(pool.full_state_size)
        mujoco.mj_getState(panda, ref, full_ref, INTEG)
        for i in range(8):
            np.testing.assert_array_equal(after[i], full_ref if i in (2, 5) else before[i])
        pool.reset([0])  # no keyframe: mj_resetData
        np.testing.assert_array_equal(pool.get_state([0])[0, 1:1 + panda.nq], panda.qpos0)
        states = np.tile(pool.get_state([3])[0], (2, 1))
        states[1, 0] = 4.0
        pool.reset([6, 7], states=states)
        np.testing.assert_array_equal(pool.get_state([6, 7]), states)


def test_randomization_lands_in_the_right_env_and_plain_reset_restores_it(go1, engine):
    nominal_mass = go1.body_mass.copy()
    masses = np.stack([nominal_mass * 1.4, nominal_mass * 0.7])
    gravity = [0.0, 0.0, -5.0]
    with EnvPool(go1, 5, nthread=2, keyframe='home', engine=engine) as pool:
        pool.reset([3, 1], keyframe='home',
                   randomization={'body_mass': masses, 'opt.gravity': gravity,
                                  'geom_friction': go1.geom_friction * 0.5})
        np.testing.assert_array_equal(pool.randomized(), [False, True, False, True, False])
        np.testing.assert_array_equal(pool.field_values('body_mass', [3, 1, 0]),
                                      [masses[0], masses[1], nominal_mass])
        np.testing.assert_array_equal(pool.field_values('opt.gravity', [1])[0], gravity)
        ctrl = np.tile(go1.key_ctrl[0], (5, 1))
        res = pool.step(20, ctrl=ctrl)
        # the shared nominal model never changed
        np.testing.assert_array_equal(go1.body_mass, nominal_mass)
        for i in (0, 2, 4):
            np.testing.assert_array_equal(res.qpos[i], res.qpos[0])
        # env 3 equals a serial run on a patched copy with mj_setConst
        ref_model = go1.__copy__()
        ref_model.body_mass[:] = masses[0]
        ref_model.opt.gravity[:] = gravity
        ref_model.geom_friction[:] = go1.geom_friction * 0.5
        d = serial(ref_model, 1)[0]
        mujoco.mj_setConst(ref_model, d)
        mujoco.mj_resetDataKeyframe(ref_model, d, 0)
        d.ctrl[:] = go1.key_ctrl[0]
        mujoco.mj_step(ref_model, d, 20)
        np.testing.assert_array_equal(res.qpos[3], d.qpos)
        assert not np.array_equal(res.qpos[3], res.qpos[1])
        assert not np.array_equal(res.qpos[3], res.qpos[0])
        # a plain reset brings back nominal values for that env only
        pool.reset([3], keyframe='home')
        np.testing.assert_array_equal(pool.randomized(), [False, True, False, False, False])
        np.testing.assert_array_equal(pool.field_values('body_mass', [3])[0], nominal_mass)
        pool.reset([0], keyframe='home')
        res = pool.step(20, ctrl=ctrl[:2], env_ids=[3, 0])
        np.testing.assert_array_equal(res.qpos[0], res.qpos[1])


def test_derived_constants_match_mj_setConst_for_every_field(go1, engine):
    """The per-env patch must reproduce a full model copy after mj_setConst exactly."""
    patch = {'body_mass': go1.body_mass * 1.3, 'body_inertia': go1.body_inertia * 0.8,
             'dof_armature': go1.dof_armature + 0.01, 'dof_damping': go1.dof_damping + 0.2}
    with EnvPool(go1, 3, keyframe='home', engine=engine) as pool:
        pool.reset([1], randomization=patch)
        pool.reset([2], randomization={'geom_friction': go1.geom_friction * 2})
        slot = pool._workers.slots[0]
        ref = go1.__copy__()
        for key, val in patch.items():
            getattr(ref, key)[...] = val
        mujoco.mj_setConst(ref, mujoco.MjData(ref))
        for env, reference in ((1, ref), (0, go1), (2, None)):
            model = pool._patches.model_for(slot, 0, env)
            if reference is None:
                reference = go1.__copy__()
                reference.geom_friction[:] = go1.geom_friction * 2
            stepped = [model]
            if engine == 'batch':  # what Batch.step really runs env on
                stepped.append(pool._engine.batch.get_model(env))
            for attr in dir(reference):
                value = getattr(reference, attr, None)
                if attr.startswith('_') or not isinstance(value, np.ndarray):
                    continue
                for m in stepped:
                    np.testing.assert_array_equal(getattr(m, attr), value, err_msg=attr)
        if engine == 'batch':
            # a plain reset puts every expanded field of env 1 back to nominal
            pool.reset([1])
            nominal = pool._engine.batch.get_model(1)
            for key in pool._engine._expanded:
                np.testing.assert_array_equal(view(nominal, key), view(go1, key),
                                              err_msg=key)


def test_randomizing_many_panda_envs_does_not_copy_the_model(panda, engine):
    def rss_mb():
        with open('/proc/self/statm') as f:
            return int(f.read().split()[1]) * 4096 / 2**20

    n = 1024
    rng = np.random.default_rng(0)
    masses = panda.body_mass * rng.uniform(0.8, 1.2, (n, panda.nbody))
    with EnvPool(panda, n, nthread=2, keyframe='home', engine=engine) as pool:
        base = rss_mb()
        pool.reset(None, keyframe='home',
                   randomization={'body_mass': masses, 'dof_armature': panda.dof_armature + 0.1})
        grown = rss_mb() - base
        assert pool.randomized().all()
        np.testing.assert_array_equal(pool.field_values('body_mass', [777])[0], masses[777])
    # one Panda MjModel is ~40 MB (model.nbuffer); 1024 copies would be ~40 GB
    assert panda.nbuffer > 30e6
    assert grown < 150, f'resident memory grew {grown:.0f} MB'


# ---------------------------------------------------------------------- queries
def test_forward_gives_sensors_without_advancing_time(go1, engine):
    with EnvPool(go1, 3, keyframe='home', engine=engine) as pool:
        pool.step(15, ctrl=ctrl_batch(go1, 3, 8))
        before = pool.get_state(full=True)
        out = pool.forward([2, 0])
        np.testing.assert_array_equal(pool.get_state(full=True), before)
        d = mujoco.MjData(go1)
        mujoco.mj_setState(go1, d, before[2], INTEG)
        mujoco.mj_forward(go1, d)
        np.testing.assert_array_equal(out.sensordata[0], d.sensordata)
        np.testing.assert_array_equal(out.site_xpos[0], d.site_xpos)
        np.testing.assert_array_equal(out.xquat[0], d.xquat)


def test_site_jacobians_match_mj_jacSite(go1, engine):
    with EnvPool(go1, 5, nthread=2, keyframe='home', engine=engine) as pool:
        pool.reset([4], keyframe='home', randomization={'body_mass': go1.body_mass * 1.2})
        pool.step(30, ctrl=ctrl_batch(go1, 5, 9))
        full = pool.get_state(full=True)
        sites = ['imu', 'FR', 5]
        jacp, jacr = pool.site_jacobians(sites, env_ids=[4, 0, 2])
        assert jacp.shape == jacr.shape == (3, 3, 3, go1.nv)
        for p, env in enumerate([4, 0, 2]):
            model = go1.__copy__()
            if env == 4:
                model.body_mass[:] = go1.body_mass * 1.2
                mujoco.mj_setConst(model, mujoco.MjData(model))
            d = mujoco.MjData(model)
            mujoco.mj_setState(model, d, full[env], INTEG)
            mujoco.mj_forward(model, d)
            for k, site in enumerate(sites):
                sid = site if isinstance(site, int) else model.site(site).id
                ref_p, ref_r = np.zeros((3, model.nv)), np.zeros((3, model.nv))
                mujoco.mj_jacSite(model, d, ref_p, ref_r, sid)
                if env == 4:   # answered on the nominal model: subtree_com rounds differently
                    np.testing.assert_allclose(jacp[p, k], ref_p, rtol=0, atol=1e-12)
                    np.testing.assert_allclose(jacr[p, k], ref_r, rtol=0, atol=1e-12)
                else:          # mj_jacSite itself ran on this state: bit-identical
                    np.testing.assert_array_equal(jacp[p, k], ref_p)
                    np.testing.assert_array_equal(jacr[p, k], ref_r)
        assert np.abs(jacp).max() > 0.05


TREE_XML = """
<mujoco>
  <worldbody>
    <site name="fixed" pos="0.3 0 0"/>
    <body name="free" pos="0 0 1">
      <freejoint/>
      <geom type="box" size=".1 .05 .02"/>
      <body name="ball" pos="0.2 0 0">
        <joint type="ball"/>
        <geom type="capsule" size=".02" fromto="0 0 0 0.2 0 0"/>
        <body name="slide" pos="0.2 0 0">
          <joint type="slide" axis="0 1 0"/>
          <joint type="hinge" axis="0 0 1"/>
          <geom type="sphere" size=".03"/>
          <site name="tip" pos="0.05 0.01 0"/>
        </body>
      </body>
    </body>
    <body name="other" pos="1 0 0">
      <joint type="hinge" axis="1 0 0"/>
      <geom type="sphere" size=".05"/>
      <site name="side" pos="0 0.1 0"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_jacobians_on_every_joint_type_and_a_world_site(engine):
    model = mujoco.MjModel.from_xml_string(TREE_XML)
    with EnvPool(model, 3, engine=engine) as pool:
        state = pool.get_state()
        rng = np.random.default_rng(3)
        state[:, 1 + 7:1 + model.nq] = rng.uniform(-0.5, 0.5, (3, model.nq - 7))
        state[:, 4:8] = [0.9, 0.1, -0.3, 0.2]
        state[:, 8:12] = [0.8, -0.2, 0.4, 0.1]
        pool.set_state(state)
        jacp, jacr = pool.site_jacobians(['tip', 'fixed', 'side'])
        d = mujoco.MjData(model)
        for p in range(3):
            mujoco.mj_setState(model, d, pool.get_state([p])[0], FULL)
            mujoco.mj_forward(model, d)
            for k, name in enumerate(['tip', 'fixed', 'side']):
                ref_p, ref_r = np.zeros((3, model.nv)), np.zeros((3, model.nv))
                mujoco.mj_jacSite(model, d, ref_p, ref_r, model.site(name).id)
                np.testing.assert_array_equal(jacp[p, k], ref_p)
                np.testing.assert_array_equal(jacr[p, k], ref_r)
        assert not jacp[:, 1].any() and not jacr[:, 1].any()   # world site: no dofs
        assert np.count_nonzero(jacr[0, 2]) == 1                # one hinge moves 'side'


# ---------------------------------------------------------------------- variants
def test_model_variants_each_env_runs_its_own_variant(engine):
    variants = [go1_spec(1.0).compile(), go1_spec(1.15).compile()]
    n = 4
    with EnvPool(variants, n, nthread=2, keyframe='home', engine=engine) as pool:
        np.testing.assert_array_equal(pool.variant_of, [0, 1, 0, 1])
        ctrl = ctrl_batch(variants[0], n, 11)
        res = pool.step(20, ctrl=ctrl)
        for i in range(n):
            m = variants[i % 2]
            d = serial(m, 1)[0]
            d.ctrl[:] = ctrl[i]
            mujoco.mj_step(m, d, 20)
            np.testing.assert_array_equal(res.qpos[i], d.qpos)
        pool.reset([0, 1], keyframe='home')
        foot = pool.forward([0, 1]).site_xpos[:, variants[0].site('FR').id]
        assert foot[1, 2] < foot[0, 2] - 0.01  # same joint angles, longer thigh: lower foot
    with EnvPool(variants, 3, variant_of=[1, 1, 0], engine=engine) as pool:
        np.testing.assert_array_equal(pool.variant_of, [1, 1, 0])


def test_incompatible_variants_are_refused(go1, panda):
    with pytest.raises(DeviceError) as err:
        EnvPool([go1, panda], 2)
    assert 'variant 1' in str(err.value)


# ---------------------------------------------------------------------- engines
def test_auto_engine_is_batch_where_mujoco_has_it(panda):
    with EnvPool(panda, 2) as pool:
        assert pool.engine == ('batch' if engines.batch_available() else 'threads')
        assert f'engine={pool.engine}' in repr(pool)


def test_engine_argument_is_checked(panda, monkeypatch):
    for bad in ('gpu', None, 1, 'Batch'):
        with pytest.raises(InvalidArgument) as err:
            EnvPool(panda, 2, engine=bad)
        assert 'allowed' in str(err.value)
    # what a MuJoCo 3.x without mjbatch sees: 'batch' refused saying how to get a batch
    # library, 'auto' on threads
    monkeypatch.setattr(batch_libs, '_mujoco_batch', None)
    monkeypatch.setattr(batch_libs, '_mjbatch', None)
    with pytest.raises(InvalidArgument) as err:
        EnvPool(panda, 2, engine='batch')
    assert 'MuJoCo >= 4.0' in str(err.value) and 'pip install mjbatch' in str(err.value)
    with EnvPool(panda, 2) as pool:
        assert pool.engine == 'threads' and pool.engine_library is None
        assert pool.step(3).time[0] == pytest.approx(3 * panda.opt.timestep)


SLEEP_XML = """
<mujoco>
  <option><flag sleep="enable"/></option>
  <worldbody><body><freejoint/><geom size=".1"/></body></worldbody>
</mujoco>
"""


@pytest.mark.skipif(not engines.batch_available(), reason='mujoco.batch needs mujoco >= 4.0')
def test_models_batch_cannot_run_exactly_fall_back_to_threads():
    model = mujoco.MjModel.from_xml_string(SLEEP_XML)  # Batch: sleep needs persistent data
    with EnvPool(model, 2) as pool:
        assert pool.engine == 'threads'
    with pytest.raises(InvalidArgument) as err:
        EnvPool(model, 2, engine='batch')
    assert 'sleep' in str(err.value)


@pytest.mark.skipif(not engines.batch_available(), reason='mujoco.batch needs mujoco >= 4.0')
def test_randomized_variants_move_an_auto_pool_to_threads_and_stay_exact():
    variants = [go1_spec(1.0).compile(), go1_spec(1.15).compile()]
    mass = variants[1].body_mass * 1.3
    ctrl = np.tile(variants[0].key_ctrl[0], (4, 1))
    with EnvPool(variants, 4, nthread=2, keyframe='home') as pool:
        assert pool.engine == 'batch'
        pool.step(10, ctrl=ctrl_batch(variants[0], 4, 14))
        before = pool.get_state(full=True)
        pool.reset([3], keyframe='home', randomization={'body_mass': mass})
        assert pool.engine == 'threads'
        np.testing.assert_array_equal(pool.get_state(full=True)[:3], before[:3])
        res = pool.step(10, ctrl=ctrl)
        ref = variants[1].__copy__()
        ref.body_mass[:] = mass
        d = serial(ref, 1)[0]
        mujoco.mj_setConst(ref, d)
        mujoco.mj_resetDataKeyframe(ref, d, 0)
        d.ctrl[:] = ctrl[3]
        mujoco.mj_step(ref, d, 10)
        np.testing.assert_array_equal(res.qpos[3], d.qpos)
        d = mujoco.MjData(variants[1])
        mujoco.mj_setState(variants[1], d, before[1], INTEG)
        d.ctrl[:] = ctrl[1]
        mujoco.mj_step(variants[1], d, 10)
        np.testing.assert_array_equal(res.qpos[1], d.qpos)
    with EnvPool(variants, 2, keyframe='home', engine='batch') as pool:
        before = pool.get_state(full=True)
        with pytest.raises(InvalidArgument) as err:
            pool.reset([1], randomization={'body_mass': mass})
        assert "engine='auto' or 'threads'" in str(err.value)
        assert pool.engine == 'batch' and not pool.randomized().any()
        np.testing.assert_array_equal(pool.get_state(full=True), before)


WELD_XML = """
<mujoco>
  <worldbody>
    <body name="a"><freejoint/><geom size=".1"/></body>
    <body name="b" pos="1 0 0"><freejoint/><geom size=".1"/></body>
  </worldbody>
  <equality><weld body1="a" body2="b"/></equality>
</mujoco>
"""


def test_mujoco_error_in_some_envs_changes_no_env(engine):
    good = mujoco.MjModel.from_xml_string(WELD_XML)
    bad = mujoco.MjModel.from_xml_string(WELD_XML)
    bad.eq_type[0] = 99  # an unknown constraint type: mj_step raises (mju_error)
    with EnvPool([good, bad], 4, variant_of=[0, 1, 0, 0], nthread=2, engine=engine) as pool:
        pool.step(3, env_ids=[0, 2, 3])
        before = pool.get_state(full=True)
        with pytest.raises(DeviceError) as err:
            pool.step(5, ctrl=np.zeros((4, 0)))
        assert err.value.code == 'INTERNAL_ERROR'
        assert err.value.details['env_ids'] == [1]
        np.testing.assert_array_equal(pool.get_state(full=True), before)
        res = pool.step(5, env_ids=[3, 0])
        np.testing.assert_array_equal(res.time, [8 * good.opt.timestep] * 2)


# ---------------------------------------------------------------------- evaluate
def test_evaluate_resets_steps_in_chunks_and_reports_progress(go1, engine):
    nstep = 25
    rng = np.random.default_rng(12)
    ctrl = go1.key_ctrl[0] + 0.1 * rng.standard_normal((3, nstep, go1.nu))
    seen = []
    with EnvPool(go1, 4, nthread=2, keyframe='home', engine=engine) as pool:
        pool.step(5)
        res = pool.evaluate(ctrl, keyframe='home', env_ids=[0, 2, 3], chunk_steps=10,
                            cost=lambda q, v: np.sum(q[:, 7:] ** 2, axis=1) + v[:, 0],
                            progress=seen.append)
        assert seen == [10 / 25, 20 / 25, 1.0]
        assert res.completed and res.steps_done == nstep
        for p in range(3):
            d = serial(go1, 1)[0]
            for t in range(nstep):
                d.ctrl[:] = ctrl[p, t]
                mujoco.mj_step(go1, d)
            np.testing.assert_array_equal(res.state[p], physics(go1, d))
            assert res.cost[p] == np.sum(d.qpos[7:] ** 2) + d.qvel[0]
            mujoco.mj_forward(go1, d)
            np.testing.assert_array_equal(res.sensordata[p], d.sensordata)
        shared = pool.evaluate(ctrl[1], keyframe='home', env_ids=[1, 2])
        np.testing.assert_array_equal(shared.state[0], shared.state[1])
        np.testing.assert_array_equal(shared.state[1], res.state[1])


def test_evaluate_stops_when_progress_returns_false(panda, engine):
    with EnvPool(panda, 2, keyframe='home', engine=engine) as pool:
        ctrl = np.tile(panda.key_ctrl[0], (40, 1))
        res = pool.evaluate(ctrl, keyframe='home', chunk_steps=10,
                            progress=lambda f: f < 0.5, cost=lambda q, v: q[:, 0])
        assert not res.completed and res.steps_done == 20 and res.cost is None
        assert pool.get_state([0])[0, 0] == pytest.approx(20 * panda.opt.timestep)


def test_unstable_env_is_flagged(go1, engine):
    with EnvPool(go1, 2, keyframe='home', engine=engine) as pool:
        state = pool.get_state()
        state[1, 1 + go1.nq] = 1e12  # qvel beyond mjMAXVAL: MuJoCo warns and resets
        pool.set_state(state)
        res = pool.step(2)
        np.testing.assert_array_equal(res.unstable, [False, True])


def test_calls_from_several_threads_are_serialised(panda, engine):
    """A ROS node may call from several callback threads; each call must stay atomic."""
    with EnvPool(panda, 8, nthread=2, keyframe='home', engine=engine) as pool:
        ctrl = ctrl_batch(panda, 4, 21)
        errors = []

        def drive(ids):
            try:
                for _ in range(5):
                    pool.step(4, ctrl=ctrl, env_ids=ids)
                    pool.forward(ids)
                    pool.get_state(ids, full=True)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=drive, args=(ids,))
                   for ids in ([0, 1, 2, 3], [4, 5, 6, 7])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        state = pool.get_state()
        np.testing.assert_array_equal(state[:4], state[4:])
        d = serial(panda, 1)[0]
        d.ctrl[:] = ctrl[0]
        mujoco.mj_step(panda, d, 20)
        np.testing.assert_array_equal(state[0], physics(panda, d))


# ---------------------------------------------------------------------- bad input
def _bad_calls(m):
    n = 4
    ok_ctrl = np.zeros((n, m.nu))
    nan_ctrl = ok_ctrl.copy()
    nan_ctrl[1, 2] = np.nan
    inf_states = np.zeros((2, mujoco.mj_stateSize(m, FULL)))
    inf_states[0, 3] = np.inf
    return [
        ('nstep 0', lambda p: p.step(0), InvalidArgument),
        ('nstep float', lambda p: p.step(2.0), InvalidArgument),
        ('nstep bool', lambda p: p.step(True), InvalidArgument),
        ('ctrl shape', lambda p: p.step(1, ctrl=np.zeros((n, m.nu + 1))), InvalidArgument),
        ('ctrl nstep mismatch', lambda p: p.step(3, ctrl=np.zeros((n, 2, m.nu))),
         InvalidArgument),
        ('ctrl NaN', lambda p: p.step(1, ctrl=nan_ctrl), InvalidArgument),
        ('ctrl inf', lambda p: p.step(1, ctrl=ok_ctrl + np.inf), InvalidArgument),
        ('ctrl bool array', lambda p: p.step(1, ctrl=np.ones((n, m.nu), bool)),
         InvalidArgument),
        ('ctrl bool in list', lambda p: p.step(1, ctrl=[[True] + [0.0] * (m.nu - 1)] * n),
         InvalidArgument),
        ('ctrl numpy bool in list',
         lambda p: p.step(1, ctrl=[[np.True_] + [0.0] * (m.nu - 1)] * n), InvalidArgument),
        ('ctrl strings', lambda p: p.step(1, ctrl=[['a'] * m.nu] * n), InvalidArgument),
        ('env id out of range', lambda p: p.step(1, env_ids=[0, 4]), InvalidArgument),
        ('env id negative', lambda p: p.step(1, env_ids=[-1]), InvalidArgument),
        ('env id duplicate', lambda p: p.step(1, env_ids=[2, 2]), InvalidArgument),
        ('env id bool', lambda p: p.step(1, env_ids=[True]), InvalidArgument),
        ('env id float', lambda p: p.step(1, env_ids=[1.0]), InvalidArgument),
        ('env id scalar', lambda p: p.step(1, env_ids=1), InvalidArgument),
        ('sensors not bool', lambda p: p.step(1, sensors=1), InvalidArgument),
        ('reset unknown keyframe', lambda p: p.reset([0], keyframe='nope'), UnknownName),
        ('reset keyframe index', lambda p: p.reset([0], keyframe=3), InvalidArgument),
        ('reset keyframe and states',
         lambda p: p.reset([0], keyframe='home', states=inf_states[1]), InvalidArgument),
        ('reset states inf', lambda p: p.reset([0, 1], states=inf_states), InvalidArgument),
        ('reset states shape', lambda p: p.reset([0], states=np.zeros(5)), InvalidArgument),
        ('randomize unknown field',
         lambda p: p.reset([0], randomization={'body_mas': m.body_mass}), UnknownName),
        ('randomize negative mass',
         lambda p: p.reset([0], randomization={'body_mass': -m.body_mass}), InvalidArgument),
        ('randomize NaN gravity',
         lambda p: p.reset([0], randomization={'opt.gravity': [0, np.nan, 1]}),
         InvalidArgument),
        ('randomize shape',
         lambda p: p.reset([0, 1], randomization={'body_mass': np.ones((3, m.nbody))}),
         InvalidArgument),
        ('randomize not dict', lambda p: p.reset([0], randomization=[1.0]), InvalidArgument),
        ('randomize later field bad',
         lambda p: p.reset([0], randomization={'body_mass': m.body_mass,
                                               'dof_damping': 'x'}), InvalidArgument),
        ('set_state width', lambda p: p.set_state(np.zeros((n, 3))), InvalidArgument),
        ('set_state full width', lambda p: p.set_state(inf_states[:1, :], [0], full=True),
         InvalidArgument),
        ('get_state ids', lambda p: p.get_state([9]), InvalidArgument),
        ('jacobian unknown site', lambda p: p.site_jacobians(['nope']), UnknownName),
        ('jacobian site index', lambda p: p.site_jacobians([99]), InvalidArgument),
        ('jacobian no sites', lambda p: p.site_jacobians([]), InvalidArgument),
        ('jacobian bool site', lambda p: p.site_jacobians([True]), InvalidArgument),
        ('hfield unknown', lambda p: p.hfield_heights('terrain', [[0, 0]]), DeviceError),
        ('field_values unknown', lambda p: p.field_values('geom_size'), UnknownName),
        ('evaluate ctrl shape', lambda p: p.evaluate(np.zeros((5, m.nu + 2))), InvalidArgument),
        ('evaluate nstep mismatch', lambda p: p.evaluate(np.zeros((5, m.nu)), 6),
         InvalidArgument),
        ('evaluate cost not callable', lambda p: p.evaluate(np.zeros((5, m.nu)), cost=3),
         InvalidArgument),
        ('evaluate bad randomization resets nothing',
         lambda p: p.evaluate(np.zeros((5, m.nu)), keyframe='home',
                              randomization={'body_mass': np.nan * m.body_mass}),
         InvalidArgument),
    ]


def test_every_bad_input_is_refused_and_changes_nothing(go1, engine):
    with EnvPool(go1, 4, nthread=2, keyframe='home', engine=engine) as pool:
        pool.reset([1], keyframe='home', randomization={'body_mass': go1.body_mass * 1.1})
        pool.step(10, ctrl=ctrl_batch(go1, 4, 13))
        state = pool.get_state(full=True)
        masses = pool.field_values('body_mass')
        for label, call, kind in _bad_calls(go1):
            with pytest.raises(kind) as err:
                call(pool)
            assert isinstance(err.value, DeviceError), label
            assert err.value.code in ('INVALID_ARGUMENT', 'UNKNOWN_NAME'), label
            assert 'allowed' in str(err.value), f'{label}: {err.value}'
            np.testing.assert_array_equal(pool.get_state(full=True), state, err_msg=label)
            np.testing.assert_array_equal(pool.field_values('body_mass'), masses, err_msg=label)
            np.testing.assert_array_equal(pool.randomized(), [False, True, False, False])


@pytest.mark.parametrize('kwargs', [
    {'nbatch': 0}, {'nbatch': 70000}, {'nbatch': 2.0}, {'nbatch': True},
    {'nbatch': 2, 'nthread': 0}, {'nbatch': 2, 'nthread': 10_000},
    {'nbatch': 2, 'nthread': True}, {'nbatch': 2, 'variant_of': [0, 1]},
    {'nbatch': 2, 'variant_of': [0]}, {'nbatch': 2, 'keyframe': 'nope'},
])
def test_bad_constructor_arguments(go1, kwargs):
    with pytest.raises(DeviceError) as err:
        EnvPool(go1, **kwargs)
    assert 'allowed' in str(err.value)


def test_bad_model_argument():
    with pytest.raises(InvalidArgument):
        EnvPool('scene.xml', 2)
    with pytest.raises(InvalidArgument):
        EnvPool([], 2)


# ---------------------------------------------------------------------- lifecycle
def test_every_call_after_close_raises_closed_error(panda, engine):
    pool = EnvPool(panda, 4, nthread=2, keyframe='home', engine=engine)
    pool.step(2)
    pool.close()
    pool.close()  # idempotent
    calls = [lambda: pool.step(1), lambda: pool.reset([0]), lambda: pool.forward(),
             lambda: pool.get_state(), lambda: pool.set_state(np.zeros((4, 19))),
             lambda: pool.site_jacobians(['x']), lambda: pool.hfield_heights(0, [[0, 0]]),
             lambda: pool.evaluate(np.zeros((2, panda.nu))), lambda: pool.field_values('x'),
             lambda: pool.randomized(), lambda: pool.__enter__()]
    for call in calls:
        with pytest.raises(ClosedError) as err:
            call()
        assert err.value.code == 'CLOSED'
    assert not [t for t in threading.enumerate() if t.name.startswith('envpool')]


def test_context_manager_closes(panda, engine):
    with EnvPool(panda, 2, nthread=2, engine=engine) as pool:
        pool.step(1)
    with pytest.raises(ClosedError):
        pool.step(1)
