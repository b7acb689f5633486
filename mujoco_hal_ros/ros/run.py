"""The ``main`` of every node executable: start, spin until Ctrl-C, shut down cleanly.

A bad start (malformed ``--ros-args``, a bad parameter or model) ends it with one line on
stderr, ``<name>: <what>``, and exit code 2, not a traceback; ``<NAME>_DEBUG=1`` in the
environment lets the traceback through. Ctrl-C or SIGTERM, at any moment from the
executable's first line (``signals``) and any number of times, exits with 0 and no
traceback; the node is torn down in order: every waiting client gets its result first.
"""

from collections.abc import Callable
import os
import sys
import threading
import time
from typing import TypeVar

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from ..errors import DeviceError
from ..fastpath.process import tune_interpreter
from . import signals

NodeT = TypeVar('NodeT', bound=Node)

SIGNAL_POLL_S = 0.1     # how soon the main thread sees a signal (it runs no executor)
ANSWER_S = 2.0          # how long waiting clients' answers may take at shutdown
DELIVER_S = 0.2         # then how long the executor keeps sending before it stops


def one_line(err: BaseException) -> str:
    """The error on one line; named by its type unless it is a DeviceError (already clear)."""
    text = ' '.join(str(err).split())
    return text if isinstance(err, DeviceError) else f'{type(err).__name__}: {text}'


def start_or_destroy(node: Node, start: Callable[[], object]) -> None:
    """Run ``start()``, the rest of ``node``'s construction; if it raises, destroy the node
    and re-raise. A refused start then leaves nothing behind: no thread, and no publisher,
    service or action server in the ROS graph (a caller holding the exception holds the
    node, whose ``destroy_node`` must cope with parts never built)."""
    try:
        start()
    except BaseException:
        node.destroy_node()
        raise


def run_node(name: str, make_node: Callable[[], NodeT], argv: list[str] | None = None,
             threads: int = 4, started: Callable[[NodeT], object] | None = None) -> int:
    """Make the node with ``make_node()`` and spin it on a MultiThreadedExecutor of
    ``threads`` until Ctrl-C; ``started(node)`` runs before the spin. Returns the exit code.

    ``name`` is the executable's: the prefix of the one line, and of ``<NAME>_DEBUG``.
    ``argv``: the command line, ``sys.argv`` if None. The process is tuned
    (``fastpath.process``) once the node is made, so a node's ``fast_paths:=false`` holds.
    """
    with signals.handled():
        return _run(name, make_node, sys.argv if argv is None else argv, threads, started)


def _run(name, make_node, args, threads, started):
    debug_env = f'{name.upper()}_DEBUG'
    debug = bool(os.environ.get(debug_env))
    try:
        # Not rclpy's handler: it shuts the context down at once, before any waiting
        # client could be answered.
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    except Exception as err:  # noqa: BLE001 - malformed --ros-args
        print(f'{name}: {one_line(err)}', file=sys.stderr)
        return 2
    node = executor = None
    try:
        if signals.received():
            return 0                            # Ctrl-C before rclpy's handler was there
        try:
            node = make_node()
        except Exception as err:  # noqa: BLE001 - one clear line, not a traceback
            if not rclpy.ok() or signals.received():
                return 0                        # Ctrl-C while starting up
            if debug:
                raise
            hint = '' if isinstance(err, DeviceError) else f' ({debug_env}=1 for details)'
            print(f'{name}: {one_line(err)}{hint}', file=sys.stderr)
            return 2
        if signals.received():
            return 0
        tune_interpreter()          # after make_node, which may have turned the fast paths off
        if started is not None:
            started(node)
        executor = MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        _spin_until_signal(executor, node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:  # noqa: BLE001 - a context shut down by a signal mid-start is an exit
        if rclpy.ok() and not signals.received():
            raise
    finally:
        _teardown(node, executor)
    return 0


def spin_guarded(executor: Executor, node: Node) -> None:
    """``executor.spin()`` that survives an exception escaping a callback: the backstop
    behind ``guard`` (which answers the request) for what reaches the executor some other
    way (a done-callback of a future, a part built on a plain rclpy entity). It is logged
    with its traceback and the executor spins on; a shutdown still ends it."""
    from .guard import log_failure
    while executor.context.ok() and not _shut_down(executor):
        try:
            executor.spin()
            return
        except (ExternalShutdownException, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - one bad callback must not end the node
            if not executor.context.ok() or _shut_down(executor):
                # the teardown shut the executor (and its thread pool) down while a wait
                # had just handed it a callback: "cannot schedule new futures after
                # shutdown" is the shutdown, not a failure
                return
            log_failure(node.get_logger(), 'the executor', exc)


def _shut_down(executor):
    """Whether ``executor.shutdown()`` was called. rclpy sets ``_is_shutdown`` before it
    shuts its thread pool down and has no public accessor for it."""
    return bool(getattr(executor, '_is_shutdown', False))


def _spin_until_signal(executor, node):
    """Spin on a thread until a signal; then, with the executor still spinning, let the node
    answer every waiting client (``node.answer_waiting(timeout)`` where it has one)."""
    failed = []

    def spin():
        try:
            spin_guarded(executor, node)
        except ExternalShutdownException:
            pass
        except BaseException as exc:  # noqa: BLE001 - raised again on the main thread
            failed.append(exc)
    thread = threading.Thread(target=spin, name='executor', daemon=True)
    thread.start()
    while thread.is_alive() and not signals.received():
        signals.wait(SIGNAL_POLL_S)
    if failed:
        raise failed[0]
    answer = getattr(node, 'answer_waiting', None)
    if answer is not None and thread.is_alive():
        answer(ANSWER_S)
        time.sleep(DELIVER_S)          # the answers are sent; let DDS deliver them


def _quiet_action_servers(node):
    """A goal request still in rclpy's hands when the node's action servers go (a client
    flooding goals through the shutdown) fails inside rclpy, which logs it as an ERROR
    ("Failed to accept new goal ... action server pointer is invalid"; seen on Jazzy under
    load). Nothing can serve it any more, as on any ROS node going down: from here on that
    child logger says only what is fatal."""
    try:
        from rclpy.logging import LoggingSeverity
        node.get_logger().get_child('action_server').set_level(LoggingSeverity.FATAL)
    except Exception:  # noqa: BLE001 - a logger that cannot be set: the log stays as it is
        pass


def _teardown(node, executor):
    """The executor first (waiting clients were answered while it spun), then the node (its
    threads stop before its publishers go), then the context."""
    from .guard import tearing_down
    tearing_down()
    if node is not None:
        _quiet_action_servers(node)
    if executor is not None:
        executor.shutdown(timeout_sec=1.0)
    if node is not None:
        try:
            node.destroy_node()
        except Exception:  # noqa: BLE001 - shut down under us; the process is ending
            if rclpy.ok() and not signals.received():
                raise
    rclpy.try_shutdown()
