"""IK and straight-line paths on the bench arm and real Menagerie arms.

Targets come from forward kinematics of random in-range configurations, so every one is
reachable and a miss is the solver's fault. Every answer is re-checked by forward kinematics
on a fresh MjData, so the test does not trust the solver's own error report.
"""

import math

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.errors import InvalidArgument, UnknownName
from mujoco_hal_ros.menagerie import bench_arm_path, model_path
from mujoco_hal_ros.motion import cartesian, ik

DOWN_AIM = ((1.0, 0.0, 0.0), (0.0, 0.0, -1.0))
THREE_DEG = math.radians(3.0)


def _load(name):
    path = bench_arm_path() if name == 'bench' else model_path(name)
    if path is None:
        pytest.skip(f'Menagerie model {name} is not installed (test extra)')
    model = mujoco.MjModel.from_xml_path(path)
    data = mujoco.MjData(model)
    if model.nkey:
        mujoco.mj_resetDataKeyframe(model, data, 0)
    mujoco.mj_kinematics(model, data)
    return model, data


@pytest.fixture(scope='module')
def bench():
    return _load('bench')


@pytest.fixture(scope='module')
def panda():
    return _load('panda')


def _point(model, q, names, *, site=None, body=None, base=None):
    """Independent forward kinematics: position and rotation of the point at q."""
    data = mujoco.MjData(model)
    if base is not None:
        data.qpos[:] = base
    for name, value in zip(names, q, strict=True):
        data.qpos[model.joint(name).qposadr[0]] = value
    mujoco.mj_kinematics(model, data)
    if site is not None:
        i = model.site(site).id
        return data.site_xpos[i].copy(), data.site_xmat[i].reshape(3, 3).copy()
    i = model.body(body).id
    return data.xpos[i].copy(), data.xmat[i].reshape(3, 3).copy()


def _angle(a, b):
    return math.atan2(np.linalg.norm(np.cross(a, b)), float(np.dot(a, b)))


def _bounds(model, names):
    rng = np.array([model.joint(n).range for n in names])
    return rng[:, 0], rng[:, 1]


def _check_random_targets(model, data, count, *, site=None, body=None, aim_axis=None,
                          seed=0):
    solver = ik.IKSolver(model, mujoco.MjData(model), site=site, body=body)
    names = solver.joint_names
    lo, hi = _bounds(model, names)
    rng = np.random.default_rng(seed)
    home = data.qpos.copy()
    for _ in range(count):
        q_goal = rng.uniform(lo, hi)
        target, rot = _point(model, q_goal, names, site=site, body=body, base=home)
        aim = None if aim_axis is None else (aim_axis, rot @ aim_axis)
        scratch = mujoco.MjData(model)
        scratch.qpos[:] = home
        result = ik.solve(model, scratch, target, site=site, body=body, aim=aim)
        assert result.success, (q_goal, result)
        assert result.joint_names == names
        assert np.all(result.qpos >= lo) and np.all(result.qpos <= hi)
        reached, rot_reached = _point(model, result.qpos, names, site=site, body=body,
                                      base=home)
        assert np.linalg.norm(reached - target) <= 1e-3
        assert np.allclose(reached, result.reached, atol=1e-9)
        assert result.pos_error == pytest.approx(np.linalg.norm(reached - target), abs=1e-9)
        if aim is not None:
            assert _angle(rot_reached @ aim_axis, aim[1]) <= THREE_DEG
        else:
            assert result.aim_error == 0.0


# -- reachable targets ---------------------------------------------------------------------


def test_bench_arm_aim_down(bench):
    """The pick pose: tip on a random point with the hand pointing straight down."""
    model, data = bench
    names = ('pan', 'lift', 'elbow', 'wrist')
    lo, hi = _bounds(model, names)
    rng = np.random.default_rng(1)
    solved = 0
    while solved < 25:
        pan, lift, elbow = rng.uniform(lo[:3], hi[:3])
        wrist = math.pi / 2 - lift - elbow   # hand pitch lift+elbow+wrist = 90 deg: down
        if not lo[3] <= wrist <= hi[3]:
            continue
        q_goal = np.array([pan, lift, elbow, wrist])
        target, rot = _point(model, q_goal, names, site='tip', base=data.qpos)
        assert _angle(rot[:, 0], np.array([0.0, 0.0, -1.0])) < 1e-9
        scratch = mujoco.MjData(model)
        scratch.qpos[:] = data.qpos
        result = ik.solve(model, scratch, target, site='tip', aim=DOWN_AIM)
        assert result.success, (q_goal, result)
        assert result.pos_error <= 1e-3 and result.aim_error <= THREE_DEG
        reached, rot_reached = _point(model, result.qpos, names, site='tip', base=data.qpos)
        assert np.linalg.norm(reached - target) <= 1e-3
        assert _angle(rot_reached[:, 0], np.array([0.0, 0.0, -1.0])) <= THREE_DEG
        assert np.all(result.qpos >= lo) and np.all(result.qpos <= hi)
        solved += 1


