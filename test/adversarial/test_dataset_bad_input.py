"""Bad input to the dataset writer: refused with the standard codes, nothing half-written.

Each refusal is a ``DeviceError`` with its code (never a raw exception) and leaves the
folder as it was: a non-dataset folder keeps exactly its files, a refused frame adds
nothing to the episode, a refused append leaves a finished dataset finished. A full disk
is a real one: the kernel's file size limit (RLIMIT_FSIZE) in a child process makes
every write past it fail with EFBIG, as ENOSPC would.
"""

import hashlib
import json
import math
import os
import subprocess
import sys
import textwrap

from hypothesis import given, strategies as st
import numpy as np
import pytest

from mujoco_hal_ros.dataset import check_dataset, DatasetWriter, features_for, read_dataset
from mujoco_hal_ros.errors import (
    BUSY,
    CLOSED,
    CONFIG_ERROR,
    DeviceError,
    INVALID_ARGUMENT,
    LIMIT_EXCEEDED,
    UNKNOWN_NAME,
)

CAM = (32, 48)
FEATURES = features_for(['a', 'b'], ['a', 'b'], {'cam': CAM})


def frame(rng=None, **override):
    rng = rng or np.random.default_rng(0)
    out = {'observation.state': rng.normal(size=2), 'action': rng.normal(size=2),
           'observation.images.cam': rng.integers(0, 255, CAM + (3,), dtype=np.uint8)}
    out.update(override)
    return out


