"""Drives: what each actuator is, the gains of the loops the package runs around it, and
the control laws those loops compute on the physics thread.

A real arm's driver runs position, velocity or torque loops the simulation must reproduce:
position servos with a gravity feed-forward (``HoldTorque``), velocity servos held to a
joint goal by an outer position loop (``VelocityLoop``), torque motors held to a goal by a
joint impedance loop (``Impedance``). Their gains come from the model (inertia, timestep,
ranges); they are built here from a model and its channel layout, off the physics thread,
and evaluated by the stepper with the functions below, once a step or once a chunk. The
stepper owns the thread and the state; this module owns the laws.
"""

from collections.abc import Callable, Sequence
from typing import NamedTuple, TYPE_CHECKING

import mujoco
import numpy as np

from ..config import effort
from ..description.mobile_base import WHEEL_PREFIX
from ..joint_view import is_hinge

if TYPE_CHECKING:     # the hints only: the device builds its drives from its layout
    from ..config.channels import Layout

# The joint loop that makes torque motors hold a goal, as a drive's position mode does: its
# bandwidth, and at most this many radians of it per timestep (it runs once a step).
IMPEDANCE_HZ = 50.0
IMPEDANCE_STEP = 0.5


class Impedance(NamedTuple):
    """The joint loop that makes torque motors hold a goal, as a real drive's position mode
    does: per actuator, its dof and qpos address and torque per unit of ctrl; the loop's
    bandwidth and the damping the integrator adds implicitly (per dof of the model)."""

    actuators: np.ndarray
    dofs: np.ndarray
    gain: np.ndarray
    qadrs: np.ndarray
    w: float                  # rad/s: bandwidth of every joint (decoupled by the inertia)
    lo: np.ndarray            # joint torque limits (ctrl range, force range, joint's range)
    hi: np.ndarray
    implicit_damping: np.ndarray   # timestep * damping the integrator solves for (nv)


class HoldTorque(NamedTuple):
    """Position servos' gravity feed-forward, as a real driver's position mode adds it: per
    servo, its dof and its kp; ctrl gets ``torque / kp`` on top of the setpoint, so the
    joint settles where it was sent instead of sagging by ``torque / kp``. The torque is
    the one that holds the pose at rest (gravity less springs), so effort shows it. A link
    that rests on another tree (a leg on the ground) is held up by it and gets none: its
    weight pushed into the floor would tilt the stance."""

    actuators: np.ndarray
    dofs: np.ndarray
    kp: np.ndarray
    lo: np.ndarray            # ctrl range of each servo (MuJoCo clamps ctrl to it anyway)
    hi: np.ndarray
    kv: np.ndarray            # servo and joint damping: a moving setpoint gets kv * speed / kp
    inertia: np.ndarray       # joint inertia at the start pose: and inertia * accel / kp
    bodies: np.ndarray        # the body each servo's joint moves (its link)


class VelocityLoop(NamedTuple):
    """The outer position loop a real driver runs over a velocity interface in position
    mode: per velocity servo on a joint, its qpos and dof address; speed command = path
    speed + ``kp`` * position error + the speed at which the servo's ``kv`` gives the
    torque that holds the pose, within the servo's ctrl range (its speed limit)."""

    actuators: np.ndarray
    qadrs: np.ndarray
    dofs: np.ndarray
    kp: np.ndarray            # 1/s: speed commanded per unit of position error
    kv: np.ndarray            # the servo's torque per unit of speed error
    lo: np.ndarray            # ctrl range of each servo (its speed limit)
    hi: np.ndarray
    rolling: np.ndarray = np.zeros(0, dtype=bool)   # drive wheels: held at zero speed


def wheel_actuators(model: mujoco.MjModel) -> set:
    """The actuators a URDF import marked as drive wheels (``description.mobile_base``)."""
    out = set()
    for i in range(model.nnumeric):
        name = model.numeric(i).name
        if name.startswith(WHEEL_PREFIX):
            a = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name[len(WHEEL_PREFIX):])
            if a >= 0:
                out.add(a)
    return out