def test_bench_arm_position_only(bench):
    _check_random_targets(*bench, 40, site='tip', seed=2)


def test_panda_by_body(panda):
    """scene.xml has no site: the hand body's origin is the point."""
    _check_random_targets(*panda, 30, body='hand', seed=3)


def test_panda_by_body_with_aim(panda):
    _check_random_targets(*panda, 15, body='hand', aim_axis=np.array([0.0, 0.0, 1.0]),
                          seed=4)


def test_panda_mjx_gripper_site():
    model, data = _load('panda_mjx')
    _check_random_targets(model, data, 20, site='gripper', seed=5)


def test_ur5e_by_body():
    model, data = _load('ur5e')
    _check_random_targets(model, data, 20, body='wrist_3_link', seed=6)
    _check_random_targets(model, data, 10, body='wrist_3_link',
                          aim_axis=np.array([0.0, 0.0, 1.0]), seed=7)


def test_ur5e_answers_stay_within_half_a_turn_of_the_start():
    """UR5e joints span +-2 pi: the same pose a whole turn away must not be chosen."""
    model, data = _load('ur5e')
    names = [model.joint(j).name for j in range(model.njnt)]
    rng = np.random.default_rng(11)
    start = data.qpos.copy()
    for _ in range(15):
        q = rng.uniform(-np.pi, np.pi, len(names))
        target, _ = _point(model, q, names, body='wrist_3_link')
        data.qpos[:] = start
        res = ik.solve(model, data, target, body='wrist_3_link', q_init=start)
        assert res.success
        lo, hi = model.jnt_range[:, 0], model.jnt_range[:, 1]
        for shift in (-2 * np.pi, 2 * np.pi):   # no whole turn nearer the start fits the range
            other = res.qpos + shift
            nearer = np.abs(other - start) < np.abs(res.qpos - start) - 1e-9
            assert not np.any(nearer & (other >= lo) & (other <= hi)), res.qpos - start
        got, _ = _point(model, res.qpos, res.joint_names, body='wrist_3_link')
        assert np.linalg.norm(got - target) <= 1e-3


def test_default_joints_are_the_chain(bench, panda):
    assert ik.IKSolver(bench[0], mujoco.MjData(bench[0]), site='tip').joint_names == (
        'pan', 'lift', 'elbow', 'wrist')
    # The fingers hang off the hand: they do not move its origin.
    names = ik.IKSolver(panda[0], mujoco.MjData(panda[0]), body='hand').joint_names
    assert names == tuple(f'joint{i}' for i in range(1, 8))


def test_deterministic(panda):
    model, data = panda
    target = np.array([0.3, -0.5, 0.2])
    results = []
    for _ in range(2):
        scratch = mujoco.MjData(model)
        scratch.qpos[:] = data.qpos
        results.append(ik.solve(model, scratch, target, body='hand', aim=DOWN_AIM))
    assert np.array_equal(results[0].qpos, results[1].qpos)
    assert results[0].restarts == results[1].restarts


def test_data_left_at_answer_and_nothing_else_moved(bench):
    model, data = bench
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    before = scratch.qpos.copy()
    result = ik.solve(model, scratch, (0.15, 0.05, 0.12), site='tip')
    assert result.success
    adr = [model.joint(n).qposadr[0] for n in result.joint_names]
    assert np.array_equal(scratch.qpos[adr], result.qpos)
    others = np.setdiff1d(np.arange(model.nq), adr)
    assert np.array_equal(scratch.qpos[others], before[others])   # the free block
    assert np.allclose(scratch.site_xpos[model.site('tip').id], result.reached)


# -- misses, bounds, restricted joints ----------------------------------------------------


