"""The drive controllers of a ros2_control controllers file, read as controller_manager does.

The same file the real robot's controller_manager loads: ``controller_manager:
ros__parameters:`` names each controller and its ``type``; each controller's own
``<name>: ros__parameters:`` block holds its parameters. Every parameter a supported drive
controller has is read here with the default ros2_controllers gives it, checked (finite,
in range, the right kind), so a typo stops the start with the key named instead of a robot
that drives wrong. Types this package stands in for otherwise (joint trajectory and gripper
controllers, broadcasters) are listed so that the caller can tell a file it serves from one
that names a controller nobody runs here.
"""

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
import math
import os
from typing import Any

from ..config.device_file import read_yaml
from ..errors import ConfigError

DIFF_DRIVE = 'diff_drive_controller/DiffDriveController'
MECANUM = 'mecanum_drive_controller/MecanumDriveController'
ACKERMANN = 'ackermann_steering_controller/AckermannSteeringController'
BICYCLE = 'bicycle_steering_controller/BicycleSteeringController'
TRICYCLE = 'tricycle_steering_controller/TricycleSteeringController'
DRIVES = (DIFF_DRIVE, MECANUM, ACKERMANN, BICYCLE, TRICYCLE)
STEERING = (ACKERMANN, BICYCLE, TRICYCLE)
ARM = ('joint_trajectory_controller/JointTrajectoryController',)
GRIPPERS = ('position_controllers/GripperActionController',
            'parallel_gripper_action_controller/GripperActionController')
# sim_node publishes joint_states (and its sensors) itself: these run with no effect
BROADCASTERS = ('joint_state_broadcaster/JointStateBroadcaster',
                'imu_sensor_broadcaster/IMUSensorBroadcaster',
                'force_torque_sensor_broadcaster/ForceTorqueSensorBroadcaster',
                'range_sensor_broadcaster/RangeSensorBroadcaster')
SUPPORTED = DRIVES + ARM + GRIPPERS + BROADCASTERS
DEFAULT_UPDATE_RATE = 100.0      # controller_manager's update_rate when the file has none
MAX_WHEELS = 64
NAN = float('nan')


@dataclass(frozen=True)
class AxisLimits:
    """One axis of a speed limiter (ros2_controllers' ``SpeedLimiter``): NaN is no limit."""

    min_velocity: float = NAN
    max_velocity: float = NAN
    min_acceleration: float = NAN
    max_acceleration: float = NAN
    min_jerk: float = NAN
    max_jerk: float = NAN


@dataclass(frozen=True)
class DriveConfig:
    """One drive controller: what every kind shares, then its geometry in ``geometry``."""

    name: str
    type: str
    update_rate: float
    odom_frame_id: str = 'odom'
    base_frame_id: str = 'base_link'
    enable_odom_tf: bool = True
    open_loop: bool = False
    position_feedback: bool = True
    cmd_vel_timeout: float = 0.5
    publish_rate: float = 50.0
    stamped: bool = True                 # TwistStamped commands (Jazzy on); false: Twist
    tf_frame_prefix_enable: bool = True
    tf_frame_prefix: str = ''
    pose_covariance: tuple[float, ...] = (0.0,) * 6
    twist_covariance: tuple[float, ...] = (0.0,) * 6
    publish_limited_velocity: bool = False
    velocity_rolling_window_size: int = 10
    linear: AxisLimits = AxisLimits()
    angular: AxisLimits = AxisLimits()
    # kind-specific: wheel and steering joint names, radii, separations, wheelbase...
    geometry: dict[str, Any] = field(default_factory=dict)
    # parameters accepted for compatibility that change nothing here (logged by the node)
    no_effect: tuple[str, ...] = ()
    # topics where the source names them (a Gazebo drive plugin); empty: the controller's
    # own (<name>/cmd_vel and <name>/odom, or <name>/reference and <name>/odometry)
    command_topic: str = ''
    odom_topic: str = ''
    source: str = 'controllers_file'

    @property
    def wheel_joints(self) -> list[str]:
        """Joints whose velocity this controller commands."""
        return list(self.geometry['traction'])

    @property
    def steering_joints(self) -> list[str]:
        """Joints whose position this controller commands (steering controllers)."""
        return list(self.geometry.get('steering', ()))


@dataclass
class ControllersFile:
    """What a controllers file asks for: the drives, and every controller by type."""

    path: str
    update_rate: float
    types: dict[str, str]
    drives: list[DriveConfig]
    blocks: dict[str, dict]

    def of_type(self, types: Collection[str]) -> list[str]:
        return [n for n, t in self.types.items() if t in types]


