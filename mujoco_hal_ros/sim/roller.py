"""A chunk of servo setpoints stepped in C (``mujoco.rollout``), without Python per step.

The same steps as ``ctrl[:] = row; mj_step`` per row. Rollout resets mocap bodies unless
they ride along as controls (they do), and applied forces and equality switches it is not
given: a chunk with any of those set gets the stepper's plain loop instead (``usable``).
"""

from __future__ import annotations

from typing import Any

import mujoco
from mujoco import rollout
import numpy as np

FULL_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS
ROLLOUT_MIN = 16     # steps in a chunk from which mujoco.rollout beats the Python loop


class Roller:
    """Rollout buffers for one model (rebound for a model swapped in)."""

    def __init__(self) -> None:
        self._roller: Any = None
        self.enabled = False

    def bind(self, model: Any, data: Any, enabled: bool) -> None:
        """Buffers sized for ``model``; ``enabled``: rollout may be used at all (not with
        torque motors, whose joint loop runs every step)."""
        self.model, self.data = model, data
        self.enabled = enabled
        if enabled and self._roller is None:
            self._roller = rollout.Rollout(nthread=0)            # this thread
        self._spec = int(mujoco.mjtState.mjSTATE_CTRL)
        if model.nmocap:
            self._spec |= int(mujoco.mjtState.mjSTATE_MOCAP_POS |
                              mujoco.mjtState.mjSTATE_MOCAP_QUAT)
        self._nstate = mujoco.mj_stateSize(model, FULL_STATE)
        self._state0 = np.empty(self._nstate)
        self._state: np.ndarray | None = None
        self._sensor: np.ndarray | None = None

    def usable(self, n: int) -> bool:
        """Whether a chunk of ``n`` rows may roll: long enough to gain, and nothing set
        that rollout would reset (applied forces, equality switches)."""
        if not (self.enabled and n >= ROLLOUT_MIN):
            return False
        d, m = self.data, self.model
        return not (d.qfrc_applied.any() or d.xfrc_applied.any()
                    or (m.neq and not np.array_equal(d.eq_active, m.eq_active0)))

    def roll(self, rows: np.ndarray) -> None:
        """Step through a chunk's setpoints (one row of ctrl a step)."""
        m, d = self.model, self.data
        n = len(rows)
        if self._state is None or self._sensor is None or self._state.shape[1] < n:
            size = max(n, 256)
            self._state = np.empty((1, size, self._nstate))
            self._sensor = np.empty((1, size, m.nsensordata))
        mujoco.mj_getState(m, d, self._state0, FULL_STATE)
        controls = rows
        if m.nmocap:   # rollout resets mocap unless it is part of the controls
            controls = np.hstack([rows, np.broadcast_to(d.mocap_pos.ravel(), (n, 3 * m.nmocap)),
                                  np.broadcast_to(d.mocap_quat.ravel(), (n, 4 * m.nmocap))])
        self._roller.rollout(
            [m], [d], self._state0[None], np.ascontiguousarray(controls)[None],
            control_spec=self._spec, skip_checks=True, nstep=n,
            initial_warmstart=d.qacc_warmstart[None].copy(),
            state=self._state[:, :n], sensordata=self._sensor[:, :n])
