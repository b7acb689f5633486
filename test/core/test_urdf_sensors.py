"""Sensors a URDF declares (Gazebo tags, ros2_control), read and served without ROS.

Two halves. The parser (``description.gazebo_sensors``) on tags written the way real
robots' descriptions write them (TurtleBot3, Clearpath, TIAGo, Fetch) and on hostile
input: every field read, every unsupported thing noted, every number bounded. Then the
sensor tier: ``test/models/tb3_sensors.urdf`` (a TurtleBot3 Waffle-like base with its
360-beam LDS lidar, IMU and a depth camera as ``<gazebo>`` tags) inside the known walls
of ``test/models/sensor_walls.xml``: lidar ranges against the walls' distances from
geometry, a depth pixel through the intrinsics and the optical frame's pose against the
wall, the IMU at rest against gravity.
"""

import math
import os
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.config import sensor_settings as settings
from mujoco_hal_ros.description import gazebo_sensors as gs
from mujoco_hal_ros.description.sensor_mounts import camera_quat
from mujoco_hal_ros.description.urdf_in import model_from_urdf
from mujoco_hal_ros.errors import ConfigError
from mujoco_hal_ros.render import gl
from mujoco_hal_ros.sensors import declared

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
URDF = os.path.join(HERE, 'models', 'tb3_sensors.urdf')
WALLS = os.path.join(HERE, 'models', 'sensor_walls.xml')
WALL_X = (1.5, -1.2)         # inner faces of sensor_walls.xml
WALL_Y = (1.0, -0.8)
G = 9.81
GL_PROBLEM = gl.probe()
needs_gl = pytest.mark.skipif(GL_PROBLEM is not None, reason=f'no headless GL: {GL_PROBLEM}')


def robot(body, links=('base_link', 'laser', 'imu_link', 'camera_link', 'tool0'), extra=''):
    joints = ''.join(f'<joint name="j{i}" type="fixed"><parent link="base_link"/>'
                     f'<child link="{ln}"/></joint>' for i, ln in enumerate(links[1:]))
    return (f'<robot name="r">{"".join(f"<link name={chr(34)}{ln}{chr(34)}/>" for ln in links)}'
            f'{joints}{body}{extra}</robot>')


def parse(body, **kw):
    return gs.parse(ET.fromstring(robot(body, **kw)))


def one(body, **kw):
    decls, notes = parse(body, **kw)
    assert len(decls) == 1, notes
    return decls[0], notes


# --- the parser on real descriptions' tags ----------------------------------------------------
def test_turtlebot3_description_all_three_sensors():
    decls, notes = gs.parse_text(open(URDF).read())
    by = {d.name: d for d in decls}
    lds = by['hls_lfcd_lds']
    assert (lds.kind, lds.link, lds.frame, lds.rate) == ('lidar', 'base_scan', 'base_scan', 5.0)
    assert lds.topics == {'scan': 'scan'}          # ~/out:=scan, LaserScan
    assert (lds.samples, lds.min_angle, lds.max_angle) == (360, 0.0, 6.28)
    assert (lds.range_min, lds.range_max) == (0.12, 3.5)
    imu = by['tb3_imu']
    assert (imu.kind, imu.link, imu.topics, imu.rate) == ('imu', 'imu_link', {'imu': 'imu'},
                                                          200.0)
    cam = by['intel_realsense_r200']
    assert cam.kind == 'depth' and cam.frame == 'camera_rgb_optical_frame'
    assert cam.topics == {'image': 'camera/image_raw', 'info': 'camera/camera_info',
                          'depth': 'camera/depth/image_raw',
                          'depth_info': 'camera/depth/camera_info', 'points': 'camera/points'}
    assert (cam.width, cam.height, cam.horizontal_fov) == (80, 60, 1.02974)
    # what is not used is said: the surface material, the stereo baseline, min_depth
    assert any('<material>' in n for n in notes)
    assert any('hack_baseline' in n and 'min_depth' in n for n in notes)


