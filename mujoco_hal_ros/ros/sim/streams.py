"""The state publisher: joint_states, /clock, /tf, poses and read channels from snapshots.

It runs on its own thread with absolute deadlines rather than as an executor timer: at
1 kHz an rclpy timer costs a thread-pool hand-off per tick and its jitter grows with every
service call the executor handles, while a thread that sleeps to the next deadline keeps
the interval tight and never delays a service. It only reads ``device.snapshot`` (a
consistent copy the stepper swaps in after each chunk), so it never touches MjData.

Rates: ``publish_rate`` and ``tf_rate`` are wall-clock, like a real driver's. A read
channel's ``every`` is simulated time (the device samples that often in its own time),
checked at each joint_states tick.

Two ways out, chosen once in ``StatePublisher.__init__``: with the fast paths on
(``mujoco_hal_ros.fastpath``) joint_states, /tf and /clock go out as CDR bytes packed from
the snapshot's arrays (``_publish``), else as rclpy message objects
(``_publish_objects``); a subscriber gets the same bytes either way.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from itertools import pairwise
import threading
import time
from typing import Any, TYPE_CHECKING

from geometry_msgs.msg import PoseStamped
import mujoco
import numpy as np
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64
from tf2_msgs.msg import TFMessage

from ... import fastpath, joint_view
from ...fastpath import cdr, sched
from .. import conversions as cv
from .params import SimParams, TABLE as PARAMS

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.impl.rcutils_logger import RcutilsLogger
    from rclpy.node import Node
    from rclpy.publisher import Publisher

    from ...sim.device import Device
    from ...sim.robots import RobotView
    from ...sim.snapshot import Snapshot
    from .tf import FrameTree

TF_QOS = QoSProfile(depth=100)
TF_STATIC_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                           reliability=ReliabilityPolicy.RELIABLE)
STATE_QOS = QoSProfile(depth=10)
SUBSCRIBER_POLL_S = 0.1
LATE_WINDOW_TICKS = 500      # at SCHED_FIFO, more than half of these late: give it back
STOP_POLL_S = 0.05           # the longest sleep between looks at the stop flag


def moving_joints(model: mujoco.MjModel, keep: Callable[[str], bool] | None = None
                  ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(names, qpos addresses, dof addresses) of every hinge and slide joint (those whose
    name ``keep`` accepts, when given): ``joint_view``'s ``moving``."""
    found = joint_view.view(model).moving(keep)
    return list(found.names), found.qpos, found.dofs


class JointGroup:
    """``<namespace>/joint_states`` of one robot of the world (``sim.robots``): its joints
    only, by the robot's own names (``waist``, not the world model's ``left/waist``, as
    the real arm's driver publishes them), packed from the same snapshot as the node's own
    joint_states."""

    def __init__(self, namespace: str, prefix: str, pub: Publisher) -> None:
        self.namespace, self.prefix, self.pub = namespace, prefix, pub
        self.names: list[str] = []
        self.qadr: np.ndarray | list[int] = []
        self.dadr: np.ndarray | list[int] = []
        self.js: JointState | None = None                    # these four: set by follow()
        self.js_bytes: cdr.JointStateBytes | None = None
        self.packed: Snapshot | None = None
        self.payload: bytes | None = None

    def follow(self, model: mujoco.MjModel) -> None:
        names, self.qadr, self.dadr = moving_joints(
            model, lambda name: name.startswith(self.prefix))
        self.names = [n[len(self.prefix):] for n in names]
        self.js = JointState(name=list(self.names))
        self.js_bytes = cdr.JointStateBytes(self.names)
        self.packed = self.payload = None

    def publish(self, snap: Snapshot, raw: bool) -> None:
        if self.js is None or self.js_bytes is None:
            return                            # not given a model yet (follow)
        if raw:
            if snap is not self.packed:
                self.packed = snap
                self.payload = self.js_bytes.pack(snap.time, snap.qpos[self.qadr],
                                                  snap.qvel[self.dadr],
                                                  snap.qfrc_actuator[self.dadr])
            self.pub.publish(self.payload)
            return
        js = self.js
        js.header.stamp = cv.stamp(snap.time)
        js.position = cv.doubles(snap.qpos[self.qadr])
        js.velocity = cv.doubles(snap.qvel[self.dadr])
        js.effort = cv.doubles(snap.qfrc_actuator[self.dadr])
        self.pub.publish(js)


