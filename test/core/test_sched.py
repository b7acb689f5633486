"""A thread asks for a short EEVDF slice for itself; its policy and nice value stay."""

import os
import platform
import sys
import threading

import pytest

from mujoco_hal_ros import sched


def _in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(10.0)
    return out[0]


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='Linux scheduler only')
def test_short_slice_keeps_policy_and_nice():
    def ask():
        before = (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0))
        took = sched.short_slice()
        return took, before, (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0))
    took, before, after = _in_thread(ask)
    assert after == before
    if platform.machine() in ('x86_64', 'aarch64', 'arm64') and before[0] == os.SCHED_OTHER:
        assert took is True
    # only the calling thread changed: this one is as it was
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


@pytest.mark.skipif(not hasattr(os, 'SCHED_IDLE'), reason='SCHED_IDLE: Linux only')
def test_a_thread_someone_made_idle_stays_idle():
    def ask():
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return sched.short_slice(), os.sched_getscheduler(0)
    assert _in_thread(ask) == (False, os.SCHED_IDLE)
