"""LeRobotDataset v3.0 folders written from rendered frames of the bench arm, read back by
other libraries than the writer's own code paths.

The frames are real: the bench arm stepped along a commanded path, its overhead camera
rendered headless at two sizes. What was written is then read back with Hugging Face
``datasets`` (the library LeRobot's loader reads Parquet with), pandas, json and PyAV
directly, and compared with what went in: values, episode boundaries, tasks, statistics
against numpy's on the same frames, video frames against the rendered images within codec
error. ``check_dataset`` (the checker the other dataset tests use) must pass on the good
folder and name the fault in each corrupted copy, so it cannot pass by not looking.
"""

import json
import os
import shutil
import subprocess
import sys

import av
from dataset_frames import (
    CAMERAS,
    CODEC_ERROR,
    CRASH_WRITER,
    FPS,
    JOINTS,
    LENGTHS,
    render_run,
    TASKS,
    write,
)
import numpy as np
import pytest

from mujoco_hal_ros.dataset import (
    check_dataset,
    DatasetReader,
    DatasetWriter,
    features_for,
    read_dataset,
)

datasets = pytest.importorskip('datasets', reason='Hugging Face datasets '
                               '(requirements-test.txt) reads the Parquet back')

# LeRobot 0.4.4's info.json keys (create_empty_dataset_info) and its per-feature stats
INFO_KEYS = {'codebase_version', 'robot_type', 'total_episodes', 'total_frames',
             'total_tasks', 'chunks_size', 'data_files_size_in_mb', 'video_files_size_in_mb',
             'fps', 'splits', 'data_path', 'video_path', 'features'}
STATS = {'min', 'max', 'mean', 'std', 'count', 'q01', 'q10', 'q50', 'q90', 'q99'}


def lerobot_hf_features(features):
    """``datasets.Features`` from info.json features, by LeRobot's rule
    (get_hf_features_from_features): (1,) a Value, (n,) a List of length n, videos none."""
    out = {}
    for key, ft in features.items():
        if ft['dtype'] == 'video':
            continue
        if ft['shape'] == [1]:
            out[key] = datasets.Value(ft['dtype'])
        else:
            out[key] = datasets.Sequence(length=ft['shape'][0],
                                         feature=datasets.Value(ft['dtype']))
    return datasets.Features(out)


@pytest.fixture(scope='module')
def run():
    return render_run()


@pytest.fixture(scope='module')
def written(run, tmp_path_factory):
    root = tmp_path_factory.mktemp('ds') / 'bench_reach'
    summary = write(root, run)
    return root, summary


def test_checker_passes_and_summary_counts(written):
    root, summary = written
    assert check_dataset(root) == []
    assert summary['episodes'] == len(LENGTHS) and summary['frames'] == sum(LENGTHS)
    assert summary['complete'] is True
    assert sorted(os.listdir(root)) == ['data', 'meta', 'videos']


def test_info_json_as_lerobot_writes_it(written):
    root, _ = written
    info = json.loads((root / 'meta' / 'info.json').read_text())
    assert set(info) == INFO_KEYS
    assert info['codebase_version'] == 'v3.0' and info['fps'] == FPS
    assert info['robot_type'] == 'bench_arm'
    assert (info['total_episodes'], info['total_frames'], info['total_tasks']) == (
        len(LENGTHS), sum(LENGTHS), len(set(TASKS)))
    assert info['splits'] == {'train': f'0:{len(LENGTHS)}'}
    assert info['data_path'] == 'data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet'
    assert info['video_path'] == ('videos/{video_key}/chunk-{chunk_index:03d}/'
                                  'file-{file_index:03d}.mp4')
    features = info['features']
    assert list(features)[-5:] == ['timestamp', 'frame_index', 'episode_index', 'index',
                                   'task_index']
    assert features['observation.state']['names'] == JOINTS + [f'{j}.vel' for j in JOINTS]
    assert features['observation.state']['shape'] == [8]
    assert features['action'] == {'dtype': 'float32', 'shape': [4], 'names': JOINTS}
    for name, (h, w) in CAMERAS.items():
        ft = features[f'observation.images.{name}']
        assert ft['dtype'] == 'video' and ft['shape'] == [h, w, 3]
        assert ft['names'] == ['height', 'width', 'channels']
        assert ft['info']['video.codec'] == 'h264' and ft['info']['video.fps'] == FPS
        assert (ft['info']['video.height'], ft['info']['video.width']) == (h, w)
        assert ft['info']['video.pix_fmt'] == 'yuv420p'


