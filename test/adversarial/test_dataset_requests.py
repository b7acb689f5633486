"""Dataset recording and replay under hostile requests: refused with a code, nothing written,
the device as it was; a recorder that was started keeps recording and
writes a dataset the format checker passes."""

import os

from hostile_helpers import hostile_scalars, is_refusal, names
from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from mujoco_hal_ros.dataset import check_dataset
from mujoco_hal_ros.dataset.recorder import DatasetRecorder
from mujoco_hal_ros.dataset.replay import replay_episode
from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.sim.device import Device

COUNTER = [0]


def _fresh(tmp_path):
    COUNTER[0] += 1
    return tmp_path / f'h{COUNTER[0]}'


@settings(max_examples=80, deadline=None)
@given(fps=hostile_scalars(), cameras=st.one_of(
           st.lists(names(['overhead']), max_size=3), hostile_scalars(),
           st.dictionaries(st.sampled_from(['overhead']), hostile_scalars(), max_size=1)),
       robot=st.one_of(st.none(), names(), st.lists(names(), max_size=2)),
       repo_id=st.one_of(st.just('t/x'), hostile_scalars(), st.text(max_size=4)),
       velocities=st.one_of(st.booleans(), hostile_scalars()))
def test_hostile_starts_refused_or_record(bench, tmp_path_factory, fps, cameras, robot,
                                          repo_id, velocities):
    root = _fresh(tmp_path_factory.getbasetemp())
    before = bench.snapshot.qpos.copy()
    try:
        rec = DatasetRecorder(bench, root, repo_id=repo_id, fps=fps, task='t',
                              cameras=cameras, robot=robot, velocities=velocities)
    except Exception as exc:  # noqa: BLE001 - the property is about which exception
        assert is_refusal(exc)
        assert not root.exists() or os.listdir(root) == []
        assert np.array_equal(bench.snapshot.qpos, before)
        return
    try:
        bench.step(60)
        rec.save_episode()
    finally:
        rec.close()
    assert check_dataset(root) == []


@settings(max_examples=60, deadline=None)
@given(episode=hostile_scalars(), lockstep=st.one_of(st.booleans(), hostile_scalars()),
       robot=st.one_of(st.none(), names(), st.lists(names(), max_size=2)))
def test_hostile_replays_refused_or_replay(bench, recorded, episode, lockstep, robot):
    before = bench.snapshot.qpos.copy()
    paused = bench.paused
    try:
        report = replay_episode(bench, recorded, episode, lockstep=lockstep, robot=robot)
    except Exception as exc:  # noqa: BLE001 - the property is about which exception
        assert is_refusal(exc)
        assert np.array_equal(bench.snapshot.qpos, before)
        assert bench.paused == paused
        return
    assert report.frames >= 2 and np.isfinite(report.divergence).all()
    assert bench.paused == paused


@pytest.fixture(scope='module')
def recorded(bench, tmp_path_factory):
    root = tmp_path_factory.mktemp('recorded') / 'ds'
    with DatasetRecorder(bench, root, repo_id='t/r', fps=20, task='t') as rec:
        bench.set_goals({'pan_goal': 10.0})
        bench.step(300)
        rec.save_episode()
    return root


def test_a_closed_recorder_refuses_and_a_closed_device_is_refused(tmp_path):
    dev = Device(start_paused=True)
    rec = DatasetRecorder(dev, tmp_path / 'c', repo_id='t/c', fps=10, task='t')
    rec.close()
    rec.close()                       # a second close does nothing
    for call in (rec.save_episode, rec.discard_episode, rec.stop):
        with pytest.raises(DeviceError):
            call()
    dev.close()
    with pytest.raises(DeviceError) as err:
        DatasetRecorder(dev, tmp_path / 'd', repo_id='t/d', fps=10)
    assert err.value.code == 'CLOSED'
    assert not (tmp_path / 'd').exists()
