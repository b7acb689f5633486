"""Joint trajectories on the device: validation, interpolation, limits, tolerances.

Devices run paused at real-time factor 0 and advance with ``step(n)``, so every sample is
at a known simulated time and the tests do not depend on the machine's speed.
"""

import dataclasses
import math
import time

import numpy as np
import pytest

from mujoco_hal_ros import errors, menagerie
from mujoco_hal_ros.errors import ConfigError, DeviceError
from mujoco_hal_ros.motion import joint_trajectory as jt
from mujoco_hal_ros.sim.device import Device

BENCH_YAML = __import__('os').path.join(__import__('os').path.dirname(__file__), '..', '..',
                                        'config', 'bench_arm.yaml')
BENCH_JOINTS = ['pan', 'lift', 'elbow', 'wrist']
DEG = math.pi / 180


@pytest.fixture
def bench():
    dev = Device(BENCH_YAML, environ={'OPENHAL_BENCH_ARM': menagerie.bench_arm_path()},
                 real_time_factor=0, start_paused=True)
    yield dev
    dev.close()


@pytest.fixture
def panda():
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie Panda is not installed (test extra)')
    dev = Device(model=path, keyframe='home', real_time_factor=0, start_paused=True)
    yield dev
    dev.close()


def pt(t, pos, vel=None, acc=None):
    return {'time_from_start': t, 'positions': pos, 'velocities': vel or [],
            'accelerations': acc or []}


def refused(dev, code, joints, points, **kw):
    """The request is refused with ``code`` and nothing on the device changed."""
    before = dev.snapshot.setpoint.copy()
    with pytest.raises(DeviceError) as info:
        checked = jt.check_trajectory(dev.layout, joints, points, **kw)
        jt.follow(dev, checked)
    assert info.value.code == code, str(info.value)
    dev.step(20)
    assert np.array_equal(dev.snapshot.setpoint, before)
    assert not dev.stepper.plans
    return str(info.value)


def rest(dev):
    return dev.snapshot.setpoint[[g.actuator for g in jt.trajectory_joints(
        dev.layout).values()]].copy()


# --- the joint map --------------------------------------------------------------------------
def test_joint_map_bench_and_panda(bench, panda):
    m = jt.trajectory_joints(bench.layout)
    assert list(m) == BENCH_JOINTS
    assert [g.name for g in m.values()] == ['pan_goal', 'lift_goal', 'elbow_goal', 'wrist_goal']
    p = jt.trajectory_joints(panda.layout)
    assert list(p) == [f'joint{i}' for i in range(1, 8)]   # the tendon gripper is not a joint
    assert jt.controller_joints(panda.layout) == list(p)
    with pytest.raises(ConfigError, match='finger'):
        jt.controller_joints(panda.layout, ['joint1', 'finger_joint1'])
    with pytest.raises(ConfigError, match='twice'):
        jt.controller_joints(panda.layout, ['joint1', 'joint1'])


# --- refusals -------------------------------------------------------------------------------
def test_malformed_trajectories_are_refused_and_nothing_moves(bench):
    r = list(rest(bench))
    J = BENCH_JOINTS
    msg = refused(bench, errors.UNKNOWN_NAME, ['pan', 'lift', 'elbow', 'hand'], [pt(1, r)])
    assert "'hand'" in msg and 'wrist' in msg
    assert 'twice' in refused(bench, errors.INVALID_ARGUMENT, ['pan', 'pan', 'elbow', 'wrist'],
                              [pt(1, r)])
    assert 'leaves out' in refused(bench, errors.INVALID_ARGUMENT, J[:3], [pt(1, r[:3])])
    assert 'no points' in refused(bench, errors.INVALID_ARGUMENT, J, [])
    assert 'no joints' in refused(bench, errors.INVALID_ARGUMENT, [], [pt(1, r)])
    assert '3 values for 4' in refused(bench, errors.INVALID_ARGUMENT, J, [pt(1, r[:3])])
    assert 'velocities' in refused(bench, errors.INVALID_ARGUMENT, J, [pt(1, r, [0, 0])])
    assert 'accelerations' in refused(bench, errors.INVALID_ARGUMENT, J,
                                      [pt(1, r, [0] * 4, [0] * 5)])
    assert 'accelerations but no velocities' in refused(
        bench, errors.INVALID_ARGUMENT, J, [pt(1, r, None, [0] * 4)])
    assert 'not after' in refused(bench, errors.INVALID_ARGUMENT, J, [pt(1, r), pt(1, r)])
    assert 'not after' in refused(bench, errors.INVALID_ARGUMENT, J, [pt(2, r), pt(1, r)])
    assert 'negative' in refused(bench, errors.INVALID_ARGUMENT, J, [pt(-1, r)])
    assert 'finite' in refused(bench, errors.INVALID_ARGUMENT, J, [pt(1, [math.nan] + r[1:])])
    assert 'finite' in refused(bench, errors.INVALID_ARGUMENT, J, [pt(math.inf, r)])
    assert 'finite' in refused(bench, errors.INVALID_ARGUMENT, J,
                               [pt(1, r, [0, math.inf, 0, 0])])
    assert 'multi-DOF' in refused(bench, errors.INVALID_ARGUMENT, J, [pt(1, r)],
                                  multi_dof_joints=['base'])
    # Outside the device file's goal limits (pan is limited to +-90 deg): the kernel's code.
    far = [100 * DEG] + r[1:]
    msg = refused(bench, errors.LIMIT_EXCEEDED, J, [pt(1, r), pt(3, far)])
    assert 'points[1]' in msg and 'pan_goal' in msg and '-90..90 deg' in msg


