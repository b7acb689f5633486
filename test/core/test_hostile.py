"""Hostile input and faults, one test per finding: nothing moves that should not.

Each of these failed before its fix: overflowing trajectory splines that NaN carried past
every limit, MuJoCo's bad-control warning not counted, YAML alias bombs, megabyte names
echoed back, entity states MuJoCo resets the world over, and pool calls that raised after
they had already reset and stepped the environments.
"""

import array
import math
import time

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.checks import named_values, unique_names
from mujoco_hal_ros.config import device_file, limits
from mujoco_hal_ros.errors import DeviceError, shorten
from mujoco_hal_ros.motion import joint_trajectory as jt
from mujoco_hal_ros.pool import EnvPool
from mujoco_hal_ros.sim.entities import Entities

JOINTS = ['pan', 'lift', 'elbow', 'wrist']
HUGE_NAME = 'a' * (1 << 20)

FREE_BODY = """
<mujoco>
  <worldbody>
    <body name="box" pos="0 0 0.5"><freejoint/><geom type="box" size=".05 .05 .05"/>
      <site name="corner" pos=".05 .05 .05"/></body>
    <body name="arm"><joint name="hinge" axis="0 0 1"/>
      <geom type="capsule" size=".02" fromto="0 0 0 .2 0 0"/></body>
  </worldbody>
  <actuator><motor name="push" joint="hinge"/></actuator>
  <keyframe><key name="start" qpos="0 0 .5 1 0 0 0 0"/></keyframe>
</mujoco>
"""


@pytest.fixture
def free_xml(tmp_path):
    path = tmp_path / 'free.xml'
    path.write_text(FREE_BODY)
    return str(path)


def refused(fn, code=None):
    with pytest.raises(DeviceError) as info:
        fn()
    if code is not None:
        assert info.value.code == code, str(info.value)
    return info.value


# --- 1. overflowing splines and NaN-safe limits --------------------------------------------
@pytest.mark.parametrize('field', ['velocities', 'accelerations'])
def test_a_trajectory_whose_spline_overflows_is_refused(bench, field):
    huge = array.array('d', [1e308] * 4)       # what a ROS message carries: finite doubles
    first = {'time_from_start': 1.0, 'positions': [0.1] * 4, 'velocities': [0.0] * 4,
             'accelerations': [0.0] * 4}
    first[field] = huge
    points = [first, {'time_from_start': 2.0, 'positions': [0.0] * 4,
                      'velocities': [0.0] * 4, 'accelerations': [0.0] * 4}]
    before = bench.snapshot.setpoint.copy()
    checked = jt.check_trajectory(bench.layout, JOINTS, points)
    err = refused(lambda: jt.preview(bench, checked), errors.INVALID_ARGUMENT)
    assert "joint 'pan'" in str(err) and 'between points' in str(err)
    refused(lambda: jt.follow(bench, checked), errors.INVALID_ARGUMENT)
    bench.step(50)
    assert np.array_equal(bench.snapshot.setpoint, before) and not bench.stepper.plans


def test_check_spline_refuses_nan_coefficients_it_is_handed(bench):
    points = [{'time_from_start': 1.0, 'positions': [0.1] * 4}]
    checked = jt.check_trajectory(bench.layout, JOINTS, points)
    start = bench.snapshot.setpoint[checked.actuators]
    knots, coeffs = jt.spline(checked, start)
    coeffs = coeffs.copy()
    coeffs[0, 1, 3] = math.nan
    err = refused(lambda: jt.check_spline(checked, knots, coeffs, start),
                  errors.INVALID_ARGUMENT)
    assert "joint 'lift'" in str(err)


def test_limit_comparisons_refuse_nan():
    assert limits.outside(math.nan, -1.0, 1.0)
    assert limits.outside(math.nan, None, None)
    assert not limits.outside(0.5, -1.0, 1.0) and limits.outside(1.5, None, 1.0)