def test_turtlebot3_ros1_gazebo_xacro_style():
    """The ROS 1 TurtleBot3 Gazebo description's way: an IMU <sensor> without a plugin (no
    ROS topic in Gazebo either) beside a libgazebo_ros_imu model plugin that publishes
    ``imu``; the LDS through libgazebo_ros_laser with a plugin-level update_rate it does
    not read; the R200 through openni_kinect with topics under <cameraName>."""
    decls, notes = parse('''
    <gazebo reference="imu_link"><sensor type="imu" name="imu">
      <always_on>true</always_on><visualize>false</visualize></sensor></gazebo>
    <gazebo><plugin name="imu_plugin" filename="libgazebo_ros_imu.so">
      <alwaysOn>true</alwaysOn><bodyName>imu_link</bodyName><topicName>imu</topicName>
      <serviceName>imu_service</serviceName><gaussianNoise>0.0</gaussianNoise>
      <updateRate>200</updateRate></plugin></gazebo>
    <gazebo reference="laser"><sensor type="ray" name="lds_lfcd_sensor">
      <pose>0 0 0 0 0 0</pose><visualize>false</visualize>
      <ray><scan><horizontal><samples>360</samples><resolution>1</resolution>
        <min_angle>0.0</min_angle><max_angle>6.28319</max_angle></horizontal></scan>
        <range><min>0.120</min><max>3.5</max><resolution>0.015</resolution></range>
        <noise><type>gaussian</type><mean>0.0</mean><stddev>0.01</stddev></noise></ray>
      <plugin name="lds_controller" filename="libgazebo_ros_laser.so">
        <topicName>scan</topicName><frameName>base_scan</frameName>
        <update_rate>1800</update_rate></plugin></sensor></gazebo>
    <gazebo reference="camera_link"><sensor type="depth" name="realsense_R200">
      <camera><horizontal_fov>1.3439</horizontal_fov>
        <image><width>1920</width><height>1080</height><format>R8G8B8</format></image>
        <depth_camera></depth_camera><clip><near>0.03</near><far>100</far></clip></camera>
      <plugin name="camera_controller" filename="libgazebo_ros_openni_kinect.so">
        <updateRate>30.0</updateRate><cameraName>camera</cameraName>
        <frameName>camera_rgb_optical_frame</frameName>
        <imageTopicName>rgb/image_raw</imageTopicName>
        <depthImageTopicName>depth/image_raw</depthImageTopicName>
        <pointCloudTopicName>depth/points</pointCloudTopicName>
        <cameraInfoTopicName>rgb/camera_info</cameraInfoTopicName>
        <depthImageCameraInfoTopicName>depth/camera_info</depthImageCameraInfoTopicName>
        <pointCloudCutoff>0.4</pointCloudCutoff></plugin></sensor></gazebo>''')
    by = {d.name: d for d in decls}
    assert set(by) == {'imu_plugin', 'lds_lfcd_sensor', 'realsense_R200'}
    assert by['imu_plugin'].topics == {'imu': 'imu'} and by['imu_plugin'].rate == 200.0
    lds = by['lds_lfcd_sensor']
    assert lds.topics == {'scan': 'scan'} and lds.frame == 'base_scan'
    assert lds.rate == gs.DEFAULT_RATE['lidar']
    cam = by['realsense_R200']
    assert cam.topics == {'image': 'camera/rgb/image_raw', 'info': 'camera/rgb/camera_info',
                          'depth': 'camera/depth/image_raw',
                          'depth_info': 'camera/depth/camera_info',
                          'points': 'camera/depth/points'}
    assert (cam.width, cam.height, cam.rate) == (1920, 1080, 30.0)
    text = '\n'.join(notes)
    for said in ('sensor imu on imu_link: no ROS plugin', 'no <update_rate>',
                 '<update_rate>', '<pointCloudCutoff>'):
        assert said in text, said


def test_fetch_ros1_laser_and_kinect_names():
    """Fetch's description: ROS 1 plugins with <topicName>, <frameName>, openni_kinect's
    topics under <cameraName>."""
    body = '''
    <gazebo reference="laser">
      <sensor type="ray" name="base_laser">
        <pose>0 0 0 0 0 0</pose><visualize>false</visualize><update_rate>15</update_rate>
        <ray><scan><horizontal><samples>662</samples><resolution>1</resolution>
          <min_angle>-1.91986</min_angle><max_angle>1.91986</max_angle></horizontal></scan>
          <range><min>0.05</min><max>25.0</max><resolution>0.01</resolution></range>
          <noise><type>gaussian</type><mean>0.0</mean><stddev>0.01</stddev></noise></ray>
        <plugin name="base_laser" filename="libgazebo_ros_laser.so">
          <topicName>/base_scan</topicName><frameName>laser</frameName></plugin>
      </sensor>
    </gazebo>
    <gazebo reference="camera_link">
      <sensor type="depth" name="head_camera">
        <always_on>true</always_on><update_rate>15.0</update_rate>
        <camera><horizontal_fov>1.047197</horizontal_fov>
          <image><format>R8G8B8</format><width>640</width><height>480</height></image>
          <clip><near>0.35</near><far>4.5</far></clip></camera>
        <plugin name="kinect_controller" filename="libgazebo_ros_openni_kinect.so">
          <alwaysOn>true</alwaysOn><updateRate>15.0</updateRate>
          <cameraName>head_camera</cameraName>
          <imageTopicName>/head_camera/rgb/image_raw</imageTopicName>
          <cameraInfoTopicName>/head_camera/rgb/camera_info</cameraInfoTopicName>
          <depthImageTopicName>/head_camera/depth_registered/image_raw</depthImageTopicName>
          <depthImageCameraInfoTopicName>/head_camera/depth_registered/camera_info
          </depthImageCameraInfoTopicName>
          <pointCloudTopicName>/head_camera/depth_registered/points</pointCloudTopicName>
          <frameName>head_camera_rgb_optical_frame</frameName>
        </plugin>
      </sensor>
    </gazebo>'''
    decls, notes = parse(body)
    laser, cam = decls
    assert laser.topics == {'scan': '/base_scan'} and laser.frame == 'laser'
    assert laser.samples == 662 and laser.noise['range'] == gs.Gaussian(0.0, 0.01)
    assert cam.kind == 'depth' and cam.frame == 'head_camera_rgb_optical_frame'
    assert cam.topics['image'] == '/head_camera/rgb/image_raw'
    assert cam.topics['depth'] == '/head_camera/depth_registered/image_raw'
    assert cam.topics['points'] == '/head_camera/depth_registered/points'
    assert cam.topics['depth_info'] == '/head_camera/depth_registered/camera_info'


