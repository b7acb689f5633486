"""Plan arbitration: which plan drives which actuator (physics thread only).

A plan (``motion.trajectory.Plan``) is a path for some actuators that the stepper samples
every chunk. One actuator has at most one plan: a plan taken over takes its actuators from
the older ones (a plan left with none ends), a release takes them without a successor, and
a hold freezes setpoints where the paths are now. Other threads ask about plans through the
snapshot (``Snapshot.plans``), never this list, which the physics thread rebinds.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..motion.trajectory import Plan


class Arbiter:
    """The running plans, one owner an actuator."""

    def __init__(self, plans: Iterable[Plan] = ()) -> None:
        self.running: list[Plan] = list(plans)

    def take_over(self, plan: Plan) -> None:
        """Run ``plan``; older plans give up its actuators."""
        self.release(plan.actuators)
        self.running.append(plan)

    def release(self, actuators: Iterable[int]) -> None:
        """Older plans give up these actuators (a plan left with none ends)."""
        self.running = [p for p in self.running if p.release(actuators)]

    def clear(self) -> None:
        """Every plan ends where it is (the caller sets the setpoints)."""
        self.running = []

    def freeze(self, setpoint: np.ndarray, now: float,
               actuators: np.ndarray | None = None) -> None:
        """Write where each path is at ``now`` into ``setpoint`` and end those paths: all
        of them, or only their share in ``actuators`` (the rest run on)."""
        if actuators is None:
            for plan in self.running:
                setpoint[plan.actuators] = plan.sample([now])[0]
            self.running = []
            return
        for plan in self.running:
            mine = np.isin(plan.actuators, actuators)
            if mine.any():
                setpoint[np.asarray(plan.actuators)[mine]] = plan.sample([now])[0][mine]
        self.release(actuators)

    def sample(self, setpoint: np.ndarray, t_start: float, dt: float,
               n: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The setpoints of the ``n`` steps after ``t_start`` (rows), and per actuator
        whether its path is smooth (not a jump within one step); ``setpoint`` moves to the
        last row and the plans that end within the chunk drop out. (None, None) when no
        plan runs: the setpoints hold."""
        if not self.running:
            return None, None
        times = t_start + dt * np.arange(1, n + 1)
        rows = np.empty((n, setpoint.size))
        rows[:] = setpoint
        smooth = np.zeros(setpoint.size, dtype=bool)
        for plan in self.running:
            rows[:, plan.actuators] = plan.sample(times)
            T = getattr(plan, 'T', plan.t_end - plan.t0)
            smooth[plan.actuators] = np.asarray(T) > dt
        setpoint[:] = rows[-1]
        self.running = [p for p in self.running if p.t_end > times[-1]]
        return rows, smooth

    def targets(self, setpoint: np.ndarray) -> np.ndarray:
        """Where each actuator's path ends (its setpoint when no plan drives it)."""
        target = setpoint.copy()
        for plan in self.running:
            target[plan.actuators] = plan.end     # type: ignore[attr-defined]
        return target
