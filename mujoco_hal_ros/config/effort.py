"""A torque motor's effort limits in joint space, read from the model as MuJoCo applies
them: its ctrl range times its gain, its force range, then its joint's actuator force
range. The device's joint loop stays within them; the battery judges a hold by them."""

from collections.abc import Sequence

import mujoco
import numpy as np


def torque_limits(model: mujoco.MjModel,
                  actuators: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) joint torques (forces on a slide) each motor in ``actuators`` can give;
    infinite where the model sets no limit."""
    lo, hi = np.full(len(actuators), -np.inf), np.full(len(actuators), np.inf)
    for i, a in enumerate(actuators):
        gear, gain = model.actuator_gear[a, 0], model.actuator_gainprm[a, 0]
        f_lo, f_hi = -np.inf, np.inf
        if model.actuator_ctrllimited[a]:
            f_lo, f_hi = sorted(gain * model.actuator_ctrlrange[a])
        if model.actuator_forcelimited[a]:
            f_lo = max(f_lo, model.actuator_forcerange[a, 0])
            f_hi = min(f_hi, model.actuator_forcerange[a, 1])
        t_lo, t_hi = sorted((gear * f_lo, gear * f_hi))
        jid = model.actuator_trnid[a, 0]
        if model.jnt_actfrclimited[jid]:
            t_lo = max(t_lo, model.jnt_actfrcrange[jid, 0])
            t_hi = min(t_hi, model.jnt_actfrcrange[jid, 1])
        lo[i], hi[i] = t_lo, t_hi
    return lo, hi
