"""check_dataset: what a folder gets wrong about the LeRobotDataset v3.0 format.

Independent of the writer: it reads the files back (pyarrow, PyAV, json) and checks them
against the format LeRobot's loader relies on: meta/info.json's keys and totals, the
default columns, Parquet column types, contiguous indices and episode boundaries, tasks,
per-episode and whole-dataset statistics against the frames themselves, and each video's
frames at the timestamps the loader will ask for. An empty list means none found.
"""

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from . import layout, tables, video

INFO_KEYS = ('codebase_version', 'robot_type', 'total_episodes', 'total_frames', 'total_tasks',
             'chunks_size', 'data_files_size_in_mb', 'video_files_size_in_mb', 'fps', 'splits',
             'data_path', 'video_path', 'features')
STAT_KEYS = ('min', 'max', 'mean', 'std', 'count')
EPISODE_KEYS = ('episode_index', 'tasks', 'length', 'data/chunk_index', 'data/file_index',
                'dataset_from_index', 'dataset_to_index', 'meta/episodes/chunk_index',
                'meta/episodes/file_index')
VIDEO_INFO_KEYS = ('video.height', 'video.width', 'video.codec', 'video.pix_fmt',
                   'video.is_depth_map', 'video.fps', 'video.channels', 'has_audio')


def _close(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol))


def _check_info(info: Any, problems: list[str]) -> bool:
    if not isinstance(info, dict):
        problems.append('info.json is not an object')
        return False
    missing = [k for k in INFO_KEYS if k not in info]
    if missing:
        problems.append(f'info.json lacks {missing}')
        return False
    if info['codebase_version'] != layout.CODEBASE_VERSION:
        problems.append(f'codebase_version {info["codebase_version"]!r}, '
                        f'not {layout.CODEBASE_VERSION!r}')
    fps = info['fps']
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not (
            math.isfinite(fps) and fps > 0):
        problems.append(f'fps {fps!r} is not a positive number')
        return False
    if info['data_path'] != layout.DATA_PATH:
        problems.append(f'data_path {info["data_path"]!r}, LeRobot writes {layout.DATA_PATH!r}')
    features = info['features']
    videos = [k for k, f in features.items() if isinstance(f, dict) and f.get('dtype') == 'video']
    if videos and info['video_path'] != layout.VIDEO_PATH:
        problems.append(f'video_path {info["video_path"]!r}, LeRobot writes '
                        f'{layout.VIDEO_PATH!r}')
    for key, spec in layout.DEFAULT_FEATURES.items():
        have = features.get(key)
        if not have or have.get('dtype') != spec['dtype'] or list(have.get('shape', ())) != [1]:
            problems.append(f'feature {key!r} is {have!r}, LeRobot writes dtype '
                            f'{spec["dtype"]} shape [1]')
    for key, spec in features.items():
        if not isinstance(spec, dict) or not {'dtype', 'shape', 'names'} <= set(spec):
            problems.append(f'feature {key!r} lacks dtype/shape/names')
            continue
        if '/' in key:
            problems.append(f'feature {key!r} has "/" in its name')
        shape = spec['shape']
        if not isinstance(shape, list) or not all(isinstance(s, int) and s > 0 for s in shape):
            problems.append(f'feature {key!r} shape {shape!r} is not a list of sizes')
            continue
        if spec['dtype'] == 'video':
            if len(shape) != 3 or spec['names'] != layout.IMAGE_NAMES:
                problems.append(f'video {key!r}: shape {shape} names {spec["names"]}, LeRobot '
                                f'reads [h, w, 3] {layout.IMAGE_NAMES}')
            vinfo = spec.get('info') or {}
            missing = [k for k in VIDEO_INFO_KEYS if k not in vinfo]
            if missing and info['total_episodes']:
                problems.append(f'video {key!r} info lacks {missing}')
            elif vinfo and [vinfo['video.height'], vinfo['video.width']] != shape[:2]:
                problems.append(f'video {key!r}: info says {vinfo["video.height"]}x'
                                f'{vinfo["video.width"]}, shape {shape}')
        elif spec['dtype'] not in layout.NUMERIC_DTYPES + ('string', 'image'):
            problems.append(f'feature {key!r} dtype {spec["dtype"]!r}')
        elif spec['names'] is not None and len(shape) == 1 and len(spec['names']) != shape[0]:
            problems.append(f'feature {key!r}: {len(spec["names"])} names for shape {shape}')
    n = info['total_episodes']
    if info['splits'] != ({'train': f'0:{n}'} if n else {}):
        problems.append(f'splits {info["splits"]!r} for {n} episodes')
    return True


