"""Instability recovery: the last good state, and the way back to it (physics thread).

After every chunk the stepper asks ``passed``: MuJoCo resets MjData itself on a bad
position, velocity or acceleration and counts a warning (time then is not where the steps
put it, unless it was near 0); NaN that slipped past its checks shows in the sums. A chunk
that passed is kept as the last good state. One that failed goes back to it with the
joints at rest (the scene as it was a chunk ago; only what was moving stops); when that
state diverges again at once, to the keyframe instead. Simulated time never runs
backwards. The caller then holds the pose and ends the plans.
"""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np

from .pushes import Pushes

FULL_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS
BAD_WARNINGS = (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS,
                mujoco.mjtWarning.mjWARN_BADQVEL, mujoco.mjtWarning.mjWARN_BADCTRL)
_BAD_IDX = np.array([int(w) for w in BAD_WARNINGS])
GOOD_STATE = 'last good state'
KEYFRAME = 'keyframe'


def bad_warnings(data: Any) -> int:
    """How many bad-state warnings MuJoCo has counted on ``data``."""
    return int(data.warning.number[_BAD_IDX].sum())


class Recovery:
    """The last good state of one model's data, and the counts of what went wrong."""

    def __init__(self, model: Any, data: Any) -> None:
        self.events = 0                 # instabilities caught (health's unstable_events)
        self.last: str | None = None    # GOOD_STATE or KEYFRAME, after an instability
        self.bind(model, data)

    def bind(self, model: Any, data: Any) -> None:
        """Buffers sized for ``model`` (at start and for a model swapped in); the current
        state counts as good."""
        self.model, self.data = model, data
        self.warn0 = bad_warnings(data)
        self.good = np.empty(mujoco.mj_stateSize(model, FULL_STATE))
        mujoco.mj_getState(model, data, self.good, FULL_STATE)
        self.streak = 0

    def passed(self, t_expected: float) -> bool:
        """Whether the chunk that should have ended at ``t_expected`` is sound; if so its
        state is the last good one."""
        d = self.data
        if abs(d.time - t_expected) > 0.5 * self.model.opt.timestep or \
                bad_warnings(d) != self.warn0 or \
                not math.isfinite(float(d.qpos.sum()) + float(d.qvel.sum())):
            return False
        mujoco.mj_getState(self.model, d, self.good, FULL_STATE)
        self.streak = 0
        return True

    def recover(self, t_expected: float | None, keyframe: int | None,
                pushes: Pushes) -> None:
        """Back to the last good state (the keyframe when it failed at once before), at
        the later of MuJoCo's time and ``t_expected``; the caller holds there."""
        self.events += 1
        t = self.data.time
        t = max(t if np.isfinite(t) else 0.0, t_expected or 0.0)
        if self.streak == 0:
            self.restore_good(t)
        else:
            self.reset(t, keyframe, pushes)
            self.last = KEYFRAME
        self.streak += 1

    def restore_good(self, t: float) -> None:
        """MjData back to the last good state at simulated time ``t``, at rest."""
        m, d = self.model, self.data
        mujoco.mj_setState(m, d, self.good, FULL_STATE)
        d.qvel[:] = 0.0          # what diverged was moving: it starts again at rest
        d.time = t
        mujoco.mj_forward(m, d)
        self.warn0 = bad_warnings(d)
        self.last = GOOD_STATE

    def reset(self, t: float, keyframe: int | None, pushes: Pushes) -> None:
        """MjData back to the keyframe (or the model's defaults) at simulated time ``t``,
        pushes ended, warnings counted from here."""
        m, d = self.model, self.data
        if keyframe is not None:
            mujoco.mj_resetDataKeyframe(m, d, keyframe)
        else:
            mujoco.mj_resetData(m, d)
        pushes.drop_all(d)
        d.time = t
        mujoco.mj_forward(m, d)
        self.warn0 = bad_warnings(d)
