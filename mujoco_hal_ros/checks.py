"""Input checks shared by every boundary: numbers, vectors and names.

Python's ``bool`` is an ``int`` and ``numpy.bool_`` converts to float silently, so a stray
``True`` would otherwise become a 1.0 goal; these checks refuse both explicitly.
"""

import math
import numbers

import numpy as np

from .errors import InvalidArgument, UnknownName


def is_bool(value):
    return isinstance(value, (bool, np.bool_))


def finite_number(value, where):
    """Return ``value`` as a float, or raise InvalidArgument naming ``where``."""
    if is_bool(value):
        raise InvalidArgument(f'expected a number, got boolean {value!r}', where=where,
                              allowed='a finite real number')
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise InvalidArgument(f'expected a number, got {type(value).__name__} {value!r}',
                              where=where, allowed='a finite real number')
    try:
        out = float(value)
    except (OverflowError, ValueError, TypeError):
        raise InvalidArgument(f'expected a finite number, got {value!r}'[:200], where=where,
                              allowed='a finite real number') from None
    if not math.isfinite(out):
        raise InvalidArgument(f'expected a finite number, got {out!r}', where=where,
                              allowed='a finite real number')
    return out


def finite_vector(values, length, where):
    """Return a float64 array of ``length`` finite entries, refusing bools, NaN and inf."""
    if isinstance(values, (str, bytes)) or is_bool(values):
        raise InvalidArgument(f'expected {length} numbers, got {values!r}', where=where)
    if isinstance(values, np.ndarray):
        if values.dtype == np.bool_:
            raise InvalidArgument('expected numbers, got a boolean array', where=where)
        items = list(values.reshape(-1)) if values.ndim <= 1 else None
        if items is None:
            raise InvalidArgument(f'expected a flat vector, got shape {values.shape}',
                                  where=where)
    else:
        try:
            items = list(values)
        except TypeError:
            raise InvalidArgument(f'expected {length} numbers, got {values!r}',
                                  where=where) from None
    if length is not None and len(items) != length:
        raise InvalidArgument(f'expected {length} values, got {len(items)}', where=where)
    return np.array([finite_number(v, f'{where}[{i}]') for i, v in enumerate(items)],
                    dtype=np.float64)


def known_name(name, known, kind):
    """Check a name against a collection, listing the allowed ones on failure."""
    if not isinstance(name, str) or name not in known:
        raise UnknownName(kind, name, known)
    return name