def test_bad_ctrl_warning_counts_as_a_fault(open_device, free_xml):
    dev = open_device(model=free_xml, keyframe='start', start_paused=True)
    dev.step(2)
    dev.stepper.post(lambda s: s.set_setpoint(1e11, [0]), wait=True)  # past mjMAXVAL
    dev.step(5)
    assert dev.health()['unstable_events'] == 1
    assert dev.snapshot.setpoint[0] == 0.0 and np.isfinite(dev.snapshot.qpos).all()


# --- 2. duplicate names --------------------------------------------------------------------
def test_duplicate_names_are_refused_naming_the_duplicate():
    assert unique_names(['x', 'y'], 'arg_names') == ['x', 'y']
    err = refused(lambda: unique_names(['x', 'y', 'x'], 'arg_names'), errors.INVALID_ARGUMENT)
    assert "'x'" in str(err) and 'twice' in str(err)
    refused(lambda: named_values(['x', 'x'], [1.0, 2.0], 'arg_names'), errors.INVALID_ARGUMENT)
    refused(lambda: named_values(['x'], [1.0, 2.0], 'arg_names'), errors.INVALID_ARGUMENT)
    assert named_values(['x', 'y'], [1.0, 2.0], 'a') == {'x': 1.0, 'y': 2.0}


# --- 3. YAML bombs and huge files -----------------------------------------------------------
BOMB = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + ''.join(
    f'{chr(98 + i)}: &{chr(98 + i)} [' + ', '.join([f'*{chr(97 + i)}'] * 9) + ']\n'
    for i in range(8))


@pytest.mark.parametrize('key', ['device', 'id'])
def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path, key):
    path = tmp_path / 'bomb.yaml'
    path.write_text(BOMB + f'{key}: *i\n')
    t0 = time.monotonic()
    err = refused(lambda: device_file.load(str(path)), errors.CONFIG_ERROR)
    assert err.where == 'b[0]' and 'alias' in str(err)     # the first alias met, by key path
    err = refused(lambda: device_file.loads(f'{key}: &x [1, 2]\nconnect: {{keyframe: *x}}\n'),
                  errors.CONFIG_ERROR)
    assert err.where == 'connect.keyframe'
    assert time.monotonic() - t0 < 5.0