def _last(key: object) -> str:
    return str(key).rstrip('/').split('/')[-1]


def _blocks(doc: Any, path: str) -> dict[str, dict]:
    """``<name>: ros__parameters: {...}`` of each controller (``/**/name`` keys too)."""
    out = {}
    if not isinstance(doc, dict):
        raise ConfigError(f'{path} is not a ros2_control controllers file (a mapping of '
                          '"<name>: ros__parameters:" blocks)', where='parameter controllers_file')
    for key, value in doc.items():
        if isinstance(value, dict) and isinstance(value.get('ros__parameters'), dict):
            out[_last(key)] = value['ros__parameters']
    return out


class _Reader:
    """Typed reads of one controller block, each key checked and named when refused."""

    def __init__(self, name: str, block: dict) -> None:
        self.name = name
        self.flat: dict[str, Any] = {}
        self._walk('', block)
        self.used: set[str] = set()

    def _walk(self, prefix: str, node: dict) -> None:
        for k, v in node.items():
            if isinstance(v, dict):
                self._walk(f'{prefix}{k}.', v)
            else:
                self.flat[f'{prefix}{k}'] = v

    def _where(self, key: str) -> str:
        return f'controllers_file: {self.name}.{key}'

    def has(self, key: str) -> bool:
        return key in self.flat

    def number(self, key: str, default: float = NAN, *, low: float | None = None,
               positive: bool = False, allow_nan: bool = False) -> float:
        self.used.add(key)
        value = self.flat.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f'expected a number, got {value!r}', where=self._where(key))
        value = float(value)
        if math.isnan(value) and (allow_nan or key not in self.flat):
            return value
        if not math.isfinite(value):
            raise ConfigError(f'expected a finite number, got {value!r}', where=self._where(key))
        if positive and not value > 0:
            raise ConfigError(f'must be above zero, got {value!r}', where=self._where(key))
        if low is not None and value < low:
            raise ConfigError(f'must be at least {low}, got {value!r}', where=self._where(key))
        return value

    def flag(self, key: str, default: bool) -> bool:
        self.used.add(key)
        value = self.flat.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f'expected true or false, got {value!r}', where=self._where(key))
        return value

    def text(self, key: str, default: str = '') -> str:
        self.used.add(key)
        value = self.flat.get(key, default)
        if not isinstance(value, str) or len(value) > 256 or '\0' in value:
            raise ConfigError(f'expected a name of at most 256 characters, got {value!r}',
                              where=self._where(key))
        return value

    def names(self, key: str, *, required: bool = True) -> list[str]:
        self.used.add(key)
        value = self.flat.get(key)
        if value is None and not required:
            return []
        if isinstance(value, str):       # one name given bare
            value = [value]
        if not isinstance(value, list) or not value or len(value) > MAX_WHEELS or not all(
                isinstance(v, str) and v and len(v) <= 256 for v in value):
            raise ConfigError(f'expected a list of 1 to {MAX_WHEELS} joint names, got {value!r}',
                              where=self._where(key))
        return list(value)

    def doubles(self, key: str, n: int, default: Iterable[float]) -> tuple[float, ...]:
        self.used.add(key)
        value = self.flat.get(key, list(default))
        if not isinstance(value, list) or len(value) != n or any(
                isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                for v in value):
            raise ConfigError(f'expected {n} finite numbers, got {value!r}',
                              where=self._where(key))
        return tuple(float(v) for v in value)

    def axis(self, prefix: str) -> AxisLimits:
        """``linear.x.*`` or ``angular.z.*``: Kilted's NaN-is-unlimited form, and the older
        ``has_*_limits`` switches (a limit counts only where its switch is on)."""
        got = {}
        for kind in ('velocity', 'acceleration', 'jerk'):
            switch = f'{prefix}.has_{kind}_limits'
            on = self.flag(switch, True) if self.has(switch) else True
            for side in ('min', 'max'):
                v = self.number(f'{prefix}.{side}_{kind}', allow_nan=True)
                got[f'{side}_{kind}'] = v if on else NAN
            if on and self.has(switch) and math.isnan(got[f'max_{kind}']):
                raise ConfigError(f'has_{kind}_limits is true but no max_{kind} is given',
                                  where=self._where(switch))
        # the has_* form's unlimited minimum mirrors the maximum, as SpeedLimiter did
        for kind in ('velocity', 'acceleration', 'jerk'):
            if math.isnan(got[f'min_{kind}']) and not math.isnan(got[f'max_{kind}']):
                got[f'min_{kind}'] = -got[f'max_{kind}']
            if got[f'min_{kind}'] > got[f'max_{kind}']:
                raise ConfigError(f'min_{kind} {got[f"min_{kind}"]} is above max_{kind} '
                                  f'{got[f"max_{kind}"]}', where=self._where(prefix))
        # Kilted's deceleration keys: accepted; the limiter brakes at max_acceleration
        for key in ('max_deceleration', 'max_acceleration_reverse', 'max_deceleration_reverse'):
            self.number(f'{prefix}.{key}', allow_nan=True)
        return AxisLimits(**got)

    def unread(self) -> list[str]:
        return sorted(k for k in self.flat if k not in self.used)


