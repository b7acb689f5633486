"""Boundary checks for batched inputs, all run before the pool touches any state.

Batched arrays are checked as a whole (dtype, shape, finiteness) instead of element by element
so a (1024, 10, 8) control block costs microseconds; nested Python lists are scanned once for
booleans because NumPy silently turns ``[True, 0.5]`` into ``[1.0, 0.5]``.
"""

from collections.abc import Sequence
import numbers
from typing import Any

import numpy as np

from ..checks import is_bool
from ..errors import InvalidArgument, shorten, UnknownName


def integer(value: Any, where: str, low: int, high: int) -> int:
    """An int in ``[low, high]``; booleans and floats are refused, even integral ones."""
    if is_bool(value) or not isinstance(value, (numbers.Integral, np.integer)):
        raise InvalidArgument(f'expected an integer, got {type(value).__name__} {shorten(value)}',
                              where=where, allowed=f'integer {low}..{high}')
    value = int(value)
    if not low <= value <= high:
        raise InvalidArgument(f'{shorten(value)} is out of range', where=where,
                              allowed=f'integer {low}..{high}')
    return value


def contains_bool(values: Any) -> bool:
    stack = [values]
    while stack:
        item = stack.pop()
        if is_bool(item):
            return True
        if isinstance(item, np.ndarray):
            if item.dtype == np.bool_ or (item.dtype == object and
                                          contains_bool(list(item.reshape(-1)))):
                return True
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def env_ids(ids: Any, nbatch: int, where: str = 'env_ids') -> np.ndarray:
    """Distinct environment indices as an intp array; ``None`` means every environment."""
    if ids is None:
        return np.arange(nbatch, dtype=np.intp)
    allowed = f'distinct integers 0..{nbatch - 1}, or None for all'
    if isinstance(ids, (str, bytes)) or is_bool(ids) or np.isscalar(ids):
        raise InvalidArgument(f'expected a sequence of indices, got {shorten(ids)}', where=where,
                              allowed=allowed)
    if contains_bool(ids):
        raise InvalidArgument('booleans are not environment indices', where=where,
                              allowed=allowed)
    try:
        arr = np.asarray(ids)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f'not a sequence of indices: {exc}', where=where,
                              allowed=allowed) from None
    if arr.size == 0:
        return np.zeros(0, dtype=np.intp)
    if arr.ndim != 1 or arr.dtype.kind not in 'iu':
        raise InvalidArgument(f'expected a flat list of integers, got shape {arr.shape} '
                              f'dtype {arr.dtype}', where=where, allowed=allowed)
    bad = arr[(arr < 0) | (arr >= nbatch)]
    if bad.size:
        raise InvalidArgument(f'index {int(bad[0])} is out of range', where=where,
                              allowed=allowed)
    out = arr.astype(np.intp)
    uniq, counts = np.unique(out, return_counts=True)
    if uniq.size != out.size:
        raise InvalidArgument(f'index {int(uniq[counts > 1][0])} is listed twice',
                              where=where, allowed=allowed)
    return out


def _shape_text(shape):
    dims = ['any' if s is None else str(s) for s in shape]
    return '(' + ', '.join(dims) + (',)' if len(shape) == 1 else ')')


def _matches(actual, shape):
    return len(actual) == len(shape) and all(
        a == s if s is not None else a >= 1 for a, s in zip(actual, shape, strict=True))


def float_array(values: Any, shapes: Sequence[tuple], where: str, *,
                low: float | None = None) -> tuple[np.ndarray, int]:
    """A finite float64 array whose shape is one of ``shapes``; returns ``(array, index)``.

    ``index`` tells which of the allowed shapes matched so callers can broadcast; a ``None``
    dimension matches any positive length.
    """
    def bad(message: str, extra: str = '') -> InvalidArgument:
        # the description of what is allowed is built only for an error: this runs on
        # every pool call, where a few string joins are a measurable share of a small batch
        allowed = ' or '.join(_shape_text(s) for s in shapes) + ' finite numbers' + extra
        return InvalidArgument(message, where=where, allowed=allowed)

    if values is None or isinstance(values, (str, bytes)) or is_bool(values):
        raise bad(f'expected an array, got {shorten(values)}')
    if not isinstance(values, np.ndarray) and contains_bool(values):
        raise bad('booleans are not numbers here')
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise bad(f'not a numeric array: {exc}') from None
    if arr.dtype == np.bool_ or arr.dtype.kind not in 'fiu':
        raise bad(f'expected numbers, got dtype {arr.dtype}')
    index = next((i for i, shape in enumerate(shapes) if _matches(arr.shape, shape)), None)
    if index is None:
        raise bad(f'shape {_shape_text(arr.shape)} is wrong')
    arr = np.asarray(arr, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise bad('contains NaN or infinity')
    if low is not None and arr.size and arr.min() < low:
        raise bad(f'value {arr.min()!r} is below {low}', f' >= {low}')
    return arr, index


def name_or_index(value: Any, names: Sequence[str], kind: str, where: str) -> int:
    """Resolve a MuJoCo object given by name or index; names list every id in order."""
    if isinstance(value, str):
        try:
            return names.index(value)
        except ValueError:
            raise UnknownName(kind, value, [n for n in names if n], where=where) from None
    if is_bool(value) or not isinstance(value, (numbers.Integral, np.integer)):
        raise InvalidArgument(f'expected a {kind} name or index, got {shorten(value)}',
                              where=where,
                              allowed=f'{kind} names or indices 0..{len(names) - 1}')
    if not 0 <= int(value) < len(names):
        raise InvalidArgument(f'{kind} index {shorten(int(value))} is out of range', where=where,
                              allowed=f'0..{len(names) - 1}' if names else f'none (no {kind})')
    return int(value)
