"""Plain result records: arrays with a leading environment axis, ready to flatten into a message.

Only the final state of a call is returned, never the trajectory, so the reply size does not
grow with ``nstep``.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class StepResult:
    env_ids: np.ndarray      # (n,) which environments the rows describe
    state: np.ndarray        # (n, state_size) mjSTATE_FULLPHYSICS rows
    time: np.ndarray         # (n,)
    qpos: np.ndarray         # (n, nq)
    qvel: np.ndarray         # (n, nv)
    act: np.ndarray          # (n, na)
    sensordata: np.ndarray | None  # (n, nsensordata) at the returned state, if asked
    unstable: np.ndarray     # (n,) bool: MuJoCo hit bad qpos/qvel/qacc and auto-reset the env


@dataclass
class ForwardResult:
    env_ids: np.ndarray
    sensordata: np.ndarray   # (n, nsensordata)
    xpos: np.ndarray         # (n, nbody, 3)
    xquat: np.ndarray        # (n, nbody, 4)
    site_xpos: np.ndarray    # (n, nsite, 3)
    site_xmat: np.ndarray    # (n, nsite, 9)


@dataclass
class EvaluateResult:
    env_ids: np.ndarray
    state: np.ndarray        # (n, state_size) final mjSTATE_FULLPHYSICS rows
    sensordata: np.ndarray   # (n, nsensordata) at the final state
    cost: np.ndarray | None  # (n,) when a cost callable was given and the run completed
    steps_done: int
    completed: bool          # False when progress() asked to stop early
    unstable: np.ndarray     # (n,) bool, any chunk


def step_result(layout: Any, ids: np.ndarray, rows: np.ndarray, sens: Any,
                unstable: np.ndarray) -> StepResult:
    """A StepResult from integration rows ``(n, full_state_size)`` in ``ids`` order."""
    return StepResult(env_ids=ids.copy(), state=rows[:, layout.physics_columns],
                      time=rows[:, layout.columns('time')][:, 0].copy(),
                      qpos=rows[:, layout.columns('qpos')].copy(),
                      qvel=rows[:, layout.columns('qvel')].copy(),
                      act=rows[:, layout.columns('act')].copy(),
                      sensordata=sens, unstable=unstable)
