"""The URDF conformance tier: every robot of example-robot-data, as robot_description.

Each URDF of ``mujoco_hal_ros.conformance.urdf_zoo`` (arms, grippers, hands, quadrupeds,
humanoids, mobile manipulators; the arms again with a driver's ``<ros2_control>`` block)
is loaded as ``sim_node robot_description:=...`` loads it and runs the same battery as the
MJCF zoo (``conformance.battery``): start, keyframe, move_to on the tool link, an
unreachable target, hold, a FollowJointTrajectory move (``trajectory``: the large one;
``step``: every servo's small step response), effort, and mimic joints following their
leader. Each (URDF, check) is a case; a check that does not apply is skipped with its
reason. ``bench/conformance.py --urdf`` prints the same table.
"""

from helpers import zoo_cell
import pytest

from mujoco_hal_ros.conformance import battery, urdf_zoo

MODELS = urdf_zoo.models()


@pytest.mark.parametrize('check', battery.CHECKS)
@pytest.mark.parametrize('name', [z.name for z in MODELS])
def test_urdf_zoo(name, check):
    zoo_cell(name, check)


def test_the_zoo_holds_every_urdf_of_the_wheel():
    """A URDF a newer wheel adds is in the zoo (as 'other' until classified), and every
    arm is also run with a <ros2_control> block."""
    paths = urdf_zoo.urdf_paths()
    if not paths:
        pytest.skip(urdf_zoo.SHARE_MISSING)
    plain = [z for z in MODELS if not z.ros2_control]
    assert len(plain) == len(paths) >= 60
    assert {z.path for z in plain} == set(paths)
    assert len([z for z in MODELS if z.ros2_control]) == len(urdf_zoo.WITH_ROS2_CONTROL)


def test_a_driver_block_drives_leaders_only():
    """The written <ros2_control> block: a position command per joint, state interfaces
    only for a mimic joint (Panda's finger_joint2)."""
    paths = [p for p in urdf_zoo.urdf_paths() if p.endswith('/panda.urdf')]
    if not paths:
        pytest.skip(urdf_zoo.SHARE_MISSING)
    with open(paths[0], encoding='utf-8') as handle:
        text = urdf_zoo.with_ros2_control(handle.read())
    import xml.etree.ElementTree as ET

    from mujoco_hal_ros.description.urdf_in import ros2_control_joints
    commands = ros2_control_joints(ET.fromstring(text))
    assert 'panda_finger_joint1' in commands and 'panda_finger_joint2' not in commands
    assert len(commands) == 8