def _check_frames(root: Path, info: dict, rows: list[dict], problems: list[str]
                  ) -> dict[int, dict[str, np.ndarray]]:
    """Data files: types, row counts, indices; returns each episode's columns."""
    features = info['features']
    schema = tables.frame_schema({k: {**v, 'shape': tuple(v['shape'])}
                                  for k, v in features.items()})
    per_episode: dict[int, dict[str, np.ndarray]] = {}
    files = sorted((root / 'data').glob('*/*.parquet'))
    total = 0
    all_index: list[np.ndarray] = []
    for path in files:
        table = tables.read(path)
        total += table.num_rows
        for field in schema:
            if field.name not in table.column_names:
                problems.append(f'{path.relative_to(root)} lacks column {field.name!r}')
            elif table.schema.field(field.name).type != field.type:
                problems.append(f'{path.relative_to(root)}: {field.name} is '
                                f'{table.schema.field(field.name).type}, the feature says '
                                f'{field.type}')
        meta = (table.schema.metadata or {}).get(b'huggingface')
        if meta is None:
            problems.append(f'{path.relative_to(root)} has no huggingface features metadata')
        else:
            hf = json.loads(meta)['info']['features']
            want = json.loads(schema.metadata[b'huggingface'])['info']['features']
            if hf != want:
                problems.append(f'{path.relative_to(root)}: huggingface features {hf} != {want}')
        if problems:
            return per_episode
        columns = {name: tables.column(table, name) for name in table.column_names}
        all_index.append(columns['index'])
        for row in rows:
            if root / layout.chunk_path(info['data_path'], row['data/chunk_index'],
                                        row['data/file_index']) != path:
                continue
            keep = columns['episode_index'] == row['episode_index']
            per_episode[row['episode_index']] = {k: v[keep] for k, v in columns.items()}
    if total != info['total_frames']:
        problems.append(f'{total} frames in data/, info.json says {info["total_frames"]}')
    if all_index:
        index = np.sort(np.concatenate(all_index))
        if not np.array_equal(index, np.arange(len(index))):
            problems.append('the index column is not 0..total_frames-1, each once')
    for row in rows:
        ep = row['episode_index']
        cols = per_episode.get(ep)
        if cols is None:
            problems.append(f'episode {ep}: no frames in its data file')
            continue
        n = row['length']
        if len(cols['index']) != n:
            problems.append(f'episode {ep}: {len(cols["index"])} frames, length says {n}')
            continue
        if not np.array_equal(cols['index'], np.arange(row['dataset_from_index'],
                                                       row['dataset_to_index'])):
            problems.append(f'episode {ep}: index is not dataset_from..to_index')
        if not np.array_equal(cols['frame_index'], np.arange(n)):
            problems.append(f'episode {ep}: frame_index is not 0..{n - 1}')
        if n > 1 and not (np.diff(cols['timestamp']) > 0).all():
            problems.append(f'episode {ep}: timestamps do not increase')
        tasks = set(cols['task_index'].tolist())
        if any(t < 0 or t >= info['total_tasks'] for t in tasks):
            problems.append(f'episode {ep}: task_index {sorted(tasks)} beyond total_tasks')
        for key, spec in features.items():
            if spec['dtype'] in ('float32', 'float64') and key in cols:
                if not np.isfinite(cols[key]).all():
                    problems.append(f'episode {ep}: {key} has NaN or inf')
    return per_episode


