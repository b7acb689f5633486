"""The limits kernel: every request checked against the device file before it acts.

Each function validates a whole request and returns it converted to native units, or
raises; nothing here touches the simulation, which is what makes requests all-or-nothing.
Every comparison is written so that NaN fails it (``not v <= hi``): a NaN that slipped in
through arithmetic on a huge value must be refused, never waved through by ``v > hi``.
"""

import math
import numbers
from typing import Any, TYPE_CHECKING

import numpy as np

from ..checks import finite_number, finite_vector, is_bool, known_name
from ..errors import InvalidArgument, LimitExceeded, shorten

if TYPE_CHECKING:     # channels imports the device file parser; only the hints need it
    from .channels import Action, Layout

MAX_STEPS = 1_000_000
# MuJoCo's mjMAXVAL: a control beyond it is "Nan, Inf or huge value in CTRL", which the
# stepper treats as a fault (back to the keyframe); a goal there is refused up front.
MAX_NATIVE = 1e10


def outside(value: float, lo: float | None, hi: float | None,
            slack: float = 0.0) -> bool:
    """True when ``value`` is NaN or beyond ``lo``/``hi`` (None = unbounded) by > slack."""
    if value != value:
        return True
    return (lo is not None and not value >= lo - slack) or \
        (hi is not None and not value <= hi + slack)


def limit_text(lo: float | None, hi: float | None, unit: str) -> str:
    """A channel's range as an error's ``allowed`` text, open ends written as inf."""
    low = '-inf' if lo is None else f'{lo:g}'
    high = 'inf' if hi is None else f'{hi:g}'
    return f'{low}..{high} {unit}'.strip()


def check_goals(layout: 'Layout', goals: Any) -> dict[str, float]:
    """{channel: value in its unit} -> {channel: native target}; refuses the whole set."""
    if not isinstance(goals, dict) or not goals:
        raise InvalidArgument('expected one or more channel: value pairs', where='goals',
                              allowed=', '.join(layout.goals))
    out = {}
    for name, value in goals.items():
        known_name(name, layout.goals, 'goal channel')
        g = layout.goals[name]
        v = finite_number(value, name)
        if outside(v, g.min, g.max):
            raise LimitExceeded(f'{v:g} {g.unit} is outside the limit', where=name,
                                allowed=limit_text(g.min, g.max, g.unit), channel=name,
                                limit=[g.min, g.max])
        native = g.to_native(v)
        if outside(native, -MAX_NATIVE, MAX_NATIVE):
            raise LimitExceeded(f'{v:g} {g.unit} is beyond any control MuJoCo accepts',
                                where=name, allowed=limit_text(
                                    min(g.to_unit(-MAX_NATIVE), g.to_unit(MAX_NATIVE)),
                                    max(g.to_unit(-MAX_NATIVE), g.to_unit(MAX_NATIVE)),
                                    g.unit))
        if outside(native, g.native_lo, g.native_hi, 1e-9):
            raise LimitExceeded(f'{v:g} {g.unit} is beyond what actuator {g.actuator_name!r} '
                                'can reach', where=name, allowed=limit_text(
                                    g.to_unit(g.native_lo), g.to_unit(g.native_hi), g.unit))
        out[name] = native
    return out


