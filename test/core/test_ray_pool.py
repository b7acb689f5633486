"""RayPool on a local multi-node Ray cluster against the in-process EnvPool.

The cluster is Ray's own test cluster (``ray.cluster_utils.Cluster``): a head node without
CPUs for the driver and two one-CPU worker nodes, so the two shard actors (one CPU each) sit
on different nodes, and a node removed mid-call really takes its actor and object store with
it. Every number is compared exactly (``array_equal``) with an ``EnvPool`` given the same
calls: a shard re-created from the driver's rows must continue bit-identically.
"""

import os
import threading
import time

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.errors import ClosedError, ConfigError, InvalidArgument, UnknownName
from mujoco_hal_ros.pool import EnvPool, RayPool

os.environ.setdefault('RAY_USAGE_STATS_ENABLED', '0')
try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError as exc:  # the optional extra is missing: say so, do not fail
    print(f'test_ray_pool skipped: import ray failed ({exc})')
    pytest.skip(f'ray is not installed ({exc}); pip install "ray[default]"',
                allow_module_level=True)

STORE = 100 * 2 ** 20
NODE = {'num_cpus': 1, 'object_store_memory': STORE}


@pytest.fixture(scope='module')
def cluster():
    c = Cluster(initialize_head=True, head_node_args={
        'num_cpus': 0, 'object_store_memory': STORE, 'include_dashboard': False})
    for _ in range(2):
        c.add_node(**NODE)
    c.wait_for_nodes()
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope='module')
def go1():
    path = menagerie.model_path('go1')
    if path is None:
        pytest.skip('Menagerie go1 not installed (pip install -r requirements-test.txt)')
    spec = mujoco.MjSpec.from_file(path)
    spec.add_sensor(name='acc', type=mujoco.mjtSensor.mjSENS_ACCELEROMETER,
                    objtype=mujoco.mjtObj.mjOBJ_SITE, objname='imu')
    return spec.compile()


