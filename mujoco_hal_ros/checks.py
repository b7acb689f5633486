"""Input checks shared by every boundary: numbers, vectors, names and structured text.

Python's ``bool`` is an ``int`` and ``numpy.bool_`` converts to float silently, so a stray
``True`` would otherwise become a 1.0 goal; these checks refuse both explicitly.
"""

from collections.abc import Collection
import json
import math
import numbers
import re
from typing import Any

import numpy as np

from .errors import InvalidArgument, shorten, UnknownName

# In type hints: numbers in any shape a caller may hand over (a float, a list, a tuple, an
# ndarray), checked and converted by the function that takes them. numpy's own ArrayLike is
# a union that arithmetic on the unconverted value does not type-check against.
Vector = Any


def is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def finite_number(value: Any, where: str) -> float:
    """Return ``value`` as a float, or raise InvalidArgument naming ``where``."""
    if is_bool(value):
        raise InvalidArgument(f'expected a number, got boolean {shorten(value)}', where=where,
                              allowed='a finite real number')
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise InvalidArgument(f'expected a number, got {type(value).__name__} {shorten(value)}',
                              where=where, allowed='a finite real number')
    try:
        out = float(value)
    except (OverflowError, ValueError, TypeError):
        raise InvalidArgument(f'expected a finite number, got {shorten(value)}', where=where,
                              allowed='a finite real number') from None
    if not math.isfinite(out):
        raise InvalidArgument(f'expected a finite number, got {out!r}', where=where,
                              allowed='a finite real number')
    return out


def finite_vector(values: Any, length: int | None, where: str) -> np.ndarray:
    """Return a float64 array of ``length`` finite entries, refusing bools, NaN and inf."""
    if isinstance(values, (str, bytes)) or is_bool(values):
        raise InvalidArgument(f'expected {length} numbers, got {shorten(values)}', where=where)
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
            raise InvalidArgument(f'expected {length} numbers, got {shorten(values)}',
                                  where=where) from None
    if length is not None and len(items) != length:
        raise InvalidArgument(f'expected {length} values, got {len(items)}', where=where)
    return np.array([finite_number(v, f'{where}[{i}]') for i, v in enumerate(items)],
                    dtype=np.float64)


def known_name(name: Any, known: Collection[str], kind: str) -> str:
    """Check a name against a collection, listing the allowed ones on failure."""
    if not isinstance(name, str) or name not in known:
        raise UnknownName(kind, name, known)
    return name


def unique_names(names: Any, where: str, kind: str = 'name') -> list[str]:
    """``names`` as a list of strings, each once; a duplicate is refused, naming it.

    Names arrive as parallel lists (ROS ``names``/``values`` arrays); turned into a dict, a
    name given twice would silently keep one of its values, so ``[pan, pan] = [NaN, 0.3]``
    would apply 0.3. Every boundary that takes a name list goes through here.
    """
    if isinstance(names, (str, bytes)) or is_bool(names):
        raise InvalidArgument(f'expected a list of {kind}s, got {shorten(names)}', where=where)
    try:
        names = list(names)
    except TypeError:
        raise InvalidArgument(f'expected a list of {kind}s, got {shorten(names)}',
                              where=where) from None
    seen = set()
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise InvalidArgument(f'expected a {kind}, got {type(name).__name__} '
                                  f'{shorten(name)}', where=f'{where}[{i}]')
        if name in seen:
            raise InvalidArgument(f'{kind} {shorten(name)} is given twice', where=where,
                                  allowed=f'each {kind} once')
        seen.add(name)
    return names


def named_values(names: Any, values: Any, where: str, kind: str = 'name') -> dict[str, Any]:
    """Parallel name and value lists -> ``{name: value}``, refusing what a dict would hide:
    a length mismatch or a name given twice."""
    names = unique_names(names, where, kind)
    try:
        values = list(values)
    except TypeError:
        raise InvalidArgument(f'expected a list of values, got {shorten(values)}',
                              where=where) from None
    if len(values) != len(names):
        raise InvalidArgument(f'{len(names)} {kind}s but {len(values)} values', where=where,
                              allowed=f'one value per {kind}')
    return dict(zip(names, values, strict=True))


# Structured text from outside (a service's JSON field): at most this many bytes, nested at
# most this deep. Python's json recurses once per level, so 10,000 ``[`` raise
# RecursionError inside the parser; a depth counted before parsing refuses them in one pass.
MAX_JSON_BYTES = 4 << 20        # explicit rgba for 200k geoms fits
MAX_JSON_DEPTH = 32             # randomize needs 3 ({field: [[...]]})
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _constant(name):
    raise InvalidArgument(f'{name} is not a JSON number', where='json',
                          allowed='finite numbers only')


def json_value(text: Any, where: str, max_bytes: int = MAX_JSON_BYTES,
               max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``text`` parsed as JSON, refused (INVALID_ARGUMENT naming ``where`` and the limit)
    when it is not a string, longer than ``max_bytes``, nested deeper than ``max_depth``,
    holds NaN or Infinity, or is not JSON. Size and depth are checked before the parser
    runs, so no input can make it recurse or allocate without bound."""
    if not isinstance(text, (str, bytes)):
        raise InvalidArgument(f'expected JSON text, got {type(text).__name__}', where=where)
    size = len(text.encode('utf-8', errors='replace') if isinstance(text, str) else text)
    if size > max_bytes:
        raise InvalidArgument(f'{size} bytes of JSON is over the limit of {max_bytes}',
                              where=where, allowed=f'at most {max_bytes} bytes')
    if isinstance(text, bytes):
        text = text.decode('utf-8', errors='replace')
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in '[{':
            depth += 1
            if depth > max_depth:
                raise InvalidArgument(f'JSON nested more than {max_depth} deep', where=where,
                                      allowed=f'at most {max_depth} levels of [] and {{}}')
        elif token in ']}':
            depth -= 1
    try:
        return json.loads(text, parse_constant=_constant)
    except InvalidArgument as exc:
        raise InvalidArgument(str(exc).split(': ', 1)[-1], where=where,
                              allowed='finite numbers only') from None
    except (ValueError, RecursionError) as exc:
        raise InvalidArgument(f'not JSON: {exc}', where=where) from None
