"""pool_node fronting a Ray cluster (``ray_address:=local``), reached over real DDS.

The node runs as its own process and starts a local Ray whose shard actors step the
environments; this process is an ordinary ROS client sending an ``evaluate`` goal. The final
states must be bit-identical to an in-process EnvPool doing the same work, and bad input is
refused with the pool's code, exactly as with an in-process pool behind the node.
"""

import functools
import os

import mujoco
import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')
pytest.importorskip('ray', reason='ray is not installed; pip install "ray[default]"')

from helpers import SpunNodes, START_S  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.action import Evaluate  # noqa: E402
from mujoco_hal_ros.pool import EnvPool  # noqa: E402
from mujoco_hal_ros.ros.pool.arrays import to_msg  # noqa: E402
from mujoco_hal_ros.srv import PoolInfo  # noqa: E402

RAY_START_S = START_S + 60.0     # pool_node also starts a local Ray and its shard actors


@pytest.fixture
def client():
    nodes = SpunNodes(lambda ctx: [rclpy.create_node('ray_e2e_client', context=ctx)],
                      lambda ctx: MultiThreadedExecutor(num_threads=2, context=ctx))
    nodes.spin(RAY_START_S + 120.0)
    try:
        yield nodes
    finally:
        nodes.close()


def _array(msg):
    return np.asarray(msg.data).reshape(list(msg.shape))


def _evaluate(client, action, goal, timeout=120.0):
    handle = client.wait(action.send_goal_async(goal), 20.0)
    assert handle.accepted
    return client.wait(handle.get_result_async(), timeout).result


def test_evaluate_over_dds_on_a_ray_backed_pool_node(start_node, spawn, client):
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie Panda not installed (pip install -r requirements-test.txt)')
    os.environ.setdefault('RAY_USAGE_STATS_ENABLED', '0')
    start = functools.partial(start_node, 'pool_node')
    proc = start(f'model:={path}', 'keyframe:=home', 'nbatch:=8', 'nthread:=1',
                 'ray_address:=local', namespace='/raypool', name='raypool')
    action = ActionClient(client.nodes[0], Evaluate, '/raypool/evaluate')
    try:
        if not action.wait_for_server(timeout_sec=RAY_START_S):
            pytest.fail(f'pool_node over Ray never offered evaluate:\n'
                        f'{spawn.output(proc)[-3000:]}')
        info = client.call(PoolInfo, '/raypool/pool_info', PoolInfo.Request())
        assert info.nbatch == 8
        model = mujoco.MjModel.from_xml_path(path)
        rng = np.random.default_rng(12)
        ctrl = model.key_ctrl[0] + rng.normal(0.0, 0.1, (8, 40, model.nu))
        res = _evaluate(client, action, Evaluate.Goal(ctrl=to_msg(ctrl), keyframe='home',
                                                      want_sensors=True))
        assert res.success, res.message
        with EnvPool(model, 8, keyframe='home') as pool:
            want = pool.evaluate(ctrl, keyframe='home')
        np.testing.assert_array_equal(_array(res.final_state), want.state)
        np.testing.assert_array_equal(_array(res.sensordata), want.sensordata)
        assert res.steps_done == 40 and res.completed
        # bad input: the pool's own refusal, with its code, before any shard is touched
        bad = _evaluate(client, action, Evaluate.Goal(ctrl=to_msg(ctrl[:, :, :3])))
        assert not bad.success and bad.code == 'INVALID_ARGUMENT', bad.message
        assert 'ctrl' in bad.message
        assert proc.poll() is None, spawn.output(proc)[-2000:]
    finally:
        action.destroy()
