"""Physical bounds on every number a request puts into the world.

Finite is not enough: MuJoCo resets the whole simulation to its keyframe when a position or
velocity passes 1e10 (or the step after overflows), so one wrench of 1e308 N, a body
spawned 1e308 m away or a friction scaled by 1e308 would undo every other entity and the
arm, for every client. These bounds are far beyond any scene a device simulates (a 10 km
world, a bullet's speed, a press's force) and far below where the solver gives up; each
refusal names the bound (INVALID_ARGUMENT, or INVALID_POSE for an orientation that is no
rotation), and nothing changes.
"""

from typing import Any

import numpy as np

from ..checks import finite_number, finite_vector
from ..errors import DeviceError, InvalidArgument

INVALID_POSE = 'INVALID_POSE'
MAX_POSITION = 1e4          # m, each coordinate: the world box
MAX_LINEAR = 1e3            # m/s, norm
MAX_ANGULAR = 1e4           # rad/s, norm (also a joint's speed in a teleport)
MAX_FORCE = 1e6             # N, norm
MAX_TORQUE = 1e6            # N m, norm
MAX_DURATION = 1e6          # s of simulated time (11 days)
MAX_SCALE = 1e3             # a randomization factor
MAX_VALUE = 1e9             # an explicit model value in a randomization
MAX_GRAVITY = 1e3           # m/s^2, norm (100 g)
UNIT_TOLERANCE = 0.01       # a quaternion's norm off 1 by up to this is normalized


def position(values: Any, where: str) -> np.ndarray:
    """3 finite coordinates inside the world box (metres)."""
    pos = finite_vector(values, 3, where)
    if not np.abs(pos).max() <= MAX_POSITION:
        raise InvalidArgument(f'{np.abs(pos).max():.4g} m from the origin is beyond any '
                              'scene', where=where,
                              allowed=f'|x|, |y|, |z| <= {MAX_POSITION:g} m')
    return pos


def quaternion(values: Any, where: str) -> np.ndarray:
    """A rotation (w, x, y, z): near-unit ones normalized, anything else (all-zero
    included) refused with INVALID_POSE."""
    quat = finite_vector(values, 4, where)
    with np.errstate(over='ignore'):
        norm = float(np.linalg.norm(quat))
    if not abs(norm - 1.0) < UNIT_TOLERANCE:
        raise DeviceError(INVALID_POSE, f'not a unit quaternion (norm {norm:.4g})',
                          where=where, allowed=f'a unit quaternion (w, x, y, z), norm within '
                          f'{UNIT_TOLERANCE:g} of 1')
    return quat / norm


def magnitude(values: Any, length: int, top: float, where: str, unit: str) -> np.ndarray:
    """``length`` finite numbers whose norm is at most ``top``."""
    vec = finite_vector(values, length, where)
    with np.errstate(over='ignore'):
        size = float(np.linalg.norm(vec))
    if not size <= top:
        raise InvalidArgument(f'{size:.4g} {unit} is beyond what the simulation can take',
                              where=where, allowed=f'a norm up to {top:g} {unit}')
    return vec


def duration(value: Any, where: str, top: float = MAX_DURATION) -> float:
    """Seconds, 0..``top``."""
    dur = finite_number(value, where)
    if not 0.0 <= dur <= top:
        raise InvalidArgument(f'{dur:g} s is not a usable duration', where=where,
                              allowed=f'0..{top:g} s')
    return dur


def scale_range(low: Any, high: Any, where: str) -> tuple[float, float]:
    """A randomization factor range 0 <= low <= high <= MAX_SCALE."""
    lo = finite_number(low, f'{where}[0]')
    hi = finite_number(high, f'{where}[1]')
    if not 0 <= lo <= hi <= MAX_SCALE:
        raise InvalidArgument(f'[{lo:g}, {hi:g}] is not a range of factors', where=where,
                              allowed=f'0 <= low <= high <= {MAX_SCALE:g}')
    return lo, hi


def values(arr: Any, where: str, top: float = MAX_VALUE) -> np.ndarray:
    """An array of model values, each finite and at most ``top`` in size."""
    arr = np.asarray(arr, dtype=np.float64)
    if arr.size and not (np.isfinite(arr).all() and np.abs(arr).max() <= top):
        raise InvalidArgument('values beyond what the simulation can take', where=where,
                              allowed=f'finite, |value| <= {top:g}')
    return arr