class ClampGuard(NamedTuple):
    """Position and velocity servos whose force limit MuJoCo would turn into a limit cycle.

    MuJoCo integrates a servo's damping (``kv``) implicitly only while its force is inside
    ``forcerange``; a clamped servo's damping is explicit, and where ``h * kv / inertia > 2``
    one explicit step moves the joint's speed across the whole band of speeds in which the
    servo is not clamped. The force then flips between its two limits every step, forever:
    Menagerie's Panda (joint 7: kv 200, armature 0.1, 12 N m) held still at a pose chatters
    at +-0.11 rad/s in plain MuJoCo once it gets there (a spawn's first steps got it there).
    Per servo: its joint's qpos and dof, gear, gain and affine bias, force limits; and the
    model's timestep."""

    actuators: np.ndarray
    qadrs: np.ndarray
    dofs: np.ndarray
    gear: np.ndarray
    gain: np.ndarray
    bias: np.ndarray          # (n, 3): force = gain * ctrl + b0 + b1 * length + b2 * velocity
    lo: np.ndarray            # forcerange
    hi: np.ndarray
    timestep: float
    least: np.ndarray         # the least inertia each joint can move (``least_inertia``)


# A guarded servo's force is kept this far inside its limit, where MuJoCo keeps its damping
# in the implicit solve (at the limit it counts as clamped).
CLAMP_MARGIN = 1e-6


def _solve(a, b):
    """``a x = b``; least squares when ``a`` is singular (two motors on one joint)."""
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(a, b, rcond=None)[0]


class Drives(NamedTuple):
    """Everything the stepper needs to drive one model's actuators."""

    drives: list                       # per actuator: (drive kind, qpos address or -1)
    impedance: Impedance | None
    hold_torque: HoldTorque | None
    velocity_loop: VelocityLoop | None
    clamp_guard: ClampGuard | None = None


def build(model: mujoco.MjModel, layout: 'Layout', keyframe: int | None) -> Drives:
    """The drives of ``model`` as ``layout`` names them, gains sized at ``keyframe``."""
    m = model
    kinds = [(layout.drive_of(a), int(m.jnt_qposadr[m.actuator_trnid[a, 0]])
              if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT else -1)
             for a in range(m.nu)]
    return Drives(kinds, impedance_loop(m, layout), hold_torque(m, layout, keyframe),
                  velocity_loop(m, layout, keyframe), clamp_guard(m, layout))


def implicit_damping(model: mujoco.MjModel) -> float:
    """Whether the integrator solves joint damping implicitly (1.0) or not (0.0): Euler
    (unless its damping is disabled) and the implicit integrators do, RK4 does not."""
    integ = mujoco.mjtIntegrator(model.opt.integrator)
    if integ == mujoco.mjtIntegrator.mjINT_EULER:
        return 0.0 if model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_EULERDAMP else 1.0
    return 0.0 if integ == mujoco.mjtIntegrator.mjINT_RK4 else 1.0


def servo_gravcomp(model: mujoco.MjModel, layout: 'Layout') -> list:
    """Let position servos carry their links' weight inside MuJoCo (opt-in).

    Bodies hanging only from servo-driven hinges or slides get ``gravcomp``, and those
    joints ``actuatorgravcomp``, so the compensation is an actuator force: it counts in
    ``qfrc_actuator`` (effort) and within the joint's actuator force range. A body with
    a free, ball or unactuated joint above it (a legged robot's trunk, a passive
    pendulum, a payload) keeps its weight.
    """
    m = model
    servo_joints = {int(m.actuator_trnid[a, 0]) for a in range(m.nu)
                    if layout.drive_of(a) == 'position'}
    changed = []
    for b in range(1, m.nbody):
        if m.body_gravcomp[b] != 0:
            continue
        joints: list[int] = []
        body = b
        while body > 0:
            joints.extend(range(m.body_jntadr[body],
                                m.body_jntadr[body] + m.body_jntnum[body]))
            body = m.body_parentid[body]
        if joints and all(j in servo_joints for j in joints):
            m.body_gravcomp[b] = 1.0
            m.jnt_actgravcomp[joints] = 1
            changed.append(layout.bodies[b] or str(b))
    if changed and hasattr(m, 'flg_gravcomp'):
        m.flg_gravcomp = True        # MuJoCo skips gravcomp unless the compiler saw some
    return changed


def joint_inertia(model: mujoco.MjModel, keyframe: int | None, dofs: np.ndarray) -> np.ndarray:
    """Each dof's own inertia (armature included) at the start pose."""
    m = model
    d = mujoco.MjData(m)
    if keyframe is not None:
        mujoco.mj_resetDataKeyframe(m, d, keyframe)
    mujoco.mj_forward(m, d)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    return np.maximum(np.diag(full)[dofs], m.dof_M0[dofs])


