"""The drive controllers of the robot's controllers file, served as ros2_controllers serves
them: the same topics, message types and frames, so Nav2 and teleop find what the real
robot's controller_manager would give them.

- ``diff_drive_controller``: ``<name>/cmd_vel`` (``geometry_msgs/TwistStamped``; ``Twist``
  where the file sets ``use_stamped_vel: false``), ``<name>/odom`` (``nav_msgs/Odometry``)
  and ``odom -> base`` on ``/tf`` when ``enable_odom_tf``, at ``publish_rate``.
- mecanum and steering controllers: ``<name>/reference`` (``TwistStamped``; Twist on
  ``<name>/reference_unstamped`` where ``use_stamped_vel: false``), ``<name>/odometry`` and
  ``<name>/tf_odometry`` (``tf2_msgs/TFMessage``) at the controller_manager's rate.

This module only translates; ``mobile.base.BaseController`` runs the controller.
"""

from __future__ import annotations

from collections.abc import Iterable
import dataclasses
import math
from typing import TYPE_CHECKING

from geometry_msgs.msg import TransformStamped, Twist, TwistStamped
from nav_msgs.msg import Odometry
from tf2_msgs.msg import TFMessage

from ...errors import DeviceError
from ...mobile import config as cfg
from ...mobile.base import BaseController
from .. import conversions as cv

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.node import Node
    from rclpy.publisher import Publisher

    from ...sim.ports import DriveHost

WARN_EVERY_S = 5.0       # at most one refused-command line per controller this often


def frame_prefix(config: cfg.DriveConfig, namespace: str) -> str:
    """What ros2_controllers puts before the odometry frames: ``tf_frame_prefix`` (``~``:
    the node's namespace), the namespace when it is empty, nothing when disabled."""
    if not config.tf_frame_prefix_enable:
        return ''
    prefix = config.tf_frame_prefix
    ns = namespace.strip('/')
    if not prefix or prefix == '~':
        prefix = ns
    elif prefix.startswith('~'):
        prefix = ns + prefix[1:]
    prefix = prefix.strip('/')
    return f'{prefix}/' if prefix else ''


def topics(config: cfg.DriveConfig) -> tuple[str, str]:
    """(command topic, odometry topic) of a drive: the ones its source names, else the
    controller's own under its name."""
    c = config
    diff = c.type == cfg.DIFF_DRIVE
    if c.command_topic:
        command = c.command_topic
    elif diff:
        command = f'{c.name}/cmd_vel'
    else:
        command = f'{c.name}/reference' if c.stamped else f'{c.name}/reference_unstamped'
    return command, c.odom_topic or (f'{c.name}/odom' if diff else f'{c.name}/odometry')


def for_robot(config: cfg.DriveConfig, namespace: str, prefix: str) -> cfg.DriveConfig:
    """A robots-file robot's drive: its joints as the world model names them (``prefix``),
    its topics under its namespace and its frames with the namespace as prefix (as
    ros2_controllers prefixes them with the controller's namespace)."""
    command, odom = topics(config)
    geometry = {k: [prefix + j for j in v] if k in ('traction', 'left', 'right', 'steering')
                else v for k, v in config.geometry.items()}
    ns = namespace.strip('/')
    return dataclasses.replace(
        config, geometry=geometry, command_topic=f'{ns}/{command.lstrip("/")}',
        odom_topic=f'{ns}/{odom.lstrip("/")}', tf_frame_prefix_enable=True,
        tf_frame_prefix=ns, source=f'{config.source} of robot {ns}')


def _yaw_quat(yaw):
    return (0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0))


