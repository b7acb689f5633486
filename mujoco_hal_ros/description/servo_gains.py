"""Servo gains that are stable and critically damped on any arm.

A stiffness chosen from the effort limit alone (full effort at a few hundredths of a
radian) is thousands of N m/rad on a wrist link of a few gram-metre squared: a loop far
faster than a 2 ms step integrates, so the joint chatters from step to step. A real
drive's position loop is tuned to the inertia it moves; so are these gains. Each joint's
loop gets the bandwidth ``w`` the integrator can follow (``bandwidth``: as the torque
loop's, at most ``MAX_HZ`` and ``MAX_STEP`` radians of it per step) on the smallest
inertia the joint can see (every other joint free: ``1 / (M^-1)_ii``), and damping that
makes it critically damped on the inertia it sees with the others held (``M_ii``); the
stiffness is lowered further where the effort limit is reached at less than
``FULL_EFFORT_AT`` of error, so only a large error saturates the drive. Pure functions of
the model and a configuration, so they can be checked without a simulation.
"""

from typing import NamedTuple

import mujoco
import numpy as np

MAX_HZ = 50.0           # the fastest loop a servo gets (Hz), as the torque loop's
MAX_STEP = 0.5          # radians of that loop per timestep at most
FULL_EFFORT_AT = 0.05   # rad (m): no stiffer than full effort at this error


class Gains(NamedTuple):
    kp: np.ndarray        # N m/rad (N/m) per servo
    kv: np.ndarray        # N m s/rad: critically damped on the held inertia
    w: float              # rad/s: the bandwidth the stiffness was sized for
    inertia_free: np.ndarray   # kg m^2 (kg): what the joint moves with the others free
    inertia_held: np.ndarray   # ... with the others held


def bandwidth(timestep: float) -> float:
    """The loop bandwidth (rad/s) a servo stepped every ``timestep`` seconds can have."""
    return float(min(2.0 * np.pi * MAX_HZ, MAX_STEP / timestep))


def joint_inertias(model: mujoco.MjModel, data: mujoco.MjData, dofs) -> tuple:
    """(free, held) inertia of each dof at ``data``'s configuration: ``1 / (M^-1)_ii``
    (every other dof free to move) and ``M_ii`` (every other dof held), armature in."""
    mujoco.mj_forward(model, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    dofs = np.asarray(dofs, dtype=int)
    held = np.diag(full)[dofs].copy()
    try:
        inv = np.linalg.inv(full)
        free = 1.0 / np.diag(inv)[dofs]
    except np.linalg.LinAlgError:
        free = held.copy()
    free = np.where(np.isfinite(free) & (free > 0), np.minimum(free, held), held)
    return free, held


def servo_gains(model: mujoco.MjModel, data: mujoco.MjData, dofs, effort,
                dampratio: float = 1.0) -> Gains:
    """Position-servo gains for ``dofs`` at ``data``'s configuration. ``effort``: each
    joint's effort limit (N m or N; None, 0 or inf: none)."""
    free, held = joint_inertias(model, data, dofs)
    w = bandwidth(model.opt.timestep)
    kp = free * w * w
    cap = np.array([e / FULL_EFFORT_AT if e and np.isfinite(e) and e > 0 else np.inf
                    for e in effort], dtype=float)
    kp = np.minimum(kp, cap)
    kv = 2.0 * dampratio * np.sqrt(kp * held)
    return Gains(kp, kv, w, free, held)


def velocity_gains(model: mujoco.MjModel, data: mujoco.MjData, dofs, effort,
                   full_effort_speed: float = 0.5) -> np.ndarray:
    """Velocity-servo kv for ``dofs``: the speed loop's time constant is ``1 / w`` on the
    smallest inertia the joint sees, no stiffer than full effort at ``full_effort_speed``
    of speed error."""
    free, _held = joint_inertias(model, data, dofs)
    kv = free * bandwidth(model.opt.timestep)
    cap = np.array([e / full_effort_speed if e and np.isfinite(e) and e > 0 else np.inf
                    for e in effort], dtype=float)
    return np.minimum(kv, cap)


# --- gains that follow the configuration ---------------------------------------------------
# A base joint moves a folded arm's inertia or a stretched one's, several times more; gains
# sized at one pose ring at the other. Servos the package builds are marked in the model
# (a custom numeric per actuator: [stiffness cap, damping ratio]) and the stepper sizes
# them again from the current mass matrix once a chunk (``Schedule.apply``).
SCHEDULE_PREFIX = 'mujoco_hal_ros/servo/'


class Schedule(NamedTuple):
    actuators: np.ndarray
    dofs: np.ndarray
    cap: np.ndarray           # N m/rad: the effort-limit stiffness cap
    ratio: np.ndarray         # damping ratio
    w: float

    def apply(self, model: mujoco.MjModel, data: mujoco.MjData, full: np.ndarray) -> None:
        """Size the marked servos' gains from ``data``'s mass matrix (``full``: an
        nv x nv scratch array), in ``model``."""
        mujoco.mj_fullM(model, data, full)
        held = np.diag(full)[self.dofs]
        if not (held > 0).all():         # no mass matrix yet (before the first step)
            return
        try:
            free = 1.0 / np.diag(np.linalg.inv(full))[self.dofs]
        except np.linalg.LinAlgError:
            free = held
        free = np.where(np.isfinite(free) & (free > 0), np.minimum(free, held), held)
        kp = np.minimum(free * self.w * self.w, self.cap)
        kv = 2.0 * self.ratio * np.sqrt(kp * held)
        model.actuator_gainprm[self.actuators, 0] = kp
        model.actuator_biasprm[self.actuators, 1] = -kp
        model.actuator_biasprm[self.actuators, 2] = -kv


def mark(spec, actuator: str, cap: float, ratio: float) -> None:
    """Mark a servo of ``spec`` for gains that follow the configuration."""
    numeric = spec.add_numeric()
    numeric.name = SCHEDULE_PREFIX + actuator
    numeric.data = [cap if np.isfinite(cap) else 1e12, ratio]


def schedule_of(model: mujoco.MjModel):
    """The marked servos of ``model`` (a ``Schedule``), or None."""
    acts, caps, ratios = [], [], []
    for i in range(model.nnumeric):
        name = model.numeric(i).name
        if not name.startswith(SCHEDULE_PREFIX):
            continue
        a = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name[len(SCHEDULE_PREFIX):])
        if a < 0 or model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
            continue
        adr = model.numeric_adr[i]
        acts.append(a)
        caps.append(float(model.numeric_data[adr]))
        ratios.append(float(model.numeric_data[adr + 1]) if model.numeric_size[i] > 1 else 1.0)
    if not acts:
        return None
    acts = np.array(acts)
    dofs = model.jnt_dofadr[model.actuator_trnid[acts, 0]]
    return Schedule(acts, dofs, np.array(caps), np.array(ratios),
                    bandwidth(model.opt.timestep))
