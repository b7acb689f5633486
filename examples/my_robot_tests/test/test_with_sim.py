"""The user's tests against the simulated robot: each runs in simulated time (paused,
stepped), judged by forward kinematics of joint_states and by ground truth."""

import mujoco
from my_robot_tests.wave import JOINTS, WAVE, Wave
import numpy as np


def hand_by_fk(robot, q):
    """The hand where joint positions ``q`` put it, on a model of our own."""
    model = robot.device.model
    data = mujoco.MjData(model)
    for name, value in zip(JOINTS, q, strict=True):
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = value
    mujoco.mj_kinematics(model, data)
    return data.xpos[model.body('hand').id]


def test_follow_joint_trajectory_puts_the_hand_where_fk_says(sim_robot):
    robot = sim_robot()                                   # the built-in bench arm
    target = [0.3, 0.2, 0.9, 0.9]
    result = robot.follow_trajectory(JOINTS, [target], [1.5])
    assert result.error_code == 0
    robot.step(0.5)
    assert np.allclose(robot.link_position('hand'), hand_by_fk(robot, target), atol=2e-3)


def test_a_spawned_box_falls_onto_the_floor(sim_robot):
    robot = sim_robot()
    robot.device.scene.spawn('<mujoco><worldbody><body name="box"><freejoint/><geom '
                             'type="box" size="0.02 0.02 0.02"/></body></worldbody></mujoco>',
                             'box', position=(0.3, 0.3, 0.4))
    robot.run_until(lambda: robot.body_position('box/box')[2] < 0.03, 2.0, what='the landing')


def test_my_node_waves_the_arm(sim_robot):
    robot = sim_robot()
    wave = Wave(context=robot.context)                    # the user's node, same domain
    robot.executor.add_node(wave)
    try:
        robot.run_until(lambda: wave.sent, 5.0, what='the wave sent')
        seen = []
        for _ in range(40):                               # 4 s of simulated time
            robot.step(0.1)
            seen.append(robot.joint_positions(['pan'])['pan'])
        assert max(seen) > 0.3 and min(seen) < -0.3, 'the arm waved both ways'
        final, _t = WAVE[-1]
        q = robot.joint_positions(JOINTS)
        assert np.allclose([q[j] for j in JOINTS], final, atol=5e-3)
    finally:
        robot.executor.remove_node(wave)
        wave.destroy_node()
