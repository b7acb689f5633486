"""Gripper goals under hostile content: GripperCommand's number, ParallelGripperCommand's
JointState (names, positions, velocity and effort limits), from core values and from the
messages themselves. A goal is either the finger position it asks for, inside the
gripper's range, or a refusal with a code; the check touches no device, so a refused goal
cannot have moved anything (the node tests check the fingers stay put)."""

import array
import math

from hostile_helpers import hostile_scalars, hostile_vectors, HUGE, names, NON_FINITE
from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from mujoco_hal_ros.checks import is_bool
from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.motion import gripper as gr

control_msgs = pytest.importorskip('control_msgs.action')
ParallelGripperCommand = getattr(control_msgs, 'ParallelGripperCommand', None)

GRIPPER = gr.Gripper('finger_goal', 'finger_joint1', 7, 0.0, 0.04, (6375.0, 0.0))
DOUBLES = st.one_of(st.floats(-0.1, 0.1), st.sampled_from(HUGE + NON_FINITE + [0.0, 0.04]))


def _refusal(call):
    try:
        return call(), None
    except DeviceError as err:
        assert isinstance(err.code, str) and err.code and len(str(err)) < 5000, repr(err)
        return None, err


def _plain(v):
    return not is_bool(v) and isinstance(v, (int, float, np.floating, np.integer))


def _fine_limit(values):
    try:
        values = list(values)
    except TypeError:
        return False
    if isinstance(values, (str, bytes)) or len(values) > 1:
        return False
    return not values or (_plain(values[0]) and math.isfinite(float(values[0]))
                          and float(values[0]) >= 0)


@settings(max_examples=300, deadline=None)
@given(position=hostile_scalars())
def test_gripper_command_position(position):
    ctrl, err = _refusal(lambda: GRIPPER.native_goal(position))
    if err is None:
        assert _plain(position) or isinstance(position, np.ndarray)
        assert -1e-9 <= float(position) <= 0.04 + 1e-9 and 0.0 <= ctrl <= 255.0 + 1e-6
    else:
        assert err.code == 'INVALID_ARGUMENT'


@settings(max_examples=300, deadline=None)
@given(joint_names=st.one_of(st.lists(st.one_of(st.just('finger_joint1'), names()),
                                      max_size=3), hostile_scalars()),
       positions=st.one_of(st.lists(DOUBLES, max_size=3), hostile_vectors(1)),
       velocities=st.one_of(st.lists(DOUBLES, max_size=2), hostile_vectors(1)),
       efforts=st.one_of(st.lists(DOUBLES, max_size=2), hostile_vectors(1)))
def test_parallel_command_from_core_values(joint_names, positions, velocities, efforts):
    target, err = _refusal(lambda: gr.parallel_command(GRIPPER, joint_names, positions,
                                                       velocities, efforts))
    if err is not None:
        return
    assert -1e-9 <= target <= 0.04 + 1e-9
    assert list(joint_names) in ([], ['finger_joint1'])
    assert len(list(positions)) == 1
    assert _fine_limit(velocities) and _fine_limit(efforts)


@pytest.mark.skipif(ParallelGripperCommand is None,
                    reason='this control_msgs has no ParallelGripperCommand')
@settings(max_examples=200, deadline=None)
@given(joint_names=st.lists(st.sampled_from(['finger_joint1', 'finger_joint2', '', 'x']),
                            max_size=3),
       positions=st.lists(DOUBLES, max_size=3), velocities=st.lists(DOUBLES, max_size=2),
       efforts=st.lists(DOUBLES, max_size=2))
def test_parallel_command_from_the_message(joint_names, positions, velocities, efforts):
    from mujoco_hal_ros.ros.swap.gripper_controller import PARALLEL_COMMAND
    goal = ParallelGripperCommand.Goal()
    goal.command.name = joint_names
    goal.command.position = array.array('d', positions)
    goal.command.velocity = array.array('d', velocities)
    goal.command.effort = array.array('d', efforts)
    target, err = _refusal(lambda: PARALLEL_COMMAND.target(GRIPPER, goal))
    valid = (joint_names in ([], ['finger_joint1']) and len(positions) == 1
             and math.isfinite(positions[0]) and -1e-9 <= positions[0] <= 0.04 + 1e-9
             and _fine_limit(velocities) and _fine_limit(efforts))
    assert (err is None) == valid, (joint_names, positions, velocities, efforts, err)
    if valid:
        assert target == positions[0]


@pytest.mark.parametrize('call, code', [
    (lambda: gr.parallel_command(GRIPPER, ['finger_joint2'], [0.01]), 'UNKNOWN_NAME'),
    (lambda: gr.parallel_command(GRIPPER, ['finger_joint1'] * 2, [0.01, 0.01]),
     'INVALID_ARGUMENT'),
    (lambda: gr.parallel_command(GRIPPER, [], []), 'INVALID_ARGUMENT'),
    (lambda: gr.parallel_command(GRIPPER, [], [0.01, 0.02]), 'INVALID_ARGUMENT'),
    (lambda: gr.parallel_command(GRIPPER, [], [True]), 'INVALID_ARGUMENT'),
    (lambda: gr.parallel_command(GRIPPER, [], [math.nan]), 'INVALID_ARGUMENT'),
    (lambda: gr.parallel_command(GRIPPER, [], [math.inf]), 'INVALID_ARGUMENT'),
    (lambda: gr.parallel_command(GRIPPER, [], [0.5]), 'INVALID_ARGUMENT'),
    (lambda: gr.parallel_command(GRIPPER, [], [0.01], [0.1, 0.1]), 'INVALID_ARGUMENT'),
    (lambda: gr.parallel_command(GRIPPER, [], [0.01], [], [-1.0]), 'INVALID_ARGUMENT'),
    (lambda: gr.parallel_command(GRIPPER, [], [0.01], [math.nan]), 'INVALID_ARGUMENT'),
    (lambda: GRIPPER.native_goal(True), 'INVALID_ARGUMENT'),
])
def test_each_refusal_names_its_reason(call, code):
    _target, err = _refusal(call)
    assert err is not None and err.code == code
    assert err.where and str(err)
