"""Render in the background: Mesa's software rasteriser threads at ``SCHED_IDLE``.

llvmpipe starts its rasteriser threads (``llvmpipe-N``) with the process's first GL context
and shares them between every context of the process. They are plain C threads that never
take the GIL, so starving them only delays frames; at ``SCHED_IDLE`` they run on CPU time
no other thread of the machine wants, so a frame never holds physics, joint_states or a
subscriber in another process off the CPU. The GL thread, which runs Python, keeps its
priority: a ``SCHED_IDLE`` thread holding the GIL on a busy machine would stall every
thread of the process.

Why not a niceness or a slice length: under Linux's EEVDF scheduler neither nice 19,
``SCHED_BATCH`` nor a short slice on the rasterisers keeps a periodic thread elsewhere on
time against a render loop; ``SCHED_IDLE`` does (``bench/README.md``).

Linux only; with a GPU there are no such threads, and with the fast paths off
(``mujoco_hal_ros.fastpath.configure``) nothing is changed.
"""

import os
import sys

from .. import fastpath


def rasteriser_threads() -> list[int]:
    """Thread ids of Mesa llvmpipe's rasteriser threads in this process (Linux /proc)."""
    out: list[int] = []
    try:
        tids = os.listdir('/proc/self/task')
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f'/proc/self/task/{tid}/comm') as f:
                if f.read().startswith('llvmpipe'):
                    out.append(int(tid))
        except OSError:
            continue
    return out


def rasterisers_in_background(background: bool = True) -> bool:
    """Put the rasteriser threads at ``SCHED_IDLE`` (``background``) or back at normal
    priority (``False``). Lowering needs no privileges; raising back from ``SCHED_IDLE``
    needs CAP_SYS_NICE or an RLIMIT_NICE of 20 (Linux treats SCHED_IDLE as below nice 19).

    True when every thread took it (and where there is nothing to do: not Linux); False if
    a thread refused (it keeps its policy) or the fast paths are off (nothing changed)."""
    if not fastpath.enabled():
        return False
    if not hasattr(os, 'SCHED_IDLE') or not sys.platform.startswith('linux'):
        return True
    policy = os.SCHED_IDLE if background else os.SCHED_OTHER
    ok = True
    for tid in rasteriser_threads():
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(0))
        except PermissionError:
            ok = False
        except OSError:
            pass                       # gone meanwhile
    return ok
