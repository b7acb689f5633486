"""The adversarial tier: property-based tests of every core entry point that takes input.

Hypothesis draws hostile values (huge, NaN, inf, booleans, numpy booleans, wrong lengths,
duplicate and megabyte names, random YAML) and each test checks the same two invariants:
a bad input raises a ``DeviceError`` with a code (never a raw TypeError, ValueError or
OverflowError, never a hang) and changes nothing; a good input never raises. Runs are
derandomized so CI sees the same examples every time, and bounded so the tier stays short.
"""

import os
import sys

from hypothesis import HealthCheck, settings
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_helpers import BENCH_ENV, BENCH_YAML  # noqa: E402

from mujoco_hal_ros.sim.device import Device  # noqa: E402

settings.register_profile(
    'adversarial', derandomize=True, database=None, deadline=None, max_examples=100,
    print_blob=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large, HealthCheck.filter_too_much])
settings.load_profile('adversarial')


@pytest.fixture(scope='module')
def bench():
    """One bench arm per module, paused at rtf 0 and settled at its keyframe."""
    dev = Device(BENCH_YAML, environ=BENCH_ENV, real_time_factor=0, start_paused=True)
    dev.step(2000)
    yield dev
    dev.close()