def test_clearpath_gazebo_sim_lidar_and_camera():
    """Clearpath's Gazebo Sim (gz) tags: gpu_lidar and rgbd_camera with <topic> and
    <gz_frame_id>, a 3D lidar's rows as a point cloud."""
    body = '''
    <gazebo reference="laser">
      <sensor name="lidar3d_0" type="gpu_lidar">
        <always_on>true</always_on><visualize>true</visualize><update_rate>10</update_rate>
        <topic>sensors/lidar3d_0/scan</topic>
        <gz_frame_id>laser</gz_frame_id>
        <lidar><scan>
          <horizontal><samples>1875</samples><resolution>1</resolution>
            <min_angle>-3.141592654</min_angle><max_angle>3.141592654</max_angle></horizontal>
          <vertical><samples>16</samples><resolution>1</resolution>
            <min_angle>-0.261799</min_angle><max_angle>0.261799</max_angle></vertical></scan>
          <range><min>0.3</min><max>100.0</max><resolution>0.01</resolution></range>
        </lidar>
      </sensor>
    </gazebo>
    <gazebo reference="camera_link">
      <sensor name="camera_0" type="rgbd_camera">
        <update_rate>30</update_rate><topic>sensors/camera_0/camera</topic>
        <gz_frame_id>camera_0_color_optical_frame</gz_frame_id>
        <camera name="camera_0"><horizontal_fov>1.25</horizontal_fov>
          <image><width>640</width><height>480</height></image>
          <clip><near>0.1</near><far>10</far></clip></camera>
      </sensor>
    </gazebo>'''
    decls, _notes = parse(body)
    lidar, cam = decls
    assert lidar.source == 'gazebo_sim' and lidar.frame == 'laser'
    assert (lidar.samples, lidar.vertical_samples) == (1875, 16)
    assert lidar.topics == {'points': 'sensors/lidar3d_0/scan/points'}
    assert cam.kind == 'rgbd' and cam.frame == 'camera_0_color_optical_frame'
    assert cam.topics['image'] == 'sensors/camera_0/camera/image'
    assert cam.topics['depth'] == 'sensors/camera_0/camera/depth_image'
    assert cam.topics['info'] == 'sensors/camera_0/camera/camera_info'


def test_tiago_imu_and_ros2_control_force_torque():
    """TIAGo-style ROS 1 IMU model plugin (hector) and a ros2_control force-torque sensor
    on the wrist (state interfaces force.x..torque.z, frame_id)."""
    extra = '''
    <ros2_control name="arm" type="system"><hardware><plugin>x/Y</plugin></hardware>
      <sensor name="wrist_ft">
        <state_interface name="force.x"/><state_interface name="force.y"/>
        <state_interface name="force.z"/><state_interface name="torque.x"/>
        <state_interface name="torque.y"/><state_interface name="torque.z"/>
        <param name="frame_id">tool0</param></sensor>
      <sensor name="base_imu">
        <state_interface name="orientation.x"/><state_interface name="orientation.w"/>
        <state_interface name="angular_velocity.z"/>
        <state_interface name="linear_acceleration.z"/>
        <param name="frame_id">no_such_link</param></sensor>
    </ros2_control>'''
    body = '''
    <gazebo>
      <plugin name="imu_controller" filename="libhector_gazebo_ros_imu.so">
        <alwaysOn>true</alwaysOn><updateRate>100.0</updateRate>
        <bodyName>imu_link</bodyName><topicName>base_imu</topicName>
        <accelGaussianNoise>0.005 0.005 0.005</accelGaussianNoise>
        <rateGaussianNoise>0.005 0.005 0.005</rateGaussianNoise>
        <frameId>imu_link</frameId>
      </plugin>
    </gazebo>'''
    decls, notes = parse(body, extra=extra)
    imu, ft = decls
    assert (imu.kind, imu.link, imu.topics, imu.rate) == ('imu', 'imu_link',
                                                          {'imu': 'base_imu'}, 100.0)
    assert imu.noise['accel'].stddev == 0.005
    assert (ft.kind, ft.link, ft.source) == ('force_torque', 'tool0', 'ros2_control')
    assert any('base_imu' in n and 'no link' in n for n in notes)


