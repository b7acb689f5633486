"""Minimum-jerk paths for goal setpoints, vectorised over actuators and time samples.

A min-jerk segment of length D and duration T peaks at 1.875 D / T at mid-time, so a
channel's ``max_change_per_s`` fixes the shortest T; a synchronised move takes the longest
T of its joints so that they all arrive together.
"""

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..checks import Vector

PEAK = 1.875  # peak speed of s(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5, in D / T


def min_jerk(tau: Vector) -> Any:
    tau = np.minimum(np.maximum(tau, 0.0), 1.0)    # np.clip costs more on small arrays
    t3 = tau * tau * tau
    return t3 * (10.0 + tau * (-15.0 + 6.0 * tau))


def duration(delta: Vector, rate: Vector) -> float:
    """Shortest T that keeps each |delta_i| within ``rate_i`` (None or inf = no limit)."""
    delta = np.abs(np.asarray(delta, dtype=float))
    rate = np.asarray([np.inf if r is None else r for r in rate], dtype=float)
    with np.errstate(divide='ignore', invalid='ignore'):
        each = np.where(np.isfinite(rate), PEAK * delta / rate, 0.0)
    return float(each.max()) if each.size else 0.0


class Plan:
    """A path for some actuators: sample(t) gives their setpoints at simulated time t."""

    def __init__(self, actuators: Vector, t0: float, t_end: float) -> None:
        self.actuators = np.asarray(actuators, dtype=int)
        self.t0 = t0
        self.t_end = t_end

    def release(self, actuators: Iterable[int]) -> bool:
        """Give up actuators that a newer goal takes over; False when none are left."""
        keep = ~np.isin(self.actuators, list(actuators))
        self._keep(keep)
        self.actuators = self.actuators[keep]
        return self.actuators.size > 0

    def _keep(self, mask):
        raise NotImplementedError

    def sample(self, times: Vector) -> np.ndarray:
        raise NotImplementedError


class MinJerkPlan(Plan):
    """Min-jerk from ``start`` to ``end`` over ``T`` seconds from ``t0``.

    ``T`` is one duration (a synchronised move: every actuator arrives together) or one per
    actuator (independent goals in one request, each at its own rate); 0 jumps at once.
    """

    def __init__(self, actuators: Vector, start: Vector, end: Vector, t0: float,
                 T: Vector) -> None:
        T_arr = np.asarray(T, dtype=float)
        super().__init__(actuators, t0, t0 + (float(T_arr.max()) if T_arr.size else 0.0))
        self.start = np.asarray(start, dtype=float)
        self.delta = np.asarray(end, dtype=float) - self.start
        self.T: Any = float(T_arr) if T_arr.ndim == 0 else T_arr
        self._rate: Any = None if T_arr.ndim == 0 else self._rates(T_arr)

    @staticmethod
    def _rates(T):
        """(1/T, jumps) per actuator: a zero duration jumps, there at any time."""
        jump = T <= 0.0
        return np.where(jump, 0.0, 1.0 / np.where(jump, 1.0, T)), jump

    @property
    def end(self) -> np.ndarray:
        return self.start + self.delta

    def _keep(self, mask: np.ndarray) -> None:
        self.start, self.delta = self.start[mask], self.delta[mask]
        if not np.isscalar(self.T):
            self.T = self.T[mask]
            self._rate = self._rates(self.T)
            self.t_end = self.t0 + (float(self.T.max()) if self.T.size else 0.0)

    def sample(self, times: Vector) -> np.ndarray:
        """(len(times), n) setpoints."""
        rel = np.asarray(times, dtype=float) - self.t0
        if self._rate is None:          # one duration (T is a float)
            if self.T <= 0.0:
                return np.broadcast_to(self.end, (len(rel), self.start.size))
            s = min_jerk(rel / self.T)
            return self.start + s[:, None] * self.delta
        rate, jump = self._rate
        tau = rel[:, None] * rate
        if jump.any():
            tau[:, jump] = 1.0
        return self.start + min_jerk(tau) * self.delta


class WaypointPlan(Plan):
    """A dense joint path (e.g. a Cartesian straight line) sampled by linear interpolation."""

    def __init__(self, actuators: Vector, times: Vector, qpos: Vector,
                 t0: float) -> None:
        times = np.asarray(times, dtype=float)
        super().__init__(actuators, t0, t0 + float(times[-1]))
        self.times = times
        self.qpos = np.asarray(qpos, dtype=float)

    @property
    def end(self) -> np.ndarray:
        return self.qpos[-1]

    def _keep(self, mask: np.ndarray) -> None:
        self.qpos = self.qpos[:, mask]

    def sample(self, times: Vector) -> np.ndarray:
        rel = np.asarray(times) - self.t0
        return np.stack([np.interp(rel, self.times, self.qpos[:, j])
                         for j in range(self.qpos.shape[1])], axis=1)