def hold_torque(model: mujoco.MjModel, layout: 'Layout',
                keyframe: int | None) -> HoldTorque | None:
    """Position servos: the torque that holds the pose and the lead a moving setpoint
    needs. A joint whose drive carries MuJoCo's own gravcomp (``actgravcomp``) needs
    no gravity offset (``qfrc_gravcomp`` takes it out) but still the lead: without it
    a URDF arm's soft servos lagged a FollowJointTrajectory past its path tolerance."""
    m = model
    acts = [a for a in range(m.nu) if layout.drive_of(a) == 'position']
    if not acts:
        return None
    jids = m.actuator_trnid[acts, 0]
    lo = np.where(m.actuator_ctrllimited[acts], m.actuator_ctrlrange[acts, 0], -np.inf)
    hi = np.where(m.actuator_ctrllimited[acts], m.actuator_ctrlrange[acts, 1], np.inf)
    dofs = m.jnt_dofadr[jids]
    return HoldTorque(np.array(acts), dofs, m.actuator_gainprm[acts, 0], lo, hi,
                      np.maximum(-m.actuator_biasprm[acts, 2], 0.0) + m.dof_damping[dofs],
                      joint_inertia(m, keyframe, dofs), m.jnt_bodyid[jids])


def impedance_loop(model: mujoco.MjModel, layout: 'Layout') -> Impedance | None:
    """Torque motors on joints, and what the stepper's joint loop needs to drive them
    to a position (``joint_torque`` below, run by the stepper once a step)."""
    m = model
    acts = [a for a in range(m.nu) if layout.drive_of(a) == 'motor_impedance'
            and layout.joint_kind(int(m.actuator_trnid[a, 0]))]
    if not acts:
        return None
    jids = m.actuator_trnid[acts, 0]
    h = m.opt.timestep
    w = min(2 * np.pi * IMPEDANCE_HZ, IMPEDANCE_STEP / h)
    gain = m.actuator_gear[acts, 0] * m.actuator_gainprm[acts, 0]   # torque per ctrl
    lo, hi = effort.torque_limits(m, acts)
    return Impedance(np.array(acts), m.jnt_dofadr[jids], gain, m.jnt_qposadr[jids], w,
                     lo, hi, h * m.dof_damping * implicit_damping(m))


def velocity_loop(model: mujoco.MjModel, layout: 'Layout',
                  keyframe: int | None) -> VelocityLoop | None:
    """Velocity servos on joints, and the outer position loop that holds them to a
    joint goal (``joint_speed`` below). Its gain makes the servo's kv and the joint's
    inertia a critically damped loop (position error to speed to torque), no faster
    than the torque loop's bandwidth and step, so it is stable at the model's timestep."""
    m = model
    acts = [a for a in range(m.nu) if layout.drive_of(a) == 'velocity']
    if not acts:
        return None
    jids = m.actuator_trnid[acts, 0]
    dofs = m.jnt_dofadr[jids]
    h = m.opt.timestep
    w = min(2 * np.pi * IMPEDANCE_HZ, IMPEDANCE_STEP / h)
    integ = m.actuator_dyntype[acts] == mujoco.mjtDyn.mjDYN_INTEGRATOR
    # A plain velocity servo pushes kv per unit of speed error; an intvelocity one
    # integrates its ctrl into a position it holds with kp, so no speed offset adds
    # torque to it (no hold feed-forward: infinite kv), and kp stands for kv in the gain.
    kv = np.where(integ, m.actuator_gainprm[acts, 0], -m.actuator_biasprm[acts, 2])
    damping = kv + m.dof_damping[dofs]          # what resists the joint's speed
    inertia = joint_inertia(m, keyframe, dofs)
    kp = np.minimum(damping / (4.0 * inertia), w * w * inertia / damping)
    kp = np.minimum(kp, IMPEDANCE_STEP / h)
    lo = np.where(m.actuator_ctrllimited[acts], m.actuator_ctrlrange[acts, 0], -np.inf)
    hi = np.where(m.actuator_ctrllimited[acts], m.actuator_ctrlrange[acts, 1], np.inf)
    wheels = wheel_actuators(m)
    return VelocityLoop(np.array(acts), m.jnt_qposadr[jids], dofs, kp,
                        np.where(integ, np.inf, kv), lo, hi,
                        np.array([a in wheels for a in acts], dtype=bool))


