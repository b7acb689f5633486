"""Stand-in interface packages are built only where the real ones are missing.

These run the same decision the set-up runs (scripts/standins.py) and colcon's own package
discovery, so they show how the "never over a real package" rule was checked.
"""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SCRIPT = os.path.join(ROOT, 'scripts', 'standins.py')


def _needed(pythonpath):
    env = dict(os.environ, PYTHONPATH=pythonpath)
    out = subprocess.run([sys.executable, SCRIPT], env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    return [os.path.basename(p) for p in out.stdout.split()]


def _fake_package(base, name, sub, standin_marker=False):
    prefix = base / 'prefix'
    pkg = prefix / 'lib' / 'python3.11' / 'site-packages' / name
    (pkg / sub).mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / sub / '__init__.py').write_text('')
    if standin_marker:
        (prefix / 'share' / name).mkdir(parents=True)
        (prefix / 'share' / name / 'STANDIN').write_text('ours')
    return str(pkg.parent)


def test_missing_packages_get_a_stand_in(tmp_path):
    empty = tmp_path / 'empty'
    empty.mkdir()
    assert {'tf2_msgs', 'control_msgs'} <= set(_needed(str(empty)))


def test_a_real_package_is_never_replaced(tmp_path):
    site = _fake_package(tmp_path, 'tf2_msgs', 'msg')
    needed = _needed(site)
    assert 'tf2_msgs' not in needed
    assert 'control_msgs' in needed


def test_our_own_earlier_stand_in_is_still_ours(tmp_path):
    site = _fake_package(tmp_path, 'tf2_msgs', 'msg', standin_marker=True)
    assert 'tf2_msgs' in _needed(site)


def test_plain_colcon_build_in_a_workspace_finds_only_the_package(tmp_path):
    colcon = shutil.which('colcon')
    if colcon is None:
        pytest.skip('colcon is not on PATH')
    src = tmp_path / 'ws' / 'src'
    src.mkdir(parents=True)
    os.symlink(ROOT, src / 'mujoco_hal_ros')
    out = subprocess.run([colcon, 'list', '--names-only', '--base-paths', str(src)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path / 'ws')
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ['mujoco_hal_ros']


def test_set_up_reads_the_decision_whole_before_matching():
    # `standins.py | grep -q` under pipefail races: grep exits at the first match, Python
    # dies of EPIPE (PYTHONUNBUFFERED=1 makes it likely) and a missing package reads as real.
    with open(os.path.join(ROOT, 'scripts', 'setup.sh'), encoding='utf-8') as handle:
        setup = handle.read()
    assert 'standins.py |' not in setup
    assert 'needed_standins=$(python scripts/standins.py)' in setup
    assert 'scripts/check_interfaces.py' in setup


def test_the_decision_is_the_same_under_a_closed_pipe_and_unbuffered_output(tmp_path):
    empty = tmp_path / 'empty'
    empty.mkdir()
    env = dict(os.environ, PYTHONPATH=str(empty), PYTHONUNBUFFERED='1')
    script = (f'set -o pipefail; needed=$("{sys.executable}" "{SCRIPT}"); '
              f'grep -qx -e "{ROOT}/standins/control_msgs" <<<"$needed"')
    for _ in range(10):
        assert subprocess.run(['bash', '-c', script], env=env, timeout=60).returncode == 0


def test_set_up_fails_loudly_when_an_interface_is_missing(tmp_path):
    empty = tmp_path / 'empty'
    empty.mkdir()
    check = os.path.join(ROOT, 'scripts', 'check_interfaces.py')
    out = subprocess.run([sys.executable, '-S', check], env=dict(os.environ, PYTHONPATH=''),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert 'missing interface control_msgs.action' in out.stderr