def _check_stats(root: Path, info: dict, rows: list[dict],
                 frames: dict[int, dict[str, np.ndarray]], problems: list[str]) -> None:
    from . import stats as stats_mod
    path = root / layout.STATS_PATH
    if not path.is_file():
        problems.append(f'{layout.STATS_PATH} is missing')
        return
    stats = stats_mod.from_json(json.loads(path.read_text()))
    features = info['features']
    for key, spec in features.items():
        if key not in stats:
            problems.append(f'stats.json lacks {key!r}')
            continue
        got = stats[key]
        missing = [k for k in STAT_KEYS + stats_mod.QUANTILE_KEYS if k not in got]
        if missing:
            problems.append(f'stats.json {key!r} lacks {missing}')
            continue
        want_shape = (3, 1, 1) if spec['dtype'] == 'video' else tuple(spec['shape'])
        for name in STAT_KEYS + stats_mod.QUANTILE_KEYS:
            shape = (1,) if name == 'count' else want_shape
            if got[name].shape != shape:
                problems.append(f'stats.json {key}/{name} has shape {got[name].shape}, '
                                f'LeRobot writes {shape}')
        if spec['dtype'] == 'video':
            if ((got['min'] < 0) | (got['max'] > 1)).any():
                problems.append(f'stats.json {key}: image statistics are not in [0, 1]')
            continue
        if int(got['count'][0]) != info['total_frames']:
            problems.append(f'stats.json {key}: count {got["count"]} for '
                            f'{info["total_frames"]} frames')
        if len(frames) != len(rows) or not rows:
            continue
        values = np.concatenate([frames[r['episode_index']][key] for r in rows])
        values = values.reshape(len(values), -1).astype(np.float64)
        for name, fn in (('min', np.min), ('max', np.max), ('mean', np.mean), ('std', np.std)):
            if not _close(got[name].reshape(-1), fn(values, axis=0), rtol=1e-4, atol=1e-5):
                problems.append(f'stats.json {key}/{name} is {got[name].tolist()}, the frames '
                                f'give {fn(values, axis=0).tolist()}')
    for row in rows:
        for key in features:
            if f'stats/{key}/mean' not in row:
                problems.append(f'episode {row["episode_index"]}: no stats/{key} columns')
                break


def _check_videos(root: Path, info: dict, rows: list[dict],
                  frames: dict[int, dict[str, np.ndarray]], problems: list[str]) -> None:
    fps = info['fps']
    for key, spec in info['features'].items():
        if spec['dtype'] != 'video':
            continue
        end_of: dict[Path, float] = {}
        for row in rows:
            ep = row['episode_index']
            cols = [f'videos/{key}/{c}' for c in ('chunk_index', 'file_index',
                                                  'from_timestamp', 'to_timestamp')]
            if any(c not in row for c in cols):
                problems.append(f'episode {ep}: no videos/{key} columns')
                continue
            path = root / info['video_path'].format(
                video_key=key, chunk_index=row[cols[0]], file_index=row[cols[1]])
            if not path.is_file():
                problems.append(f'episode {ep}: {path.relative_to(root)} is missing')
                continue
            begin, end = row[cols[2]], row[cols[3]]
            if abs(begin - end_of.get(path, 0.0)) > layout.TIMESTAMP_TOLERANCE_S:
                problems.append(f'episode {ep}: {key} starts at {begin} s, the previous '
                                f'episode in that file ends at {end_of.get(path, 0.0)} s')
            end_of[path] = end
            if abs((end - begin) - row['length'] / fps) > 0.5 / fps:
                problems.append(f'episode {ep}: {key} spans {end - begin} s for '
                                f'{row["length"]} frames at {fps} fps')
            times, images = video.decode(path, begin, end, layout.TIMESTAMP_TOLERANCE_S)
            if len(images) != row['length']:
                problems.append(f'episode {ep}: {len(images)} {key} frames decoded, length '
                                f'says {row["length"]}')
                continue
            if images.shape[1:] != tuple(spec['shape']):
                problems.append(f'episode {ep}: {key} frames are {images.shape[1:]}, the '
                                f'feature says {spec["shape"]}')
            stamps = frames.get(ep, {}).get('timestamp')
            if stamps is not None and len(stamps) == len(times):
                off = np.abs(begin + stamps.astype(np.float64) - times)
                if off.max() >= layout.TIMESTAMP_TOLERANCE_S:
                    problems.append(f'episode {ep}: {key} frame times differ from '
                                    f'from_timestamp + timestamp by up to {off.max():.6f} s '
                                    f'(LeRobot allows {layout.TIMESTAMP_TOLERANCE_S})')


