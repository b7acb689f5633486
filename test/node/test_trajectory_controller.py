"""joint_trajectory_controller's interface on the simulated bench arm, in one process.

A client node and the device node share one Context (own DDS domain) and one executor the
test spins for bounded times, so a hang fails the test instead of stalling the suite.
"""

import os

from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance, JointTrajectoryControllerState
import numpy as np
import pytest
from rclpy.action import ActionClient
from swap_helpers import DEG, duration, Harness, trajectory
from trajectory_msgs.msg import JointTrajectory

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.sim.device import Device

R = FollowJointTrajectory.Result
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..'))
BENCH_YAML = os.path.join(ROOT, 'config', 'bench_arm.yaml')
J = ['pan', 'lift', 'elbow', 'wrist']


def bench_device(**kw):
    kw.setdefault('real_time_factor', 2.0)
    return Device(BENCH_YAML, environ={'OPENHAL_BENCH_ARM': menagerie.bench_arm_path()}, **kw)


@pytest.fixture
def h():
    dev = bench_device()
    harness = Harness(dev, {'arm_controller.constraints.goal_time': 1.0})
    harness.action = ActionClient(harness.client, FollowJointTrajectory,
                                  'arm_controller/follow_joint_trajectory')
    yield harness
    harness.close()
    dev.close()


def rest(dev):
    return dev.snapshot.setpoint[:4].copy()


def goal(points, joints=J, **kw):
    g = FollowJointTrajectory.Goal()
    g.trajectory = trajectory(joints, points)
    for key, value in kw.items():
        setattr(g, key, value)
    return g


def test_parameters_are_declared_once_with_descriptions(h):
    n = h.node
    assert n.get_parameter('trajectory_controller').value == 'arm_controller'
    assert n.get_parameter('arm_controller.constraints.goal_time').value == 1.0
    assert n.get_parameter('joint_commands_topic').value == 'joint_commands'
    for name in ('arm_controller.joints', 'arm_controller.constraints.pan.trajectory',
                 'arm_controller.constraints.stopped_velocity_tolerance'):
        desc = n.describe_parameter(name)
        assert desc.description and desc.type
    assert h.parts.trajectory.joints == J


def test_malformed_goals_are_rejected_with_a_reason_and_nothing_moves(h):
    dev = h.device
    r = list(rest(dev))
    before = dev.snapshot.setpoint.copy()
    bad = {
        'unknown joint': goal([(1.0, r)], joints=['pan', 'lift', 'elbow', 'hand']),
        'no points': goal([]),
        'wrong length': goal([(1.0, r[:3])]),
        'velocity length': goal([(1.0, r, [0.0] * 3)]),
        'not increasing': goal([(1.0, r), (0.5, r)]),
        'out of limits': goal([(2.0, [100 * DEG] + r[1:])]),
        'too fast': goal([(0.2, [60 * DEG] + r[1:])]),
        'tolerance joint': goal([(1.0, r)], path_tolerance=[JointTolerance(name='hand',
                                                                           position=0.1)]),
        'missing joints': goal([(1.0, r[:2])], joints=['pan', 'lift']),
    }
    expect = {'unknown joint': "'hand'", 'no points': 'no points', 'wrong length':
              '3 values for 4', 'velocity length': 'velocities', 'not increasing': 'not after',
              'out of limits': 'outside the limit', 'too fast': 'max_change_per_s',
              'tolerance joint': 'path_tolerance', 'missing joints': 'leaves out'}
    for what, g in bad.items():
        gh, result = h.send(h.action, g)
        # the reason reaches the client: accepted, aborted at once, why in error_string
        assert gh.accepted and result is not None, what
        result = h.wait(result, 10.0)
        code = result.result.error_code
        named = what in ('unknown joint', 'tolerance joint')     # a joint it does not have
        assert code == (FollowJointTrajectory.Result.INVALID_JOINTS if named
                        else FollowJointTrajectory.Result.INVALID_GOAL), (what, code)
        assert expect[what] in result.result.error_string, (what, result.result.error_string)
        assert expect[what] in h.parts.trajectory.last_rejection, \
            (what, h.parts.trajectory.last_rejection)
    h.spin_for(0.2)
    assert np.array_equal(dev.snapshot.setpoint, before)
    assert h.parts.trajectory.counts['rejected'] == len(bad)


