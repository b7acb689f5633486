"""DatasetWriter: frames in, a LeRobotDataset v3.0 folder out, episode by episode.

A frame is checked whole before anything is kept (unknown or missing features, shapes,
dtypes, NaN), its camera images are encoded at once (bounded memory), and its numbers
wait in memory until ``save_episode``. Saving writes every changed file (frames, videos,
episodes, tasks, stats, info) under a temporary name first and renames them into place
only when all are written, so a full disk or a crash leaves the previous episodes as
they were. From the first write until ``finalize`` the folder holds an ``INCOMPLETE``
file saying so; the checker and the reader report it, so an interrupted recording never
passes for a finished one.

Why one module of this size: it is one transaction, an episode held in memory and then
renamed into place with every file it changes; the checks of a frame, the episode's
metadata and the files rewritten at a save share that one state, and splitting them would
hand the half-written episode across modules.
"""

from collections.abc import Mapping
import errno
import fcntl
import functools
import json
import math
import os
from pathlib import Path
import shutil
import threading
import time
from typing import Any, NamedTuple

import numpy as np

from ..checks import is_bool
from ..errors import (
    BUSY,
    ClosedError,
    ConfigError,
    DeviceError,
    INTERNAL_ERROR,
    InvalidArgument,
    LimitExceeded,
    shorten,
    UnknownName,
)
from . import layout, stats as stats_mod, tables, video

MAX_TASK_CHARS = 10_000
MAX_EXTRA_COLUMNS = 64
MAX_EXTRA_ITEMS = 100_000
_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def _serial(method: Any) -> Any:
    """One call at a time: a recorder may add frames on one thread and save on another."""
    @functools.wraps(method)
    def call(self: 'DatasetWriter', *args: Any, **kw: Any) -> Any:
        with self._calls:
            return method(self, *args, **kw)
    return call


class WriterStatus(NamedTuple):
    episode_index: int      # the index the current (unsaved) episode will get
    frames: int             # frames added to it so far
    root: str


def _disk_error(err: BaseException, what: str) -> DeviceError:
    """An OS error while writing as a structured one; a full disk says so."""
    code = getattr(err, 'errno', None)
    if code is None and err.__cause__ is not None:
        code = getattr(err.__cause__, 'errno', None)
    text = f'{what}: {type(err).__name__}: {err}'
    if code in _FULL or 'No space left' in str(err) or 'File too large' in str(err):
        return LimitExceeded(f'{text}; the disk (or file size limit) is full: free space '
                             f'and save again, or discard the episode', where='dataset')
    return DeviceError(INTERNAL_ERROR, text, where='dataset')


def _check_root(root: Any) -> Path:
    if not isinstance(root, (str, os.PathLike)) or not str(root):
        raise InvalidArgument(f'expected a folder path, got {shorten(root)}', where='root')
    return Path(root).expanduser().absolute()


def _extra_value(key: str, value: Any) -> Any:
    where = f'extra[{shorten(key)}]'
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in 'biuf':
            raise InvalidArgument(f'array of {value.dtype}', where=where,
                                  allowed='numbers, booleans, text or lists of them')
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
        if isinstance(value, str) and len(value) > MAX_TASK_CHARS:
            raise InvalidArgument(f'text of {len(value)} characters', where=where,
                                  allowed=f'at most {MAX_TASK_CHARS}')
        return value
    if isinstance(value, int):
        if not -2 ** 63 <= value < 2 ** 63:
            raise InvalidArgument(f'{shorten(value)} does not fit int64', where=where)
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f'{value!r} is not finite', where=where,
                                  allowed='finite numbers')
        return value
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_EXTRA_ITEMS:
            raise InvalidArgument(f'{len(value)} items', where=where,
                                  allowed=f'at most {MAX_EXTRA_ITEMS}')
        items = [_extra_value(key, v) for v in value]
        if any(isinstance(v, list) for v in items):
            raise InvalidArgument('nested lists', where=where, allowed='a flat list')
        if all(isinstance(v, str) for v in items):
            return items
        if all(isinstance(v, (int, float)) and not is_bool(v) for v in items):
            return [float(v) for v in items]
        raise InvalidArgument('a list mixing types', where=where,
                              allowed='a list of numbers or a list of text')
    raise InvalidArgument(f'{type(value).__name__} {shorten(value)}', where=where,
                          allowed='numbers, booleans, text or lists of them')


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return 'bool'
    if isinstance(value, int):
        return 'int'
    if isinstance(value, float):
        return 'float'
    if isinstance(value, str):
        return 'str'
    if isinstance(value, list):
        return 'list[str]' if value and isinstance(value[0], str) else 'list[float]'
    return 'null'


