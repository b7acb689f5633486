"""sim_node's sensor streams in-process on test/models/sensor_rig.xml: every message type
with simulated stamps and the right frames, on /tf_static where they are sites, and
apply_wrench / clear_wrenches through the services."""

import math
import time

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from helpers import SpunNodes, wait_for  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile  # noqa: E402
from sensor_msgs.msg import (  # noqa: E402
    CompressedImage,
    Imu,
    JointState,
    LaserScan,
    PointCloud2,
    Range,
)
from tf2_msgs.msg import TFMessage  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

from mujoco_hal_ros.msg import Contacts, SensorReading, Touch  # noqa: E402
from mujoco_hal_ros.render import gl  # noqa: E402
from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402  (sets headless GL first)
from mujoco_hal_ros.sensors import compress  # noqa: E402
from mujoco_hal_ros.srv import ApplyWrench, ClearWrenches  # noqa: E402

RIG = __file__.rsplit('/node/', 1)[0] + '/models/sensor_rig.xml'
G = 9.81
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
needs_gl = pytest.mark.skipif(gl.probe() is not None, reason='no headless GL')


class Rig(SpunNodes):
    def __init__(self, overrides):
        super().__init__(lambda ctx: [
            SimNode(context=ctx, parameter_overrides=[
                Parameter(k, value=v) for k, v in overrides.items()]),
            rclpy.create_node('sensors_test_client', context=ctx)],
            lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
        self.node, self.client = self.nodes
        self.device = self.node.device
        self.spin(150.0)

    def collect(self, msg_type, topic, count=3, qos=10, timeout=15.0):
        got = []
        sub = self.client.create_subscription(msg_type, topic, got.append, qos)
        try:
            wait_for(lambda: len(got) >= count, timeout)
        finally:
            self.client.destroy_subscription(sub)
        assert len(got) >= count, f'{topic}: {len(got)} messages of {count}'
        return got


@pytest.fixture(scope='module')
def rig():
    r = Rig({'model': RIG, 'lidars': ['front=lidar'], 'depth': ['down'],
             'camera_width': 80, 'camera_height': 60, 'camera_rate': 5.0,
             'contact_markers': True, 'sensor_rate': 50.0, 'trajectory_controller': ''})
    try:
        yield r
    finally:
        r.close()


def stamp_s(t):
    return t.sec + t.nanosec * 1e-9


def assert_sim_stamps(rig, msgs):
    now = rig.device.snapshot.time
    stamps = [stamp_s(m.header.stamp) for m in msgs]
    assert all(0 < s <= now + 1e-9 for s in stamps)
    assert stamps == sorted(stamps)


def test_sensor_frames_are_on_tf_static(rig):
    # /tf_static is the union of every latched publisher's last message (as tf2 reads it);
    # wait until this node's has arrived rather than taking whichever came first.
    frames = {}

    def merge(msg):
        frames.update({t.child_frame_id: t.header.frame_id for t in msg.transforms})
    sub = rig.client.create_subscription(TFMessage, '/tf_static', merge, LATCHED)
    try:
        wait_for(lambda: {'block_imu', 'ft', 'range_site_range', 'lidar'} <= set(frames), 15.0)
    finally:
        rig.client.destroy_subscription(sub)
    assert frames.get('block_imu') == 'block' and frames.get('ft') == 'payload', frames
    assert frames.get('range_site_range') == 'range_post', frames
    assert frames.get('lidar') == 'scanner', frames


def test_imu_reads_gravity_with_covariances(rig):
    msgs = rig.collect(Imu, 'sensors/block_imu', count=5)
    assert_sim_stamps(rig, msgs)
    m = msgs[-1]
    assert m.header.frame_id == 'block_imu'
    assert m.linear_acceleration.z == pytest.approx(G, abs=0.05)
    assert m.orientation_covariance[0] == -1.0                    # no framequat
    assert m.angular_velocity_covariance[0] == pytest.approx(1e-6)   # noise="0.001"
    assert m.linear_acceleration_covariance[0] == 0.0
    period = np.diff([stamp_s(x.header.stamp) for x in msgs])
    assert np.all(period >= 0.02 - 1e-6)                         # sensor_rate 50 Hz


def test_wrench_range_touch_and_generic(rig):
    ft = rig.collect(WrenchStamped, 'sensors/ft')[-1]
    assert ft.header.frame_id == 'ft'
    assert ft.wrench.force.z == pytest.approx(2 * G, rel=1e-3)
    rng = rig.collect(Range, 'sensors/range')[-1]
    assert rng.header.frame_id == 'range_site_range' and rng.range == pytest.approx(1.0)
    touch = rig.collect(Touch, 'sensors/pad_touch')[-1]
    assert touch.contact and touch.force == pytest.approx(1.5 * G, rel=1e-2)
    clock = rig.collect(SensorReading, 'sensors/clock')[-1]
    assert clock.type == 'clock' and clock.data[0] == pytest.approx(
        stamp_s(clock.header.stamp), abs=0.01)


def test_joint_and_actuator_sensors_as_joint_states(rig):
    js = rig.collect(JointState, 'sensors/joint_states')[-1]
    assert list(js.name) == ['swing'] and len(js.position) == len(js.velocity) == 1
    assert not js.effort and abs(js.position[0]) < 1e-3
    acts = rig.collect(JointState, 'sensors/actuator_states')[-1]
    assert list(acts.name) == ['swing_motor'] and list(acts.effort) == [0.0]


def test_lidar_scan(rig):
    scans = rig.collect(LaserScan, 'front/scan', count=2)
    assert_sim_stamps(rig, scans)
    s = scans[-1]
    assert s.header.frame_id == 'lidar' and len(s.ranges) == 360
    i = int(round((0.0 - s.angle_min) / s.angle_increment))
    assert s.ranges[i] == pytest.approx(2.0, abs=1e-4)
    assert math.isinf(s.ranges[0])                    # behind: its own arm is excluded


def test_contacts_and_markers(rig):
    msgs = rig.collect(Contacts, 'contacts', count=2)
    assert_sim_stamps(rig, msgs)
    on_block = [c for c in msgs[-1].contacts if 'block' in (c.body1, c.body2)]
    assert len(on_block) == 4
    assert sum(c.force.z for c in on_block) == pytest.approx(1.5 * G, rel=1e-2)
    markers = rig.collect(MarkerArray, 'contact_markers', count=1)[-1]
    assert len(markers.markers) >= 5                     # DELETEALL + an arrow per contact


@needs_gl
def test_points_and_compressed_images(rig):
    clouds = rig.collect(PointCloud2, 'down/points', count=1, timeout=30.0)
    c = clouds[-1]
    assert (c.height, c.width, c.point_step) == (60, 80, 16)
    assert c.header.frame_id == 'down_optical_frame'
    pts = np.frombuffer(bytes(c.data), dtype='<f4').reshape(60, 80, 4)[..., :3]
    assert np.abs(pts[..., 2] - 1.0).max() < 1e-3
    jpg = rig.collect(CompressedImage, 'down/image_raw/compressed', count=1, timeout=30.0)[-1]
    assert jpg.format == 'rgb8; jpeg compressed bgr8'
    assert compress.decode(bytes(jpg.data)).shape == (60, 80, 3)
    depth = rig.collect(CompressedImage, 'down/depth/image_raw/compressedDepth', count=1,
                        timeout=30.0)[-1]
    assert depth.format == '32FC1; compressedDepth png'
    assert np.nanmax(np.abs(compress.decode_depth(bytes(depth.data)) - 1.0)) < 1e-3


def test_apply_wrench_through_the_service(rig):
    req = ApplyWrench.Request(body='puck', duration=0.0)
    req.force.z = float('nan')
    res = rig.call(ApplyWrench, 'apply_wrench', req)
    assert not res.success and res.code == 'INVALID_ARGUMENT'
    res = rig.call(ApplyWrench, 'apply_wrench', ApplyWrench.Request(body='nobody'))
    assert res.code == 'UNKNOWN_NAME' and 'puck' in res.message
    assert rig.device.sensing.wrenches() == ()
    req = ApplyWrench.Request(body='puck', duration=0.0)
    req.force.z = G * 1.0                                       # floats the 1 kg puck
    res = rig.call(ApplyWrench, 'apply_wrench', req)
    assert res.success and math.isinf(res.end_time)
    time.sleep(0.2)
    v0 = rig.device.snapshot.qvel[8]
    time.sleep(0.3)
    assert rig.device.snapshot.qvel[8] == pytest.approx(v0, abs=1e-6)
    markers = rig.collect(MarkerArray, 'wrench_markers', count=1)[-1]
    assert any(m.ns == 'wrenches' for m in markers.markers)
    res = rig.call(ClearWrenches, 'clear_wrenches', ClearWrenches.Request(bodies=['nobody']))
    assert res.code == 'UNKNOWN_NAME' and len(rig.device.sensing.wrenches()) == 1
    res = rig.call(ClearWrenches, 'clear_wrenches', ClearWrenches.Request())
    assert res.success and list(res.cleared) == ['puck'] and rig.device.sensing.wrenches() == ()
