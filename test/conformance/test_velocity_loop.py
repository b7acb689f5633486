"""The velocity servos' position loop (``drives.joint_speed``): a velocity servo given a
joint goal (hold, move_to, a trajectory) holds it as a real driver's position mode over a
velocity interface does, while its goal channel still takes speeds.

The arm is a two-link arm under gravity on soft velocity servos (a small kv): a zero speed
command alone lets its weight drift it away at a fraction of a radian a second.
"""

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.sim.device import Device

ARM = '''
<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.002"/>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" axis="0 1 0" range="-3 3" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.04" mass="2"/>
      <body name="fore" pos="0.5 0 0">
        <joint name="elbow" axis="0 1 0" range="-3 3" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="1"/>
        <site name="tip" pos="0.4 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <velocity name="shoulder" joint="shoulder" kv="20" ctrlrange="-2 2" forcerange="-60 60"/>
    <velocity name="elbow" joint="elbow" kv="10" ctrlrange="-2 2" forcerange="-30 30"/>
  </actuator>
  <keyframe><key name="home" qpos="0.3 0.6"/></keyframe>
</mujoco>
'''


@pytest.fixture
def dev(tmp_path):
    path = tmp_path / 'arm.xml'
    path.write_text(ARM)
    device = Device(model=str(path), real_time_factor=0, start_paused=True)
    yield device
    device.close()


def _tip(model, qpos):
    """The tip by forward kinematics from joint positions alone."""
    d = mujoco.MjData(model)
    d.qpos[:] = qpos
    mujoco.mj_kinematics(model, d)
    return d.site_xpos[model.site('tip').id].copy()


def test_a_held_velocity_arm_keeps_its_pose_under_gravity(dev):
    dev.hold()
    dev.step(250)                                  # 0.5 s to settle into the hold
    q0 = dev.snapshot.qpos.copy()
    moved = 0.0
    for _ in range(10):                            # 1 s
        dev.step(50)
        moved = max(moved, float(np.abs(dev.snapshot.qpos - q0).max()))
        assert np.all(np.abs(dev.snapshot.ctrl) <= 2.0)   # within the speed limits
    assert moved < 1e-3
    assert np.abs(q0 - [0.3, 0.6]).max() < 1e-2    # held where it was, not sagged away
    # Effort is the torque MuJoCo applies: the servos carry the arm's weight.
    assert np.abs(dev.snapshot.qfrc_actuator).max() > 1.0


def test_move_to_on_a_velocity_arm_reaches_the_point_by_fk(dev):
    start = _tip(dev.model, dev.snapshot.qpos)
    target = start + np.array([-0.15, 0.0, 0.1])
    move = dev.move_to(point=target, site='tip', wait=False)
    for _ in range(200):                           # at most 8 s
        if move.done():
            break
        dev.step(20)
    assert move.done() and move.result['code'] == 'DONE', move.result
    dev.step(500)                                  # and it stays there (1 s)
    reached = _tip(dev.model, dev.snapshot.qpos)
    assert np.linalg.norm(reached - target) < 1e-3


def test_the_velocity_goal_channels_still_take_speeds(dev):
    dev.hold()                                      # from a position hold ...
    dev.step(250)
    dev.set_goals({'elbow_goal': 0.5})              # ... back to a speed: 0.5 rad/s
    dev.step(500)                                   # 1 s: past the ramp
    snap = dev.snapshot
    elbow = dev.model.actuator('elbow').id
    assert snap.setpoint[elbow] == pytest.approx(0.5)
    assert snap.ctrl[elbow] == pytest.approx(0.5)   # the servo is sent the speed itself
    assert not snap.position_mode[elbow] and snap.position_mode[dev.model.actuator(
        'shoulder').id]                             # the shoulder still holds its position
    # turning on (its kv gives way a little to the forearm's weight)
    assert snap.qvel[dev.model.joint('elbow').dofadr[0]] > 0.25


def test_reset_gives_the_velocity_servos_speeds_again(dev):
    dev.hold()
    dev.step(250)
    dev.reset()                                     # back to the keyframe, as at the start
    snap = dev.snapshot
    assert not snap.position_mode.any()
    assert np.all(snap.setpoint == 0.0)             # a zero speed, not joint position 0
    assert dev.goals() == {'shoulder_goal': 0.0, 'elbow_goal': 0.0}
    dev.step(50)
    assert np.abs(dev.snapshot.qpos - [0.3, 0.6]).max() < 0.1   # not driven to q = 0


def test_a_held_velocity_arm_keeps_holding_across_a_scene_edit(dev):
    dev.hold()
    dev.step(250)
    q0 = dev.snapshot.qpos[:2].copy()
    dev.scene.spawn('<mujoco><worldbody><body name="box" pos="2 2 0.5"><freejoint/>'
                    '<geom type="box" size="0.05 0.05 0.05"/></body></worldbody></mujoco>',
                    'box')
    assert dev.snapshot.position_mode[dev.model.actuator('elbow').id]
    dev.step(500)                                   # 1 s in the edited scene
    assert np.abs(dev.snapshot.qpos[:2] - q0).max() < 1e-3
