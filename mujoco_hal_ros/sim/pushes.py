"""Pushes and contacts: the latched wrenches the stepper applies every step, and whether
snapshots carry the active contacts (physics thread, except ``report_contacts``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..sensors.contacts import active_contacts
from ..sensors.wrench import WrenchTable


class Pushes:
    """One model's latched wrenches (``sensors.wrench.WrenchTable``) and the contacts flag."""

    def __init__(self, model: Any, want_contacts: bool = False) -> None:
        self.model = model
        self.table = WrenchTable(model)
        self.want_contacts = want_contacts

    def push(self, checked: dict, now: float) -> Any:
        """Latch a checked wrench (``sensors.wrench.check``) from ``now``; the ``Wrench``."""
        return self.table.add(dict(checked), now)

    def clear(self, data: Any, bodies: Iterable[int] | None = None) -> list:
        """End the wrenches on ``bodies`` (ids; None: all) now; the ids that had one."""
        gone = self.table.clear(bodies)
        self.table.apply(data)     # zero what the cleared ones wrote
        return gone

    def drop_all(self, data: Any) -> None:
        """Every wrench ends and what they wrote is zeroed (a reset)."""
        self.table.clear()
        self.table.release(data)

    def report_contacts(self, on: bool) -> None:
        """Whether snapshots carry the active contacts (``Snapshot.contacts``); any thread:
        a flag the stepper reads after each chunk."""
        self.want_contacts = bool(on)

    def contacts(self, data: Any) -> np.ndarray | None:
        """The active contacts for a snapshot, while asked for."""
        return active_contacts(self.model, data) if self.want_contacts else None
