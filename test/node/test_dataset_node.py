"""sim_node's dataset services (``ros/sim/dataset.py``) and run_policy's dataset_folder.

One SimNode on the bench arm (own rclpy Context, a client node beside it), datasets under a
temporary ``dataset_root``. A dataset recorded while a goal runs must hold the goal sent as
its action, pass the format checker and replay; every refusal changes nothing.
"""

import math
import os

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from helpers import SpunNodes  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from mujoco_hal_ros.action import RunPolicy  # noqa: E402
from mujoco_hal_ros.dataset import check_dataset, DatasetReader  # noqa: E402
from mujoco_hal_ros.dataset.replay import load_episode  # noqa: E402
from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402
from mujoco_hal_ros.srv import DatasetEpisode, ReplayEpisode, SetGoals, StartDataset  # noqa: E402
from mujoco_hal_ros.tasks import load_task  # noqa: E402

BUDGET_S = 300.0
GOALS = {'pan_goal': 15.0, 'lift_goal': 20.0}     # degrees (the bench arm's device file)


class Harness(SpunNodes):
    def __init__(self, root):
        super().__init__(lambda ctx: [
            SimNode(context=ctx, parameter_overrides=[
                Parameter('real_time_factor', value=1.0), Parameter('publish_rate', value=20.0),
                Parameter('web_viewer', value=0), Parameter('dataset_root', value=str(root))]),
            rclpy.create_node('dataset_test_client', context=ctx)],
            lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
        self.node, self.client = self.nodes
        self.device = self.node.device
        self.action = ActionClient(self.client, RunPolicy, 'run_policy')
        self.spin(BUDGET_S)

    def close(self):
        self.spinner.stop(self.join_s)
        self.action.destroy()
        super().close()

    def srv(self, kind, name, **fields):
        req = kind.Request()
        for k, v in fields.items():
            setattr(req, k, v)
        return self.call(kind, name, req, timeout=60.0)

    def episode(self, name, **fields):
        return self.srv(DatasetEpisode, name, **fields)


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    return tmp_path_factory.mktemp('datasets')


@pytest.fixture(scope='module')
def h(root):
    harness = Harness(root)
    try:
        yield harness
    finally:
        harness.close()


def _sim_wait(device, seconds):
    import time
    t = device.snapshot.time + seconds
    while device.snapshot.time < t:
        time.sleep(0.02)


def test_no_dataset_requests_change_nothing(h, root):
    for name in ('save_episode', 'discard_episode', 'stop_dataset', 'dataset_status'):
        r = h.episode(name)
        assert not r.success and r.code == 'INVALID_ARGUMENT', (name, r.message)
        assert 'start_dataset first' in r.message
    assert os.listdir(root) == []


@pytest.mark.parametrize('fields, code', [
    ({'fps': 0.0}, 'INVALID_ARGUMENT'), ({'fps': -30.0}, 'INVALID_ARGUMENT'),
    ({'fps': float('nan')}, 'INVALID_ARGUMENT'), ({'fps': float('inf')}, 'INVALID_ARGUMENT'),
    ({'cameras': ['nope']}, 'UNKNOWN_NAME'), ({'robot': 'nobody'}, 'UNKNOWN_NAME'),
    ({'folder': '../outside'}, 'FORBIDDEN'), ({'folder': '/etc/x'}, 'FORBIDDEN'),
    ({'folder': ''}, 'INVALID_ARGUMENT')])
def test_bad_starts_refused_nothing_written(h, root, fields, code):
    req = dict({'folder': 'bad', 'fps': 30.0, 'task': 't'}, **fields)
    r = h.srv(StartDataset, 'start_dataset', **req)
    assert not r.success and r.code == code, r.message
    assert not (root / 'bad').exists()
    assert not h.node.datasets._datasets


def test_existing_other_folder_refused(h, root):
    (root / 'notes').mkdir()
    (root / 'notes' / 'mine.txt').write_text('keep')
    r = h.srv(StartDataset, 'start_dataset', folder='notes', fps=30.0, task='t')
    assert not r.success and r.code == 'INVALID_ARGUMENT' and 'not a dataset' in r.message
    assert os.listdir(root / 'notes') == ['mine.txt']


def test_record_a_goal_then_replay(h, root):
    r = h.srv(StartDataset, 'start_dataset', folder='demo', fps=30.0, task='reach',
              cameras=['overhead'], width=160, height=120)
    assert r.success, r.message
    assert r.folder == str(root / 'demo')
    again = h.srv(StartDataset, 'start_dataset', folder='demo2', fps=10.0, task='t')
    assert not again.success and again.code == 'BUSY'
    assert not (root / 'demo2').exists()
    _sim_wait(h.device, 0.2)
    st = h.episode('dataset_status')
    assert st.success and st.recording and st.frames > 0 and st.folder == r.folder
    g = h.srv(SetGoals, 'set_goals', channels=list(GOALS), values=list(GOALS.values()))
    assert g.success, g.messages
    _sim_wait(h.device, 1.5)
    saved = h.episode('save_episode')
    assert saved.success, saved.message
    assert saved.episode == 0 and saved.frames >= 40 and saved.episodes == 1
    stop = h.episode('stop_dataset')
    assert stop.success and not stop.recording
    again = h.episode('stop_dataset')
    assert not again.success and again.code == 'INVALID_ARGUMENT'
    assert check_dataset(root / 'demo') == []
    ep = load_episode(root / 'demo', 0)
    names = ep.action_names
    # the last frames' action is the goal sent, in the model's own unit (radians)
    for channel, deg in GOALS.items():
        assert ep.actions[-1, names.index(channel)] == np.float32(math.radians(deg))
    assert ep.actions[0, names.index('pan_goal')] != np.float32(math.radians(15.0))
    with DatasetReader(root / 'demo') as reader:
        frames = reader.video_frames(0, 'overhead')
        assert reader.tasks == ['reach']
    assert frames.shape == (len(ep.states), 120, 160, 3)
    rep = h.srv(ReplayEpisode, 'replay_episode', folder='demo', episode=0, lockstep=True)
    assert rep.success, rep.message
    assert rep.frames == len(ep.states) and len(rep.divergence) == rep.frames
    assert rep.max_divergence < 0.15, rep.message
    assert rep.divergence[-1] < 0.01, rep.message
    bad = h.srv(ReplayEpisode, 'replay_episode', folder='demo', episode=7, lockstep=True)
    assert not bad.success and bad.code == 'UNKNOWN_NAME'
    bad = h.srv(ReplayEpisode, 'replay_episode', folder='../x', episode=0, lockstep=True)
    assert not bad.success and bad.code == 'FORBIDDEN'


def test_run_policy_writes_its_episode(h, root):
    assert h.action.wait_for_server(timeout_sec=10.0)
    h.device.pause(True)
    try:
        handle = h.wait(h.action.send_goal_async(RunPolicy.Goal(
            task='reach', policy='random', seed=3, episode=1, lockstep=True,
            dataset_folder='rollouts')))
        assert handle.accepted
        res = h.wait(handle.get_result_async(), 120.0)
    finally:
        h.device.pause(False)
    r = res.result
    assert res.status == GoalStatus.STATUS_SUCCEEDED, r.message
    assert check_dataset(root / 'rollouts') == []
    with DatasetReader(root / 'rollouts') as reader:
        row = reader.episodes[0]
        assert reader.fps == pytest.approx(1.0 / load_task('reach').control_dt)
        n = len(reader.frames(0)['action'])
    assert row['success'] == r.episode_success and row['failure'] == r.failure
    assert row['steps'] == r.steps and row['policy'] == 'random' and row['seed'] == 3
    assert n == r.steps           # one frame a control step
    assert row['sim.start_state'] is not None
    # a refused folder comes back before the device changes
    gen = h.device.generation
    handle = h.wait(h.action.send_goal_async(RunPolicy.Goal(
        task='reach', policy='zero', lockstep=True, dataset_folder='../escape')))
    res = h.wait(handle.get_result_async(), 60.0)
    assert res.result.code == 'FORBIDDEN' and h.device.generation == gen
