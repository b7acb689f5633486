"""The one event everything that caches a model's addresses follows: the model swapped;
and the bounded logs of what happened (``Log``: the audit and the events).

A spawn, a delete, a ``load_world`` or an ``unload_world`` puts a new ``MjModel`` under the
device; every joint, dof and channel address computed from the old one is then wrong
(a ``load_world`` of another robot renumbers everything). Instead of each publisher and
controller comparing scene generations on its own schedule, they subscribe here and are
told once, after the swap is complete (the new model, layout and generation in place), on
the thread that asked for the swap, never on the physics thread.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
import logging
import threading
from typing import Any, NamedTuple, TYPE_CHECKING

import mujoco

if TYPE_CHECKING:
    from ..config.channels import Layout

LOG = logging.getLogger('mujoco_hal_ros.device')


class ModelSwapped(NamedTuple):
    """What changed: the scene generation now running, its model and channel layout, and
    whether the whole world was replaced (``load_world``) or only edited (spawn, delete)."""

    generation: int
    model: mujoco.MjModel
    layout: Layout
    world: bool


class Swaps:
    """Subscribers to ``ModelSwapped``; ``subscribe`` returns the call that unsubscribes.

    A subscriber that raises is logged and the others are still told: one broken cache
    must not leave the rest stale."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict = {}
        self._next = 0

    def subscribe(self, callback: Callable[[ModelSwapped], None]) -> Callable[[], None]:
        if not callable(callback):
            raise TypeError(f'expected a callable, got {callback!r}')
        with self._lock:
            key, self._next = self._next, self._next + 1
            self._subscribers[key] = callback

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers.pop(key, None)
        return unsubscribe

    def emit(self, event: ModelSwapped) -> None:
        with self._lock:
            callbacks = list(self._subscribers.values())
        for callback in callbacks:
            try:
                callback(event)
            except Exception:  # noqa: BLE001 - the others must still follow the swap
                LOG.exception('a model-swapped subscriber failed (%r)', callback)

    def __len__(self) -> int:
        with self._lock:
            return len(self._subscribers)


class Log(collections.deque[dict[str, Any]]):
    """A bounded record (audit, events) that also answers when called: ``device.audit()``
    returns a list copy (optionally only entries of one ``kind``), ``device.audit`` iterates."""

    def __init__(self, maxlen: int) -> None:
        super().__init__(maxlen=maxlen)
        self._lock = threading.Lock()

    def add(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.append(entry)

    def __call__(self, kind: str | None = None,
                 last: int | None = None) -> list[dict[str, Any]]:
        with self._lock:
            items = list(self)
        if kind is not None:
            items = [e for e in items if e.get('kind', e.get('code')) == kind]
        return items[-last:] if last else items
