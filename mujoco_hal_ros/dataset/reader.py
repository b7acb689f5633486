"""DatasetReader: a LeRobotDataset v3.0 folder read back as numpy, without PyTorch.

Replay plays an episode's actions from it, and the tests compare what was written with
what went in; both need the episode table (with its extra columns), one episode's frames
as arrays and a camera's decoded frames, and nothing of LeRobot's training machinery.
"""

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, InvalidArgument, shorten, UnknownName
from . import layout, stats as stats_mod, tables, video


class DatasetReader:
    """Read the dataset at ``root`` (complete or not: ``complete`` says which)."""

    def __init__(self, root: str | os.PathLike) -> None:
        if not isinstance(root, (str, os.PathLike)):
            raise InvalidArgument(f'expected a folder path, got {shorten(root)}', where='root')
        self.root = Path(root).expanduser().absolute()
        info_path = self.root / layout.INFO_PATH
        if not info_path.is_file():
            raise ConfigError(f'{self.root} is not a LeRobot dataset (no {layout.INFO_PATH})',
                              where='root')
        try:
            self.info: dict[str, Any] = json.loads(info_path.read_text())
        except ValueError as err:
            raise ConfigError(f'{info_path}: {err}', where='root') from None
        self.features: dict[str, dict[str, Any]] = self.info['features']
        self.fps = self.info['fps']
        self.complete = not (self.root / layout.INCOMPLETE_MARKER).exists()
        stats_path = self.root / layout.STATS_PATH
        self.stats = (stats_mod.from_json(json.loads(stats_path.read_text()))
                      if stats_path.is_file() else {})
        self._rows: list[dict[str, Any]] = []
        for path in sorted((self.root / layout.EPISODES_DIR).glob('*/*.parquet')):
            self._rows += tables.read(path).to_pylist()
        self.tasks: list[str] = []
        tasks_path = self.root / layout.TASKS_PATH
        if tasks_path.is_file():
            table = tables.read(tasks_path)
            pairs = zip(table.column('task_index').to_pylist(),
                        table.column('__index_level_0__').to_pylist(), strict=True)
            self.tasks = [name for _, name in sorted(pairs)]
        self._tables: dict[Path, Any] = {}

    @property
    def camera_keys(self) -> list[str]:
        return layout.video_keys(self.features)

    @property
    def episodes(self) -> list[dict[str, Any]]:
        """One dict an episode: its metadata columns (extra ones included), no stats."""
        return [{k: v for k, v in row.items() if not k.startswith('stats/')}
                for row in self._rows]

    def episode_stats(self, episode_index: int) -> dict[str, dict[str, np.ndarray]]:
        row = self._row(episode_index)
        out: dict[str, dict[str, np.ndarray]] = {}
        for key, value in row.items():
            if key.startswith('stats/') and value is not None:
                _, feature, name = key.split('/', 2)
                out.setdefault(feature, {})[name] = np.asarray(value)
        return out

    def _row(self, episode_index: int) -> dict[str, Any]:
        if (isinstance(episode_index, bool) or not isinstance(episode_index, (int, np.integer))
                or not 0 <= episode_index < len(self._rows)):
            raise InvalidArgument(f'episode {shorten(episode_index)}', where='episode_index',
                                  allowed=f'0..{len(self._rows) - 1}' if self._rows else 'none')
        return self._rows[int(episode_index)]

    def _table(self, path: Path) -> Any:
        if path not in self._tables:
            self._tables = {path: tables.read(path)}     # one file cached at a time
        return self._tables[path]

    def frames(self, episode_index: int) -> dict[str, np.ndarray]:
        """The episode's frame columns (not videos) as arrays, frames first."""
        row = self._row(episode_index)
        path = self.root / layout.chunk_path(self.info['data_path'], row['data/chunk_index'],
                                             row['data/file_index'])
        table = self._table(path)
        index = tables.column(table, 'index')
        keep = (index >= row['dataset_from_index']) & (index < row['dataset_to_index'])
        out = {}
        for key, spec in self.features.items():
            if spec['dtype'] == layout.VIDEO:
                continue
            out[key] = tables.column(table, key)[keep]
        return out

    def video_frames(self, episode_index: int, camera: str) -> np.ndarray:
        """The episode's decoded frames of ``camera`` (``observation.images.<name>`` or the
        name alone): N x H x W x 3 uint8."""
        key = camera if camera in self.features else layout.IMAGES_PREFIX + str(camera)
        if key not in self.camera_keys:
            raise UnknownName('camera', camera, self.camera_keys)
        return self.video_frames_with_times(episode_index, key)[1]

    def video_frames_with_times(self, episode_index: int, key: str
                                ) -> tuple[np.ndarray, np.ndarray]:
        """(presentation times in the file, frames) of one episode of one camera."""
        row = self._row(episode_index)
        path = self.video_path(episode_index, key)
        return video.decode(path, row[f'videos/{key}/from_timestamp'],
                            row[f'videos/{key}/to_timestamp'], layout.TIMESTAMP_TOLERANCE_S)

    def video_path(self, episode_index: int, key: str) -> Path:
        row = self._row(episode_index)
        return self.root / self.info['video_path'].format(
            video_key=key, chunk_index=row[f'videos/{key}/chunk_index'],
            file_index=row[f'videos/{key}/file_index'])

    def close(self) -> None:
        self._tables = {}

    def __enter__(self) -> 'DatasetReader':
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_dataset(root: str | os.PathLike) -> DatasetReader:
    return DatasetReader(root)
