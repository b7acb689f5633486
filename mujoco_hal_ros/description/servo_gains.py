"""Servo gains that are stable and critically damped on any arm.

A stiffness chosen from the effort limit alone (full effort at a few hundredths of a
radian) is thousands of N m/rad on a wrist link of a few gram-metre squared: a loop far
faster than a 2 ms step integrates, so the joint chatters from step to step. A real
drive's position loop is tuned to the inertia it moves; so are these gains. Each joint's
loop gets the bandwidth ``w`` the integrator can follow (``bandwidth``: as the torque
loop's, at most ``MAX_HZ`` and ``MAX_STEP`` radians of it per step) on the inertia the
joint moves with the other joints held (``M_ii``, with the joints that mimic it moving
along: ``c^T M c``), critically damped (the damping is solved implicitly by the
``implicitfast`` integrator the URDF import selects, so a mode in which two joints swing
against each other with little inertia is overdamped, not unstable); the stiffness is
lowered further where the effort limit is reached at less than ``FULL_EFFORT_AT`` of
error, so only a large error saturates the drive.

The inertia a joint moves changes with the pose (a base joint turning a folded or a
stretched arm, several times more): servos sized at one pose ring at another. The URDF
import marks the servos it builds (``mark``: a custom numeric per actuator) and the
stepper sizes them again from the current mass matrix once a chunk (``Schedule.apply``).
Pure functions of a model and a configuration, so they are checked without a simulation.
"""

from collections.abc import Sequence
from typing import NamedTuple

import mujoco
import numpy as np

MAX_HZ = 50.0           # the fastest loop a servo gets (Hz), as the torque loop's
MAX_STEP = 0.5          # radians of that loop per timestep at most
FULL_EFFORT_AT = 0.05   # rad (m): no stiffer than full effort at this error
SCHEDULE_PREFIX = 'mujoco_hal_ros/servo/'


def bandwidth(timestep: float) -> float:
    """The loop bandwidth (rad/s) a servo stepped every ``timestep`` seconds can have."""
    return float(min(2.0 * np.pi * MAX_HZ, MAX_STEP / timestep))


def couplings(model: mujoco.MjModel, dofs: Sequence[int] | np.ndarray) -> np.ndarray:
    """(len(dofs), nv): how each dof's joint moves every dof, itself 1 and the joints that
    mimic it (linear joint equalities, chains followed) by their multipliers."""
    follows: dict[int, list[tuple[int, float]]] = {}
    for e in range(model.neq):
        if int(model.eq_type[e]) == int(mujoco.mjtEq.mjEQ_JOINT) and model.eq_obj2id[e] >= 0:
            leader = int(model.jnt_dofadr[model.eq_obj2id[e]])
            follower = int(model.jnt_dofadr[model.eq_obj1id[e]])
            follows.setdefault(leader, []).append((follower, float(model.eq_data[e, 1])))
    out = np.zeros((len(dofs), model.nv))
    for i, dof in enumerate(dofs):
        todo, seen = [(int(dof), 1.0)], set()
        while todo:
            d, gain = todo.pop()
            if d in seen:
                continue
            seen.add(d)
            out[i, d] += gain
            todo += [(f, gain * mult) for f, mult in follows.get(d, ())]
    return out


def moved_inertia(full: np.ndarray, coupling: np.ndarray) -> np.ndarray:
    """The inertia each coupled joint moves with every other joint held: ``c^T M c``."""
    return np.einsum('ij,jk,ik->i', coupling, full, coupling)


def _caps(effort, per):
    return np.array([e / per if e and np.isfinite(e) and e > 0 else np.inf for e in effort],
                    dtype=float)