def test_a_point_exactly_at_a_limit_is_accepted(bench):
    r = list(rest(bench))
    checked = jt.check_trajectory(bench.layout, BENCH_JOINTS, [pt(4, [90 * DEG] + r[1:])])
    assert checked.positions[0, 0] == pytest.approx(math.pi / 2)


def test_partial_goal_when_allowed_leaves_other_joints_alone(bench):
    r = rest(bench)
    checked = jt.check_trajectory(bench.layout, ['elbow'], [pt(2, [0.5])], allow_partial=True)
    jt.follow(bench, checked)
    bench.step(1200)
    sp = bench.snapshot.setpoint
    assert sp[2] == pytest.approx(0.5)
    assert np.allclose(sp[[0, 1, 3]], r[[0, 1, 3]])


def test_spline_overshoot_and_speed_are_refused(bench):
    r = list(rest(bench))
    # Cubic with a huge velocity at an in-limit point: the curve leaves pan's +-90 deg.
    pts = [pt(1.0, [80 * DEG] + r[1:], [0] * 4), pt(2.0, [85 * DEG] + r[1:], [5, 0, 0, 0]),
           pt(6.0, [0.0] + r[1:], [0] * 4)]
    msg = refused(bench, errors.LIMIT_EXCEEDED, BENCH_JOINTS, pts)
    assert 'between points' in msg and 'pan' in msg
    # 60 deg/s is the bench arm's max_change_per_s: 80 deg in 0.5 s is too fast.
    msg = refused(bench, errors.LIMIT_EXCEEDED, BENCH_JOINTS, [pt(0.5, [80 * DEG] + r[1:])])
    assert 'deg/s' in msg and 'max_change_per_s' in msg


# --- interpolation --------------------------------------------------------------------------
def _checked(dev, joints, points):
    return jt.check_trajectory(dev.layout, joints, points)


def test_linear_cubic_quintic_like_joint_trajectory_controller(panda):
    J = list(jt.trajectory_joints(panda.layout))
    q0 = rest(panda)
    q1 = q0 + 0.1
    q2 = q0 - 0.05
    # Positions only: straight lines between points, the first from the setpoint at t=0.
    c = _checked(panda, J, [pt(1.0, list(q1)), pt(3.0, list(q2))])
    knots, coeffs = jt.spline(c, q0)
    assert list(knots) == [0.0, 1.0, 3.0]
    p, v, _ = jt._evaluate(knots, coeffs, [0.5, 2.0])
    assert np.allclose(p[0], (q0 + q1) / 2) and np.allclose(v[0], q1 - q0)
    assert np.allclose(p[1], (q1 + q2) / 2) and np.allclose(v[1], (q2 - q1) / 2)
    # Velocities: cubic Hermite through positions and velocities.
    v1 = np.full(7, 0.02)
    c = _checked(panda, J, [pt(1.0, list(q1), list(v1)), pt(3.0, list(q2), [0] * 7)])
    knots, coeffs = jt.spline(c, q0)
    p, v, _ = jt._evaluate(knots, coeffs, [0.0, 1.0, 3.0])
    assert np.allclose(p, [q0, q1, q2]) and np.allclose(v, [np.zeros(7), v1, np.zeros(7)])
    # Velocities and accelerations: quintic, matching all three at the knots.
    a1 = np.full(7, -0.03)
    c = _checked(panda, J, [pt(1.0, list(q1), list(v1), list(a1)),
                            pt(3.0, list(q2), [0] * 7, [0] * 7)])
    knots, coeffs = jt.spline(c, q0)
    p, v, a = jt._evaluate(knots, coeffs, [0.0, 1.0 - 1e-9, 1.0, 3.0 - 1e-9])
    assert np.allclose(p[[0, 2]], [q0, q1]) and np.allclose(v[2], v1)
    assert np.allclose(a[1], a1, atol=1e-6) and np.allclose(a[2], a1)
    # A first point at time 0 is the start itself (no segment from the setpoint).
    c = _checked(panda, J, [pt(0.0, list(q1)), pt(2.0, list(q2))])
    knots, _ = jt.spline(c, q0)
    assert list(knots) == [0.0, 2.0]


