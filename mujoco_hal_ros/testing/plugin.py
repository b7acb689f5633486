"""pytest plugin: the ``sim_robot`` fixture (enable with ``-p mujoco_hal_ros.testing.plugin``
or ``pytest_plugins = ['mujoco_hal_ros.testing.plugin']``).

``sim_robot(**kwargs)`` makes a ``SimRobot`` (same arguments), recording its topics into a
temporary rosbag2 folder; after the test every robot it made is closed, whatever the test
did, and the recording of a failed test is kept under ``$MUJOCO_HAL_ROS_ARTIFACTS`` (default
``test-artifacts/``) in a folder named after the test, where CI keeps artefacts.
"""

from collections.abc import Callable, Generator, Iterator
import os
import re
import shutil
import tempfile
from typing import Any

import pytest

from .robot import SimRobot

ARTIFACTS_ENV = 'MUJOCO_HAL_ROS_ARTIFACTS'

# whether the test's call phase failed, for the fixture's teardown (a kept recording)
_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
        item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == 'call':
        item.stash[_FAILED] = report.failed


@pytest.fixture
def sim_robot(request: pytest.FixtureRequest) -> Iterator[Callable[..., SimRobot]]:
    """A factory of ``SimRobot`` closed after the test (see the module docstring)."""
    made: list[SimRobot] = []
    scratch = tempfile.mkdtemp(prefix='sim_robot_')

    def make(**kwargs):
        if 'record' not in kwargs and not kwargs.get('process'):
            kwargs['record'] = os.path.join(scratch, f'bag{len(made)}')
        robot = SimRobot(**kwargs)
        made.append(robot)
        return robot

    yield make
    failed = request.node.stash.get(_FAILED, False)
    folders = []
    for robot in made:
        try:
            folders.append(robot.stop_recording())
        finally:
            robot.close()
    if failed:
        root = os.environ.get(ARTIFACTS_ENV, 'test-artifacts')
        name = re.sub(r'[^A-Za-z0-9_.-]+', '_', request.node.nodeid)[-120:]
        for i, folder in enumerate(f for f in folders if f):
            dest = os.path.join(root, name, f'robot{i}')
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copytree(folder, dest, dirs_exist_ok=True)
    shutil.rmtree(scratch, ignore_errors=True)
