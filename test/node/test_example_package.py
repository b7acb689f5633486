"""The example user package (examples/my_robot_tests) passes its own tests with only the
installed fixture, as its colcon test would run them."""

import os
import subprocess
import sys

import pytest

pytest.importorskip('rclpy')

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..'))
PACKAGE = os.path.join(ROOT, 'examples', 'my_robot_tests')


def test_the_example_package_passes_its_own_tests(tmp_path):
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join([PACKAGE, env.get('PYTHONPATH', '')])
    env['MUJOCO_HAL_ROS_ARTIFACTS'] = str(tmp_path / 'artifacts')
    ini = tmp_path / 'pytest.ini'
    ini.write_text('[pytest]\n')                  # the package's own settings, not ours
    out = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
                          '-c', str(ini), '--rootdir', PACKAGE, 'test'],
                         cwd=PACKAGE, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert '3 passed' in out.stdout, out.stdout[-2000:]
    assert not os.path.exists(tmp_path / 'artifacts'), 'a passing test keeps no recording'


def test_a_failed_test_keeps_its_recording(tmp_path):
    (tmp_path / 'conftest.py').write_text(
        "pytest_plugins = ['mujoco_hal_ros.testing.plugin']\n")
    (tmp_path / 'test_fails.py').write_text(
        'def test_the_arm_never_moves(sim_robot):\n'
        '    robot = sim_robot()\n'
        '    robot.step(0.5)\n'
        '    assert False, "on purpose"\n')
    env = dict(os.environ, MUJOCO_HAL_ROS_ARTIFACTS=str(tmp_path / 'artifacts'))
    (tmp_path / 'pytest.ini').write_text('[pytest]\n')
    out = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
                          '-c', str(tmp_path / 'pytest.ini'), 'test_fails.py'],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert '1 failed' in out.stdout, out.stdout[-3000:]
    kept = [os.path.join(d, f) for d, _, files in os.walk(tmp_path / 'artifacts')
            for f in files]
    assert any(f.endswith('metadata.yaml') for f in kept), kept
    assert any(f.endswith('.mcap') for f in kept), kept