def test_sonars_as_range():
    """Sonars: TIAGo's ROS 1 way (libgazebo_ros_range, <radiation>ultrasound) and ROS 2's
    gazebo_ros_ray_sensor with output_type sensor_msgs/Range: the nearest return as
    sensor_msgs/Range."""
    decls, _notes = parse('''
    <gazebo reference="laser"><sensor type="ray" name="base_sonar_01">
      <update_rate>5</update_rate>
      <ray><scan><horizontal><samples>5</samples><min_angle>-0.25</min_angle>
        <max_angle>0.25</max_angle></horizontal><vertical><samples>5</samples>
        <min_angle>-0.25</min_angle><max_angle>0.25</max_angle></vertical></scan>
        <range><min>0.03</min><max>1.0</max></range></ray>
      <plugin name="base_sonar_01" filename="libgazebo_ros_range.so">
        <gaussianNoise>0.005</gaussianNoise><alwaysOn>true</alwaysOn><updateRate>5</updateRate>
        <topicName>sonar_base</topicName><frameName>base_sonar_01_link</frameName>
        <radiation>ultrasound</radiation><fov>0.5</fov></plugin></sensor></gazebo>
    <gazebo reference="camera_link"><sensor type="ray" name="ir">
      <ray><scan><horizontal><samples>3</samples><min_angle>-0.1</min_angle>
        <max_angle>0.1</max_angle></horizontal></scan><range><min>0.02</min><max>2</max>
        </range></ray>
      <plugin name="ir" filename="libgazebo_ros_ray_sensor.so">
        <ros><remapping>~/out:=ir_range</remapping></ros>
        <output_type>sensor_msgs/Range</output_type>
        <radiation_type>infrared</radiation_type></plugin></sensor></gazebo>''')
    sonar, ir = decls
    assert (sonar.topics, sonar.radiation, sonar.vertical_samples) == (
        {'range': 'sonar_base'}, 'ultrasound', 5)
    assert (ir.topics, ir.radiation) == ({'range': 'ir_range'}, 'infrared')
    for d in decls:
        got = settings.lidar_entry(d.name, {
            'site': d.name, 'rays': d.samples, 'angle_min': d.min_angle,
            'angle_max': d.max_angle, 'vertical_rays': d.vertical_samples,
            'vertical_angle_min': d.vertical_min_angle,
            'vertical_angle_max': d.vertical_max_angle, 'range_min': d.range_min,
            'range_max': d.range_max, 'output': 'range', 'radiation': d.radiation}, 'x')
        assert got['output'] == 'range'


def test_ros2_plugin_namespace_and_remapping():
    d, _ = one('''<gazebo reference="laser"><sensor name="s" type="ray">
        <ray><scan><horizontal><samples>10</samples></horizontal></scan></ray>
        <plugin name="p" filename="libgazebo_ros_ray_sensor.so">
          <ros><namespace>/tb3</namespace><remapping>~/out:=scan</remapping></ros>
          <output_type>sensor_msgs/LaserScan</output_type></plugin></sensor></gazebo>''')
    assert d.topics == {'scan': '/tb3/scan'} and d.frame == ''
    d, _ = one('''<gazebo reference="laser"><sensor name="s" type="ray">
        <plugin name="p" filename="libgazebo_ros_ray_sensor.so"/></sensor></gazebo>''')
    assert d.topics == {'points': 'p/out'}       # gazebo_ros_ray_sensor's default output


def test_camera_remapping_and_namespace_as_gazebo_ros_camera():
    """gazebo_ros_pkgs' own camera demo: <namespace>demo_cam</namespace>,
    <remapping>image_raw:=image_demo</remapping>, camera_name mycamera."""
    d, notes = one('''<gazebo reference="camera_link"><sensor name="my_camera" type="camera">
        <camera name="demo_cam"><horizontal_fov>1.047</horizontal_fov>
          <image><width>320</width><height>240</height></image><save enabled="1"/></camera>
        <plugin name="camera_controller" filename="libgazebo_ros_camera.so">
          <ros><namespace>demo_cam</namespace>
            <remapping>image_raw:=image_demo</remapping>
            <remapping>camera_info:=camera_info_demo</remapping></ros>
          <camera_name>mycamera</camera_name><frame_name>omit_so_it_defaults</frame_name>
        </plugin></sensor></gazebo>''')
    assert d.topics == {'image': 'demo_cam/mycamera/image_demo',
                        'info': 'demo_cam/mycamera/camera_info_demo'}
    assert d.frame == 'omit_so_it_defaults' and (d.width, d.height) == (320, 240)
    assert any('<save>' in n for n in notes)


def test_unsupported_things_each_get_a_note():
    decls, notes = parse('''
      <gazebo reference="laser"><sensor name="gps" type="gps"/></gazebo>
      <gazebo reference="nowhere"><sensor name="cam" type="camera"/></gazebo>
      <gazebo reference="camera_link"><sensor name="c" type="camera">
        <camera><distortion><k1>0.1</k1></distortion><lens><type>stereographic</type></lens>
        </camera><plugin name="x" filename="libmy_vendor_cam.so"/><weird/></sensor></gazebo>
      <gazebo><plugin name="diff" filename="libgazebo_ros_diff_drive.so"/></gazebo>
      <gazebo><plugin name="p3d" filename="libgazebo_ros_p3d.so"/></gazebo>
      <gazebo reference="base_link"><mu1>0.5</mu1></gazebo>''')
    assert [d.name for d in decls] == ['c']
    text = '\n'.join(notes)
    for said in ("type 'gps' is not supported", "'nowhere' is no link", '<distortion>',
                 '<lens>', 'libmy_vendor_cam.so', '<weird>', 'libgazebo_ros_p3d.so',
                 '<mu1>'):
        assert said in text, said
    # a diff drive is served (mobile.gazebo_drive), with notes of its own
    assert 'libgazebo_ros_diff_drive.so' not in text


