"""The ``main`` of every node executable: start, spin until Ctrl-C, shut down cleanly.

A bad start (malformed ``--ros-args``, a bad parameter or model) ends it with one line on
stderr, ``<name>: <what>``, and exit code 2, not a traceback; ``<NAME>_DEBUG=1`` in the
environment lets the traceback through. Ctrl-C, while starting or running, exits with 0.
"""

import ctypes
import os
import sys

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

from ..errors import DeviceError


def one_line(err):
    """The error on one line; named by its type unless it is a DeviceError (already clear)."""
    text = ' '.join(str(err).split())
    return text if isinstance(err, DeviceError) else f'{type(err).__name__}: {text}'


# How long a thread may hold the GIL while another waits for it (CPython's default: 5 ms).
# A node's state thread wakes every 1-2 ms to publish; when it wakes while another thread
# runs Python it waits up to this long. Measured with joint_states at 500 Hz and a 640x480
# camera at 10 fps (bench/bench_node.py): p99 interval between sends 2.1-2.9 periods at 5 ms,
# 1.6-1.9 at 0.5 ms; six interleaved 15 s pairs at 0.5 ms against 0.1 ms: sent 1.15-1.76
# (median 1.41) -> 1.11-1.35 (1.26), received 1.55-2.26 (1.98) -> 1.59-1.92 (1.80). Rtf-0
# stepping did not change beyond this VM's noise (the physics thread releases the GIL for
# every chunk it steps in C).
SWITCH_INTERVAL_S = 0.0001


# glibc gives a freed block over its trim threshold back to the kernel, and serves blocks
# over the mmap threshold with a fresh mapping each time. A 640x480 frame is 0.9 MB, and
# each one passes through several such buffers (rendered pixels, the serialized message,
# the middleware's copies, a subscriber's bytes), so every frame paid for hundreds of page
# faults on zeroed pages. Measured with a Python subscriber taking 640x480 rgb8 images at
# 80 Hz from another process: 4.4 ms of CPU per frame by default, 2.0 ms with these.
# The cost: a process keeps up to TRIM_THRESHOLD of freed memory mapped for reuse.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3             # <malloc.h>
TRIM_THRESHOLD = 128 << 20
MMAP_THRESHOLD = 16 << 20                               # glibc's ceiling is 32 MiB


def keep_freed_memory():
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


def tune_interpreter():
    """Process-wide settings for a node with a fixed-rate publishing thread that streams
    large messages."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    keep_freed_memory()


def run_node(name, make_node, argv=None, threads=4, started=None):
    """Make the node with ``make_node()`` and spin it on a MultiThreadedExecutor of
    ``threads`` until Ctrl-C; ``started(node)`` runs before the spin. Returns the exit code.

    ``name`` is the executable's: the prefix of the one line, and of ``<NAME>_DEBUG``.
    ``argv``: the command line, ``sys.argv`` if None.
    """
    args = sys.argv if argv is None else argv
    tune_interpreter()
    debug_env = f'{name.upper()}_DEBUG'
    debug = bool(os.environ.get(debug_env))
    try:
        rclpy.init(args=args)
    except Exception as err:  # noqa: BLE001 - malformed --ros-args
        print(f'{name}: {one_line(err)}', file=sys.stderr)
        return 2
    node = executor = None
    try:
        try:
            node = make_node()
        except Exception as err:  # noqa: BLE001 - one clear line, not a traceback
            if not rclpy.ok():
                return 0                        # Ctrl-C while starting up
            if debug:
                raise
            hint = '' if isinstance(err, DeviceError) else f' ({debug_env}=1 for details)'
            print(f'{name}: {one_line(err)}{hint}', file=sys.stderr)
            return 2
        if started is not None:
            started(node)
        executor = MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:  # noqa: BLE001 - a context shut down by a signal mid-start is an exit
        if rclpy.ok():
            raise
    finally:
        if executor is not None:
            executor.shutdown(timeout_sec=1.0)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0
