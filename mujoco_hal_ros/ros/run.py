"""The ``main`` of every node executable: start, spin until Ctrl-C, shut down cleanly.

A bad start (malformed ``--ros-args``, a bad parameter or model) ends it with one line on
stderr, ``<name>: <what>``, and exit code 2, not a traceback; ``<NAME>_DEBUG=1`` in the
environment lets the traceback through. Ctrl-C, while starting or running, exits with 0.
"""

import os
import sys

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

from ..errors import DeviceError
from ..fastpath.process import tune_interpreter


def one_line(err):
    """The error on one line; named by its type unless it is a DeviceError (already clear)."""
    text = ' '.join(str(err).split())
    return text if isinstance(err, DeviceError) else f'{type(err).__name__}: {text}'


def run_node(name, make_node, argv=None, threads=4, started=None):
    """Make the node with ``make_node()`` and spin it on a MultiThreadedExecutor of
    ``threads`` until Ctrl-C; ``started(node)`` runs before the spin. Returns the exit code.

    ``name`` is the executable's: the prefix of the one line, and of ``<NAME>_DEBUG``.
    ``argv``: the command line, ``sys.argv`` if None. The process is tuned
    (``fastpath.process``) once the node is made, so a node's ``fast_paths:=false`` holds.
    """
    args = sys.argv if argv is None else argv
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
        tune_interpreter()          # after make_node, which may have turned the fast paths off
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