def gains(own: np.ndarray, moved: np.ndarray, w: float, cap: np.ndarray,
          ratio: float | Sequence[float] | np.ndarray,
          damping: float | np.ndarray = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(kp, kv): bandwidth ``w`` on the joint's ``own`` inertia (``M_ii``), stiffness
    capped at ``cap``; damping ``ratio`` of critical on the inertia it ``moved`` with its
    mimic joints, the joint's own ``damping`` counted in (a URDF's ``<dynamics damping>``
    already resists it). A mimic chain hangs on its leader through a soft equality:
    stiffness sized on the whole chain would swing the leader alone against it."""
    kp = np.minimum(own * w * w, cap)
    kv = 2.0 * np.asarray(ratio, dtype=float) * np.sqrt(kp * moved) - damping
    return kp, np.maximum(kv, 0.0)


def inertia_at(model: mujoco.MjModel, data: mujoco.MjData, dofs: Sequence[int] | np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """(own, moved) inertia of each dof at ``data``'s configuration."""
    mujoco.mj_forward(model, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    return np.diag(full)[np.asarray(dofs, dtype=int)], \
        moved_inertia(full, couplings(model, dofs))


def servo_gains(model: mujoco.MjModel, data: mujoco.MjData, dofs: Sequence[int] | np.ndarray,
                effort: Sequence[float | None],
                ratio: float | Sequence[float] = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kp, kv, inertia) of position servos on ``dofs`` at ``data``'s configuration.
    ``effort``: each joint's effort limit (N m or N; None, 0 or inf: none)."""
    own, moved = inertia_at(model, data, dofs)
    kp, kv = gains(own, moved, bandwidth(model.opt.timestep), _caps(effort, FULL_EFFORT_AT),
                   ratio, model.dof_damping[np.asarray(dofs, dtype=int)])
    return kp, kv, moved


def velocity_gains(model: mujoco.MjModel, data: mujoco.MjData,
                   dofs: Sequence[int] | np.ndarray, effort: Sequence[float | None],
                   full_effort_speed: float = 0.5) -> np.ndarray:
    """Velocity-servo kv for ``dofs``: the speed loop's time constant is ``1 / w`` on the
    inertia the joint moves, no stiffer than full effort at ``full_effort_speed``."""
    _own, moved = inertia_at(model, data, dofs)
    return np.minimum(moved * bandwidth(model.opt.timestep),
                      _caps(effort, full_effort_speed))


class Schedule(NamedTuple):
    """The marked servos of a model, sized again from the current mass matrix."""

    actuators: np.ndarray
    dofs: np.ndarray
    coupling: np.ndarray      # (n, nv): see ``couplings``
    cap: np.ndarray           # N m/rad: the effort-limit stiffness cap
    ratio: np.ndarray         # damping ratio
    w: float

    def apply(self, model: mujoco.MjModel, data: mujoco.MjData, full: np.ndarray) -> None:
        """Size the servos' gains in ``model`` from ``data``'s mass matrix (``full``: an
        nv x nv scratch array); nothing before the first step has computed one."""
        mujoco.mj_fullM(model, data, full)
        moved = moved_inertia(full, self.coupling)
        if not (moved > 0).all():
            return
        kp, kv = gains(np.diag(full)[self.dofs], moved, self.w, self.cap, self.ratio,
                       model.dof_damping[self.dofs])
        model.actuator_gainprm[self.actuators, 0] = kp
        model.actuator_biasprm[self.actuators, 1] = -kp
        model.actuator_biasprm[self.actuators, 2] = -kv


def mark(spec: mujoco.MjSpec, actuator: str, cap: float, ratio: float) -> None:
    """Mark a servo of ``spec`` for gains that follow the configuration."""
    numeric = spec.add_numeric()
    numeric.name = SCHEDULE_PREFIX + actuator
    # no cap: 0 (MuJoCo's XML writer mangles a huge value's neighbour: "1e+12 0")
    numeric.data = [cap if np.isfinite(cap) else 0.0, ratio]


def schedule_of(model: mujoco.MjModel) -> Schedule | None:
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
        caps.append(float(model.numeric_data[adr]) or np.inf)
        ratios.append(float(model.numeric_data[adr + 1]) if model.numeric_size[i] > 1 else 1.0)
    if not acts:
        return None
    ids = np.array(acts)
    dofs = model.jnt_dofadr[model.actuator_trnid[ids, 0]]
    return Schedule(ids, dofs, couplings(model, dofs), np.array(caps), np.array(ratios),
                    bandwidth(model.opt.timestep))
