"""A re-aim after a missed move_to: a joint whose servo stopped short of its setpoint with
its ctrl pinned at the end of the ctrl range can go no further that way, so the re-aim's
IK bounds stop it where it is (the other joints take up the rest); free servos keep the
move's bounds."""

from types import SimpleNamespace

import mujoco
import numpy as np

from mujoco_hal_ros.motion import move

ARM = '''
<mujoco>
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
