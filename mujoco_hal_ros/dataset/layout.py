"""The LeRobotDataset v3.0 layout: paths, the always-present columns, feature dicts.

Everything here follows what LeRobot's own writer (``lerobot.datasets``, also published on
its own as ``lerobot-dataset``) puts on disk, so that its loader reads our folders as its
own: one ``meta/info.json`` naming the features, frames in Parquet files of many episodes,
each camera as MP4 files of many episodes concatenated, episodes metadata in Parquet.
"""

from collections.abc import Mapping, Sequence
import json
import math
from typing import Any

import numpy as np

from ..checks import is_bool, unique_names
from ..errors import InvalidArgument, shorten

CODEBASE_VERSION = 'v3.0'

INFO_PATH = 'meta/info.json'
STATS_PATH = 'meta/stats.json'
TASKS_PATH = 'meta/tasks.parquet'
EPISODES_DIR = 'meta/episodes'
CHUNK_FILE = 'chunk-{chunk_index:03d}/file-{file_index:03d}'
EPISODES_PATH = EPISODES_DIR + '/' + CHUNK_FILE + '.parquet'
DATA_PATH = 'data/' + CHUNK_FILE + '.parquet'
VIDEO_PATH = 'videos/{video_key}/' + CHUNK_FILE + '.mp4'

# LeRobot's defaults: a new file once one passes this size, a new chunk folder every
# CHUNKS_SIZE files.
CHUNKS_SIZE = 1000
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 200

# Written by us, never by LeRobot: present from the first write until finalize(). A folder
# with it was interrupted (a crash, a kill, close() without finalize()): its saved episodes
# are whole, but it must not pass for a finished dataset.
INCOMPLETE_MARKER = 'INCOMPLETE'
WORK_DIR = '.writing'          # the current episode's video files while it is recorded

# The columns every frame has, whatever the features (LeRobot's DEFAULT_FEATURES).
DEFAULT_FEATURES: dict[str, dict[str, Any]] = {
    'timestamp': {'dtype': 'float32', 'shape': (1,), 'names': None},
    'frame_index': {'dtype': 'int64', 'shape': (1,), 'names': None},
    'episode_index': {'dtype': 'int64', 'shape': (1,), 'names': None},
    'index': {'dtype': 'int64', 'shape': (1,), 'names': None},
    'task_index': {'dtype': 'int64', 'shape': (1,), 'names': None},
}

NUMERIC_DTYPES = ('float32', 'float64', 'int32', 'int64', 'uint8', 'bool')
VIDEO = 'video'
IMAGE_NAMES = ['height', 'width', 'channels']
STATE = 'observation.state'
ACTION = 'action'
IMAGES_PREFIX = 'observation.images.'

# LeRobot's loader matches a frame's timestamp to a decoded video frame within this
# (its default tolerance_s).
TIMESTAMP_TOLERANCE_S = 1e-4

# Episode metadata column names the writer fills itself; extra columns may not take them.
RESERVED_EPISODE_COLUMNS = ('episode_index', 'tasks', 'length', 'dataset_from_index',
                            'dataset_to_index')
RESERVED_EPISODE_PREFIXES = ('stats/', 'data/', 'videos/', 'meta/')


def chunk_path(template: str, chunk_index: int, file_index: int, **kw: Any) -> str:
    return template.format(chunk_index=chunk_index, file_index=file_index, **kw)