class RateMeter:
    """Messages per second and worst gaps over a sliding window, for diagnostics and bench."""

    def __init__(self, window: int = 2000) -> None:
        self._times: collections.deque[float] = collections.deque(maxlen=window)

    def tick(self, now: float | None = None) -> None:
        self._times.append(time.monotonic() if now is None else now)

    def rate(self, span: float = 2.0) -> float:
        now = time.monotonic()
        times = [t for t in list(self._times) if now - t <= span]
        if len(times) < 2:
            return 0.0
        return (len(times) - 1) / max(times[-1] - times[0], 1e-9)

    def intervals(self) -> list[float]:
        times = list(self._times)
        return [b - a for a, b in pairwise(times)]


class StatePublisher:
    """Publishes the device state on its own thread at the configured rates."""

    def __init__(self, node: Node, device: Device, frames: FrameTree, params: SimParams,
                 logger: RcutilsLogger, odom_topic: str = 'odom') -> None:
        self.node = node
        self.device = device
        self.frames = frames
        self.params = params
        self.logger = logger
        model = device.model
        self.joint_names, self._qadr, self._dadr = self._own_joints(model)
        self.groups: tuple[JointGroup, ...] = ()     # the robots' joint_states (set_robots)
        # (groups, publishers to drop) for the thread
        self._groups_next: tuple[tuple[JointGroup, ...], list[JointGroup]] | None = None
        self._groups_lock = threading.Lock()
        self.js_pub = node.create_publisher(JointState, 'joint_states', STATE_QOS)
        self.tf_pub = node.create_publisher(TFMessage, '/tf', TF_QOS)
        self.clock_pub = (node.create_publisher(Clock, '/clock', STATE_QOS)
                          if params.publish_clock else None)
        # poses/<site or body>: one PoseStamped per site/body the device file reads.
        self.poses: dict[str, dict[str, Any]] = {}
        for r in device.layout.reads:
            if r.kind in ('site', 'body') and r.target not in self.poses:
                self.poses[r.target] = {
                    'kind': r.kind, 'index': r.index, 'every': r.every, 'last': None,
                    'pub': node.create_publisher(PoseStamped, f'poses/{r.target}',
                                                 STATE_QOS)}
            elif r.kind in ('site', 'body'):
                self.poses[r.target]['every'] = min(self.poses[r.target]['every'], r.every)
        self.channels = {r.name: {'every': r.every, 'last': None,
                                  'pub': node.create_publisher(Float64, f'channels/{r.name}',
                                                               STATE_QOS)}
                         for r in device.layout.reads}
        self.joint_meter = RateMeter()
        self.tf_meter = RateMeter(200)
        self._js = JointState(name=list(self.joint_names))
        self._js_bytes = cdr.JointStateBytes(self.joint_names)
        self._tf_bytes = cdr.TransformsBytes(frames.moving_parents, frames.moving_frames)
        self.odometry = (Odometry(node, model, frames, odom_topic)
                         if frames.odom is not None else None)
        fast = fastpath.enabled()          # the one choice of path for these three streams
        self.raw = fast and raw_messages_ok(self._js_bytes, self._tf_bytes, self.joint_names)
        if fast and not self.raw:
            logger.info('state publisher: this middleware does not read our CDR bytes back; '
                        'publishing message objects instead (slower at high rates)')
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_clock: float | None = None
        self._packed: Snapshot | None = None      # the last snapshot's bytes
        self._js_payload: bytes | None = None
        self._tf_payload: bytes | None = None
        self._any_wanted = False
        self.errors = 0
        self.scheduling = 'ordinary'         # or SCHED_FIFO <priority>: for diagnostics
        self._scheduled = threading.Event()
        self.generation = device.snapshot.generation    # of the model the caches are of

    def _own_joints(self, model):
        """The node's own joint_states: every moving joint but the robots' (each has its
        own ``<namespace>/joint_states``)."""
        robots = self.device.robots
        return moving_joints(model, lambda name: not robots.claimed(name))

    def set_robots(self, views: Sequence[RobotView]) -> None:
        """The robots now in the world (``Robots.views()``): a joint_states each, and the
        node's own without their joints, from the publisher thread's next tick on."""
        with self._groups_lock:
            pending = self._groups_next[0] if self._groups_next else self.groups
            old = {g.namespace: g for g in pending}
            groups = tuple(old.pop(v.namespace) if v.namespace in old else JointGroup(
                v.namespace, v.prefix, self.node.create_publisher(
                    JointState, f'{v.namespace}/joint_states', STATE_QOS)) for v in views)
            dropped = (self._groups_next[1] if self._groups_next else []) + list(old.values())
            self._groups_next = (groups, dropped)

    def _take_groups(self, model):
        """Publisher thread: the robots set_robots last gave, their addresses on ``model``."""
        with self._groups_lock:
            groups, dropped = self._groups_next
            self._groups_next = None
        for g in groups:
            g.follow(model)
        self.joint_names, self._qadr, self._dadr = self._own_joints(model)
        self._js = JointState(name=list(self.joint_names))
        self._js_bytes = cdr.JointStateBytes(self.joint_names)
        self._packed = self._js_payload = None
        self.groups = groups
        for g in dropped:
            try:
                self.node.destroy_publisher(g.pub)
            except Exception:  # noqa: BLE001 - the node is going down meanwhile
                pass

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name='sim_node-state', daemon=True)
        self._thread.start()
        self._scheduled.wait(5.0)             # so that `realtime` is known when this returns

    @property
    def realtime(self) -> bool:
        """Whether the state thread runs at SCHED_FIFO (thread_priority granted)."""
        return self.scheduling.startswith('SCHED_FIFO')

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def describe(self) -> list[str]:
        """What this publishes, for the start-up summary."""
        out = [f'joint_states ({len(self.joint_names)} joints @ {self.params.publish_rate:g} Hz)',
               f'/tf ({len(self.frames.moving_frames)} moving frames @ '
               f'{self.params.tf_rate:g} Hz)']
        if self.clock_pub is not None:
            out.append('/clock')
        if self.odometry is not None:
            out.append(f'{self.odometry.topic} ({self.frames.odom} -> {self.odometry.child}, '
                       'ground truth)')
        out += [f'poses/{n}' for n in self.poses]
        out += [f'channels/{n}' for n in self.channels]
        return out

    # --- the loop ---------------------------------------------------------------------------
    def _run(self):
        # wake on time while cameras, subscribers and DDS keep both cores busy (sched.py;
        # nothing with the fast paths off, when _take_priority is refused too)
        sched.short_slice()
        self._take_priority()
        self._scheduled.set()
        period = 1.0 / self.params.publish_rate
        late, ticks = 0, 0
        tf_every = max(1, int(round(self.params.publish_rate / self.params.tf_rate)))
        tick = 0
        deadline = time.monotonic()
        next_count = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if deadline > now:
                # time.sleep, not Event.wait: less CPU per wake (bench/README.md), which at
                # 1 kHz the physics thread on the sibling core gets back
                while deadline > now and not self._stop.is_set():
                    time.sleep(min(deadline - now, STOP_POLL_S))
                    now = time.monotonic()
                if self._stop.is_set():
                    break
            else:
                late += 1
            ticks += 1
            if ticks >= LATE_WINDOW_TICKS:
                if late > ticks // 2 and self.realtime:
                    self._drop_priority(late, ticks)
                late = ticks = 0
            deadline += period
            if deadline < time.monotonic() - 4 * period:   # fell far behind: do not burst
                deadline = time.monotonic() + period
            try:
                if deadline >= next_count:     # who listens changes rarely; ask 10x a second
                    next_count = deadline + SUBSCRIBER_POLL_S
                    self._count_subscribers()
                self._publish(self.device.snapshot, tick % tf_every == 0)
            except Exception as err:  # noqa: BLE001 - a shut-down context ends the loop
                if self._stop.is_set() or not _context_ok(self.js_pub):
                    break
                self.errors += 1
                if self.errors <= 3:
                    self.logger.error(f'state publisher: {type(err).__name__}: {err}')
            tick += 1

    def _take_priority(self):
        prio = self.params.thread_priority
        if not prio:
            return
        why = sched.realtime(prio)
        if why is None:
            self.scheduling = f'SCHED_FIFO {prio}'
            return
        # the default asks and carries on quietly where it may not; asked for, it warns
        quiet = prio == PARAMS['thread_priority'].default
        log = self.logger.info if quiet else self.logger.warning
        log(f'state publisher keeps ordinary scheduling (thread_priority {prio}): {why}')

    def _drop_priority(self, late, ticks):
        # a FIFO thread that cannot keep its period would hold a core: hand it back
        sched.ordinary()
        self.scheduling = 'ordinary (fell behind at SCHED_FIFO)'
        self.logger.warning(f'state publisher missed {late} of {ticks} deadlines at '
                            f'{self.params.publish_rate:g} Hz: back to ordinary scheduling; '
                            f'lower publish_rate or tf_rate')

    def _follow(self, snap):
        """A scene edit swapped the model: joint names, addresses, frames and the packed
        layouts are the new model's from this snapshot on (this thread's own caches)."""
        model = self.device.cameras.model_of(snap.generation)
        self.frames = self.frames.for_model(model)
        self.joint_names, self._qadr, self._dadr = self._own_joints(model)
        for g in self.groups:
            g.follow(model)
        self._js = JointState(name=list(self.joint_names))
        self._js_bytes = cdr.JointStateBytes(self.joint_names)
        self._tf_bytes = cdr.TransformsBytes(self.frames.moving_parents,
                                             self.frames.moving_frames)
        self._packed = self._js_payload = self._tf_payload = None
        if self.odometry is not None and self.frames.base is None:
            self.odometry = None
        elif self.odometry is not None:
            self.odometry.follow(model, self.frames)
        reads = {r.name: r for r in self.device.layout.reads}
        for name in [n for n in self.channels if n not in reads]:
            del self.channels[name]
        for target, entry in list(self.poses.items()):
            r = next((r for r in reads.values() if r.kind == entry['kind']
                      and r.target == target), None)
            if r is None:
                del self.poses[target]
            else:
                entry['index'] = r.index
        self.generation = snap.generation

    def _publish(self, snap, with_tf):
        if snap.generation != self.generation:
            self._follow(snap)
        if self._groups_next is not None:
            self._take_groups(self.device.cameras.model_of(snap.generation))
        for group in self.groups:
            group.publish(snap, self.raw)
        # every joint a robot's (a robots-only world): their joint_states carry them all, and
        # an empty one beside them at the full rate is only load
        own = bool(self.joint_names) or not self.groups
        if not self.raw:
            return self._publish_objects(snap, with_tf, own)
        t = snap.time
        if snap is not self._packed:
            # A snapshot lasts a chunk (one physics step at real time, several at rtf 0):
            # the ticks within it send the same bytes again instead of packing them anew.
            self._packed, self._tf_payload = snap, None
            self._js_payload = self._js_bytes.pack(t, snap.qpos[self._qadr],
                                                   snap.qvel[self._dadr],
                                                   snap.qfrc_actuator[self._dadr])
        if own:
            self.js_pub.publish(self._js_payload)
        self.joint_meter.tick()
        if self.clock_pub is not None and t != self._last_clock:
            self._last_clock = t
            self.clock_pub.publish(cdr.clock_bytes(t))
        if with_tf and self._tf_bytes.size:
            if self._tf_payload is None:
                pos, quat = self.frames.moving_poses(snap)
                self._tf_payload = self._tf_bytes.pack(t, pos, quat[:, _XYZW])
            self.tf_pub.publish(self._tf_payload)
            self.tf_meter.tick()
        if with_tf and self.odometry is not None and self.odometry.wanted:
            self.odometry.publish(snap)
        if self._any_wanted:
            st = cv.stamp(t)
            self._publish_poses(snap, st)
            self._publish_channels(snap)

    def _publish_objects(self, snap, with_tf, own=True):
        """The same messages as rclpy objects: with the fast paths off, or for a middleware
        that is not classic CDR."""
        st = cv.stamp(snap.time)
        js = self._js
        js.header.stamp = st
        js.position = cv.doubles(snap.qpos[self._qadr])
        js.velocity = cv.doubles(snap.qvel[self._dadr])
        js.effort = cv.doubles(snap.qfrc_actuator[self._dadr])
        if own:
            self.js_pub.publish(js)
        self.joint_meter.tick()
        if self.clock_pub is not None and snap.time != self._last_clock:
            self._last_clock = snap.time
            self.clock_pub.publish(Clock(clock=st))
        if with_tf and self.frames.moving_frames:
            self.tf_pub.publish(TFMessage(transforms=self.frames.dynamic_transforms(snap, st)))
            self.tf_meter.tick()
        if with_tf and self.odometry is not None and self.odometry.wanted:
            self.odometry.publish(snap)
        self._publish_poses(snap, st)
        self._publish_channels(snap)

    def _count_subscribers(self):
        """Poses and channels are only built for topics someone listens to."""
        any_wanted = False
        if self.odometry is not None:
            self.odometry.count_subscribers()
        for entry in list(self.poses.values()) + list(self.channels.values()):
            entry['wanted'] = entry['pub'].get_subscription_count() > 0
            any_wanted = any_wanted or entry['wanted']
        self._any_wanted = any_wanted

    @staticmethod
    def _due(entry, t):
        if not entry.get('wanted'):
            return False
        last = entry['last']
        return last is None or entry['every'] <= 0 or t - last >= entry['every'] - 1e-9

    def _publish_poses(self, snap, st):
        for entry in self.poses.values():
            if not self._due(entry, snap.time):
                continue
            entry['last'] = snap.time
            i = entry['index']
            msg = PoseStamped()
            msg.header.stamp = st
            msg.header.frame_id = self.frames.world
            if entry['kind'] == 'site':
                pos, quat = snap.site_xpos[i], cv.quat_from_mat(snap.site_xmat[i])
            else:
                pos, quat = snap.xpos[i], snap.xquat[i]
            msg.pose.position = cv.point(pos)
            msg.pose.orientation = cv.quat_ros(quat)
            entry['pub'].publish(msg)

    def _publish_channels(self, snap):
        due = [n for n, e in self.channels.items() if self._due(e, snap.time)]
        if not due:
            return
        values = self.device.read(due, snapshot=snap)
        for name in due:
            entry = self.channels[name]
            entry['last'] = snap.time
            entry['pub'].publish(Float64(data=values[name]))


