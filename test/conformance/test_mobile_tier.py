"""The mobile tier: public wheeled robots, their own URDF (xacro output) and a controllers
file as the robot's own package writes it, driven by their drive controller; judged by
ground truth (the base body's pose in the simulation), not by the controller's report.

- Clearpath Husky (skid-steer, four wheels, ``diff_drive_controller``), pybullet_data's
  ``husky.urdf`` run through ``xacro`` as its launch file does;
- the MIT racecar (car-like: front steering hinges, rear wheels;
  ``ackermann_steering_controller``), pybullet_data's ``racecar.urdf``;
- PAL's TIAGo (dual-arm, example-robot-data): a differential base with passive casters,
  ``diff_drive_controller`` beside its arm controller;
- a mobile manipulator as Clearpath composes them: the Husky with pybullet_data's KUKA iiwa
  on its top plate (the arm reaches world-frame targets from wherever the base drove).
"""

import math
import os
import subprocess
import sys

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.description.urdf_in import model_from_urdf
from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.mobile import config as cfg
from mujoco_hal_ros.mobile.base import BaseController
from mujoco_hal_ros.sim.device import Device

pybullet_data = pytest.importorskip('pybullet_data', reason='pybullet (test extras) has the '
                                    'public Husky and racecar descriptions')
HERE = os.path.dirname(os.path.abspath(__file__))
FILES = os.path.join(HERE, '..', 'models', 'mobile')
COMMAND_EVERY = 0.1      # s of simulated time between commands, as a 10 Hz teleop sends


def xacro(path):
    """What a launch file's ``Command(['xacro ', path])`` gives."""
    out = subprocess.run([sys.executable, '-c', 'import xacro; xacro.main()', path],
                         capture_output=True,
                         text=True, check=True)
    return out.stdout


ROBOTS = {
    'husky': ('husky/husky.urdf', 'husky_controllers.yaml', 'base_footprint', True),
    'racecar': ('racecar/racecar.urdf', 'racecar_controllers.yaml', 'base_link', False),
    'tiago': ('tiago_description/robots/tiago_dual.urdf', 'tiago_controllers.yaml',
              'base_footprint', False),
}


def _share():
    from mujoco_hal_ros.conformance import urdf_zoo
    return urdf_zoo.share_dir()


class Driven:
    """A robot on a paused device and its drive controller, with ground-truth readers."""

    def __init__(self, name):
        rel, controllers, self.base_body, needs_xacro = ROBOTS[name]
        roots = ()
        if name == 'tiago':             # example-robot-data: package:// meshes
            share = _share()
            if share is None:
                pytest.skip('example-robot-data (test extras) has TIAGo')
            roots = (share,)
            urdf = os.path.join(share, 'example-robot-data', 'robots', rel)
        else:
            urdf = os.path.join(pybullet_data.getDataPath(), rel)
        text = xacro(urdf) if needs_xacro else open(urdf, encoding='utf-8').read()
        files = cfg.read(os.path.join(FILES, controllers))
        path, self.notes = model_from_urdf(text, base_dir=os.path.dirname(urdf),
                                           package_roots=roots,
                                           drives=cfg.drive_joints(files))
        self.device = Device(model=path, real_time_factor=0, start_paused=True)
        self.config = files.drives[0]
        self.base = BaseController(self.device, self.config)
        self.body = mujoco.mj_name2id(self.device.model, mujoco.mjtObj.mjOBJ_BODY,
                                      self.base_body)
        self.dt = self.device.model.opt.timestep

    def pose(self):
        s = self.device.snapshot
        q = s.xquat[self.body]
        yaw = math.atan2(2 * (q[0] * q[3] + q[1] * q[2]), 1 - 2 * (q[2] ** 2 + q[3] ** 2))
        return s.xpos[self.body].copy(), yaw

    def drive(self, seconds, command=None):
        """Step ``seconds``, sending ``command`` (vx, vy, wz) every COMMAND_EVERY."""
        every = int(round(COMMAND_EVERY / self.dt))
        for _ in range(int(round(seconds / COMMAND_EVERY))):
            if command is not None:
                self.base.command(*command)
            self.device.step(every)

    def close(self):
        self.base.close()
        self.device.close()


@pytest.fixture(params=sorted(ROBOTS))
def robot(request):
    r = Driven(request.param)
    yield r
    r.close()


