"""Limits kernel and Device requests under hostile values: refused with a code, nothing moved."""

from hostile_helpers import (
    accepted_goals,
    accepted_move,
    hostile_scalars,
    hostile_vectors,
    is_refusal,
    names,
    refused,
    settle,
    small_floats,
    state_of,
    unchanged,
)
from hypothesis import example, given, settings, strategies as st
import numpy as np

from mujoco_hal_ros.config import limits

GOALS = ['pan_goal', 'lift_goal', 'elbow_goal', 'wrist_goal']
ARGS = ['x', 'y', 'z']


def goal_dicts():
    return st.one_of(
        st.dictionaries(names(GOALS, hashable=True), st.one_of(hostile_scalars(), small_floats()),
                        max_size=5),
        st.dictionaries(st.sampled_from(GOALS), hostile_scalars(), min_size=1, max_size=4),
        hostile_scalars(), st.lists(st.sampled_from(GOALS), max_size=3))


def sane_goals():
    """Goals inside every channel's limits (degrees): the accepted branch must run too."""
    return st.dictionaries(st.sampled_from(GOALS), small_floats(-80.0, 80.0), min_size=1,
                           max_size=4)


def workspace_points():
    """Points inside the bench arm's workspace box, in metres (most of them reachable)."""
    return st.tuples(small_floats(0.14, 0.2), small_floats(-0.06, 0.06),
                     small_floats(0.03, 0.09)).map(list)


@settings(max_examples=200, deadline=None)
@given(goals=goal_dicts())
def test_check_goals_refuses_with_a_code_or_returns_finite_natives(bench, goals):
    try:
        out = limits.check_goals(bench.layout, goals)
    except Exception as exc:     # noqa: BLE001 - the property is about which exception
        assert is_refusal(exc)
        return
    assert out and all(np.isfinite(v) for v in out.values())
    for name, native in out.items():
        g = bench.layout.goals[name]
        assert not limits.outside(g.to_unit(native), g.min, g.max, 1e-6)


@settings(max_examples=120, deadline=None)
@given(goals=st.one_of(goal_dicts(), sane_goals()))
def test_set_goals_is_all_or_nothing(bench, goals):
    before = state_of(bench)
    goals_before = bench.goals()
    try:
        natives = limits.check_goals(bench.layout, goals)
    except Exception:   # noqa: BLE001 - checked by the test above
        natives = None
    if natives is not None:
        out = bench.set_goals(goals)        # a good input never raises
        assert out['success'] and out['code'] == 'STARTED', out
        accepted_goals(bench, goals, natives, goals_before)
        return
    assert refused(lambda: bench.set_goals(goals)) is not None
    unchanged(bench, before)


@settings(max_examples=120, deadline=None)
@given(point=st.one_of(hostile_vectors(3), workspace_points()),
       speed=st.one_of(st.none(), hostile_scalars()),
       aim=st.one_of(st.none(), st.tuples(hostile_vectors(3), hostile_vectors(3)),
                     hostile_scalars()),
       site=st.one_of(st.none(), names(['tip'])))
@example(point=[0.17, 0.0, 0.06], speed=None, aim=None, site='tip')        # accepted ones
@example(point=[0.15, 0.04, 0.05], speed=0.05, aim=([1, 0, 0], [0, 0, -1]), site=None)
def test_move_to_refuses_hostile_points_speeds_aims_and_sites(bench, point, speed, aim, site):
    before = state_of(bench)
    moves = []
    err = refused(lambda: moves.append(bench.move_to(point=point, speed=speed, aim=aim,
                                                     site=site, wait=False)))
    if err is None:                  # something sane got through: it must be a real move
        accepted_move(bench, moves[0], point)
        return
    unchanged(bench, before)


@settings(max_examples=120, deadline=None)
@given(speed=st.one_of(st.none(), hostile_scalars(), small_floats(-1.0, 1.0)),
       aim=st.one_of(st.none(), st.tuples(hostile_vectors(3), hostile_vectors(3)),
                     st.just(([1, 0, 0], [0, 0, -1])), hostile_scalars()))
def test_move_to_a_reachable_point_refuses_hostile_speeds_and_aims(bench, speed, aim):
    """The point is fine, so the speed and the aim are what gets checked."""
    before = state_of(bench)
    moves = []
    err = refused(lambda: moves.append(bench.move_to(point=[0.17, 0.0, 0.06], speed=speed,
                                                     aim=aim, wait=False)))
    if err is None:
        accepted_move(bench, moves[0], [0.17, 0.0, 0.06])
        return
    unchanged(bench, before)


@settings(max_examples=120, deadline=None)
@given(action=names(['move_to', 'hold']),
       args=st.one_of(st.none(), hostile_scalars(),
                      st.dictionaries(names(ARGS, hashable=True),
                                      st.one_of(hostile_scalars(), small_floats(-1e6, 1e6)),
                                      max_size=4),
                      workspace_points().map(
                          lambda p: {k: v * 1000 for k, v in zip(ARGS, p, strict=True)})))
def test_run_action_refuses_hostile_names_and_arguments(bench, action, args):
    before = state_of(bench)
    out = []
    err = refused(lambda: out.append(bench.run_action(action, args, wait=False)
                                     if action != 'hold' else bench.run_action(action, args)))
    if err is None and action == 'hold':
        assert out[0]['success'] and out[0]['code'] == 'DONE', out[0]
        unchanged(bench, before)         # held where it was: nothing moves
        return
    if err is None:
        accepted_move(bench, out[0])
        return
    unchanged(bench, before)


@settings(max_examples=60, deadline=None)
@given(x=st.floats(140, 200), y=st.floats(-60, 60), z=st.floats(30, 90))
def test_run_action_in_the_workspace_never_raises_a_refusal_of_input(bench, x, y, z):
    try:
        move = bench.run_action('move_to', {'x': x, 'y': y, 'z': z}, wait=False)
    except Exception as exc:   # noqa: BLE001
        # the workspace box may hold points the IK cannot reach; never a bad-input refusal
        assert getattr(exc, 'code', None) == 'UNREACHABLE', repr(exc)
        settle(bench)
        return
    result = accepted_move(bench, move, [x / 1000, y / 1000, z / 1000])
    assert result['code'] == 'DONE', result


@settings(max_examples=150, deadline=None)
@given(value=hostile_scalars())
def test_scalar_checks(value):
    for check in (limits.real_time_factor, limits.step_count):
        try:
            out = check(value)
        except Exception as exc:   # noqa: BLE001
            assert is_refusal(exc)
            continue
        assert np.isfinite(out) and out >= 0


@settings(max_examples=150, deadline=None)
@given(aim=st.one_of(st.tuples(hostile_vectors(3), hostile_vectors(3)), hostile_scalars(),
                     st.lists(hostile_vectors(3), max_size=3)))
def test_check_aim_gives_finite_non_zero_directions_or_refuses(aim):
    try:
        axis, toward = limits.check_aim(aim)
    except Exception as exc:   # noqa: BLE001
        assert is_refusal(exc)
        return
    for v in (axis, toward):
        assert np.isfinite(v).all() and np.isfinite(np.linalg.norm(v))
        assert np.linalg.norm(v) > 0
