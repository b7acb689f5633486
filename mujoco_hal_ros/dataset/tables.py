"""Parquet tables of a dataset (pyarrow only): frames, episodes, tasks.

Frames are written with the column types and the schema metadata Hugging Face ``datasets``
writes for LeRobot's features (a vector is a fixed-size list, a (1,) feature a scalar), so
``datasets`` and LeRobot's loader read them with the types they declare. Each file is
written whole to a temporary name and renamed over the old one: a crash leaves the old
file or the new, never half of one.
"""

from collections.abc import Mapping, Sequence
import json
from pathlib import Path
from typing import Any

import numpy as np


def _pa() -> Any:
    import pyarrow  # type: ignore[import-untyped]
    return pyarrow


def _pq() -> Any:
    import pyarrow.parquet  # type: ignore[import-untyped]
    return pyarrow.parquet


def is_scalar(spec: Mapping[str, Any]) -> bool:
    return tuple(spec['shape']) == (1,)


def hf_feature(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The feature as ``datasets.Features.to_dict()`` writes it (Value, or List of length n)."""
    value = {'dtype': spec['dtype'], '_type': 'Value'}
    if is_scalar(spec):
        return value
    return {'feature': value, 'length': int(spec['shape'][0]), '_type': 'List'}


def frame_schema(features: Mapping[str, Mapping[str, Any]]) -> Any:
    """Arrow schema of the frame columns (video features have none)."""
    pa = _pa()
    fields, hf = [], {}
    for key, spec in features.items():
        if spec['dtype'] == 'video':
            continue
        kind = pa.from_numpy_dtype(np.dtype(spec['dtype']))
        if not is_scalar(spec):
            kind = pa.list_(pa.field('element', kind), int(spec['shape'][0]))
        fields.append(pa.field(key, kind))
        hf[key] = hf_feature(spec)
    metadata = {'huggingface': json.dumps({'info': {'features': hf}})}
    return pa.schema(fields, metadata=metadata)


def frames_table(columns: Mapping[str, np.ndarray], schema: Any) -> Any:
    """A table of frames from one array a column (frames x entries for vectors)."""
    pa = _pa()
    arrays = []
    for field in schema:
        data = np.ascontiguousarray(columns[field.name])
        if pa.types.is_fixed_size_list(field.type):
            flat = pa.array(data.reshape(-1), type=field.type.value_type)
            arrays.append(pa.FixedSizeListArray.from_arrays(flat, field.type.list_size))
        else:
            arrays.append(pa.array(data.reshape(-1), type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def write_atomic(table: Any, path: Path, tmp_dir: Path) -> Path:
    """``table`` into a temporary file next to ``tmp_dir``; returns it (rename it later)."""
    tmp_dir.mkdir(parents=True, exist_ok=True)
    tmp = tmp_dir / f'{path.parent.parent.name}-{path.parent.name}-{path.name}.tmp'
    _pq().write_table(table, tmp, compression='snappy')
    return tmp


def read(path: Path) -> Any:
    return _pq().read_table(path)


def concat(tables: Sequence[Any]) -> Any:
    return _pa().concat_tables(list(tables))


def episodes_table(rows: Sequence[Mapping[str, Any]]) -> Any:
    """Episode metadata rows -> a table; a column a row lacks is null there."""
    pa = _pa()
    keys: list[str] = []
    for row in rows:
        keys += [key for key in row if key not in keys]
    return pa.Table.from_pydict({key: [row.get(key) for row in rows] for key in keys})


def tasks_table(tasks: Sequence[str]) -> Any:
    """meta/tasks.parquet as pandas writes LeRobot's tasks frame: task_index, the task as
    the index (the ``pandas`` metadata lets ``pandas.read_parquet`` restore it)."""
    pa = _pa()
    pandas_meta = {
        'index_columns': ['__index_level_0__'],
        'column_indexes': [{'name': None, 'field_name': None, 'pandas_type': 'unicode',
                            'numpy_type': 'object', 'metadata': {'encoding': 'UTF-8'}}],
        'columns': [
            {'name': 'task_index', 'field_name': 'task_index', 'pandas_type': 'int64',
             'numpy_type': 'int64', 'metadata': None},
            {'name': None, 'field_name': '__index_level_0__', 'pandas_type': 'unicode',
             'numpy_type': 'object', 'metadata': None}],
        'attributes': {}, 'creator': {'library': 'pyarrow', 'version': pa.__version__},
        'pandas_version': '2.2.3'}
    schema = pa.schema([pa.field('task_index', pa.int64()),
                        pa.field('__index_level_0__', pa.large_string())],
                       metadata={'pandas': json.dumps(pandas_meta)})
    return pa.Table.from_arrays([pa.array(range(len(tasks)), pa.int64()),
                                 pa.array(list(tasks), pa.large_string())], schema=schema)


def column(table: Any, name: str, spec: Mapping[str, Any] | None = None) -> np.ndarray:
    """A frame column as numpy (frames, or frames x entries for a vector)."""
    col = table.column(name).combine_chunks()
    pa = _pa()
    if pa.types.is_fixed_size_list(col.type):
        return col.flatten().to_numpy(zero_copy_only=False).reshape(len(col), col.type.list_size)
    return col.to_numpy(zero_copy_only=False)
