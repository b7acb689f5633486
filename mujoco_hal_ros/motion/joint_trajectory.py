"""Joint trajectories (FollowJointTrajectory semantics) checked and run on a Device.

A MoveIt or ros2_control set-up talks to a real arm through joint_trajectory_controller, so
the simulated device has to accept the same trajectories, refuse the same malformed ones
and interpolate between points the same way, or a configuration tuned in simulation would
behave differently on the arm. On top of that every point, and the spline between points,
goes through the device file's goal limits: a trajectory that would leave them is refused
as a whole, before anything moves, exactly like ``Device.set_goals``.

Everything here is plain Python and numpy; the ROS layer only turns messages into the
arguments below and results back into messages.

Why one module of this size: it is FollowJointTrajectory's semantics, one contract:
checking a trajectory, its splines, running it on the device and judging it against
tolerances all share the ``Checked`` record and the same limits and slacks, as
joint_trajectory_controller keeps them in one controller.
"""

import array
from collections.abc import Sequence
from dataclasses import dataclass
import math
import time
from typing import Any, TYPE_CHECKING

import numpy as np

from .. import errors
from ..checks import finite_number, unique_names, Vector
from ..config import limits
from ..errors import ConfigError, DeviceError, InvalidArgument, LimitExceeded, shorten, UnknownName
from .gripper import finger_joints
from .trajectory import Plan

if TYPE_CHECKING:     # the hints only; channels is a sibling package
    from ..config.channels import GoalChannel, Layout
    from ..sim.physics import Physics
    from ..sim.ports import TrajectoryHost

SAMPLES_PER_SEGMENT = 48      # spline samples per segment when checking limits between points
MAX_SAMPLES = 20000           # ... fewer (at least 8) per segment on very long trajectories
LIMIT_SLACK = 1e-9            # rad (or m): float noise allowed on a position limit
RATE_SLACK = 1e-3             # relative: float noise allowed on a max_change_per_s limit
POSITION_DRIVES = ('position', 'motor_impedance', 'velocity')
CONFIRM_S = 0.02              # wall seconds a missing plan must stay missing to count


def trajectory_joints(layout: 'Layout') -> dict[str, 'GoalChannel']:
    """{joint name: goal channel} for every joint a goal channel drives to a position.

    A trajectory names joints, the device file names goal channels; this is the one map
    between them. Direct channels are left out: a joint trajectory is a position reference;
    a velocity servo's channel counts as its joint's position (``Layout.position_view``),
    which the stepper's position loop holds it to.
    """
    out = {}
    for goal in layout.goals.values():
        if goal.joint >= 0 and goal.drive in POSITION_DRIVES:
            name = layout.joints[goal.joint]
            if name and name not in out:
                out[name] = layout.position_view(goal)
    return out


def controller_joints(layout: 'Layout', names: Any = None,
                      where: str = 'joints') -> list[str]:
    """The joints a trajectory controller owns: ``names`` checked, else every driven joint
    that is not a finger (``gripper.finger_joints``), as a real arm's arm_controller.

    A real controller's ``joints`` list names joints of the URDF; here each must also be
    driven by a position goal channel, or a trajectory could never move it.
    """
    by_joint = trajectory_joints(layout)
    if not names:
        if not by_joint:
            raise ConfigError('no goal channel drives a joint to a position, so there is '
                              'nothing a joint trajectory could move', where=where)
        # zero-config: the arm, not the fingers (those are gripper_controller's)
        fingers = {layout.joints[j] for j in finger_joints(layout.model)}
        return [j for j in by_joint if j not in fingers] or list(by_joint)
    out = []
    for name in names:
        if name not in by_joint:
            raise ConfigError(f'joint {name!r} is not driven by a position goal channel',
                              where=where, allowed=', '.join(by_joint) or 'none')
        if name in out:
            raise ConfigError(f'joint {name!r} is listed twice', where=where)
        out.append(name)
    return out


@dataclass
class Checked:
    """A validated trajectory, in native units (rad, m), columns in ``joints`` order."""

    joints: list
    goals: list
    actuators: np.ndarray
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    times: np.ndarray                  # time_from_start of each point, seconds
    positions: np.ndarray              # (points, joints)
    velocities: list                   # (joints,) arrays or None, one per point
    accelerations: list

    @property
    def duration(self) -> float:
        return float(self.times[-1])


def _point_field(point, key):
    if isinstance(point, dict):
        return point.get(key)
    return getattr(point, key, None)


