"""In-process ROS harness for the swap interfaces: own Context, random domain, bounded spins.

Not a conftest: other test files keep their own fixtures, and this one is imported by
name (pytest puts the test directory on sys.path). Spinning and ``duration`` come from
``test/helpers.py``, shared with the e2e tier.
"""

import math
import random

from helpers import duration, SpinInline  # duration: test_trajectory_controller takes it here
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from mujoco_hal_ros.ros.swap.serve import attach_swap_interfaces


def trajectory(joints, points):
    """points: (t, positions[, velocities[, accelerations]])."""
    msg = JointTrajectory()
    msg.joint_names = list(joints)
    for p in points:
        pt = JointTrajectoryPoint()
        pt.time_from_start = duration(p[0])
        pt.positions = [float(v) for v in p[1]]
        if len(p) > 2 and p[2] is not None:
            pt.velocities = [float(v) for v in p[2]]
        if len(p) > 3 and p[3] is not None:
            pt.accelerations = [float(v) for v in p[3]]
        msg.points.append(pt)
    return msg


class Harness(SpinInline):
    """A node with the swap interfaces on ``device`` and a client node, one executor
    (spin_until, spin_for, wait: helpers.SpinInline)."""

    def __init__(self, device, params=None, name='sim_node'):
        self.device = device
        self.domain = random.randint(100, 200)
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, domain_id=self.domain)
        overrides = [Parameter(k, value=v) for k, v in (params or {}).items()]
        self.node = Node(name, context=self.ctx, parameter_overrides=overrides)
        self.client = Node('test_client', context=self.ctx)
        self.ex = SingleThreadedExecutor(context=self.ctx)
        self.ex.add_node(self.node)
        self.ex.add_node(self.client)
        self.parts = attach_swap_interfaces(self.node, device)

    def call(self, client, request, timeout=10.0):
        assert client.wait_for_service(timeout_sec=timeout)
        return self.wait(client.call_async(request), timeout)

    def send(self, action_client, goal, timeout=10.0, feedback=None):
        """(goal handle, result future or None if rejected)."""
        assert action_client.wait_for_server(timeout_sec=timeout)
        cb = (lambda m: feedback.append(m.feedback)) if feedback is not None else None
        gh = self.wait(action_client.send_goal_async(goal, feedback_callback=cb), timeout)
        return gh, (gh.get_result_async() if gh.accepted else None)

    def close(self):
        try:
            if self.parts is not None:
                self.parts.destroy()
            self.ex.shutdown(timeout_sec=1.0)
            self.node.destroy_node()
            self.client.destroy_node()
        finally:
            rclpy.try_shutdown(context=self.ctx)


DEG = math.pi / 180