class DriveServed:
    """One drive controller on the node: its command subscription and odometry output."""

    def __init__(self, node: Node, device: DriveHost, config: cfg.DriveConfig,
                 tf_pub: Publisher | None) -> None:
        # tf_pub: the node's /tf publisher a diff drive's odom -> base goes on (None: its own)
        self.node = node
        self.config = c = config
        self.base = BaseController(device, config)
        self.log = node.get_logger()
        prefix = frame_prefix(c, node.get_namespace())
        self.odom_frame, self.base_frame = prefix + c.odom_frame_id, prefix + c.base_frame_id
        diff = c.type == cfg.DIFF_DRIVE
        topic, odom_topic = topics(c)
        kind = TwistStamped if c.stamped else Twist
        self.topics = [topic]
        self._sub = node.create_subscription(kind, topic, self._on_command, 10)
        self._odom_pub = node.create_publisher(Odometry, odom_topic, 10)
        self.topics.append(odom_topic)
        self._tf_pub: Publisher | None = None
        if c.enable_odom_tf:
            if diff:
                self._tf_pub = tf_pub if tf_pub is not None else \
                    node.create_publisher(TFMessage, '/tf', 100)
                self.topics.append(f'/tf ({self.odom_frame} -> {self.base_frame})')
            else:
                self._tf_pub = node.create_publisher(TFMessage, f'{c.name}/tf_odometry', 10)
                self.topics.append(f'{c.name}/tf_odometry')
        self._limited_pub: Publisher | None = None
        if c.publish_limited_velocity:     # what the controller sent after its limiters
            self._limited_pub = node.create_publisher(TwistStamped, f'{c.name}/cmd_vel_out', 10)
            self.topics.append(f'{c.name}/cmd_vel_out')
        self._last_warn = -math.inf
        self.refused = 0
        self._last_stamp: float | None = None
        self._timer = node.create_timer(1.0 / c.publish_rate, self._publish)

    def _on_command(self, msg):
        twist = msg.twist if isinstance(msg, TwistStamped) else msg
        try:
            self.base.command(twist.linear.x, twist.linear.y, twist.angular.z)
        except DeviceError as err:
            self.refused += 1
            now = self.node.get_clock().now().nanoseconds * 1e-9
            if now - self._last_warn > WARN_EVERY_S:
                self._last_warn = now
                self.log.warning(f'{self.config.name}: command refused, the base keeps its '
                                 f'last one: {err} ({self.refused} refused so far)')

    def _publish(self):
        s = self.base.state
        if s.time == self._last_stamp:
            return                       # paused: nothing new to say
        self._last_stamp = s.time
        c = self.config
        stamp = cv.stamp(s.time)
        msg = Odometry()
        msg.header.stamp = stamp
        msg.header.frame_id = self.odom_frame
        msg.child_frame_id = self.base_frame
        pose, twist = msg.pose, msg.twist
        pose.pose.position.x, pose.pose.position.y = s.x, s.y
        q = pose.pose.orientation
        q.x, q.y, q.z, q.w = _yaw_quat(s.heading)
        twist.twist.linear.x, twist.twist.linear.y, twist.twist.angular.z = s.vx, s.vy, s.wz
        for i, v in enumerate(c.pose_covariance):
            pose.covariance[7 * i] = v
        for i, v in enumerate(c.twist_covariance):
            twist.covariance[7 * i] = v
        self._odom_pub.publish(msg)
        if self._limited_pub is not None:
            out = TwistStamped()
            out.header.stamp = stamp
            out.header.frame_id = self.base_frame
            out.twist.linear.x, out.twist.linear.y, out.twist.angular.z = s.command
            self._limited_pub.publish(out)
        if self._tf_pub is not None:
            t = TransformStamped()
            t.header.stamp = stamp
            t.header.frame_id = self.odom_frame
            t.child_frame_id = self.base_frame
            t.transform.translation.x, t.transform.translation.y = s.x, s.y
            r = t.transform.rotation
            r.x, r.y, r.z, r.w = _yaw_quat(s.heading)
            self._tf_pub.publish(TFMessage(transforms=[t]))

    def destroy(self) -> None:
        self.node.destroy_timer(self._timer)
        self.node.destroy_subscription(self._sub)
        self.base.close()


class DriveControllers:
    """Every drive controller (``mobile.config.DriveConfig``): the controllers file's, or a
    Gazebo drive plugin's."""

    def __init__(self, node: Node, device: DriveHost, drives: Iterable[cfg.DriveConfig],
                 tf_pub: Publisher | None) -> None:
        self.parts: list[DriveServed] = []
        try:
            for config in drives:
                self.parts.append(DriveServed(node, device, config, tf_pub))
                node.get_logger().info(
                    f'{config.name} ({config.type}, from {config.source}): '
                    f'{", ".join(config.wheel_joints)}'
                    + (f'; steering {", ".join(config.steering_joints)}'
                       if config.steering_joints else ''))
                if config.no_effect:
                    node.get_logger().info(
                        f'{config.name}: parameters with no effect in simulation: '
                        + ', '.join(config.no_effect))
        except BaseException:
            self.destroy()
            raise

    @property
    def odom_tf(self) -> bool:
        """Whether a controller publishes ``odom -> base`` on /tf (the ground truth then
        stays off /tf)."""
        return any(p.config.enable_odom_tf and p.config.type == cfg.DIFF_DRIVE
                   for p in self.parts)

    def describe(self) -> list[str]:
        return [t for p in self.parts for t in p.topics]

    def destroy(self) -> None:
        for part in self.parts:
            part.destroy()
        self.parts = []
