"""Shared test set-up: a private ROS domain, the generated interfaces, and child processes.

Import path. Every sourced ament prefix's site-packages is put on ``sys.path`` (stand-ins
such as tf2_msgs live in their own prefix). ``colcon test`` runs pytest from the build
directory with the installed package on PYTHONPATH. Run by hand from the repository root,
``python -m pytest`` puts the source tree first, whose ``mujoco_hal_ros`` has no generated
``msg``/``srv``/``action``; then the installed package's directory is appended to
``mujoco_hal_ros.__path__`` so those resolve from the install while the Python sources
under test stay the checked-out ones.

ROS domain. Every test process claims its own ``ROS_DOMAIN_ID`` (100..200, a file lock
under the temp dir so two test processes on this machine never share one) and keeps
discovery on this host, so parallel runs stay invisible to each other; children inherit it.

Helpers. Plain functions and classes the node and e2e tests share live in ``helpers.py``
beside this file; this folder is put on ``sys.path`` so ``from helpers import ...`` works
from either tier, run from any directory. The fixtures here are thin wrappers over them.
"""

import fcntl
import importlib.util
import os
import random
import subprocess
import sys
import tempfile
import time

import pytest

# Debug runs: the stepper's thread-only methods check their caller's thread (sim/stepper.py);
# set before anything imports the package, and inherited by the nodes the tests start.
os.environ.setdefault('MUJOCO_HAL_ROS_CHECK_THREADS', '1')

_DOMAIN_LOCK = None


def _claim_domain():
    """A random domain in 100..200 that no other test process here holds (a file lock)."""
    global _DOMAIN_LOCK
    folder = os.path.join(tempfile.gettempdir(), 'mujoco_hal_ros_test_domains')
    os.makedirs(folder, exist_ok=True)
    candidates = list(range(100, 201))
    random.Random(os.getpid() ^ time.time_ns()).shuffle(candidates)
    for domain in candidates:
        handle = open(os.path.join(folder, f'{domain}.lock'), 'w')
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _DOMAIN_LOCK = handle         # held until this process exits
        return domain
    return candidates[0]


if 'MUJOCO_HAL_ROS_TEST_DOMAIN' not in os.environ:    # a nested pytest keeps its parent's
    os.environ['MUJOCO_HAL_ROS_TEST_DOMAIN'] = str(_claim_domain())
os.environ['ROS_DOMAIN_ID'] = os.environ['MUJOCO_HAL_ROS_TEST_DOMAIN']
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')


def _site_packages(prefix):
    return os.path.join(prefix, 'lib', f'python{sys.version_info[0]}.{sys.version_info[1]}',
                        'site-packages')


def _add_ament_prefixes():
    """Python packages of every sourced prefix (stand-ins like tf2_msgs live in their own),
    even when PYTHONPATH was overridden on the command line."""
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        path = _site_packages(prefix) if prefix else ''
        if path and os.path.isdir(path) and path not in sys.path:
            sys.path.append(path)


def _installed_package_dirs():
    """mujoco_hal_ros directories that carry generated interfaces (msg/), from the env."""
    roots = os.environ.get('PYTHONPATH', '').split(os.pathsep)
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        if prefix:
            roots.append(_site_packages(prefix))
    out = []
    for root in roots:
        pkg = os.path.join(root, 'mujoco_hal_ros') if root else ''
        if pkg and os.path.isdir(os.path.join(pkg, 'msg')) and pkg not in out:
            out.append(os.path.abspath(pkg))
    return out


def _expose_generated_interfaces():
    try:
        import mujoco_hal_ros
    except ImportError:
        return
    if importlib.util.find_spec('mujoco_hal_ros.msg') is not None:
        return
    for pkg in _installed_package_dirs():
        if pkg not in mujoco_hal_ros.__path__:
            mujoco_hal_ros.__path__.append(pkg)


_add_ament_prefixes()
_expose_generated_interfaces()

# test/helpers.py is imported by name, whatever the import mode, tier or working directory
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from helpers import (  # noqa: E402
    child_env,
    installed_executable as _installed_executable,
    node_command,
    rerun_once,
    ros_args,
    stop_process,
    wait_for as _wait_for,
    zoo_close,
    zoo_plan,
)


def pytest_collection_modifyitems(config, items):
    rerun_once(items)
    # the zoo cells' models, planned once the selection is known (helpers.zoo_plan)
    zoo_plan([item.callspec.params['name'] for item in items
              if getattr(item, 'originalname', '') in ('test_zoo', 'test_urdf_zoo')])


def pytest_sessionfinish(session, exitstatus):
    zoo_close()


@pytest.fixture
def spawn(tmp_path):
    """Start commands in their own process group; every one is stopped at teardown.

    ``spawn(cmd, env=None, name=None, cwd=None)`` returns the Popen with stdout+stderr going
    to a file (cwd: the test's tmp_path unless given); ``spawn.output(proc)`` reads it so far.
    """
    procs = []

    def start(cmd, env=None, name=None, cwd=None):
        log = tmp_path / f'{name or "proc"}-{len(procs)}.log'
        full_env = dict(os.environ)
        full_env.update(env or {})
        handle = open(log, 'wb')
        proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=full_env,
                                cwd=cwd or tmp_path, start_new_session=True)
        proc.log_path = log
        proc.log_handle = handle
        procs.append(proc)
        return proc

    def output(proc):
        proc.log_handle.flush()
        return proc.log_path.read_text(errors='replace')

    start.output = output
    start.stop = stop_process
    try:
        yield start
    finally:
        for proc in procs:
            stop_process(proc)
            proc.log_handle.close()


@pytest.fixture(scope='session')
def wait_for():
    """``wait_for(predicate, timeout, period=0.05)``: poll until truthy; returns the value."""
    return _wait_for


@pytest.fixture(scope='session')
def installed_executable():
    """``installed_executable(name)``: lib/mujoco_hal_ros/<name> of the sourced install."""
    return _installed_executable


@pytest.fixture
def start_node(spawn):
    """``start_node(executable, *params, namespace=None, name=None)``: the installed node
    (sim_node, pool_node) under ``spawn``, each param as ``-p``, remapped into ``namespace``;
    the child sees the installed packages only (``helpers.child_env``)."""
    def start(executable, *params, namespace=None, name=None):
        cmd = node_command(executable) + ros_args(params, namespace)
        return spawn(cmd, env=child_env(), name=name or executable)
    return start


@pytest.fixture
def ctx():
    """A fresh rclpy Context, initialised; shut down after the test."""
    rclpy = pytest.importorskip('rclpy')
    c = rclpy.Context()
    rclpy.init(context=c, args=[])
    yield c
    rclpy.shutdown(context=c)


@pytest.fixture(scope='module')
def refusal_graph():
    """``(context, probe)``: a context whose probe node looks for nodes that a refused start
    should have left out of the graph. One probe per module, not per case: every node
    destroyed is a trip through the middleware's teardown (one hung at 100 % CPU in
    ``destroy_node`` here in about a thousand), and a refused node has no other reason for
    one."""
    rclpy = pytest.importorskip('rclpy')
    c = rclpy.Context()
    rclpy.init(context=c, args=[])
    probe = rclpy.create_node('refusal_probe', context=c)
    assert 'refusal_probe' in probe.get_node_names()    # the graph query itself works
    yield c, probe
    rclpy.shutdown(context=c)
