"""sim_node on a URDF's own Gazebo sensor tags, in-process: test/models/tb3_sensors.urdf (a
TurtleBot3 Waffle-like base: LDS lidar ``~/out:=scan``, IMU ``~/out:=imu``, a depth camera
``camera`` in ``camera_rgb_optical_frame``) inside test/models/sensor_walls.xml. Each
sensor is judged on the topic and frame the tag gives, against geometry and /tf_static:
the scan against the walls' distances, a depth pixel through camera_info and the optical
frame's /tf chain against the wall, the IMU against gravity."""

import math
import os

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from helpers import SpunNodes, wait_for  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, Imu, LaserScan  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from mujoco_hal_ros.render import gl  # noqa: E402
from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402  (sets headless GL first)

MODELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'models')
URDF = os.path.join(MODELS, 'tb3_sensors.urdf')
WALLS = os.path.join(MODELS, 'sensor_walls.xml')
WALL_X, WALL_Y = (1.5, -1.2), (1.0, -0.8)
G = 9.81
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
needs_gl = pytest.mark.skipif(gl.probe() is not None, reason='no headless GL')


class Tb3(SpunNodes):
    def __init__(self, overrides):
        super().__init__(lambda ctx: [
            SimNode(context=ctx, parameter_overrides=[
                Parameter(k, value=v) for k, v in overrides.items()]),
            rclpy.create_node('urdf_sensors_client', context=ctx)],
            lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
        self.node, self.client = self.nodes
        self.device = self.node.device
        self.spin(150.0)

    def collect(self, msg_type, topic, count=2, qos=10, timeout=30.0):
        got = []
        sub = self.client.create_subscription(msg_type, topic, got.append, qos)
        try:
            wait_for(lambda: len(got) >= count, timeout)
        finally:
            self.client.destroy_subscription(sub)
        assert len(got) >= count, f'{topic}: {len(got)} messages of {count}'
        return got

    def tf_static(self, wanted):
        frames = {}

        def merge(msg):
            frames.update({t.child_frame_id: t for t in msg.transforms})
        sub = self.client.create_subscription(TFMessage, '/tf_static', merge, LATCHED)
        try:
            wait_for(lambda: set(wanted) <= set(frames), 15.0)
        finally:
            self.client.destroy_subscription(sub)
        return frames


@pytest.fixture(scope='module')
def tb3():
    # bolted down: the scan and the depth pixel are judged against walls at known distances
    # from where the base stands, through /tf_static alone (with base:=auto its wheels free
    # the base, which then hangs from odom on /tf)
    r = Tb3({'robot_description': URDF, 'scene': WALLS, 'trajectory_controller': '',
             'base': 'fixed'})
    try:
        yield r
    finally:
        r.close()


def quat_matrix(q):
    w, x, y, z = q.w, q.x, q.y, q.z
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def world_pose(frames, frame):
    """(position, rotation) of ``frame`` in the world, composed along /tf_static."""
    pos, rot = np.zeros(3), np.eye(3)
    while frame in frames:
        t = frames[frame]
        tr = t.transform.translation
        r = quat_matrix(t.transform.rotation)
        pos = r @ pos + np.array([tr.x, tr.y, tr.z])
        rot = r @ rot
        frame = t.header.frame_id
    assert frame == 'world', frame
    return pos, rot


def expected_range(origin, azimuth):
    c, s = math.cos(azimuth), math.sin(azimuth)
    hits = [(x - origin[0]) / c for x in WALL_X if abs(c) > 1e-9 and (x - origin[0]) / c > 0]
    hits += [(y - origin[1]) / s for y in WALL_Y if abs(s) > 1e-9 and (y - origin[1]) / s > 0]
    return min(hits)


def test_scan_on_the_tag_topic_and_frame_matches_the_walls(tb3):
    scan = tb3.collect(LaserScan, '/scan')[-1]
    assert scan.header.frame_id == 'base_scan' and len(scan.ranges) == 360
    assert scan.angle_min == pytest.approx(0.0) and scan.angle_max == pytest.approx(6.28)
    assert (scan.range_min, scan.range_max) == (pytest.approx(0.12), pytest.approx(3.5))
    frames = tb3.tf_static(['base_scan'])
    origin, rot = world_pose(frames, 'base_scan')
    angles = scan.angle_min + scan.angle_increment * np.arange(len(scan.ranges))
    for a, r in zip(angles, scan.ranges, strict=True):
        direction = rot @ np.array([math.cos(a), math.sin(a), 0.0])
        want = expected_range(origin, math.atan2(direction[1], direction[0]))
        if want > 3.5:
            assert math.isinf(r)
        else:
            assert abs(r - want) < 0.02, (a, r, want)


def test_imu_on_the_tag_topic_reads_gravity(tb3):
    imu = tb3.collect(Imu, '/imu', count=3)[-1]
    assert imu.header.frame_id == 'imu_link'
    a = imu.linear_acceleration
    assert math.dist((a.x, a.y, a.z), (0.0, 0.0, G)) < 0.05


@needs_gl
def test_depth_pixel_through_camera_info_and_tf_reads_the_wall(tb3):
    depth = tb3.collect(Image, 'camera/depth/image_raw', count=1, timeout=60.0)[-1]
    info = tb3.collect(CameraInfo, 'camera/camera_info', count=1, timeout=60.0)[-1]
    rgb = tb3.collect(Image, 'camera/image_raw', count=1, timeout=60.0)[-1]
    for msg in (depth, info, rgb):
        assert msg.header.frame_id == 'camera_rgb_optical_frame'
    assert (rgb.width, rgb.height, depth.encoding) == (80, 60, '32FC1')
    frames = tb3.tf_static(['camera_rgb_optical_frame'])
    assert frames['camera_rgb_optical_frame'].header.frame_id == 'camera_rgb_frame'
    pos, rot = world_pose(frames, 'camera_rgb_optical_frame')
    z_img = np.frombuffer(bytes(depth.data), dtype='<f4').reshape(depth.height, depth.width)
    fx, cx, fy, cy = info.k[0], info.k[2], info.k[4], info.k[5]
    u, v = 40, 20                          # above the horizon: the front wall
    z = float(z_img[v, u])
    point = pos + rot @ np.array([(u - cx) / fx * z, (v - cy) / fy * z, z])
    assert abs(point[0] - WALL_X[0]) < 0.005, point


ROVER = '''<mujoco model="rover">
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1"/>
    <geom name="floor" type="plane" size="0 0 0.05"/>
    <geom name="wall_front" type="box" pos="1.55 0 0.5" size="0.05 3 0.5"/>
    <body name="rover" pos="0 0 0.1"><joint name="lift" type="slide" axis="0 0 1"
      range="-0.05 0.5"/><geom type="box" size="0.1 0.1 0.05"/></body>
  </worldbody>
  <actuator><position name="lift" joint="lift" kp="100" ctrlrange="-0.05 0.5"/></actuator>
</mujoco>'''


def test_device_file_camera_and_body_lidar_on_an_mjcf(tmp_path):
    """The same for MJCF users: a device file's cameras: and lidars: entries on a body
    publish as a tag's would, from frames on /tf_static under that body."""
    (tmp_path / 'rover.xml').write_text(ROVER)
    (tmp_path / 'rover.yaml').write_text(
        'device: rover\nconnect: {model: rover.xml}\nwrite:\n  lift: {map: {actuator: lift}}\n'
        'cameras:\n  front: {body: rover, pos: [0, 0, 0.2], width: 64, height: 48, '
        'depth: true, rate: 5}\n'
        'lidars:\n  around: {body: rover, pos: [0, 0, 0.3], range_max: 3}\n')
    run = Tb3({'device_file': str(tmp_path / 'rover.yaml'), 'trajectory_controller': ''})
    try:
        frames = run.tf_static(['front_optical_frame', 'around'])
        assert frames['front_optical_frame'].header.frame_id == 'rover'
        assert frames['around'].header.frame_id == 'rover'
        assert frames['around'].transform.translation.z == pytest.approx(0.3)
        scan = run.collect(LaserScan, 'around/scan')[-1]
        i = int(round((0.0 - scan.angle_min) / scan.angle_increment))
        # from the lidar at x = 0 straight ahead to the wall's face at x = 1.5
        assert scan.header.frame_id == 'around'
        assert scan.ranges[i] == pytest.approx(1.5, abs=0.02)
        if gl.probe() is None:
            info = run.collect(CameraInfo, 'front/camera_info', count=1, timeout=60.0)[-1]
            assert info.header.frame_id == 'front_optical_frame' and info.width == 64
    finally:
        run.close()


RANGER = '''<robot name="ranger">
  <link name="base_link"><collision><geometry><box size="0.2 0.2 0.1"/></geometry></collision>
    <inertial><mass value="2"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0"
      iyz="0"/></inertial></link>
  <joint name="sonar_joint" type="fixed"><parent link="base_link"/><child link="sonar_link"/>
    <origin xyz="0.1 0 0.2"/></joint>
  <link name="sonar_link"/>
  <gazebo reference="sonar_link"><sensor type="ray" name="front_sonar">
    <update_rate>10</update_rate>
    <ray><scan><horizontal><samples>5</samples><min_angle>-0.2</min_angle>
      <max_angle>0.2</max_angle></horizontal></scan>
      <range><min>0.03</min><max>3.0</max></range></ray>
    <plugin name="front_sonar" filename="libgazebo_ros_ray_sensor.so">
      <ros><remapping>~/out:=sonar_front</remapping></ros>
      <output_type>sensor_msgs/Range</output_type>
      <radiation_type>ultrasound</radiation_type></plugin></sensor></gazebo>
</robot>'''


def test_a_ray_sensor_as_range_reads_the_nearest_wall(tmp_path):
    from sensor_msgs.msg import Range
    (tmp_path / 'ranger.urdf').write_text(RANGER)
    run = Tb3({'robot_description': str(tmp_path / 'ranger.urdf'), 'scene': WALLS,
               'trajectory_controller': '', 'base': 'fixed'})
    try:
        msg = run.collect(Range, 'sonar_front')[-1]
        assert msg.header.frame_id == 'sonar_link' and msg.radiation_type == Range.ULTRASOUND
        assert msg.field_of_view == pytest.approx(0.4)
        # from x = 0.1 straight ahead (the central ray is the nearest) to the wall at 1.5
        assert msg.range == pytest.approx(1.4, abs=0.02)
    finally:
        run.close()
