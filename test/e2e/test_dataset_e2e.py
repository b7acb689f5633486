"""A LeRobot dataset recorded from sim_node over real DDS: another process starts the
dataset, drives the arm with a FollowJointTrajectory-free goal (set_goals), saves, stops,
and the folder passes the format checker and replays (in this process, on a Device of the
same model) to the recorded states."""

import math
import time

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from helpers import START_S  # noqa: E402

from mujoco_hal_ros.dataset import check_dataset  # noqa: E402
from mujoco_hal_ros.dataset.replay import load_episode, replay_episode  # noqa: E402
from mujoco_hal_ros.sim.device import Device  # noqa: E402
from mujoco_hal_ros.srv import DatasetEpisode, SetGoals, StartDataset  # noqa: E402


def test_record_over_dds_then_replay(start_sim, spawn, client, tmp_path):
    proc = start_sim(f'dataset_root:={tmp_path}', 'publish_rate:=20.0')
    client.wait_graph(['/start_dataset', '/save_episode', '/stop_dataset', '/set_goals'],
                      START_S, proc, spawn)
    r = client.call(StartDataset, '/start_dataset', folder='dds', fps=20.0, task='reach',
                    cameras=['overhead'], width=96, height=72)
    assert r.success, r.message
    second = client.call(StartDataset, '/start_dataset', folder='dds2', fps=20.0)
    assert not second.success and second.code == 'BUSY'
    g = client.call(SetGoals, '/set_goals', channels=['pan_goal', 'elbow_goal'],
                    values=[20.0, 40.0])
    assert g.success, g.messages
    end = time.monotonic() + 30.0
    while time.monotonic() < end:
        st = client.call(DatasetEpisode, '/dataset_status')
        assert st.success, st.message
        if st.frames >= 50:
            break
        time.sleep(0.3)
    saved = client.call(DatasetEpisode, '/save_episode')
    assert saved.success and saved.frames >= 30, saved.message
    stop = client.call(DatasetEpisode, '/stop_dataset')
    assert stop.success, stop.message
    nothing = client.call(DatasetEpisode, '/save_episode')
    assert not nothing.success and nothing.code == 'INVALID_ARGUMENT'
    root = tmp_path / 'dds'
    assert check_dataset(root) == []
    ep = load_episode(root, 0)
    pan = ep.action_names.index('pan_goal')
    assert ep.actions[-1, pan] == np.float32(math.radians(20.0))
    # replayed here, on a device of the same model, from the stored start state
    dev = Device(start_paused=True)
    try:
        report = replay_episode(dev, root, 0)
    finally:
        dev.close()
    assert report.frames == len(ep.states)
    # a real-time recording of a ramp, replayed as held steps of it: close on the way, and
    # where the arm came to rest, the same
    assert report.max_divergence < 0.15, report.to_dict()
    assert report.divergence[-1] < 0.01, report.to_dict()
