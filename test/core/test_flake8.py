"""Style gate, as ament_flake8 would be on a ROS build farm: 99 columns, no unused names."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
PATHS = ['mujoco_hal_ros', 'test', 'bench', 'launch', 'scripts', 'examples']


def test_flake8_clean():
    pytest.importorskip('flake8', reason='flake8 is not installed (it is in the test extra)')
    files = [os.path.join(ROOT, p) for p in PATHS] + [
        os.path.join(ROOT, 'scripts', name)
        for name in ('sim_node', 'pool_node', 'evaluate_policy', 'check_robot')]
    out = subprocess.run([sys.executable, '-m', 'flake8', '--config',
                          os.path.join(ROOT, 'setup.cfg'), *files],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