def _unwrap(a):
    return (a + math.pi) % (2 * math.pi) - math.pi


def test_a_free_base_on_its_wheels(robot):
    m = robot.device.model
    assert int(mujoco.mjtJoint.mjJNT_FREE) in [int(t) for t in m.jnt_type]
    assert any('free base' in n for n in robot.notes)
    for joint in robot.config.wheel_joints:
        a = m.actuator(joint).id
        assert m.actuator_biasprm[a, 1] == 0 and m.actuator_biasprm[a, 2] < 0   # velocity


def test_straight_line_matches_command_and_odometry_matches_ground_truth(robot):
    robot.drive(1.0)                              # settle on the floor
    p0, y0 = robot.pose()
    o0 = robot.base.state
    robot.drive(2.0, (0.5, 0.0, 0.0))             # accelerate
    p1, _ = robot.pose()
    robot.drive(4.0, (0.5, 0.0, 0.0))             # steady: 2 m
    p2, y2 = robot.pose()
    o = robot.base.state
    speed = np.linalg.norm(p2[:2] - p1[:2]) / 4.0
    assert speed == pytest.approx(0.5, rel=0.10), 'ground-truth speed vs the command'
    gt = np.linalg.norm(p2[:2] - p0[:2])
    odom = math.hypot(o.x - o0.x, o.y - o0.y)
    assert gt > 2.0
    assert odom == pytest.approx(gt, rel=0.05), 'odometry vs ground truth over > 2 m'
    assert abs(_unwrap(y2 - y0)) < 0.05


def test_turn_matches_command(robot):
    if robot.config.type == cfg.DIFF_DRIVE:
        pytest.skip('skid-steer: its yaw rate is set by tyre slip, which the robot\'s own '
                    'wheel_separation_multiplier calibrates (measured in bench_mobile.py)')
    robot.drive(1.0)
    robot.drive(2.0, (0.5, 0.0, 0.5))
    _, y1 = robot.pose()
    robot.drive(4.0, (0.5, 0.0, 0.5))
    _, y2 = robot.pose()
    assert _unwrap(y2 - y1) / 4.0 == pytest.approx(0.5, rel=0.10)


def test_stands_still_and_hold_stops_it(robot):
    robot.drive(1.0)
    p0, _ = robot.pose()
    robot.drive(60.0)                             # a minute with no command
    p1, _ = robot.pose()
    assert np.linalg.norm(p1[:2] - p0[:2]) < 0.01
    robot.drive(2.0, (0.5, 0.0, 0.0))
    robot.device.hold()
    robot.device.step(int(1.0 / robot.dt))
    p2, _ = robot.pose()
    robot.device.step(int(2.0 / robot.dt))
    p3, _ = robot.pose()
    assert np.linalg.norm(p3[:2] - p2[:2]) < 0.01, 'hold stops the base'
    robot.drive(2.0, (0.5, 0.0, 0.0))             # the next command takes the wheels again
    p4, _ = robot.pose()
    assert np.linalg.norm(p4[:2] - p3[:2]) > 0.3


def test_commands_stop_after_the_timeout(robot):
    robot.drive(1.0)
    robot.drive(2.0, (0.5, 0.0, 0.0))
    robot.drive(2.0)                              # no command: the timeout stops it
    p0, _ = robot.pose()
    robot.drive(2.0)
    p1, _ = robot.pose()
    assert np.linalg.norm(p1[:2] - p0[:2]) < 0.01


@pytest.mark.parametrize('bad', [float('nan'), float('inf'), 1e308, True, '1', None])
def test_bad_commands_refused_and_change_nothing(robot, bad):
    robot.drive(1.0)
    robot.drive(1.0, (0.3, 0.0, 0.0))
    before = robot.base.commands
    for command in ((bad, 0.0, 0.0), (0.0, 0.0, bad)):
        with pytest.raises(DeviceError):
            robot.base.command(*command)
    assert robot.base.commands == before
    p0, _ = robot.pose()
    robot.device.step(int(0.2 / robot.dt))
    p1, _ = robot.pose()
    assert np.linalg.norm(p1[:2] - p0[:2]) > 0.03     # still driving on the last good one