def snapshot(root):
    """Every file under root with its content hash."""
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, 'rb') as f:
                out[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def refused(code, fn, *args, **kw):
    with pytest.raises(DeviceError) as err:
        fn(*args, **kw)
    assert err.value.code == code, err.value
    return err.value


@pytest.fixture
def writer(tmp_path):
    with DatasetWriter(tmp_path / 'ds', repo_id='t/bad', fps=10, features=FEATURES) as w:
        yield w


def finished(tmp_path, name='done'):
    root = tmp_path / name
    with DatasetWriter(root, repo_id='t/done', fps=10, features=FEATURES) as w:
        for _ in range(3):
            w.add_frame(frame())
        w.save_episode('task')
        w.finalize()
    return root


def test_existing_non_dataset_folder_is_refused_and_untouched(tmp_path):
    root = tmp_path / 'photos'
    root.mkdir()
    (root / 'holiday.jpg').write_bytes(b'not a dataset')
    (root / 'meta').mkdir()
    before = snapshot(root)
    err = refused(INVALID_ARGUMENT, DatasetWriter, root, repo_id='t/x', fps=10,
                  features=FEATURES)
    assert 'not a LeRobot dataset' in str(err)
    assert snapshot(root) == before and sorted(os.listdir(root)) == ['holiday.jpg', 'meta']
    (tmp_path / 'file').write_text('x')
    refused(INVALID_ARGUMENT, DatasetWriter, tmp_path / 'file', repo_id='t/x', fps=10,
            features=FEATURES)


@pytest.mark.parametrize('fps', [0, -30, float('nan'), float('inf'), True, np.bool_(True),
                                 '30', None, 1e9])
def test_bad_fps_is_refused_before_any_write(tmp_path, fps):
    refused(INVALID_ARGUMENT, DatasetWriter, tmp_path / 'ds', repo_id='t/x', fps=fps,
            features=FEATURES)
    assert not (tmp_path / 'ds').exists()


@pytest.mark.parametrize('kw', [
    {'features': {}}, {'features': 'state'},
    {'features': {'observation.state': {'dtype': 'float32', 'shape': (0,), 'names': None}}},
    {'features': {'timestamp': {'dtype': 'float32', 'shape': (1,), 'names': None}}},
    {'features': {'a/b': {'dtype': 'float32', 'shape': (1,), 'names': None}}},
    {'features': {'x': {'dtype': 'complex64', 'shape': (1,), 'names': None}}},
    {'features': {'x': {'dtype': 'float32', 'shape': (2,), 'names': ['a']}}},
    {'features': {'observation.images.c': {'dtype': 'video', 'shape': (33, 48, 3),
                                           'names': None}}},
    {'use_videos': False},
    {'repo_id': ''}, {'repo_id': None}, {'robot_type': 3},
])
def test_bad_construction_is_refused(tmp_path, kw):
    args = {'repo_id': 't/x', 'fps': 10, 'features': FEATURES, **kw}
    refused(INVALID_ARGUMENT, DatasetWriter, tmp_path / 'ds', **args)
    assert not (tmp_path / 'ds').exists()


@pytest.mark.parametrize('names, cameras', [
    ([], {}), (['a', 'a'], {}), (['a', 1], {}), (['a'], {'c': (31, 48)}),
    (['a'], {'c': (0, 48)}), (['a'], {'c': (True, 48)}), (['a'], {'c/d': (32, 48)}),
    (['a'], {'c': 32}), (['a'], 'cam'),
])
def test_features_for_refuses_bad_names_and_sizes(names, cameras):
    refused(INVALID_ARGUMENT, features_for, names, ['a'], cameras)


def test_unknown_feature_is_unknown_name(writer):
    err = refused(UNKNOWN_NAME, writer.add_frame, frame(**{'observation.images.side': 0}))
    assert 'observation.images.side' in str(err)
    assert writer.status.frames == 0


@pytest.mark.parametrize('override', [
    {'observation.state': np.array([np.nan, 0.0])},
    {'observation.state': np.array([0.0, np.inf])},
    {'observation.state': np.zeros(3)},
    {'observation.state': np.zeros((2, 1))},
    {'observation.state': np.array([True, False])},
    {'observation.state': 'ab'},
    {'observation.state': None},
    {'observation.state': np.array([1e300, 0.0])},
    {'observation.state': np.array(['1', '2'])},
    {'action': np.array([1 + 2j, 0])},
    {'observation.images.cam': np.zeros((31, 48, 3), np.uint8)},
    {'observation.images.cam': np.zeros((48, 32, 3), np.uint8)},
    {'observation.images.cam': np.zeros(CAM + (4,), np.uint8)},
    {'observation.images.cam': np.zeros(CAM + (3,), np.float32)},
    {'observation.images.cam': [[0]]},
])
def test_bad_frame_is_refused_and_adds_nothing(writer, override):
    writer.add_frame(frame())
    refused(INVALID_ARGUMENT, writer.add_frame, frame(**override))
    assert writer.status.frames == 1
    writer.add_frame(frame())
    assert writer.save_episode('t') == 0
    assert len(read_dataset(writer.root).frames(0)['index']) == 2


def test_missing_feature_and_not_a_mapping(writer):
    bad = frame()
    del bad['action']
    refused(INVALID_ARGUMENT, writer.add_frame, bad)
    refused(INVALID_ARGUMENT, writer.add_frame, [1, 2])
    assert writer.status.frames == 0


@pytest.mark.parametrize('stamp', [float('nan'), -1.0, True, '0', 0.05])
def test_bad_timestamp_is_refused(writer, stamp):
    writer.add_frame(frame(), timestamp=0.0)
    refused(INVALID_ARGUMENT, writer.add_frame, frame(), timestamp=stamp)
    assert writer.status.frames == 1


def test_save_discard_and_finalize_without_frames(writer):
    refused(INVALID_ARGUMENT, writer.save_episode, 'task')
    refused(INVALID_ARGUMENT, writer.finalize)          # a stop without a start
    writer.add_frame(frame())
    refused(INVALID_ARGUMENT, writer.finalize)          # unsaved frames: save or discard
    writer.discard_episode()
    assert writer.status.frames == 0
    refused(INVALID_ARGUMENT, writer.save_episode, 'task')


@pytest.mark.parametrize('task, extra', [
    ('', None), (None, None), (3, None), ('x' * 20_000, None),
    ('t', {'success': float('nan')}), ('t', {'episode_index': 3}),
    ('t', {'stats/x': 1}), ('t', {'videos/x': 1}), ('t', {'x': [[1.0]]}),
    ('t', {'x': [1.0, 'a']}), ('t', {'x': object()}), ('t', {3: 1}), ('t', 'success'),
])
def test_bad_task_or_extra_is_refused_and_episode_kept(writer, task, extra):
    writer.add_frame(frame())
    refused(INVALID_ARGUMENT, writer.save_episode, task, extra=extra)
    assert writer.status.frames == 1
    assert writer.save_episode('fine', extra={'success': True}) == 0


def test_extra_column_type_is_kept_across_episodes(writer):
    writer.add_frame(frame())
    writer.save_episode('t', extra={'success': True, 'score': 1})
    writer.add_frame(frame())
    refused(INVALID_ARGUMENT, writer.save_episode, 't', extra={'success': 'yes'})
    assert writer.save_episode('t', extra={'success': False, 'score': 0.5}) == 1
    writer.finalize()
    assert [e['success'] for e in read_dataset(writer.root).episodes] == [True, False]


def test_use_after_close_or_finalize_is_closed(tmp_path):
    w = DatasetWriter(tmp_path / 'ds', repo_id='t/x', fps=10, features=FEATURES)
    w.add_frame(frame())
    w.save_episode('t')
    w.finalize()
    for call in (lambda: w.add_frame(frame()), lambda: w.save_episode('t'), w.finalize,
                 w.discard_episode, lambda: w.status):
        refused(CLOSED, call)
    w.close()                                             # idempotent
    assert check_dataset(tmp_path / 'ds') == []
    w2 = DatasetWriter(tmp_path / 'empty', repo_id='t/x', fps=10, features=FEATURES)
    w2.close()
    refused(CLOSED, w2.add_frame, frame())
    assert not (tmp_path / 'empty').exists()             # nothing saved: nothing left


def test_close_mid_episode_leaves_saved_episodes_marked_incomplete(tmp_path):
    root = tmp_path / 'ds'
    with DatasetWriter(root, repo_id='t/x', fps=10, features=FEATURES) as w:
        w.add_frame(frame())
        w.save_episode('t')
        w.add_frame(frame())                              # never saved
    problems = check_dataset(root)
    assert len(problems) == 1 and 'INCOMPLETE' in problems[0]
    reader = read_dataset(root)
    assert not reader.complete and len(reader.episodes) == 1


def test_append_with_other_features_or_fps_leaves_dataset_untouched(tmp_path):
    root = finished(tmp_path)
    before = snapshot(root)
    other = features_for(['a', 'b', 'c'], ['a', 'b'], {'cam': CAM})
    refused(CONFIG_ERROR, DatasetWriter, root, repo_id='t/x', fps=10, features=other)
    refused(CONFIG_ERROR, DatasetWriter, root, repo_id='t/x', fps=20, features=FEATURES)
    assert snapshot(root) == before
    assert check_dataset(root) == []


def test_second_writer_on_one_folder_is_busy(tmp_path):
    with DatasetWriter(tmp_path / 'ds', repo_id='t/x', fps=10, features=FEATURES) as w:
        w.add_frame(frame())
        w.save_episode('t')
        refused(BUSY, DatasetWriter, tmp_path / 'ds', repo_id='t/x', fps=10,
                features=FEATURES)
        w.add_frame(frame())
        w.save_episode('t')
        w.finalize()
    assert check_dataset(tmp_path / 'ds') == []


_hostile = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5),
    st.lists(st.floats(), max_size=4), st.lists(st.booleans(), max_size=3),
    st.builds(np.array, st.lists(st.floats(width=32), min_size=2, max_size=2)),
    st.builds(np.array, st.lists(st.integers(-2 ** 70, 2 ** 70), min_size=2, max_size=2)))