def test_smooth_positions_is_c1_through_every_point(panda):
    J = list(jt.trajectory_joints(panda.layout))
    q0 = rest(panda)
    pts = [pt(t, list(q0 + 0.1 * math.sin(t))) for t in (0.5, 1.0, 1.5, 2.0, 3.0)]
    c = _checked(panda, J, pts)
    knots, coeffs = jt.spline(c, q0, smooth_positions=True)
    p, _, _ = jt._evaluate(knots, coeffs, knots)
    assert np.allclose(p[1:], c.positions)
    eps = 1e-7
    _, va, aa = jt._evaluate(knots, coeffs, knots[1:-1] - eps)
    _, vb, ab = jt._evaluate(knots, coeffs, knots[1:-1] + eps)
    assert np.allclose(va, vb, atol=1e-5) and np.allclose(aa, ab, atol=1e-3)
    _, v_end, _ = jt._evaluate(knots, coeffs, [knots[-1]])
    assert np.allclose(v_end, 0)


def test_follow_tracks_the_spline_in_simulated_time_with_any_joint_order(bench):
    r = rest(bench)
    order = ['wrist', 'pan', 'elbow', 'lift']            # not the model's order
    idx = [BENCH_JOINTS.index(j) for j in order]
    target = r.copy()
    target[0] += 20 * DEG
    target[3] -= 15 * DEG
    c = jt.check_trajectory(bench.layout, order, [pt(1.0, list(target[idx]))])
    ex = jt.follow(bench, c)
    t0 = ex.t0
    assert ex.t_end == pytest.approx(t0 + 1.0)
    for _ in range(5):
        bench.step(50)                                 # 0.1 s of 2 ms steps
        snap = bench.snapshot
        frac = min(1.0, (snap.time - t0) / 1.0)
        assert np.allclose(snap.setpoint[:4], r + frac * (target - r), atol=1e-9)
        dp, _dv, _da = ex.desired(snap.time)
        assert np.allclose(dp, (r + frac * (target - r))[idx])
    bench.step(400)
    assert np.allclose(bench.snapshot.setpoint[:4], target)
    assert not bench.stepper.plans                     # ended; the setpoint stays
    assert bench.audit[-1]['kind'] == 'trajectory'


def test_a_new_trajectory_starts_where_the_running_one_is(bench):
    r = rest(bench)
    a = r.copy()
    a[0] += 40 * DEG
    jt.follow(bench, jt.check_trajectory(bench.layout, BENCH_JOINTS, [pt(2.0, list(a))]))
    bench.step(250)                                    # halfway
    mid = bench.snapshot.setpoint[:4].copy()
    b = r.copy()
    b[0] -= 10 * DEG
    ex = jt.follow(bench, jt.check_trajectory(bench.layout, BENCH_JOINTS, [pt(2.0, list(b))]))
    assert len(bench.stepper.plans) == 1
    bench.step(1)
    assert np.allclose(bench.snapshot.setpoint[:4], mid, atol=0.01)   # no jump
    bench.step(1100)
    assert np.allclose(bench.snapshot.setpoint[:4], b)
    assert ex.plan.intact


def test_delay_holds_then_starts(bench):
    r = rest(bench)
    tgt = r.copy()
    tgt[1] += 10 * DEG
    ex = jt.follow(bench, jt.check_trajectory(bench.layout, BENCH_JOINTS, [pt(1.0, list(tgt))]),
                   delay=0.5)
    bench.step(200)                                    # 0.4 s: still waiting
    assert np.allclose(bench.snapshot.setpoint[:4], r)
    bench.step(600)
    assert np.allclose(bench.snapshot.setpoint[:4], tgt)
    assert ex.t0 > 0.49


