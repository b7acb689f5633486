"""Process-wide tuning for a node with a fixed-rate publishing thread that streams large
messages: hand the GIL over sooner, and keep freed large buffers.

The GIL: a node's state thread wakes every 1-2 ms to publish; when it wakes while another
thread runs Python it waits up to ``sys.getswitchinterval()`` for the GIL (CPython's
default is 5 ms, more than a whole period). At ``SWITCH_INTERVAL_S`` it waits at most a
tenth of a millisecond; stepping at rtf 0 is not slowed, since the physics thread releases
the GIL for every chunk it steps in C.

The allocator: glibc gives a freed block over its trim threshold back to the kernel and
serves blocks over the mmap threshold with a fresh mapping each time. A 640x480 frame is
0.9 MB and passes through several such buffers (rendered pixels, the serialized message,
the middleware's copies, a subscriber's bytes), so every frame paid for hundreds of page
faults on zeroed pages. The cost of keeping them: a process keeps up to
``TRIM_THRESHOLD`` of freed memory mapped for reuse.

What each bought is in ``bench/README.md``. With the fast paths off
(``mujoco_hal_ros.fastpath.configure``) ``tune_interpreter`` changes nothing.
"""

import ctypes
import sys

from .. import fastpath

SWITCH_INTERVAL_S = 0.0001

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3             # <malloc.h>
TRIM_THRESHOLD = 128 << 20
MMAP_THRESHOLD = 16 << 20                               # glibc's ceiling is 32 MiB


def keep_freed_memory() -> bool:
    """Reuse freed large buffers instead of returning them to the kernel (glibc only).

    True where the C library took both settings; False elsewhere (musl, macOS), where
    nothing changes.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
            and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)


def tune_interpreter() -> bool:
    """Both settings for this process, unless the fast paths are off; whether it tuned."""
    if not fastpath.enabled():
        return False
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    keep_freed_memory()
    return True
