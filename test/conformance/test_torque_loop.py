"""The torque-motor joint loop (``drives.joint_torque``): a torque motor given a joint
goal holds it as a drive's position mode does, stiff within its effort limits.

The zoo rows that need it are dm_control's and gymnasium's motor-driven models (coarse
timesteps, light links on heavy ones, Euler or RK4); these two small arms are the same
cases on their own, one strong enough for its load and one too weak for it.
"""

import numpy as np
import pytest

from mujoco_hal_ros.sim.device import Device

# A heavy upper arm, a light wrist and a coarse Euler step (dm_control's reacher is so):
# a joint loop run once a step, explicitly, had to go soft for the wrist not to oscillate.
LIGHT_WRIST = '''
<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.02" integrator="Euler"/>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" axis="0 1 0" range="-3 3" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05" mass="4"/>
      <body name="fore" pos="0.5 0 0">
        <joint name="wrist" axis="0 1 0" range="-3 3" damping="0.01"/>
        <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.01" mass="0.05"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="shoulder" joint="shoulder" ctrlrange="-1 1" gear="100"/>
    <motor name="wrist" joint="wrist" ctrlrange="-1 1" gear="5"/>
  </actuator>
  <keyframe><key name="home" qpos="0.3 -0.5"/></keyframe>
</mujoco>
'''

# One link held level by a motor that gives 2 N m against the 4.9 N m of its weight.
WEAK = '''
<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.002"/>
  <worldbody>
    <body name="link" pos="0 0 1">
      <joint name="hinge" axis="0 -1 0" range="-3 3"/>
      <geom type="capsule" fromto="0 0 0 1 0 0" size="0.01" mass="1e-6"/>
      <geom type="sphere" pos="0.5 0 0" size="0.02" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" ctrlrange="-1 1" gear="2"/></actuator>
</mujoco>
'''


@pytest.fixture
def device(tmp_path):
    opened = []

    def open_model(xml):
        path = tmp_path / 'model.xml'
        path.write_text(xml)
        dev = Device(model=str(path), real_time_factor=0, start_paused=True)
        opened.append(dev)
        return dev
    yield open_model
    for dev in opened:
        dev.close()


# The same arm with a free box on the floor beside it: a tree of its own, which the loop
# leaves out of the arm's inertia (it couples nothing to it) and must not be thrown by.
WITH_A_BOX = LIGHT_WRIST.replace('  </worldbody>', '''    <geom type="plane" size="2 2 0.1"/>
    <body name="box" pos="1 1 0.05"><freejoint/><geom type="box" size="0.05 0.05 0.05"/></body>
  </worldbody>''').replace('qpos="0.3 -0.5"', 'qpos="0.3 -0.5 1 1 0.05 1 0 0 0"')


@pytest.mark.parametrize('xml', [LIGHT_WRIST, WITH_A_BOX], ids=['alone', 'beside_a_box'])
def test_a_light_wrist_settles_and_holds_at_a_coarse_step(device, xml):
    dev = device(xml)
    names = sorted(dev.goals())
    goal = dict(zip(names, [0.0, 0.0], strict=True))
    dev.set_goals(goal)
    for _ in range(300):                               # until the path has ended (6 s)
        dev.step(1)
        assert np.abs(dev.snapshot.ctrl).max() <= 1.0  # within the motors' ranges
        if not dev.snapshot.moving:
            break
    dev.step(25)                                       # 0.5 s after it
    snap = dev.snapshot
    assert np.abs(snap.qpos[:2]).max() < 1e-3          # there
    q0 = snap.qpos[:2].copy()
    dev.step(50)
    assert np.abs(dev.snapshot.qpos[:2] - q0).max() < 1e-3  # and it stays (1 s)


def test_a_motor_too_weak_for_its_load_pushes_at_its_limit(device):
    dev = device(WEAK)
    dev.step(500)                                      # 1 s
    snap = dev.snapshot
    sag = float(snap.setpoint[0] - snap.qpos[0])
    assert sag > 0.1                                   # it could not hold the link level
    assert snap.ctrl[0] == pytest.approx(1.0)          # at its effort limit ...
    assert snap.qfrc_actuator[0] == pytest.approx(2.0)  # ... pushing back toward the goal


def test_a_humanoid_held_on_the_floor_lies_still():
    """gymnasium's humanoid, fallen from its keyframe and held: several motors at their
    effort limits must not make the others swing theirs from limit to limit. When the loop
    solved the unsaturated motors again to make up for the saturated ones, torques went
    from one limit to the other 336 times in 300 steps (over 17 joints) and the body kept
    rocking (joint speeds near 1 rad/s)."""
    from mujoco_hal_ros.config import effort
    from mujoco_hal_ros.conformance import battery, zoo
    zm = zoo.by_name('gym_humanoid')
    if zm.path is None:
        pytest.skip(zm.missing)
    dev = battery.open_device(zm)
    try:
        m = dev.model
        goals = [g for g in dev.layout.goals.values() if g.drive == 'motor_impedance']
        dofs = m.jnt_dofadr[[g.joint for g in goals]]
        lo, hi = effort.torque_limits(m, [g.actuator for g in goals])
        dev.step(round(4.0 / m.opt.timestep))          # falls and comes to rest
        torques, speeds = [], []
        for _ in range(300):
            dev.step(1)
            torques.append(dev.snapshot.qfrc_actuator[dofs])
            speeds.append(dev.snapshot.qvel[dofs])
        torques, speeds = np.array(torques), np.array(speeds)
        swings = (torques[:-1] <= 0.5 * lo) & (torques[1:] >= 0.5 * hi) | \
            (torques[:-1] >= 0.5 * hi) & (torques[1:] <= 0.5 * lo)
        assert not swings.any(), f'{swings.sum()} limit-to-limit swings'
        assert np.abs(speeds).max() < 0.05
    finally:
        dev.close()