def clamp_guard(model: mujoco.MjModel, layout: 'Layout') -> ClampGuard | None:
    """The position and velocity servos on hinges and slides that can flip between their
    force limits: force-limited, affine (a velocity servo is one with no stiffness), and
    damped so hard that ``h * kv / inertia > 1`` for the least inertia the joint can have
    (2 is where one explicit step crosses the band). The inertia at the start pose is no
    bound: a Panda with velocity servos, folded by a kick, had a fifth of its start
    inertia on joint 1 and flipped at +-87 N m there."""
    m = model
    acts = [a for a in range(m.nu) if layout.drive_of(a) in ('position', 'velocity')
            and m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
            and layout.joint_kind(int(m.actuator_trnid[a, 0]))
            and m.actuator_forcelimited[a]
            and m.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
            and m.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
            and m.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE
            and m.actuator_gainprm[a, 0] > 0]
    if not acts:
        return None
    jids = m.actuator_trnid[acts, 0]
    dofs = m.jnt_dofadr[jids]
    gear = m.actuator_gear[acts, 0]
    kv = -m.actuator_biasprm[acts, 2] * gear * gear         # joint torque per joint speed
    least = least_inertia(m, jids)
    risky = kv * m.opt.timestep / least > 1.0
    if not risky.any():
        return None
    pick = np.flatnonzero(risky)
    picked = np.array(acts)[pick]
    return ClampGuard(picked, m.jnt_qposadr[jids[pick]], dofs[pick], gear[pick],
                      m.actuator_gainprm[picked, 0], m.actuator_biasprm[picked, :3].copy(),
                      m.actuator_forcerange[picked, 0], m.actuator_forcerange[picked, 1],
                      float(m.opt.timestep), least[pick])


def least_inertia(model: mujoco.MjModel, joints: Sequence[int] | np.ndarray) -> np.ndarray:
    """The least inertia each hinge or slide joint can move, whatever the pose: its armature
    and the bodies welded to its own body (no joint between), about its axis (a hinge) or
    along it (a slide). Whatever hangs below on other joints can only add to it."""
    m = model
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    moves_with = np.arange(m.nbody)      # the nearest body at or above with a joint
    for b in range(1, m.nbody):          # parents come before their children
        if m.body_jntnum[b] == 0:
            moves_with[b] = moves_with[m.body_parentid[b]]
    out = np.empty(len(joints))
    for i, j in enumerate(joints):
        j = int(j)
        bodies = np.flatnonzero(moves_with == m.jnt_bodyid[j])
        mass = float(m.body_mass[bodies].sum())
        total = mass
        if is_hinge(m, j):
            axis, anchor = d.xaxis[j], d.xanchor[j]
            total = 0.0
            for b in bodies.tolist():
                rot = d.ximat[b].reshape(3, 3)
                local = rot.T @ axis
                r = d.xipos[b] - anchor
                off = r - (r @ axis) * axis
                total += float(local @ (m.body_inertia[b] * local)) + m.body_mass[b] * (off @ off)
        out[i] = total + m.dof_armature[m.jnt_dofadr[j]]
    # a massless link without armature (a universal joint's middle body) moves nothing of
    # its own: the bound is then MuJoCo's smallest inertia, not a division by zero
    return np.maximum(out, mujoco.mjMINVAL)


