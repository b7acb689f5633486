"""Straight-line Cartesian paths for ``move_to``, as dense joint-space waypoints.

Interpolating joints between a start and an IK solution makes the tool bow away from the
straight segment (centimetres on a long reach), which sweeps it through whatever lies beside
the line. Here the segment itself is followed: IK at points along it, each seeded from the
previous answer so the arm stays on one branch, then subdivision wherever linear joint
interpolation between two waypoints strays more than the tolerance from the segment. The
result says how far it strayed at worst, so the caller can trust or refuse it.

Timing is a minimum-jerk profile along the path (zero speed and acceleration at both ends)
whose duration is the shortest that keeps every joint under its rate limit and the tool under
the Cartesian speed limit. With joints linear in the path parameter between waypoints, a
joint's speed is its slope times the profile's speed, so the duration is exact, not a bound.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
import math
from typing import Any

import mujoco
import numpy as np

from ..checks import finite_number, Vector
from ..config import limits
from ..errors import InvalidArgument
from .ik import angle_between, bound_vector, check_int, check_positive, IKSolver, vector3
from .trajectory import min_jerk  # the one profile goals and paths share

__all__ = ['CartesianPath', 'straight_line', 'min_jerk', 'min_jerk_inverse']

# Waypoint solves get this share of the tolerance; the rest is left for interpolation.
_WAYPOINT_SHARE = 0.1
# Interior points of each interval where the interpolated path is checked.
_CHECK_STEP = 1.0 / 8.0
_CHECK_FRACTIONS = np.arange(1, 8) * _CHECK_STEP
# First pass spacing before adaptive subdivision: small enough that each solve starts close.
_FIRST_STEP = 0.02   # m
_FIRST_TURN = 0.2    # rad


def _min_jerk_rate(tau):
    return 30.0 * tau * tau * (1.0 - tau) ** 2


def min_jerk_inverse(s: Vector) -> np.ndarray:
    """Normalised time at which the min-jerk profile has done ``s`` of the path (bisection:
    the profile is monotonic, and Newton stalls where its slope vanishes at both ends)."""
    s = np.clip(np.asarray(s, dtype=np.float64), 0.0, 1.0)
    lo, hi = np.zeros_like(s), np.ones_like(s)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        below = min_jerk(mid) < s
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return np.where(s <= 0.0, 0.0, np.where(s >= 1.0, 1.0, 0.5 * (lo + hi)))


@dataclass
class CartesianPath:
    """Joint waypoints along a straight segment, timed; ``sample(t)`` gives the setpoint.

    ``u`` is each waypoint's fraction of the segment. When ``success`` is False the
    waypoints stop where the path could not be continued (``reached_fraction``) and
    ``message`` says why; they are still timed, so the caller may inspect or refuse them.
    """

    success: bool
    times: np.ndarray
    qpos: np.ndarray
    joint_names: tuple
    u: np.ndarray
    max_deviation: float
    max_aim_deviation: float
    duration: float
    length: float
    reached_fraction: float
    message: str = ''
    _v: Any = field(default=None, repr=False)     # path speeds, set by straight_line

    def sample(self, t: float) -> np.ndarray:
        """Setpoint at time ``t`` (clamped to the path): the min-jerk fraction of the path,
        then linear interpolation between the waypoints bracketing it, which is exactly
        the curve whose deviation was checked."""
        t = finite_number(t, 't')
        if self.duration <= 0.0 or len(self._v) < 2:
            return self.qpos[-1].copy()
        v = float(min_jerk(t / self.duration))
        i = int(np.searchsorted(self._v, v, side='right')) - 1
        i = min(max(i, 0), len(self._v) - 2)
        span = self._v[i + 1] - self._v[i]
        f = (v - self._v[i]) / span if span > 0.0 else 1.0
        return self.qpos[i] + f * (self.qpos[i + 1] - self.qpos[i])


def _rotation(axis, angle):
    """Rodrigues matrix."""
    k = axis
    kx = np.array(((0.0, -k[2], k[1]), (k[2], 0.0, -k[0]), (-k[1], k[0], 0.0)))
    return np.eye(3) + math.sin(angle) * kx + (1.0 - math.cos(angle)) * (kx @ kx)


class _Aim:
    """Direction turning at constant rate from the start direction to the goal one."""

    def __init__(self, start, goal):
        self.start = start
        cross = np.cross(start, goal)
        s = float(np.linalg.norm(cross))
        self.angle = math.atan2(s, float(start @ goal))
        if s > 1e-12:
            self.axis = cross / s
        else:
            # Parallel or opposite: any perpendicular axis turns one onto the other.
            other = np.array((1.0, 0.0, 0.0)) if abs(start[0]) < 0.9 else \
                np.array((0.0, 1.0, 0.0))
            axis = np.cross(start, other)
            self.axis = axis / np.linalg.norm(axis)

    def at(self, u):
        if self.angle == 0.0:
            return self.start
        return _rotation(self.axis, u * self.angle) @ self.start


def straight_line(model: mujoco.MjModel, data: mujoco.MjData, target: Vector, *,
                  max_rates: Vector, site: str | None = None,
                  body: str | None = None, aim: Any = None,
                  joints: Sequence[str] | None = None, q_start: Vector | None = None,
                  lower: Vector | None = None, upper: Vector | None = None,
                  tolerance: float = 1e-3, aim_tolerance: float = np.deg2rad(3.0),
                  max_speed: float | None = None,
                  max_waypoints: int = 2000) -> CartesianPath:
    """Plan the tool (a site or body origin) along the straight segment to ``target``.

    ``data`` is scratch, as for ``ik.solve``, and is left at the last waypoint; ``q_start``
    (the chosen joints, default their values in ``data``) is where the segment starts. With
    ``aim=(local_axis, direction)`` the axis turns steadily from where it points at the start
    to ``direction``, and is held within ``aim_tolerance`` of that schedule.
    ``max_rates`` (rad/s or m/s per chosen joint, or one number for all; +inf for a joint
    without a limit) and ``max_speed`` (m/s of the tool, optional) set the duration, which is
    0 when nothing limits it. ``tolerance`` bounds the distance from the segment (m).
    """
    solver = IKSolver(model, data, site=site, body=body, joints=joints, lower=lower,
                      upper=upper)
    n = len(solver.joint_names)
    goal = vector3(target, 'target')
    axis, direction = (None, None) if aim is None else limits.check_aim(aim)
    q0 = solver.check_q(q_start, 'q_start')
    tolerance = check_positive(tolerance, 'tolerance')
    aim_tolerance = check_positive(aim_tolerance, 'aim_tolerance')
    max_waypoints = check_int(max_waypoints, 'max_waypoints', 2)
    # +inf: that joint has no rate limit (the duration then comes from the others).
    if isinstance(max_rates, (list, tuple, np.ndarray)):
        rates = bound_vector(max_rates, n, 'max_rates', allow=(math.inf,))
    elif isinstance(max_rates, float) and max_rates == math.inf:
        rates = np.full(n, math.inf)
    else:
        rates = np.full(n, finite_number(max_rates, 'max_rates'))
    if np.any(rates <= 0.0):
        raise InvalidArgument('every rate limit must be positive', where='max_rates')
    speed = None if max_speed is None else check_positive(max_speed, 'max_speed')

    start, start_mat = solver.fk(q0)
    delta = goal - start
    length = float(np.linalg.norm(delta))
    if not math.isfinite(length):
        raise InvalidArgument('the target is out of all proportion to the model (its '
                              'distance from the start is not a finite number)',
                              where='target', allowed='a point in reach of the model')
    turn = _Aim(start_mat @ axis, direction) if axis is not None else None
    ik_tol = tolerance * _WAYPOINT_SHARE
    ik_aim_tol = aim_tolerance * _WAYPOINT_SHARE

    def deviation(p):
        """Distance from the segment (not from the scheduled point: lagging is allowed)."""
        if length == 0.0:
            return float(np.linalg.norm(p - start))
        s = min(max(float((p - start) @ delta) / (length * length), 0.0), 1.0)
        return float(np.linalg.norm(p - (start + s * delta)))

    def solve_at(u, seed):
        return solver.run(start + u * delta, axis, None if turn is None else turn.at(u),
                          seed, ik_tol, ik_aim_tol, max_iter=100, max_restarts=0)

    def check(ua, qa, ub, qb):
        """Worst distance and aim error inside the interval, and the tool's fastest
        progress along it (m per unit of u) for the speed limit."""
        worst, worst_aim, fastest = 0.0, 0.0, 0.0
        prev, _ = solver.fk(qa)
        for f in _CHECK_FRACTIONS:
            p, mat = solver.fk(qa + f * (qb - qa))
            worst = max(worst, deviation(p))
            fastest = max(fastest, float(np.linalg.norm(p - prev)))
            prev = p
            if turn is not None:
                toward = turn.at(ua + f * (ub - ua))
                worst_aim = max(worst_aim, angle_between(mat @ axis, toward))
        p, _ = solver.fk(qb)
        fastest = max(fastest, float(np.linalg.norm(p - prev)))
        return worst, worst_aim, fastest / (_CHECK_STEP * (ub - ua))

    first = max(1, math.ceil(length / _FIRST_STEP),
                math.ceil((turn.angle if turn is not None else 0.0) / _FIRST_TURN))
    us, qs = [0.0], [q0.copy()]
    max_dev, max_aim = 0.0, 0.0
    message = ''
    if length == 0.0 and (turn is None or turn.angle == 0.0):
        first = 0  # already there
    for i in range(1, first + 1):
        u = i / first
        r = solve_at(u, qs[-1])
        if not r.success:
            message = (f'no IK solution within {ik_tol:.3g} m at {u:.0%} of the segment '
                       f'(closest miss {r.pos_error:.4g} m, aim {r.aim_error:.3g} rad)')
            break
        us.append(u)
        qs.append(r.qpos)
        max_dev, max_aim = max(max_dev, r.pos_error), max(max_aim, r.aim_error)

    # Refine left to right so the output stays ordered; a failure keeps the prefix found.
    out_u, out_q, progress = [us[0]], [qs[0]], []
    work = [(us[i], qs[i], us[i + 1], qs[i + 1]) for i in reversed(range(len(us) - 1))]
    min_span = 1e-6
    while work and not message:
        ua, qa, ub, qb = work.pop()
        dev, aim_dev, fastest = check(ua, qa, ub, qb)
        if dev <= tolerance and aim_dev <= aim_tolerance:
            out_u.append(ub)
            out_q.append(qb)
            progress.append(fastest)
            max_dev, max_aim = max(max_dev, dev), max(max_aim, aim_dev)
            continue
        if ub - ua < min_span:
            message = (f'joint-space jump at {ua:.0%} of the segment (a singularity or a '
                       f'branch change): interpolation strays {dev:.3g} m')
            break
        if len(out_u) + len(work) + 2 > max_waypoints:
            message = f'more than {max_waypoints} waypoints needed for {tolerance:.3g} m'
            break
        um = 0.5 * (ua + ub)
        r = solve_at(um, 0.5 * (qa + qb))
        if not r.success:
            r = solve_at(um, qa)
        if not r.success:
            message = f'no IK solution within {ik_tol:.3g} m at {um:.0%} of the segment'
            break
        max_dev, max_aim = max(max_dev, r.pos_error), max(max_aim, r.aim_error)
        work.append((um, r.qpos, ub, qb))
        work.append((ua, qa, um, r.qpos))

    u_path = np.array(out_u)
    q = np.array(out_q)
    solver.fk(q[-1])
    with np.errstate(all='ignore'):
        times, duration, v = _time(u_path, q, rates, np.array(progress), speed)
    if not (math.isfinite(duration) and np.isfinite(times).all()):
        raise InvalidArgument('the path would take forever (its duration overflows): a rate '
                              'or speed limit is too close to zero', where='max_speed'
                              if speed is not None else 'max_rates',
                              allowed='positive limits the joints can move at')
    return CartesianPath(success=not message, times=times, qpos=q,
                         joint_names=solver.joint_names, u=u_path, max_deviation=max_dev,
                         max_aim_deviation=max_aim, duration=duration, length=length,
                         reached_fraction=float(u_path[-1]), message=message, _v=v)


def _time(u, q, rates, progress, speed):
    """Shortest min-jerk duration over the waypoints' span of the path, and their times.

    ``progress`` is the tool's metres per unit of ``u`` in each interval, measured on the
    interpolated curve rather than the segment, so the speed limit holds for the real tool.
    """
    if len(u) < 2 or u[-1] <= u[0]:
        return np.zeros(len(u)), 0.0, np.zeros(len(u))
    v = (u - u[0]) / (u[-1] - u[0])
    tau = min_jerk_inverse(v)
    # Peak profile speed inside each interval: the profile rises to tau = 1/2, then falls.
    peak = _min_jerk_rate(np.clip(0.5, tau[:-1], tau[1:]))
    slope = np.abs(np.diff(q, axis=0)) / np.diff(v)[:, None]
    duration = float(np.max(slope * peak[:, None] / rates[None, :]))
    if speed is not None:
        duration = max(duration, float(np.max(progress * (u[-1] - u[0]) * peak)) / speed)
    return tau * duration, duration, v
