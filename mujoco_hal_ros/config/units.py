"""Units: MuJoCo works in radians and metres, a channel in whatever its device file says.

A channel converts with ``native = scale * value + offset``; ``percent`` spans a range, so
it is the one unit with an offset. Quantities in the device file ("4 ms", "1 mm", "3 deg")
parse through the same tables, so a limit written in mm checks a target sent in metres.
"""

import math
import re
from typing import Any

from ..errors import ConfigError

ANGLE = {'rad': 1.0, 'deg': math.pi / 180.0, 'degree': math.pi / 180.0,
         'degrees': math.pi / 180.0, 'mrad': 1e-3, 'rev': 2.0 * math.pi,
         'turn': 2.0 * math.pi}
LENGTH = {'m': 1.0, 'cm': 1e-2, 'mm': 1e-3, 'um': 1e-6, 'km': 1e3, 'in': 0.0254,
          'ft': 0.3048}
TIME = {'s': 1.0, 'ms': 1e-3, 'us': 1e-6, 'min': 60.0}
KINDS = {'angle': ANGLE, 'length': LENGTH, 'time': TIME}
PERCENT = 'percent'
_QUANTITY = re.compile(r'^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%/]*)\s*$')


def kind_of(unit: str) -> str | None:
    """'angle', 'length', 'time', 'percent', or None for a unit we pass through."""
    if unit in ('percent', '%'):
        return PERCENT
    for kind, table in KINDS.items():
        if unit in table:
            return kind
    return None


def scale(unit: str, kind: str, where: str) -> float:
    """Factor from ``unit`` to the SI unit of ``kind`` ('angle' or 'length')."""
    table = KINDS[kind]
    if unit not in table:
        raise ConfigError(f'unit {unit!r} is not a unit of {kind}', where=where,
                          allowed=', '.join(table))
    return table[unit]


def rate_scale(unit: str, kind: str, where: str) -> float:
    """Factor for a speed unit like 'mm/s' or 'deg/s' (a bare unit means per second)."""
    base, _, per = unit.partition('/')
    factor = scale(base, kind, where)
    if per:
        factor /= scale(per, 'time', where)
    return factor


def _split(unit):
    """'mm/s' -> ('length', 1e-3 / 1.0); None when not a (rate of a) known unit."""
    base, _, per = unit.partition('/')
    kind = kind_of(base)
    if kind in (None, PERCENT) or (per and kind_of(per) != 'time'):
        return None
    factor = KINDS[kind][base] / (TIME[per] if per else 1.0)
    return (kind, bool(per)), factor


def conversion(unit: str, native_unit: str, where: str) -> float:
    """Factor from ``unit`` to ``native_unit`` (same kind: 'deg' to 'rad', 'mm/s' to 'm/s')."""
    if unit == native_unit:
        return 1.0
    a, b = _split(unit), _split(native_unit)
    if a is None or b is None or a[0] != b[0]:
        raise ConfigError(f'cannot convert {unit!r} to {native_unit!r}', where=where,
                          allowed='units of one kind: ' + ', '.join(ANGLE) + ' or '
                          + ', '.join(LENGTH) + ' (optionally per s, ms, min)')
    return a[1] / b[1]


def linear_map(unit: str, kind: str, lo: float | None, hi: float | None,
               where: str) -> tuple[float, float]:
    """(scale, offset) with native = scale * value + offset for a channel's unit.

    ``kind`` is what the native value is ('angle', 'length' or None for an actuator
    without a joint); ``lo``/``hi`` is the native range that ``percent`` spans.
    """
    if unit is None:
        return 1.0, 0.0
    if kind_of(unit) == PERCENT:
        if lo is None or hi is None or not hi > lo:
            raise ConfigError('percent needs a joint range or actuator ctrlrange to span',
                              where=where)
        return (hi - lo) / 100.0, lo
    if kind is None:
        return 1.0, 0.0
    return scale(unit, kind, where), 0.0


def finite_float(value: Any, what: str, where: str) -> float:
    """A number (int or float) as a finite float; an int too large for a float, NaN or an
    infinity is a ConfigError: 'expected a finite <what>'."""
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise ConfigError(f'expected a finite {what}, got {value!r}'[:200], where=where)
    return out


def parse_quantity(value: Any, kind: str, where: str,
                   default_unit: str | None = None) -> float:
    """'4 ms' -> 0.004, '1 mm' -> 0.001, a bare number in ``default_unit`` (SI if None)."""
    if isinstance(value, bool):
        raise ConfigError(f'expected a {kind} like "4 ms", got {value!r}', where=where)
    if isinstance(value, (int, float)):
        out = finite_float(value, kind, where)
        return out * (scale(default_unit, kind, where) if default_unit else 1.0)
    if not isinstance(value, str):
        raise ConfigError(f'expected a {kind} like "4 ms", got {value!r}', where=where)
    match = _QUANTITY.match(value)
    if not match:
        raise ConfigError(f'cannot read {value!r} as a {kind}', where=where,
                          allowed=f'a number and a unit of {kind}: '
                          + ', '.join(KINDS[kind]))
    number, unit = float(match.group(1)), match.group(2) or default_unit
    if not math.isfinite(number):
        raise ConfigError(f'expected a finite {kind}, got {value!r}', where=where)
    if unit is None:
        return number
    return number * scale(unit, kind, where)
