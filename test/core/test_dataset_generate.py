"""Generated demonstrations and policy rollouts as LeRobot datasets, checked independently.

The pick-and-place example (Menagerie Panda, scripted expert) is generated on a pool of two
threads, and a ``reach`` evaluation under a random policy is recorded; then, without the
pool or the recorder:

- the dataset checker (``dataset.check_dataset``) finds nothing wrong;
- every episode's metadata says what the evaluation's report says (success, failure,
  return, steps), and the episodes' draws differ;
- every frame is replayed on a fresh MjData from the episode's stored start state with the
  stored actions, and the recorded ``observation.state`` must equal the replayed one bit for
  bit (as float32);
- recorded images match an independent ``mujoco.Renderer`` at the replayed state within
  codec error;
- bad input (folder, fps, cameras, episode count) is refused before anything is written, and
  an interrupted run leaves a dataset of the finished episodes only.
"""

import copy
import json
import math
import os

from dataset_frames import fast_render  # noqa: E402
import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.render import gl
from mujoco_hal_ros.tasks import evaluate, load_task

GL_PROBLEM = gl.probe()
needs_gl = pytest.mark.skipif(GL_PROBLEM is not None, reason=f'no headless GL: {GL_PROBLEM}')
dataset = pytest.importorskip('mujoco_hal_ros.dataset.generate',
                              reason='the dataset writer is not on this branch')
from mujoco_hal_ros.dataset import check_dataset, DatasetReader  # noqa: E402
from mujoco_hal_ros.dataset.generate_pick_place import pick_place_task, SCRIPT  # noqa: E402
from mujoco_hal_ros.dataset.generate_record import state_names  # noqa: E402

W, H = 64, 48
EPISODES = 4
INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION


@pytest.fixture(scope='module')
def pick_place():
    task = pick_place_task()
    return task


@pytest.fixture(scope='module')
def generated(tmp_path_factory, pick_place):
    if GL_PROBLEM is not None:
        pytest.skip(f'no headless GL: {GL_PROBLEM}')
    folder = str(tmp_path_factory.mktemp('gen') / 'demos')
    report = dataset.generate(pick_place, SCRIPT, EPISODES, folder, nthread=2,
                              cameras=['front'], image_size=(W, H), gripper='actuator8')
    return folder, report


@pytest.fixture(scope='module')
def rollouts(tmp_path_factory):
    if GL_PROBLEM is not None:
        pytest.skip(f'no headless GL: {GL_PROBLEM}')
    task = load_task('reach')
    folder = str(tmp_path_factory.mktemp('eval') / 'rollouts')
    report = evaluate(task, 'random', 5, 3, seed=7, nthread=2, dataset=folder,
                      cameras=['overhead'], image_size=(W, H))
    return task, folder, report


def episodes_of(folder):
    return DatasetReader(folder).episodes


def frames_of(reader, e):
    return reader.frames(e)


def replay(task, meta, frames):
    """Recorded vs replayed: the first frame whose state differs, or None; and the states."""
    m = task.model
    patch = json.loads(meta['randomization'])
    if patch:
        m = copy.copy(m)
        for key, value in patch.items():
            getattr(m, key)[...] = value
    d = mujoco.MjData(m)
    mujoco.mj_setState(m, d, np.asarray(meta['sim.start_state'], dtype=np.float64), INTEGRATION)
    _, qadr, dadr = state_names(m)
    states = []
    for k in range(len(frames['action'])):
        got = np.concatenate([d.qpos[qadr], d.qvel[dadr]]).astype(np.float32)
        states.append(d.qpos.copy())
        if not np.array_equal(got, np.asarray(frames['observation.state'][k])):
            return k, states
        d.ctrl[:] = np.asarray(frames['action'][k], dtype=np.float64)
        for _ in range(int(meta['sim.decimation'])):
            mujoco.mj_step(m, d)
    return None, states


def render_at(task, qpos, camera):
    return fast_render(task.model, camera, W, H, qpos=qpos)


# ----------------------------------------------------------------------------- generated
@needs_gl
def test_generated_dataset_passes_the_checker_with_every_episode(generated):
    folder, report = generated
    assert check_dataset(folder) == []
    eps = episodes_of(folder)
    assert len(eps) == EPISODES == report.episodes_done
    assert sum(int(e['length']) for e in eps) == sum(r.steps for r in report.episode_results)


