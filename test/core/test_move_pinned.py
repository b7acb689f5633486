"""move_to's choice of joint goals. A re-aim after a missed move: a joint whose servo
stopped short of its setpoint with its ctrl pinned at the end of the ctrl range can go no
further that way, so the re-aim's IK bounds stop it where it is (the other joints take up
the rest); free servos keep the move's bounds. An answer a random restart found gives
way to one nearer the start."""

from types import SimpleNamespace

import mujoco
import numpy as np

from mujoco_hal_ros.motion import ik, move

ARM = '''
<mujoco>
  <compiler angle="radian"/>
  <worldbody>
    <body name="a"><joint name="a" axis="0 1 0" range="-2 2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      <body name="b" pos="0.3 0 0"><joint name="b" axis="0 1 0" range="-2 2"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position joint="a" kp="10" ctrlrange="-1 1"/>
    <position joint="b" kp="10" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
'''


def _bounds(ctrl, setpoint, q_now):
    model = mujoco.MjModel.from_xml_string(ARM)
    mv = SimpleNamespace(actuators=[0, 1], lower=np.array([-1.0, -1.0]),
                         upper=np.array([1.0, 1.0]))
    snap = SimpleNamespace(ctrl=np.array(ctrl), setpoint=np.array(setpoint))
    return move.pinned_bounds(model, mv, snap, np.array(q_now))


def test_a_servo_pinned_at_its_ctrl_limit_stops_its_joint_where_it_is():
    lower, upper = _bounds(ctrl=[1.0, 0.3], setpoint=[0.9, 0.3], q_now=[0.8, 0.29])
    assert upper.tolist() == [0.8, 1.0]
    assert lower.tolist() == [-1.0, -1.0]
    lower, upper = _bounds(ctrl=[0.2, -1.0], setpoint=[0.2, -0.9], q_now=[0.2, -0.7])
    assert lower.tolist() == [-1.0, -0.7]
    assert upper.tolist() == [1.0, 1.0]


def test_a_servo_at_its_limit_that_is_not_held_back_keeps_its_bounds():
    # At the limit, but past its setpoint (pushed there): nothing holds it back that way.
    lower, upper = _bounds(ctrl=[1.0, -1.0], setpoint=[0.9, -0.9], q_now=[0.95, -0.95])
    assert lower.tolist() == [-1.0, -1.0] and upper.tolist() == [1.0, 1.0]


TWO_LINK = '''
<mujoco>
  <compiler angle="radian"/>
  <worldbody>
    <body name="upper"><joint name="shoulder" axis="0 0 1" range="-3 3"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      <body name="fore" pos="0.3 0 0"><joint name="elbow" axis="0 0 1" range="-3 3"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
        <site name="tip" pos="0.3 0 0"/>
      </body>
    </body>
  </worldbody>
</mujoco>
'''


def test_a_restart_answer_gives_way_to_one_near_the_start():
    """Elbow up or elbow down put the tip on the same point; the restart found the branch
    far from the start, and a descent from near the start finds the near one."""
    model = mujoco.MjModel.from_xml_string(TWO_LINK)
    data = mujoco.MjData(model)
    target = np.array([0.3 * np.cos(0.2) + 0.3 * np.cos(1.2),
                       0.3 * np.sin(0.2) + 0.3 * np.sin(1.2), 0.0])   # elbow at +1.0
    lower, upper = np.array([-3.0, -3.0]), np.array([3.0, 3.0])
    common = dict(site='tip', body=None, aim=None, joints=None, lower=lower, upper=upper)
    far = ik.solve(model, data, target, q_init=np.array([1.4, -1.0]), tolerance=1e-4,
                   **common)
    assert far.success and far.qpos[1] < 0           # the elbow-down branch
    q_start = np.array([0.25, 0.9])
    planner = move.Planner(model, None)
    snap = SimpleNamespace(qpos=np.zeros(model.nq))
    near = planner.near_start(far, target, q_start, lower, upper, snap, 1e-3, 0.05, common)
    assert near.qpos[1] > 0                          # elbow up, as at the start
    assert np.linalg.norm(near.reached - target) <= 1e-3
