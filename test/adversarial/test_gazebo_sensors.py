"""Hostile sensor tags: whatever a description's ``<gazebo>`` blocks hold, reading them ends
in declarations within the bounds (never an exception, never a huge scan or image), and
the lidar settings they make are ones the lidar machinery accepts as they are."""

import math
import re
import xml.etree.ElementTree as ET

from hypothesis import given, strategies as st

from mujoco_hal_ros.config import sensor_settings as settings
from mujoco_hal_ros.description import gazebo_sensors as gs

NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-10 ** 30, max_value=10 ** 30).map(str),
    st.sampled_from(['nan', 'inf', '-inf', '1e308', '-1e308', '', ' ', 'abc', '0', '-0',
                     '1e-320', '0x10', '1_000', '٣']),
    st.text(max_size=20))
KINDS = st.sampled_from(['ray', 'gpu_ray', 'gpu_lidar', 'lidar', 'camera', 'depth',
                         'depth_camera', 'rgbd_camera', 'multicamera', 'imu', 'contact',
                         'force_torque', 'gps', '', 'ray\x7f'])
NAMES = st.text(max_size=40)
ROS_NAME = re.compile(r'^(~/|/)?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$')


def _escape(text):
    return (text.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')
            .replace('"', '&quot;'))


def _clean(text):
    """Only characters XML may hold."""
    return ''.join(c for c in text if c in '\t\n\r' or (' ' <= c <= '\ud7ff')
                   or ('\ue000' <= c <= '\ufffd'))


@given(kind=KINDS, name=NAMES, ref=st.sampled_from(['laser', 'nowhere', '', 'j0']),
       values=st.lists(NUMBERS, min_size=14, max_size=14), topic=NAMES, frame=NAMES)
def test_any_values_end_bounded(kind, name, ref, values, topic, frame):
    v = [_escape(_clean(x)) for x in values]
    body = f'''<gazebo reference="{ref}"><sensor name="{_escape(_clean(name))}" type="{kind}">
      <update_rate>{v[0]}</update_rate><pose>{v[1]} {v[2]} 0 0 0 {v[3]}</pose>
      <topic>{_escape(_clean(topic))}</topic>
      <ray><scan><horizontal><samples>{v[4]}</samples><min_angle>{v[5]}</min_angle>
      <max_angle>{v[6]}</max_angle></horizontal><vertical><samples>{v[7]}</samples>
      </vertical></scan><range><min>{v[8]}</min><max>{v[9]}</max></range>
      <noise><mean>{v[10]}</mean><stddev>{v[11]}</stddev></noise></ray>
      <camera><horizontal_fov>{v[12]}</horizontal_fov><image><width>{v[13]}</width>
      <height>{v[4]}</height></image><clip><near>{v[8]}</near><far>{v[9]}</far></clip></camera>
      <plugin name="p" filename="libgazebo_ros_ray_sensor.so"><ros>
      <remapping>~/out:={_escape(_clean(topic))}</remapping></ros>
      <frame_name>{_escape(_clean(frame))}</frame_name></plugin></sensor></gazebo>'''
    urdf = (f'<robot name="r"><link name="laser"/><link name="child"/><joint name="j0" '
            f'type="fixed"><parent link="laser"/><child link="child"/></joint>{body}</robot>')
    decls, notes = gs.parse(ET.fromstring(urdf))
    assert all(isinstance(n, str) for n in notes)
    for d in decls:
        assert d.kind in gs.KINDS and d.link in ('laser', 'child')
        assert 0 < d.rate <= gs.MAX_RATE and all(math.isfinite(p) for p in d.pose)
        assert all(math.isfinite(g.mean) and 0 <= g.stddev <= gs.MAX_STD
                   for g in d.noise.values())
        assert all(ROS_NAME.match(t) for t in d.topics.values()), d.topics
        assert gs.from_json(gs.to_json([d])) == [d]
        if d.kind == 'lidar':
            assert 1 <= d.samples * d.vertical_samples <= gs.MAX_RAYS
            assert 0 <= d.range_min < d.range_max <= gs.MAX_RANGE
            settings.lidar_entry(d.name, {
                'site': d.name, 'rate': d.rate, 'rays': d.samples,
                'vertical_rays': d.vertical_samples, 'angle_min': d.min_angle,
                'angle_max': d.max_angle, 'range_min': d.range_min,
                'range_max': d.range_max, 'frame': d.frame or d.link,
                'topic': next(iter(d.topics.values())),
                'output': 'scan' if 'scan' in d.topics else 'points'}, 'x')
        if d.kind in ('camera', 'depth', 'rgbd'):
            assert 1 <= d.width <= gs.MAX_SIDE and 1 <= d.height <= gs.MAX_SIDE
            assert d.width * d.height <= gs.MAX_PIXELS
            assert 0 < d.horizontal_fov < math.pi and 0 < d.near < d.far


@given(st.text(max_size=400))
def test_any_text_is_no_crash(text):
    decls, notes = gs.parse_text(text)
    assert isinstance(decls, list) and isinstance(notes, list)