def _vector(values, n, where):
    """A point's field: None/empty means absent; else exactly n finite numbers."""
    if values is None:
        return None
    if isinstance(values, array.array) and values.typecode == 'd':
        # What a ROS message holds: already doubles, so only length and finiteness matter
        # (a long trajectory would otherwise cost a Python check per number).
        out = np.array(values, dtype=np.float64)
        if out.size == 0:
            return None
        if out.size != n:
            raise InvalidArgument(f'has {out.size} values for {n} joints', where=where,
                                  allowed=f'empty or {n} values, in joint_names order')
        bad = np.flatnonzero(~np.isfinite(out))
        if bad.size:
            raise InvalidArgument(f'expected a finite number, got {out[bad[0]]!r}',
                                  where=f'{where}[{bad[0]}]', allowed='a finite real number')
        return out
    values = list(values)
    if not values:
        return None
    if len(values) != n:
        raise InvalidArgument(f'has {len(values)} values for {n} joints', where=where,
                              allowed=f'empty or {n} values, in joint_names order')
    return np.array([finite_number(v, f'{where}[{i}]') for i, v in enumerate(values)])


def check_trajectory(layout: 'Layout', joint_names: Any, points: Any, *,
                     controller_joints: Sequence[str] | None = None,
                     allow_partial: bool = False, multi_dof_joints: Sequence[str] = ()) -> Checked:
    """Validate a trajectory against the device, or raise a DeviceError naming the problem.

    ``points`` are dicts or objects with ``time_from_start`` (seconds), ``positions`` and
    optionally ``velocities`` and ``accelerations`` (native units, ``joint_names`` order).
    Joint order may differ from the model's. ``controller_joints`` are the joints this
    controller owns (default: every joint a goal channel drives); without
    ``allow_partial`` a goal must name all of them, as joint_trajectory_controller
    requires by default.
    """
    by_joint = trajectory_joints(layout)
    owned = [j for j in (controller_joints or by_joint) if j in by_joint]
    if multi_dof_joints:
        raise InvalidArgument('multi-DOF trajectories are not supported by this controller',
                              where='multi_dof_trajectory', allowed='an empty '
                              'multi_dof_trajectory')
    if isinstance(joint_names, (str, bytes)):
        joint_names = None
    try:
        joint_names = list(joint_names)
    except TypeError:
        raise InvalidArgument(f'expected a list of joint names, got {shorten(joint_names)}',
                              where='joint_names', allowed=', '.join(owned)) from None
    if not joint_names:
        raise InvalidArgument('the trajectory names no joints', where='joint_names',
                              allowed=', '.join(owned))
    for name in joint_names:
        if not isinstance(name, str) or name not in owned:
            raise UnknownName('joint', name, owned, where='joint_names')
    joint_names = unique_names(joint_names, 'joint_names', 'joint')
    seen = set(joint_names)
    if not allow_partial and seen != set(owned):
        missing = [j for j in owned if j not in seen]
        raise InvalidArgument(f'the goal leaves out joints {missing}; this controller moves '
                              'all its joints together', where='joint_names',
                              allowed=', '.join(owned))
    try:
        points = [] if points is None else list(points)
    except TypeError:
        raise InvalidArgument(f'expected a list of points, got {shorten(points)}',
                              where='points', allowed='one or more points') from None
    if not points:
        raise InvalidArgument('the trajectory has no points', where='points',
                              allowed='one or more points')
    n = len(joint_names)
    goals = [by_joint[j] for j in joint_names]
    times = np.empty(len(points))
    positions = np.empty((len(points), n))
    vels, accs = [], []
    for i, p in enumerate(points):
        where = f'points[{i}]'
        t = finite_number(_point_field(p, 'time_from_start'), f'{where}.time_from_start')
        if t < 0:
            raise InvalidArgument(f'time_from_start is negative ({t:g} s)',
                                  where=f'{where}.time_from_start', allowed='0 s or later')
        if i and t <= times[i - 1]:
            raise InvalidArgument(f'time_from_start {t:g} s is not after the previous '
                                  f'point\'s {times[i - 1]:g} s',
                                  where=f'{where}.time_from_start',
                                  allowed='strictly increasing times')
        times[i] = t
        pos = _vector(_point_field(p, 'positions'), n, f'{where}.positions')
        if pos is None:
            raise InvalidArgument('has no positions', where=f'{where}.positions',
                                  allowed=f'{n} values, in joint_names order')
        positions[i] = pos
        vels.append(_vector(_point_field(p, 'velocities'), n, f'{where}.velocities'))
        accs.append(_vector(_point_field(p, 'accelerations'), n, f'{where}.accelerations'))
        if accs[-1] is not None and vels[-1] is None:
            raise InvalidArgument('has accelerations but no velocities',
                                  where=f'{where}.velocities')
    for i in _suspect_points(goals, positions):
        _check_point(goals, positions[i], f'points[{i}]')
    model = layout.model
    jids = np.array([g.joint for g in goals])
    return Checked(joint_names, goals, np.array([g.actuator for g in goals]),
                   np.asarray(model.jnt_qposadr[jids]), np.asarray(model.jnt_dofadr[jids]),
                   times, positions, vels, accs)