@given(state=_hostile, action=_hostile)
def test_hostile_numbers_never_escape_as_raw_errors(tmp_path_factory, state, action):
    root = tmp_path_factory.mktemp('hostile') / 'ds'
    with DatasetWriter(root, repo_id='t/x', fps=10, features=FEATURES) as w:
        f = frame(**{'observation.state': state, 'action': action})
        try:
            w.add_frame(f)
        except DeviceError as err:
            assert err.code in (INVALID_ARGUMENT, UNKNOWN_NAME)
            assert w.status.frames == 0
            return
        s = np.asarray(state, dtype=np.float64)
        assert s.shape == (2,) and np.isfinite(s).all()
        w.save_episode('t')
        got = read_dataset(root).frames(0)['observation.state'][0]
        np.testing.assert_array_equal(got, s.astype(np.float32))


FULL_DISK = textwrap.dedent('''
    import json, os, resource, signal, sys
    import numpy as np
    from mujoco_hal_ros.dataset import DatasetWriter, features_for
    from mujoco_hal_ros.errors import DeviceError
    root = sys.argv[1]
    rng = np.random.default_rng(1)
    f = features_for(['a', 'b'], ['a', 'b'], {'cam': (64, 96)})
    def frame():
        return {'observation.state': rng.normal(size=2), 'action': rng.normal(size=2),
                'observation.images.cam': rng.integers(0, 255, (64, 96, 3), np.uint8)}
    w = DatasetWriter(root, repo_id='t/full', fps=10, features=f)
    for _ in range(5):
        w.add_frame(frame())
    w.save_episode('first')
    largest = max(os.path.getsize(os.path.join(d, n))
                  for d, _, files in os.walk(root) for n in files)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # EFBIG instead of a kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (largest + 4096, resource.RLIM_INFINITY))
    report = {'where': None}
    try:
        for _ in range(40):
            w.add_frame(frame())
        report['where'] = 'save'
        w.save_episode('second')
        report['code'] = 'saved'
    except DeviceError as err:
        report['code'], report['message'] = err.code, str(err)
        report['frames_after'] = w.status.frames
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
    if report.get('frames_after'):
        report['saved_after_freeing'] = w.save_episode('second')
    else:
        for _ in range(3):
            w.add_frame(frame())
        report['saved_after_freeing'] = w.save_episode('second')
    report['summary'] = w.finalize()
    print(json.dumps(report))
''')