def next_file(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    """The (chunk, file) after this one: a new chunk folder every ``chunks_size`` files."""
    if file_index >= chunks_size - 1:
        return chunk_index + 1, 0
    return chunk_index, file_index + 1


def _names(values: Any, where: str) -> list[str]:
    names = unique_names(values, where, 'name')
    for i, name in enumerate(names):
        if not name:
            raise InvalidArgument('an empty name', where=f'{where}[{i}]',
                                  allowed='non-empty names')
    return names


def _camera_size(name: Any, size: Any) -> tuple[int, int]:
    where = f'cameras[{shorten(name)}]'
    if not isinstance(name, str) or not name or '/' in name:
        raise InvalidArgument(f'a camera name must be a non-empty string without "/", got '
                              f'{shorten(name)}', where='cameras')
    try:
        height, width = size
    except (TypeError, ValueError):
        raise InvalidArgument(f'expected (height, width), got {shorten(size)}',
                              where=where) from None
    for value in (height, width):
        if is_bool(value) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise InvalidArgument(f'expected positive integer (height, width), got '
                                  f'{shorten(size)}', where=where)
        if value % 2:
            raise InvalidArgument(f'{shorten(size)}: MP4 (yuv420p) needs even sizes',
                                  where=where, allowed='even height and width')
    return int(height), int(width)


def features_for(state_names: Sequence[str], action_names: Sequence[str],
                 cameras: Mapping[str, tuple[int, int]] | None = None, *,
                 velocity_names: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """LeRobot feature dicts for a robot: ``observation.state``, ``action``, one video a camera.

    ``observation.state`` holds the positions named ``state_names`` then, where asked, the
    velocities of ``velocity_names`` named ``<name>.vel``; ``action`` the commanded
    setpoints in ``action_names`` order; ``cameras`` maps a camera name to its image
    (height, width), stored as ``observation.images.<name>`` (HxWx3 uint8 frames).
    The always-present columns (timestamp, indices) are the writer's to add.
    """
    state = _names(state_names, 'state_names')
    velocities = _names(velocity_names or [], 'velocity_names')
    names = state + [f'{name}.vel' for name in velocities]
    names = _names(names, 'state_names + velocity_names')
    action = _names(action_names, 'action_names')
    if not names:
        raise InvalidArgument('no state names', where='state_names',
                              allowed='at least one joint')
    if not action:
        raise InvalidArgument('no action names', where='action_names',
                              allowed='at least one goal channel')
    features: dict[str, dict[str, Any]] = {
        STATE: {'dtype': 'float32', 'shape': (len(names),), 'names': names},
        ACTION: {'dtype': 'float32', 'shape': (len(action),), 'names': action},
    }
    if cameras is not None and not isinstance(cameras, Mapping):
        raise InvalidArgument(f'expected {{camera: (height, width)}}, got {shorten(cameras)}',
                              where='cameras')
    for name, size in (cameras or {}).items():
        height, width = _camera_size(name, size)
        features[IMAGES_PREFIX + name] = {'dtype': VIDEO, 'shape': (height, width, 3),
                                          'names': list(IMAGE_NAMES)}
    return features


def check_features(features: Any, use_videos: bool) -> dict[str, dict[str, Any]]:
    """A caller's feature dicts, checked and normalised (shapes as tuples, no ``info``)."""
    if not isinstance(features, Mapping) or not features:
        raise InvalidArgument(f'expected a dict of LeRobot feature dicts, got '
                              f'{shorten(features)}', where='features',
                              allowed='features_for(...)')
    out: dict[str, dict[str, Any]] = {}
    for key, spec in features.items():
        where = f'features[{shorten(key)}]'
        if not isinstance(key, str) or not key or '/' in key:
            raise InvalidArgument('a feature name must be a non-empty string without "/"',
                                  where=where)
        if key in DEFAULT_FEATURES:
            raise InvalidArgument(f'{key!r} is written by the writer itself', where=where,
                                  allowed='features other than ' + ', '.join(DEFAULT_FEATURES))
        if not isinstance(spec, Mapping) or 'dtype' not in spec or 'shape' not in spec:
            raise InvalidArgument('expected {"dtype", "shape", "names"}', where=where)
        dtype = spec['dtype']
        try:
            shape = tuple(int(s) for s in spec['shape'])
        except (TypeError, ValueError):
            raise InvalidArgument(f'shape {shorten(spec["shape"])} is not a tuple of sizes',
                                  where=where) from None
        if not shape or any(is_bool(s) or s <= 0 for s in shape):
            raise InvalidArgument(f'shape {shorten(spec["shape"])}', where=where,
                                  allowed='positive sizes')
        names = spec.get('names')
        if dtype == VIDEO:
            if not use_videos:
                raise InvalidArgument('a video feature in a dataset made with use_videos=False',
                                      where=where, allowed='use_videos=True')
            if len(shape) != 3 or shape[2] != 3:
                raise InvalidArgument(f'a video feature is (height, width, 3), got {shape}',
                                      where=where)
            _camera_size(key, shape[:2])
            names = list(IMAGE_NAMES)
        elif dtype in NUMERIC_DTYPES:
            if len(shape) != 1:
                raise InvalidArgument(f'a numeric feature is one vector, got shape {shape}',
                                      where=where, allowed='shape (n,)')
            if names is not None:
                names = _names(names, f'{where}.names')
                if len(names) != shape[0]:
                    raise InvalidArgument(f'{len(names)} names for shape {shape}',
                                          where=where, allowed='one name per entry')
        else:
            raise InvalidArgument(f'dtype {shorten(dtype)}', where=where,
                                  allowed=', '.join(NUMERIC_DTYPES + (VIDEO,)))
        out[key] = {'dtype': dtype, 'shape': shape, 'names': names}
    return out


def all_features(features: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The caller's features then the default columns, in LeRobot's order."""
    return {**features, **DEFAULT_FEATURES}


def same_features(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal as info.json holds them: dtype, shape and names; video ``info`` ignored."""
    if list(a) != list(b):
        return False
    for key in a:
        fa, fb = a[key], b[key]
        if (fa['dtype'] != fb['dtype'] or tuple(fa['shape']) != tuple(fb['shape'])
                or (fa.get('names') or None) != (fb.get('names') or None)):
            return False
    return True


def json_features(features: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for key, spec in features.items():
        item = {'dtype': spec['dtype'], 'shape': list(spec['shape']), 'names': spec['names']}
        if 'info' in spec:
            item['info'] = spec['info']
        out[key] = item
    return out


def fps_value(fps: Any) -> int | float:
    """fps as info.json holds it (an int where whole, as LeRobot writes it)."""
    if is_bool(fps) or not isinstance(fps, (int, float, np.integer, np.floating)):
        raise InvalidArgument(f'fps must be a number, got {shorten(fps)}', where='fps',
                              allowed='a positive frame rate, e.g. 30')
    value = float(fps)
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgument(f'fps must be positive and finite, got {shorten(fps)}',
                              where='fps', allowed='a positive frame rate, e.g. 30')
    if value > 1000:
        raise InvalidArgument(f'fps {value} is above 1000', where='fps',
                              allowed='a positive frame rate up to 1000')
    return int(value) if value.is_integer() else value


def new_info(*, fps: int | float, features: Mapping[str, dict[str, Any]], robot_type: str,
             use_videos: bool) -> dict[str, Any]:
    """info.json of an empty dataset, key for key as LeRobot's create_empty_dataset_info."""
    return {
        'codebase_version': CODEBASE_VERSION,
        'robot_type': robot_type or None,
        'total_episodes': 0,
        'total_frames': 0,
        'total_tasks': 0,
        'chunks_size': CHUNKS_SIZE,
        'data_files_size_in_mb': DATA_FILES_SIZE_IN_MB,
        'video_files_size_in_mb': VIDEO_FILES_SIZE_IN_MB,
        'fps': fps,
        'splits': {},
        'data_path': DATA_PATH,
        'video_path': VIDEO_PATH if use_videos else None,
        'features': json_features(all_features(features)),
    }


def dumps(data: Any) -> str:
    """JSON as LeRobot writes its meta files (indent 4, UTF-8 kept)."""
    return json.dumps(data, indent=4, ensure_ascii=False)


def video_keys(features: Mapping[str, dict[str, Any]]) -> list[str]:
    return [key for key, spec in features.items() if spec['dtype'] == VIDEO]