def _suspect_points(goals, positions):
    """Indices of points the kernel may refuse, found in one vectorised pass (the kernel's
    own test, per channel); only those go through the kernel, which raises on the first."""
    scale = np.array([g.scale for g in goals])
    offset = np.array([g.offset for g in goals])
    lo = np.array([-math.inf if g.min is None else g.min for g in goals])
    hi = np.array([math.inf if g.max is None else g.max for g in goals])
    nlo = np.array([g.native_lo for g in goals]) - 1e-9
    nhi = np.array([g.native_hi for g in goals]) + 1e-9
    unit = (positions - offset) / scale
    slack_lo = 1e-9 * np.maximum(1.0, np.abs(np.where(np.isfinite(lo), lo, 0.0)))
    slack_hi = 1e-9 * np.maximum(1.0, np.abs(np.where(np.isfinite(hi), hi, 0.0)))
    bad = ~((unit >= lo - slack_lo) & (unit <= hi + slack_hi) & (positions >= nlo) &
            (positions <= nhi))
    return np.flatnonzero(bad.any(axis=1))


def _check_point(goals, native, where):
    """Every position through the limits kernel, in each channel's own unit."""
    request = {}
    for g, q in zip(goals, native, strict=True):
        v = float(g.to_unit(q))
        # A limit sent in radians and stored in degrees must not fail on the round trip.
        for bound in (g.min, g.max):
            if bound is not None and abs(v - bound) <= 1e-9 * max(1.0, abs(bound)):
                v = bound
        request[g.name] = v
    try:
        limits.check_goals(_LayoutView(goals), request)
    except DeviceError as exc:
        if exc.code != errors.LIMIT_EXCEEDED:
            raise
        raise LimitExceeded(f'{where}: {exc}', point=where,
                            **{k: v for k, v in exc.details.items() if k != 'point'}) from None


class _LayoutView:
    """The slice of a Layout limits.check_goals reads: goals by name."""

    def __init__(self, goals):
        self.goals = {g.name: g for g in goals}


# --- splines ---------------------------------------------------------------------------------
def _quintic(p0, v0, a0, p1, v1, a1, T):
    T2, T3, T4, T5 = T * T, T ** 3, T ** 4, T ** 5
    c3 = (20 * (p1 - p0) - (8 * v1 + 12 * v0) * T - (3 * a0 - a1) * T2) / (2 * T3)
    c4 = (30 * (p0 - p1) + (14 * v1 + 16 * v0) * T + (3 * a0 - 2 * a1) * T2) / (2 * T4)
    c5 = (12 * (p1 - p0) - 6 * (v1 + v0) * T - (a0 - a1) * T2) / (2 * T5)
    return np.stack([p0, v0, a0 / 2, c3, c4, c5], axis=-1)


def _cubic(p0, v0, p1, v1, T):
    c2 = (3 * (p1 - p0) - (2 * v0 + v1) * T) / (T * T)
    c3 = (2 * (p0 - p1) + (v0 + v1) * T) / (T ** 3)
    z = np.zeros_like(p0)
    return np.stack([p0, v0, c2, c3, z, z], axis=-1)


def _linear(p0, p1, T):
    z = np.zeros_like(p0)
    return np.stack([p0, (p1 - p0) / T, z, z, z, z], axis=-1)