_XYZW = [1, 2, 3, 0]   # MuJoCo quaternions are (w, x, y, z); ROS's are (x, y, z, w)


class Odometry:
    """nav_msgs/Odometry of a floating base on ``odom``, at the /tf rate while subscribed.

    As REP-105 and nav2 read it: the pose of the base in the odom frame (here the world's,
    since simulated odometry does not drift), the twist in the base's own frame (linear
    and angular velocity, what a wheel or leg odometry reports). Covariances are zero:
    the numbers are the simulator's exact state, not an estimate.
    """

    def __init__(self, node: Node, model: mujoco.MjModel, frames: FrameTree,
                 topic: str = 'odom') -> None:
        from nav_msgs.msg import Odometry as OdometryMsg  # only floating bases need it
        base = frames.base
        if base is None:
            raise ValueError('odometry is of a floating base; this frame tree has none')
        self.base = base
        self.child = frames.body_frames[base]
        self._dof = joint_view.view(model).in_body(base)[0].dofadr   # its free joint's
        self._msg = OdometryMsg()
        self._msg.header.frame_id = frames.odom
        self._msg.child_frame_id = self.child
        self.topic = topic
        self._pub = node.create_publisher(OdometryMsg, topic, STATE_QOS)
        self._mat = np.empty(9)
        self.wanted = False

    def follow(self, model: mujoco.MjModel, frames: FrameTree) -> None:
        """The floating base of a model swapped in (its topic stays)."""
        if frames.base is None:
            raise ValueError('odometry is of a floating base; this frame tree has none')
        self.base = frames.base
        self.child = frames.body_frames[frames.base]
        self._dof = joint_view.view(model).in_body(frames.base)[0].dofadr
        self._msg.child_frame_id = self.child

    def count_subscribers(self) -> None:
        self.wanted = self._pub.get_subscription_count() > 0

    def twist(self, snap: Snapshot) -> tuple[np.ndarray, np.ndarray]:
        """(linear, angular) velocity of the base in its own frame: a free joint's qvel is
        the linear velocity in the world frame, then the angular one in the body's."""
        d = self._dof
        mujoco.mju_quat2Mat(self._mat, snap.xquat[self.base])
        return (snap.qvel[d:d + 3] @ self._mat.reshape(3, 3), snap.qvel[d + 3:d + 6])

    def publish(self, snap: Snapshot) -> None:
        msg = self._msg
        msg.header.stamp = cv.stamp(snap.time)
        msg.pose.pose.position = cv.point(snap.xpos[self.base])
        msg.pose.pose.orientation = cv.quat_ros(snap.xquat[self.base])
        linear, angular = self.twist(snap)
        t = msg.twist.twist
        t.linear.x, t.linear.y, t.linear.z = (float(v) for v in linear)
        t.angular.x, t.angular.y, t.angular.z = (float(v) for v in angular)
        self._pub.publish(msg)


