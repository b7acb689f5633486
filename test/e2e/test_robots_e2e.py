"""Two robots in one sim_node process, over real DDS: each moved through its own namespace
while the other holds still, judged from the published joint_states by forward kinematics
on a model this process builds itself (not the node's). The robots are example-robot-data's
UR5 and Panda URDFs, as a user's robots file names them."""

import time

import mujoco
import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from helpers import START_S  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.conformance import urdf_zoo  # noqa: E402
from mujoco_hal_ros.world import robots_file  # noqa: E402

LEFT, RIGHT = (0.0, 0.5, 0.0), (0.0, -0.5, 0.0)


def _urdf(name):
    found = [p for p in urdf_zoo.urdf_paths() if p.endswith(name)]
    if not found:
        pytest.skip(urdf_zoo.SHARE_MISSING)
    return found[0]


def _world(robots):
    """The same world, composed here: the empty world with both URDFs imported and attached
    as the robots file's entries say."""
    spec = mujoco.MjSpec.from_file(menagerie.empty_world_path())
    for entry in robots_file.load(robots):
        spec.attach(mujoco.MjSpec.from_file(robots_file.resource(entry)),
                    prefix=f'{entry.namespace}/', frame=spec.worldbody.add_frame(
                        pos=entry.position, quat=entry.quaternion))
    return spec.compile()


def _still(client, topic, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        js = client.latest(JointState, topic)[0]
        if np.abs(np.array(js.velocity)).max() < 2e-3:
            return js
    pytest.fail(f'{topic} still moving after {timeout} s')


def test_two_arms_each_moved_through_its_own_namespace(
        start_sim, spawn, client, tmp_path, monkeypatch):
    monkeypatch.setenv('ROS_PACKAGE_PATH', urdf_zoo.share_dir())    # package:// meshes
    robots = tmp_path / 'robots.yaml'
    robots.write_text(
        f'robots:\n  - namespace: left\n    urdf: {_urdf("ur_description/urdf/ur5_robot.urdf")}\n'
        f'    position: {list(LEFT)}\n  - namespace: right\n'
        f'    urdf: {_urdf("panda_description/urdf/panda.urdf")}\n'
        f'    position: {list(RIGHT)}\n')
    proc = start_sim(f'robots:={robots}', name='robots')
    client.wait_graph(['/left/joint_states', '/right/joint_states',
                       '/left/move_to/_action/send_goal',
                       '/right/arm_controller/follow_joint_trajectory/_action/send_goal'],
                      START_S, proc, spawn)
    model = _world(str(robots))
    before = _still(client, '/right/joint_states')
    target = (0.35, 0.5, 0.45)
    # the robot's own names: the UR5's tool0, as its driver and MoveIt name it
    res = client.move_to('/left/move_to', target, site='tool0', timeout=40.0)
    assert res.result.code == 'DONE', res.result.message
    left = _still(client, '/left/joint_states')
    data = mujoco.MjData(model)
    for name, q in zip(left.name, left.position, strict=True):   # its own names, under left/
        data.qpos[model.jnt_qposadr[model.joint(f'left/{name}').id]] = q
    mujoco.mj_kinematics(model, data)
    tool = data.xpos[model.body('left/tool0').id]
    assert np.linalg.norm(tool - np.array(target)) < 2e-3, tool
    right = client.latest(JointState, '/right/joint_states')[0]
    assert list(right.name) == list(before.name)
    assert list(left.name)[0] == 'shoulder_pan_joint' and right.name[0] == 'panda_joint1'
    np.testing.assert_allclose(right.position, before.position, atol=5e-3)
    assert proc.poll() is None