def check_move(act: 'Action', args: Any, point: Any,
               speed: Any) -> tuple[np.ndarray, float | None]:
    """A move_to request -> (target point in metres, speed in m/s or None).

    Arguments come either as ``args`` in the action's own units or as ``point`` in metres;
    both are checked against the action's argument limits (its workspace box).
    """
    if args is not None and point is not None:
        raise InvalidArgument('give either arguments or a point, not both', where=act.name)
    target = np.full(3, np.nan)
    for axis, value in act.at.items():
        target[axis] = value
    speed_ms = None
    if point is not None:
        p = finite_vector(point, 3, 'point')
        for axis, value in act.at.items():
            if abs(p[axis] - value) > 1e-6:
                raise LimitExceeded(f'{"xyz"[axis]} = {p[axis]:g} m, but {act.name} keeps '
                                    f'{"xyz"[axis]} at {value:g} m', where=f'point.{"xyz"[axis]}',
                                    allowed=f'{value:g} m')
        for i in range(3):
            target[i] = p[i]
        by_axis = {i: a for a, i in act.axes.items()}
        for i in range(3):
            if i in by_axis:
                arg = act.args[by_axis[i]]
                with np.errstate(over='ignore'):     # inf is then refused as outside
                    value = p[i] / arg.scale
                _check_arg(arg, value, act.name)
    else:
        args = {} if args is None else args
        if not isinstance(args, dict):
            raise InvalidArgument('expected argument: value pairs', where=act.name,
                                  allowed=', '.join(act.args))
        for name, value in args.items():
            known_name(name, act.args, f'argument of {act.name}')
            v = finite_number(value, f'{act.name}.{name}')
            arg = act.args[name]
            _check_arg(arg, v, act.name)
            if arg.kind == 'speed':
                speed_ms = v * arg.scale
            elif name in act.axes:
                target[act.axes[name]] = v * arg.scale
    zero = not is_bool(speed) and isinstance(speed, (numbers.Real, np.number, np.ndarray)) \
        and np.ndim(speed) == 0 and speed == 0  # type: ignore[arg-type]  # 0: the default
    if speed is not None and not zero:
        v = finite_number(speed, 'speed')
        if not v >= 0:
            raise InvalidArgument('speed must be zero (default) or positive', where='speed')
        if act.speed is not None:
            arg = act.args[act.speed]
            _check_arg(arg, v, act.name)
            speed_ms = v * arg.scale
        else:
            speed_ms = v
    elif act.speed is not None and speed_ms is None:
        arg = act.args[act.speed]
        speed_ms = arg.max * arg.scale if arg.max is not None else None
    missing = ['xyz'[i] for i in range(3) if np.isnan(target[i])]
    if missing:
        raise InvalidArgument(f'no value for axis {", ".join(missing)}', where=act.name,
                              allowed=f'arguments {sorted(act.args)} or a full point')
    return target, speed_ms


def _check_arg(arg, value, action):
    if outside(value, arg.min, arg.max, 1e-9):
        what = 'speed' if arg.kind == 'speed' else 'workspace'
        raise LimitExceeded(f'{value:g} {arg.unit} is outside the {what} limit',
                            where=f'{action}.{arg.name}',
                            allowed=limit_text(arg.min, arg.max, arg.unit),
                            argument=arg.name, limit=[arg.min, arg.max])


def check_aim(aim: Any) -> tuple[np.ndarray, np.ndarray]:
    """The one check of an aim, ``(local axis, world direction)``, for move_to requests and
    the IK and Cartesian planners alike: two finite non-zero 3-vectors, returned as unit
    vectors."""
    if isinstance(aim, (str, bytes)) or is_bool(aim) or not hasattr(aim, '__len__') \
            or (isinstance(aim, np.ndarray) and aim.ndim == 0) or len(aim) != 2:
        raise InvalidArgument('aim is (site axis, world direction)', where='aim')
    return _direction(aim[0], 'aim.axis'), _direction(aim[1], 'aim.toward')


def _direction(value, where):
    """A finite non-zero 3-vector as a unit vector; clean float input (what the planners
    pass on every solve) skips the per-element checks, which cost more than a small solve."""
    if type(value) is np.ndarray and value.dtype == np.float64 and value.shape == (3,) \
            and np.isfinite(value).all():
        v = value.copy()
    elif type(value) in (tuple, list) and len(value) == 3 \
            and all(type(x) is float and math.isfinite(x) for x in value):
        v = np.array(value)
    else:
        v = finite_vector(value, 3, where)
    with np.errstate(over='ignore'):
        norm = math.sqrt(float(v @ v))
    if not math.isfinite(norm):                  # huge but finite: same direction, scaled
        v = v / np.abs(v).max()
        norm = math.sqrt(float(v @ v))
    if not norm >= 1e-9:
        raise InvalidArgument('a direction cannot be all zeros', where=where)
    return v / norm


def real_time_factor(value: Any) -> float:
    v = finite_number(value, 'real_time_factor')
    if not v >= 0:
        raise InvalidArgument(f'{v:g} is negative', where='real_time_factor',
                              allowed='0 (as fast as possible) or above')
    return v


def step_count(n: Any) -> int:
    if is_bool(n) or not isinstance(n, (int, np.integer)):
        raise InvalidArgument(f'expected a whole number of steps, got {shorten(n)}',
                              where='step')
    if not 1 <= n <= MAX_STEPS:
        raise InvalidArgument(f'{shorten(n)} steps', where='step', allowed=f'1..{MAX_STEPS}')
    return int(n)


def tolerance(value: Any, where: str = 'tolerance') -> float:
    """A move's position tolerance in metres: finite and above zero."""
    v = finite_number(value, where)
    if not v > 0:
        raise InvalidArgument(f'{v:g} m is not a tolerance; give metres above zero',
                              where=where)
    return v
