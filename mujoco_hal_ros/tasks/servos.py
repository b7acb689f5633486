"""Where position and velocity servos start, so a randomized start is not pulled back home.

Why: a position servo's ``ctrl`` is the pose it pulls towards. An episode that starts from
joint noise, a placed body or a patched gain but keeps the keyframe's ``ctrl`` has its servos
pull the arm back to the keyframe's pose within a fraction of a second (on Menagerie's
Panda the joints' spread fell from 0.1 to 0.007 rad in half a second under zero actions), so
only the command was really random and a success rate overstated the policy. The setpoints
must start where the randomized start is: then ``delta`` actions integrate from there and
actuators the policy does not drive hold their randomized pose.

What a servo is, read from the actuator's own law (``force = g0 * c + b0 + b1 * length +
b2 * velocity``, fixed gain, affine bias; ``c`` is ``ctrl`` or, with activation dynamics,
the activation): a **position servo** has ``b1 < 0``; its hold point, where the position
error is zero, is ``-(b0 + b1 * length) / g0`` (the joint position for MuJoCo's
``<position>``, 255 * width for Panda's tendon-driven gripper). A **velocity servo** has
``b1 == 0, b2 < 0``; its hold point is ``-(b0 + b2 * velocity) / g0``. Other actuators
(motors, muscles, user laws) have no setpoint to move.

The start is *shifted*, not replaced: each servo's ``ctrl`` (and its activation, for filter
and integrator dynamics, where the activation is the setpoint the force follows) starts at
the task's start value plus how far the randomization moved its hold point. A keyframe whose
``ctrl`` equals its pose (Menagerie's) then starts every servo exactly at the randomized
state; a keyframe that sets a servo elsewhere on purpose (a gripper told to close) keeps that
offset; and a task without randomization starts exactly as before, bit for bit.

Lengths and velocities of joint transmissions (the common case) are ``gear * qpos`` and
``gear * qvel``; tendon, site and slider-crank transmissions are computed by MuJoCo
(``mj_fwdPosition`` / ``mj_fwdVelocity`` on a scratch MjData per thread). No randomizable
model field moves a transmission, so the nominal model gives them; the episode's patched
``actuator_gainprm`` / ``actuator_biasprm`` give the law.
"""

import threading

import mujoco
import numpy as np

from ..joint_view import ONE_DOF
from ..pool.layout import FULLPHYSICS

_FIXED = int(mujoco.mjtGain.mjGAIN_FIXED)
_AFFINE = int(mujoco.mjtBias.mjBIAS_AFFINE)
_NONE = int(mujoco.mjtDyn.mjDYN_NONE)
_WITH_ACT = (int(mujoco.mjtDyn.mjDYN_FILTER), int(mujoco.mjtDyn.mjDYN_FILTEREXACT),
             int(mujoco.mjtDyn.mjDYN_INTEGRATOR))
_INTEGRATOR = int(mujoco.mjtDyn.mjDYN_INTEGRATOR)
_JOINT_TRN = (int(mujoco.mjtTrn.mjTRN_JOINT), int(mujoco.mjtTrn.mjTRN_JOINTINPARENT))


def servo_kinds(model: mujoco.MjModel) -> dict[int, str]:
    """``{actuator: 'position' or 'velocity'}`` for the model's servos (see the module)."""
    out = {}
    for a in range(model.nu):
        if int(model.actuator_gaintype[a]) != _FIXED or \
                int(model.actuator_biastype[a]) != _AFFINE or model.actuator_gainprm[a, 0] == 0:
            continue
        dyn = int(model.actuator_dyntype[a])
        if dyn != _NONE and dyn not in _WITH_ACT:
            continue
        if dyn != _NONE and int(model.actuator_actnum[a]) != 1:
            continue
        b1, b2 = model.actuator_biasprm[a, 1], model.actuator_biasprm[a, 2]
        if b1 < 0:
            out[a] = 'position'
        elif b1 == 0 and b2 < 0:
            out[a] = 'velocity'
    return out