def test_parquet_read_back_by_hugging_face_datasets(written, run):
    root, _ = written
    info = json.loads((root / 'meta' / 'info.json').read_text())
    files = sorted(str(p) for p in (root / 'data').glob('*/*.parquet'))
    ds = datasets.Dataset.from_parquet(files, features=lerobot_hf_features(info['features']))
    assert len(ds) == sum(LENGTHS)
    ds = ds.with_format('numpy')[:]          # every column as a numpy array
    state, action = ds['observation.state'], ds['action']
    want_state = np.concatenate([[f['observation.state'] for f in ep] for ep in run])
    want_action = np.concatenate([[f['action'] for f in ep] for ep in run])
    assert state.dtype == np.float32 and state.shape == (sum(LENGTHS), 8)
    np.testing.assert_array_equal(state, want_state.astype(np.float32))
    np.testing.assert_array_equal(action, want_action.astype(np.float32))
    np.testing.assert_array_equal(ds['index'], np.arange(sum(LENGTHS)))
    episode = np.concatenate([np.full(n, e) for e, n in enumerate(LENGTHS)])
    np.testing.assert_array_equal(ds['episode_index'], episode)
    frame = np.concatenate([np.arange(n) for n in LENGTHS])
    np.testing.assert_array_equal(ds['frame_index'], frame)
    np.testing.assert_allclose(ds['timestamp'], frame / FPS, atol=1e-6)
    tasks = sorted(set(TASKS), key=TASKS.index)
    np.testing.assert_array_equal(
        ds['task_index'], np.concatenate([np.full(n, tasks.index(TASKS[e]))
                                          for e, n in enumerate(LENGTHS)]))


def test_episodes_and_tasks_metadata(written):
    root, _ = written
    import pandas as pd
    tasks = pd.read_parquet(root / 'meta' / 'tasks.parquet')
    assert list(tasks.index) == ['reach left', 'reach right']
    assert list(tasks['task_index']) == [0, 1]
    eps = datasets.load_dataset('parquet', split='train', data_files=str(
        root / 'meta' / 'episodes' / 'chunk-000' / 'file-000.parquet'))
    assert eps['episode_index'] == [0, 1, 2]
    assert eps['length'] == list(LENGTHS)
    assert eps['tasks'] == [[t] for t in TASKS]
    bounds = np.cumsum((0,) + LENGTHS)
    assert eps['dataset_from_index'] == bounds[:-1].tolist()
    assert eps['dataset_to_index'] == bounds[1:].tolist()
    assert eps['success'] == [True, False, True]
    assert eps['failure'] == ['', 'timeout', '']
    assert eps['sim.initial_state'][1] == [1.0, 0.5, -1.0]
    for name in CAMERAS:
        key = f'videos/observation.images.{name}'
        start = np.array(eps[f'{key}/from_timestamp'])
        end = np.array(eps[f'{key}/to_timestamp'])
        np.testing.assert_allclose(start, bounds[:-1] / FPS, atol=1e-9)
        np.testing.assert_allclose(end, bounds[1:] / FPS, atol=1e-9)
        assert eps[f'{key}/file_index'] == [0, 0, 0]
    # per-episode stats columns as LeRobot flattens them: stats/<feature>/<stat>
    for feature in ('observation.state', 'action', 'timestamp', 'index',
                    'observation.images.overhead'):
        for stat in STATS:
            assert f'stats/{feature}/{stat}' in eps.column_names


