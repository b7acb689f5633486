"""Sensor streams: the model's sensors, lidars, contacts and pushes as ROS messages.

One thread of its own (``sim_node-sensors``), like the state publisher's and for the same
reasons: no executor hand-off per message, never in the way of a service. It reads only
``device.snapshot`` and a lidar's private MjData. Each stream samples in simulated time
at its rate (a snapshot it has already sent is not sent again), and only while someone
subscribes; contacts are even computed only then (``Device.sensing.report_contacts``). The
readings (``sensors.catalog``), noise, scans and contact records are the core's; this
module turns them into messages:

- IMU (accelerometer, gyro, optional framequat on one site) -> ``sensor_msgs/Imu`` in
  the site's frame; without a framequat its orientation covariance is -1 (REP 145);
- force + torque on one site -> ``geometry_msgs/WrenchStamped``;
- rangefinder -> ``sensor_msgs/Range`` in ``<site>_range`` (x along the beam, as Range
  wants; MuJoCo casts along the site's z); no return -> +inf (REP 117);
- touch -> ``mujoco_hal_ros/Touch``; framepos/framequat -> ``PoseStamped`` (world);
- joint and actuator sensors -> ``JointState`` (``sensors/joint_states``,
  ``sensors/actuator_states``); anything else -> ``mujoco_hal_ros/SensorReading``.

Site frames hang off their body's frame on ``/tf_static`` (``static_transforms``).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, TYPE_CHECKING

from builtin_interfaces.msg import Time
from geometry_msgs.msg import PoseStamped, TransformStamped, WrenchStamped
import mujoco
import numpy as np
from rclpy.qos import QoSProfile
from sensor_msgs.msg import Imu, JointState, LaserScan, PointCloud2, PointField, Range

from ...errors import DeviceError
from ...fastpath import sched
from ...msg import SensorReading, Touch
from ...sensors import declared
from ...world import scene as scene_edit
from .. import conversions as cv
from .contacts import ContactStream

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.impl.rcutils_logger import RcutilsLogger
    from rclpy.node import Node

    from ...sensors.catalog import Group
    from ...sim.device import Device
    from .params import SimParams
    from .tf import FrameTree

SENSOR_QOS = QoSProfile(depth=10)
SUBSCRIBER_POLL_S = 0.1
STOP_POLL_S = 0.05
MAX_WAKE_HZ = 1000.0
Q_RANGE = np.array([math.sqrt(0.5), 0.0, -math.sqrt(0.5), 0.0])   # x onto the site's z


def _stamped(read, frame, fill):
    """A builder from ``fill(reading) -> message``: the reading's time and ``frame`` go into
    the header here, and no reading yet means no message."""
    def build(snap):
        t, r = read(snap)
        if r is None:
            return None
        msg = fill(r)
        msg.header.stamp, msg.header.frame_id = cv.stamp(t), frame
        return msg
    return build


class _Stream:
    """One topic: what it publishes at which simulated-time period."""

    def __init__(self, pub, period, build, grid=False):
        self.pub = pub
        self.period = period
        self.build = build         # snapshot -> message or None
        self.last = None           # simulated time last sent (with grid: last due)
        self.wanted = False
        self.sent = 0
        # A description's update_rate (Gazebo's) promises that rate: due times keep to a
        # grid of the period, so the snapshot a chunk late does not slow the stream down
        # by a chunk a message. Otherwise two messages are at least a period apart.
        self.grid = grid

    def due(self, t):
        """Whether a message is due at simulated time ``t``; if so, it counts as sent."""
        if self.last is not None and t - self.last < self.period - 1e-9:
            return False
        behind = self.last is None or t - self.last >= 2 * self.period
        self.last = t if not self.grid or behind else self.last + self.period
        return True


class SensorPublisher:
    """Every sensor-like stream of one device, on one thread."""

    def __init__(self, node: Node, device: Device, frames: FrameTree, params: SimParams,
                 logger: RcutilsLogger) -> None:
        self.device = device
        self.frames = frames
        self.logger = logger
        self.model = device.model
        self.streams: list[_Stream] = []
        self.errors = 0
        # frame name -> (parent frame, pos, wxyz)
        self._site_frames: dict[str, tuple[str, np.ndarray, np.ndarray]] = {}
        self.groups: list[Group] = []
        self.lidars: list[tuple[str, str]] = []       # (name, topic)
        # (stream, settings, frame): recast for a new model
        self._lidar_streams: list[tuple[_Stream, dict[str, Any], str]] = []
        self.generation = device.snapshot.generation
        if params.sensors:
            self.groups = [g for g in device.sensing.sensor_groups(
                seed=params.sensor_seed if params.sensor_seed >= 0 else None,
                rate=params.sensor_rate or None) if g.enabled]
        tagged = set(declared.sensor_entries(self.model))     # a description's sensors
        tagged_lidars = set(declared.lidar_settings(self.model))
        for g in self.groups:
            build = getattr(self, f'_{g.kind}')(g)
            msg_type = _TYPES[g.kind]
            pub = node.create_publisher(msg_type, g.topic or f'sensors/{g.name}', SENSOR_QOS)
            self.streams.append(_Stream(pub, 1.0 / g.rate, build, grid=g.name in tagged))
        for cfg in device.sensing.lidar_settings(_lidar_entries(params, self.model)).values():
            scanner = device.sensing.lidar(cfg)
            if cfg['frame']:
                frame = self.frames.prefix + cfg['frame']
            elif scanner.site >= 0:
                frame = self.site_frame(scanner.site)
            else:                                   # on a body: a frame of its own name
                frame = self.frames.prefix + cfg['name']
            self._frame_at(scanner.body, scanner.offset_pos, scanner.offset_quat, frame)
            output = scanner.output
            topic = cfg.get('topic') or f'{cfg["name"]}/{output}'
            pub = node.create_publisher(_SCAN_TYPES[output], topic, SENSOR_QOS)
            self.lidars.append((cfg['name'], topic))
            self.streams.append(_Stream(pub, 1.0 / cfg['rate'],
                                        self._scan(scanner, cfg, frame),
                                        grid=cfg['name'] in tagged_lidars))
            self._lidar_streams.append((self.streams[-1], cfg, frame))
        self.contacts = ContactStream(node, device, frames, params)
        self.streams += self.contacts.streams(_Stream)
        self._shortest: float | None = None     # the shortest period of a watched stream
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- set-up -----------------------------------------------------------------------------
    def site_frame(self, site: int) -> str:
        """The TF frame of a site: ``<prefix><site name>`` (``_site`` added if a body has
        that name)."""
        name = mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_SITE, site) or f'site{site}'
        frame = self.frames.prefix + name
        if frame in self.frames.body_frames:
            frame += '_site'
        return frame

    def _frame_of_site(self, site, frame, extra=None):
        """Put ``frame`` on /tf_static at ``site`` (turned by ``extra``, w-first); a frame
        that is a body's (a URDF link a sensor tag names) is the body tree's already."""
        if frame in self.frames.body_frames and extra is None:
            return frame
        m = self.model
        quat = np.array(m.site_quat[site], dtype=float)
        if extra is not None:
            quat = cv.quat_mul(quat, extra)
        return self._frame_at(int(m.site_bodyid[site]), m.site_pos[site], quat, frame)

    def _frame_at(self, body, pos, quat, frame):
        """Put ``frame`` on /tf_static at ``pos``, ``quat`` (w-first) in ``body``; a body's
        own frame is the body tree's already."""
        if frame in self.frames.body_frames:
            return frame
        self._site_frames[frame] = (self.frames.body_frames[body],
                                    np.array(pos, dtype=float), np.array(quat, dtype=float))
        return frame

    def _group_frame(self, g):
        if g.site < 0:
            return self.frames.world
        frame = self.frames.prefix + g.frame if g.frame else self.site_frame(g.site)
        return self._frame_of_site(g.site, frame)

    def static_transforms(self, stamp: Time) -> list[TransformStamped]:
        """Every sensor frame on its body: for the node's one /tf_static message."""
        out = []
        for child, (parent, pos, quat) in self._site_frames.items():
            t = TransformStamped()
            t.header.stamp = stamp
            t.header.frame_id = parent
            t.child_frame_id = child
            t.transform.translation = cv.vector3(pos)
            t.transform.rotation = cv.quat_ros(quat)
            out.append(t)
        return out

    def describe(self) -> list[str]:
        out = [f'{g.topic or "sensors/" + g.name} ({g.kind} @ {g.rate:g} Hz)'
               for g in self.groups]
        out += [topic for _name, topic in self.lidars]
        return out + self.contacts.describe()

    # --- message builders: snapshot -> message (None: nothing to send) ----------------------
    def _reader(self, g):
        def read(snap):
            got = g.read(snap.sensordata, snap.time)
            return got if got is not None else (None, None)
        return read

    def _imu(self, g):
        frame, read = self._group_frame(g), self._reader(g)
        var = g.variances

        def fill(r):
            msg = Imu()
            if 'orientation' in r:
                msg.orientation = cv.quat_ros(r['orientation'])   # site in world
                msg.orientation_covariance = _diag(var.get('orientation', 0.0))
            else:
                msg.orientation_covariance = [-1.0] + [0.0] * 8
            if 'gyro' in r:
                msg.angular_velocity = cv.vector3(r['gyro'])
                msg.angular_velocity_covariance = _diag(var.get('gyro', 0.0))
            else:
                msg.angular_velocity_covariance = [-1.0] + [0.0] * 8
            if 'accel' in r:
                msg.linear_acceleration = cv.vector3(r['accel'])
                msg.linear_acceleration_covariance = _diag(var.get('accel', 0.0))
            else:
                msg.linear_acceleration_covariance = [-1.0] + [0.0] * 8
            return msg
        return _stamped(read, frame, fill)

    def _wrench(self, g):
        frame, read = self._group_frame(g), self._reader(g)

        def fill(r):
            msg = WrenchStamped()
            if 'force' in r:
                msg.wrench.force = cv.vector3(r['force'])
            if 'torque' in r:
                msg.wrench.torque = cv.vector3(r['torque'])
            return msg
        return _stamped(read, frame, fill)

    def _range(self, g):
        # the device file's frame as given, else <site>_range: x along the beam either way
        name = self.frames.prefix + g.frame if g.frame else f'{self.site_frame(g.site)}_range'
        frame = self._frame_of_site(g.site, name, Q_RANGE)
        read = self._reader(g)
        sid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SENSOR, g.parts[0].sensor)
        cutoff = float(self.model.sensor_cutoff[sid]) if sid >= 0 else 0.0
        top = cutoff if cutoff > 0 else math.inf

        def fill(r):
            d = float(r['range'][0])
            return Range(radiation_type=Range.INFRARED, field_of_view=0.0, min_range=0.0,
                         max_range=top, range=d if 0 <= d <= top else math.inf)
        return _stamped(read, frame, fill)

    def _touch(self, g):
        frame, read = self._group_frame(g), self._reader(g)

        def fill(r):
            force = float(r['force'][0])
            return Touch(contact=force > 0.0, force=force)
        return _stamped(read, frame, fill)

    def _pose(self, g):
        read = self._reader(g)
        world = self.frames.world

        def fill(r):
            msg = PoseStamped()
            msg.pose.position = cv.point(r.get('position', np.zeros(3)))
            msg.pose.orientation = cv.quat_ros(r.get('orientation', np.array([1.0, 0, 0, 0])))
            return msg
        return _stamped(read, world, fill)

    def _joints(self, g):
        read = self._reader(g)
        names = list(dict.fromkeys(p.target for p in g.parts))
        roles = {p.role for p in g.parts}

        def build(snap):
            t, r = read(snap)
            if r is None:
                return None
            msg = JointState(name=names)
            msg.header.stamp = cv.stamp(t)
            for role in ('position', 'velocity', 'effort'):
                if role in roles:
                    setattr(msg, role, [float(r[(role, n)][0]) if (role, n) in r
                                        else math.nan for n in names])
            return msg
        return build

    _actuators = _joints

    def _generic(self, g):
        read = self._reader(g)
        sid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SENSOR, g.parts[0].sensor)
        kind = mujoco.mjtSensor(int(self.model.sensor_type[sid])).name[len('mjSENS_'):].lower()
        frame = self._group_frame(g)

        def fill(r):
            return SensorReading(name=g.name, type=kind, data=cv.doubles(r['data']))
        return _stamped(read, frame, fill)

    def _scan(self, scanner, cfg, frame):
        pat = scanner.pattern

        def build(snap):
            scan = scanner.scan(snap)
            if scan is None:          # its noise model dropped this one
                return None
            st = cv.stamp(scan.time)
            if scanner.output == 'range':       # a sonar's or ranger's nearest return
                msg = Range(radiation_type=Range.ULTRASOUND if cfg.get('radiation') ==
                            'ultrasound' else Range.INFRARED,
                            field_of_view=float(cfg['fov']),
                            min_range=float(cfg['range_min']),
                            max_range=float(cfg['range_max']),
                            range=float(np.min(scan.ranges)))
                msg.header.stamp, msg.header.frame_id = st, frame
                return msg
            if scanner.output == 'scan':
                msg = LaserScan()
                msg.header.stamp, msg.header.frame_id = st, frame
                msg.angle_min, msg.angle_max = float(pat.azimuths[0]), float(pat.azimuths[-1])
                msg.angle_increment = float(pat.azimuths[1] - pat.azimuths[0]) \
                    if len(pat.azimuths) > 1 else 0.0
                msg.time_increment = 0.0
                msg.scan_time = 1.0 / cfg['rate']
                msg.range_min, msg.range_max = float(cfg['range_min']), float(cfg['range_max'])
                msg.ranges = scan.ranges.astype(np.float32).tolist()
                return msg
            pts = np.ascontiguousarray(scan.points, dtype='<f4')
            return cloud_msg(pts.tobytes(), len(pat.elevations), len(pat.azimuths), st, frame,
                             dense=bool(np.isfinite(pts).all()))
        return build

    # --- the loop ---------------------------------------------------------------------------
    def start(self) -> None:
        if not self.streams:
            return
        self._thread = threading.Thread(target=self._run, name='sim_node-sensors', daemon=True)
        self._thread.start()

    @property
    def native_id(self) -> int | None:
        """The sensor thread's OS id (for CPU accounting), None before it starts."""
        return self._thread.native_id if self._thread is not None else None

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self.contacts.stop()

    def _count(self):
        for s in self.streams:
            s.wanted = s.pub.get_subscription_count() > 0
        self._shortest = min((s.period for s in self.streams if s.wanted), default=None)
        self.contacts.wanted_changed()

    def _run(self):
        # Periods are simulated time; the thread wakes twice per shortest period at the
        # speed the simulation runs now (measured: at rtf 0 that is many times real time),
        # at most MAX_WAKE_HZ, and every STOP_POLL_S while paused. A short slice wakes it on
        # time on a busy machine, as the state thread (sched.py; nothing with the fast
        # paths off).
        sched.short_slice()
        period = STOP_POLL_S
        deadline = time.monotonic()
        next_count = 0.0
        last = None                               # (wall, sim) half a second ago
        while not self._stop.is_set():
            now = time.monotonic()
            if deadline > now:
                time.sleep(min(deadline - now, STOP_POLL_S))
                continue
            try:
                snap = self.device.snapshot
                if last is None or now - last[0] > 0.5:
                    if last is not None:
                        speed = (snap.time - last[1]) / (now - last[0])
                        shortest = self._shortest      # of the streams someone reads
                        period = STOP_POLL_S if speed <= 0 or shortest is None else min(
                            STOP_POLL_S, max(1.0 / MAX_WAKE_HZ, 0.5 * shortest / speed))
                    last = (now, snap.time)
                deadline = max(deadline + period, now - 4 * period)
                if now >= next_count:
                    next_count = now + SUBSCRIBER_POLL_S
                    self._count()
                self._publish(snap)
            except Exception as err:  # noqa: BLE001 - a shut-down context ends the loop
                if self._stop.is_set():
                    break
                self.errors += 1
                if self.errors <= 3:
                    self.logger.error(f'sensor publisher: {type(err).__name__}: {err}')

    def _follow(self, snap):
        """A scene edit swapped the model: lidars cast into the new one and contacts name
        its bodies; the sensor streams go on while their sensors kept their addresses,
        else they stop (said once)."""
        model = self.device.cameras.model_of(snap.generation)
        if self.groups and scene_edit.renumbered(self.model, model):
            self.logger.info('sensors: the new scene renumbered the model\'s sensors; their '
                             'topics stop until sim_node restarts')
            gone = {id(s) for s in self.streams[:len(self.groups)]}
            self.streams = [s for s in self.streams if id(s) not in gone]
            self.groups = []
        for stream, cfg, frame in self._lidar_streams:
            try:
                stream.build = self._scan(self.device.sensing.lidar(cfg), cfg, frame)
            except DeviceError as err:
                self.logger.info(f'lidar {cfg["name"]}: not in the new scene ({err}); it '
                                 'stops')
                self.streams = [s for s in self.streams if s is not stream]
        self._lidar_streams = [e for e in self._lidar_streams if e[0] in self.streams]
        self.contacts.follow(model)
        self.model = model
        self.generation = snap.generation

    def _publish(self, snap):
        if snap.generation != self.generation:
            self._follow(snap)
        t = snap.time
        for s in self.streams:
            if not s.wanted or not s.due(t):
                continue
            msg = s.build(snap)
            if msg is not None:
                s.pub.publish(msg)
                s.sent += 1


