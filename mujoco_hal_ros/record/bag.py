"""BagWriter: a rosbag2 folder (MCAP files plus metadata.yaml) from serialized messages.

``ros2 bag info`` and ``ros2 bag play`` read the folder through metadata.yaml, Foxglove
and other MCAP readers read each file alone; so both carry the same facts: per topic its
type, serialization format (cdr), offered QoS profiles and type hash, and per file and
in all its message counts and time span. Messages arrive already serialized (CDR bytes as
the middleware carried them) and go into the file unchanged. Files split when one passes
``max_bytes`` or spans ``max_seconds`` of receive time, as ``ros2 bag record``'s
``--max-bag-size`` and ``--max-bag-duration`` do.
"""

from collections.abc import Callable, Sequence
import io
import os
import time
from typing import Any, IO

from mcap.writer import CompressionType, Writer
import yaml

from ..errors import ConfigError
from .msgdef import message_definition

VERSION = 8                  # rosbag2's metadata format as Jazzy writes it; Kilted reads it
INFINITE = {'sec': 9223372036, 'nsec': 854775807}
HISTORY = {'system_default': 0, 'keep_last': 1, 'keep_all': 2, 'unknown': 3}
RELIABILITY = {'system_default': 0, 'reliable': 1, 'best_effort': 2, 'unknown': 3}
DURABILITY = {'system_default': 0, 'transient_local': 1, 'volatile': 2, 'unknown': 3}
MESSAGE_RECORD = 31            # an MCAP message record's bytes besides the payload
COMPRESSION = {'none': CompressionType.NONE, 'zstd': CompressionType.ZSTD,
               'lz4': CompressionType.LZ4}


def qos_dict(history: str = 'keep_last', depth: int = 10, reliability: str = 'reliable',
             durability: str = 'volatile') -> dict[str, Any]:
    """One offered QoS profile in rosbag2's metadata form (version 8: enum numbers)."""
    return {'history': HISTORY[history], 'depth': int(depth),
            'reliability': RELIABILITY[reliability], 'durability': DURABILITY[durability],
            'deadline': dict(INFINITE), 'lifespan': dict(INFINITE), 'liveliness': 1,
            'liveliness_lease_duration': dict(INFINITE),
            'avoid_ros_namespace_conventions': False}


class _Topic:
    def __init__(self, topic_id, name, type_name, qos, type_hash):
        self.id, self.name, self.type, self.qos, self.hash = (topic_id, name, type_name,
                                                              qos, type_hash)
        self.count = 0


class _File:
    def __init__(self, path, stream, writer):
        self.path, self.stream, self.writer = path, stream, writer
        self.channels = {}            # topic id -> channel id in this file
        self.schemas = {}             # type -> schema id in this file
        self.count = 0
        self.bytes = 0                # message records so far: chunks reach the disk later
        self.start = self.end = None