# --- the control laws, evaluated on the physics thread ----------------------------------------
def joint_torque(imp: Impedance, model: mujoco.MjModel, data: mujoco.MjData, tree: np.ndarray,
                 local: np.ndarray, mass_buf: np.ndarray, eye: np.ndarray, q_ref: np.ndarray,
                 v_ref: np.ndarray | None, a_ref: np.ndarray | None) -> np.ndarray:
    """The torque motors' torques for one step: each joint driven to ``q_ref`` as a
    critically damped loop of bandwidth ``w``, decoupled through the inertia the motors see
    with every other dof free (the current mass matrix, plus the damping the integrator
    solves implicitly), with gravity, Coriolis, springs and the joints' damping compensated;
    each motor clipped at its own effort limits. ``tree`` are the dofs the motors' joints
    share a mass matrix block with, ``local`` the motors' rows in it; ``mass_buf`` (nv x nv)
    and ``eye`` (the identity of ``tree``'s size) are scratch sized once.

    The loop is discretised implicitly (backward Euler on its own stiffness and damping): it
    runs once a step, and an explicit PD this stiff would go unstable at a coarse timestep
    or on a light link next to a heavy one. MuJoCo's state after the last step gives the
    mass matrix and the bias forces (as ``qfrc_bias`` always is).
    """
    m, d = model, data
    h, w = m.opt.timestep, imp.w
    dofs = imp.dofs
    mujoco.mj_fullM(m, d, mass_buf)
    mass = mass_buf[np.ix_(tree, tree)]
    mass[np.diag_indices(len(tree))] += imp.implicit_damping[tree]
    minv = np.linalg.solve(mass, eye).T      # rows of (M + hD)^-1: the dofs
    e = q_ref - d.qpos[imp.qadrs]
    v = d.qvel[dofs]
    dv = -v if v_ref is None else v_ref - v
    acc = (w * w * e + 2.0 * w * dv - w * w * h * v) / (1.0 + w * h) ** 2
    if a_ref is not None:
        acc = acc + a_ref
    # Gravity, Coriolis and springs as of the last step; the motors' own joint damping at
    # the speed now (a drive's velocity loop overcomes it).
    load = (d.qfrc_bias - d.qfrc_spring - d.qfrc_gravcomp)[tree]
    load[local] += m.dof_damping[dofs] * v
    want = acc + minv @ load
    # A drive at its effort limit gives what it has and no more, and the others do not make
    # up for it: each drive holds its own joint, as real ones do. Solving the others again
    # around a saturated one (exact decoupling at any torque) asked them for its coupling
    # too, which saturated them in turn, and on a humanoid lying on the floor the torques
    # swung from one limit to the other from step to step.
    return np.clip(_solve(minv[:, local], want), imp.lo, imp.hi)


def joint_speed(vl: VelocityLoop, held: np.ndarray, data: mujoco.MjData, q_ref: np.ndarray,
                v_ref: np.ndarray | None) -> np.ndarray:
    """The speed commands of the velocity servos ``held`` to positions ``q_ref`` for one
    step: path speed, plus ``kp`` times the position error, plus the speed at which the
    servo's own ``kv`` pushes the torque that holds the joint against gravity, Coriolis and
    springs now (as a position servo's hold torque); clipped to each servo's speed limit."""
    d = data
    dofs = vl.dofs[held]
    e = q_ref - d.qpos[vl.qadrs[held]]
    load = (d.qfrc_bias - d.qfrc_spring - d.qfrc_gravcomp)[dofs]
    cmd = vl.kp[held] * e + load / vl.kv[held]
    if v_ref is not None:
        cmd = cmd + v_ref
    return np.clip(cmd, vl.lo[held], vl.hi[held])


