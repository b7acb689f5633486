"""numpy arrays <-> FloatArray (shape + flat float64 data) for the pool interfaces.

Batches are large (1024 x 100 x 8 controls is 6.5 MB), so both directions move one buffer
instead of touching elements: rclpy keeps ``float64[]`` as ``array('d')``, which numpy reads
in place. Only the framing (shape against data length) is checked here; dtype, shape against
the model and finiteness are the pool's checks, so a message and a Python call are refused
with the same words.
"""

from collections.abc import Sequence
import math

import numpy as np
import numpy.typing as npt

from ...checks import unique_names
from ...errors import InvalidArgument, shorten
from ...msg import FloatArray
from ..conversions import doubles


def to_msg(values: npt.ArrayLike) -> FloatArray:
    """Any array-like -> FloatArray (row-major)."""
    arr = np.ascontiguousarray(values, dtype=np.float64)
    return FloatArray(shape=[int(s) for s in arr.shape], data=doubles(arr))


def given(msg: FloatArray) -> bool:
    """False for the empty FloatArray that stands for an argument left out."""
    return bool(len(msg.shape)) or bool(len(msg.data))


def from_msg(msg: FloatArray, where: str) -> npt.NDArray[np.float64] | None:
    """FloatArray -> read-only float64 ndarray, or None when not given."""
    if not given(msg):
        return None
    shape = tuple(int(s) for s in msg.shape)
    count = math.prod(shape) if shape else 1
    if not shape or count != len(msg.data):
        raise InvalidArgument(f'shape {list(shape)} does not hold {len(msg.data)} values',
                              where=where, allowed='shape whose product is the data length')
    try:
        flat = np.frombuffer(msg.data, dtype=np.float64)
    except (TypeError, ValueError):
        flat = np.asarray(msg.data, dtype=np.float64)
    return flat.reshape(shape)


def randomization(fields: Sequence[str], values: Sequence[FloatArray],
                  where: str = 'randomize') -> dict[str, npt.NDArray[np.float64]] | None:
    """Parallel name/value lists -> the pool's ``{field: array}`` (None when empty)."""
    if len(fields) != len(values):
        raise InvalidArgument(f'{len(fields)} field names but {len(values)} value arrays',
                              where=where, allowed='one randomize_values entry per field')
    out: dict[str, npt.NDArray[np.float64]] = {}
    for name, msg in zip(unique_names(fields, where, 'field'), values, strict=True):
        arr = from_msg(msg, f'{where}[{shorten(name)}]')
        if arr is None:
            raise InvalidArgument(f'field {shorten(name)} has no values', where=where,
                                  allowed='an array per field')
        out[name] = arr
    return out or None


def env_ids(ids: Sequence[int] | npt.NDArray[np.integer]) -> npt.NDArray[np.int64] | None:
    """int64[] -> the pool's env_ids (None = every environment)."""
    if len(ids) == 0:
        return None
    return np.asarray(ids, dtype=np.int64)