@pytest.mark.parametrize('value', ['nan', 'inf', '-inf', '1e308', '-5', 'abc', ''])
def test_hostile_numbers_bounded_with_a_note(value):
    d, notes = one(f'''<gazebo reference="laser"><sensor name="s" type="ray">
        <update_rate>{value}</update_rate>
        <ray><scan><horizontal><samples>{value}</samples><min_angle>{value}</min_angle>
        <max_angle>{value}</max_angle></horizontal>
        <vertical><samples>{value}</samples></vertical></scan>
        <range><min>{value}</min><max>{value}</max></range>
        <noise><mean>{value}</mean><stddev>{value}</stddev></noise></ray>
        <pose>{value} 0 0 0 0 0</pose>
        <plugin name="p" filename="libgazebo_ros_ray_sensor.so"/></sensor></gazebo>''')
    assert 1 <= d.samples <= gs.MAX_SAMPLES and d.samples * d.vertical_samples <= gs.MAX_RAYS
    assert 0 < d.rate <= gs.MAX_RATE
    assert 0 <= d.range_min < d.range_max <= gs.MAX_RANGE
    assert d.min_angle <= d.max_angle and d.max_angle - d.min_angle <= 2 * math.pi + 1e-6
    assert all(math.isfinite(v) for v in d.pose)
    assert all(math.isfinite(g.stddev) and g.stddev >= 0 for g in d.noise.values())
    if value:
        assert notes
    # and the result is settings the lidar machinery takes as they are
    settings.lidar_entry('s', {'site': 's', 'rays': d.samples, 'angle_min': d.min_angle,
                               'angle_max': d.max_angle, 'range_min': d.range_min,
                               'range_max': d.range_max, 'rate': d.rate}, 'x')


def test_huge_counts_clamped_and_said():
    d, notes = one('''<gazebo reference="laser"><sensor name="s" type="ray">
        <ray><scan><horizontal><samples>1000000000</samples></horizontal>
        <vertical><samples>100000</samples><min_angle>-0.2</min_angle>
        <max_angle>0.2</max_angle></vertical></scan></ray>
        <plugin name="p" filename="libgazebo_ros_ray_sensor.so"/></sensor></gazebo>''')
    assert d.samples == gs.MAX_SAMPLES and d.samples * d.vertical_samples <= gs.MAX_RAYS
    assert any('samples' in n for n in notes)
    c, notes = one('''<gazebo reference="camera_link"><sensor name="c" type="camera">
        <camera><image><width>99999999</width><height>99999999</height></image></camera>
        <plugin name="p" filename="libgazebo_ros_camera.so"/></sensor></gazebo>''')
    assert c.width <= gs.MAX_SIDE and c.height <= gs.MAX_SIDE
    assert c.width * c.height <= gs.MAX_PIXELS and notes


def test_many_sensors_capped_and_garbage_is_no_crash():
    body = ''.join(f'<gazebo reference="laser"><sensor name="s{i}" type="imu"><plugin '
                   f'name="p{i}" filename="libgazebo_ros_imu_sensor.so"/></sensor></gazebo>'
                   for i in range(gs.MAX_SENSORS + 10))
    decls, notes = parse(body)
    assert len(decls) == gs.MAX_SENSORS and any('more than' in n for n in notes)
    assert gs.parse_text('<robot><gazebo') == ([], gs.parse_text('<robot><gazebo')[1])
    assert gs.from_json('not json') == [] and gs.from_json('[{"x": 1}]') == []


def test_declarations_round_trip_through_json():
    decls, _ = gs.parse_text(open(URDF).read())
    assert gs.from_json(gs.to_json(decls)) == decls


def test_lidar_settings_angles_noise_topic_checked():
    got = settings.lidar_entry('l', {'site': 's', 'angle_min': 0.0, 'angle_max': 6.28,
                                     'noise': {'std': 0.01}, 'topic': '/scan',
                                     'output': 'scan'}, 'lidars.l')
    assert got['fov'] == pytest.approx(6.28) and got['noise'].std == 0.01
    for bad in ({'angle_min': 0.0}, {'topic': 'a b'}, {'output': 'laser'},
                {'output': 'scan', 'vertical_rays': 4},
                {'angle_min': 1.0, 'angle_max': 0.0}):
        with pytest.raises(ConfigError):
            settings.lidar_entry('l', {'site': 's', **bad}, 'lidars.l')


# --- the sensor tier: the TurtleBot3-like base inside known walls ----------------------------
@pytest.fixture(scope='module')
def tb3_model(tmp_path_factory):
    path, notes = model_from_urdf(open(URDF).read(), scene=WALLS,
                                  cache_dir=str(tmp_path_factory.mktemp('urdf')))
    return path, notes