def test_speed_limits_of_the_file_hold():
    r = Driven('husky')
    try:
        r.drive(1.0)
        r.drive(4.0, (5.0, 0.0, 0.0))                 # five times the file's max_velocity
        assert r.base.state.command[0] == pytest.approx(r.config.linear.max_velocity)
        p0, _ = r.pose()
        r.drive(2.0, (5.0, 0.0, 0.0))
        p1, _ = r.pose()
        assert np.linalg.norm(p1[:2] - p0[:2]) / 2.0 < 1.1 * r.config.linear.max_velocity
    finally:
        r.close()


def husky_with_arm():
    """A mobile manipulator as Clearpath composes them (husky_ur5 and the like): the
    Husky's xacro output with pybullet_data's KUKA iiwa bolted to its top plate."""
    import xml.etree.ElementTree as ET
    data = pybullet_data.getDataPath()
    husky = ET.fromstring(xacro(os.path.join(data, 'husky', 'husky.urdf')))
    arm = ET.parse(os.path.join(data, 'kuka_iiwa', 'model.urdf')).getroot()
    for elem in arm:
        if elem.tag in ('link', 'joint'):
            for mesh in elem.iter('mesh'):
                mesh.set('filename', os.path.join(data, 'kuka_iiwa', mesh.get('filename')))
            husky.append(elem)
    for mesh in husky.iter('mesh'):
        if mesh.get('filename').startswith('meshes/'):
            mesh.set('filename', os.path.join(data, 'husky', mesh.get('filename')))
    mount = ET.SubElement(husky, 'joint', name='arm_mount', type='fixed')
    ET.SubElement(mount, 'parent', link='top_plate_link')
    ET.SubElement(mount, 'child', link='lbr_iiwa_link_0')
    ET.SubElement(mount, 'origin', xyz='0.2 0 0.01', rpy='0 0 0')
    return ET.tostring(husky, encoding='unicode')


def test_mobile_manipulator_drives_and_reaches_in_the_world_frame():
    files = cfg.read(os.path.join(FILES, 'husky_controllers.yaml'))
    path, _notes = model_from_urdf(husky_with_arm(),
                                   drives=cfg.drive_joints(files))
    dev = Device(model=path, real_time_factor=0, start_paused=True)
    base = BaseController(dev, files.drives[0])
    try:
        m = dev.model
        hand = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'lbr_iiwa_link_7')
        body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'base_footprint')
        dev.step(500)
        for _ in range(30):                       # 3 s at 0.5 m/s, the arm at home
            base.command(0.5, 0.0, 0.0)
            dev.step(50)
        for _ in range(20):                       # stopped by the timeout
            dev.step(50)
        moved = dev.snapshot.xpos[body].copy()
        assert moved[0] > 1.0, 'the base drove with the arm on it'
        # a point in the world frame, in front of where the base now is
        target = moved + np.array([0.55, 0.1, 0.75])
        dev.move_to(point=target.tolist(), site='lbr_iiwa_link_7', wait=False)
        for _ in range(60):
            dev.step(100)
            if dev.snapshot.plans == () or not dev.moves:
                break
        reached = dev.snapshot.xpos[hand]
        assert np.linalg.norm(reached - target) < 0.01, 'FK of the hand vs the world target'
        # both at once: the base drives while the arm holds its pose over it
        start = dev.snapshot.xpos[body].copy()
        for _ in range(20):
            base.command(0.3, 0.0, 0.0)
            dev.step(50)
        assert dev.snapshot.xpos[body][0] - start[0] > 0.4
        rel = dev.snapshot.xpos[hand] - dev.snapshot.xpos[body]
        assert np.linalg.norm(rel - (reached - moved)) < 0.03, 'the arm rode along'
        dev.hold()
        dev.step(500)
        p0 = dev.snapshot.xpos[body].copy()
        dev.step(1000)
        assert np.linalg.norm(dev.snapshot.xpos[body][:2] - p0[:2]) < 0.005
    finally:
        base.close()
        dev.close()