class ServoStart:
    """Shifts the servos' starting ``ctrl`` and activations to an episode's randomized start.

    Built once per task; ``shift(state, patch)`` per episode (tens of microseconds on joint
    transmissions). ``servos`` names the actuators it moves, with their kind.
    """

    def __init__(self, model: mujoco.MjModel, start_state: np.ndarray, start_ctrl: np.ndarray,
                 qpos_at: int, qvel_at: int, act_at: int) -> None:
        self.model = model
        kinds = servo_kinds(model)
        self.servos = {model.actuator(a).name: k for a, k in kinds.items()}
        ids = np.asarray(sorted(kinds), dtype=np.intp)
        self.ids = ids
        self._velocity = np.asarray([kinds[a] == 'velocity' for a in ids], dtype=bool)
        dyn = model.actuator_dyntype[ids].astype(int) if len(ids) else np.zeros(0, int)
        # ctrl is the setpoint unless an integrator makes the activation the setpoint
        self._ctrl = ids[dyn != _INTEGRATOR]
        self._ctrl_pos = np.nonzero(dyn != _INTEGRATOR)[0]
        with_act = np.isin(dyn, _WITH_ACT)
        self._act_pos = np.nonzero(with_act)[0]
        self._act_cols = act_at + model.actuator_actadr[ids[with_act]].astype(np.intp) \
            if with_act.any() else np.zeros(0, dtype=np.intp)
        lim = model.actuator_actlimited[ids[with_act]].astype(bool)
        rng = model.actuator_actrange[ids[with_act]].reshape(-1, 2)
        self._act_lo = np.where(lim, rng[:, 0], -np.inf)
        self._act_hi = np.where(lim, rng[:, 1], np.inf)
        lim = model.actuator_ctrllimited[self._ctrl].astype(bool)
        rng = model.actuator_ctrlrange[self._ctrl].reshape(-1, 2)
        self._ctrl_lo = np.where(lim, rng[:, 0], -np.inf)
        self._ctrl_hi = np.where(lim, rng[:, 1], np.inf)
        # joint transmissions on hinges and slides: length = gear * qpos, velocity = gear * qvel
        joint = np.zeros(len(ids), dtype=bool)
        cols = np.zeros(len(ids), dtype=np.intp)
        for p, a in enumerate(ids):
            if int(model.actuator_trntype[a]) in _JOINT_TRN:
                j = int(model.actuator_trnid[a, 0])
                if int(model.jnt_type[j]) in ONE_DOF:
                    joint[p] = True
                    cols[p] = qvel_at + model.jnt_dofadr[j] if self._velocity[p] else \
                        qpos_at + model.jnt_qposadr[j]
        self._joint, self._cols = joint, cols
        self._gear = model.actuator_gear[ids, 0].copy()
        self._local = threading.local()
        self.start_ctrl = np.asarray(start_ctrl, dtype=np.float64).copy()
        self._nominal = self._hold(np.asarray(start_state, dtype=np.float64), None)

    def __bool__(self) -> bool:
        return len(self.ids) > 0

    def _signals(self, state: np.ndarray) -> np.ndarray:
        """Each servo's transmission length (position) or velocity (velocity) at ``state``."""
        out = np.empty(len(self.ids))
        j = self._joint
        out[j] = self._gear[j] * state[self._cols[j]]
        if not j.all():
            m = self.model
            d = getattr(self._local, 'data', None)
            if d is None:
                d = self._local.data = mujoco.MjData(m)
            mujoco.mj_setState(m, d, state, FULLPHYSICS)
            mujoco.mj_fwdPosition(m, d)
            if self._velocity[~j].any():
                mujoco.mj_fwdVelocity(m, d)
            other = np.nonzero(~j)[0]
            a = self.ids[other]
            out[other] = np.where(self._velocity[other], d.actuator_velocity[a],
                                  d.actuator_length[a])
        return out

    def _hold(self, state: np.ndarray, patch: dict[str, np.ndarray] | None) -> np.ndarray:
        """Each servo's hold point at ``state`` under the (patched) gains."""
        m, ids = self.model, self.ids
        gain = (patch or {}).get('actuator_gainprm', m.actuator_gainprm)[ids]
        bias = (patch or {}).get('actuator_biasprm', m.actuator_biasprm)[ids]
        slope = np.where(self._velocity, bias[:, 2], bias[:, 1])
        return -(bias[:, 0] + slope * self._signals(state)) / gain[:, 0]

    def shift(self, state: np.ndarray, patch: dict[str, np.ndarray] | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
        """``(ctrl (nu,), state)``: the episode's starting controls, and its FULLPHYSICS row
        with servo activations shifted (a copy when changed), for a randomized ``state``."""
        ctrl = self.start_ctrl.copy()
        if not len(self.ids):
            return ctrl, state
        delta = self._hold(state, patch) - self._nominal
        if not delta.any():
            return ctrl, state
        ctrl[self._ctrl] = np.clip(ctrl[self._ctrl] + delta[self._ctrl_pos], self._ctrl_lo,
                                   self._ctrl_hi)
        if len(self._act_cols):
            state = state.copy()
            state[self._act_cols] = np.clip(state[self._act_cols] + delta[self._act_pos],
                                            self._act_lo, self._act_hi)
        return ctrl, state