@pytest.fixture
def tb3(open_device, tb3_model):
    dev = open_device(model=tb3_model[0], start_paused=True)
    dev.step(200)
    return dev


def expected_range(origin, azimuth):
    """Distance from ``origin`` along a horizontal ray to the first wall face."""
    c, s = math.cos(azimuth), math.sin(azimuth)
    hits = []
    for x in WALL_X:
        if abs(c) > 1e-9 and (x - origin[0]) / c > 0:
            hits.append((x - origin[0]) / c)
    for y in WALL_Y:
        if abs(s) > 1e-9 and (y - origin[1]) / s > 0:
            hits.append((y - origin[1]) / s)
    return min(hits)


def test_model_carries_the_declared_sensors(tb3_model):
    path, notes = tb3_model
    m = mujoco.MjModel.from_xml_path(path)
    names = {d.name: d for d in declared.declarations(m)}
    assert set(names) == {'hls_lfcd_lds', 'tb3_imu', 'intel_realsense_r200'}
    assert mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, 'hls_lfcd_lds') >= 0
    assert mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, 'intel_realsense_r200') >= 0
    assert any('hls_lfcd_lds (lidar on base_scan)' in n for n in notes)
    lidar = declared.lidar_settings(m)['hls_lfcd_lds']
    assert (lidar['topic'], lidar['frame'], lidar['output']) == ('scan', 'base_scan', 'scan')
    entries = declared.sensor_entries(m)
    assert entries['tb3_imu']['topic'] == 'imu' and entries['tb3_imu']['frame'] == 'imu_link'


def test_lidar_ranges_match_the_walls(tb3):
    cfg = tb3.sensing.lidar_settings()['hls_lfcd_lds']
    scanner = tb3.sensing.lidar(cfg)
    scan = scanner.scan(tb3.snapshot)
    site = scanner.site
    origin = tb3.snapshot.site_xpos[site]
    assert np.allclose(scanner.pattern.azimuths, np.linspace(0.0, 6.28, 360))
    expected = np.array([expected_range(origin, a) for a in scanner.pattern.azimuths])
    expected[expected > 3.5] = np.inf
    finite = np.isfinite(expected)
    assert finite.sum() > 300
    assert np.array_equal(np.isfinite(scan.ranges), finite)
    assert np.max(np.abs(scan.ranges[finite] - expected[finite])) < 0.02


def test_lidar_noise_within_its_stddev(tb3):
    cfg = dict(tb3.sensing.lidar_settings()['hls_lfcd_lds'])
    clean = tb3.sensing.lidar(cfg).scan(tb3.snapshot).ranges
    cfg['noise'] = settings.NoiseSpec(std=0.01)
    noisy = tb3.sensing.lidar(cfg).scan(tb3.snapshot).ranges
    both = np.isfinite(clean) & np.isfinite(noisy)
    err = noisy[both] - clean[both]
    assert 0.005 < np.std(err) < 0.015 and abs(np.mean(err)) < 0.003
    assert np.max(np.abs(err)) < 6 * 0.01


def test_imu_at_rest_reads_gravity(tb3):
    groups = {g.name: g for g in tb3.sensing.sensor_groups()}
    imu = groups['tb3_imu']
    assert (imu.kind, imu.topic, imu.frame, imu.rate) == ('imu', 'imu', 'imu_link', 200.0)
    snap = tb3.snapshot
    _t, r = imu.read(snap.sensordata, snap.time)
    rot = snap.site_xmat[imu.site].reshape(3, 3)
    assert np.linalg.norm(r['accel'] - rot.T @ np.array([0.0, 0.0, G])) < 0.05
    assert np.linalg.norm(r['gyro']) < 1e-3


def test_camera_looks_along_the_link_x_axis():
    """A Gazebo camera looks along its link's +x with z up; MuJoCo's along its -z with y
    up: the mounted camera's -z is the link's x, its y the link's z."""
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, camera_quat((0.0, 0.0, 0.0)))
    rot = rot.reshape(3, 3)
    assert np.allclose(-rot[:, 2], [1, 0, 0]) and np.allclose(rot[:, 1], [0, 0, 1])


@needs_gl
def test_depth_pixels_land_on_the_wall_and_floor(tb3):
    """Pixels through the intrinsics and the optical frame's pose (the URDF's own
    camera_rgb_optical_frame link, which the images are stamped with) land on the known
    surfaces within 5 mm."""
    m = tb3.model
    renderer = tb3.cameras.renderer('intel_realsense_r200', 80, 60, depth=True)
    snap = tb3.snapshot
    with tb3.cameras.render_state(snap) as data:
        frame = renderer.submit(data, rgb=False, depth=True).result()
    depth = frame.depth[::-1]
    fx, fy, cx, cy = renderer.intrinsics()
    # the optical frame: the URDF link camera_rgb_optical_frame, from the model's pose
    bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'camera_rgb_optical_frame')
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, snap.xquat[bid])
    pos, rot = snap.xpos[bid], rot.reshape(3, 3)
    checked = 0
    for v in range(0, 60, 6):
        for u in range(0, 80, 8):
            z = float(depth[v, u])
            point = pos + rot @ np.array([(u - cx) / fx * z, (v - cy) / fy * z, z])
            gap = min(abs(point[2]), abs(point[0] - WALL_X[0]), abs(point[1] - WALL_Y[0]),
                      abs(point[1] - WALL_Y[1]))
            assert gap < 0.005, (u, v, z, point)
            checked += 1
    assert checked == 100