def test_unreachable_returns_closest_miss(bench):
    model, data = bench
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    shoulder = np.array([0.0, 0.0, 0.09])
    target = shoulder + np.array([1.0, 0.0, 0.0])
    result = ik.solve(model, scratch, target, site='tip')
    assert not result.success
    assert result.code == errors.UNREACHABLE
    # Fully stretched towards it: 0.11 + 0.12 + 0.05 m of arm from the shoulder.
    assert result.pos_error == pytest.approx(1.0 - 0.28, abs=1e-3)
    reached, _ = _point(model, result.qpos, result.joint_names, site='tip', base=data.qpos)
    assert np.allclose(reached, result.reached, atol=1e-9)
    assert result.pos_error == pytest.approx(np.linalg.norm(target - reached), abs=1e-9)
    assert result.restarts > 0


def test_unreachable_aim_reports_angle(bench):
    """The tip cannot point up from below the table reach; the miss says how far off."""
    model, data = bench
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    result = ik.solve(model, scratch, (0.2, 0.0, 0.05), site='tip',
                      aim=((1.0, 0.0, 0.0), (-1.0, 0.0, 0.0)))
    assert not result.success
    assert result.aim_error > THREE_DEG or result.pos_error > 1e-3


def test_bounds_respected_when_optimum_is_outside(bench):
    model, data = bench
    names = ('pan', 'lift', 'elbow', 'wrist')
    q_goal = np.array([0.6, 0.4, 1.2, 0.3])
    target, _ = _point(model, q_goal, names, site='tip', base=data.qpos)
    lower = np.array([-0.2, -0.3, -0.5, -0.5])
    upper = np.array([0.2, 0.3, 0.5, 0.5])       # pan 0.6 is out: the target is too
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    result = ik.solve(model, scratch, target, site='tip', lower=lower, upper=upper)
    assert not result.success
    assert np.all(result.qpos >= lower) and np.all(result.qpos <= upper)
    assert result.qpos[0] == pytest.approx(0.2)   # turned as far as allowed
    # Looser limits that contain q_goal reach it, and stay inside them too.
    lower2, upper2 = lower.copy(), upper.copy()
    upper2[:] = [0.7, 0.5, 1.3, 0.5]
    result = ik.solve(model, scratch, target, site='tip', lower=lower2, upper=upper2)
    assert result.success
    assert np.all(result.qpos >= lower2) and np.all(result.qpos <= upper2)


def test_bounds_respected_on_random_boxes(panda):
    """Tight random boxes: whatever the outcome, no joint leaves its box."""
    model, data = panda
    rng = np.random.default_rng(8)
    lo, hi = _bounds(model, [f'joint{i}' for i in range(1, 8)])
    for _ in range(10):
        centre = rng.uniform(lo, hi)
        lower = np.maximum(lo, centre - 0.2)
        upper = np.minimum(hi, centre + 0.2)
        scratch = mujoco.MjData(model)
        scratch.qpos[:] = data.qpos
        result = ik.solve(model, scratch, rng.uniform([0.2, -0.5, 0.1], [0.7, 0.5, 0.8]),
                          body='hand', lower=lower, upper=upper, max_restarts=2)
        assert np.all(result.qpos >= lower) and np.all(result.qpos <= upper)


def test_goal_limits_only_tighten_the_range(bench):
    model, _ = bench
    solver = ik.IKSolver(model, mujoco.MjData(model), site='tip', lower=[-9] * 4,
                         upper=[9] * 4)
    lo, hi = _bounds(model, solver.joint_names)
    assert np.array_equal(solver.lower, lo) and np.array_equal(solver.upper, hi)
    # Infinity means "no goal limit on this joint"; NaN is still refused.
    solver = ik.IKSolver(model, mujoco.MjData(model), site='tip',
                         lower=[-np.inf, 0.1, -np.inf, -np.inf], upper=np.full(4, np.inf))
    assert solver.lower[1] == 0.1 and solver.lower[0] == lo[0]
    assert np.array_equal(solver.upper, hi)
    with pytest.raises(InvalidArgument):
        ik.IKSolver(model, mujoco.MjData(model), site='tip', lower=[np.nan, 0, 0, 0])


