"""Zero-config gripper detection (``motion.gripper``) on a hobby-class arm URDF.

``test/models/hobby_arm.urdf`` is described as the public low-cost arms are: its gripper
servo's horn is a continuous joint named ``gripper``, and its two prismatic fingers (the
right one mimics the left) are what open and close. Zero-config bound the horn: a
GripperCommand then answered reached while the fingers stood still. Each claim here is
judged by the finger gap measured from the fingers' body positions (forward kinematics on
a separate MjData), not by the gripper's own position reading.
"""

import os

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.conformance import battery
from mujoco_hal_ros.conformance.zoo import ZooModel
from mujoco_hal_ros.description.urdf_in import model_from_urdf
from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.motion import gripper as gr
from mujoco_hal_ros.sim.device import Device

HOBBY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'models',
                     'hobby_arm.urdf')


@pytest.fixture(scope='module')
def hobby_path():
    with open(HOBBY, encoding='utf-8') as handle:
        path, _notes = model_from_urdf(handle.read(), base_dir=os.path.dirname(HOBBY))
    return path


def _gap(model, qpos):
    """Distance between the two finger links, from their body positions."""
    d = mujoco.MjData(model)
    d.qpos[:] = qpos
    mujoco.mj_kinematics(model, d)
    return float(np.linalg.norm(d.xpos[model.body('left_finger').id]
                                - d.xpos[model.body('right_finger').id]))


def _command(dev, g, position, seconds=1.5):
    channel = dev.layout.goals[g.channel]
    dev.set_goals({g.channel: channel.to_unit(g.native_goal(position))})
    dev.step(int(round(seconds / dev.model.opt.timestep)))
    return _gap(dev.model, dev.snapshot.qpos)


def test_the_gripper_is_the_prismatic_fingers_not_the_servo_horn(hobby_path):
    with Device(model=hobby_path, real_time_factor=0, start_paused=True) as dev:
        m = dev.model
        assert gr.is_horn(m, m.joint('gripper').id)
        assert not gr.is_horn(m, m.joint('right_finger_joint').id)   # a mimic follower
        g = gr.find_gripper(dev.layout)
        assert g is not None and g.joint == 'left_finger_joint', g
        assert (g.lo, g.hi) == (0.0, pytest.approx(0.03))
        assert all(c.joint != 'gripper' for _s, c in gr.gripper_candidates(dev.layout))
        closed = _command(dev, g, g.lo)
        opened = _command(dev, g, g.hi)
        # both fingers slide 30 mm outward: the leader and its mimic follower
        assert opened - closed == pytest.approx(0.06, abs=0.004), (closed, opened)
        assert _command(dev, g, g.lo) == pytest.approx(closed, abs=0.002)


def test_a_gripper_bound_to_the_horn_moves_no_finger(hobby_path):
    """What zero-config did before: the horn turns, the finger gap stays."""
    with Device(model=hobby_path, real_time_factor=0, start_paused=True) as dev:
        horn = gr.gripper_on_joint(dev.layout, 'gripper')
        channel = dev.layout.goals[horn.channel]
        gaps = []
        for position in (-0.5, 0.5):
            dev.set_goals({horn.channel: channel.to_unit(horn.native_goal(position))})
            dev.step(int(round(1.5 / dev.model.opt.timestep)))
            gaps.append(_gap(dev.model, dev.snapshot.qpos))
            assert horn.position(dev.snapshot) == pytest.approx(position, abs=0.05)
        assert abs(gaps[1] - gaps[0]) < 1e-4


def test_binding_a_joint_without_a_position_servo_names_those_with_one(hobby_path):
    with Device(model=hobby_path, real_time_factor=0, start_paused=True) as dev:
        with pytest.raises(DeviceError) as err:
            gr.gripper_on_joint(dev.layout, 'right_finger_joint')      # a mimic: no servo
    assert 'left_finger_joint' in str(err.value) and 'not driven' in str(err.value)


def test_the_battery_gripper_check_judges_the_fingers_not_the_joint():
    """The ``gripper`` cell passes on the fingers and fails on the horn, though the horn's
    own joint reaches every position it is sent to."""
    good = battery.run(ZooModel('hobby', HOBBY, 'arm', urdf=True), checks=('gripper',))[0]
    assert good.mark == 'pass', good.detail
    bad = battery.run(ZooModel('hobby', HOBBY, 'arm', urdf=True, gripper_joint='gripper'),
                      checks=('gripper',))[0]
    assert bad.mark == 'FAIL' and 'did not move' in bad.detail, bad.detail
