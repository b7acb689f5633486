"""The fast paths' one switch: off, no tuning function changes the thread or the process."""

import os
import sys
import threading

import pytest

from mujoco_hal_ros import fastpath
from mujoco_hal_ros.fastpath import process, raster, sched


@pytest.fixture
def off():
    fastpath.configure(False)
    try:
        yield
    finally:
        fastpath.configure(True)


def _in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(10.0)
    return out[0]


def test_on_by_default_and_only_a_bool_turns_it():
    assert fastpath.enabled() is True
    with pytest.raises(TypeError, match='expected a bool'):
        fastpath.configure('false')
    assert fastpath.enabled() is True


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='Linux scheduler only')
def test_off_no_thread_asks_the_scheduler(off):
    def ask():
        before = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
        out = (sched.short_slice(), sched.realtime(1), sched.ordinary())
        return out, before, (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
    (short, why, _), before, after = _in_thread(ask)
    assert short is False and 'fast_paths:=false' in why
    assert after == before


def test_off_rasterisers_and_process_stay_as_they_are(off):
    interval = sys.getswitchinterval()
    assert raster.rasterisers_in_background(True) is False
    assert process.tune_interpreter() is False
    assert sys.getswitchinterval() == interval


def test_on_the_process_is_tuned():
    interval = sys.getswitchinterval()
    try:
        assert process.tune_interpreter() is True
        assert sys.getswitchinterval() == pytest.approx(process.SWITCH_INTERVAL_S)
    finally:
        sys.setswitchinterval(interval)
