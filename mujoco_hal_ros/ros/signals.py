"""Ctrl-C and SIGTERM from the first line of an executable to its last: never a traceback.

Python turns SIGINT into a ``KeyboardInterrupt`` wherever the main thread happens to be:
inside an import (a traceback, or ``ImportError: initialization failed`` from an extension
module), or inside the shutdown that the first Ctrl-C started (a second one 50 ms later).
So an executable calls ``exit_quietly_on_signal()`` before its heavy imports: until the
node runs, a signal ends the process at once with code 0, since nothing is there yet to
clean up. ``run_node`` then holds ``handled()`` around the node's whole life: a signal only
records itself, and rclpy's own handler (which ``rclpy.init`` chains in front of ours)
shuts the context down, so the executor returns and the node is torn down in order;
further signals during that teardown are recorded and ignored. Code needs no rclpy.
"""

from collections.abc import Iterator
import contextlib
import logging
import os
import signal
import sys
import threading
from typing import NoReturn

SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_CODE = 0           # what a signal before or during start-up exits with, as Ctrl-C later

_received = threading.Event()


def received() -> bool:
    """True once SIGINT or SIGTERM arrived under ``handled()``."""
    return _received.is_set()


def wait(timeout: float | None) -> bool:
    """Until a signal arrived or ``timeout`` s passed; True if one did."""
    return _received.wait(timeout)


def _exit_now(_signum, _frame):
    os._exit(EXIT_CODE)


def _record(_signum, _frame):
    _received.set()


def _main_thread():
    return threading.current_thread() is threading.main_thread()


def exit_quietly_on_signal() -> None:
    """Until ``handled()`` takes over: SIGINT or SIGTERM exits at once with EXIT_CODE."""
    if _main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _exit_now)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Signals are recorded (``received()``), never raised, inside the block; after it the
    handlers from before are back (a test calling ``main`` keeps its Ctrl-C), except in an
    executable, which goes on ignoring them to its last line."""
    if not _main_thread():          # only the main thread may set handlers; nothing to do
        yield
        return
    _received.clear()
    before = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        signal.signal(sig, _record)
    try:
        yield
    finally:
        for sig, handler in before.items():
            if handler is not _exit_now and handler is not None:
                signal.signal(sig, handler)     # an executable keeps ignoring them to its end


def end_process(code: int) -> NoReturn:
    """An executable's last line: flush and leave with ``code`` without unwinding the
    native libraries' static objects. Everything the node owns is torn down by then; what
    remains are the middleware's globals, and on Jazzy their destructors can abort an exit
    that was clean ("terminate called without an active exception", exit -6)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0 if code is None else code if isinstance(code, int) else 1)
