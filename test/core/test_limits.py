"""The limits kernel on its own: every request checked whole, converted to native units, or
refused with a structured error naming the channel, argument or limit."""

import math

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.config import device_file, limits
from mujoco_hal_ros.config.channels import Layout
from mujoco_hal_ros.errors import (
    ConfigError,
    DeviceError,
    INVALID_ARGUMENT,
    LIMIT_EXCEEDED,
    UNKNOWN_NAME,
)


@pytest.fixture(scope='module')
def bench_layout():
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, '..', '..'))
    model = mujoco.MjModel.from_xml_path(os.path.join(root, 'models', 'bench_arm.xml'))
    return Layout(model, device_file.load(os.path.join(root, 'config', 'bench_arm.yaml')))


def speed_layout(h, **speed_arg):
    doc = h.bench_doc(actions__move_to__args={
        'x': {'unit': 'mm', 'min': 140, 'max': 200}, 'y': {'unit': 'mm', 'min': -60, 'max': 60},
        'z': {'unit': 'mm', 'min': 30, 'max': 90}, 'v': dict({'unit': 'mm/s'}, **speed_arg)},
        actions__move_to__map={'command': 'move_to', 'site': 'tip', 'speed': 'v'})
    model = mujoco.MjModel.from_xml_path(h.BENCH_XML)
    return Layout(model, device_file.parse(doc))


def code_of(fn, *args):
    with pytest.raises(DeviceError) as err:
        fn(*args)
    return err.value


def test_goals_convert_to_native(bench_layout):
    out = limits.check_goals(bench_layout, {'pan_goal': 45, 'lift_goal': np.float32(-10),
                                            'elbow_goal': np.int64(20)})
    assert out == {'pan_goal': pytest.approx(math.pi / 4),
                   'lift_goal': pytest.approx(math.radians(-10)),
                   'elbow_goal': pytest.approx(math.radians(20))}
    assert limits.check_goals(bench_layout, {'pan_goal': np.array(90.0)})['pan_goal'] == \
        pytest.approx(math.pi / 2)


@pytest.mark.parametrize('value,limit', [(90.5, 90), (-91, -90), (1e9, 90)])
def test_goal_outside_limits(bench_layout, value, limit):
    err = code_of(limits.check_goals, bench_layout, {'pan_goal': value})
    assert err.code == LIMIT_EXCEEDED
    assert err.where == 'pan_goal' and err.details['channel'] == 'pan_goal'
    assert err.details['limit'] == [-90, 90]
    assert '-90..90 deg' in str(err)


@pytest.mark.parametrize('value', [float('nan'), float('inf'), -float('inf'), True, False,
                                   np.bool_(True), '10', None, [10], np.array([1.0, 2.0]),
                                   complex(1, 0)])
def test_goal_not_a_finite_number(bench_layout, value):
    err = code_of(limits.check_goals, bench_layout, {'lift_goal': 0, 'pan_goal': value})
    assert err.code == INVALID_ARGUMENT and err.where == 'pan_goal'


def test_goal_names_and_shape(bench_layout):
    err = code_of(limits.check_goals, bench_layout, {'pan_goal': 0, 'pam_goal': 1})
    assert err.code == UNKNOWN_NAME and 'pam_goal' in str(err) and 'pan_goal' in err.allowed
    for bad in ({}, [('pan_goal', 1)], None, 'pan_goal'):
        assert code_of(limits.check_goals, bench_layout, bad).code == INVALID_ARGUMENT


def test_move_args_and_point(bench_layout):
    act = bench_layout.actions['move_to']
    target, speed = limits.check_move(act, {'x': 170, 'y': -20, 'z': 50}, None, None)
    assert target == pytest.approx([0.17, -0.02, 0.05]) and speed is None
    target, _ = limits.check_move(act, None, [0.15, 0.0, 0.06], None)
    assert target == pytest.approx([0.15, 0.0, 0.06])
    err = code_of(limits.check_move, act, {'x': 201, 'y': 0, 'z': 50}, None, None)
    assert err.code == LIMIT_EXCEEDED and err.details['argument'] == 'x'
    assert '140..200 mm' in str(err) and err.where == 'move_to.x'
    err = code_of(limits.check_move, act, None, [0.17, 0.0, 0.02], None)   # z below 30 mm
    assert err.code == LIMIT_EXCEEDED and err.details['argument'] == 'z'
    for bad in ([0.17, 0.0], [0.17, 0, 0.05, 1], [0.17, float('nan'), 0.05],
                [0.17, True, 0.05], np.array([0.17, np.bool_(False), 0.05], dtype=object),
                np.zeros((3, 1)) + 0.1, 'xyz', np.array([True, False, True])):
        assert code_of(limits.check_move, act, None, bad, None).code == INVALID_ARGUMENT
    err = code_of(limits.check_move, act, {'x': 170, 'y': 0}, None, None)
    assert err.code == INVALID_ARGUMENT and 'axis z' in str(err)
    err = code_of(limits.check_move, act, {'x': 170, 'y': 0, 'zz': 1}, None, None)
    assert err.code == UNKNOWN_NAME and 'zz' in str(err)
    err = code_of(limits.check_move, act, {'x': 170, 'y': 0, 'z': 50}, [0.17, 0, 0.05], None)
    assert err.code == INVALID_ARGUMENT
    assert code_of(limits.check_move, act, [170, 0, 50], None, None).code == INVALID_ARGUMENT


