"""FollowJointTrajectory checks and splines under hostile points: refused or finite and in
limits, never a NaN path that every ``<`` comparison waves through."""

import array

from hostile_helpers import (
    hostile_scalars,
    hostile_vectors,
    HUGE,
    is_refusal,
    JOINTS,
    names,
    NON_FINITE,
    refused,
    small_floats,
    state_of,
    unchanged,
)
from hypothesis import given, settings, strategies as st
import numpy as np

from mujoco_hal_ros.config import limits
from mujoco_hal_ros.motion import joint_trajectory as jt

N = len(JOINTS)


def fields():
    """A point's positions/velocities/accelerations: empty, sane, huge, hostile."""
    return st.one_of(
        st.none(), st.just([]),
        st.lists(small_floats(-1.0, 1.0), min_size=N, max_size=N),
        st.lists(st.sampled_from(HUGE + [0.0, 1e3, -1e3]), min_size=N, max_size=N).map(
            lambda v: array.array('d', v)),
        st.lists(st.sampled_from(NON_FINITE + [0.0]), min_size=N, max_size=N).map(
            lambda v: array.array('d', v)),
        hostile_vectors(N))


def points():
    point = st.fixed_dictionaries({
        'time_from_start': st.one_of(st.floats(0.0, 5.0), st.sampled_from(HUGE + NON_FINITE),
                                     hostile_scalars()),
        'positions': fields(), 'velocities': fields(), 'accelerations': fields()})
    return st.one_of(st.lists(point, min_size=0, max_size=4), hostile_scalars())


def joint_lists():
    return st.one_of(st.just(JOINTS), st.permutations(JOINTS),
                     st.lists(st.sampled_from(JOINTS), min_size=N, max_size=N + 1),
                     st.lists(names(JOINTS), max_size=5), hostile_scalars())


def check_path(bench, checked):
    """spline + check_spline: refused with a code, or finite and inside every limit."""
    start = bench.snapshot.setpoint[checked.actuators]
    try:
        knots, coeffs = jt.spline(checked, start)
        jt.check_spline(checked, knots, coeffs, start)
    except Exception as exc:   # noqa: BLE001 - the property is which exception
        assert is_refusal(exc)
        return False
    assert np.isfinite(knots).all() and np.isfinite(coeffs).all()
    plan = jt.TrajectoryPlan(checked.actuators, 0.0, knots, coeffs)
    samples = plan.sample(np.linspace(0.0, knots[-1], 200))
    assert np.isfinite(samples).all()
    for j, g in enumerate(checked.goals):
        lo = min(g.to_native(g.min), g.to_native(g.max), start[j])
        hi = max(g.to_native(g.min), g.to_native(g.max), start[j])
        assert not limits.outside(samples[:, j].min(), lo, hi, 1e-6)
        assert not limits.outside(samples[:, j].max(), lo, hi, 1e-6)
    return True


@settings(max_examples=200, deadline=None)
@given(joints=joint_lists(), pts=points())
def test_check_trajectory_and_spline_refuse_or_give_a_finite_in_limit_path(bench, joints, pts):
    try:
        checked = jt.check_trajectory(bench.layout, joints, pts)
    except Exception as exc:   # noqa: BLE001
        assert is_refusal(exc)
        return
    check_path(bench, checked)


@settings(max_examples=60, deadline=None)
@given(pts=points())
def test_follow_refuses_without_moving_anything(bench, pts):
    before = state_of(bench)
    try:
        checked = jt.check_trajectory(bench.layout, JOINTS, pts)
        ok = check_path(bench, checked)
    except Exception:   # noqa: BLE001 - covered above
        ok, checked = False, None
    if ok or checked is None:
        return
    assert refused(lambda: jt.follow(bench, checked)) is not None
    unchanged(bench, before)


@settings(max_examples=60, deadline=None)
@given(t=st.lists(st.floats(0.05, 3.0), min_size=1, max_size=4, unique=True),
       q=st.lists(st.lists(small_floats(-0.5, 0.5), min_size=N, max_size=N), min_size=4,
                  max_size=4))
def test_a_slow_in_limit_position_trajectory_is_accepted(bench, t, q):
    t = sorted(t)
    pts = [{'time_from_start': 2.0 * (i + 1) + ti, 'positions': q[i]}
           for i, ti in enumerate(t)]
    checked = jt.check_trajectory(bench.layout, JOINTS, pts)
    assert check_path(bench, checked)


def tolerance_entries():
    entry = st.tuples(names(JOINTS), hostile_scalars(), small_floats(-2, 2), st.just(0.0))
    return st.one_of(st.lists(entry, max_size=4), hostile_scalars(),
                     st.lists(st.lists(small_floats(), max_size=5), max_size=2))


@settings(max_examples=150, deadline=None)
@given(path=tolerance_entries(), goal=tolerance_entries(),
       goal_time=st.one_of(small_floats(-1, 5), hostile_scalars()))
def test_goal_tolerances_refuse_or_give_finite_tolerances(path, goal, goal_time):
    defaults = jt.Tolerances.defaults(N, goal=[0.01] * N)
    try:
        tol = jt.goal_tolerances(defaults, JOINTS, path=path, goal=goal, goal_time=goal_time)
    except Exception as exc:   # noqa: BLE001
        assert is_refusal(exc)
        return
    for field in ('path_position', 'goal_position', 'goal_velocity'):
        values = getattr(tol, field)
        assert np.isfinite(values).all() and (values >= 0).all()
    names_given = [e[0] for e in list(path) + list(goal)]
    assert all(isinstance(n, str) for n in names_given)
    for entries in (path, goal):
        assert len({e[0] for e in entries}) == len(entries), 'a duplicate was merged'
