"""EnvPool on MuJoCo 3.x through the public mjbatch library, measured in the venv the set-up
builds for it (mjbatch pins a MuJoCo 3 release, which cannot load beside this process's
MuJoCo 4): ``mjbatch_check.py`` runs there and reports; every judgement is made here.
"""

import json
import os
import subprocess

import pytest

import mujoco_hal_ros
from mujoco_hal_ros.pool import jacobian

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
PYTHON = os.path.join(ROOT, '.venv-mjbatch', 'bin', 'python')
# the package this process imported (colcon's install, with the compiled Jacobian loop)
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(mujoco_hal_ros.__file__)))


@pytest.fixture(scope='module')
def report():
    if not os.access(PYTHON, os.X_OK):
        pytest.skip('no .venv-mjbatch: scripts/setup.sh builds it from '
                    'requirements-mjbatch.txt (it could not here; see its log line)')
    out = subprocess.run([PYTHON, os.path.join(os.path.dirname(__file__), 'mjbatch_check.py')],
                         capture_output=True, text=True, timeout=240,
                         env={**os.environ, 'PYTHONPATH': PACKAGE_PARENT})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_auto_picks_mjbatch_on_mujoco_3(report):
    assert report['mujoco'].startswith('3.')
    assert (report['engine'], report['library']) == ('batch', 'mjbatch')


def test_bit_identical_to_a_serial_loop_and_to_the_thread_engine(report):
    assert report['const_ctrl_equal']           # held controls, against plain mj_step too
    assert report['subset_sensors_equal']       # unordered env subset, sensors at the end
    assert report['sensors_nonzero']


def test_randomization_lands_per_environment_as_on_threads(report):
    assert report['randomized_equal'] and report['randomization_moved']


def test_site_jacobians_on_mujoco_3_equal_mj_jacSite(report):
    assert report['jacobian_nonzero'] and report['jacobian_error'] < 1e-12
    if jacobian.why_unavailable() is None:   # one build serves MuJoCo 3 and 4 alike
        assert report['jacobian_unavailable'] is None


def test_bad_input_is_refused_and_changes_nothing(report):
    assert report['nan_refused'] and report['nan_changed_nothing']


def test_a_mujoco_error_changes_nothing_and_names_the_environment(report):
    lib, threads = report['errors']['auto'], report['errors']['threads']
    assert lib is not None and threads is not None, report['errors']
    assert lib['unchanged'] and threads['unchanged']
    assert lib['env_ids'] and set(lib['env_ids']) <= set(threads['env_ids'])
    assert 'out of memory' in lib['message'] and 'others may have too' in lib['message']
