"""A thread asks for a short EEVDF slice for itself; its policy and nice value stay."""

import os
import platform
import sys
import threading

import pytest

from mujoco_hal_ros.fastpath import sched


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


def _fifo_allowed():
    """Whether this process may use SCHED_FIFO (root, CAP_SYS_NICE or an rtprio limit)."""
    def ask():
        why = sched.realtime(1)
        sched.ordinary()
        return why is None
    return sys.platform.startswith('linux') and _in_thread(ask)


@pytest.mark.parametrize('bad', [0, 100, -3])
def test_realtime_refuses_a_priority_outside_1_to_99_and_changes_nothing(bad):
    def ask():
        return sched.realtime(bad), os.sched_getscheduler(0)
    why, policy = _in_thread(ask)
    assert why == f'priority must be 1..99, got {bad}'
    assert policy == os.sched_getscheduler(0)


@pytest.mark.skipif(not _fifo_allowed(), reason='this process may not use SCHED_FIFO')
def test_realtime_then_ordinary_in_the_calling_thread_only():
    def ask():
        why = sched.realtime(7)
        during = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
        sched.ordinary()
        return why, during, os.sched_getscheduler(0)
    why, during, after = _in_thread(ask)
    assert why is None
    assert during == (os.SCHED_FIFO, 7)
    assert after == os.SCHED_OTHER
    assert os.sched_getscheduler(0) == os.SCHED_OTHER          # this thread untouched


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='Linux scheduler only')
def test_realtime_without_permission_says_how_to_allow_it():
    """As an unprivileged user with no rtprio limit: refused, with what to configure."""
    if os.geteuid() != 0 and _fifo_allowed():
        pytest.skip('this user may use SCHED_FIFO')
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # the child: nobody, if we were root
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            why = sched.realtime(50)
            os.write(write, f'{why}\n{os.sched_getscheduler(0)}'.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        why, policy = f.read().splitlines()
    os.waitpid(pid, 0)
    assert 'rtprio' in why and 'CAP_SYS_NICE' in why and 'limits.conf' in why
    assert int(policy) == os.SCHED_OTHER