def test_full_disk_refuses_and_keeps_previous_episodes(tmp_path):
    root = tmp_path / 'full'
    proc = subprocess.run([sys.executable, '-c', FULL_DISK, str(root)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report['code'] == LIMIT_EXCEEDED, report
    assert 'full' in report['message']
    # a camera file that cannot be finished loses the episode (said so); a refused save
    # of whole files keeps it to retry
    assert (report['frames_after'] == 0) == ('discarded' in report['message']), report
    assert report['frames_after'] in (0, 40)
    assert report['saved_after_freeing'] == 1
    assert report['summary']['episodes'] == 2
    assert check_dataset(root) == []
    reader = read_dataset(root)
    assert [e['length'] for e in reader.episodes][0] == 5
    assert math.isclose(reader.episodes[1]['videos/observation.images.cam/from_timestamp'],
                        0.5)


def test_opening_a_finished_dataset_and_closing_leaves_it_finished(tmp_path):
    root = finished(tmp_path)
    with DatasetWriter(root, repo_id='t/done', fps=10, features=FEATURES) as w:
        assert (root / 'INCOMPLETE').exists()           # marked while open
        w.add_frame(frame())                            # never saved
    assert not (root / 'INCOMPLETE').exists()
    assert check_dataset(root) == []


def test_a_damaged_dataset_is_refused_and_left_as_found(tmp_path):
    root = finished(tmp_path)
    path = root / 'meta' / 'episodes' / 'chunk-000' / 'file-000.parquet'
    path.write_bytes(path.read_bytes()[:100])
    before = snapshot(root)
    err = refused(CONFIG_ERROR, DatasetWriter, root, repo_id='t/done', fps=10,
                  features=FEATURES)
    assert 'damaged' in str(err)
    assert snapshot(root) == before
    assert check_dataset(root)                          # and the checker says so too


@pytest.fixture
def tiny_disk(tmp_path):
    """A 4 MiB tmpfs: a real full disk (ENOSPC). Needs root; skipped elsewhere."""
    if os.geteuid() != 0:
        pytest.skip('mounting a tmpfs needs root; the RLIMIT_FSIZE test covers a full disk')
    mount = tmp_path / 'disk'
    mount.mkdir()
    proc = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', str(mount)],
                          capture_output=True, text=True)
    if proc.returncode:
        pytest.skip(f'cannot mount a tmpfs here: {proc.stderr.strip()}')
    try:
        yield mount
    finally:
        subprocess.run(['umount', str(mount)], capture_output=True)


def test_a_really_full_disk_keeps_saved_episodes(tiny_disk):
    root = tiny_disk / 'ds'
    rng = np.random.default_rng(2)
    big = features_for(['a', 'b'], ['a', 'b'], {'cam': (64, 96)})

    def noisy():
        return {'observation.state': rng.normal(size=2), 'action': rng.normal(size=2),
                'observation.images.cam': rng.integers(0, 255, (64, 96, 3), np.uint8)}

    with DatasetWriter(root, repo_id='t/full', fps=10, features=big) as w:
        for _ in range(5):
            w.add_frame(noisy())
        w.save_episode('first')
        saved = snapshot(root / 'data') | snapshot(root / 'videos')
        stat = os.statvfs(tiny_disk)
        filler = tiny_disk / 'filler'
        filler.write_bytes(b'\0' * (stat.f_bavail * stat.f_frsize - 16_384))
        with pytest.raises(DeviceError) as err:
            for _ in range(60):
                w.add_frame(noisy())
            w.save_episode('second')
        assert err.value.code == LIMIT_EXCEEDED and 'full' in str(err.value)
        # the saved episode is as it was, and the folder says it is incomplete
        assert snapshot(root / 'data') | snapshot(root / 'videos') == saved
        problems = check_dataset(root)
        assert len(problems) == 1 and 'INCOMPLETE' in problems[0], problems
        assert len(read_dataset(root).episodes) == 1
        filler.unlink()                                  # space freed: carry on
        if w.status.frames == 0:                         # the episode was discarded
            for _ in range(5):
                w.add_frame(noisy())
        assert w.save_episode('second') == 1
        w.finalize()
    assert check_dataset(root) == []