def check_dataset(root: str | os.PathLike, *, videos: bool = True) -> list[str]:
    """Problems found in the dataset at ``root``; empty when it is a complete, consistent
    LeRobotDataset v3.0. ``videos=False`` skips decoding the camera files. A file that
    cannot be read at all is a problem too, never an exception."""
    problems: list[str] = []
    try:
        return _check(Path(root), videos, problems)
    except Exception as err:  # noqa: BLE001 - a damaged file: the reason is the finding
        return problems + [f'unreadable: {type(err).__name__}: {err}']


def _check(root: Path, videos: bool, problems: list[str]) -> list[str]:
    if not (root / layout.INFO_PATH).is_file():
        return [f'{root} has no {layout.INFO_PATH}']
    if (root / layout.INCOMPLETE_MARKER).exists():
        problems.append(f'{layout.INCOMPLETE_MARKER}: the writer did not finalize this dataset')
    try:
        info = json.loads((root / layout.INFO_PATH).read_text())
    except ValueError as err:
        return problems + [f'info.json: {err}']
    if not _check_info(info, problems):
        return problems
    tasks_path = root / layout.TASKS_PATH
    if not tasks_path.is_file():
        problems.append(f'{layout.TASKS_PATH} is missing')
        return problems
    tasks = tables.read(tasks_path)
    if tasks.column_names != ['task_index', '__index_level_0__']:
        problems.append(f'tasks.parquet columns {tasks.column_names}')
        return problems
    names = tasks.column('__index_level_0__').to_pylist()
    if sorted(tasks.column('task_index').to_pylist()) != list(range(len(names))):
        problems.append('task_index in tasks.parquet is not 0..n-1')
    if len(set(names)) != len(names) or len(names) != info['total_tasks']:
        problems.append(f'{len(names)} tasks ({len(set(names))} distinct), info.json says '
                        f'{info["total_tasks"]}')
    rows: list[dict[str, Any]] = []
    for path in sorted((root / layout.EPISODES_DIR).glob('*/*.parquet')):
        rows += tables.read(path).to_pylist()
    if len(rows) != info['total_episodes']:
        problems.append(f'{len(rows)} episodes in meta/episodes, info.json says '
                        f'{info["total_episodes"]}')
    if [r.get('episode_index') for r in rows] != list(range(len(rows))):
        problems.append('episode_index in meta/episodes is not 0..n-1 in order')
        return problems
    position = 0
    for row in rows:
        missing = [k for k in EPISODE_KEYS if k not in row]
        if missing:
            problems.append(f'episode {row["episode_index"]} lacks {missing}')
            return problems
        if row['dataset_from_index'] != position or (
                row['dataset_to_index'] - row['dataset_from_index'] != row['length']):
            problems.append(f'episode {row["episode_index"]}: frames '
                            f'{row["dataset_from_index"]}..{row["dataset_to_index"]} for length '
                            f'{row["length"]} after {position}')
        position = row['dataset_to_index']
        if not row['tasks'] or any(t not in names for t in row['tasks']):
            problems.append(f'episode {row["episode_index"]}: tasks {row["tasks"]} not in '
                            f'tasks.parquet')
    if problems:
        return problems
    frames = _check_frames(root, info, rows, problems)
    if problems:
        return problems
    for row in rows:
        ep = row['episode_index']
        want = {names.index(t) for t in row['tasks']}
        if not set(frames[ep]['task_index'].tolist()) <= want:
            problems.append(f'episode {ep}: frames name tasks beyond its {row["tasks"]}')
    _check_stats(root, info, rows, frames, problems)
    if videos:
        _check_videos(root, info, rows, frames, problems)
    return problems