class BagWriter:
    """Write topics of serialized messages into the rosbag2 folder ``path``."""

    def __init__(self, path: str, *, max_bytes: int = 0, max_seconds: float = 0.0,
                 compression: str = 'none', distro: str | None = None,
                 opener: Callable[..., IO[bytes]] = open) -> None:
        if compression not in COMPRESSION:
            raise ConfigError(f'unknown compression {compression!r}', where='record',
                              allowed=', '.join(COMPRESSION))
        try:
            Writer(io.BytesIO(), compression=COMPRESSION[compression])
        except Exception as err:  # noqa: BLE001 - mcap names the missing module
            raise ConfigError(f'{compression} compression is not available here ({err}); '
                              'pip install it or record with none', where='record') from None
        if os.path.exists(path) and os.listdir(path):
            raise ConfigError(f'{path} exists and is not empty; name a new folder',
                              where='record')
        os.makedirs(path, exist_ok=True)
        self.path = os.path.abspath(path)
        self.name = os.path.basename(self.path.rstrip(os.sep)) or 'rosbag2'
        self.max_bytes = int(max_bytes or 0)
        self.max_ns = int((max_seconds or 0) * 1e9)
        self.compression = compression
        self.distro = distro or os.environ.get('ROS_DISTRO', 'kilted')
        self._open = opener
        self.topics: dict[str, _Topic] = {}   # name -> _Topic
        self.files: list[_File] = []          # every closed _File, then the open one
        self._file = None
        self.closed = False

    # --- topics -----------------------------------------------------------------------------
    def add_topic(self, name: str, type_name: str, qos_profiles: Sequence[dict[str, Any]] = (),
                  type_hash: str = '') -> None:
        """Declare a topic before its first message; ``qos_profiles``: ``qos_dict`` each."""
        if name in self.topics:
            return
        message_definition(type_name)          # refuse a type with no definition now
        self.topics[name] = _Topic(len(self.topics) + 1, name, type_name,
                                   list(qos_profiles) or [qos_dict()], type_hash or '')

    def _qos_yaml(self, topic):
        return yaml.safe_dump(topic.qos, sort_keys=False).strip()

    # --- files ------------------------------------------------------------------------------
    def _open_file(self):
        path = os.path.join(self.path, f'{self.name}_{len(self.files)}.mcap')
        stream = self._open(path, 'wb')
        writer = Writer(stream, compression=COMPRESSION[self.compression])
        writer.start(profile='ros2', library='mujoco_hal_ros')
        self._file = _File(path, stream, writer)
        self.files.append(self._file)
        return self._file

    def _channel(self, f, topic):
        cid = f.channels.get(topic.id)
        if cid is None:
            sid = f.schemas.get(topic.type)
            if sid is None:
                sid = f.schemas[topic.type] = f.writer.register_schema(
                    topic.type, 'ros2msg', message_definition(topic.type).encode())
            cid = f.channels[topic.id] = f.writer.register_channel(
                topic.name, 'cdr', sid, {'offered_qos_profiles': self._qos_yaml(topic),
                                         'topic_type_hash': topic.hash})
        return cid

    def _close_file(self) -> None:
        f, self._file = self._file, None
        if f is None:
            return
        try:
            f.writer.add_metadata('rosbag2', {'serialized_metadata': yaml.safe_dump(
                self._metadata()['rosbag2_bagfile_information'], sort_keys=False)})
            f.writer.finish()
        finally:
            f.stream.close()

    def write(self, topic: str, data: bytes, log_time_ns: int | None = None) -> None:
        """One serialized message on a declared topic, received at ``log_time_ns``."""
        if self.closed:
            raise ConfigError('this bag is closed; start a new recording', where='record')
        t = self.topics[topic]
        now = time.time_ns() if log_time_ns is None else int(log_time_ns)
        f = self._file
        if f is not None and f.count and (
                (self.max_bytes and f.bytes >= self.max_bytes)
                or (self.max_ns and now - f.start >= self.max_ns)):
            self._close_file()
            f = None
        if f is None:
            f = self._open_file()
        f.writer.add_message(self._channel(f, t), now, bytes(data), now)
        t.count += 1
        f.count += 1
        f.bytes += len(data) + MESSAGE_RECORD
        f.start = now if f.start is None else min(f.start, now)
        f.end = now if f.end is None else max(f.end, now)

    # --- metadata ---------------------------------------------------------------------------
    def _metadata(self):
        files = [f for f in self.files if f.count]
        start = min((f.start for f in files), default=0)
        end = max((f.end for f in files), default=0)
        info = {
            'version': VERSION,
            'storage_identifier': 'mcap',
            'duration': {'nanoseconds': end - start},
            'starting_time': {'nanoseconds_since_epoch': start},
            'message_count': sum(t.count for t in self.topics.values()),
            'topics_with_message_count': [
                {'topic_metadata': {'name': t.name, 'type': t.type,
                                    'serialization_format': 'cdr',
                                    'offered_qos_profiles': self._qos_yaml(t),
                                    'type_description_hash': t.hash},
                 'message_count': t.count} for t in self.topics.values()],
            'compression_format': '',
            'compression_mode': '',
            'relative_file_paths': [os.path.basename(f.path) for f in self.files],
            'files': [{'path': os.path.basename(f.path),
                       'starting_time': {'nanoseconds_since_epoch': f.start or 0},
                       'duration': {'nanoseconds': (f.end or 0) - (f.start or 0)},
                       'message_count': f.count} for f in self.files],
            'custom_data': {},
            'ros_distro': self.distro,
        }
        return {'rosbag2_bagfile_information': info}

    @property
    def file_paths(self) -> list[str]:
        return [f.path for f in self.files]

    def close(self) -> None:
        """Finish the open file and write metadata.yaml; idempotent."""
        if self.closed:
            return
        self.closed = True
        try:
            self._close_file()
        finally:
            with open(os.path.join(self.path, 'metadata.yaml'), 'w', encoding='utf-8') as f:
                yaml.safe_dump(self._metadata(), f, sort_keys=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