def decode_all(path):
    """Every frame of an MP4 with its presentation time, by PyAV directly."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        out = [(float(f.pts * stream.time_base), f.to_ndarray(format='rgb24'))
               for f in container.decode(stream)]
    return np.array([t for t, _ in out]), np.stack([im for _, im in out])


def test_video_frames_match_the_rendered_images(written, run):
    root, _ = written
    eps = datasets.load_dataset('parquet', split='train', data_files=str(
        root / 'meta' / 'episodes' / 'chunk-000' / 'file-000.parquet'))
    compared = 0
    for name in CAMERAS:
        key = f'observation.images.{name}'
        times, frames = decode_all(root / 'videos' / key / 'chunk-000' / 'file-000.mp4')
        assert len(frames) == sum(LENGTHS)
        for e, episode in enumerate(run):
            start = eps[f'videos/{key}/from_timestamp'][e]
            want_t = start + np.arange(len(episode)) / FPS
            picked = [int(np.argmin(np.abs(times - t))) for t in want_t]
            assert np.abs(times[picked] - want_t).max() < 1e-4     # LeRobot's tolerance
            rendered = np.stack([f[key] for f in episode]).astype(np.int16)
            decoded = frames[picked].astype(np.int16)
            error = np.abs(decoded - rendered).mean(axis=(1, 2, 3))
            assert error.max() < CODEC_ERROR, (name, e, error)
            # each decoded frame is nearer its own render than the previous one (no shift),
            # on the pixels where the two renders differ clearly (the arm moved)
            for i in range(1, len(episode)):
                moved = np.abs(rendered[i] - rendered[i - 1]).max(axis=2) > 40
                if moved.sum() >= 20:
                    own = np.abs(decoded[i] - rendered[i])[moved].mean()
                    previous = np.abs(decoded[i] - rendered[i - 1])[moved].mean()
                    assert own < previous, (name, e, i, own, previous)
                    compared += 1
    assert compared >= 10


def test_stats_equal_numpy_on_the_frames(written, run):
    root, _ = written
    stats = json.loads((root / 'meta' / 'stats.json').read_text())
    reader = read_dataset(root)
    cols = {k: np.concatenate([reader.frames(e)[k] for e in range(len(LENGTHS))])
            for k in ('observation.state', 'action', 'timestamp', 'index')}
    for key, values in cols.items():
        values = values.reshape(len(values), -1).astype(np.float64)
        got = {k: np.array(v) for k, v in stats[key].items()}
        assert set(got) == STATS
        np.testing.assert_allclose(got['min'], values.min(axis=0), rtol=1e-6)
        np.testing.assert_allclose(got['max'], values.max(axis=0), rtol=1e-6)
        np.testing.assert_allclose(got['mean'], values.mean(axis=0), rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(got['std'], values.std(axis=0), rtol=1e-5, atol=1e-9)
        assert got['count'].tolist() == [sum(LENGTHS)]
        # count-weighted per-episode quantiles: within the spread of the per-episode ones
        per = [np.quantile(reader.frames(e)[key].reshape(LENGTHS[e], -1), 0.5, axis=0)
               for e in range(len(LENGTHS))]
        assert (got['q50'] >= np.min(per, axis=0) - 1e-6).all()
        assert (got['q50'] <= np.max(per, axis=0) + 1e-6).all()
    for name in CAMERAS:
        key = f'observation.images.{name}'
        images = np.stack([f[key] for ep in run for f in ep]).reshape(-1, 3) / 255.0
        got = {k: np.array(v) for k, v in stats[key].items()}
        assert got['mean'].shape == (3, 1, 1) and got['count'].tolist() == [sum(LENGTHS)]
        np.testing.assert_allclose(got['mean'].ravel(), images.mean(axis=0), rtol=1e-9)
        np.testing.assert_allclose(got['std'].ravel(), images.std(axis=0), rtol=1e-6)
        np.testing.assert_allclose(got['min'].ravel(), images.min(axis=0))
        np.testing.assert_allclose(got['max'].ravel(), images.max(axis=0))
        # per-episode image quantiles are exact; the dataset's are their weighted mean
        for e, episode in enumerate(run):
            px = np.stack([f[key] for f in episode]).reshape(-1, 3)
            ep_stats = reader.episode_stats(e)[key]
            want = np.quantile(px, 0.9, axis=0, method='inverted_cdf') / 255.0
            np.testing.assert_allclose(ep_stats['q90'].ravel(), want)


def test_reader_gives_back_what_was_written(written, run):
    root, _ = written
    with DatasetReader(root) as reader:
        assert reader.complete and reader.fps == FPS
        assert reader.tasks == ['reach left', 'reach right']
        assert [e['success'] for e in reader.episodes] == [True, False, True]
        frames = reader.frames(1)
        np.testing.assert_array_equal(
            frames['action'], np.array([f['action'] for f in run[1]], dtype=np.float32))
        video = reader.video_frames(2, 'overhead')
        rendered = np.stack([f['observation.images.overhead'] for f in run[2]])
        assert video.shape == rendered.shape
        assert np.abs(video.astype(int) - rendered).mean() < CODEC_ERROR


def test_append_keeps_earlier_episodes(written, run, tmp_path):
    root = tmp_path / 'appended'
    shutil.copytree(written[0], root)
    before = read_dataset(root).frames(0)
    summary = write(root, run[:1], first=3)
    assert summary['episodes'] == len(LENGTHS) + 1
    assert check_dataset(root) == []
    reader = read_dataset(root)
    after = reader.frames(0)
    for key in before:
        np.testing.assert_array_equal(before[key], after[key])
    last = reader.frames(3)
    assert last['index'][0] == sum(LENGTHS)
    video = reader.video_frames(3, 'overhead_wide')
    assert len(video) == LENGTHS[0]


def _corrupt_info(root):
    path = root / 'meta' / 'info.json'
    info = json.loads(path.read_text())
    info['total_frames'] += 1
    path.write_text(json.dumps(info))


def _corrupt_stats(root):
    path = root / 'meta' / 'stats.json'
    stats = json.loads(path.read_text())
    stats['action']['mean'][0] += 0.01
    path.write_text(json.dumps(stats))


def _corrupt_video_times(root):
    import pyarrow as pa
    import pyarrow.parquet as pq
    path = root / 'meta' / 'episodes' / 'chunk-000' / 'file-000.parquet'
    table = pq.read_table(path)
    name = 'videos/observation.images.overhead/from_timestamp'
    values = table.column(name).to_pylist()
    values[1] += 0.5 / FPS
    table = table.set_column(table.column_names.index(name), name, pa.array(values))
    pq.write_table(table, path)


def _drop_frame(root):
    import pyarrow.parquet as pq
    path = root / 'data' / 'chunk-000' / 'file-000.parquet'
    table = pq.read_table(path)
    pq.write_table(table.slice(0, table.num_rows - 1), path)


@pytest.mark.parametrize('corrupt, expect', [
    (_corrupt_info, 'info.json says'),
    (_corrupt_stats, 'stats.json action/mean'),
    (_corrupt_video_times, 'observation.images.overhead'),
    (_drop_frame, 'frames'),
    (lambda root: (root / 'INCOMPLETE').write_text('x'), 'INCOMPLETE'),
])
def test_checker_names_each_fault(written, tmp_path, corrupt, expect):
    root = tmp_path / 'bad'
    shutil.copytree(written[0], root)
    corrupt(root)
    problems = check_dataset(root)
    assert problems and any(expect in p for p in problems), problems


def test_crash_mid_episode_leaves_saved_episodes_readable_and_marked(tmp_path):
    root = tmp_path / 'crashed'
    proc = subprocess.run([sys.executable, '-c', CRASH_WRITER, str(root)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    problems = check_dataset(root)
    assert len(problems) == 1 and 'INCOMPLETE' in problems[0], problems
    reader = read_dataset(root)
    assert not reader.complete and len(reader.episodes) == 2
    assert len(reader.video_frames(1, 'cam')) == 6
    # opening it again appends; finalize completes it
    f = features_for(['a', 'b'], ['a', 'b'], {'cam': (32, 48)})
    with DatasetWriter(root, repo_id='t/crash', fps=10, features=f) as writer:
        assert writer.status.episode_index == 2 and writer.status.frames == 0
        summary = writer.finalize()
    assert summary['episodes'] == 2 and check_dataset(root) == []


def test_files_roll_over_past_their_size_limits(written, run, tmp_path):
    """Past data_files_size_in_mb / video_files_size_in_mb an episode starts file-001, as
    LeRobot's writer does; the episodes point at the right files and everything reads."""
    root = tmp_path / 'rolled'
    shutil.copytree(written[0], root)
    path = root / 'meta' / 'info.json'
    info = json.loads(path.read_text())
    info['data_files_size_in_mb'] = info['video_files_size_in_mb'] = 0.001
    path.write_text(json.dumps(info, indent=4))
    write(root, run[:2], first=3)
    assert check_dataset(root) == []
    reader = read_dataset(root)
    eps = reader.episodes
    assert [e['data/file_index'] for e in eps] == [0, 0, 0, 1, 2]
    assert [e['videos/observation.images.overhead/file_index'] for e in eps] == [0, 0, 0, 1, 2]
    assert eps[4]['videos/observation.images.overhead/from_timestamp'] == 0.0
    assert (root / 'data' / 'chunk-000' / 'file-002.parquet').is_file()
    frames = reader.frames(4)
    np.testing.assert_array_equal(frames['action'],
                                  np.array([f['action'] for f in run[1]], dtype=np.float32))
    video = reader.video_frames(4, 'overhead')
    rendered = np.stack([f['observation.images.overhead'] for f in run[1]])
    assert video.shape == rendered.shape
    assert np.abs(video.astype(int) - rendered).mean() < CODEC_ERROR


