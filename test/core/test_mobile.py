"""Drive controllers without a simulation: the controllers file read as controller_manager
reads it, each drive's kinematics against its inverse, the speed limiter, the odometry."""

import math

import numpy as np
import pytest

from mujoco_hal_ros.errors import ConfigError
from mujoco_hal_ros.mobile import config as cfg
from mujoco_hal_ros.mobile.kinematics import DiffDrive, for_config, Mecanum, Steering
from mujoco_hal_ros.mobile.motion import Odometry, SpeedLimiter

DIFF = """
controller_manager:
  ros__parameters:
    update_rate: 50
    joint_state_broadcaster:
      type: joint_state_broadcaster/JointStateBroadcaster
    diff_cont:
      type: diff_drive_controller/DiffDriveController
diff_cont:
  ros__parameters:
    left_wheel_names: [fl, rl]
    right_wheel_names: [fr, rr]
    wheel_separation: 0.5
    wheel_radius: 0.1
    wheel_separation_multiplier: 2.0
    linear.x.max_velocity: 1.0
    linear.x.max_acceleration: 2.0
    use_stamped_vel: false
"""


def write(tmp_path, text, name='controllers.yaml'):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_diff_drive_block_read_with_defaults(tmp_path):
    files = cfg.read(write(tmp_path, DIFF))
    assert files.update_rate == 50.0
    (d,) = files.drives
    assert d.type == cfg.DIFF_DRIVE and d.wheel_joints == ['fl', 'rl', 'fr', 'rr']
    assert d.geometry['wheel_separation'] == pytest.approx(1.0)       # times the multiplier
    assert d.stamped is False and d.cmd_vel_timeout == 0.5 and d.position_feedback
    assert d.linear.max_velocity == 1.0 and d.linear.min_velocity == -1.0
    assert math.isnan(d.angular.max_velocity)
    assert cfg.drive_joints(files) == dict.fromkeys(['fl', 'rl', 'fr', 'rr'], 'velocity')


@pytest.mark.parametrize('line, key', [
    ('    wheel_radius: .nan', 'wheel_radius'),
    ('    wheel_radius: -0.1', 'wheel_radius'),
    ('    wheel_radius: true', 'wheel_radius'),
    ('    wheel_separation: 1.0e308000', 'wheel_separation'),
    ('    left_wheel_names: []', 'left_wheel_names'),
    ('    open_loop: 1', 'open_loop'),
    ('    linear.x.min_velocity: 5.0', 'linear.x'),
])
def test_bad_drive_parameter_refused_naming_it(tmp_path, line, key):
    key_name = line.split(':')[0].strip()
    text = '\n'.join(x for x in DIFF.splitlines() if x.split(':')[0].strip() != key_name)
    with pytest.raises(ConfigError) as err:
        cfg.read(write(tmp_path, text + '\n' + line + '\n'))
    assert key in str(err.value)


def test_unknown_controller_type_refused_naming_the_supported(tmp_path):
    text = DIFF.replace('joint_state_broadcaster/JointStateBroadcaster',
                        'my_pkg/MagicController')
    with pytest.raises(ConfigError) as err:
        cfg.read(write(tmp_path, text))
    assert 'my_pkg/MagicController' in str(err.value)
    assert cfg.DIFF_DRIVE in str(err.value)


def test_hostile_files_refused(tmp_path):
    for text in ('- a list', 'a: &x [*x]', 'x: ' + '[' * 100 + ']' * 100, '\0'):
        with pytest.raises(ConfigError):
            cfg.read(write(tmp_path, text))


def test_steering_names_in_both_forms(tmp_path):
    block = """
controller_manager:
  ros__parameters:
    car:
      type: ackermann_steering_controller/AckermannSteeringController
car:
  ros__parameters:
    {names}
    wheelbase: 0.3
    front_wheel_track: 0.2
    rear_wheel_track: 0.22
    front_wheels_radius: 0.05
    rear_wheels_radius: 0.06
"""
    old = block.format(names='rear_wheels_names: [rr, rl]\n    front_wheels_names: [fr, fl]')
    new = block.format(names='traction_joints_names: [rr, rl]\n'
                       '    steering_joints_names: [fr, fl]')
    for text in (old, new):
        (d,) = cfg.read(write(tmp_path, text)).drives
        assert d.wheel_joints == ['rr', 'rl'] and d.steering_joints == ['fr', 'fl']
        assert d.geometry['traction_radius'] == 0.06 and d.geometry['traction_track'] == 0.22
        assert not d.position_feedback            # the steering controllers' default


@pytest.mark.parametrize('kin', [
    DiffDrive(2, 2, 0.6, 0.1, 0.12),
    Mecanum(0.05, 0.4),
    Steering(cfg.BICYCLE, 0.3, 0.05),
    Steering(cfg.TRICYCLE, 0.3, 0.05, traction_track=0.25),
    Steering(cfg.ACKERMANN, 0.3, 0.05, traction_track=0.25, steering_track=0.2),
])
def test_commands_and_odometry_are_inverse(kin):
    for vx, vy, wz in ((0.5, 0.0, 0.0), (0.4, 0.0, 0.8), (-0.3, 0.0, -0.5), (0.2, 0.3, 0.4)):
        if not kin.holonomic:
            vy = 0.0
        wheels, steering = kin.commands(vx, vy, wz)
        assert np.allclose(kin.twist(wheels, steering), (vx, vy, wz), atol=1e-9)


def test_ackermann_inner_wheel_steers_more():
    kin = Steering(cfg.ACKERMANN, 0.3, 0.05, traction_track=0.25, steering_track=0.2)
    wheels, (right, left) = kin.commands(1.0, 0.0, 1.0)        # a left turn, radius 1 m
    assert left > right > 0
    assert math.tan(left) == pytest.approx(0.3 / (1.0 - 0.1))
    assert wheels[0] > wheels[1]                                   # the outer wheel rolls faster


def test_limiter_bounds_velocity_acceleration_and_jerk():
    lim = SpeedLimiter(cfg.AxisLimits(-1.0, 1.0, -2.0, 2.0, -50.0, 50.0))
    dt, out = 0.02, []
    for _ in range(100):
        out.append(lim.limit(5.0, dt))
    v = np.array([0.0] + out)
    acc = np.diff(v) / dt
    assert v.max() == pytest.approx(1.0) and acc.max() <= 2.0 + 1e-9
    assert (np.abs(np.diff(acc)) / dt).max() <= 2 * 50.0 + 1e-6


def test_odometry_drives_an_exact_circle():
    odom = Odometry()
    for _ in range(1000):                       # 2 pi rad at 1 rad/s, radius 0.5 m
        odom.integrate(0.5, 0.0, 1.0, 2 * math.pi / 1000)
    assert abs(odom.x) < 1e-9 and abs(odom.y) < 1e-9
    odom.reset()
    for _ in range(10):
        odom.integrate(1.0, 0.0, 0.0, 0.1)
    assert (odom.x, odom.y) == pytest.approx((1.0, 0.0)) and odom.twist() == (1.0, 0.0, 0.0)


def test_for_config_matches_the_file(tmp_path):
    (d,) = cfg.read(write(tmp_path, DIFF)).drives
    wheels, _ = for_config(d).commands(1.0, 0.0, 0.0)
    assert np.allclose(wheels, 10.0)