def test_restricted_joints_only_move(bench, panda):
    model, data = bench
    q_goal = np.array([0.0, 0.3, 0.8, data.qpos[model.joint('wrist').qposadr[0]]])
    target, _ = _point(model, q_goal, ('pan', 'lift', 'elbow', 'wrist'), site='tip',
                       base=data.qpos)
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    before = scratch.qpos.copy()
    result = ik.solve(model, scratch, target, site='tip', joints=['lift', 'elbow'])
    assert result.success and result.joint_names == ('lift', 'elbow')
    for name in ('pan', 'wrist'):
        adr = model.joint(name).qposadr[0]
        assert scratch.qpos[adr] == before[adr]

    model, data = panda
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    before = scratch.qpos.copy()
    joints = ['joint1', 'joint2', 'joint4', 'finger_joint1']   # a finger: kept as it is
    result = ik.solve(model, scratch, (0.45, 0.2, 0.5), body='hand', joints=joints)
    assert result.success
    moved = [model.joint(n).qposadr[0] for n in joints[:3]]
    still = np.setdiff1d(np.arange(model.nq), moved)
    assert np.array_equal(scratch.qpos[still], before[still])
    assert result.qpos[3] == before[model.joint('finger_joint1').qposadr[0]]


def test_q_init_seeds_the_branch(bench):
    """Seeded from a solution, the solver returns that solution (no jump to another)."""
    model, data = bench
    names = ('pan', 'lift', 'elbow', 'wrist')
    q_goal = np.array([0.3, 0.2, 1.0, -0.4])
    target, _ = _point(model, q_goal, names, site='tip', base=data.qpos)
    result = ik.solve(model, mujoco.MjData(model), target, site='tip', q_init=q_goal)
    assert result.success and result.iterations == 0
    assert np.array_equal(result.qpos, q_goal)