def test_check_robot_lists_each_sensor_with_one_reading(tb3_model):
    from mujoco_hal_ros.conformance.sensors_found import find
    rows = {r.name: r for r in find(mujoco.MjModel.from_xml_path(tb3_model[0]))}
    assert {'hls_lfcd_lds', 'tb3_imu', 'intel_realsense_r200'} <= set(rows)
    assert all(r.result == 'pass' for r in rows.values()), [r.line() for r in rows.values()]
    lds = rows['hls_lfcd_lds']
    assert (lds.topics, lds.frame, lds.rate) == ('scan', 'base_scan', 5.0)
    assert lds.detail.endswith('of 360 rays return')
    assert rows['intel_realsense_r200'].frame == 'camera_rgb_optical_frame'


def test_a_frame_that_is_not_where_the_sensor_is_gets_a_note(tmp_path):
    """The tag's frame_name names a link that is not oriented as an optical frame: the
    images are stamped with it as Gazebo would, and the note says by how much it is off."""
    text = open(URDF).read().replace('rpy="-1.57079632679 0 -1.57079632679"', 'rpy="0 0 0"')
    _path, notes = model_from_urdf(text, cache_dir=str(tmp_path))
    assert any("frame 'camera_rgb_optical_frame' is 0 mm and 120.0 degrees" in n
               for n in notes), notes


def test_a_lidar_on_any_body_as_a_tag_would_put_it(tb3):
    """MJCF users (and URDF ones without tags): a device file's lidars: entry on a body with
    pos and rpy, no site needed, scans as the tag's own lidar does from the same place."""
    tag = tb3.sensing.lidar(tb3.sensing.lidar_settings()['hls_lfcd_lds']).scan(tb3.snapshot)
    cfg = tb3.sensing.lidar_settings({'mine': {
        'body': 'base_link', 'pos': [-0.064, 0, '122 mm'], 'angle_min': 0.0,
        'angle_max': 6.28, 'range_min': 0.12, 'range_max': 3.5}})['mine']
    scanner = tb3.sensing.lidar(cfg)
    assert scanner.site == -1
    mine = scanner.scan(tb3.snapshot)
    assert np.array_equal(np.isfinite(mine.ranges), np.isfinite(tag.ranges))
    both = np.isfinite(tag.ranges)
    assert np.max(np.abs(mine.ranges[both] - tag.ranges[both])) < 1e-6
    turned = tb3.sensing.lidar(dict(cfg, rpy=[0, 0, math.pi / 2])).scan(tb3.snapshot)
    # turned a quarter left: its ray at 0 looks where the tag's looks at +90 degrees
    i90 = int(np.argmin(np.abs(scanner.pattern.azimuths - math.pi / 2)))
    assert turned.ranges[0] == pytest.approx(expected_range(
        tb3.snapshot.site_xpos[tb3.sensing.lidar(
            tb3.sensing.lidar_settings()['hls_lfcd_lds']).site], math.pi / 2), abs=0.02)
    assert tag.ranges[i90] == pytest.approx(turned.ranges[0], abs=0.02)


def test_lidar_mount_settings_checked():
    got = settings.parse_lidars({'l': {'body': 'base', 'pos': ['10 cm', 0, 0],
                                       'rpy': [0, 0, '90 deg']}})['l']
    assert got['pos'] == (pytest.approx(0.1), 0.0, 0.0)
    assert got['rpy'][2] == pytest.approx(math.pi / 2)
    for bad in ({}, {'site': 's', 'body': 'b'}, {'site': 's', 'pos': [0, 0, 0]},
                {'body': 'b', 'pos': [0, 0]}, {'body': 'b', 'rpy': [0, 0, 'nan']}):
        with pytest.raises(ConfigError):
            settings.parse_lidars({'l': bad})