def _common(r: _Reader, name: str, kind: str, update_rate: float, timeout_key: str) -> dict:
    return dict(
        name=name, type=kind, update_rate=update_rate,
        odom_frame_id=r.text('odom_frame_id', 'odom'),
        base_frame_id=r.text('base_frame_id', 'base_link'),
        enable_odom_tf=r.flag('enable_odom_tf', True),
        open_loop=r.flag('open_loop', False),
        position_feedback=r.flag('position_feedback', kind == DIFF_DRIVE),
        cmd_vel_timeout=r.number(timeout_key, 0.5, positive=True),
        publish_rate=r.number('publish_rate', 50.0, positive=True) if kind == DIFF_DRIVE
        else update_rate,
        stamped=r.flag('use_stamped_vel', True),
        tf_frame_prefix_enable=r.flag('tf_frame_prefix_enable', True),
        tf_frame_prefix=r.text('tf_frame_prefix', ''),
        pose_covariance=r.doubles('pose_covariance_diagonal', 6, (0.0,) * 6),
        twist_covariance=r.doubles('twist_covariance_diagonal', 6, (0.0,) * 6),
        publish_limited_velocity=r.flag('publish_limited_velocity', False),
        velocity_rolling_window_size=int(r.number('velocity_rolling_window_size', 10, low=1)),
        linear=r.axis('linear.x'), angular=r.axis('angular.z'))


def _diff_drive(r: _Reader) -> dict:
    left, right = r.names('left_wheel_names'), r.names('right_wheel_names')
    sep = r.number('wheel_separation', positive=True)
    radius = r.number('wheel_radius', positive=True)
    r.number('wheels_per_side', 0, low=0)     # deprecated: the name lists say it
    return {'traction': left + right, 'left': left, 'right': right,
            'wheel_separation': sep * r.number('wheel_separation_multiplier', 1.0, positive=True),
            'left_radius': radius * r.number('left_wheel_radius_multiplier', 1.0, positive=True),
            'right_radius': radius * r.number('right_wheel_radius_multiplier', 1.0,
                                              positive=True)}


def _mecanum(r: _Reader) -> dict:
    corners = ('front_left', 'front_right', 'rear_right', 'rear_left')
    joints = [r.text(f'{c}_wheel_command_joint_name') for c in corners]
    for c, j in zip(corners, joints, strict=True):
        if not j:
            raise ConfigError('the wheel joint this corner drives is required',
                              where=f'controllers_file: {r.name}.{c}_wheel_command_joint_name')
        r.text(f'{c}_wheel_state_joint_name', '')
    radius = r.number('kinematics.wheels_radius', positive=True)
    lxly = r.number('kinematics.sum_of_robot_center_projection_on_X_Y_axis', positive=True)
    offset = tuple(r.number(f'kinematics.base_frame_offset.{k}', 0.0) for k in ('x', 'y', 'theta'))
    return {'traction': joints, 'radius': radius, 'lxly': lxly, 'offset': offset}


