"""Recorder: a BagWriter on its own thread, fed through a bounded queue.

Whoever receives a message (a subscription callback, a publishing thread) only appends
it to a queue and returns, so disk speed never reaches physics or the state thread. A
full queue drops the message and counts it (``dropped``), as a middleware queue would;
a write that fails (a full disk: OSError ENOSPC) stops the recording, keeps what was
written readable as far as the file system lets it, and leaves the reason in ``error``
for the node's diagnostics. The simulation runs on.
"""

import collections
from collections.abc import Callable, Sequence
import threading
import time
from typing import Any, IO

from .bag import BagWriter
from .drain import drain_until_stopped

QUEUE_MESSAGES = 2000
QUEUE_BYTES = 256 * 1024 * 1024


class Recorder:
    """Record serialized messages into a rosbag2 folder from a thread of its own."""

    def __init__(self, path: str, *, max_bytes: int = 0, max_seconds: float = 0.0,
                 compression: str = 'none', max_queue: int = QUEUE_MESSAGES,
                 max_queue_bytes: int = QUEUE_BYTES, opener: Callable[..., IO[bytes]] = open,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.bag = BagWriter(path, max_bytes=max_bytes, max_seconds=max_seconds,
                             compression=compression, opener=opener)
        self.path = self.bag.path
        self.max_queue, self.max_queue_bytes = int(max_queue), int(max_queue_bytes)
        self.on_error = on_error
        self.error: str | None = None      # one line: why recording stopped early
        self.dropped = 0
        self.received: collections.Counter[str] = collections.Counter()  # topic -> offered
        self._queue: collections.deque[Any] = collections.deque()
        self._queued_bytes = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name='recorder', daemon=True)
        self._thread.start()

    @property
    def recording(self) -> bool:
        return not self._stopping and self.error is None

    def add_topic(self, name: str, type_name: str, qos_profiles: Sequence[dict[str, Any]] = (),
                  type_hash: str = '') -> None:
        with self._lock:
            self.bag.add_topic(name, type_name, qos_profiles, type_hash)

    def offer(self, topic: str, data: bytes, log_time_ns: int | None = None) -> bool:
        """Queue one message; never blocks. False when it was dropped or recording ended."""
        if self._stopping or self.error is not None:
            return False
        t = time.time_ns() if log_time_ns is None else log_time_ns
        size = len(data)
        with self._lock:
            self.received[topic] += 1
            if len(self._queue) >= self.max_queue or \
                    self._queued_bytes + size > self.max_queue_bytes:
                self.dropped += 1
                return False
            self._queue.append((topic, data, t))
            self._queued_bytes += size
        self._wake.set()
        return True

    def _take(self):
        with self._lock:
            if not self._queue:
                return None
            item = self._queue.popleft()
            self._queued_bytes -= len(item[1])
            return item

    def _write(self, item: tuple[str, bytes, int | None]) -> None:
        if self.error is not None:
            return
        try:
            self.bag.write(*item)
        except OSError as err:
            self._fail(err)
        except Exception as err:  # noqa: BLE001 - stops the recording, says why
            self._fail(OSError(0, f'{type(err).__name__}: {err}'))

    def _run(self) -> None:
        drain_until_stopped(self._wake, self._take, self._write, lambda: self._stopping)
        try:
            self.bag.close()
        except OSError as err:
            self._fail(err)

    def _fail(self, err: OSError) -> None:
        if self.error is not None:
            return
        self.error = (f'recording to {self.path} stopped: {err.strerror or err} '
                      f'(errno {err.errno}); free space or record elsewhere, then '
                      'start_recording again')
        with self._lock:
            self._queue.clear()
            self._queued_bytes = 0
        if self.on_error is not None:
            self.on_error(self.error)

    def counts(self) -> dict[str, int]:
        """topic -> messages written so far."""
        return {name: t.count for name, t in self.bag.topics.items()}

    def close(self, timeout: float = 30.0) -> str:
        """Write what is queued, finish the bag (metadata.yaml); idempotent."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)
        return self.path

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