def test_two_tagged_robots_in_one_world_each_under_its_namespace(open_device):
    """The robots file spawns each URDF under its namespace: each robot's sensors are
    found under its prefix, their relative topics under its namespace, absolute ones kept."""
    from mujoco_hal_ros.menagerie import empty_world_path
    from mujoco_hal_ros.world import robots_file
    dev = open_device(model=empty_world_path(), start_paused=True)
    entries = [robots_file.RobotEntry(ns, None, URDF, (x, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
               for ns, x in (('tb_a', 0.0), ('tb_b', 2.0))]
    robots_file.add_to(dev, entries)
    decls = {d.name: d for d in declared.declarations(dev.model)}
    assert {'tb_a/hls_lfcd_lds', 'tb_b/hls_lfcd_lds', 'tb_a/tb3_imu'} <= set(decls)
    lidar = decls['tb_b/hls_lfcd_lds']
    assert (lidar.topics, lidar.frame, lidar.link) == ({'scan': 'tb_b/scan'}, 'tb_b/base_scan',
                                                       'tb_b/base_scan')
    cfg = dev.sensing.lidar_settings()['tb_b/hls_lfcd_lds']
    assert dev.sensing.lidar(cfg).site >= 0
    groups = {g.name: g for g in dev.sensing.sensor_groups()}
    assert groups['tb_a/tb3_imu'].topic == 'tb_a/imu'


# --- the same for MJCF users: a device file's cameras: entry on any body ---------------------
ROVER = '''<mujoco model="rover">
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1"/>
    <geom name="floor" type="plane" size="0 0 0.05"/>
    <geom name="wall_front" type="box" pos="1.55 0 0.5" size="0.05 3 0.5"/>
    <geom name="wall_left" type="box" pos="0 1.05 0.5" size="3 0.05 0.5"/>
    <body name="rover" pos="0 0 0.1"><geom type="box" size="0.1 0.1 0.05"/></body>
  </worldbody>
</mujoco>'''


def rover_device(open_device, tmp_path, cameras):
    model = tmp_path / 'rover.xml'
    model.write_text(ROVER)
    return open_device({'connect': {'model': str(model)}, 'cameras': cameras},
                       start_paused=True)


def test_device_file_camera_on_a_body_serves_like_a_tag(open_device, tmp_path):
    dev = rover_device(open_device, tmp_path, {'front': {
        'body': 'rover', 'pos': [0, 0, '20 cm'], 'rpy': [0, 0, '90 deg'], 'width': 64,
        'height': 48, 'horizontal_fov': '60 deg', 'rate': 15, 'depth': True}})
    m = dev.model
    cid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, 'front')
    assert cid >= 0 and tuple(m.cam_resolution[cid]) == (64, 48)
    d = declared.cameras(m)['front']
    assert (d.kind, d.link, d.rate, d.source) == ('depth', 'rover', 15.0, 'device_file')
    assert declared.optical_frame(d) == 'front_optical_frame'
    # turned a quarter left, it looks along the world's +y: at the left wall
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, m.cam_quat[cid])
    assert np.allclose(-rot.reshape(3, 3)[:, 2], [0, 1, 0], atol=1e-9)
    if GL_PROBLEM is not None:
        return
    renderer = dev.cameras.renderer('front', 64, 48, depth=True)
    snap = dev.snapshot
    with dev.cameras.render_state(snap) as data:
        frame = renderer.submit(data, rgb=False, depth=True).result()
    fx, fy, cx, cy = renderer.intrinsics()
    assert fx == pytest.approx(32 / math.tan(math.radians(30)), rel=1e-3)
    # the optical axis from (0, 0, 0.3) along +y meets the left wall's face at y = 1.0
    centre = frame.depth[::-1][int(round(cy)), int(round(cx))]
    assert centre == pytest.approx(1.0, abs=0.005 + abs(cx - round(cx)) * 0.01)


def test_device_file_camera_refusals(open_device, tmp_path):
    for cameras, where in (({'c': {'body': 'nope'}}, 'cameras.c.body'),
                           ({'c': {'body': 'rover', 'width': 99999}}, 'cameras.c.width'),
                           ({'c': {'body': 'rover', 'speed': 1}}, 'cameras.c'),
                           ({'1c': {'body': 'rover'}}, 'cameras.1c'),
                           ({'c': {'body': 'rover', 'horizontal_fov': 'nan'}},
                            'cameras.c.horizontal_fov')):
        with pytest.raises(ConfigError) as err:
            rover_device(open_device, tmp_path, cameras)
        assert where in str(err.value), (where, str(err.value))


# --- force-torque and contact tags ------------------------------------------------------------
FT_URDF = os.path.join(HERE, 'models', 'ft_tool.urdf')


@pytest.mark.parametrize('direction, sign', [('child_to_parent', -1.0),
                                             ('parent_to_child', 1.0)])
def test_force_torque_tag_reads_the_tool_weight(open_device, tmp_path, direction, sign):
    """The 2 kg tool hangs from the sensor's joint: it reads the tool's weight along the
    tool frame's z, the sign as the tag's measure_direction says (Gazebo's default
    child_to_parent: what the tool pushes on the arm)."""
    text = open(FT_URDF).read().replace('child_to_parent', direction)
    path, _notes = model_from_urdf(text, cache_dir=str(tmp_path))
    dev = open_device(model=path, start_paused=True)
    dev.step(300)
    groups = {g.name: g for g in dev.sensing.sensor_groups()}
    ft = groups['tcp_ft']
    assert (ft.kind, ft.topic, ft.frame) == ('wrench', 'ft', 'tool')
    snap = dev.snapshot
    _t, r = ft.read(snap.sensordata, snap.time)
    rot = snap.site_xmat[ft.site].reshape(3, 3)
    weight_in_site = rot.T @ np.array([0.0, 0.0, 2 * G])
    assert np.allclose(r['force'], sign * weight_in_site, atol=0.05)
    touch = groups['tool_bumper_touch']
    assert (touch.kind, touch.topic) == ('touch', 'tool_bumper')
