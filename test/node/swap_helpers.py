"""In-process ROS harness for the swap interfaces: own Context, random domain, bounded spins.

Not a conftest: other test files keep their own fixtures, and this one is imported by
name (pytest puts the test directory on sys.path).
"""

import math
import random
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from mujoco_hal_ros.ros.swap import attach_swap_interfaces


def duration(t):
    from builtin_interfaces.msg import Duration
    ns = int(round(t * 1e9))
    return Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


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


class Harness:
    """A node with the swap interfaces on ``device`` and a client node, one executor."""

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

    def spin_until(self, predicate, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f'not done within {timeout} s')
            self.ex.spin_once(timeout_sec=0.01)

    def spin_for(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.ex.spin_once(timeout_sec=0.01)

    def wait(self, future, timeout=10.0):
        self.spin_until(future.done, timeout)
        return future.result()

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