def test_speed_argument_is_a_speed_limit(h):
    lay = speed_layout(h, min=5, max=100)
    act = lay.actions['move_to']
    assert act.args['v'].kind == 'speed'
    _, speed = limits.check_move(act, {'x': 170, 'y': 0, 'z': 50}, None, None)
    assert speed == pytest.approx(0.1)                    # default: the max speed
    _, speed = limits.check_move(act, {'x': 170, 'y': 0, 'z': 50, 'v': 20}, None, None)
    assert speed == pytest.approx(0.02)
    err = code_of(limits.check_move, act, {'x': 170, 'y': 0, 'z': 50, 'v': 150}, None, None)
    assert err.code == LIMIT_EXCEEDED and 'speed limit' in str(err)
    err = code_of(limits.check_move, act, None, [0.17, 0, 0.05], 101)
    assert err.code == LIMIT_EXCEEDED
    err = code_of(limits.check_move, act, {'x': 170, 'y': 0, 'z': 50, 'v': 1}, None, None)
    assert err.code == LIMIT_EXCEEDED                     # below the minimum speed
    assert code_of(limits.check_move, act, None, [0.17, 0, 0.05], -3).code == INVALID_ARGUMENT
    assert code_of(limits.check_move, act, None, [0.17, 0, 0.05], True).code == \
        INVALID_ARGUMENT
    with pytest.raises(ConfigError, match='min above zero'):
        speed_layout(h, min=0, max=100)
    with pytest.raises(ConfigError, match='min above zero'):
        speed_layout(h, max=100)


def test_at_fixes_an_axis(h):
    doc = h.bench_doc(actions__move_to__args={'x': {'unit': 'mm', 'min': 140, 'max': 200},
                                              'y': {'unit': 'mm', 'min': -60, 'max': 60}},
                      actions__move_to__map={'command': 'move_to', 'site': 'tip',
                                             'at': {'z': '50 mm'}})
    lay = Layout(mujoco.MjModel.from_xml_path(h.BENCH_XML), device_file.parse(doc))
    act = lay.actions['move_to']
    target, _ = limits.check_move(act, {'x': 160, 'y': 10}, None, None)
    assert target == pytest.approx([0.16, 0.01, 0.05])
    err = code_of(limits.check_move, act, None, [0.16, 0.01, 0.07], None)
    assert err.code == LIMIT_EXCEEDED and err.where == 'point.z'


def test_aim_rtf_steps():
    axis, toward = limits.check_aim(([1, 0, 0], (0, 0, -1)))
    assert list(toward) == [0, 0, -1]
    for bad in (None, ([1, 0, 0],), ([0, 0, 0], [0, 0, 1]), ([1, 0, 0], [0, 0, float('nan')]),
                ([1, 0], [0, 0, 1])):
        assert code_of(limits.check_aim, bad).code == INVALID_ARGUMENT
    assert limits.real_time_factor(0) == 0 and limits.real_time_factor(2.5) == 2.5
    for bad in (-1, float('nan'), float('inf'), True, np.bool_(False), '1'):
        assert code_of(limits.real_time_factor, bad).code == INVALID_ARGUMENT
    assert limits.step_count(np.int32(5)) == 5
    for bad in (0, -1, 1.5, True, np.bool_(True), '3', limits.MAX_STEPS + 1):
        assert code_of(limits.step_count, bad).code == INVALID_ARGUMENT


def test_numbers_that_do_not_fit_a_float(bench_layout):
    err = code_of(limits.check_goals, bench_layout, {'pan_goal': 10 ** 400})
    assert err.code == INVALID_ARGUMENT and err.where == 'pan_goal'
    from fractions import Fraction
    assert limits.check_goals(bench_layout, {'pan_goal': Fraction(45, 1)})['pan_goal'] == \
        pytest.approx(math.pi / 4)