def _steering(r: _Reader, kind: str) -> dict:
    front = r.flag('front_steering', True)
    # Kilted's names first, then the Humble/Jazzy ones (rear/front wheels by front_steering)
    traction = r.names('traction_joints_names', required=False)
    steering = r.names('steering_joints_names', required=False)
    if not traction or not steering:
        rear_w = r.names('rear_wheels_names', required=False)
        front_w = r.names('front_wheels_names', required=False)
        traction = traction or (rear_w if front else front_w)
        steering = steering or (front_w if front else rear_w)
    want = {BICYCLE: 1, TRICYCLE: 1, ACKERMANN: 2}[kind]
    want_traction = {BICYCLE: 1, TRICYCLE: 2, ACKERMANN: 2}[kind]
    where = f'controllers_file: {r.name}'
    if len(steering) != want or len(traction) != want_traction:
        raise ConfigError(f'{kind} takes {want_traction} traction and {want} steering joints '
                          f'(traction_joints_names / steering_joints_names, or rear_ and '
                          f'front_wheels_names), got {traction} and {steering}', where=where)
    out = {'traction': traction, 'steering': steering, 'front_steering': front,
           'wheelbase': r.number('wheelbase', positive=True)}
    if kind == ACKERMANN:
        out['traction_track'] = r.number('rear_wheel_track' if front else 'front_wheel_track',
                                         positive=True)
        out['steering_track'] = r.number('front_wheel_track' if front else 'rear_wheel_track',
                                         positive=True)
        out['traction_radius'] = r.number('rear_wheels_radius' if front else
                                          'front_wheels_radius', positive=True)
        r.number('front_wheels_radius' if front else 'rear_wheels_radius', 0.0)
    elif kind == TRICYCLE:
        out['traction_track'] = r.number('wheel_track', positive=True)
        out['steering_track'] = 0.0
        out['traction_radius'] = r.number('rear_wheels_radius' if front else
                                          'front_wheels_radius', positive=True)
        r.number('front_wheels_radius' if front else 'rear_wheels_radius', 0.0)
    else:
        out['traction_track'] = out['steering_track'] = 0.0
        out['traction_radius'] = r.number('rear_wheel_radius' if front else 'front_wheel_radius',
                                          positive=True)
        r.number('front_wheel_radius' if front else 'rear_wheel_radius', 0.0)
    return out


def read_drive(name: str, kind: str, block: dict, update_rate: float) -> DriveConfig:
    """One drive controller's block as a ``DriveConfig`` (refusals name the key)."""
    r = _Reader(name, block)
    timeout_key = 'cmd_vel_timeout' if kind == DIFF_DRIVE else 'reference_timeout'
    common = _common(r, name, kind, update_rate, timeout_key)
    if kind == DIFF_DRIVE:
        geometry = _diff_drive(r)
    elif kind == MECANUM:
        geometry = _mecanum(r)
    else:
        geometry = _steering(r, kind)
    ignored = tuple(k for k in r.unread())
    return DriveConfig(geometry=geometry, no_effect=ignored, **common)


def read(path: str | os.PathLike) -> ControllersFile:
    """The controllers file at ``path``: each controller's type, the drives read whole.

    A controller of a type this package does not stand in for is refused in one line naming
    it and the types that are served; a file with no arm controller is fine."""
    path = os.fspath(path)
    doc = read_yaml(path, 'controllers file')
    blocks = _blocks(doc, path)
    manager = blocks.get('controller_manager', {})
    rate = manager.get('update_rate', DEFAULT_UPDATE_RATE)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (
            math.isfinite(rate) and 0 < rate <= 10000):
        raise ConfigError(f'expected a rate in Hz (0 to 10000), got {rate!r}',
                          where='controllers_file: controller_manager.update_rate')
    types: dict[str, str] = {}
    for key, value in manager.items():
        if isinstance(value, dict) and 'type' in value:
            kind = value['type']
            if not isinstance(kind, str):
                raise ConfigError(f'expected a controller type name, got {kind!r}',
                                  where=f'controllers_file: controller_manager.{key}.type')
            types[str(key)] = kind
    # a block naming its own type (Jazzy and later allow it there too)
    for name, block in blocks.items():
        if name != 'controller_manager' and isinstance(block.get('type'), str):
            types.setdefault(name, block['type'])
    unknown = sorted(f'{n} ({t})' for n, t in types.items() if t not in SUPPORTED)
    if unknown:
        raise ConfigError(f'controller type not served in simulation: {", ".join(unknown)}; '
                          'remove it from the file sim_node reads, or run it beside sim_node',
                          where=f'parameter controllers_file ({path})',
                          allowed=', '.join(SUPPORTED))
    drives = []
    for name, kind in types.items():
        if kind in DRIVES:
            if name not in blocks:
                raise ConfigError(f'{name} ({kind}) has no "{name}: ros__parameters:" block',
                                  where=f'parameter controllers_file ({path})')
            drives.append(read_drive(name, kind, blocks[name], float(rate)))
    return ControllersFile(path, float(rate), types, drives, blocks)


def drive_joints(drives: ControllersFile | Iterable[DriveConfig] | None) -> dict[str, str]:
    """joint -> 'velocity' (traction) or 'position' (steering) for every drive of ``drives``
    (a ``ControllersFile``, a list of ``DriveConfig``, or None): what the URDF import makes
    of those joints."""
    out: dict[str, str] = {}
    if isinstance(drives, ControllersFile):
        drives = drives.drives
    for d in drives or ():
        for j in d.wheel_joints:
            out[j] = 'velocity'
        for j in d.steering_joints:
            out[j] = 'position'
    return out