def test_hold_stops_only_the_trajectory_joints(bench):
    r = rest(bench)
    tgt = r.copy()
    tgt[0] += 30 * DEG
    c = jt.check_trajectory(bench.layout, ['pan'], [pt(1.0, [tgt[0]])], allow_partial=True)
    ex = jt.follow(bench, c)
    bench.set_goals({'wrist_goal': 10.0})              # another joint, moving meanwhile
    bench.step(100)
    held = jt.hold(bench, c.actuators)
    assert r[0] < held[0] < tgt[0]
    assert ex.taken_over(bench.stepper)                 # released by the hold
    bench.step(600)
    sp = bench.snapshot.setpoint
    assert sp[0] == pytest.approx(held[0])
    assert sp[3] == pytest.approx(10 * DEG)            # the wrist finished its own goal


def test_reset_takes_the_plan_over(bench):
    r = rest(bench)
    tgt = r.copy()
    tgt[0] += 30 * DEG
    ex = jt.follow(bench, jt.check_trajectory(bench.layout, BENCH_JOINTS, [pt(2.0, list(tgt))]))
    bench.step(100)
    assert not ex.taken_over(bench.stepper)
    bench.reset()
    now = time.monotonic()
    assert not ex.taken_over(bench.stepper, now)       # a miss must be seen twice
    assert ex.taken_over(bench.stepper, now + 1.0)


# --- tolerances -----------------------------------------------------------------------------
def test_goal_tolerances_merge_like_ros2_controllers():
    d = jt.Tolerances.defaults(3, trajectory=[0.1, 0.1, 0.1], goal=[0.01, 0.01, 0.01],
                               stopped_velocity=0.02, goal_time=0.5)
    t = jt.goal_tolerances(d, ['a', 'b', 'c'], path=[('a', 0.3, 0, 0), ('b', -1, 0, 0)],
                           goal=[('c', 0, 0.5, 0)], goal_time=0)
    assert list(t.path_position) == [0.3, 0.0, 0.1]    # override, erase, default
    assert list(t.goal_velocity) == [0.02, 0.02, 0.5]
    assert t.goal_time == 0.5
    assert jt.goal_tolerances(d, ['a', 'b', 'c'], goal_time=2.0).goal_time == 2.0
    with pytest.raises(DeviceError) as info:
        jt.goal_tolerances(d, ['a', 'b', 'c'], path=[('z', 0.1, 0, 0)])
    assert info.value.code == errors.UNKNOWN_NAME
    with pytest.raises(DeviceError, match='not a tolerance'):
        jt.goal_tolerances(d, ['a', 'b', 'c'], goal=[('a', -2, 0, 0)])
    with pytest.raises(DeviceError, match='goal_time'):
        jt.goal_tolerances(d, ['a', 'b', 'c'], goal_time=-1)
    assert list(d.select([2, 0]).goal_position) == [0.01, 0.01]


def test_evaluate_running_success_path_and_goal_violations(bench):
    r = rest(bench)
    tgt = r.copy()
    tgt[0] += 30 * DEG
    c = jt.check_trajectory(bench.layout, BENCH_JOINTS, [pt(1.0, list(tgt))])
    loose = jt.Tolerances.defaults(4, trajectory=[0.5] * 4, goal=[0.01] * 4)
    ex = jt.follow(bench, c)
    bench.step(100)
    v = jt.evaluate(ex, bench.snapshot, loose)
    assert v.state == 'running'
    assert np.allclose(v.error[0], v.desired[0] - bench.snapshot.qpos[:4])
    # A position servo lags its setpoint: a 1e-5 rad path tolerance is violated.
    tight = jt.Tolerances.defaults(4, trajectory=[1e-5] * 4)
    v = jt.evaluate(ex, bench.snapshot, tight)
    assert v.state == 'path' and 'pan position error' in v.message
    bench.step(1000)
    v = jt.evaluate(ex, bench.snapshot, loose)
    assert v.state == 'succeeded', v.message
    # A joint that stays off its goal: settling until goal_time has passed, then violated.
    strict = jt.Tolerances.defaults(4, goal=[1e-3] * 4, goal_time=0.2)
    ex = jt.follow(bench, jt.check_trajectory(bench.layout, BENCH_JOINTS, [pt(0.6, list(r))]))
    bench.step(310)
    off = dataclasses.replace(bench.snapshot, qpos=bench.snapshot.qpos + 0.01)
    v = jt.evaluate(ex, off, strict)
    assert v.state == 'settling'
    bench.step(200)
    off = dataclasses.replace(bench.snapshot, qpos=bench.snapshot.qpos + 0.01)
    v = jt.evaluate(ex, off, strict)
    assert v.state == 'goal' and 'goal tolerance' in v.message
    assert jt.evaluate(ex, bench.snapshot, strict).state == 'succeeded'
