"""One way for a node to answer a ROS request when core work finishes.

Core work ends on a core thread: the stepper's (a ``concurrent.futures.Future`` from
``Stepper.post``/``submit``/``Device.step(wait=False)``, a ``Move`` with
``add_done_callback``), or the one worker thread this bridge owns for blocking work such
as a pool evaluation. rclpy futures must be completed on the executor, and a coroutine
awaiting one resumes only when the executor wakes. So a core thread only appends
``(rclpy future, outcome)`` to a locked list and triggers a guard condition; the guard's
callback, on the executor, sets the results and then triggers a second guard condition
whose only job is to wake the executor once more so that the awaiting coroutines resume
now rather than at the next unrelated event. Service callbacks and action execute
callbacks are ``async def`` coroutines that ``await`` these futures: no executor thread
waits on physics, no thread is started per request, and nothing polls.

Time-driven work (feedback every 100 ms, a service's give-up deadline, a trajectory's
tolerance checks) goes through the same bridge: one steady-clock timer, re-armed to the
earliest deadline and cancelled when none is left, so an idle node never wakes. An
always-on timer would rebuild the executor's wait set over every entity of the node on
each wake, a few ms of CPU each.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future as CoreFuture, ThreadPoolExecutor
import heapq
import itertools
import threading
import time
from typing import Any, ParamSpec, TYPE_CHECKING, TypeVar
import weakref

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.task import Future

from ..errors import CLOSED, DeviceError

if TYPE_CHECKING:     # the hints only
    from rclpy.node import Node

    from ..motion.move import Move

P = ParamSpec('P')
T = TypeVar('T')

EARLY_S = 5e-4          # a deadline this close is due now: re-arming for it costs more


class _Entry:
    """One deadline in the heap; ``alive`` False once it no longer matters."""

    __slots__ = ('when', 'seq', 'action', 'alive')

    def __init__(self, when: float, seq: int, action: Callable[[], object]) -> None:
        self.when, self.seq, self.action, self.alive = when, seq, action, True

    def __lt__(self, other: _Entry) -> bool:
        return (self.when, self.seq) < (other.when, other.seq)


class Ticker:
    """``fn()`` every ``seconds`` on the executor between ``start()`` and ``stop()``."""

    def __init__(self, bridge: CompletionBridge, seconds: float,
                 fn: Callable[[], object]) -> None:
        self._bridge = bridge
        self.seconds = float(seconds)
        self._fn = fn
        self._entry: _Entry | None = None          # guarded by the bridge's lock

    def start(self) -> None:
        """Tick from ``seconds`` from now on; starting a running ticker changes nothing."""
        self._bridge._start_ticker(self)

    def stop(self) -> None:
        self._bridge._stop_ticker(self)

    @property
    def running(self) -> bool:
        return self._entry is not None


class CompletionBridge:
    """Core completions -> rclpy futures completed on ``node``'s executor.

    Owned by the node (or by the part that made it when none was handed over); ``stop()``
    and ``close()`` answer every future still pending with None, so no coroutine is left
    waiting: each caller turns None into its own CLOSED result.
    """

    def __init__(self, node: Node, name: str | None = None) -> None:
        self._node = node
        self._name = name or node.get_name()
        self._lock = threading.Lock()
        # (future, ok, value) for the executor to set
        self._ready: list[tuple[Future, bool, Any]] = []
        # Futures handed out and not answered yet; one nobody holds any more (nothing
        # awaits it) is dropped rather than kept for close().
        self._pending: weakref.WeakSet[Future] = weakref.WeakSet()
        self._heap: list[_Entry] = []    # earliest first
        self._armed: float | None = None  # the deadline the timer is set for, or None
        self._seq = itertools.count()
        self._closed = False
        self._worker: ThreadPoolExecutor | None = None
        self._wake = node.create_guard_condition(
            self._drain, callback_group=MutuallyExclusiveCallbackGroup())
        self._nudge = node.create_guard_condition(
            lambda: None, callback_group=ReentrantCallbackGroup())
        self._timer = node.create_timer(
            1.0, self._on_timer, callback_group=ReentrantCallbackGroup(),
            clock=Clock(clock_type=ClockType.STEADY_TIME), autostart=False)
        self._entities: tuple[tuple[Callable[[Any], object], object], ...] = (
            (node.destroy_timer, self._timer),
            (node.destroy_guard_condition, self._wake),
            (node.destroy_guard_condition, self._nudge))

    # --- futures completed from any thread ------------------------------------------------
    def future(self) -> Future:
        """A pending rclpy future for ``complete``; ``close()`` answers it if nothing did."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                future.set_result(None)
            else:
                self._pending.add(future)
        return future

    def complete(self, future: Future, value: Any = None,
                 error: BaseException | None = None) -> None:
        """From any thread: ``future`` gets ``value`` (or raises ``error``) on the executor."""
        with self._lock:
            if not self._closed:
                self._ready.append((future, error is None, value if error is None else error))
                closed = False
            else:
                closed = True
        if closed:
            self._set(future, error is None, value if error is None else error)
            return
        try:
            self._wake.trigger()
        except Exception:  # noqa: BLE001 - the node went away first; close() answers
            pass

    def wrap(self, core_future: CoreFuture[Any]) -> Future:
        """A ``concurrent.futures.Future`` (or anything with ``add_done_callback(fn(f))`` and
        ``result()``) as an rclpy future: its result, or its exception raised on ``await``."""
        future = self.future()

        def done(cf: CoreFuture[Any]) -> None:
            try:
                value = cf.result()
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                self.complete(future, error=exc)
            else:
                self.complete(future, value)
        core_future.add_done_callback(done)
        return future

    def move(self, move: Move) -> Future:
        """A core ``Move``: its result dict once it ends."""
        future = self.future()
        move.add_done_callback(lambda m: self.complete(future, m.result))
        return future

    def run(self, fn: Callable[P, Any], *args: P.args, **kwargs: P.kwargs) -> Future:
        """``fn(*args, **kwargs)`` on the bridge's one worker thread (jobs run in the order
        given): for blocking core work that has no future of its own."""
        with self._lock:
            if self._worker is None and not self._closed:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix=f'{self._name}-worker')
            worker = self._worker
        if worker is not None:
            try:
                return self.wrap(worker.submit(fn, *args, **kwargs))
            except RuntimeError:                  # shut down by close() meanwhile
                pass
        return self.future()                      # closed: answered None at once

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``await bridge.call(fn, ...)``: ``fn(*args, **kwargs)`` run on the worker (as
        ``run``), its value returned and its exception raised in the awaiting coroutine; a
        CLOSED DeviceError when the bridge stopped before it answered (``run`` alone cannot
        tell that None from a None that ``fn`` returned)."""
        box = await self.run(lambda: (fn(*args, **kwargs),))
        if box is None:
            raise DeviceError(CLOSED, f'{self._name} is shutting down before the request '
                              'was answered; send it again once the node runs')
        return box[0]

    def post(self, fn: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> None:
        """``fn(*args, **kwargs)`` on the worker with nobody waiting for it (a goal topic's
        command, a cancel's hold): its exception, if any, is logged, never raised."""
        def job() -> None:
            try:
                fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - nobody awaits it: say it in the log
                self._node.get_logger().error(f'{type(exc).__name__}: {exc}',
                                              throttle_duration_sec=5.0)
        self.run(job)

    # --- time -----------------------------------------------------------------------------
    def sleep(self, seconds: float) -> Future:
        """A future answered None after ``seconds`` (steady clock)."""
        future = self.future()
        self._schedule(seconds, lambda: self._set(future, True, None))
        return future

    def wait(self, *futures: Future, timeout: float) -> Future:
        """A future answered True once any of ``futures`` is done, or False after
        ``timeout`` seconds: wait for a result, or for the next feedback, whichever first."""
        out = self.future()
        entry = self._schedule(timeout, lambda: self._set(out, True, False))

        def done(_f: Future) -> None:
            entry.alive = False
            self._set(out, True, True)
        for future in futures:
            future.add_done_callback(done)
        return out

    def every(self, seconds: float, fn: Callable[[], object]) -> Ticker:
        """A stopped Ticker calling ``fn()`` every ``seconds`` once started."""
        return Ticker(self, seconds, fn)

    def _start_ticker(self, ticker: Ticker) -> None:
        with self._lock:
            started = ticker._entry is None and not self._closed
            if started:
                ticker._entry = self._push_tick(ticker)
        if started:
            # Started from the worker, the timer was re-armed while the executor may be
            # waiting on a set that had it cancelled: wake it to wait on the new deadline.
            self._resume()

    def _stop_ticker(self, ticker: Ticker) -> None:
        with self._lock:
            entry, ticker._entry = ticker._entry, None
        if entry is not None:
            entry.alive = False

    def _push_tick(self, ticker: Ticker) -> _Entry:
        """The ticker's next deadline (lock held); a tick whose entry is no longer the
        ticker's (stopped, or stopped and started again meanwhile) does nothing."""
        cell: list[_Entry] = []
        entry = self._push(ticker.seconds, lambda: self._tick(ticker, cell[0]))
        cell.append(entry)
        return entry

    def _tick(self, ticker: Ticker, entry: _Entry) -> None:
        with self._lock:
            if ticker._entry is not entry:
                return
        try:
            ticker._fn()
        finally:
            with self._lock:
                if ticker._entry is entry and not self._closed:
                    ticker._entry = self._push_tick(ticker)

    def _schedule(self, seconds: float, action: Callable[[], object]) -> _Entry:
        with self._lock:
            return self._push(seconds, action)

    def _push(self, seconds: float, action: Callable[[], object]) -> _Entry:
        """A deadline ``seconds`` from now (lock held)."""
        entry = _Entry(time.monotonic() + max(0.0, float(seconds)), next(self._seq), action)
        if self._closed:
            entry.alive = False
            return entry
        heapq.heappush(self._heap, entry)
        self._arm()
        return entry

    def _arm(self) -> None:
        """Set the timer for the earliest live deadline, or stop it (lock held)."""
        while self._heap and not self._heap[0].alive:
            heapq.heappop(self._heap)
        head = self._heap[0].when if self._heap else None
        if head == self._armed:
            return
        self._armed = head
        try:
            if head is None:
                self._timer.cancel()
            else:
                self._timer.timer_period_ns = max(1, int((head - time.monotonic()) * 1e9))
                self._timer.reset()
        except Exception:  # noqa: BLE001 - the node was destroyed; close() answers
            pass

    def _on_timer(self) -> None:
        now = time.monotonic()
        due: list[_Entry] = []
        with self._lock:
            while self._heap and self._heap[0].when <= now + EARLY_S:
                entry = heapq.heappop(self._heap)
                if entry.alive:
                    due.append(entry)
            self._armed = None
            self._arm()
        for entry in due:
            if entry.alive:
                try:
                    entry.action()
                except Exception as exc:  # noqa: BLE001 - one part's bug stops no other
                    self._node.get_logger().error(
                        f'{type(exc).__name__} in a timed callback: {exc}',
                        throttle_duration_sec=5.0)
        self._resume()

    # --- on the executor ------------------------------------------------------------------
    def _drain(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        for future, ok, value in ready:
            self._set(future, ok, value)
        self._resume()

    def _set(self, future: Future, ok: bool, value: Any) -> None:
        with self._lock:
            self._pending.discard(future)
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def _resume(self) -> None:
        """Wake the executor once more: coroutines awaiting what was just set run now."""
        try:
            self._nudge.trigger()
        except Exception:  # noqa: BLE001 - destroyed under us; nobody is waiting
            pass

    # --- lifetime -------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def stop(self) -> None:
        """Answer what is queued, then every pending future with None, and take no more work
        (a later ``future()`` is answered None at once); the worker stops (a job in progress
        finishes on its own). The node's entities stay, so the answers the callers build
        from None still go out: the first half of a shutdown while the executor spins."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            ready, self._ready = self._ready, []
            heap, self._heap = self._heap, []
            worker, self._worker = self._worker, None
        for entry in heap:
            entry.alive = False
        for future, ok, value in ready:
            self._set(future, ok, value)
        with self._lock:
            pending, self._pending = list(self._pending), weakref.WeakSet()
        for future in pending:
            if not future.done():
                future.set_result(None)
        # Set from the calling thread: nothing else may wake the executor now (no callback is
        # left blocked whose return would), so wake it for the coroutines to send answers.
        self._resume()
        if worker is not None:
            worker.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """``stop()``, then the timer and guard conditions go; a second call does nothing."""
        self.stop()
        with self._lock:
            entities, self._entities = self._entities, ()
        for destroy, entity in entities:
            try:
                destroy(entity)
            except Exception:  # noqa: BLE001 - the node was destroyed first
                pass