class DatasetWriter:
    """Write episodes of frames into a LeRobotDataset v3.0 folder at ``root``.

    A new folder (or an empty one) becomes a new dataset; a dataset folder with the same
    features and fps gets more episodes; any other existing folder is refused. Call
    ``add_frame`` per frame, ``save_episode`` (or ``discard_episode``) per episode and
    ``finalize`` at the end; ``close`` (or leaving a ``with`` block) without ``finalize``
    keeps the saved episodes and leaves the folder marked incomplete.
    """

    def __init__(self, root: str | os.PathLike, *, repo_id: str, fps: float,
                 features: dict, robot_type: str = '', use_videos: bool = True,
                 vcodec: str = video.CODEC) -> None:
        self._closed = True
        self._lock_fd: int | None = None
        self._calls = threading.RLock()
        if not isinstance(repo_id, str) or not repo_id or len(repo_id) > 200:
            raise InvalidArgument(f'expected a repo id such as "user/name", got '
                                  f'{shorten(repo_id)}', where='repo_id')
        if not isinstance(robot_type, str) or len(robot_type) > 200:
            raise InvalidArgument(f'expected a robot type name, got {shorten(robot_type)}',
                                  where='robot_type')
        if not isinstance(use_videos, bool):
            raise InvalidArgument(f'expected True or False, got {shorten(use_videos)}',
                                  where='use_videos')
        self.fps = layout.fps_value(fps)
        self.features = layout.check_features(features, use_videos)
        self.repo_id = repo_id
        self.root = _check_root(root)
        self._video_keys = layout.video_keys(self.features)
        self._codec = video.pick_codec(vcodec) if self._video_keys else ''
        self._all = layout.all_features(self.features)
        self._schema = tables.frame_schema(self._all)
        self._created = False
        self._open_folder(robot_type, use_videos)
        self._closed = False
        self._reset_episode()

    # -- opening ---------------------------------------------------------------------------

    def _open_folder(self, robot_type: str, use_videos: bool) -> None:
        root = self.root
        if root.exists() and not root.is_dir():
            raise InvalidArgument(f'{root} is a file', where='root',
                                  allowed='a new folder, an empty one or a dataset folder')
        info_path = root / layout.INFO_PATH
        if root.is_dir() and any(root.iterdir()) and not info_path.is_file():
            raise InvalidArgument(f'{root} exists and is not a LeRobot dataset (no '
                                  f'{layout.INFO_PATH}); nothing was written there',
                                  where='root',
                                  allowed='a new folder, an empty one or a dataset folder')
        self._made_root = not root.exists()
        self._work = root / layout.WORK_DIR
        made_work = not self._work.exists()
        try:
            root.mkdir(parents=True, exist_ok=True)
            self._work.mkdir(exist_ok=True)
            self._lock()
            self._was_complete = False
            if info_path.is_file():
                self._was_complete = not (root / layout.INCOMPLETE_MARKER).exists()
                self._load_existing(info_path)
                self._mark_incomplete()
            else:
                self._mark_incomplete()
                self._created = True
                self.info = layout.new_info(fps=self.fps, features=self.features,
                                            robot_type=robot_type, use_videos=use_videos)
                self.episodes: list[dict[str, Any]] = []
                self.tasks: list[str] = []
                self._episode_stats: list[dict[str, dict[str, np.ndarray]]] = []
                self._extra_kinds: dict[str, str] = {}
                self._write_json(self.info, root / layout.INFO_PATH)
        except (DeviceError, OSError) as err:
            busy = isinstance(err, DeviceError) and err.code == BUSY
            self._unlock()
            if made_work and not busy:
                shutil.rmtree(self._work, ignore_errors=True)
            if isinstance(err, DeviceError):
                raise
            raise _disk_error(err, f'opening {root}') from None
        except Exception as err:  # noqa: BLE001 - a damaged Parquet file, a missing column
            self._unlock()
            if made_work:
                shutil.rmtree(self._work, ignore_errors=True)
            raise ConfigError(f'{root} holds a damaged dataset ({type(err).__name__}: '
                              f'{err}); check_dataset() lists what is wrong', where='root'
                              ) from None
        self._episodes_at_open = len(self.episodes)

    def _lock(self) -> None:
        fd = os.open(self._work / 'lock', os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DeviceError(BUSY, f'another writer has {self.root} open; close it first',
                              where='root') from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _load_existing(self, info_path: Path) -> None:
        try:
            info = json.loads(info_path.read_text())
        except (OSError, ValueError) as err:
            raise ConfigError(f'{info_path} is not readable JSON ({err}); not a dataset this '
                              f'writer can append to', where='root') from None
        version = info.get('codebase_version') if isinstance(info, dict) else info
        if version != layout.CODEBASE_VERSION:
            raise ConfigError(f'{info_path}: codebase_version {shorten(version)}',
                              where='root', allowed=layout.CODEBASE_VERSION)
        try:
            theirs = {k: v for k, v in info['features'].items()
                      if k not in layout.DEFAULT_FEATURES}
            same = layout.same_features(theirs, self.features)
        except (KeyError, TypeError, AttributeError):
            same = False
        if not same:
            raise ConfigError(f'{self.root} holds a dataset with other features; append only '
                              f'with the same features (or choose a new folder)', where='root',
                              allowed=shorten(sorted(info.get('features', {})), 400))
        if info.get('fps') != self.fps:
            raise ConfigError(f'{self.root} was recorded at {shorten(info.get("fps"))} fps, '
                              f'not {self.fps}', where='fps', allowed=shorten(info.get('fps')))
        self.info = info
        for key in self._video_keys:
            self.features[key]['info'] = info['features'][key].get('info')
        self.episodes = []
        self._episode_stats = []
        episodes_dir = self.root / layout.EPISODES_DIR
        for path in sorted(episodes_dir.glob('*/*.parquet')):
            self.episodes += tables.read(path).to_pylist()
        if [e['episode_index'] for e in self.episodes] != list(range(len(self.episodes))):
            raise ConfigError(f'{self.root}: episode indices are not 0..n-1', where='root')
        for row in self.episodes:
            per: dict[str, dict[str, np.ndarray]] = {}
            for key, value in row.items():
                if key.startswith('stats/') and value is not None:
                    _, feature, name = key.split('/', 2)
                    per.setdefault(feature, {})[name] = np.asarray(value)
            self._episode_stats.append(per)
        tasks_path = self.root / layout.TASKS_PATH
        self.tasks = []
        if tasks_path.is_file():
            table = tables.read(tasks_path)
            order = table.column('task_index').to_pylist()
            names = table.column('__index_level_0__').to_pylist()
            self.tasks = [name for _, name in sorted(zip(order, names, strict=True))]
        self._extra_kinds = {}
        for row in self.episodes:
            for key, value in row.items():
                if self._is_extra(key) and value is not None:
                    self._extra_kinds.setdefault(key, _kind(value))
        self._trim_unreferenced_frames()

    @staticmethod
    def _is_extra(key: str) -> bool:
        return (key not in layout.RESERVED_EPISODE_COLUMNS
                and not key.startswith(layout.RESERVED_EPISODE_PREFIXES))

    def _trim_unreferenced_frames(self) -> None:
        """Drop frame rows past the last saved episode (a crash between two renames)."""
        if not self.episodes:
            return
        last = self.episodes[-1]
        path = self.root / layout.chunk_path(layout.DATA_PATH, last['data/chunk_index'],
                                             last['data/file_index'])
        if not path.is_file():
            raise ConfigError(f'{path} is missing', where='root')
        table = tables.read(path)
        index = tables.column(table, 'index')
        keep = index < last['dataset_to_index']
        if keep.all():
            return
        tmp = tables.write_atomic(table.filter(keep), path, self._work)
        os.replace(tmp, path)

    def _mark_incomplete(self) -> None:
        text = (f'This LeRobot dataset is being written (or its writer stopped without '
                f'finalize()) by mujoco_hal_ros, pid {os.getpid()}, since '
                f'{time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())} UTC.\n'
                f'The episodes listed in {layout.EPISODES_DIR} are whole; frames of an episode '
                f'that was being recorded are not kept. Opening the folder with '
                f'mujoco_hal_ros.dataset.DatasetWriter again and calling finalize() '
                f'completes it.\n')
        (self.root / layout.INCOMPLETE_MARKER).write_text(text)

    # -- frames ----------------------------------------------------------------------------

    def _reset_episode(self) -> None:
        self._frames = 0
        self._columns: dict[str, list[np.ndarray]] = {
            key: [] for key, spec in self.features.items() if spec['dtype'] != layout.VIDEO}
        self._timestamps: list[float] = []
        self._encoders: dict[str, video.EpisodeEncoder] = {}
        self._image_stats: dict[str, stats_mod.ImageStats] = {}
        self._finished: dict[str, Path] = {}

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f'DatasetWriter({self.root})')

    @property
    def status(self) -> WriterStatus:
        """(index the current episode will get, its frames so far, the folder)."""
        with self._calls:
            self._check_open()
            return WriterStatus(len(self.episodes), self._frames, str(self.root))

    def _numeric(self, key: str, value: Any, spec: dict[str, Any]) -> np.ndarray:
        if isinstance(value, (str, bytes)) or value is None:
            raise InvalidArgument(f'expected numbers, got {shorten(value)}', where=key)
        array = np.asarray(value)
        want = np.dtype(spec['dtype'])
        shape = tuple(spec['shape'])
        if array.shape == () and shape == (1,):
            array = array.reshape(1)
        if array.shape != shape:
            raise InvalidArgument(f'shape {array.shape}', where=key, allowed=f'shape {shape}')
        kind = array.dtype.kind
        if want.kind == 'b':
            if kind != 'b':
                raise InvalidArgument(f'dtype {array.dtype}', where=key, allowed='bool')
            return array.astype(want)
        integral = want.kind in 'iu'
        if kind not in ('iu' if integral else 'iuf'):
            sort = 'an integer' if integral else 'a real'
            raise InvalidArgument(f'dtype {array.dtype}', where=key,
                                  allowed=f'{want} (or {sort} dtype that converts to it)')
        if want.kind == 'f':
            if not np.isfinite(array).all():
                bad = [i for i in np.flatnonzero(~np.isfinite(array))][:5]
                names = spec.get('names')
                named = [names[i] for i in bad] if names else bad
                raise InvalidArgument(f'not finite at {named}', where=key,
                                      allowed='finite numbers')
            if np.abs(array).max(initial=0) > np.finfo(want).max:
                raise InvalidArgument(f'a value beyond {want}', where=key)
        else:
            info = np.iinfo(want)
            if array.size and (array.min() < info.min or array.max() > info.max):
                raise InvalidArgument(f'a value outside {want}', where=key)
        return array.astype(want)

    def _image(self, key: str, value: Any, spec: dict[str, Any]) -> np.ndarray:
        shape = tuple(spec['shape'])
        if not isinstance(value, np.ndarray):
            raise InvalidArgument(f'expected an HxWx3 uint8 array, got '
                                  f'{type(value).__name__}', where=key)
        if value.dtype != np.uint8:
            raise InvalidArgument(f'dtype {value.dtype}', where=key, allowed='uint8 RGB')
        if value.shape != shape:
            raise InvalidArgument(f'image of shape {value.shape}', where=key,
                                  allowed=f'{shape} (the camera size the dataset was made with)')
        return value

    def _timestamp(self, timestamp: Any) -> float:
        nominal = self._frames / self.fps
        if timestamp is None:
            return nominal
        if is_bool(timestamp) or not isinstance(timestamp, (int, float, np.integer, np.floating)):
            raise InvalidArgument(f'expected seconds, got {shorten(timestamp)}',
                                  where='timestamp')
        value = float(timestamp)
        if not math.isfinite(value) or value < 0:
            raise InvalidArgument(f'timestamp {value!r}', where='timestamp',
                                  allowed='finite seconds since the episode\'s first frame')
        if self._timestamps and value <= self._timestamps[-1]:
            raise InvalidArgument(f'timestamp {value} is not after the previous frame\'s '
                                  f'{self._timestamps[-1]}', where='timestamp')
        if self._video_keys and abs(value - nominal) > layout.TIMESTAMP_TOLERANCE_S:
            raise InvalidArgument(
                f'timestamp {value} of frame {self._frames} is not frame/fps = {nominal}: '
                f'LeRobot finds a video frame by its timestamp within '
                f'{layout.TIMESTAMP_TOLERANCE_S} s, so frames are sampled every 1/fps; pass '
                f'timestamp=None for frame/fps', where='timestamp')
        return value

    @_serial
    def add_frame(self, frame: Any, *, timestamp: float | None = None) -> None:
        """One frame of the current episode: ``{feature: array}`` for every feature.

        ``timestamp``: seconds since the episode's first frame (default frame_index/fps;
        with cameras it must be that within 0.1 ms). Nothing is kept if any value is
        refused.
        """
        self._check_open()
        if not isinstance(frame, Mapping):
            raise InvalidArgument(f'expected {{feature: array}}, got {shorten(frame)}',
                                  where='frame')
        unknown = [key for key in frame if key not in self.features]
        if unknown:
            raise UnknownName('feature', unknown[0], list(self.features))
        missing = [key for key in self.features if key not in frame]
        if missing:
            raise InvalidArgument(f'missing {", ".join(missing)}', where='frame',
                                  allowed='every feature of the dataset: ' +
                                  ', '.join(self.features))
        values = {}
        for key, spec in self.features.items():
            if spec['dtype'] == layout.VIDEO:
                values[key] = self._image(key, frame[key], spec)
            else:
                values[key] = self._numeric(key, frame[key], spec)
        stamp = self._timestamp(timestamp)
        try:
            for key in self._video_keys:
                encoder = self._encoders.get(key)
                if encoder is None:
                    height, width = self.features[key]['shape'][:2]
                    path = self._work / f'{key}.episode.mp4'
                    path.unlink(missing_ok=True)
                    encoder = video.EpisodeEncoder(path, height, width, self.fps, self._codec)
                    self._encoders[key] = encoder
                    self._image_stats[key] = stats_mod.ImageStats()
                encoder.add(values[key])
        except Exception as err:  # noqa: BLE001 - ENOSPC and codec errors alike
            self.discard_episode()
            raise _disk_error(err, 'encoding a camera frame (the current episode was '
                                   'discarded)') from None
        for key in self._video_keys:
            self._image_stats[key].add(values[key])
        for key, column in self._columns.items():
            column.append(values[key])
        self._timestamps.append(stamp)
        self._frames += 1

    @_serial
    def discard_episode(self) -> None:
        """Drop the current episode's frames (its videos too); saved episodes stay."""
        self._check_open()
        for encoder in self._encoders.values():
            encoder.abandon()
        for path in self._finished.values():
            path.unlink(missing_ok=True)
        self._reset_episode()

    # -- saving ----------------------------------------------------------------------------

    def _check_task(self, task: Any) -> str:
        if not isinstance(task, str) or not task.strip():
            raise InvalidArgument(f'expected the task as text, got {shorten(task)}',
                                  where='task', allowed='e.g. "pick the cube"')
        if len(task) > MAX_TASK_CHARS:
            raise InvalidArgument(f'a task of {len(task)} characters', where='task',
                                  allowed=f'at most {MAX_TASK_CHARS}')
        return task

    def _check_extra(self, extra: Any) -> dict[str, Any]:
        if extra is None:
            return {}
        if not isinstance(extra, Mapping):
            raise InvalidArgument(f'expected {{column: value}}, got {shorten(extra)}',
                                  where='extra')
        if len(extra) > MAX_EXTRA_COLUMNS:
            raise InvalidArgument(f'{len(extra)} columns', where='extra',
                                  allowed=f'at most {MAX_EXTRA_COLUMNS}')
        out = {}
        for key, value in extra.items():
            if not isinstance(key, str) or not key or len(key) > 200:
                raise InvalidArgument(f'column name {shorten(key)}', where='extra')
            if not self._is_extra(key):
                raise InvalidArgument(f'{key!r} is a column the writer fills', where='extra',
                                      allowed='names other than ' + ', '.join(
                                          layout.RESERVED_EPISODE_COLUMNS) + ' and stats/, '
                                      'data/, videos/, meta/ prefixes')
            value = _extra_value(key, value)
            kind, before = _kind(value), self._extra_kinds.get(key)
            if value is not None and before not in (None, kind):
                if {kind, before} != {'int', 'float'}:
                    raise InvalidArgument(f'{kind} where earlier episodes have {before}',
                                          where=f'extra[{key!r}]', allowed=before)
            out[key] = value
        return out

    @_serial
    def save_episode(self, task: str, *, extra: Mapping[str, Any] | None = None) -> int:
        """Write the current episode under ``task``; returns its index.

        ``extra``: metadata columns of this episode in meta/episodes (``success``,
        ``failure``, ``sim.initial_state``...): numbers, booleans, text or flat lists.
        """
        self._check_open()
        task = self._check_task(task)
        extra = self._check_extra(extra)
        if self._frames == 0:
            raise InvalidArgument('the current episode has no frames', where='save_episode',
                                  allowed='add_frame() first')
        for key in list(self._encoders):
            try:
                self._finished[key] = self._encoders.pop(key).finish()
            except Exception as err:  # noqa: BLE001 - a full disk while flushing
                self.discard_episode()
                raise LimitExceeded(f'finishing the {key} video: {err}; the episode was '
                                    f'discarded', where='dataset') from None
        staged: list[tuple[Path, Path]] = []
        try:
            row, stats = self._stage_episode(task, extra, staged)
        except DeviceError:
            self._drop(staged)
            raise
        except OSError as err:
            self._drop(staged)
            raise _disk_error(err, 'saving the episode') from None
        except Exception as err:  # noqa: BLE001 - ffmpeg/arrow errors carry no errno
            self._drop(staged)
            raise _disk_error(err, 'saving the episode') from None
        for tmp, final in staged:            # every file is written: now put them in place
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, final)
        self.episodes.append(row)
        self._episode_stats.append(stats)
        if task not in self.tasks:
            self.tasks.append(task)
        for key, value in extra.items():
            if value is not None:
                self._extra_kinds.setdefault(key, _kind(value))
        for path in self._finished.values():
            path.unlink(missing_ok=True)
        self._reset_episode()
        return row['episode_index']

    @staticmethod
    def _drop(staged: list[tuple[Path, Path]]) -> None:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)

    def _current(self, prefix: str) -> tuple[int, int] | None:
        if not self.episodes:
            return None
        last = self.episodes[-1]
        return last[f'{prefix}/chunk_index'], last[f'{prefix}/file_index']

    def _place(self, prefix: str, template: str, limit_mb: float, **kw: Any
               ) -> tuple[int, int, Path | None]:
        """(chunk, file) for the next episode and the file to append to (None: a new one)."""
        current = self._current(prefix)
        if current is None:
            return 0, 0, None
        path = self.root / layout.chunk_path(template, *current, **kw)
        if not path.is_file():
            raise ConfigError(f'{path} is missing; the dataset is damaged', where='root')
        if path.stat().st_size / 2 ** 20 >= limit_mb:
            chunk, file = layout.next_file(*current, self.info['chunks_size'])
            return chunk, file, None
        return current[0], current[1], path

    def _stage(self, staged: list[tuple[Path, Path]], tmp: Path, final: Path) -> None:
        staged.append((tmp, final))

    def _stage_episode(self, task: str, extra: dict[str, Any],
                       staged: list[tuple[Path, Path]]) -> tuple[dict, dict]:
        index = len(self.episodes)
        frames = self._frames
        start = self.episodes[-1]['dataset_to_index'] if self.episodes else 0
        task_index = self.tasks.index(task) if task in self.tasks else len(self.tasks)
        columns = {key: np.stack(values) for key, values in self._columns.items()}
        columns['timestamp'] = np.array(self._timestamps, dtype=np.float32)
        columns['frame_index'] = np.arange(frames, dtype=np.int64)
        columns['episode_index'] = np.full(frames, index, dtype=np.int64)
        columns['index'] = np.arange(start, start + frames, dtype=np.int64)
        columns['task_index'] = np.full(frames, task_index, dtype=np.int64)
        episode_stats = {key: stats_mod.vector_stats(columns[key]) for key in columns}
        for key in self._video_keys:
            episode_stats[key] = self._image_stats[key].result()
        ordered = {key: episode_stats[key] for key in self._all if key in episode_stats}

        row: dict[str, Any] = {'episode_index': index, 'tasks': [task], 'length': frames}
        # frames
        chunk, file, existing = self._place('data', layout.DATA_PATH,
                                            self.info['data_files_size_in_mb'])
        table = tables.frames_table(columns, self._schema)
        if existing is not None:
            table = tables.concat([tables.read(existing), table])
        final = self.root / layout.chunk_path(layout.DATA_PATH, chunk, file)
        self._stage(staged, tables.write_atomic(table, final, self._work), final)
        row.update({'data/chunk_index': chunk, 'data/file_index': file,
                    'dataset_from_index': start, 'dataset_to_index': start + frames})
        # videos
        for key in self._video_keys:
            template = layout.VIDEO_PATH
            chunk, file, existing = self._place(f'videos/{key}', template,
                                                self.info['video_files_size_in_mb'],
                                                video_key=key)
            final = self.root / layout.chunk_path(template, chunk, file, video_key=key)
            tmp = self._work / f'{key}.joined.mp4'
            episode_file = self._finished[key]
            if existing is None:
                shutil.copyfile(episode_file, tmp)
                begin = 0.0
            else:
                # where the file ends, measured: frames of an episode whose save was cut
                # between two renames may follow the last saved one
                begin = video.duration_s(existing)
                video.append(existing, episode_file, tmp)
            self._stage(staged, tmp, final)
            row.update({f'videos/{key}/chunk_index': chunk, f'videos/{key}/file_index': file,
                        f'videos/{key}/from_timestamp': begin,
                        f'videos/{key}/to_timestamp': begin + video.duration_s(episode_file)})
            if not self.features[key].get('info'):
                self.features[key]['info'] = video.video_info(episode_file)
        for key, value in extra.items():
            row[key] = value
        for feature, values in ordered.items():
            for name, value in values.items():
                row[f'stats/{feature}/{name}'] = np.asarray(value).tolist()
        # episodes metadata (one file, a new one past the size limit as for frames)
        current = self._current('meta/episodes')
        chunk, file = current if current is not None else (0, 0)
        path = self.root / layout.chunk_path(layout.EPISODES_PATH, chunk, file)
        if current is not None and path.is_file() and (
                path.stat().st_size / 2 ** 20 >= self.info['data_files_size_in_mb']):
            chunk, file = layout.next_file(chunk, file, self.info['chunks_size'])
        row['meta/episodes/chunk_index'] = chunk
        row['meta/episodes/file_index'] = file
        same_file = [r for r in self.episodes
                     if (r['meta/episodes/chunk_index'], r['meta/episodes/file_index'])
                     == (chunk, file)]
        final = self.root / layout.chunk_path(layout.EPISODES_PATH, chunk, file)
        self._stage(staged, tables.write_atomic(tables.episodes_table(same_file + [row]),
                                                final, self._work), final)
        # tasks
        if task not in self.tasks:
            final = self.root / layout.TASKS_PATH
            self._stage(staged, tables.write_atomic(tables.tasks_table(self.tasks + [task]),
                                                    final, self._work), final)
        # stats and info
        all_stats = stats_mod.aggregate(self._episode_stats + [ordered])
        final = self.root / layout.STATS_PATH
        self._stage(staged, self._json_tmp(stats_mod.to_json(all_stats), final), final)
        info = dict(self.info)
        info['total_episodes'] = index + 1
        info['total_frames'] = start + frames
        info['total_tasks'] = len(self.tasks) + (task not in self.tasks)
        info['splits'] = {'train': f'0:{index + 1}'}
        info['features'] = layout.json_features(layout.all_features(self.features))
        final = self.root / layout.INFO_PATH
        self._stage(staged, self._json_tmp(info, final), final)
        self._pending_info = info
        return row, ordered

    def _json_tmp(self, data: Any, final: Path) -> Path:
        tmp = self._work / f'{final.name}.tmp'
        with open(tmp, 'w', encoding='utf-8') as f:
            f.write(layout.dumps(data))
            f.flush()
        return tmp

    def _write_json(self, data: Any, final: Path) -> None:
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self._json_tmp(data, final), final)

    # -- the end ---------------------------------------------------------------------------

    @_serial
    def finalize(self) -> dict[str, Any]:
        """Write the final info.json and stats.json, clear the incomplete mark, close.

        Refused while the current episode has frames (save or discard it first) and when
        no episode was saved (there is nothing to finalize).
        """
        self._check_open()
        if self._frames:
            raise InvalidArgument(f'the current episode has {self._frames} unsaved frames',
                                  where='finalize',
                                  allowed='save_episode() or discard_episode() first')
        if not self.episodes:
            raise InvalidArgument('no episode was saved; nothing to finalize',
                                  where='finalize', allowed='save_episode() first')
        info = dict(getattr(self, '_pending_info', self.info))
        info['total_episodes'] = len(self.episodes)
        info['total_frames'] = self.episodes[-1]['dataset_to_index']
        info['total_tasks'] = len(self.tasks)
        info['splits'] = {'train': f'0:{len(self.episodes)}'}
        info['features'] = layout.json_features(layout.all_features(self.features))
        try:
            self._write_json(info, self.root / layout.INFO_PATH)
            self._write_json(stats_mod.to_json(stats_mod.aggregate(self._episode_stats)),
                             self.root / layout.STATS_PATH)
            (self.root / layout.INCOMPLETE_MARKER).unlink(missing_ok=True)
        except OSError as err:
            raise _disk_error(err, 'finalizing') from None
        self.info = info
        summary = {'root': str(self.root), 'repo_id': self.repo_id, 'fps': self.fps,
                   'episodes': len(self.episodes), 'frames': info['total_frames'],
                   'tasks': list(self.tasks), 'cameras': list(self._video_keys),
                   'complete': True}
        self._shut()
        return summary

    @_serial
    def close(self) -> None:
        """Stop writing: the current episode is discarded, saved episodes stay (marked
        incomplete unless finalize() ran). A folder this writer made that got no episode
        is removed. Idempotent."""
        if self._closed:
            return
        self._shut()

    def _shut(self) -> None:
        for encoder in self._encoders.values():
            encoder.abandon()
        self._encoders = {}
        self._closed = True
        if self._was_complete and len(self.episodes) == self._episodes_at_open:
            # a finished dataset opened and closed with nothing added is finished still
            (self.root / layout.INCOMPLETE_MARKER).unlink(missing_ok=True)
        shutil.rmtree(self._work, ignore_errors=True)
        self._unlock()
        if not self.episodes and self._created:
            for rel in (layout.INFO_PATH, layout.INCOMPLETE_MARKER):
                (self.root / rel).unlink(missing_ok=True)
            for folder in [self.root / 'meta'] + ([self.root] if self._made_root else []):
                try:
                    folder.rmdir()
                except OSError:
                    pass

    def __enter__(self) -> 'DatasetWriter':
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, '_closed', True):
            try:
                self.close()
            except Exception:  # noqa: BLE001 - interpreter shutdown: the mark stays
                pass