def test_the_doc_example_runs_and_prints_what_it_says(tmp_path):
    from doc_snippets import blocks, ROOT, run_python
    page = os.path.join(ROOT, 'doc', 'datasets.md')
    (block,) = [b for b in blocks(page, lang='python') if 'DatasetWriter(' in b.body]
    code, out = run_python(block.body, cwd=str(tmp_path))
    assert code == 0, out
    assert out.strip().split('\n')[-2:] == ['2 episodes', '[] (30, 2)'], out
    assert check_dataset(tmp_path / 'demos') == []


def test_a_dataset_without_cameras(tmp_path):
    """No cameras, use_videos=False: video_path is null as LeRobot writes it, and frame
    timestamps may be the simulation's own (no video frame to match)."""
    root = tmp_path / 'states'
    features = features_for(JOINTS, JOINTS)
    rng = np.random.default_rng(5)
    stamps = np.cumsum(rng.uniform(0.03, 0.05, size=12)) - 0.03
    with DatasetWriter(root, repo_id='t/states', fps=FPS, features=features,
                       use_videos=False) as writer:
        for t in stamps:
            writer.add_frame({'observation.state': rng.normal(size=4),
                              'action': rng.normal(size=4)}, timestamp=float(t))
        writer.save_episode('wander')
        writer.finalize()
    assert check_dataset(root) == []
    info = json.loads((root / 'meta' / 'info.json').read_text())
    assert info['video_path'] is None and not (root / 'videos').exists()
    np.testing.assert_allclose(read_dataset(root).frames(0)['timestamp'],
                               stamps.astype(np.float32))
