"""When joints count as settled: one definition for a move's arrival and a hold's end.

A move_to is DONE only once its joints are still (``motion.move.settle``), and the Hold
action answers once the joints it watches are still (``ros/sim/control.py``). Both ask
the same question of a state, so both ask it here: the fastest watched joint under
``STILL_SPEED``, and, where a moment's stillness is not enough (a servo settling from a
fast move swings through zero speed on its way), under it for ``STILL_FOR`` seconds
without a break (``Stillness``).
"""

from collections.abc import Sequence

import numpy as np

STILL_SPEED = 2e-3   # rad/s (m/s): joints slower than this count as still
STILL_FOR = 0.2      # seconds still without a break before a hold counts as settled


def joint_speed(qvel: np.ndarray, dofs: Sequence[int] | np.ndarray) -> float:
    """The fastest of the ``dofs``' speeds in ``qvel`` (0 with none to watch)."""
    if len(dofs) == 0:
        return 0.0
    return float(np.abs(np.asarray(qvel)[np.asarray(dofs, dtype=np.intp)]).max())


def is_still(speed: float) -> bool:
    """Whether a ``joint_speed`` counts as still."""
    return speed < STILL_SPEED


class Stillness:
    """Settled over time: True once every watched joint has stayed still for ``quiet``
    seconds of the caller's clock (``update`` gets the time with each speed)."""

    def __init__(self, quiet: float = STILL_FOR) -> None:
        if not quiet >= 0.0:
            raise ValueError(f'quiet must be >= 0 seconds, got {quiet!r}')
        self.quiet = quiet
        self._since: float | None = None

    def update(self, speed: float, now: float) -> bool:
        """Record ``speed`` at time ``now``; whether the joints are settled."""
        if not is_still(speed):
            self._since = None
            return False
        if self._since is None:
            self._since = now
        return now - self._since >= self.quiet