def _knot_velocities(times, pos, v_start):
    """C2 cubic spline through positions: velocities at the knots (clamped ends).

    Starts with ``v_start`` and ends at rest, so a position-only trajectory becomes smooth
    instead of piecewise linear. Thomas algorithm, vectorised over joints.
    """
    n = len(times)
    vel = np.zeros_like(pos)
    vel[0] = v_start
    if n <= 2:
        return vel
    h = np.diff(times)
    m = n - 2                               # unknown interior velocities
    a = np.empty(m)
    b = np.empty(m)
    c = np.empty(m)
    d = np.empty((m, pos.shape[1]))
    for k in range(1, n - 1):
        i = k - 1
        a[i] = 1.0 / h[k - 1]
        b[i] = 2.0 * (1.0 / h[k - 1] + 1.0 / h[k])
        c[i] = 1.0 / h[k]
        d[i] = 3.0 * ((pos[k] - pos[k - 1]) / h[k - 1] ** 2 + (pos[k + 1] - pos[k]) / h[k] ** 2)
    d[0] -= a[0] * vel[0]
    for i in range(1, m):
        w = a[i] / b[i - 1]
        b[i] -= w * c[i - 1]
        d[i] -= w * d[i - 1]
    x = np.empty_like(d)
    x[-1] = d[-1] / b[-1]
    for i in range(m - 2, -1, -1):
        x[i] = (d[i] - c[i] * x[i + 1]) / b[i]
    vel[1:-1] = x
    return vel