def feed_forward(ht: HoldTorque, model: mujoco.MjModel, data: mujoco.MjData,
                 scratch: mujoco.MjData, above: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(actuators, ctrl offsets) that make position servos hold against gravity at the
    current pose (zero velocity). ``scratch`` is a private MjData of the same model;
    ``above[b, c]`` says whether body ``b`` is body ``c`` or one of its ancestors, so a link
    resting on another tree (a leg on the ground) gets none."""
    m, d, g = model, data, scratch
    g.qpos[:] = d.qpos
    g.qvel[:] = 0.0
    mujoco.mj_kinematics(m, g)
    mujoco.mj_comPos(m, g)
    mujoco.mj_comVel(m, g)
    g.qacc[:] = 0.0
    tau = np.empty(m.nv)
    mujoco.mj_rne(m, g, 0, tau)
    # Springs and the model's own (passive) body gravcomp carry part of it.
    tau -= d.qfrc_spring + d.qfrc_gravcomp
    out = tau[ht.dofs] / ht.kp
    if d.ncon:
        geoms = d.contact.geom[:d.ncon]
        b1, b2 = m.geom_bodyid[geoms[:, 0]], m.geom_bodyid[geoms[:, 1]]
        other = m.body_rootid[b1] != m.body_rootid[b2]
        if other.any():
            resting = above[np.concatenate([b1[other], b2[other]])].any(axis=0)
            out = out * ~resting[ht.bodies]
    return ht.actuators, out


def _flips(g: ClampGuard, data: mujoco.MjData, ctrl: np.ndarray,
           mobility: np.ndarray | Callable[[], np.ndarray],
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(flip, force, rest, limit) for the guarded servos this step, ``ctrl`` as sent: which
    ones MuJoCo will clamp so that its explicit step carries their speed across the band to
    the opposite limit. The step's acceleration is predicted from the last one (``qacc``,
    contact forces included) changed by what the clamped forces change (``mobility``): a
    servo pressing at its limit against an obstacle keeps pressing, and flips nothing.
    ``mobility`` is the array ``guard_mobility`` gives, or a function making it: called only
    when a clamped force changes (not for a servo that keeps pressing)."""
    q = data.qpos[g.qadrs] * g.gear
    v = data.qvel[g.dofs] * g.gear
    rest = g.bias[:, 0] + g.bias[:, 1] * q + g.bias[:, 2] * v
    force = g.gain * ctrl[g.actuators] + rest
    high, low = force >= g.hi, force <= g.lo
    limit = np.where(high, g.hi, g.lo)
    if not (high.any() or low.any()):
        return high, force, rest, limit
    applied = np.where(high | low, limit, force)
    change = g.gear * (applied - data.actuator_force[g.actuators])     # joint torques
    accel = data.qacc[g.dofs].copy()
    if np.abs(change).max() > CLAMP_MARGIN * np.abs(limit).max():
        accel += (mobility() if callable(mobility) else mobility) @ change
    f_next = force + g.bias[:, 2] * g.gear * g.timestep * accel
    return (high & (f_next < g.lo)) | (low & (f_next > g.hi)), force, rest, limit


def keep_implicit(guard: ClampGuard, data: mujoco.MjData, ctrl: np.ndarray,
                  mobility: np.ndarray) -> None:
    """Keep a clamped servo's damping implicit where one explicit step would flip it.

    Where MuJoCo's explicit step at the limit would carry a servo's force past the opposite
    limit (``_flips``: the step that starts the cycle), its ``ctrl`` is set so the force is
    just inside the limit it was pushing at: the same force, with the damping in the
    implicit solve, so the joint lands inside the band instead of across it. Servos whose
    clamped step stays on its side keep MuJoCo's own explicit step (a saturated move
    accelerates as it should). ``ctrl`` is the data's ctrl, already holding this step's
    setpoints; ``mobility`` the inverse mass matrix over the servos' joints
    (``guard_mobility``): joints whose axes line up (a Panda's 1 and 3 at joint 2 = 0)
    move as one light mode, and each one's own inertia would not predict their flip."""
    g = guard
    flip, _force, rest, limit = _flips(g, data, ctrl, mobility)
    if flip.any():
        inside = limit - np.sign(limit) * CLAMP_MARGIN * np.abs(limit)
        ctrl[g.actuators[flip]] = ((inside - rest) / g.gain)[flip]


def guard_mobility(guard: ClampGuard, model: mujoco.MjModel, data: mujoco.MjData,
                   mass_buf: np.ndarray) -> np.ndarray:
    """The inverse mass matrix (armature included) over the guarded joints at the last step:
    joint speed per unit of joint torque and timestep, every other dof free. Once a chunk:
    the pose moves little within one. A fresh MjData's mass matrix is zeros: then each
    joint alone at the least inertia it can move. ``mass_buf`` is nv x nv."""
    mujoco.mj_fullM(model, data, mass_buf)
    dofs = guard.dofs
    try:
        if not mass_buf.any():
            raise np.linalg.LinAlgError
        return np.linalg.inv(mass_buf)[np.ix_(dofs, dofs)]
    except np.linalg.LinAlgError:
        return np.diag(1.0 / guard.least)


def cycling(guard: ClampGuard, model: mujoco.MjModel, data: mujoco.MjData,
            mass_buf: np.ndarray) -> bool:
    """Whether a guarded servo is at its limit and its next step would flip it: the stepper
    then runs ``keep_implicit`` every step of the next chunk. Checked once a chunk, so a
    model's chunks stay in one C call while no servo cycles (a servo pressing at its limit
    included)."""
    g = guard
    f = data.actuator_force[g.actuators]
    near = 2 * CLAMP_MARGIN
    if not ((f >= g.hi - near * np.abs(g.hi)) | (f <= g.lo + near * np.abs(g.lo))).any():
        return False
    flip, *_ = _flips(g, data, data.ctrl, lambda: guard_mobility(g, model, data, mass_buf))
    return bool(flip.any())