@needs_gl
def test_generated_episodes_record_their_success_and_differ(generated, pick_place):
    folder, report = generated
    eps = episodes_of(folder)
    for meta, res in zip(eps, report.episode_results, strict=True):
        assert bool(meta['success']) == res.success
        assert meta['failure'] == (res.failure or '')
        assert int(meta['steps']) == res.steps == int(meta['length'])
        assert math.isclose(float(meta['episode_return']), res.episode_return)
    assert report.successes >= EPISODES - 1, report.summary()     # the expert works
    cube = pick_place.model.joint('cube_free').qposadr[0]
    lay = {n: off for n, off, _ in pick_place.layout.components}
    starts = np.array([e['sim.start_state'] for e in eps])
    xy = starts[:, lay['qpos'] + cube:lay['qpos'] + cube + 2]
    goals = np.array([e['command'] for e in eps])
    assert len({tuple(p) for p in xy.round(6)}) == EPISODES, 'cube start repeated'
    assert len({tuple(g) for g in goals.round(6)}) == EPISODES, 'goal repeated'


@needs_gl
def test_generated_frames_replay_bit_for_bit_and_images_match_a_render(generated, pick_place):
    folder, _ = generated
    reader = DatasetReader(folder)
    for e, meta in enumerate(reader.episodes):
        frames = frames_of(reader, e)
        bad, states = replay(pick_place, meta, frames)
        assert bad is None, f'episode {e}: frame {bad} differs from the replay'
        images = reader.video_frames(e, 'front')
        assert len(images) == len(states)
        for k in (0, len(states) // 2, len(states) - 1):
            want = render_at(pick_place, states[k], 'front').astype(int)
            got = np.asarray(images[k]).astype(int)
            assert got.shape == want.shape
            own = np.abs(got - want).mean()
            assert own < 8.0, f'episode {e} frame {k}'
            # and nearer its own instant than one 10 frames away (not merely alike)
            near = min(len(states) - 1, k + 10) if k < len(states) - 10 else k - 10
            other = np.abs(got - render_at(pick_place, states[near], 'front').astype(int))
            assert own < other.mean(), f'episode {e} frame {k} looks like frame {near}'
    # and the images are not all alike: the arm moves
    first, last = images[0].astype(int), images[-1].astype(int)
    assert np.abs(first - last).mean() > 1.0


# ----------------------------------------------------------------------------- evaluate
@needs_gl
def test_evaluate_dataset_metadata_matches_the_report_and_replays(rollouts):
    task, folder, report = rollouts
    assert report.dataset == folder and check_dataset(folder) == []
    reader = DatasetReader(folder)
    assert [bool(e['success']) for e in reader.episodes] == \
        [r.success for r in report.episode_results]
    assert [e['failure'] for e in reader.episodes] == \
        [r.failure or '' for r in report.episode_results]
    assert [int(e['evaluation_episode']) for e in reader.episodes] == list(range(5))
    for e, meta in enumerate(reader.episodes):
        bad, _ = replay(task, meta, frames_of(reader, e))
        assert bad is None, f'episode {e}: frame {bad} differs from the replay'


def test_evaluate_without_cameras_writes_no_video(tmp_path):
    folder = str(tmp_path / 'plain')
    report = evaluate(load_task('reach'), 'zero', 2, 2, dataset=folder, cameras=[])
    assert check_dataset(folder) == []
    assert [bool(e['success']) for e in episodes_of(folder)] == \
        [r.success for r in report.episode_results] == [False, False]
    assert not os.path.exists(os.path.join(folder, 'videos'))


# ----------------------------------------------------------------------------- bad input
def _nothing_at(path):
    return not os.path.exists(path)


@pytest.mark.parametrize('fps', [0, -20, float('nan'), float('inf'), 'fast', 30.0, True])
def test_bad_fps_is_refused_before_anything_is_written(tmp_path, fps):
    folder = str(tmp_path / 'ds')
    with pytest.raises(DeviceError) as err:
        evaluate(load_task('reach'), 'zero', 2, dataset=folder, fps=fps, cameras=[])
    assert err.value.code == 'INVALID_ARGUMENT' and err.value.where == 'fps'
    assert _nothing_at(folder)


@pytest.mark.parametrize('cameras, code', [(['nope'], 'UNKNOWN_NAME'),
                                           ('overhead', 'INVALID_ARGUMENT'),
                                           (['overhead', 'overhead'], 'INVALID_ARGUMENT'),
                                           ([3], 'INVALID_ARGUMENT')])
def test_bad_cameras_are_refused_before_anything_is_written(tmp_path, cameras, code):
    folder = str(tmp_path / 'ds')
    with pytest.raises(DeviceError) as err:
        evaluate(load_task('reach'), 'zero', 2, dataset=folder, cameras=cameras)
    assert err.value.code == code
    assert _nothing_at(folder)


@pytest.mark.parametrize('episodes', [0, -1, 'many', 2.5, None])
def test_bad_episode_counts_are_refused_before_anything_is_written(tmp_path, episodes):
    folder = str(tmp_path / 'ds')
    with pytest.raises(DeviceError):
        dataset.generate(pick_place_task(), SCRIPT, episodes, folder, gripper='actuator8',
                         cameras=[])
    assert _nothing_at(folder)


@pytest.mark.parametrize('folder', ['', None, 3, '\x00bad'])
def test_bad_folder_values_are_refused(tmp_path, folder):
    with pytest.raises(DeviceError) as err:
        evaluate(load_task('reach'), 'zero', 2, dataset=folder if folder is not None else 0,
                 cameras=[])
    assert err.value.code == 'INVALID_ARGUMENT'


def test_an_existing_folder_that_is_not_a_dataset_is_refused_untouched(tmp_path):
    folder = tmp_path / 'mine'
    folder.mkdir()
    (folder / 'notes.txt').write_text('keep me')
    with pytest.raises(DeviceError):
        evaluate(load_task('reach'), 'zero', 2, dataset=str(folder), cameras=[])
    assert sorted(os.listdir(folder)) == ['notes.txt']
    assert (folder / 'notes.txt').read_text() == 'keep me'
    file = tmp_path / 'a_file'
    file.write_text('x')
    with pytest.raises(DeviceError):
        evaluate(load_task('reach'), 'zero', 2, dataset=str(file), cameras=[])
    assert file.read_text() == 'x'


def test_a_stopped_run_keeps_the_finished_episodes_only(tmp_path):
    folder = str(tmp_path / 'stopped')
    report = evaluate(load_task('reach'), 'random', 6, 2, dataset=folder, cameras=[],
                      progress=lambda done, total: done < 2)
    assert not report.completed
    eps = episodes_of(folder)
    assert check_dataset(folder) == []
    assert 1 <= len(eps) <= report.episodes_done < 6
    assert [int(e['evaluation_episode']) for e in eps] == list(range(len(eps)))


def test_a_policy_that_raises_mid_run_leaves_no_complete_looking_dataset(tmp_path):
    folder = str(tmp_path / 'broken')
    calls = []

    def flaky(obs):
        calls.append(1)
        if len(calls) > 30:
            raise RuntimeError('policy broke')
        return np.zeros((len(obs), 4))

    with pytest.raises(RuntimeError):
        evaluate(load_task('reach'), flaky, 4, 2, dataset=folder, cameras=[])
    assert check_dataset(folder) != [], 'an interrupted dataset reads as complete'


# ----------------------------------------------------------------------------- command lines
def test_evaluate_policy_cli_writes_a_dataset_and_refuses_dataset_options_without_one(
        tmp_path, capsys):
    from mujoco_hal_ros.tasks.cli import main
    folder = str(tmp_path / 'cli')
    assert main(['--task', 'reach', '--policy', 'zero', '--episodes', '2', '--envs', '2',
                 '--dataset', folder, '--cameras', '', '--json']) == 0
    report = json.loads(capsys.readouterr().out)
    assert report['dataset'] == folder and check_dataset(folder) == []
    assert [bool(e['success']) for e in episodes_of(folder)] == \
        [e['success'] for e in report['episode_results']]
    assert main(['--task', 'reach', '--policy', 'zero', '--fps', '50', '--json']) == 2
    assert json.loads(capsys.readouterr().out)['error']['code'] == 'INVALID_ARGUMENT'
    assert main(['--task', 'reach', '--policy', 'zero', '--dataset', str(tmp_path / 'x'),
                 '--fps', '0', '--json']) == 2
    assert json.loads(capsys.readouterr().out)['error']['where'] == 'fps'
    assert _nothing_at(str(tmp_path / 'x'))


def test_generate_dataset_cli_refuses_bad_input_with_exit_2(tmp_path, capsys):
    from mujoco_hal_ros.dataset.generate import main
    out = str(tmp_path / 'g')
    assert main(['--example', 'pick_place', '--out', out, '--episodes', '0', '--json']) == 2
    assert json.loads(capsys.readouterr().out)['error']['code'] == 'INVALID_ARGUMENT'
    assert main(['--example', 'pick_place', '--out', out, '--cameras', 'nope',
                 '--json']) == 2
    assert json.loads(capsys.readouterr().out)['error']['code'] == 'UNKNOWN_NAME'
    script = tmp_path / 'steps.yaml'
    script.write_text('- fly_to: {duration: 1}\n')
    assert main(['--task', 'reach', '--script', str(script), '--out', out, '--json']) == 2
    error = json.loads(capsys.readouterr().out)['error']
    assert error['code'] == 'INVALID_ARGUMENT' and error['where'] == 'script[0]'
    script.write_text('- wait: {duration: 1}\n')       # reach's actions are deltas
    assert main(['--task', 'reach', '--script', str(script), '--out', out, '--json']) == 2
    error = json.loads(capsys.readouterr().out)['error']
    assert error['code'] == 'INVALID_ARGUMENT' and error['where'] == 'task'
    assert _nothing_at(out)


@pytest.mark.parametrize('script, where', [
    ([], 'script'),
    ('move_to', 'script'),
    ([{'move_to': {'to': {'body': 'cube'}, 'duration': 0}}], 'script[0].move_to.duration'),
    ([{'move_to': {'to': {'body': 'cube'}, 'duration': float('nan')}}],
     'script[0].move_to.duration'),
    ([{'move_to': {'to': {'body': 'cube', 'point': [0, 0, 0]}, 'duration': 1}}],
     'script[0].move_to.to'),
    ([{'move_to': {'to': {'point': [0, 0]}, 'duration': 1}}], 'script[0].move_to.to.point'),
    ([{'gripper': {'value': 'shut', 'duration': 1}}], 'script[0].gripper.value'),
    ([{'wait': {'duration': 1, 'speed': 2}}], 'script[0].wait'),
    ([{'move_to': {'to': {'body': 'table'}, 'duration': 1}}], 'task.observation'),
    ([{'move_to': {'to': {'command': 'nope'}, 'duration': 1}}], 'task.observation'),
])
def test_bad_scripts_are_refused_naming_the_step(pick_place, script, where):
    from mujoco_hal_ros.dataset.generate_expert import ScriptedExpert
    with pytest.raises(DeviceError) as err:
        ScriptedExpert(pick_place, script, gripper='actuator8')
    assert err.value.code == 'INVALID_ARGUMENT' and err.value.where == where


def test_a_still_expert_fails_where_the_script_succeeds(pick_place, tmp_path):
    """The success the metadata records is the task's verdict, not the expert's claim:
    holding still leaves the cube where it was, and every episode fails at the horizon."""
    hold = [{'wait': {'duration': 1.0}}]
    report = dataset.generate(pick_place, hold, 2, str(tmp_path / 'still'), cameras=[],
                              gripper='actuator8')
    assert check_dataset(str(tmp_path / 'still')) == []
    assert [bool(e['success']) for e in episodes_of(str(tmp_path / 'still'))] == \
        [False, False]
    assert [e['failure'] for e in episodes_of(str(tmp_path / 'still'))] == \
        ['horizon', 'horizon'] == [r.failure for r in report.episode_results]


# ----------------------------------------------------------------------------- LeRobot
def test_lerobot_loads_the_generated_dataset(generated):
    """LeRobot's own loader (``test_dataset_lerobot``'s tier: skipped where PyTorch is not
    importable here nor in ``LEROBOT_PYTHON``) sees the frames our reader reads."""
    import subprocess

    from test_dataset_lerobot import HERE, PYTHON, WHY_NOT
    if PYTHON is None:
        pytest.skip(WHY_NOT)
    folder, report = generated
    proc = subprocess.run([PYTHON, os.path.join(HERE, 'lerobot_check.py'), folder,
                           'local/pick_place_panda', '-'], capture_output=True, text=True,
                          timeout=900, env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    reader = DatasetReader(folder)
    assert seen['num_episodes'] == EPISODES and seen['fps'] == reader.fps
    assert seen['num_frames'] == sum(r.steps for r in report.episode_results)
    states = np.concatenate([reader.frames(e)['observation.state'] for e in range(EPISODES)])
    actions = np.concatenate([reader.frames(e)['action'] for e in range(EPISODES)])
    np.testing.assert_array_equal(np.float32([i['state'] for i in seen['items']]), states)
    np.testing.assert_array_equal(np.float32([i['action'] for i in seen['items']]), actions)
    assert [i['episode_index'] for i in seen['items']] == [
        e for e in range(EPISODES) for _ in range(len(reader.frames(e)['action']))]
