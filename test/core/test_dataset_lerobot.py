"""Our datasets loaded by LeRobot's own loader (``LeRobotDataset``), offline.

LeRobot's dataset code imports PyTorch, which the package never installs (PyPI's build
pulls gigabytes of CUDA libraries), so the loader runs under whichever Python has it:
this one when ``torch`` and ``ledataset`` (``pip install lerobot-dataset==0.4.4``) import
here, else the one named by ``LEROBOT_PYTHON``; without either the tier is skipped with
that reason. ``lerobot_check.py`` loads the folder there and reports; every judgement is
made here, against the rendered frames that were written: features, shapes, dtypes, fps,
frame counts, episode boundaries (a window reaching before an episode's first frame is
padding), statistics, and the video frames LeRobot decodes at each frame's timestamp.
"""

import importlib.util
import json
import os
import subprocess
import sys

from dataset_frames import (
    CAMERAS,
    CODEC_ERROR,
    CRASH_WRITER,
    FPS,
    JOINTS,
    LENGTHS,
    render_run,
    REPO_ID,
    TASKS,
    write,
)
import numpy as np
import pytest

from mujoco_hal_ros.dataset import read_dataset

HERE = os.path.dirname(os.path.abspath(__file__))


def lerobot_python():
    """(python, None) for an interpreter with torch and ledataset, or (None, why not)."""
    if importlib.util.find_spec('torch') and importlib.util.find_spec('ledataset'):
        return sys.executable, None
    other = os.environ.get('LEROBOT_PYTHON')
    if not other:
        return None, ('LeRobot\'s loader needs PyTorch, not importable here: pip install '
                      'torch lerobot-dataset==0.4.4, or set LEROBOT_PYTHON to a Python '
                      'that has them')
    probe = subprocess.run([other, '-c', 'import torch, ledataset'], capture_output=True,
                           text=True, timeout=300)
    if probe.returncode:
        return None, f'LEROBOT_PYTHON={other} cannot import torch and ledataset: ' + (
            probe.stderr.strip().splitlines() or ['?'])[-1]
    return other, None


PYTHON, WHY_NOT = lerobot_python()
pytestmark = pytest.mark.skipif(PYTHON is None, reason=WHY_NOT or '')


@pytest.fixture(scope='module')
def run():
    return render_run()


