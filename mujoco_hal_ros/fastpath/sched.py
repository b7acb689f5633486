"""Ask Linux to wake a periodic thread on time when every core is busy.

Linux's EEVDF scheduler (6.6+) lets a task that wakes preempt the running one only when
its virtual deadline is earlier, and a deadline is one *slice* (about 3 ms by default)
after the task becomes eligible. So a 500 Hz publisher that wakes while the cores run
camera rasterisers, a subscriber and DDS threads can wait most of a slice: more than a
whole 2 ms period. Since Linux 6.12 a task can ask for a shorter slice for itself
(``sched_setattr`` with ``sched_runtime`` under ``SCHED_OTHER``; no privileges needed):
its deadlines come sooner, so it preempts sooner, while its share of the CPU (its weight)
stays what it was: a ticker thread among CPU hogs then wakes within a fraction of a
millisecond instead of up to a whole default slice late (``bench/README.md``).

Only for threads that sleep most of the time; a CPU-bound thread with a short slice just
switches more often. Where the kernel is older, not Linux, or refuses, nothing changes;
with the fast paths off (``mujoco_hal_ros.fastpath.configure``) nothing is asked for.
"""

import ctypes
import os
import platform
import sys

from .. import fastpath

SHORT_SLICE_S = 0.0001              # the kernel's floor; it clamps to 0.1..100 ms

# x86-64 and arm64 numbers of sched_setattr (no glibc wrapper before 2.41)
_SYS_SCHED_SETATTR = {'x86_64': 314, 'aarch64': 274, 'arm64': 274}


class _SchedAttr(ctypes.Structure):
    _fields_ = [('size', ctypes.c_uint32), ('sched_policy', ctypes.c_uint32),
                ('sched_flags', ctypes.c_uint64), ('sched_nice', ctypes.c_int32),
                ('sched_priority', ctypes.c_uint32), ('sched_runtime', ctypes.c_uint64),
                ('sched_deadline', ctypes.c_uint64), ('sched_period', ctypes.c_uint64),
                ('sched_util_min', ctypes.c_uint32), ('sched_util_max', ctypes.c_uint32)]


def short_slice(seconds: float = SHORT_SLICE_S) -> bool:
    """Give the calling thread a short EEVDF slice, keeping its policy and nice value.

    True if the kernel accepted it (before 6.12 it accepts and ignores it); False where it
    cannot apply (not Linux, another architecture, a policy other than SCHED_OTHER chosen
    by the user, a kernel that refuses it, or the fast paths off).
    """
    if not fastpath.enabled():
        return False
    number = _SYS_SCHED_SETATTR.get(platform.machine())
    if not sys.platform.startswith('linux') or number is None:
        return False
    try:
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            return False                   # SCHED_FIFO/RR/IDLE/BATCH chosen by someone else
        nice = os.getpriority(os.PRIO_PROCESS, 0)
        libc = ctypes.CDLL(None, use_errno=True)
    except (OSError, AttributeError):
        return False
    attr = _SchedAttr(size=ctypes.sizeof(_SchedAttr), sched_policy=os.SCHED_OTHER,
                      sched_nice=nice, sched_runtime=int(seconds * 1e9))
    return libc.syscall(number, 0, ctypes.byref(attr), 0) == 0


def ordinary() -> None:
    """Back to ``SCHED_OTHER`` with a short slice, from ``realtime``: what a thread that
    fell behind its period does, so that it does not hold a core at FIFO."""
    if not fastpath.enabled():
        return                             # nothing was raised: realtime refused
    if hasattr(os, 'SCHED_OTHER') and sys.platform.startswith('linux'):
        try:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            return
        short_slice()


def realtime(priority: int) -> str | None:
    """Run the calling thread as ``SCHED_FIFO`` at ``priority`` (1..99), as ros2_control's
    controller_manager does for its update loop: it then preempts every ordinary thread the
    moment it wakes, so a busy machine delays it by the length of its own work, not by
    other threads' slices. Needs an rtprio limit (``/etc/security/limits.conf``, the
    ``realtime`` group) or CAP_SYS_NICE.

    Returns None on success, else why not, for the caller to log: a thread that cannot get
    it keeps its policy. For short periodic work only; a FIFO thread that spins starves its
    core up to the kernel's RT throttle (95 %)."""
    if not 1 <= priority <= 99:
        return f'priority must be 1..99, got {priority}'
    if not fastpath.enabled():
        return 'the fast paths are off (fast_paths:=false)'
    if not hasattr(os, 'SCHED_FIFO') or not sys.platform.startswith('linux'):
        return 'SCHED_FIFO is Linux only'
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except OSError as err:
        return (f'{err.strerror}: allow it with an rtprio limit of at least {priority} '
                f'(e.g. `@realtime - rtprio 99` in /etc/security/limits.conf and the user in '
                f'the realtime group) or CAP_SYS_NICE')
    return None