def _lidar_entries(params, model):
    """The ``lidars`` parameter's NAME=SITE entries as lidar settings; a name that is no
    site but a body puts the scanner at that body's origin, along its axes."""
    out = {}
    for entry in params.lidars:
        name, _, site = entry.partition('=')
        if not site:
            name, site = entry, entry
        site = site.strip()
        mount = 'body' if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, site) < 0 and \
            mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, site) >= 0 else 'site'
        out[name.strip()] = {mount: site, 'rays': params.lidar_rays,
                             'rate': params.lidar_rate, 'range_max': params.lidar_range}
    return out


def _diag(variance):
    return [variance, 0.0, 0.0, 0.0, variance, 0.0, 0.0, 0.0, variance]


def cloud_msg(data: bytes, height: int, width: int, stamp: Time, frame: str,
              rgb: bool = False, dense: bool = False) -> PointCloud2:
    """An organized PointCloud2 of packed float32 points: x, y, z (12 bytes a point) or
    with ``rgb`` x, y, z, rgb (``pointcloud.POINT_STEP``)."""
    from ...sensors.pointcloud import POINT_STEP
    msg = PointCloud2()
    msg.header.stamp, msg.header.frame_id = stamp, frame
    msg.height, msg.width = int(height), int(width)
    names = ['x', 'y', 'z'] + (['rgb'] if rgb else [])
    msg.fields = [PointField(name=n, offset=4 * i, datatype=PointField.FLOAT32, count=1)
                  for i, n in enumerate(names)]
    msg.is_bigendian = False
    msg.point_step = POINT_STEP if rgb else 12
    msg.row_step = msg.point_step * msg.width
    msg.data = data
    msg.is_dense = bool(dense)
    return msg


_SCAN_TYPES = {'scan': LaserScan, 'points': PointCloud2, 'range': Range}
_TYPES = {'imu': Imu, 'wrench': WrenchStamped, 'range': Range, 'touch': Touch,
          'pose': PoseStamped, 'joints': JointState, 'actuators': JointState,
          'generic': SensorReading}
