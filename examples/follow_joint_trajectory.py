#!/usr/bin/env python3
"""A FollowJointTrajectory to a running sim_node, as MoveIt sends one.

    make run                                         # in one shell (or ros2 run / launch)
    python examples/follow_joint_trajectory.py       # in another, sourced the same way

The simulated arm serves ``arm_controller/follow_joint_trajectory`` as ros2_control's
joint_trajectory_controller would: positions in radians, each point at its time.
"""

import sys

from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
import rclpy
from rclpy.action import ActionClient
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint

JOINTS = ['pan', 'lift', 'elbow', 'wrist']
POINTS = [([0.3, 0.1, 0.8, 0.9], 1.0), ([-0.3, 0.3, 1.0, 0.7], 2.5)]   # (rad, seconds)


def main():
    rclpy.init()
    node = rclpy.create_node('fjt_example')
    try:
        client = ActionClient(node, FollowJointTrajectory,
                              'arm_controller/follow_joint_trajectory')
        if not client.wait_for_server(timeout_sec=30.0):
            sys.exit('no arm_controller/follow_joint_trajectory: is sim_node running '
                     '(make run), on the same ROS_DOMAIN_ID?')
        goal = FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = JOINTS
        for positions, t in POINTS:
            goal.trajectory.points.append(JointTrajectoryPoint(
                positions=positions, time_from_start=Duration(sec=int(t),
                                                              nanosec=int(t % 1 * 1e9))))
        sent = client.send_goal_async(goal)
        rclpy.spin_until_future_complete(node, sent, timeout_sec=30.0)
        handle = sent.result()
        if handle is None or not handle.accepted:
            sys.exit('the trajectory was refused')
        done = handle.get_result_async()
        rclpy.spin_until_future_complete(node, done, timeout_sec=30.0)
        result = done.result().result
        print('error_code', result.error_code, repr(result.error_string))
        latest = []
        sub = node.create_subscription(JointState, 'joint_states', latest.append, 10)
        for _ in range(100):
            if latest:
                break
            rclpy.spin_once(node, timeout_sec=0.1)
        node.destroy_subscription(sub)
        if not latest:
            sys.exit('no joint_states')
        js = dict(zip(latest[-1].name, latest[-1].position, strict=True))
        print('joints now', {j: round(js[j], 3) for j in JOINTS})
        return 0 if result.error_code == FollowJointTrajectory.Result.SUCCESSFUL else 1
    finally:
        node.destroy_node()
        rclpy.shutdown()


if __name__ == '__main__':
    sys.exit(main())
