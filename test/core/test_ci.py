"""CI runs the suite on Kilted and on Jazzy and reports each distro's counts separately."""

import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))

FAKE_MAKE = """#!/bin/bash
if [ "$ROS_WHEELS" = kilted ]; then echo "10 passed, 0 failed, 2 skipped, 1 rerun"
else echo "8 passed, 1 failed, 3 skipped, 2 rerun"; exit 1; fi
"""


def test_ci_labels_each_distro_and_sums_them(tmp_path):
    make = tmp_path / 'make'
    make.write_text(FAKE_MAKE)
    make.chmod(0o755)
    env = dict(os.environ, PATH=f'{tmp_path}:{os.environ["PATH"]}')
    out = subprocess.run(['bash', os.path.join(ROOT, '.ci', 'run')], env=env,
                         capture_output=True, text=True, timeout=60)
    lines = out.stdout.splitlines()
    assert out.returncode == 1                                # jazzy failed
    assert 'kilted: 10 passed, 0 failed, 2 skipped, 1 rerun' in lines
    assert 'jazzy: 8 passed, 1 failed, 3 skipped, 2 rerun' in lines
    assert lines[-1] == '18 passed, 1 failed, 5 skipped, 3 rerun'


def test_each_distro_has_its_wheels_and_pins():
    for name in ('requirements-ros-wheels.txt', 'requirements-ros-wheels-jazzy.txt',
                 'constraints-kilted.txt', 'constraints-jazzy.txt'):
        assert os.path.isfile(os.path.join(ROOT, name)), name
    with open(os.path.join(ROOT, 'requirements-ros-wheels-jazzy.txt'), encoding='utf-8') as f:
        ros = [line.strip() for line in f if line.startswith('ros-')]
    assert ros and all(line.startswith('ros-jazzy-') for line in ros)
    with open(os.path.join(ROOT, 'scripts', 'setup.sh'), encoding='utf-8') as f:
        setup = f.read()
    assert 'jazzy) SUFFIX="-jazzy"; WHEELS_REQ=requirements-ros-wheels-jazzy.txt' in setup