def _free_cpus(expected, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ray.available_resources().get('CPU', 0) >= expected:
            return True
        time.sleep(0.2)
    return False


def _ctrl(model, n, seed, nstep=None):
    rng = np.random.default_rng(seed)
    shape = (n, model.nu) if nstep is None else (n, nstep, model.nu)
    return rng.uniform(-0.5, 0.5, shape)


def _masses(model, n, seed):
    return model.body_mass * np.random.default_rng(seed).uniform(0.8, 1.2, (n, model.nbody))


def _same(a, b):
    for field in ('env_ids', 'state', 'time', 'qpos', 'qvel', 'act', 'sensordata',
                  'unstable', 'cost', 'steps_done', 'completed'):
        if hasattr(a, field):
            x, y = getattr(a, field), getattr(b, field)
            assert (x is None) == (y is None), field
            if x is not None:
                np.testing.assert_array_equal(x, y, err_msg=field)


@pytest.mark.parametrize('nthread', [1, 2])
def test_results_are_bit_identical_to_in_process(cluster, go1, nthread):
    n = 12
    with RayPool(go1, n, nshard=2, nthread=nthread, keyframe='home') as rp, \
            EnvPool(go1, n, nthread=nthread, keyframe='home') as ep:
        assert len(set(rp.shard_nodes)) == 2      # Ray spread the shards over both nodes
        assert rp.engine == ep.engine
        for pool in (rp, ep):
            pool.reset([9, 1, 6], keyframe='home',
                       randomization={'body_mass': _masses(go1, 3, 1)})
        _same(rp.step(5, _ctrl(go1, n, 2)), ep.step(5, _ctrl(go1, n, 2)))
        ids = [10, 0, 7, 3]                   # both shards, out of order
        _same(rp.step(3, _ctrl(go1, 4, 3, 3), ids, sensors=True),
              ep.step(3, _ctrl(go1, 4, 3, 3), ids, sensors=True))
        np.testing.assert_array_equal(rp.get_state(full=True), ep.get_state(full=True))
        np.testing.assert_array_equal(rp.shard_rows(), ep.get_state(full=True))
        _same(rp.forward(ids), ep.forward(ids))
        for a, b in zip(rp.site_jacobians(['FR', 'imu'], ids),
                        ep.site_jacobians(['FR', 'imu'], ids), strict=True):
            np.testing.assert_array_equal(a, b)
        for a, b in zip(rp.body_jacobians(['trunk', 'RL_calf']),
                        ep.body_jacobians(['trunk', 'RL_calf']), strict=True):
            np.testing.assert_array_equal(a, b)

        def cost(qpos, qvel):
            return np.sum(qpos ** 2, axis=1) + np.sum(qvel ** 2, axis=1)
        args = dict(randomization={'geom_friction': go1.geom_friction * 0.9}, cost=cost,
                    chunk_steps=4, env_ids=[11, 2, 5, 8])
        ctrl = _ctrl(go1, 4, 4, 10)
        _same(rp.evaluate(ctrl, **args), ep.evaluate(ctrl, **args))
        _same(rp.evaluate(ctrl, progress=lambda f: None, **args),
              ep.evaluate(ctrl, progress=lambda f: None, **args))
        _same(rp.step(4), ep.step(4))
        np.testing.assert_array_equal(rp.randomized(), ep.randomized())


def test_a_node_killed_mid_evaluate_reruns_only_its_share(cluster, go1):
    n, nstep = 10, 12
    ctrl = _ctrl(go1, n, 5, nstep)
    args = dict(keyframe='home', randomization={'body_mass': _masses(go1, n, 6)},
                chunk_steps=3)
    with EnvPool(go1, n, keyframe='home') as ep:
        ep.step(2, _ctrl(go1, n, 7))
        want = ep.evaluate(ctrl, **args)
        after = ep.step(3, _ctrl(go1, n, 8))
    killed = []
    with RayPool(go1, n, nshard=2, keyframe='home') as rp:
        rp.step(2, _ctrl(go1, n, 7))
        victim = rp.shard_nodes[0]

        def progress(fraction):
            if not killed:  # after the first chunk: take shard 0's node away, add another
                node = next(nd for nd in cluster.list_all_nodes() if nd.node_id == victim)
                cluster.remove_node(node)
                killed.append(cluster.add_node(**NODE))
        got = rp.evaluate(ctrl, progress=progress, **args)
        assert killed and rp.respawns >= 1 and rp.shard_nodes[0] != victim
        _same(got, want)
        np.testing.assert_array_equal(rp.field_values('body_mass'), args['randomization']
                                      ['body_mass'])
        _same(rp.step(3, _ctrl(go1, n, 8)), after)   # and it goes on identically
    assert _free_cpus(2)


def test_a_node_killed_during_one_long_call_reruns_that_shards_share(cluster, go1):
    """Without a progress callback each shard runs its whole share in one call."""
    n, nstep = 4, 30000
    ctrl = 0.2 * _ctrl(go1, n, 12, nstep)
    with EnvPool(go1, n, keyframe='home') as ep:
        want = ep.evaluate(ctrl, keyframe='home')
    killed = []
    cluster.add_node(**NODE)        # the spare (Ray adds nodes from the main thread only)
    cluster.wait_for_nodes()
    with RayPool(go1, n, nshard=2, keyframe='home') as rp:
        victim = rp.shard_nodes[1]
        node = next(nd for nd in cluster.list_all_nodes() if nd.node_id == victim)

        def kill():
            time.sleep(0.5)
            cluster.remove_node(node)
            killed.append(node)
        thread = threading.Thread(target=kill)
        thread.start()
        try:
            got = rp.evaluate(ctrl, keyframe='home')
        finally:
            thread.join()
        assert killed and rp.respawns >= 1, 'the share finished before its node was removed'
        assert rp.shard_nodes[1] != victim
        _same(got, want)
    assert _free_cpus(2)


def test_randomization_lands_in_the_right_envs_across_shards(cluster, go1):
    n = 9
    masses = _masses(go1, 3, 9)
    with RayPool(go1, n, nshard=3, actor_options={'num_cpus': 0.5}) as rp:
        rp.reset([8, 0, 4], randomization={'body_mass': masses})
        got = rp.field_values('body_mass')
        np.testing.assert_array_equal(got[[8, 0, 4]], masses)
        others = [e for e in range(n) if e not in (8, 0, 4)]
        np.testing.assert_array_equal(got[others], np.broadcast_to(go1.body_mass,
                                                                   (len(others), go1.nbody)))
        np.testing.assert_array_equal(rp.randomized(), np.isin(np.arange(n), [8, 0, 4]))
        rp.reset([0])   # a plain reset drops it again, there only
        assert rp.randomized().tolist() == [e in (8, 4) for e in range(n)]


BAD_CALLS = [
    (lambda p: p.step(0), InvalidArgument),
    (lambda p: p.step(1, np.zeros((6, 3))), InvalidArgument),
    (lambda p: p.step(1, None, [1, 1]), InvalidArgument),
    (lambda p: p.step(1, None, [0, 6]), InvalidArgument),
    (lambda p: p.reset([0, 5], keyframe='nope'), UnknownName),
    (lambda p: p.reset([0, 5], randomization={'body_mass': -np.ones((2, 14))}),
     InvalidArgument),
    (lambda p: p.reset([0, 5], randomization={'geom_size': 1.0}), UnknownName),
    (lambda p: p.evaluate(np.zeros((3, 12)), env_ids=[0, 5], cost=3), InvalidArgument),
    (lambda p: p.evaluate(np.full((3, 12), np.nan)), InvalidArgument),
    (lambda p: p.site_jacobians(['nope']), UnknownName),
    (lambda p: p.body_jacobians([]), InvalidArgument),
    (lambda p: p.set_state(np.zeros(3), [0]), InvalidArgument),
    # these run on the shards and are then undone: all or nothing, as in-process
    (lambda p: p.evaluate(np.zeros((3, 12)), progress=lambda f: 1 / 0), InvalidArgument),
    (lambda p: p.evaluate(np.zeros((3, 12)), cost=lambda q, v: q,
                          randomization={'dof_damping': p.model.dof_damping + 1}),
     InvalidArgument),
    (lambda p: p.evaluate(np.zeros((3, 12)), cost=lambda q, v: None, progress=lambda f: None,
                          randomization={'dof_damping': p.model.dof_damping + 1}),
     InvalidArgument),
]


def test_bad_input_is_refused_before_any_shard_is_touched(cluster, go1):
    with RayPool(go1, 6, nshard=2, keyframe='home') as rp:
        rp.step(2, _ctrl(go1, 6, 10))
        before = rp.shard_rows()
        for k, (call, error) in enumerate(BAD_CALLS):
            with pytest.raises(error):
                call(rp)
            np.testing.assert_array_equal(rp.shard_rows(), before, err_msg=f'call {k}')
            np.testing.assert_array_equal(rp.get_state(full=True), before)
            assert not rp.randomized().any()


def test_close_frees_every_actor_and_later_calls_fail(cluster, go1):
    assert _free_cpus(2)
    pool = RayPool(go1, 4)                                # one shard per cluster CPU
    assert pool.nshard == 2 and pool.shard_bounds == [(0, 2), (2, 4)]
    assert ray.available_resources().get('CPU', 0) == 0   # both CPUs held by the shards
    pool.close()
    pool.close()                                          # idempotent
    assert _free_cpus(2)
    with pytest.raises(ClosedError):
        pool.step()
    with pytest.raises(ClosedError):
        pool.get_state()


def test_an_address_for_a_process_already_on_ray_is_refused(cluster, go1):
    with pytest.raises(ConfigError) as err:
        RayPool(go1, 2, nshard=1, address='auto')
    assert 'address=None' in str(err.value)


HFIELD_XML = """
<mujoco>
  <asset>
    <hfield name="bumps" nrow="3" ncol="4" size="1.5 1 0.3 0.1"
            elevation="0 3 1 2  5 0 4 1  2 2 0 6"/>
  </asset>
  <worldbody>
    <geom name="ground" type="hfield" hfield="bumps" euler="0 0 20"/>
    <body name="robot" pos="0 0 1">
      <freejoint/>
      <geom type="box" size=".1 .1 .1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_hfield_heights_across_shards_equal_in_process(cluster):
    model = mujoco.MjModel.from_xml_string(HFIELD_XML)
    n = 6
    points = [[0.2, 0.1], [-0.3, 0.4], [5.0, 5.0]]
    with RayPool(model, n, nshard=2) as rp, EnvPool(model, n) as ep:
        state = ep.get_state()
        state[:, 1:3] = np.random.default_rng(3).uniform(-1, 1, (n, 2))
        for pool in (rp, ep):
            pool.set_state(state)
        got = rp.hfield_heights('bumps', points, 'yaw', 'robot', env_ids=[5, 0, 3])
        want = ep.hfield_heights('bumps', points, 'yaw', 'robot', env_ids=[5, 0, 3])
        np.testing.assert_array_equal(got, want)
        assert np.isnan(got[:, 2]).all() and np.isfinite(got[:, :2]).all()
