"""``check_robot``: the conformance battery on a user's URDF or MJCF, from the command line.

Judged against the battery itself (the zoo's cell for the same URDF) and against a URDF
whose failure the zoo knows: a command that passed everything would not pass both.
"""

import json
import os
import subprocess
import sys

import pytest

from mujoco_hal_ros.conformance import battery, urdf_zoo
from mujoco_hal_ros.conformance.check import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_script(*args):
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(filter(None, [ROOT, env.get('PYTHONPATH')]))
    out = subprocess.run([sys.executable, os.path.join(ROOT, 'scripts', 'check_robot'),
                          *args], capture_output=True, text=True, timeout=600, env=env)
    return out.returncode, out.stdout, out.stderr


def test_the_installed_script_reports_what_the_zoo_cell_reports():
    paths = [p for p in urdf_zoo.urdf_paths() if p.endswith('/ur5_robot.urdf')]
    if not paths:
        pytest.skip(urdf_zoo.SHARE_MISSING)
    code, out, err = _run_script(paths[0], '--json')
    assert code == 0, out + err
    report = json.loads(out.strip().splitlines()[-1])
    assert report['model'] == 'ur5_robot' and report['kind'] == 'arm' and report['passed']
    marks = {c['check']: c['result'] for c in report['checks']}
    assert list(marks) == list(battery.CHECKS)
    cell = battery.run_named('urdf_ur5_robot')
    assert marks == {name: r.mark for name, r in cell.items()}
    assert marks['move_to'] == 'pass' and marks['trajectory'] == 'pass'


def test_a_urdf_that_fails_a_check_exits_1_and_names_it(capsys):
    """example-robot-data's double_pendulum_simple, whose move_to the zoo knows to fail
    (``zoo.KNOWN_FAILURES``: its unlimited joints swing the arm through the floor)."""
    from mujoco_hal_ros.conformance.zoo import KNOWN_FAILURES
    assert ('urdf_double_pendulum_simple', 'move_to') in KNOWN_FAILURES
    paths = [p for p in urdf_zoo.urdf_paths() if p.endswith('/double_pendulum_simple.urdf')]
    if not paths:
        pytest.skip(urdf_zoo.SHARE_MISSING)
    assert main([paths[0], '--json']) == 1
    out = capsys.readouterr().out
    report = json.loads(out.strip().splitlines()[-1])
    failed = [c['check'] for c in report['checks'] if c['result'] == 'FAIL']
    assert failed == ['move_to'] and not report['passed'], report
    assert any(line.split()[:2] == ['FAIL', 'move_to'] for line in out.splitlines())


def test_files_it_cannot_read_exit_2_saying_why(tmp_path, capsys):
    assert main([str(tmp_path / 'missing.urdf')]) == 2
    assert 'no such file' in capsys.readouterr().err
    garbage = tmp_path / 'garbage.urdf'
    garbage.write_text('<robot name="r"><link name="a"></robot>')
    assert main([str(garbage), '--json']) == 2
    captured = capsys.readouterr()
    assert 'not valid XML' in captured.err
    assert json.loads(captured.out.strip().splitlines()[-1])['error']


def test_a_gripper_bound_to_a_servo_horn_fails_and_the_fingers_pass(capsys):
    """test/models/hobby_arm.urdf: its gripper servo's horn is a continuous joint named
    ``gripper``; commanded there the fingers do not move, which the gripper check measures
    from the model's geometry. Zero-config binds the prismatic fingers and passes."""
    hobby = os.path.join(ROOT, 'test', 'models', 'hobby_arm.urdf')
    assert main([hobby, '--json', '--gripper-joint', 'gripper']) == 1
    out = capsys.readouterr().out
    report = json.loads(out.strip().splitlines()[-1])
    marks = {c['check']: c for c in report['checks']}
    assert marks['gripper']['result'] == 'FAIL', marks['gripper']
    assert 'did not move' in marks['gripper']['detail']
    assert [c for c, r in marks.items() if r['result'] == 'FAIL'] == ['gripper'], report
    good = battery.run(battery.zoo.ZooModel('hobby_arm', hobby, 'arm', urdf=True),
                       checks=('gripper',))[0]
    assert good.mark == 'pass' and good.detail.startswith('left_finger_joint'), good.detail


def test_lists_the_sensors_a_urdf_declares(capsys):
    """A URDF's Gazebo sensor tags: each sensor on a line with its topics, frame and rate,
    and in the JSON report, each read once (test/models/tb3_sensors.urdf)."""
    urdf = os.path.join(ROOT, 'test', 'models', 'tb3_sensors.urdf')
    code = main([urdf, '--kind', 'other', '--json'])
    out = capsys.readouterr().out
    report = json.loads(out.strip().splitlines()[-1])
    sensors = {s['name']: s for s in report['sensors']}
    assert code == 0 and report['passed'], out
    assert {'hls_lfcd_lds', 'tb3_imu', 'intel_realsense_r200'} <= set(sensors)
    assert sensors['hls_lfcd_lds']['topics'] == 'scan'
    assert sensors['hls_lfcd_lds']['result'] == 'pass'
    assert 'pass hls_lfcd_lds (lidar on base_scan, gazebo_classic): scan in base_scan @ 5 Hz' \
        in out
    assert any('<material>' in n for n in report['notes'])
