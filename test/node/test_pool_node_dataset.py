"""pool_node's evaluate_policy action with a dataset: the episodes written as a LeRobot
dataset under the node's ``dataset_folder``, whose metadata equals the action's result;
goals naming a folder the node must not write are refused and write nothing.

One PoolNode on the bench arm (own rclpy Context, a client node beside it).
"""

import os
import tempfile

import pytest

rclpy = pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from helpers import ActionNodes  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from mujoco_hal_ros.action import EvaluatePolicy  # noqa: E402
from mujoco_hal_ros.dataset import check_dataset, DatasetReader  # noqa: E402
from mujoco_hal_ros.render import gl  # noqa: E402
from mujoco_hal_ros.ros.pool.pool_node import PoolNode  # noqa: E402

BUDGET_S = 180.0
GL_PROBLEM = gl.probe()


class Harness(ActionNodes):
    def __init__(self, folder):
        super().__init__(lambda ctx: PoolNode(context=ctx, parameter_overrides=[
            Parameter('nbatch', value=2), Parameter('nthread', value=2),
            Parameter('keyframe', value='rest'),
            Parameter('dataset_folder', value=folder)]),
            'pool_dataset_test_client', EvaluatePolicy, '/evaluate_policy', budget=BUDGET_S)

    def run(self, goal, feedback=None, timeout=120.0):
        return super().run(goal, feedback, timeout)


@pytest.fixture(scope='module')
def root():
    with tempfile.TemporaryDirectory() as folder:
        yield os.path.join(folder, 'datasets')      # made by the node on first use


@pytest.fixture(scope='module')
def h(root):
    harness = Harness(root)
    try:
        yield harness
    finally:
        harness.close()


def test_a_goal_with_a_dataset_writes_it_and_its_metadata_matches_the_result(h, root):
    cameras = ['overhead'] if GL_PROBLEM is None else []
    status, res = h.run(EvaluatePolicy.Goal(task='reach', policy='random', episodes=3,
                                            envs=2, seed=5, dataset='runs/first',
                                            dataset_cameras=cameras))
    assert status == GoalStatus.STATUS_SUCCEEDED, res.message
    folder = os.path.join(root, 'runs', 'first')
    assert res.dataset == folder and res.episodes_done == 3
    assert check_dataset(folder) == []
    reader = DatasetReader(folder)
    assert [bool(e['success']) for e in reader.episodes] == list(res.episode_success)
    assert [e['failure'] for e in reader.episodes] == list(res.episode_failure)
    assert [int(e['length']) for e in reader.episodes] == list(res.episode_steps)
    assert [e['episode_return'] for e in reader.episodes] == list(res.episode_return)
    assert reader.camera_keys == [f'observation.images.{c}' for c in cameras]


@pytest.mark.parametrize('name, cameras, code', [
    ('/tmp/elsewhere', [], 'FORBIDDEN'),
    ('../escape', [], 'FORBIDDEN'),
    ('runs/../../escape', [], 'FORBIDDEN'),
    ('bad_camera', ['no_such_camera'], 'UNKNOWN_NAME'),
])
def test_goals_naming_a_folder_the_node_must_not_write_are_refused(h, root, name, cameras,
                                                                   code):
    before = sorted(os.listdir(root)) if os.path.isdir(root) else []
    status, res = h.run(EvaluatePolicy.Goal(task='reach', policy='zero', episodes=1,
                                            dataset=name, dataset_cameras=cameras))
    assert status == GoalStatus.STATUS_ABORTED
    assert res.code == code, res.message
    assert res.dataset == '' and res.episodes_done == 0
    after = sorted(os.listdir(root)) if os.path.isdir(root) else []
    assert after == before
    assert not os.path.exists('/tmp/elsewhere/meta')
    assert not os.path.exists(os.path.join(os.path.dirname(root), 'escape'))


def test_a_goal_without_a_dataset_writes_none(h, root):
    before = sorted(os.listdir(root)) if os.path.isdir(root) else []
    status, res = h.run(EvaluatePolicy.Goal(task='reach', policy='zero', episodes=1))
    assert status == GoalStatus.STATUS_SUCCEEDED and res.dataset == ''
    assert (sorted(os.listdir(root)) if os.path.isdir(root) else []) == before


def test_a_node_without_dataset_folder_writes_no_dataset():
    from mujoco_hal_ros.errors import DeviceError
    from mujoco_hal_ros.ros.pool.policy_action import dataset_path
    assert dataset_path('', '') is None
    with pytest.raises(DeviceError) as err:
        dataset_path('', 'runs/x')
    assert err.value.code == 'FORBIDDEN' and 'dataset_folder' in str(err.value)
