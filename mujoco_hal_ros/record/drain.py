"""The writer-thread loop shared by the bag and the video recorders.

Producers append to a queue and set ``wake``; the writer thread sleeps on ``wake`` (with a
timeout, so a stop is noticed even without a wake-up), empties the queue, and leaves only
once it is told to stop and the queue it saw is empty, so nothing offered before a stop
is lost.
"""
from collections.abc import Callable
import threading
from typing import Any


def drain_until_stopped(wake: threading.Event, take: Callable[[], Any],
                        write: Callable[[Any], None], stopping: Callable[[], bool]) -> None:
    """Call ``write(item)`` for every ``take()`` (None: queue empty) until ``stopping()``."""
    while True:
        wake.wait(0.2)
        wake.clear()
        while True:
            item = take()
            if item is None:
                break
            write(item)
        if stopping():
            break