def spline(checked: Checked, start_pos: Vector, start_vel: Vector | None = None,
           start_acc: Vector | None = None, *,
           smooth_positions: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(knot times, coefficients (segments, joints, 6)) the way joint_trajectory_controller
    interpolates: per segment quintic when both ends carry velocities and accelerations,
    cubic Hermite with velocities, linear with positions only; with ``smooth_positions`` a
    position-only trajectory becomes a C2 cubic spline instead.

    When the first point lies after time 0, the path starts from ``start_*`` (the current
    setpoint) at time 0; a first point at time 0 is the start itself.
    """
    n = len(checked.joints)
    start_pos = np.asarray(start_pos, dtype=float)
    start_vel = np.zeros(n) if start_vel is None else np.asarray(start_vel, dtype=float)
    start_acc = np.zeros(n) if start_acc is None else np.asarray(start_acc, dtype=float)
    m = len(checked.times)
    pos = np.asarray(checked.positions, dtype=float)
    vel = np.zeros((m, n))
    acc = np.zeros((m, n))
    has_v = np.array([v is not None for v in checked.velocities])
    has_a = np.array([a is not None for a in checked.accelerations])
    for i in np.flatnonzero(has_v):
        vel[i] = checked.velocities[i]
    for i in np.flatnonzero(has_a):
        acc[i] = checked.accelerations[i]
    times = np.asarray(checked.times, dtype=float)
    if times[0] > 0.0:
        times = np.concatenate([[0.0], times])
        pos = np.vstack([start_pos, pos])
        vel = np.vstack([start_vel, vel])
        acc = np.vstack([start_acc, acc])
        has_v = np.concatenate([[True], has_v])
        has_a = np.concatenate([[True], has_a])
    if len(times) == 1:   # a single point at time 0: jump there and stay
        return times, _linear(pos[0], pos[0], 1.0)[None]
    if smooth_positions and not has_v[1:].any():
        vel = _knot_velocities(times, pos, vel[0])
        vel[-1] = 0.0
        has_v[:] = True
        has_a[:] = False
    T = np.diff(times)[:, None]
    p0, p1, v0, v1, a0, a1 = pos[:-1], pos[1:], vel[:-1], vel[1:], acc[:-1], acc[1:]
    cubic = (has_v[:-1] & has_v[1:])[:, None, None]
    quintic = cubic & (has_a[:-1] & has_a[1:])[:, None, None]
    with np.errstate(all='ignore'):     # overflow shows as inf/NaN, refused just below
        coeffs = np.where(quintic, _quintic(p0, v0, a0, p1, v1, a1, T),
                          np.where(cubic, _cubic(p0, v0, p1, v1, T), _linear(p0, p1, T)))
    _refuse_non_finite(checked, times, coeffs, 'the spline')
    return times, coeffs


def _refuse_non_finite(checked, knots, values, what):
    """Refuse a derived quantity (spline coefficients, samples) that overflowed.

    Every input is finite, but a velocity or acceleration near 1e308 times a segment
    duration is not: the coefficients become inf, the path NaN, and NaN passes every
    ``<``/``>`` limit test. ``values`` is (segments or samples, joints, ...).
    """
    values = np.asarray(values)
    ok = np.isfinite(values)
    if ok.all():
        return
    bad = np.argwhere(~ok)[0]
    seg, j = int(bad[0]), int(bad[1])
    if values.shape[0] != len(knots) - 1:   # samples: SAMPLES_PER_SEGMENT-ish per segment
        seg = min(len(knots) - 2, seg * max(len(knots) - 1, 1) // max(values.shape[0], 1))
    raise InvalidArgument(
        f'{what} of joint {shorten(checked.joints[j])} between points '
        f'{_segment_name(checked, knots, seg)} overflows (not a finite number): a velocity, '
        'acceleration or time there is out of all proportion', where=checked.goals[j].name,
        allowed='velocities and accelerations the joint can reach', joint=checked.joints[j])


def _evaluate(knots, coeffs, rel):
    """Positions, velocities, accelerations (len(rel), joints) at times relative to t0."""
    rel = np.atleast_1d(np.asarray(rel, dtype=float))
    nseg = coeffs.shape[0]
    idx = np.clip(np.searchsorted(knots, rel, side='right') - 1, 0, nseg - 1)
    h = knots[idx + 1] - knots[idx]
    s = np.clip(rel - knots[idx], 0.0, h)[:, None]
    c = coeffs[idx]                                     # (m, joints, 6)
    pos = c[..., 0] + s * (c[..., 1] + s * (c[..., 2] + s * (c[..., 3] + s * (
        c[..., 4] + s * c[..., 5]))))
    vel = c[..., 1] + s * (2 * c[..., 2] + s * (3 * c[..., 3] + s * (
        4 * c[..., 4] + s * 5 * c[..., 5])))
    acc = 2 * c[..., 2] + s * (6 * c[..., 3] + s * (12 * c[..., 4] + s * 20 * c[..., 5]))
    outside = (rel < knots[0]) | (rel > knots[-1])
    vel[outside] = 0.0
    acc[outside] = 0.0
    return pos, vel, acc


def check_spline(checked: Checked, knots: np.ndarray, coeffs: np.ndarray,
                 start_pos: Vector) -> None:
    """Refuse a spline that leaves the goal limits or exceeds a channel's rate between points.

    Points alone are not enough: a cubic or quintic through in-limit points can overshoot.
    A start already outside a limit (a model resting beyond its range) may move back in.
    """
    nseg = coeffs.shape[0]
    per = int(min(SAMPLES_PER_SEGMENT, max(8, MAX_SAMPLES // max(nseg, 1))))
    frac = np.linspace(0.0, 1.0, per)
    rel = (knots[:-1, None] + frac[None, :] * np.diff(knots)[:, None]).reshape(-1)
    with np.errstate(all='ignore'):
        pos, vel, _ = _evaluate(knots, coeffs, rel)
    _refuse_non_finite(checked, knots, pos, 'the path')
    _refuse_non_finite(checked, knots, vel, 'the velocity')
    for j, g in enumerate(checked.goals):
        lo = g.to_native(g.min) if g.min is not None else -math.inf
        hi = g.to_native(g.max) if g.max is not None else math.inf
        lo, hi = min(lo, hi), max(lo, hi)
        lo, hi = max(lo, g.native_lo), min(hi, g.native_hi)
        lo, hi = min(lo, start_pos[j]), max(hi, start_pos[j])
        worst_lo, worst_hi = float(pos[:, j].min()), float(pos[:, j].max())
        if not (worst_lo >= lo - LIMIT_SLACK and worst_hi <= hi + LIMIT_SLACK):
            bad = worst_lo if not worst_lo >= lo - LIMIT_SLACK else worst_hi
            seg = int(np.argmax(~((pos[:, j] >= lo - LIMIT_SLACK) &
                                  (pos[:, j] <= hi + LIMIT_SLACK))) // per)
            raise LimitExceeded(
                f'the path of joint {checked.joints[j]!r} reaches {g.to_unit(bad):g} {g.unit} '
                f'between points {_segment_name(checked, knots, seg)}, outside the limit',
                where=g.name, allowed=limits.limit_text(g.min, g.max, g.unit),
                channel=g.name, limit=[g.min, g.max])
        rate = g.native_rate
        if rate is not None:
            top = float(np.abs(vel[:, j]).max()) if nseg else 0.0
            if not top <= rate * (1 + RATE_SLACK) + 1e-12:
                raise LimitExceeded(
                    f'joint {checked.joints[j]!r} would move at {top / abs(g.scale):g} '
                    f'{g.unit}/s, faster than the device allows', where=g.name,
                    allowed=f'up to {g.max_change_per_s:g} {g.unit}/s (max_change_per_s); '
                    'slow the trajectory down', channel=g.name)


def _segment_name(checked, knots, seg):
    if len(knots) > len(checked.times):   # a start segment was prepended
        return 'start and 0' if seg == 0 else f'{seg - 1} and {seg}'
    return f'{seg} and {seg + 1}'


class TrajectoryPlan(Plan):
    """A joint trajectory as a stepper plan: piecewise polynomials in simulated time."""

    def __init__(self, actuators: Vector, t0: float, knots: np.ndarray,
                 coeffs: np.ndarray) -> None:
        knots = np.asarray(knots, dtype=float)
        super().__init__(actuators, t0, t0 + float(knots[-1]))
        self.knots = knots
        self.coeffs = np.asarray(coeffs, dtype=float)
        self.original = self.actuators.copy()

    @property
    def end(self) -> np.ndarray:
        return _evaluate(self.knots, self.coeffs, [self.knots[-1]])[0][0]

    def _keep(self, mask: np.ndarray) -> None:
        self.coeffs = self.coeffs[:, mask, :]

    def sample(self, times: Vector) -> np.ndarray:
        return _evaluate(self.knots, self.coeffs, np.asarray(times) - self.t0)[0]

    def state(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Desired (positions, velocities, accelerations) at simulated time t."""
        p, v, a = _evaluate(self.knots, self.coeffs, [t - self.t0])
        return p[0], v[0], a[0]

    @property
    def intact(self) -> bool:
        """False once another command took over any of its actuators."""
        return self.actuators.size == self.original.size


def _start_state(physics: 'Physics', actuators: np.ndarray,
                 now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Setpoint, and its velocity and acceleration from whatever plan drives it now."""
    pos = physics.joint_setpoint[actuators]
    vel = np.zeros(len(actuators))
    acc = np.zeros(len(actuators))
    h = 1e-3
    for plan in physics.plans:
        hit = np.isin(plan.actuators, actuators)
        if not hit.any():
            continue
        cols = [list(actuators).index(a) for a in plan.actuators[hit]]
        if isinstance(plan, TrajectoryPlan):
            p, v, a = plan.state(now)
            pos[cols], vel[cols], acc[cols] = p[hit], v[hit], a[hit]
        else:
            s = plan.sample([now - h, now, now + h])[:, hit]
            pos[cols] = s[1]
            vel[cols] = (s[2] - s[0]) / (2 * h)
            acc[cols] = (s[2] - 2 * s[1] + s[0]) / (h * h)
    return pos, vel, acc


def preview(device: 'TrajectoryHost', checked: Checked, *,
            smooth_positions: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Check the whole path from the current setpoint without moving anything.

    What a goal callback runs: the final check happens again when the plan starts, from
    the setpoint at that instant.
    """
    snap = device.snapshot
    start = snap.joint_setpoint[checked.actuators]
    knots, coeffs = spline(checked, start, smooth_positions=smooth_positions)
    check_spline(checked, knots, coeffs, start)
    return knots, coeffs


class Execution:
    """A trajectory handed to the stepper: its plan and where it sits in simulated time."""

    def __init__(self, checked: Checked, plan: TrajectoryPlan) -> None:
        self.checked = checked
        self.plan = plan
        self._missing_since: float | None = None

    @property
    def t0(self) -> float:
        return self.plan.t0

    @property
    def t_end(self) -> float:
        return self.plan.t_end

    def desired(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.plan.state(t)

    def running(self, device: 'TrajectoryHost') -> bool:
        """Whether the plan still ran at the device's latest snapshot; any thread."""
        return any(p is self.plan for p in device.snapshot.plans)

    def taken_over(self, device: 'TrajectoryHost', now: float | None = None) -> bool:
        """True when something else (reset, hold, set_goals, move_to) replaced the plan.

        The plans and the time are read from one snapshot, so a plan that just ended is
        never missing before its end; a miss must still be seen ``CONFIRM_S`` of wall time
        later to count all the same, a margin from when the two were read apart.
        """
        if not self.plan.intact:
            return True
        snap = device.snapshot
        present = any(p is self.plan for p in snap.plans)
        if present or snap.time >= self.plan.t_end - 1e-9:
            self._missing_since = None
            return False
        now = time.monotonic() if now is None else now
        if self._missing_since is None:
            self._missing_since = now
            return False
        return now - self._missing_since >= CONFIRM_S


def follow(device: 'TrajectoryHost', checked: Checked, *, delay: float = 0.0,
           smooth_positions: bool = False) -> Execution:
    """Start the trajectory on the stepper (all or nothing) and return its ``Execution``.

    Built on the stepper thread from the setpoint at that instant, so the path starts
    where the joints are being held, and checked against the limits again there.
    """
    delay = max(0.0, finite_number(delay, 'delay'))
    acts = checked.actuators

    def apply(s: 'Physics') -> TrajectoryPlan:
        now = s.time
        pos, vel, acc = _start_state(s, acts, now)
        knots, coeffs = spline(checked, pos, vel, acc, smooth_positions=smooth_positions)
        check_spline(checked, knots, coeffs, pos)
        plan = TrajectoryPlan(acts, now + delay, knots, coeffs)
        if delay > 0:
            # Until it starts, the joints hold where they are now.
            s.release(acts, hold_at=pos)
        s.take_over(plan, positions=True)
        device.preempt_moves_touching(list(acts))
        return plan

    plan = device.on_physics(apply, wait=True)
    device.record('trajectory', {'joints': checked.joints, 'points': len(checked.times),
                                 'duration_s': checked.duration},
                  {device.layout.actuators[a]: float(v)
                   for a, v in zip(acts, checked.positions[-1], strict=True)})
    return Execution(checked, plan)


def hold(device: 'TrajectoryHost', actuators: Vector) -> np.ndarray:
    """Freeze these actuators where their path is now; other joints keep moving.

    Cancelling a trajectory stops its joints only, as joint_trajectory_controller does;
    ``Device.hold`` would also stop a gripper or a move_to elsewhere.
    """
    acts = np.asarray(actuators, dtype=int)

    def apply(s: 'Physics') -> np.ndarray:
        now = s.time
        pos, _vel, _acc = _start_state(s, acts, now)
        s.release(acts, hold_at=pos)
        return pos
    pos = device.on_physics(apply, wait=True)
    device.record('hold', {'actuators': [device.layout.actuators[a] for a in acts]},
                  {device.layout.actuators[a]: float(v) for a, v in zip(acts, pos, strict=True)})
    return pos


# --- tolerances ------------------------------------------------------------------------------
@dataclass
class Tolerances:
    """Per-joint limits on desired - actual; 0 means not checked (as in ros2_controllers)."""

    path_position: np.ndarray
    path_velocity: np.ndarray
    path_acceleration: np.ndarray
    goal_position: np.ndarray
    goal_velocity: np.ndarray
    goal_acceleration: np.ndarray
    goal_time: float = 0.0            # seconds after the end; 0 waits as long as it takes

    @classmethod
    def defaults(cls, n: int, *, trajectory: Vector | None = None,
                 goal: Vector | None = None, stopped_velocity: float = 0.01,
                 goal_time: float = 0.0) -> 'Tolerances':
        """joint_trajectory_controller's constraints: per-joint trajectory and goal position
        tolerances, stopped_velocity_tolerance and goal_time."""
        z = np.zeros(n)
        return cls(np.asarray(trajectory if trajectory is not None else z, dtype=float),
                   z.copy(), z.copy(),
                   np.asarray(goal if goal is not None else z, dtype=float),
                   np.full(n, float(stopped_velocity)), z.copy(), float(goal_time))

    def select(self, index: Vector) -> 'Tolerances':
        """The tolerances of a subset of joints (a goal naming only some of them)."""
        idx = np.asarray(index, dtype=int)
        return Tolerances(**{f: getattr(self, f)[idx] for f in (
            'path_position', 'path_velocity', 'path_acceleration', 'goal_position',
            'goal_velocity', 'goal_acceleration')}, goal_time=self.goal_time)


def _override(current, value, where):
    """A goal's tolerance: > 0 replaces, 0 keeps the default, -1 removes the check."""
    v = finite_number(value, where)
    if v > 0:
        return v
    if v == 0:
        return current
    if v == -1:
        return 0.0
    raise InvalidArgument(f'{v:g} is not a tolerance', where=where,
                          allowed='above 0, 0 (controller default) or -1 (no tolerance)')


def goal_tolerances(defaults: Tolerances, joints: Sequence[str], path: Any = (), goal: Any = (),
                    goal_time: float = 0.0) -> Tolerances:
    """Merge a FollowJointTrajectory goal's tolerances into the controller defaults.

    ``path``/``goal`` are sequences of (name, position, velocity, acceleration). A name that
    is not one of the goal's joints is refused: a tolerance that silently applies to
    nothing is a safety check the caller believes in but does not get.
    """
    tol = Tolerances(**{f: getattr(defaults, f).copy() for f in (
        'path_position', 'path_velocity', 'path_acceleration', 'goal_position',
        'goal_velocity', 'goal_acceleration')}, goal_time=defaults.goal_time)
    for kind, entries in (('path', path), ('goal', goal)):
        try:
            entries = [tuple(e) for e in entries]
        except TypeError:
            raise InvalidArgument('expected (name, position, velocity, acceleration) entries',
                                  where=f'{kind}_tolerance') from None
        for i, entry in enumerate(entries):
            if len(entry) != 4:
                raise InvalidArgument(f'has {len(entry)} fields', where=f'{kind}_tolerance[{i}]',
                                      allowed='name, position, velocity, acceleration')
        # a joint given twice would silently keep its last tolerance
        unique_names([e[0] for e in entries if isinstance(e[0], str)], f'{kind}_tolerance',
                     'joint')
        for i, (name, p, v, a) in enumerate(entries):
            where = f'{kind}_tolerance[{i}]'
            if name not in joints:
                raise UnknownName('joint', name, joints, where=where)
            j = joints.index(name)
            for field, value in (('position', p), ('velocity', v), ('acceleration', a)):
                arr = getattr(tol, f'{kind}_{field}')
                arr[j] = _override(arr[j], value, f'{where}.{field}')
    gt = finite_number(goal_time, 'goal_time_tolerance')
    if gt < 0:
        raise InvalidArgument(f'{gt:g} s', where='goal_time_tolerance',
                              allowed='0 (controller default) or more')
    if gt > 0:
        tol.goal_time = gt
    return tol


@dataclass
class Verdict:
    """One look at a running trajectory: where it should be, where it is, and the outcome."""

    state: str                 # 'running', 'settling', 'succeeded', 'path', 'goal'
    time: float                # simulated time of the snapshot
    desired: tuple             # (positions, velocities, accelerations)
    actual: tuple              # (positions, velocities)
    error: tuple               # desired - actual (positions, velocities)
    message: str = ''


def evaluate(execution: Execution, snapshot: Any, tolerances: Tolerances) -> Verdict:
    """Desired vs actual from one snapshot, and what joint_trajectory_controller would do.

    Before the end: any path tolerance exceeded aborts. After the end: success once every
    goal tolerance holds; past ``goal_time`` (when set) a remaining error aborts.
    Acceleration tolerances are accepted but not checked: the device does not measure
    joint acceleration, and a check on a derived value would abort on noise.
    """
    c = execution.checked
    t = snapshot.time
    dp, dv, da = execution.desired(t)
    ap = snapshot.qpos[c.qpos_adr]
    av = snapshot.qvel[c.dof_adr]
    ep, ev = dp - ap, dv - av
    desired, actual, error = (dp, dv, da), (ap, av), (ep, ev)
    if t < execution.t_end:
        bad = _violations(c.joints, ep, ev, tolerances.path_position,
                          tolerances.path_velocity)
        if bad:
            return Verdict('path', t, desired, actual, error,
                           f'path tolerance violated at t={t - execution.t0:.3f} s: {bad}')
        return Verdict('running', t, desired, actual, error)
    # After the end the reference is the last point at rest.
    ev_goal = -av
    bad = _violations(c.joints, ep, ev_goal, tolerances.goal_position,
                      tolerances.goal_velocity)
    if not bad:
        return Verdict('succeeded', t, desired, actual, error)
    if tolerances.goal_time > 0 and t > execution.t_end + tolerances.goal_time:
        return Verdict('goal', t, desired, actual, error,
                       f'goal tolerance violated {tolerances.goal_time:g} s after the '
                       f'trajectory ended: {bad}')
    return Verdict('settling', t, desired, actual, error)


def _violations(joints, ep, ev, tol_p, tol_v):
    out = []
    for j, name in enumerate(joints):
        if tol_p[j] > 0 and abs(ep[j]) > tol_p[j]:
            out.append(f'{name} position error {ep[j]:.4g} (tolerance {tol_p[j]:g})')
        elif tol_v[j] > 0 and abs(ev[j]) > tol_v[j]:
            out.append(f'{name} velocity error {ev[j]:.4g} (tolerance {tol_v[j]:g})')
    return '; '.join(out)


__all__ = ['trajectory_joints', 'controller_joints', 'check_trajectory', 'Checked', 'spline',
           'check_spline', 'TrajectoryPlan', 'preview', 'follow', 'hold', 'Execution',
           'Tolerances',
           'goal_tolerances', 'evaluate', 'Verdict', 'errors']
