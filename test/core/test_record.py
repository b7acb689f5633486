"""rosbag2 recording and camera video, read back with independent readers.

``rosbags`` (its own MCAP and metadata.yaml parser) stands in for ``ros2 bag``; ``mcap_ros2``
decodes each file from its schemas alone, as Foxglove does; PyAV decodes the MP4s.
"""

import errno
import os

import numpy as np
import pytest
import yaml

from mujoco_hal_ros.errors import ConfigError
from mujoco_hal_ros.record import BagWriter, qos_dict, Recorder, VideoRecorder
from mujoco_hal_ros.record.msgdef import message_definition

rosbags = pytest.importorskip('rosbags')
from rosbags.rosbag2 import Reader  # noqa: E402
from rosbags.typesys import get_typestore, Stores  # noqa: E402

TS = get_typestore(Stores.ROS2_JAZZY)
JS = 'sensor_msgs/msg/JointState'
CLOCK = 'rosgraph_msgs/msg/Clock'


def joint_state(i):
    Time = TS.types['builtin_interfaces/msg/Time']
    Header = TS.types['std_msgs/msg/Header']
    msg = TS.types[JS](header=Header(stamp=Time(sec=i // 100, nanosec=(i % 100) * 10_000_000),
                                     frame_id=''),
                       name=['pan', 'lift'], position=np.array([0.001 * i, -0.5]),
                       velocity=np.array([0.1, 0.2]), effort=np.array([], dtype=np.float64))
    return TS.serialize_cdr(msg, JS)


def clock(i):
    Time = TS.types['builtin_interfaces/msg/Time']
    return TS.serialize_cdr(TS.types[CLOCK](clock=Time(sec=i, nanosec=7)), CLOCK)


def read_back(path):
    """topic -> [raw bytes], and the reader's topic -> msgtype map."""
    out, types = {}, {}
    with Reader(path) as reader:
        for conn in reader.connections:
            types[conn.topic] = conn.msgtype
        for conn, _t, raw in reader.messages():
            out.setdefault(conn.topic, []).append(bytes(raw))
    return out, types


def test_message_definition_carries_every_dependency():
    text = message_definition('tf2_msgs/msg/TFMessage')
    for dep in ('geometry_msgs/TransformStamped', 'std_msgs/Header',
                'builtin_interfaces/Time', 'geometry_msgs/Quaternion'):
        assert f'MSG: {dep}\n' in text
    with pytest.raises(ConfigError, match='no definition'):
        message_definition('no_such_pkg/msg/Nothing')


@pytest.mark.parametrize('compression', ['none', 'zstd'])
def test_bag_round_trip_counts_and_bytes_equal(tmp_path, compression):
    path = str(tmp_path / 'run')
    sent = {'/joint_states': [joint_state(i) for i in range(300)],
            '/clock': [clock(i) for i in range(50)]}
    with BagWriter(path, compression=compression) as bag:
        bag.add_topic('/joint_states', JS, [qos_dict(depth=10)])
        bag.add_topic('/clock', CLOCK, [qos_dict(depth=1, reliability='best_effort')])
        t = 1_700_000_000_000_000_000
        for i in range(300):
            bag.write('/joint_states', sent['/joint_states'][i], t + i * 10_000_000)
            if i % 6 == 0:
                bag.write('/clock', sent['/clock'][i // 6], t + i * 10_000_000 + 1)
    got, types = read_back(path)
    assert types == {'/joint_states': JS, '/clock': CLOCK}
    assert got == sent
    meta = yaml.safe_load(open(os.path.join(path, 'metadata.yaml')))['rosbag2_bagfile_information']
    assert meta['version'] >= 5 and meta['storage_identifier'] == 'mcap'
    counts = {t['topic_metadata']['name']: t['message_count']
              for t in meta['topics_with_message_count']}
    assert counts == {'/joint_states': 300, '/clock': 50} and meta['message_count'] == 350
    for t in meta['topics_with_message_count']:
        assert t['topic_metadata']['serialization_format'] == 'cdr'
        assert yaml.safe_load(t['topic_metadata']['offered_qos_profiles'])[0]['depth'] in (1, 10)
    assert meta['duration']['nanoseconds'] == 299 * 10_000_000


def test_each_file_decodes_from_its_own_schemas(tmp_path):
    """What Foxglove does: no metadata.yaml, no installed types, only the MCAP file."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
    path = str(tmp_path / 'run')
    with BagWriter(path) as bag:
        bag.add_topic('/joint_states', JS)
        for i in range(5):
            bag.write('/joint_states', joint_state(i))
        files = bag.file_paths
    with open(files[0], 'rb') as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        positions = [list(m.position) for _s, _c, _r, m in reader.iter_decoded_messages()]
    assert positions == [[0.001 * i, -0.5] for i in range(5)]


@pytest.mark.parametrize('split', [{'max_bytes': 8000}, {'max_seconds': 0.5}])
def test_split_by_size_or_duration(tmp_path, split):
    path = str(tmp_path / 'run')
    sent = [joint_state(i) for i in range(400)]
    with BagWriter(path, **split) as bag:
        bag.add_topic('/joint_states', JS)
        for i, data in enumerate(sent):
            bag.write('/joint_states', data, 10**18 + i * 10_000_000)
        files = bag.file_paths
    assert len(files) >= 3 and all(os.path.isfile(f) for f in files)
    meta = yaml.safe_load(open(os.path.join(path, 'metadata.yaml')))['rosbag2_bagfile_information']
    assert meta['relative_file_paths'] == [os.path.basename(f) for f in files]
    assert sum(f['message_count'] for f in meta['files']) == 400
    if 'max_seconds' in split:
        assert all(f['duration']['nanoseconds'] < 0.5e9 for f in meta['files'])
    assert read_back(path)[0] == {'/joint_states': sent}


def test_an_existing_folder_is_refused(tmp_path):
    (tmp_path / 'run').mkdir()
    (tmp_path / 'run' / 'x').write_text('keep me')
    with pytest.raises(ConfigError, match='not empty'):
        BagWriter(str(tmp_path / 'run'))


class FullDisk:
    """A file whose writes fail with ENOSPC once ``room`` bytes are written, as a full disk's
    do (an honest fault at the OS boundary: the writer sees only OSError)."""

    def __init__(self, path, mode, room):
        self.f = open(path, mode)
        self.room = room

    def write(self, data):
        if self.f.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)


def test_full_disk_stops_recording_with_an_error(tmp_path):
    errors = []
    rec = Recorder(str(tmp_path / 'run'), opener=lambda p, m: FullDisk(p, m, 20000),
                   on_error=errors.append)
    rec.add_topic('/joint_states', JS)
    data = joint_state(1)
    for _ in range(5000):
        rec.offer('/joint_states', data)
    rec.close()
    assert rec.error is not None and 'No space left' in rec.error and 'errno 28' in rec.error
    assert errors == [rec.error]
    assert not rec.recording and rec.offer('/joint_states', data) is False


def test_recorder_writes_every_message_from_another_thread(tmp_path):
    import threading
    rec = Recorder(str(tmp_path / 'run'))
    rec.add_topic('/joint_states', JS)
    sent = [joint_state(i) for i in range(1000)]
    thread = threading.Thread(target=lambda: [rec.offer('/joint_states', d) for d in sent])
    thread.start()
    thread.join()
    rec.close()
    assert rec.error is None and rec.dropped == 0
    assert rec.counts() == {'/joint_states': 1000}
    assert read_back(rec.path)[0] == {'/joint_states': sent}


def test_a_full_queue_drops_and_counts(tmp_path):
    rec = Recorder(str(tmp_path / 'run'), max_queue=1, max_queue_bytes=1)
    rec.add_topic('/joint_states', JS)
    assert rec.offer('/joint_states', joint_state(0)) is False
    rec.close()
    assert rec.dropped == 1


def test_video_round_trip(tmp_path):
    av = pytest.importorskip('av')
    path = str(tmp_path / 'cam.mp4')
    video = VideoRecorder(path, 64, 48, 10.0)
    for i in range(30):
        frame = np.zeros((48, 64, 3), np.uint8)
        frame[:, :2 * i + 2] = 255            # a bar that grows, bottom row first
        video.offer(frame, bottom_up=True)
    video.close()
    assert video.error is None and video.frames_written == 30
    with av.open(path) as container:
        stream = container.streams.video[0]
        frames = [f.to_ndarray(format='rgb24') for f in container.decode(stream)]
        assert float(stream.average_rate) == pytest.approx(10.0)
    assert len(frames) == 30 and frames[0].shape == (48, 64, 3)
    assert frames[-1][:, :50].mean() > 200 and frames[-1][:, 62:].mean() < 60


def test_compression_that_is_not_installed_is_refused_at_start(tmp_path, monkeypatch):
    import mcap.writer
    monkeypatch.setattr(mcap.writer, 'lz4', None)      # as where the lz4 module is missing
    with pytest.raises(ConfigError, match='lz4 compression is not available'):
        BagWriter(str(tmp_path / 'run'), compression='lz4')
    assert not (tmp_path / 'run').exists()