def raw_messages_ok(js_bytes: cdr.JointStateBytes, tf_bytes: cdr.TransformsBytes,
                    names: Sequence[str]) -> bool:
    """Whether this middleware reads our packed bytes back as the messages they stand for.

    Every ROS 2 rmw in use speaks classic CDR, so this holds; the check runs once at start
    and turns a silent garbling on some other middleware into the slower, exact path.
    """
    try:
        n, m = len(names), tf_bytes.size
        vals = np.arange(3 * n, dtype=float) + 0.25
        js = deserialize_message(js_bytes.pack(5.5, vals[:n], vals[n:2 * n], vals[2 * n:]),
                                 JointState)
        tf = deserialize_message(tf_bytes.pack(7.25, np.full((m, 3), 1.5), np.full((m, 4), 0.5)),
                                 TFMessage)
        clock = deserialize_message(cdr.clock_bytes(9.125), Clock)
    except Exception:  # noqa: BLE001 - any failure to read back means: do not use bytes
        return False
    return (list(js.name) == list(names) and list(js.effort) == list(vals[2 * n:])
            and (js.header.stamp.sec, js.header.stamp.nanosec) == (5, 500_000_000)
            and len(tf.transforms) == m
            and all(t.transform.rotation.w == 0.5 and t.transform.translation.z == 1.5
                    and t.header.stamp.nanosec == 250_000_000 for t in tf.transforms)
            and (clock.clock.sec, clock.clock.nanosec) == (9, 125_000_000))


def _context_ok(pub):
    try:
        return pub.handle is not None and pub.get_subscription_count() >= 0
    except Exception:  # noqa: BLE001 - InvalidHandle once the node is gone
        return False