def test_a_huge_device_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / 'huge.yaml'
    with open(path, 'w') as handle:
        for _ in range(device_file.MAX_DEVICE_FILE_BYTES // 1000 + 2):
            handle.write('#' * 999 + '\n')
    t0 = time.process_time()
    err = refused(lambda: device_file.load(str(path)), errors.CONFIG_ERROR)
    assert time.process_time() - t0 < 1.0
    assert str(device_file.MAX_DEVICE_FILE_BYTES) in str(err) and 'bytes' in str(err)


def test_deep_nesting_and_huge_integers_are_config_errors():
    err = refused(lambda: device_file.loads('[' * 100000), errors.CONFIG_ERROR)
    assert 'deep' in str(err)
    refused(lambda: device_file.loads('read: {pan: {max: ' + '9' * 5000 + '}}'),
            errors.CONFIG_ERROR)
    err = refused(lambda: device_file.loads('device: [1, 2]\n'), errors.CONFIG_ERROR)
    assert err.where == 'device'
    err = refused(lambda: device_file.loads('safe_state: {action: [1]}\n'),
                  errors.CONFIG_ERROR)
    assert err.where == 'safe_state.action'


# --- 4. echoed input ------------------------------------------------------------------------
def test_shorten_cuts_and_says_the_length():
    assert shorten('abc') == "'abc'"
    short = shorten(HUGE_NAME)
    assert len(short) < 120 and f'({len(HUGE_NAME)} chars)' in short
    assert len(shorten(list(range(100000)))) < 120
    assert shorten(10 ** 10000) == '<int>'          # beyond int -> str: never raises


def test_a_huge_name_is_not_echoed(bench):
    for call in (lambda: bench.set_goals({HUGE_NAME: 1.0}),
                 lambda: bench.run_action(HUGE_NAME),
                 lambda: bench.run_action('move_to', {HUGE_NAME: 1.0}),
                 lambda: bench.move_to(point=[0.15, 0, 0.05], site=HUGE_NAME),
                 lambda: jt.check_trajectory(bench.layout, [HUGE_NAME], [])):
        err = refused(call)
        assert len(str(err)) < 3000 and len(repr(err.to_dict())) < 6000, err.code


# --- 5. entity state ------------------------------------------------------------------------
@pytest.mark.parametrize('kw', [dict(position=[1e308, 0, 0]), dict(position=[0, 0, 1e5]),
                                dict(linear=[1e308, 0, 0]), dict(angular=[0, 1e308, 0]),
                                dict(quaternion=[1e308, 0, 0, 0]),
                                dict(position=[0, 0, 1], linear=[0, 0, 1e4])])
def test_an_entity_state_out_of_all_proportion_is_refused(open_device, free_xml, kw):
    dev = open_device(model=free_xml, keyframe='start', start_paused=True)
    entities = Entities(dev)
    dev.step(5)
    before = dev.snapshot.qpos.copy()
    refused(lambda: entities.set_state('box', **kw))
    assert np.array_equal(dev.snapshot.qpos, before)
    dev.step(5)
    assert dev.health()['unstable_events'] == 0
    entities.set_state('box', position=[0.1, 0, 0.5], linear=[0, 0, 1.0])   # sane: accepted


# --- 6. pool calls all or nothing -----------------------------------------------------------
@pytest.fixture
def pool():
    with EnvPool(mujoco.MjModel.from_xml_string(FREE_BODY), 3) as p:
        p.reset(keyframe='start')
        p.step(7, ctrl=np.full((3, 1), 0.3))
        yield p


@pytest.mark.parametrize('bad', [
    dict(cost=lambda q, v: np.zeros(2)),
    dict(cost=lambda q, v: 'cheap'),
    dict(cost=lambda q, v: 1 / 0),
    dict(progress=lambda f: [][1]),
    dict(randomization={'body_mass': np.ones((3, 3))}, cost=lambda q, v: np.zeros((3, 3))),
])
def test_evaluate_leaves_the_pool_as_it_was_when_a_callback_fails(pool, bad):
    before = pool.get_state(full=True).copy()
    masses = pool.field_values('body_mass').copy()
    err = refused(lambda: pool.evaluate(np.ones((20, 1)), keyframe='start', **bad),
                  errors.INVALID_ARGUMENT)
    assert err.where in ('cost', 'progress')
    assert np.array_equal(pool.get_state(full=True), before)
    assert np.array_equal(pool.field_values('body_mass'), masses)
    assert not pool.randomized().any()


def test_pool_names_are_not_echoed(pool):
    for call in (lambda: pool.reset(keyframe=HUGE_NAME),
                 lambda: pool.site_jacobians([HUGE_NAME]),
                 lambda: pool.field_values(HUGE_NAME)):
        assert len(str(refused(call))) < 3000


def test_a_tolerance_for_a_joint_given_twice_is_refused():
    d = jt.Tolerances.defaults(2)
    err = refused(lambda: jt.goal_tolerances(d, ['a', 'b'],
                                             path=[('a', 0.1, 0, 0), ('a', -1, 0, 0)]),
                  errors.INVALID_ARGUMENT)
    assert "'a'" in str(err) and 'twice' in str(err)


@pytest.mark.parametrize('speed', [np.array([1.0, 2.0]), np.array([0.0, 0.0])])
def test_a_speed_that_is_an_array_is_refused_not_a_value_error(bench, speed):
    before = bench.snapshot.setpoint.copy()
    refused(lambda: bench.move_to(point=[0.17, 0, 0.06], speed=speed, wait=False),
            errors.INVALID_ARGUMENT)
    bench.step(5)
    assert np.array_equal(bench.snapshot.setpoint, before)


def test_a_goal_beyond_any_control_mujoco_accepts_is_refused(open_device, free_xml):
    dev = open_device(model=free_xml, keyframe='start', start_paused=True)   # no ctrlrange
    err = refused(lambda: dev.set_goals({'push_goal': 1e11}), errors.LIMIT_EXCEEDED)
    assert 'MuJoCo' in str(err)
    dev.step(5)
    assert dev.health()['unstable_events'] == 0
    dev.set_goals({'push_goal': 1e9})                  # huge, but a control MuJoCo takes