def test_gazebo_diff_drive_plugin_drives_a_turtlebot():
    """No controllers file: the URDF's own libgazebo_ros_diff_drive.so tags are the drive
    (topics /cmd_vel and /odom, the plugin's wheel size, separation and acceleration)."""
    from mujoco_hal_ros.mobile.gazebo_drive import drives_from_urdf
    with open(os.path.join(FILES, 'turtlebot3_burger.urdf'), encoding='utf-8') as handle:
        text = handle.read()
    (drive,), notes = drives_from_urdf(text)
    assert (drive.command_topic, drive.odom_topic) == ('/cmd_vel', '/odom')
    assert drive.linear.max_acceleration == 1.0 and not drive.stamped
    assert any('<max_wheel_torque>' in n for n in notes)     # named, not silently dropped
    path, _ = model_from_urdf(text, drives=cfg.drive_joints([drive]))
    dev = Device(model=path, real_time_factor=0, start_paused=True)
    base = BaseController(dev, drive)
    try:
        body = mujoco.mj_name2id(dev.model, mujoco.mjtObj.mjOBJ_BODY, 'base_footprint')
        dev.step(500)
        p0 = dev.snapshot.xpos[body].copy()
        o0 = base.state
        for _ in range(100):                       # 10 s at 0.2 m/s (burger's max 0.22)
            base.command(0.2, 0.0, 0.0)
            dev.step(50)
        p1 = dev.snapshot.xpos[body].copy()
        gt = np.linalg.norm(p1[:2] - p0[:2])
        assert gt == pytest.approx(0.2 * 10.0, rel=0.10)
        o = base.state
        assert math.hypot(o.x - o0.x, o.y - o0.y) == pytest.approx(gt, rel=0.05)
        q0 = dev.snapshot.xquat[body].copy()
        for _ in range(40):                        # 4 s at 1 rad/s, in place
            base.command(0.0, 0.0, 1.0)
            dev.step(50)
        q1 = dev.snapshot.xquat[body]
        yaw = [math.atan2(2 * (q[0] * q[3] + q[1] * q[2]), 1 - 2 * (q[2] ** 2 + q[3] ** 2))
               for q in (q0, q1)]
        turned = _unwrap(yaw[1] - yaw[0])
        ramp = 1.0 / (2.0 * drive.linear.max_acceleration / 0.16)   # s to reach 1 rad/s
        assert turned == pytest.approx(_unwrap(1.0 * (4.0 - ramp / 2)), abs=0.1 * 4.0)
    finally:
        base.close()
        dev.close()


def test_robots_file_base_per_robot(tmp_path):
    """The robots file's ``base``: the Husky beside a bolted copy of itself; the free one
    rests on its wheels on the world's floor (its wheels velocity servos from its own
    controllers file), the fixed one stays where it was put."""
    from mujoco_hal_ros import menagerie
    from mujoco_hal_ros.world import robots_file
    data = pybullet_data.getDataPath()
    text = xacro(os.path.join(data, 'husky', 'husky.urdf')).replace(
        'filename="meshes/', f'filename="{data}/husky/meshes/')
    (tmp_path / 'husky.urdf').write_text(text)
    controllers = os.path.join(FILES, 'husky_controllers.yaml')
    entries = robots_file.parse({'robots': [
        {'namespace': 'rover', 'urdf': 'husky.urdf', 'position': [0.0, 1.0, 0.2],
         'controllers_file': controllers},
        {'namespace': 'statue', 'urdf': 'husky.urdf', 'position': [0.0, -1.0, 0.2],
         'base': 'fixed'}]}, str(tmp_path))
    with pytest.raises(Exception) as err:
        robots_file.parse({'robots': [{'namespace': 'x', 'urdf': 'husky.urdf',
                                       'base': 'wobbly'}]}, str(tmp_path))
    assert 'auto, fixed or floating' in str(err.value)
    with Device(model=menagerie.empty_world_path(), real_time_factor=0,
                start_paused=True) as dev:
        robots_file.add_to(dev, entries)
        m = dev.model
        frees = [m.joint(j).name for j in range(m.njnt)
                 if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE)]
        assert len(frees) == 1 and frees[0].startswith('rover'), frees
        wheel = [a for a in range(m.nu) if m.actuator(a).name.startswith('rover')
                 and m.actuator(a).name.endswith('front_left_wheel')]
        assert wheel and m.actuator_biasprm[wheel[0], 1] == 0    # a velocity servo
        rover = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'rover/base_footprint')
        statue = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'statue/base_footprint')
        dev.step(1000)
        assert abs(dev.snapshot.xpos[rover][2]) < 0.02, 'fell onto the floor and rests'
        assert dev.snapshot.xpos[statue][2] == pytest.approx(0.2, abs=1e-6)
