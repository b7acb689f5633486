"""The user's own node under test: it waves the arm once by publishing a trajectory on
``arm_controller/joint_trajectory``, as it would to the real arm's
joint_trajectory_controller."""

import rclpy
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

JOINTS = ['pan', 'lift', 'elbow', 'wrist']
WAVE = [([0.4, 0.0, 0.6, 0.6], 1.0), ([-0.4, 0.0, 0.6, 0.6], 2.0), ([0.0, 0.2, 0.9, 0.9], 3.0)]


class Wave(Node):
    """Publishes the wave once the controller listens."""

    def __init__(self, **kwargs):
        super().__init__('wave', **kwargs)
        self.pub = self.create_publisher(JointTrajectory, 'arm_controller/joint_trajectory', 10)
        self.sent = False
        self.timer = self.create_timer(0.05, self._maybe_send)

    def _maybe_send(self):
        if self.sent or self.pub.get_subscription_count() == 0:
            return
        msg = JointTrajectory(joint_names=JOINTS)
        for q, t in WAVE:
            point = JointTrajectoryPoint(positions=q)
            point.time_from_start.sec, point.time_from_start.nanosec = int(t), int(t % 1 * 1e9)
            msg.points.append(point)
        self.pub.publish(msg)
        self.sent = True


def main():
    rclpy.init()
    node = Wave()
    try:
        rclpy.spin(node)
    finally:
        node.destroy_node()
        rclpy.shutdown()
