"""robot_description: the URDF of the simulated robot, latched, as robot_state_publisher
publishes a real arm's.

rviz's RobotModel display and MoveIt read it from this topic. For a model loaded from
MJCF it is generated (``description.urdf_out``), with link names equal to the /tf frames;
for a model loaded from a URDF it is that URDF, unchanged, so the real arm's tools see the
description they already know. Meshes can be large, so the URDF is built off the start-up
path and published once it is ready (latched: late subscribers get it too).
"""

from __future__ import annotations

from collections.abc import Iterable
import os
import threading
import time
from typing import TYPE_CHECKING

from std_msgs.msg import String

from ...description.urdf_in import is_urdf, model_from_urdf
from ...description.urdf_out import urdf_from_model
from ...errors import ConfigError, DeviceError
from ...mobile import config as drive_config, gazebo_drive
from .streams import TF_STATIC_QOS

if TYPE_CHECKING:                      # types only: no import at run time
    import mujoco
    from rclpy.node import Node

    from ...world.sandbox import Sandbox
    from .params import SimParams
    from .tf import FrameTree

TOPIC_WAIT_S = 30.0
MAX_TOPIC_CHARS = 10_000_000     # a robot_description message (a big real URDF: ~1 MB)


def read_robot_description(node: Node, value: str) -> tuple[str | None, str | None]:
    """(URDF text, base folder for relative meshes) of the ``robot_description`` parameter:
    the text itself, a .urdf file, or ``topic``: the first message on the latched
    ``robot_description`` (robot_state_publisher's), waited for at start."""
    value = value.strip()
    if not value:
        return None, None
    if value != 'topic':
        if is_urdf(value):
            return value, None
        with open(value, encoding='utf-8') as handle:
            return handle.read(), os.path.dirname(os.path.abspath(value))
    from rclpy.executors import SingleThreadedExecutor
    got: list[String] = []
    sub = node.create_subscription(String, 'robot_description', got.append, TF_STATIC_QOS)
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    try:
        end = time.monotonic() + TOPIC_WAIT_S
        while not got and time.monotonic() < end and node.context.ok():
            executor.spin_once(timeout_sec=0.1)
    finally:
        executor.remove_node(node)
        executor.shutdown()
        node.destroy_subscription(sub)
    if not got:
        raise ConfigError(f'no robot_description message within {TOPIC_WAIT_S:g} s; start '
                          'robot_state_publisher with the URDF, or pass the URDF itself',
                          where='parameter robot_description')
    return got[0].data, None


def model_from_parameters(node: Node, p: SimParams, sandbox: Sandbox | None = None,
                          drives: Iterable[drive_config.DriveConfig] | None = None
                          ) -> tuple[str | None, str | None, bool,
                                     list[drive_config.DriveConfig]]:
    """(URDF text or None, MJCF path or None, republish?, drive configs) from
    robot_description/scene. ``drives``: the controllers file's drive controllers; without
    any, a diff-drive plugin among the URDF's ``<gazebo>`` tags is one
    (``mobile.gazebo_drive``).

    A description taken from the topic comes from whichever peer published it: its size is
    capped before it is parsed, and the model made from it is read and compiled in
    ``sandbox`` (``world.sandbox``: memory, CPU and element caps) before the device loads
    it, so a hostile description is refused at start with the limit named."""
    text, base = read_robot_description(node, p.robot_description)
    if text is None:
        return None, None, True, list(drives or ())
    from_topic = p.robot_description.strip() == 'topic'
    if from_topic and len(text) > MAX_TOPIC_CHARS:
        raise ConfigError(f'the robot_description message has {len(text)} characters, over '
                          f'the limit of {MAX_TOPIC_CHARS}', where='parameter robot_description')
    roots = [r for r in os.environ.get('ROS_PACKAGE_PATH', '').split(os.pathsep) if r]
    drives = list(drives or ())
    if not drives:
        drives, found = gazebo_drive.drives_from_urdf(text)
        for note in found:
            node.get_logger().info(f'robot_description: {note}')
    path, notes = model_from_urdf(text, scene=p.scene or None, package_roots=roots,
                                  base_dir=base, base=p.base,
                                  drives=drive_config.drive_joints(drives))
    if from_topic and sandbox is not None:
        try:
            sandbox.check(path, world=True)
        except DeviceError as exc:
            raise ConfigError(f'the robot_description from the topic is refused: {exc}',
                              where='parameter robot_description') from None
    for note in notes:
        node.get_logger().info(f'robot_description: {note}')
    return text, path, not from_topic, drives


class DescriptionPublisher:
    """Publishes ``robot_description`` once, from ``urdf`` or generated from the model."""

    def __init__(self, node: Node, model: mujoco.MjModel, frames: FrameTree,
                 urdf: str | None = None) -> None:
        self.pub = node.create_publisher(String, 'robot_description', TF_STATIC_QOS)
        self.ready = threading.Event()
        self.text: str | None = None
        self._lock = threading.Lock()          # stop() waits for a publish in progress
        self._stopped = False
        self._log = node.get_logger()
        self._args = (model, frames.prefix, frames.world)
        self._given = bool(urdf)               # a URDF of the user's stays what it is
        self._thread = threading.Thread(target=self._run, args=(urdf,),
                                        name='sim_node-description', daemon=True)
        self._thread.start()

    def _run(self, urdf):
        try:
            model, prefix, world = self._args
            self.text = urdf if urdf else urdf_from_model(model, prefix=prefix, world=world)
            with self._lock:
                if not self._stopped:
                    self.pub.publish(String(data=self.text))
        except Exception as err:  # noqa: BLE001 - rviz loses the model; the device works
            if not self._stopped:
                self._log.error(f'robot_description: {type(err).__name__}: {err}')
        finally:
            self.ready.set()

    def follow(self, model: mujoco.MjModel) -> None:
        """A scene edit swapped the model: the generated URDF is the new model's (the
        caller's thread: sim_node's scene thread, never the executor)."""
        if self._given:
            return
        _old, prefix, world = self._args
        self._args = (model, prefix, world)
        text = urdf_from_model(model, prefix=prefix, world=world)
        with self._lock:
            if not self._stopped:
                self.text = text
                self.pub.publish(String(data=text))

    def describe(self) -> list[str]:
        return ['robot_description']

    def stop(self, timeout: float = 5.0) -> None:
        """No publish after this returns (the node is about to destroy its publishers)."""
        with self._lock:
            self._stopped = True
        self._thread.join(timeout)