@pytest.fixture(scope='module', params=['one file', 'files rolled over, appended'])
def loaded(request, run, tmp_path_factory):
    root = tmp_path_factory.mktemp('lerobot') / 'bench_reach'
    if request.param == 'one file':
        write(root, run)
    else:
        # two episodes, then past tiny size limits the third starts new data and video
        # files, appended by a second writer: LeRobot follows each episode to its files
        write(root, run[:2])
        info_path = root / 'meta' / 'info.json'
        info = json.loads(info_path.read_text())
        info['data_files_size_in_mb'] = info['video_files_size_in_mb'] = 0.001
        info_path.write_text(json.dumps(info, indent=4))
        write(root, run[2:], first=2)
        episodes = read_dataset(root).episodes
        assert [e['data/file_index'] for e in episodes] == [0, 0, 1]
    images, index = {}, 0
    for episode in run:
        for frame in episode:
            for name in CAMERAS:
                key = f'observation.images.{name}'
                images[f'{key}/{index}'] = frame[key]
            index += 1
    npz = root.parent / 'frames.npz'
    np.savez(npz, **images)
    proc = subprocess.run([PYTHON, os.path.join(HERE, 'lerobot_check.py'), str(root),
                           REPO_ID, str(npz)], capture_output=True, text=True, timeout=900,
                          env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    info = json.loads((root / 'meta' / 'info.json').read_text())
    stats = json.loads((root / 'meta' / 'stats.json').read_text())
    return run, report, info, stats


def test_features_fps_and_counts(loaded):
    run, report, info, _ = loaded
    assert report['fps'] == FPS
    assert report['num_frames'] == report['len'] == sum(LENGTHS)
    assert report['num_episodes'] == len(LENGTHS)
    assert report['features'] == {k: {'dtype': v['dtype'], 'shape': v['shape']}
                                  for k, v in info['features'].items()}
    assert sorted(report['camera_keys']) == sorted(f'observation.images.{n}' for n in CAMERAS)


def test_episode_boundaries_and_tasks(loaded):
    run, report, _, _ = loaded
    bounds = np.cumsum((0,) + LENGTHS).tolist()
    assert [(e['from'], e['to'], e['length']) for e in report['episodes']] == [
        (bounds[i], bounds[i + 1], LENGTHS[i]) for i in range(len(LENGTHS))]
    assert [e['tasks'] for e in report['episodes']] == [[t] for t in TASKS]
    items = report['items']
    assert [i['index'] for i in items] == list(range(sum(LENGTHS)))
    assert [i['episode_index'] for i in items] == [
        e for e, n in enumerate(LENGTHS) for _ in range(n)]
    assert [i['frame_index'] for i in items] == [f for n in LENGTHS for f in range(n)]
    assert [i['task'] for i in items] == [TASKS[e] for e, n in enumerate(LENGTHS)
                                          for _ in range(n)]
    # one step back from an episode's first frame is padding, never the previous episode
    for window, episode in zip(report['windows'], run, strict=True):
        assert window['action_is_pad'] == [True, False]
        np.testing.assert_allclose(window['action'][1],
                                   np.float32(episode[0]['action']), rtol=0, atol=0)
        h, w = CAMERAS['overhead']
        assert window['video_shape'] == [2, 3, h, w]


def test_values_dtypes_and_shapes(loaded):
    run, report, _, _ = loaded
    frames = [f for episode in run for f in episode]
    for item, frame in zip(report['items'], frames, strict=True):
        np.testing.assert_array_equal(np.float32(item['state']),
                                      frame['observation.state'].astype(np.float32))
        np.testing.assert_array_equal(np.float32(item['action']),
                                      frame['action'].astype(np.float32))
        assert item['dtypes']['observation.state'] == 'torch.float32'
        assert item['shapes']['observation.state'] == [len(JOINTS) * 2]
        assert item['shapes']['action'] == [len(JOINTS)]
        assert abs(item['timestamp'] - item['frame_index'] / FPS) < 1e-6
        for name, (h, w) in CAMERAS.items():
            key = f'observation.images.{name}'
            assert item['dtypes'][key] == 'torch.float32'
            assert item['shapes'][key] == [3, h, w]


def test_video_frames_are_the_rendered_ones(loaded):
    run, report, _, _ = loaded
    for item in report['items']:
        for key, error in item['image_error'].items():
            assert error < CODEC_ERROR, (item['index'], key, error)
    # LeRobot picked each frame's own image, not the previous one: on the pixels where the
    # two renders differ clearly, the decoded frame is nearer its own
    moved = [pair for item in report['items'] for pair in item.get('moved', {}).values()]
    assert len(moved) >= 10
    assert all(own < previous for own, previous in moved), moved


def test_stats_as_lerobot_reads_them(loaded):
    run, report, _, stats = loaded
    assert set(report['stats']) == set(stats)
    for key, feature in stats.items():
        for name, value in feature.items():
            np.testing.assert_allclose(report['stats'][key][name], value)
    actions = np.array([f['action'] for episode in run for f in episode], dtype=np.float32)
    np.testing.assert_allclose(report['stats']['action']['mean'],
                               actions.astype(np.float64).mean(axis=0), rtol=1e-6)


def test_episodes_saved_before_a_crash_load(tmp_path):
    """Killed mid-episode (marked INCOMPLETE): LeRobot loads the two saved episodes."""
    root = tmp_path / 'crashed'
    proc = subprocess.run([sys.executable, '-c', CRASH_WRITER, str(root)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert (root / 'INCOMPLETE').exists()
    proc = subprocess.run([PYTHON, os.path.join(HERE, 'lerobot_check.py'), str(root),
                           't/crash', '-'], capture_output=True, text=True, timeout=900,
                          env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (report['num_episodes'], report['num_frames']) == (2, 12)
    assert [(e['from'], e['to']) for e in report['episodes']] == [(0, 6), (6, 12)]
    assert [i['frame_index'] for i in report['items']] == list(range(6)) * 2
    assert all(i['shapes']['observation.images.cam'] == [3, 32, 48] for i in report['items'])


def test_same_files_as_lerobots_own_writer(run, tmp_path):
    """The same frames through LeRobot's writer and ours: the same info.json, the same
    Parquet columns in the same order and types, the same statistics (but camera std,
    which LeRobot 0.4.4 gets wrong: uint8 squares overflow, lerobot#3682)."""
    import pyarrow.parquet as pq
    ours, theirs = tmp_path / 'ours', tmp_path / 'theirs'
    write(ours, run)
    features = {k: v for k, v in json.loads((ours / 'meta' / 'info.json').read_text())[
        'features'].items() if k not in ('timestamp', 'frame_index', 'episode_index', 'index',
                                         'task_index')}
    for spec in features.values():
        spec.pop('info', None)
    arrays, index = {}, 0
    for episode in run:
        for frame in episode:
            for key in features:
                value = frame[key]
                arrays[f'{key}/{index}'] = (value if features[key]['dtype'] == 'video'
                                            else np.asarray(value, dtype=np.float32))
            index += 1
    npz = tmp_path / 'frames.npz'
    np.savez(npz, features=json.dumps(features), lengths=np.array(LENGTHS),
             tasks=np.array(TASKS), **arrays)
    proc = subprocess.run([PYTHON, os.path.join(HERE, 'lerobot_write.py'), str(theirs),
                           REPO_ID, str(FPS), str(npz)], capture_output=True, text=True,
                          timeout=900, env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    assert proc.returncode == 0, proc.stderr[-4000:]
    info = [json.loads((r / 'meta' / 'info.json').read_text()) for r in (ours, theirs)]
    for one in info:        # the codec is ours to choose (H.264: dataset/video.py says why)
        for spec in one['features'].values():
            (spec.get('info') or {}).pop('video.codec', None)
    assert info[0] == info[1]
    for rel in ('data/chunk-000/file-000.parquet', 'meta/episodes/chunk-000/file-000.parquet',
                'meta/tasks.parquet'):
        a, b = (pq.read_schema(r / rel) for r in (ours, theirs))
        extra = ('success', 'failure', 'sim.')          # our extra episode columns
        assert [(f.name, str(f.type)) for f in a if not f.name.startswith(extra)] == [
            (f.name, str(f.type)) for f in b], rel
    meta = [json.loads(pq.read_schema(r / 'data/chunk-000/file-000.parquet')
                       .metadata[b'huggingface'])['info'] for r in (ours, theirs)]
    assert meta[0] == meta[1]
    stats = [json.loads((r / 'meta' / 'stats.json').read_text()) for r in (ours, theirs)]
    assert set(stats[0]) == set(stats[1])
    for key, feature in stats[1].items():
        assert list(stats[0][key]) == list(feature), key
        for name, value in feature.items():
            if features.get(key, {}).get('dtype') == 'video' and name == 'std':
                continue
            np.testing.assert_allclose(stats[0][key][name], value, rtol=1e-5, atol=2e-3,
                                       err_msg=f'{key}/{name}')
    frames = [pq.read_table(r / 'data/chunk-000/file-000.parquet') for r in (ours, theirs)]
    assert frames[0].equals(frames[1].replace_schema_metadata(frames[0].schema.metadata))
