"""ROS message conversions under hostile content (message types only, no nodes).

A message is typed, but its strings can be a megabyte long, its arrays any length, its
doubles NaN or 1e308, and its parallel name/value arrays can disagree or repeat a name. The
conversion and the core call behind it must refuse with a code and change nothing.
"""

import array
import types

from geometry_msgs.msg import Point, Vector3
from hostile_helpers import (
    HUGE,
    huge_name,
    is_refusal,
    JOINTS,
    NON_FINITE,
    refused,
    state_of,
    unchanged,
)
from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from mujoco_hal_ros.msg import FloatArray
from mujoco_hal_ros.ros import conversions as cv
from mujoco_hal_ros.ros.pool import arrays
from mujoco_hal_ros.ros.swap.topic_control import TopicControl
from mujoco_hal_ros.srv import MoveTo, RunAction

DOUBLES = st.one_of(st.floats(-300.0, 300.0), st.sampled_from(HUGE + NON_FINITE))
MSG_NAMES = st.one_of(st.sampled_from(['x', 'y', 'z', 'pan', '']), st.text(max_size=6),
                      huge_name())


class _Log:
    def warning(self, *args, **kw):
        pass

    info = error = warning


@pytest.fixture(scope='module')
def joint_commands(bench):
    node = types.SimpleNamespace(get_logger=lambda: _Log())
    return TopicControl(node, bench, topic='')     # no subscription: command() only


@settings(max_examples=150, deadline=None)
@given(action=st.one_of(st.sampled_from(['move_to', 'hold']), MSG_NAMES),
       arg_names=st.lists(MSG_NAMES, max_size=5), arg_values=st.lists(DOUBLES, max_size=5))
def test_run_action_request(bench, action, arg_names, arg_values):
    req = RunAction.Request(action=action, arg_names=arg_names,
                            arg_values=array.array('d', arg_values))
    before = state_of(bench)
    err = refused(lambda: bench.run_action(req.action, cv.run_action_args(req), wait=False)
                  if req.action != 'hold' else bench.run_action(
                      req.action, cv.run_action_args(req)))
    if len(set(arg_names)) != len(arg_names) or len(arg_names) != len(arg_values):
        assert err is not None and err.code == 'INVALID_ARGUMENT', 'a duplicate got through'
    if err is None:
        bench.reset()
        bench.step(2000)
        return
    unchanged(bench, before)


def test_run_action_duplicate_argument_is_refused_not_merged(bench):
    req = RunAction.Request(action='move_to', arg_names=['x', 'x', 'y', 'z'],
                            arg_values=[1e9, 170.0, 0.0, 60.0])
    err = refused(lambda: cv.run_action_args(req))
    assert err.code == 'INVALID_ARGUMENT' and "'x'" in str(err)


@settings(max_examples=100, deadline=None)
@given(target=st.lists(DOUBLES, min_size=3, max_size=3), speed=DOUBLES,
       use_aim=st.booleans(), axis=st.lists(DOUBLES, min_size=3, max_size=3),
       toward=st.lists(DOUBLES, min_size=3, max_size=3),
       site=st.one_of(st.just(''), st.just('tip'), MSG_NAMES))
def test_move_to_request(bench, target, speed, use_aim, axis, toward, site):
    req = MoveTo.Request(target=Point(x=target[0], y=target[1], z=target[2]), site=site,
                         speed=speed, use_aim=use_aim, aim_axis=Vector3(x=axis[0], y=axis[1],
                                                                        z=axis[2]),
                         aim_toward=Vector3(x=toward[0], y=toward[1], z=toward[2]))
    before = state_of(bench)
    err = refused(lambda: bench.move_to(**cv.move_request(req), wait=False))
    if err is None:
        bench.reset()
        bench.step(2000)
        return
    unchanged(bench, before)


@settings(max_examples=150, deadline=None)
@given(names=st.lists(st.one_of(st.sampled_from(JOINTS), MSG_NAMES), max_size=6),
       positions=st.lists(st.one_of(st.floats(-1.0, 1.0), DOUBLES), max_size=6))
def test_joint_commands(bench, joint_commands, names, positions):
    before = state_of(bench)
    err = refused(lambda: joint_commands.command(names, array.array('d', positions)))
    if len(set(names)) != len(names):
        assert err is not None and err.code == 'INVALID_ARGUMENT', 'a duplicate got through'
    if err is None:
        bench.reset()
        bench.step(2000)
        return
    unchanged(bench, before)


def test_joint_commands_pan_twice_is_refused(bench, joint_commands):
    before = state_of(bench)
    err = refused(lambda: joint_commands.command(['pan', 'pan'], [float('nan'), 0.3]))
    assert err.code == 'INVALID_ARGUMENT' and "'pan'" in str(err)
    unchanged(bench, before)


def float_arrays():
    return st.builds(
        lambda shape, data: FloatArray(shape=shape, data=array.array('d', data)),
        st.lists(st.integers(0, 5), max_size=3), st.lists(DOUBLES, max_size=12))


@settings(max_examples=150, deadline=None)
@given(msg=float_arrays())
def test_float_array_framing(msg):
    try:
        out = arrays.from_msg(msg, 'ctrl')
    except Exception as exc:   # noqa: BLE001
        assert is_refusal(exc)
        return
    if out is not None:
        assert out.size == len(msg.data) and list(out.shape) == list(msg.shape)


@settings(max_examples=100, deadline=None)
@given(fields=st.lists(st.one_of(st.sampled_from(['body_mass', 'geom_friction']), MSG_NAMES),
                       max_size=4),
       values=st.lists(float_arrays(), max_size=4))
def test_randomization_fields(fields, values):
    try:
        out = arrays.randomization(fields, values)
    except Exception as exc:   # noqa: BLE001
        assert is_refusal(exc)
        return
    assert len(set(fields)) == len(fields), 'a field given twice was merged'
    assert out is None or set(out) == set(fields)


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), max_size=5))
def test_env_ids(ids):
    out = arrays.env_ids(array.array('q', ids))
    assert out is None or np.array_equal(out, ids)
