"""Drive plugins a URDF declares for Gazebo, as drive controllers.

Robots without a ros2_control drive (TurtleBot-style bases, many hobby and course robots)
get ``cmd_vel`` and ``odom`` from a ``<gazebo><plugin>`` in their URDF: Gazebo Classic's
``libgazebo_ros_diff_drive.so`` (gazebo_ros_pkgs) or Gazebo Sim's DiffDrive system
(``gz-sim-diff-drive-system``, ``ignition::gazebo::systems::DiffDrive``). The same tags
give a ``DriveConfig`` here, served on the topics the plugin names (``cmd_vel`` and
``odom`` under the plugin's ``<ros><namespace>``, with its ``<remapping>``s; unstamped
``Twist`` as the plugin takes it), so the robot drives from the file alone. A tag the
plugin has and this does not use is named in a note.
"""

import math
import xml.etree.ElementTree as ET

from ..description.gazebo_sensors import (
    DIFF_DRIVE_CLASSIC as CLASSIC,
    DIFF_DRIVE_GZ_SIM as GZ_SIM,
)
from . import config as cfg

# tags read below; the rest of each plugin's children are named in a note
USED = {'left_joint', 'right_joint', 'wheel_separation', 'wheel_diameter', 'wheel_radius',
        'command_topic', 'odometry_topic', 'odometry_frame', 'robot_base_frame',
        'publish_odom', 'publish_odom_tf', 'update_rate', 'max_wheel_acceleration', 'ros',
        'topic', 'odom_topic', 'frame_id', 'child_frame_id', 'odom_publish_frequency',
        'num_wheel_pairs', 'max_linear_acceleration', 'max_velocity', 'max_linear_velocity',
        'max_angular_velocity', 'max_angular_acceleration'}
MAX_RATE = 1000.0


def _text(elem: ET.Element, tag: str) -> str | None:
    found = elem.find(tag)
    return found.text.strip() if found is not None and found.text else None


def _number(elem: ET.Element, tag: str, default: float | None = None,
            notes: list[str] | None = None, where: str = '') -> float | None:
    text = _text(elem, tag)
    if text is None:
        return default
    try:
        value = float(text.split()[0])
    except (ValueError, IndexError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        if notes is not None:
            notes.append(f'{where}: <{tag}>{text}</{tag}> is no usable number; '
                         f'{default!r} is used')
        return default
    return value


def _topic(name: str, namespace: str, remaps: dict) -> str:
    """The plugin's topic after its ``<remapping>`` and under its ``<ros><namespace>``."""
    name = remaps.get(name, remaps.get(f'~/{name}', name))
    if name.startswith('/') or not namespace:
        return name
    return f'{namespace.rstrip("/")}/{name}'


def _flag(elem, tag, default):
    text = _text(elem, tag)
    return default if text is None else text.lower() in ('1', 'true')


def drives_from_urdf(text: str) -> tuple[list[cfg.DriveConfig], list[str]]:
    """(drive configs, notes) of the diff-drive plugins in the URDF ``text``."""
    try:
        root = ET.fromstring(text.split('\0', 1)[0].strip())
    except ET.ParseError:
        return [], []
    out: list[cfg.DriveConfig] = []
    notes: list[str] = []
    for gz in root.findall('gazebo'):
        for plugin in gz.findall('plugin'):
            name = plugin.get('filename', '') or ''
            if name not in CLASSIC + GZ_SIM and plugin.get('name', '') not in GZ_SIM and \
                    'DiffDrive' not in name:
                continue
            where = f'<gazebo><plugin filename="{name}">'
            left = [e.text.strip() for e in plugin.findall('left_joint') if e.text]
            right = [e.text.strip() for e in plugin.findall('right_joint') if e.text]
            if not left or not right or len(out) >= 8:
                notes.append(f'{where}: no <left_joint>/<right_joint>; not served')
                continue
            sep = _number(plugin, 'wheel_separation', None, notes, where)
            radius = _number(plugin, 'wheel_radius', None, notes, where)
            if radius is None:
                diameter = _number(plugin, 'wheel_diameter', None, notes, where)
                radius = diameter / 2.0 if diameter else None
            if not sep or not radius:
                notes.append(f'{where}: needs <wheel_separation> and the wheel size; not served')
                continue
            ros = plugin.find('ros')
            namespace = (_text(ros, 'namespace') or '') if ros is not None else ''
            remaps = {}
            for remap in (ros.findall('remapping') if ros is not None else ()):
                src, _, dst = (remap.text or '').strip().partition(':=')
                if dst:
                    remaps[src.strip()] = dst.strip()
            command = _topic(_text(plugin, 'command_topic') or _text(plugin, 'topic')
                             or 'cmd_vel', namespace, remaps)
            odom = _topic(_text(plugin, 'odometry_topic') or _text(plugin, 'odom_topic')
                          or 'odom', namespace, remaps)
            rate = _number(plugin, 'update_rate', None, notes, where) or \
                _number(plugin, 'odom_publish_frequency', None, notes, where) or 50.0
            rate = min(max(rate, 1.0), MAX_RATE)
            accel = _number(plugin, 'max_wheel_acceleration', None, notes, where)
            linear = angular = cfg.AxisLimits()
            if accel:     # the plugin limits each rim's acceleration (m/s^2, whatever its doc
                # says: it compares it with joint speed times radius); the base's follow
                linear = cfg.AxisLimits(min_acceleration=-accel, max_acceleration=accel)
                turn = 2.0 * accel / sep
                angular = cfg.AxisLimits(min_acceleration=-turn, max_acceleration=turn)
            vmax = _number(plugin, 'max_velocity', None, notes, where) or \
                _number(plugin, 'max_linear_velocity', None, notes, where)
            if vmax:
                linear = cfg.AxisLimits(-vmax, vmax, linear.min_acceleration,
                                        linear.max_acceleration)
            unused = sorted({c.tag for c in plugin} - USED)
            if unused:
                notes.append(f'{where}: not used here: ' + ', '.join(f'<{t}>' for t in unused))
            out.append(cfg.DriveConfig(
                name=plugin.get('name') or 'diff_drive', type=cfg.DIFF_DRIVE,
                update_rate=rate, publish_rate=rate,
                odom_frame_id=_text(plugin, 'odometry_frame') or _text(plugin, 'frame_id')
                or 'odom',
                base_frame_id=_text(plugin, 'robot_base_frame') or
                _text(plugin, 'child_frame_id') or 'base_footprint',
                enable_odom_tf=_flag(plugin, 'publish_odom_tf', True),
                stamped=False, tf_frame_prefix_enable=False,
                linear=linear, angular=angular, command_topic=command, odom_topic=odom,
                geometry={'traction': left + right, 'left': left, 'right': right,
                          'wheel_separation': sep, 'left_radius': radius,
                          'right_radius': radius},
                source=where))
    return out, notes