SLIDER_ARM = """
<mujoco>
  <worldbody>
    <body name="carriage">
      <joint name="rail" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.05 0.05 0.02"/>
      <body name="link1" pos="0 0 0.05">
        <joint name="turn1" type="hinge" axis="0 0 1"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.01"/>
        <body name="link2" pos="0.2 0 0">
          <joint name="turn2" type="hinge" axis="0 0 1"/>
          <geom type="capsule" fromto="0 0 0 0.15 0 0" size="0.01"/>
          <site name="end" pos="0.15 0 0"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_unlimited_hinges_and_a_slide():
    """No ranges at all: restarts still sample a finite box, the rail (a slide) is solved
    for like a hinge, and a height the planar arm cannot reach is an honest miss."""
    model = mujoco.MjModel.from_xml_string(SLIDER_ARM)
    solver = ik.IKSolver(model, mujoco.MjData(model), site='end')
    assert solver.joint_names == ('rail', 'turn1', 'turn2')
    assert np.all(np.isinf(solver.lower)) and np.all(np.isinf(solver.upper))
    result = ik.solve(model, mujoco.MjData(model), (1.5, 0.25, 0.05), site='end')
    assert result.success and np.all(np.isfinite(result.qpos))
    result = ik.solve(model, mujoco.MjData(model), (0.3, 0.1, 0.5), site='end')
    assert not result.success and np.all(np.isfinite(result.qpos))
    assert result.pos_error == pytest.approx(0.45, abs=1e-6)
    # Bounds on the rail alone: the far target is then out of reach along x.
    result = ik.solve(model, mujoco.MjData(model), (1.5, 0.0, 0.05), site='end',
                      upper=[0.5, 10.0, 10.0])
    assert not result.success and result.qpos[0] == pytest.approx(0.5)
    assert result.pos_error == pytest.approx(1.5 - 0.5 - 0.35, abs=1e-5)


# -- bad input --------------------------------------------------------------------------


BAD_CALLS = [
    (dict(target=(float('nan'), 0, 0.1), site='tip'), InvalidArgument),
    (dict(target=(0.1, float('inf'), 0.1), site='tip'), InvalidArgument),
    (dict(target=(True, 0.0, 0.1), site='tip'), InvalidArgument),
    (dict(target=np.array([True, False, True]), site='tip'), InvalidArgument),
    (dict(target=True, site='tip'), InvalidArgument),
    (dict(target=(0.1, 0.0), site='tip'), InvalidArgument),
    (dict(target=(0.1, 0.0, 0.1, 0.0), site='tip'), InvalidArgument),
    (dict(target='0.1 0 0', site='tip'), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='nose'), UnknownName),
    (dict(target=(0.1, 0, 0.1), body='nose'), UnknownName),
    (dict(target=(0.1, 0, 0.1), site='tip', body='hand'), InvalidArgument),
    (dict(target=(0.1, 0, 0.1)), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), body='world'), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', joints=['lift', 'knee']), UnknownName),
    (dict(target=(0.1, 0, 0.1), site='tip', joints=['block_free']), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', joints=[]), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', joints='lift'), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', joints=['lift', 'lift']), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', aim=((0, 0, 0), (0, 0, -1))), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', aim=((1, 0, 0),)), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', aim=((1, 0, 0), (0, 0, np.nan))),
     InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', q_init=[0, 0, 0]), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', q_init=[0, 0, np.nan, 0]), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', lower=[0.5] * 4, upper=[0.4] * 4),
     InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', lower=[0.0] * 3), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', tolerance=-1e-3), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', tolerance=True), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', max_iter=True), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', max_iter=0), InvalidArgument),
    (dict(target=(0.1, 0, 0.1), site='tip', max_restarts=1.5), InvalidArgument),
]


@pytest.mark.parametrize('kwargs, error', BAD_CALLS)
def test_bad_input_refused_and_data_untouched(bench, kwargs, error):
    model, data = bench
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    mujoco.mj_kinematics(model, scratch)
    qpos, xpos = scratch.qpos.copy(), scratch.xpos.copy()
    kwargs = dict(kwargs)
    target = kwargs.pop('target')
    with pytest.raises(error) as info:
        ik.solve(model, scratch, target, **kwargs)
    assert info.value.code in (errors.INVALID_ARGUMENT, errors.UNKNOWN_NAME)
    assert np.array_equal(scratch.qpos, qpos) and np.array_equal(scratch.xpos, xpos)


def test_data_of_another_model_refused(bench, panda):
    with pytest.raises(InvalidArgument):
        ik.solve(bench[0], mujoco.MjData(panda[0]), (0.1, 0, 0.1), site='tip')


# -- straight-line paths -----------------------------------------------------------------


def _dense_check(model, path, start_pos, target, *, site=None, body=None, base=None,
                 steps=1500):
    """Sample the timed path densely: worst distance from the segment, and joint rates."""
    ts = np.linspace(0.0, path.duration, steps + 1)
    qs = np.array([path.sample(t) for t in ts])
    pts = np.array([_point(model, q, path.joint_names, site=site, body=body,
                           base=base)[0] for q in qs])
    delta = np.asarray(target) - start_pos
    s = np.clip((pts - start_pos) @ delta / (delta @ delta), 0.0, 1.0)
    deviation = np.linalg.norm(pts - (start_pos + s[:, None] * delta), axis=1).max()
    rates = np.abs(np.diff(qs, axis=0)) / np.diff(ts)[:, None]
    speed = np.linalg.norm(np.diff(pts, axis=0), axis=1) / np.diff(ts)
    return deviation, rates.max(axis=0), speed.max(), pts[-1]


def test_straight_line_panda_stays_on_segment_and_under_rates(panda):
    model, data = panda
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    start, _ = _point(model, data.qpos[:7], [f'joint{i}' for i in range(1, 8)],
                      body='hand', base=data.qpos)
    target = (0.35, -0.35, 0.3)
    rates = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0])
    path = cartesian.straight_line(model, scratch, target, body='hand', max_rates=rates,
                                   tolerance=1e-3)
    assert path.success, path.message
    assert path.max_deviation <= 1e-3 and path.reached_fraction == 1.0
    assert np.all(np.diff(path.times) > 0) and path.times[0] == 0.0
    assert path.times[-1] == pytest.approx(path.duration)
    assert np.allclose(path.sample(0.0), data.qpos[:7])
    deviation, max_rates, _, end = _dense_check(model, path, start, target, body='hand',
                                                base=data.qpos)
    assert deviation <= 1e-3
    assert np.linalg.norm(end - target) <= 1e-3
    assert np.all(max_rates <= rates * 1.001)
    assert np.max(max_rates / rates) >= 0.95   # the duration is tight, not padded


def test_joint_interpolation_would_bow(panda):
    """Why the planner exists: a plain joint-space move from the same start bows."""
    model, data = panda
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    names = [f'joint{i}' for i in range(1, 8)]
    start, _ = _point(model, data.qpos[:7], names, body='hand', base=data.qpos)
    target = np.array([0.35, -0.35, 0.3])
    end = ik.solve(model, scratch, target, body='hand').qpos
    delta = target - start
    worst = 0.0
    for f in np.linspace(0, 1, 41):
        p, _ = _point(model, data.qpos[:7] + f * (end - data.qpos[:7]), names, body='hand',
                      base=data.qpos)
        s = np.clip((p - start) @ delta / (delta @ delta), 0, 1)
        worst = max(worst, np.linalg.norm(p - (start + s * delta)))
    assert worst > 5e-3


def test_straight_line_bench_with_aim_and_speed_limit(bench):
    model, data = bench
    names = ('pan', 'lift', 'elbow', 'wrist')
    q_start = np.array([-0.4, 0.2, 1.0, 0.37])   # lift+elbow+wrist = 1.57: pointing down
    start, _ = _point(model, q_start, names, site='tip', base=data.qpos)
    target = start + np.array([0.04, 0.12, 0.03])
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    path = cartesian.straight_line(model, scratch, target, site='tip', aim=DOWN_AIM,
                                   q_start=q_start, max_rates=3.0, max_speed=0.05,
                                   tolerance=5e-4)
    assert path.success, path.message
    assert path.max_deviation <= 5e-4 and path.max_aim_deviation <= THREE_DEG
    deviation, max_rates, speed, end = _dense_check(model, path, start, target, site='tip',
                                                    base=data.qpos)
    assert deviation <= 5e-4
    assert np.all(max_rates <= 3.0 * 1.001)
    assert speed <= 0.05 * 1.01 and speed >= 0.05 * 0.95   # the speed limit binds
    for t in np.linspace(0.0, path.duration, 30):
        _, rot = _point(model, path.sample(t), names, site='tip', base=data.qpos)
        assert _angle(rot[:, 0], np.array([0.0, 0.0, -1.0])) <= THREE_DEG


def test_straight_line_into_unreachable_stops_short(bench):
    model, data = bench
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    path = cartesian.straight_line(model, scratch, (0.6, 0.0, 0.1), site='tip',
                                   max_rates=2.0)
    assert not path.success and path.message
    assert 0.0 <= path.reached_fraction < 1.0
    assert path.qpos.shape == (len(path.times), 4)
    assert np.isfinite(path.duration)


def test_straight_line_unlimited_joints_take_no_part_in_timing(bench):
    """A joint without a rate limit (+inf) leaves the duration to the limited ones."""
    model, data = bench
    scratch = mujoco.MjData(model)
    target = (0.16, 0.06, 0.12)
    q_start = data.qpos[:4]   # data is scratch: say where to start each time
    limited = cartesian.straight_line(model, scratch, target, site='tip', q_start=q_start,
                                      max_rates=[0.5, 0.5, 0.5, 0.5])
    free_pan = cartesian.straight_line(model, scratch, target, site='tip', q_start=q_start,
                                       max_rates=[np.inf, 0.5, 0.5, 0.5])
    assert limited.success and free_pan.success
    assert 0.0 < free_pan.duration <= limited.duration
    unlimited = cartesian.straight_line(model, scratch, target, site='tip', q_start=q_start,
                                        max_rates=float('inf'), max_speed=0.1)
    assert unlimited.success and unlimited.duration > 0.0


def test_straight_line_already_there(bench):
    model, data = bench
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    mujoco.mj_kinematics(model, scratch)
    here = scratch.site_xpos[model.site('tip').id].copy()
    path = cartesian.straight_line(model, scratch, here, site='tip', max_rates=1.0)
    assert path.success and path.duration == 0.0 and len(path.times) == 1
    assert np.allclose(path.sample(1.0), path.qpos[0])


def test_straight_line_bad_input(bench):
    model, data = bench
    scratch = mujoco.MjData(model)
    scratch.qpos[:] = data.qpos
    qpos = scratch.qpos.copy()
    for kwargs in (dict(max_rates=[1.0, 1.0]), dict(max_rates=0.0),
                   dict(max_rates=[1, 1, np.nan, 1]), dict(max_rates=True),
                   dict(max_rates=1.0, max_speed=-1.0),
                   dict(max_rates=1.0, q_start=[0, 0, 0])):
        with pytest.raises(InvalidArgument):
            cartesian.straight_line(model, scratch, (0.15, 0.0, 0.1), site='tip', **kwargs)
        assert np.array_equal(scratch.qpos, qpos)
    with pytest.raises(InvalidArgument):   # -inf is no rate at all, not "unlimited"
        cartesian.straight_line(model, scratch, (0.15, 0.0, 0.1), site='tip',
                                max_rates=[1.0, -np.inf, 1.0, 1.0])
    with pytest.raises(UnknownName):
        cartesian.straight_line(model, scratch, (0.15, 0.0, 0.1), site='nose',
                                max_rates=1.0)


def test_min_jerk_profile():
    tau = np.linspace(0, 1, 101)
    s = cartesian.min_jerk(tau)
    assert s[0] == 0.0 and s[-1] == 1.0 and np.all(np.diff(s) > 0)
    assert np.allclose(cartesian.min_jerk_inverse(s), tau, atol=1e-9)