def test_trajectory_is_followed_to_the_goal_with_feedback(h):
    dev = h.device
    r = rest(dev)
    mid, end = r.copy(), r.copy()
    mid[0] += 15 * DEG
    end[0] += 30 * DEG
    end[2] -= 20 * DEG
    order = [3, 1, 0, 2]                              # wrist, lift, pan, elbow
    joints = [J[i] for i in order]
    fb = []
    gh, res = h.send(h.action, goal([(0.6, mid[order]), (1.2, end[order])], joints=joints,
                                    goal_tolerance=[JointTolerance(name=j, position=0.01)
                                                    for j in joints]), feedback=fb)
    assert gh.accepted
    result = h.wait(res, 10.0).result
    assert result.error_code == R.SUCCESSFUL, result.error_string
    assert fb and fb[0].joint_names == joints
    f = fb[len(fb) // 2]
    assert np.allclose(np.array(f.error.positions),
                       np.array(f.desired.positions) - np.array(f.actual.positions))
    snap = dev.snapshot
    assert np.allclose(snap.setpoint[:4], end)
    assert np.allclose(snap.qpos[:4], end, atol=0.01)


def test_path_tolerance_violation_aborts_and_holds(h):
    dev = h.device
    r = rest(dev)
    end = r.copy()
    end[0] += 40 * DEG
    tight = [JointTolerance(name='pan', position=1e-5)]
    gh, res = h.send(h.action, goal([(1.5, end)], path_tolerance=tight))
    result = h.wait(res, 10.0).result
    assert result.error_code == R.PATH_TOLERANCE_VIOLATED
    assert 'pan position error' in result.error_string
    held = dev.snapshot.setpoint[0]
    assert held < end[0] - 1 * DEG
    h.spin_for(0.3)
    assert dev.snapshot.setpoint[0] == held


def test_goal_tolerance_violation_aborts_after_goal_time(h):
    r = rest(h.device)
    end = r.copy()
    end[0] += 30 * DEG
    # Linear segments end at speed: the servo lags, and 1e-6 rad is never met in 20 ms.
    g = goal([(0.6, end)], goal_tolerance=[JointTolerance(name='pan', position=1e-6)],
             goal_time_tolerance=duration(0.02))
    gh, res = h.send(h.action, g)
    result = h.wait(res, 10.0).result
    assert result.error_code == R.GOAL_TOLERANCE_VIOLATED, result.error_string
    assert 'goal tolerance' in result.error_string


def test_new_goal_preempts_and_cancel_holds(h):
    dev = h.device
    r = rest(dev)
    a, b = r.copy(), r.copy()
    a[0] += 50 * DEG
    b[0] -= 20 * DEG
    gh_a, res_a = h.send(h.action, goal([(3.0, a)]))
    h.spin_for(0.3)
    gh_b, res_b = h.send(h.action, goal([(2.0, b)]))
    ra = h.wait(res_a, 5.0)
    assert ra.result.error_code == R.INVALID_GOAL
    assert 'new incoming action' in ra.result.error_string
    h.spin_for(0.3)
    cancel = h.wait(gh_b.cancel_goal_async(), 5.0)
    assert len(cancel.goals_canceling) == 1
    rb = h.wait(res_b, 5.0)
    from action_msgs.msg import GoalStatus
    assert rb.status == GoalStatus.STATUS_CANCELED
    held = dev.snapshot.setpoint[:4].copy()
    h.spin_for(0.4)
    assert np.array_equal(dev.snapshot.setpoint[:4], held)
    assert b[0] < held[0] < a[0]
    counts = h.parts.trajectory.counts
    assert counts['preempted'] == 1 and counts['canceled'] == 1


def test_reset_during_a_goal_aborts_it(h):
    r = rest(h.device)
    a = r.copy()
    a[0] += 50 * DEG
    gh, res = h.send(h.action, goal([(3.0, a)]))
    h.spin_for(0.2)
    h.device.reset()
    result = h.wait(res, 5.0).result
    assert result.error_code == R.INVALID_GOAL and 'took over' in result.error_string


def test_topic_trajectory_and_controller_state(h):
    dev = h.device
    states = []
    h.client.create_subscription(JointTrajectoryControllerState,
                                 'arm_controller/controller_state', states.append, 10)
    pub = h.client.create_publisher(JointTrajectory, 'arm_controller/joint_trajectory', 10)
    r = rest(dev)
    end = r.copy()
    end[1] += 10 * DEG
    h.spin_until(lambda: pub.get_subscription_count() > 0, 5.0)
    pub.publish(trajectory(J, [(0.5, [100 * DEG] + list(r[1:]))]))   # refused: limits
    h.spin_for(0.3)
    assert np.allclose(dev.snapshot.setpoint[:4], r)
    assert 'outside the limit' in h.parts.trajectory.last_rejection
    pub.publish(trajectory(J, [(0.5, end)]))
    h.spin_until(lambda: np.allclose(dev.snapshot.setpoint[:4], end), 5.0)
    h.spin_until(lambda: states and np.allclose(states[-1].output.positions, end), 5.0)
    s = states[-1]
    assert list(s.joint_names) == J
    assert np.allclose(s.reference.positions, end)
    assert np.allclose(s.output.positions, end)
    assert np.allclose(np.array(s.error.positions),
                       np.array(s.reference.positions) - np.array(s.feedback.positions))


def test_controllers_file_gives_the_real_controller_config(tmp_path):
    path = tmp_path / 'controllers.yaml'
    path.write_text('''
controller_manager:
  ros__parameters:
    update_rate: 500
    arm_controller:
      type: joint_trajectory_controller/JointTrajectoryController
/arm_controller:
  ros__parameters:
    joints: [pan, lift, elbow]
    command_interfaces: [position]
    state_interfaces: [position, velocity]
    allow_partial_joints_goal: true
    gains: {pan: {p: 100.0, i: 1.0}}
    constraints:
      stopped_velocity_tolerance: 0.02
      goal_time: 1
      pan: {trajectory: 0.2, goal: 0.05}
''')
    dev = bench_device()
    h = Harness(dev, {'controllers_file': str(path)})
    try:
        t = h.parts.trajectory
        assert t.joints == ['pan', 'lift', 'elbow'] and t.allow_partial
        assert t.defaults.goal_time == 1.0
        assert list(t.defaults.path_position) == [0.2, 0.0, 0.0]
        assert list(t.defaults.goal_velocity) == [0.02] * 3
        assert h.node.get_parameter('arm_controller.gains.pan.p').value == 100.0
        assert h.node.get_parameter('arm_controller.command_interfaces').value == ['position']
    finally:
        h.close()
        dev.close()


def test_the_example_swap_config_runs_sim_node_unchanged():
    """config/arm_controller_swap.yaml: sim_node's block plus the shared arm_controller
    block (what controller_manager loads on the real arm) give the same controller."""
    from rclpy.parameter import parameter_dict_from_yaml_file, parameter_value_to_python
    path = os.path.join(ROOT, 'config', 'arm_controller_swap.yaml')
    block = parameter_dict_from_yaml_file(path, target_nodes=['sim_node'])
    params = {k: parameter_value_to_python(v.value) for k, v in block.items()
              if k != 'device_file'}
    params['controllers_file'] = path
    dev = bench_device()
    h = Harness(dev, params)
    try:
        t = h.parts.trajectory
        assert t.name == 'arm_controller' and t.joints == J
        assert t.defaults.goal_time == 1.0
        assert list(t.defaults.path_position) == [0.1] * 4
        assert list(t.defaults.goal_position) == [0.02] * 4
        assert h.parts.topic.topic == 'joint_commands'
    finally:
        h.close()
        dev.close()
