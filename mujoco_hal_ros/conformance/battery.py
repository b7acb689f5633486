"""The battery: the same checks for every zoo model, as a new user would try the device.

Each check is a function ``check(ctx) -> CheckResult``; ``run(zoo_model)`` opens the
device zero-config (paused, real-time factor 0, advanced with ``step``) and runs them in
order. Every measurement is independent of the device's own bookkeeping: positions come
from forward kinematics on a fresh MjData set from the published joint values, efforts are
recomputed by MuJoCo from the published state. A check that does not apply says why.

Why one module of this size: it is the battery, one list of checks run in order over one
``Context``; the checks share its helpers (sampled targets, clear lines, bare-model drift,
holding torques) and are read side by side when a zoo cell fails, so a split would only
scatter one table's rows.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
import time
from typing import Any, TYPE_CHECKING

import mujoco
import numpy as np

from .. import errors
from ..config import effort
from ..errors import DeviceError
from ..joint_view import FREE, is_one_dof
from ..motion import gripper as gr, joint_trajectory as jt, move as moves
from . import zoo

if TYPE_CHECKING:     # the hints only
    from ..sim.device import Device

CHECKS = ('start', 'keyframe', 'move_to', 'unreachable', 'hold', 'trajectory',
          'trajectory_small', 'effort', 'step', 'mimic', 'gripper')
TARGETS = 10            # move_to targets per arm
RANGE_SHARE = 0.7       # targets come from joint configurations within this share of a range
STILL_AFTER = 2.0       # simulated seconds a reached target must stay within tolerance
STABLE_FOR = 5.0        # simulated seconds untouched at the keyframe
HOLD_FOR = 1.0
HOLD_TOL = 1e-3         # rad (m) a held joint may move over HOLD_FOR
GIVE_WAY_FOR = 10.0     # simulated seconds a pose held past a drive's effort limit may take
UNREACHABLE_WALL = 10.0  # wall seconds an unreachable target may take to be refused
MOVE_LIMIT = 40.0       # simulated seconds a move may take before the check gives up on it
PATH_TOL = 0.05         # rad: the FollowJointTrajectory path tolerance the check sets
GOAL_TOL = 0.01
TRAJECTORY_TIME = 3.0   # seconds of the FollowJointTrajectory goal
SMALL_MOVE = (0.03, 0.15)   # rad (m) each joint moves in the small trajectory
STEP = 0.04             # rad (m) of a setpoint step, within any servo's linear range
STEP_FOR = 0.6          # simulated seconds a step response is watched
# of the step: each servo alone is critically damped (no overshoot); two light wrist
# joints coupled through their mass matrix swing each other up to 12 % past (hextilt's
# flying arm, Tiago's arm_6 against arm_7; bench/README.md)
MAX_OVERSHOOT = 0.15
MAX_SETTLING = 0.5      # s to within SETTLED of the step, and staying there
CRITICAL_SETTLING = 5.83   # a critically damped loop's 2 % settling time, times 1 / w
SETTLED = 0.02
MAX_VARIATION = 1.4     # total variation / step: 1 + 2 x overshoot, and no chatter (which
#                         measured 3 to 100 on the gains the import used to build)
MIMIC_TOL = 1e-3        # rad (m) a mimic joint may be off its leader's relation
HOLD_EFFORT_SHARE = 0.05   # effort within this share of the gravity torque it carries
GRIPPER_SETTLE = 1.5    # simulated seconds the fingers get to open or close
MIN_OPENING_CHANGE = 2e-3   # m the measured finger opening must change from closed to open


@dataclass
class CheckResult:
    model: str
    check: str
    passed: bool
    detail: str = ''
    skipped_reason: str | None = None
    metrics: dict | None = None      # numbers the benchmark summarises (worst overshoot, ...)

    @property
    def mark(self) -> str:
        if self.skipped_reason:
            return 'skip'
        return 'pass' if self.passed else 'FAIL'


class Context:
    """One device on one zoo model, and what the checks share about it."""

    def __init__(self, zm: zoo.ZooModel, device: 'Device'):
        self.zoo = zm
        self.dev = device
        self.model = device.model
        layout = device.layout
        self.held = [g for g in layout.goals.values()
                     if g.joint >= 0 and g.drive in ('position', 'motor_impedance', 'velocity')]
        self.end: tuple[str, str] | None = None
        if zm.end:
            self.end = ('site', zm.end) if zm.end in layout.sites else ('body', zm.end)
        elif zm.kind == 'arm':
            self.end = zoo.end_point(self.model, [g.joint for g in self.held])
        elif zm.kind == 'hand':
            self.end = zoo.fingertip(self.model, [g.joint for g in self.held])
        self.fk_data = mujoco.MjData(self.model)

    def steps(self, seconds: float) -> int:
        return max(1, int(round(seconds / self.model.opt.timestep)))

    def fk(self, snap: Any = None) -> np.ndarray:
        """Where the end point is by forward kinematics from the published joint values
        (hinges and slides: what joint_states carries; a free base from odometry)."""
        m, d = self.model, self.fk_data
        d.qpos[:] = m.qpos0
        snap = snap or self.dev.snapshot
        for j in np.flatnonzero(m.jnt_type == FREE):
            adr = m.jnt_qposadr[j]      # a floating base: where odometry says it is
            d.qpos[adr:adr + 7] = snap.qpos[adr:adr + 7]
        values = self.dev.read(snapshot=snap)
        for c in self.dev.layout.reads:
            if c.kind == 'joint':
                d.qpos[c.index] = c.scale * values[c.name] + c.offset
        mujoco.mj_kinematics(m, d)
        if self.end is None:
            raise ValueError(f'{self.zoo.name} has no end point to place (a check that needs '
                             'one skips such a model first)')
        kind, name = self.end
        return (d.site_xpos[m.site(name).id] if kind == 'site'
                else d.xpos[m.body(name).id]).copy()

    def run_move(self, move: Any) -> dict[str, Any]:
        """Step a paused device until the move has its result (or MOVE_LIMIT past the end
        of its planned path: a joint slow by its velocity limit, a PR2's torso lifting at
        13 mm/s, plans a long path)."""
        chunk = self.steps(0.05)
        t0 = self.dev.snapshot.time
        while not move.done():
            planned = (move.plan_end - t0) if move.plan_end is not None else 0.0
            if self.dev.snapshot.time - t0 >= MOVE_LIMIT + max(planned, 0.0):
                break
            self.dev.step(chunk)
        return move.result


def _no_end(ctx):
    """Why a model has no point for move_to (and no arm joints to follow)."""
    if ctx.zoo.kind == 'hand':
        return _no_fingertip(ctx)
    if ctx.zoo.kind != 'arm':
        return f'{ctx.zoo.kind}: not an arm, no end point to move'
    if not ctx.dev.layout.goals:
        return 'no actuators: nothing to move' + _mocap_driven(ctx.model, 'and this arm has none')
    return 'no chain of hinges driven to a position' + _mocap_driven(
        ctx.model, f'and this model\'s {ctx.model.nu} drive no joint of the arm')


def _mocap_driven(m: mujoco.MjModel, actuators: str) -> str:
    """What moves an arm whose joints have no actuators, when a mocap body welded to it
    does; ``actuators`` says what the device has to drive instead."""
    for e in range(m.neq):
        if m.eq_type[e] != mujoco.mjtEq.mjEQ_WELD or m.eq_objtype[e] != mujoco.mjtObj.mjOBJ_BODY:
            continue
        pair = (int(m.eq_obj1id[e]), int(m.eq_obj2id[e]))
        for a, b in (pair, pair[::-1]):
            if m.body_mocapid[a] >= 0 and m.body_mocapid[b] < 0:
                return (f' (its {m.body(b).name or b} is welded to mocap body '
                        f'{m.body(a).name or a}, which the environment moves each step; '
                        f'the device drives actuators, {actuators})')
    return ''


def _no_fingertip(ctx: Context) -> str:
    """Why no finger of a hand can be driven to a point by IK on its joints."""
    m = ctx.model
    tendons = int((m.actuator_trntype == mujoco.mjtTrn.mjTRN_TENDON).sum())
    if tendons:
        return (f'{tendons} of {m.nu} actuators drive tendons rather than joints, and '
                f'every fingertip has a joint above it that no joint actuator drives: '
                f'move_to solves for joint setpoints, so no finger can be driven to a point')
    coupled = int((m.eq_type == mujoco.mjtEq.mjEQ_JOINT).sum())
    if coupled:
        return (f'every fingertip has a joint no actuator drives, and {coupled} joint '
                f'equalities couple finger joints (mimic joints): move_to solves for each '
                f'driven joint on its own and does not follow a coupling')
    return 'hand: no fingertip below a chain of joints each driven to a position'


def _skip(ctx, check, reason):
    return CheckResult(ctx.zoo.name, check, True, '', reason)


def _fail(ctx, check, detail):
    return CheckResult(ctx.zoo.name, check, False, detail)


def _pass(ctx, check, detail):
    return CheckResult(ctx.zoo.name, check, True, detail)


# --- the checks -----------------------------------------------------------------------------
def check_start(ctx: Context) -> CheckResult:
    dev = ctx.dev
    joints = [c for c in dev.layout.reads if c.kind == 'joint']
    snap = dev.snapshot
    if not (np.isfinite(snap.qpos).all() and np.isfinite(snap.qvel).all()):
        return _fail(ctx, 'start', 'state not finite at the start')
    drives: dict[str, int] = {}
    for g in dev.layout.goals.values():
        drives[g.drive] = drives.get(g.drive, 0) + 1
    text = ', '.join(f'{n} {d}' for d, n in sorted(drives.items())) or 'no goals'
    return _pass(ctx, 'start', f'{len(joints)} joints, {text}')


def expected_keyframe(model: mujoco.MjModel) -> int | None:
    names = [model.key(i).name for i in range(model.nkey)]
    if 'home' in names:
        return names.index('home')
    return 0 if names else None


def check_keyframe(ctx: Context) -> CheckResult:
    dev, m = ctx.dev, ctx.model
    key = expected_keyframe(m)
    if key is None:
        where = 'qpos0 (no keyframe)'
        q_ref = m.qpos0
    else:
        if dev.keyframe != key:
            return _fail(ctx, 'keyframe', f'started at keyframe {dev.keyframe!r}, expected '
                         f'{key} ({m.key(key).name!r})')
        where = f'keyframe {m.key(key).name or key!r}'
        q_ref = m.key_qpos[key]
    events = dev.health()['unstable_events']
    dev.step(ctx.steps(STABLE_FOR))
    snap = dev.snapshot
    if dev.health()['unstable_events'] != events or not np.isfinite(snap.qpos).all():
        return _fail(ctx, 'keyframe', f'unstable within {STABLE_FOR:g} s at {where}')
    dev.reset()
    back = float(np.abs(dev.snapshot.qpos - q_ref).max(initial=0.0))
    if back > 1e-9:
        return _fail(ctx, 'keyframe', f'reset went {back:.3g} off {where}')
    dev.step(ctx.steps(STABLE_FOR))       # and settles again: the next checks start there
    if dev.health()['unstable_events'] != events:
        return _fail(ctx, 'keyframe', f'unstable within {STABLE_FOR:g} s after reset')
    return _pass(ctx, 'keyframe', f'{where}; stable {STABLE_FOR:g} s; reset exact')


def _sample_targets(ctx, rng, joints, count):
    """Points the end reaches at random configurations within RANGE_SHARE of each joint's
    range (centred), touching nothing the start pose does not."""
    m = ctx.model
    d = mujoco.MjData(m)
    base = ctx.dev.snapshot.qpos.copy()
    d.qpos[:] = base
    mujoco.mj_forward(m, d)
    contacts0 = _contact_pairs(m, d)
    out, tries, prev = [], 0, base
    kind, name = ctx.end
    while len(out) < count and tries < 200 * count:
        tries += 1
        d.qpos[:] = base
        for j in joints:
            jid = m.joint(j).id
            mid, half = _span(ctx, jid, RANGE_SHARE)
            d.qpos[m.jnt_qposadr[jid]] = rng.uniform(mid - half, mid + half)
        mujoco.mj_forward(m, d)
        if _contact_pairs(m, d) - contacts0:
            continue
        point = (d.site_xpos[m.site(name).id] if kind == 'site'
                 else d.xpos[m.body(name).id]).copy()
        if not _clear_line(m, prev, d.qpos.copy(), contacts0):
            continue
        prev = d.qpos.copy()     # the device goes from one target to the next
        out.append(point)
    return out


def _span(ctx, jid, share):
    """(middle, half-width) of the joint values a check samples: ``share`` of the range
    (unlimited: of +-pi), centred, and no wider than the zoo entry's ``span`` (an arm whose
    joints turn +-2 pi is sampled where a planner would take it, not folded through its
    own base and the floor)."""
    m = ctx.model
    lo, hi = m.jnt_range[jid] if m.jnt_limited[jid] else (-np.pi, np.pi)
    half = share * (hi - lo) / 2
    if ctx.zoo.span:
        half = min(half, share * ctx.zoo.span)
    return (lo + hi) / 2, half


def _clear_line(m: mujoco.MjModel, q_from: np.ndarray, q_to: np.ndarray,
                contacts0: set[tuple[int, int]], samples: int = 12) -> bool:
    """Whether the straight joint-space line between two poses touches nothing new (a
    joint-path move_to follows it): a target behind the furniture is no reachable one."""
    d = mujoco.MjData(m)
    for s in np.linspace(0.0, 1.0, samples)[1:-1]:
        d.qpos[:] = q_from + s * (q_to - q_from)
        mujoco.mj_forward(m, d)
        if _contact_pairs(m, d) - contacts0:
            return False
    return True


def _contact_pairs(m, d):
    return {(min(m.geom_bodyid[c.geom1], m.geom_bodyid[c.geom2]),
             max(m.geom_bodyid[c.geom1], m.geom_bodyid[c.geom2])) for c in d.contact[:d.ncon]}


def check_move_to(ctx: Context, count: int = TARGETS, seed: int = 0) -> CheckResult:
    if ctx.end is None:
        return _skip(ctx, 'move_to', _no_end(ctx))
    dev = ctx.dev
    end_name = ctx.end[1]
    try:
        act = moves.action_for(dev.layout, end_name)
    except DeviceError as exc:
        return _fail(ctx, 'move_to', f'no move_to on {end_name}: {exc}')
    tol = dev.params['tolerance']
    targets = _sample_targets(ctx, np.random.default_rng(seed), act.joints, count)
    if len(targets) < count:
        return _fail(ctx, 'move_to', f'only {len(targets)} contact-free targets found')
    worst, worst_later, bad = 0.0, 0.0, []
    # A free-standing robot on MuJoCo's soft contacts creeps however well its servos hold
    # (as in the hold check): 2 s later, the end may also have moved as far as the same
    # state with the same servo ctrl moves it in bare MuJoCo (position servos only).
    creeps = _end_floats(ctx) and all(g.drive == 'position' for g in ctx.held)
    worst_creep = 0.0
    for i, target in enumerate(targets):
        try:
            move = dev.move_to(point=target, site=end_name, wait=False)
        except DeviceError as exc:
            bad.append(f'#{i}: {exc.code} {exc}'[:160])
            continue
        res = ctx.run_move(move)
        if res is None:
            bad.append(f'#{i}: no result after {MOVE_LIMIT:g} s')
            continue
        miss = float(np.linalg.norm(ctx.fk() - target))
        creep = _bare_end_creep(ctx, dev.snapshot, STILL_AFTER) if creeps else 0.0
        worst_creep = max(worst_creep, creep)
        dev.step(ctx.steps(STILL_AFTER))
        later = float(np.linalg.norm(ctx.fk() - target))
        worst, worst_later = max(worst, miss), max(worst_later, later)
        agree = res['success'] == (res['code'] == errors.DONE)
        if not agree:
            bad.append(f"#{i}: success {res['success']} with code {res['code']}")
        elif res['code'] != errors.DONE:
            bad.append(f"#{i}: {res['code']} {res['message']}"[:160])
        elif miss > tol + 1.1 * creep or later > tol + 1.1 * creep:
            # (a free-standing robot creeps between the device's DONE and this FK read too:
            # under load that gap grew and Spot's arm read 1.00 mm against a 1 mm DONE)
            bad.append(f'#{i}: DONE but FK says {miss * 1e3:.2f} mm, {later * 1e3:.2f} mm '
                       f'{STILL_AFTER:g} s later')
    detail = (f'{count - len(bad)}/{count} DONE within {tol * 1e3:g} mm by FK; worst '
              f'{worst * 1e3:.2f} mm, {worst_later * 1e3:.2f} mm {STILL_AFTER:g} s later')
    if creeps:
        detail += (f'; the end creeps up to {worst_creep * 1e3:.2f} mm over '
                   f'{STILL_AFTER:g} s in bare MuJoCo from the same state and ctrl')
    r = _fail(ctx, 'move_to', detail + '; ' + '; '.join(bad[:3])) if bad else \
        _pass(ctx, 'move_to', detail)
    r.metrics = {'done': count - len(bad), 'targets': count}
    return r


def _end_floats(ctx: Context) -> bool:
    """Whether the end point's own chain hangs from a free joint (the robot stands free);
    a free object elsewhere in the scene (a kettle on the counter) does not count."""
    m = ctx.model
    assert ctx.end is not None      # check_move_to asks only with an end point
    kind, name = ctx.end
    body = int(m.site_bodyid[m.site(name).id]) if kind == 'site' else m.body(name).id
    while body > 0:
        for j in range(m.body_jntadr[body], m.body_jntadr[body] + m.body_jntnum[body]):
            if m.jnt_type[j] == FREE:
                return True
        body = int(m.body_parentid[body])
    return False


def _bare_end_creep(ctx, snap, seconds):
    """How far the end point moves in bare MuJoCo over ``seconds`` from ``snap``'s state,
    ctrl fixed at what the device applied."""
    m = ctx.model
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.act[:], d.ctrl[:] = snap.qpos, snap.qvel, snap.act, snap.ctrl
    d.mocap_pos[:], d.mocap_quat[:] = snap.mocap_pos, snap.mocap_quat
    kind, name = ctx.end
    mujoco.mj_kinematics(m, d)
    where = (lambda: d.site_xpos[m.site(name).id] if kind == 'site'
             else d.xpos[m.body(name).id])
    start = where().copy()
    mujoco.mj_step(m, d, ctx.steps(seconds))
    mujoco.mj_kinematics(m, d)
    return float(np.linalg.norm(where() - start))


def check_unreachable(ctx: Context) -> CheckResult:
    if ctx.end is None:
        return _skip(ctx, 'unreachable', _no_end(ctx))
    dev = ctx.dev
    far = ctx.fk() + np.array([50.0, 50.0, 50.0])
    t0 = time.monotonic()
    try:
        move = dev.move_to(point=far, site=ctx.end[1], wait=False)
    except DeviceError as exc:
        took = time.monotonic() - t0
        if exc.code != errors.UNREACHABLE:
            return _fail(ctx, 'unreachable', f'{exc.code}: {exc}'[:200])
        if took > UNREACHABLE_WALL:
            return _fail(ctx, 'unreachable', f'UNREACHABLE after {took:.1f} s')
        return _pass(ctx, 'unreachable', f'UNREACHABLE in {took:.2f} s')
    res = ctx.run_move(move)
    return _fail(ctx, 'unreachable', f'accepted; ended {res and res["code"]}')


def check_hold(ctx: Context) -> CheckResult:
    dev = ctx.dev
    if not ctx.held:
        return _skip(ctx, 'hold', 'no joint is driven to a position')
    adr = [int(ctx.model.jnt_qposadr[g.joint]) for g in ctx.held]
    dev.hold()
    settled_from = dev.snapshot.qpos[adr].copy()
    dev.step(ctx.steps(0.5))       # what a hold settles from (a move may just have ended)
    dev.hold()
    gave_way, waited = _give_way(ctx, adr, settled_from)
    start = dev.snapshot
    q0 = start.qpos[adr].copy()
    moved = np.zeros(len(adr))
    pushing = np.ones(len(adr), dtype=bool)
    for _ in range(10):
        dev.step(ctx.steps(HOLD_FOR / 10))
        moved = np.maximum(moved, np.abs(dev.snapshot.qpos[adr] - q0))
        pushing &= _at_effort_limit(ctx, dev.snapshot)
    worst = float(moved.max())
    others = len([c for c in dev.layout.reads if c.kind == 'joint']) - len(adr)
    detail = f'{len(adr)} held joints moved at most {worst:.2e} over {HOLD_FOR:g} s'
    if others:
        detail += f' ({others} joints not driven to a position are free to move)'
    if gave_way:
        detail += (f'; measured after {waited:g} s of giving way at the effort limit '
                   f'until the load was carried and the body came to rest: '
                   f'{", ".join(gave_way)}')
    saturated = [ctx.model.joint(g.joint).name
                 for g, k, p in zip(ctx.held, moved, pushing, strict=True)
                 if k > HOLD_TOL and p]
    if saturated:
        # Shown, not excused: a motor too weak for its load gives way at its limit as a
        # real drive does, but the cell passes only when every joint holds.
        detail += ('; at the effort limit pushing back the whole hold: '
                   + ', '.join(saturated))
    allowed = HOLD_TOL
    if _floating(ctx.model) and all(g.drive == 'position' for g in ctx.held):
        # A free-standing body on MuJoCo's soft contacts creeps however well its servos
        # hold: the same state with the same servo ctrl in bare MuJoCo is the reference
        # (position servos only: a torque motor's fixed ctrl is no hold).
        bare = _bare_drift(ctx, start, adr)
        detail += f'; bare MuJoCo from the same state and ctrl: {bare:.2e} (contact creep)'
        allowed = max(HOLD_TOL, 1.1 * bare)
    if worst > allowed:
        return _fail(ctx, 'hold', detail)
    return _pass(ctx, 'hold', detail)


def _give_way(ctx, adr, q):
    """While a held joint moves with its motor at the effort limit, and then while what it
    dropped comes to rest, hold again and wait half a second, for at most GIVE_WAY_FOR; the
    joints that gave way and for how long. ``q``: the held joints half a second ago (the
    first look is at the settling the caller already ran, so a hold nothing gives way in is
    measured exactly when it was before).

    A pose that needs more than a drive's effort limit cannot be held by any drive, real or
    simulated: it gives way until a joint limit, the floor or another link carries the
    load (dm_humanoid, fallen from qpos0, folds at abdomen_y for about 6 s, then rocks on
    its contacts for a second), and the hold is measured from where that ends, as it is
    from where a move ends. Only a saturated joint that moves earns the wait, so a hold
    that drifts within its effort limits is measured at once and fails as before, and one
    still giving way after GIVE_WAY_FOR is measured then and fails naming the joint.
    """
    dev, m = ctx.dev, ctx.model
    names, waited = [], 0.0
    while True:
        now = dev.snapshot
        moving = np.abs(now.qpos[adr] - q) > HOLD_TOL
        giving = moving & _at_effort_limit(ctx, now)
        if waited >= GIVE_WAY_FOR or not (giving.any() or (names and moving.any())):
            return names, waited
        names += [m.joint(g.joint).name for g, k in zip(ctx.held, giving, strict=True)
                  if k and m.joint(g.joint).name not in names]
        dev.hold()
        q = now.qpos[adr].copy()
        dev.step(ctx.steps(0.5))
        waited += 0.5


def _at_effort_limit(ctx, snap):
    """Per held joint: a torque motor at its effort limit pushing toward its setpoint
    (MuJoCo's own ``qfrc_actuator``); False for position servos."""
    m = ctx.model
    out = np.zeros(len(ctx.held), dtype=bool)
    for i, g in enumerate(ctx.held):
        if g.drive != 'motor_impedance':
            continue
        lo, hi = effort.torque_limits(m, [g.actuator])
        force = float(snap.qfrc_actuator[m.jnt_dofadr[g.joint]])
        error = float(snap.setpoint[g.actuator] - snap.qpos[m.jnt_qposadr[g.joint]])
        out[i] = (force >= hi[0] * (1 - 1e-6) and error > 0) or \
            (force <= lo[0] * (1 - 1e-6) and error < 0)
    return out


def _floating(m):
    return bool((m.jnt_type == FREE).any())


def _bare_drift(ctx, snap, adr):
    """How far the held joints move in bare MuJoCo over HOLD_FOR from ``snap``'s state,
    ctrl fixed at what the device applied."""
    m = ctx.model
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.act[:], d.ctrl[:] = snap.qpos, snap.qvel, snap.act, snap.ctrl
    d.mocap_pos[:], d.mocap_quat[:] = snap.mocap_pos, snap.mocap_quat
    worst = 0.0
    chunk = ctx.steps(HOLD_FOR / 10)
    for _ in range(10):
        mujoco.mj_step(m, d, chunk)
        worst = max(worst, float(np.abs(d.qpos[adr] - snap.qpos[adr]).max()))
    return worst


def check_trajectory(ctx: Context, seed: int = 1, small: bool = False) -> CheckResult:
    """A FollowJointTrajectory goal as MoveIt sends it: large (to a goal anywhere within
    half of RANGE_SHARE of each range) or ``small`` (each joint SMALL_MOVE from where it
    is), both along a contact-free joint path; SUCCEEDED within GOAL_TOL."""
    dev, m = ctx.dev, ctx.model
    name = 'trajectory_small' if small else 'trajectory'
    if ctx.end is None:
        return _skip(ctx, name, _no_end(ctx))
    joints = moves.action_for(dev.layout, ctx.end[1]).joints
    rng = np.random.default_rng(seed)
    snap = dev.snapshot
    start = np.array([snap.qpos[m.jnt_qposadr[m.joint(j).id]] for j in joints])
    goal = _clear_goal(ctx, rng, joints, small=small)
    if goal is None:
        return _fail(ctx, name, 'no goal with a contact-free joint path found')
    # As a planner would: no faster than each joint can go within its effort and speed
    # limits.
    speeds = [moves.speed_limit(m, g) for g in _goals_of(dev, joints)]
    T = max([TRAJECTORY_TIME] + [1.875 * abs(dq) / v
                                 for dq, v in zip(goal - start, speeds, strict=True)])
    points = _timed_path(start, goal, T, 10)
    try:
        checked = jt.check_trajectory(dev.layout, joints, points, allow_partial=True)
        execution = jt.follow(dev, checked)
    except DeviceError as exc:
        return _fail(ctx, name, f'{exc.code}: {exc}'[:200])
    tol = jt.Tolerances.defaults(len(joints), trajectory=np.full(len(joints), PATH_TOL),
                                 goal=np.full(len(joints), GOAL_TOL), goal_time=2.0)
    worst = 0.0
    chunk = ctx.steps(0.02)
    verdict: jt.Verdict | None = None
    for _ in range(int((T + 3.0) / (chunk * m.opt.timestep)) + 1):
        dev.step(chunk)
        verdict = jt.evaluate(execution, dev.snapshot, tol)
        worst = max(worst, float(np.abs(verdict.error[0]).max()))
        if verdict.state not in ('running', 'settling'):
            break
    assert verdict is not None      # the loop above runs at least once
    detail = (f'{len(joints)} joints, worst path error {worst:.2e} rad (tolerance '
              f'{PATH_TOL:g}); {verdict.state}')
    final = float(np.abs(verdict.error[0]).max())
    detail += f', final error {final:.1e} rad'
    if verdict.state != 'succeeded':
        r = _fail(ctx, name, f'{detail}: {verdict.message}'[:240])
    else:
        r = _pass(ctx, name, detail)
    r.metrics = {'final_error': final, 'path_error': worst}
    return r


def check_trajectory_small(ctx: Context) -> CheckResult:
    return check_trajectory(ctx, seed=2, small=True)


def _clear_goal(ctx: Context, rng: np.random.Generator, joints: Sequence[str], tries: int = 200,
                small: bool = False) -> np.ndarray | None:
    """A goal within half of RANGE_SHARE of each joint's range (centred) that the straight
    joint path from here reaches touching nothing the start pose does not, as a planner's
    path would: a timed path through the furniture is no test of the device."""
    m = ctx.model
    base = ctx.dev.snapshot.qpos.copy()
    d = mujoco.MjData(m)
    d.qpos[:] = base
    mujoco.mj_forward(m, d)
    contacts0 = _contact_pairs(m, d)
    adr = [int(m.jnt_qposadr[m.joint(j).id]) for j in joints]
    for _ in range(tries):
        goal: list[float] = []
        for j, a in zip(joints, adr, strict=True):
            jid = m.joint(j).id
            if small:
                lo, hi = m.jnt_range[jid] if m.jnt_limited[jid] else (-np.inf, np.inf)
                step = rng.uniform(*SMALL_MOVE) * rng.choice((-1.0, 1.0))
                if not lo <= base[a] + step <= hi:
                    step = -step
                goal.append(float(np.clip(base[a] + step, lo, hi)))
                continue
            mid, half = _span(ctx, jid, 0.5 * RANGE_SHARE)
            goal.append(rng.uniform(mid - half, mid + half))
        q = base.copy()
        q[adr] = goal
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        if not _contact_pairs(m, d) - contacts0 and _clear_line(m, base, q, contacts0, 24):
            return np.array(goal)
    return None


def _goals_of(dev, joints):
    by_joint = {dev.layout.joints[g.joint]: g for g in dev.layout.goals.values() if g.joint >= 0}
    return [by_joint[j] for j in joints]


def _timed_path(start, goal, T, n):
    """What a planner (MoveIt's time parameterisation) sends: a smooth path sampled at
    ``n`` points with positions, velocities and accelerations."""
    points = []
    delta = goal - start
    for k in range(1, n + 1):
        tau = k / n
        s = 10 * tau ** 3 - 15 * tau ** 4 + 6 * tau ** 5
        ds = (30 * tau ** 2 - 60 * tau ** 3 + 30 * tau ** 4) / T
        dds = (60 * tau - 180 * tau ** 2 + 120 * tau ** 3) / T ** 2
        points.append({'time_from_start': tau * T, 'positions': list(start + s * delta),
                       'velocities': list(ds * delta), 'accelerations': list(dds * delta)})
    return points


def check_effort(ctx: Context) -> CheckResult:
    """What joint_states carries as effort (``qfrc_actuator`` at each joint's dof) is what
    MuJoCo computes from the published state; on a held arm it is the holding torque."""
    dev, m = ctx.dev, ctx.model
    if m.nu == 0:
        return _skip(ctx, 'effort', 'no actuators: effort is zero and published as such')
    dev.hold()
    dev.step(ctx.steps(0.5))
    snap = dev.snapshot
    dofs = [int(m.jnt_dofadr[dev.layout.joints.index(c.target)])
            for c in dev.layout.reads if c.kind == 'joint']
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.act[:], d.ctrl[:] = snap.qpos, snap.qvel, snap.act, snap.ctrl
    d.time = snap.time
    mujoco.mj_forward(m, d)
    reported, computed = snap.qfrc_actuator[dofs], d.qfrc_actuator[dofs]
    scale = max(1.0, float(np.abs(computed).max()))
    err = float(np.abs(reported - computed).max())
    detail = f'max |effort - MuJoCo| {err:.2e} N m over {len(dofs)} joints'
    if err > 0.02 * scale:
        return _fail(ctx, 'effort', detail)
    held = _holding_torque(ctx, snap, dofs)
    if held is not None:
        off, worst = held
        detail += f'; holding torque: max |effort - gravity| {off:.2e} N m (of {worst:.3g})'
        if off > HOLD_EFFORT_SHARE * max(1.0, worst):
            return _fail(ctx, 'effort', detail)
    return _pass(ctx, 'effort', detail)


def _holding_torque(ctx, snap, dofs):
    """(max |effort - gravity torque| beyond the joint's dry friction, max |gravity torque|)
    over the joints whose drives carry their links' weight (``actuatorgravcomp``) outside
    mimic chains, on a held arm touching nothing: the gravity torque from an independent
    ``mj_rne`` at the published pose; None when that does not apply (no such joints,
    contacts, or a floating base)."""
    m = ctx.model
    coupled = {int(m.jnt_dofadr[j]) for e in _joint_equalities(m)
               for j in (m.eq_obj1id[e], m.eq_obj2id[e])}
    carried = [dof for dof in dofs if m.jnt_actgravcomp[m.dof_jntid[dof]]
               and dof not in coupled]            # a mimic chain shares its load
    if not carried or _floating(m) or ctx.zoo.kind != 'arm':
        return None
    d = mujoco.MjData(m)
    d.qpos[:] = snap.qpos
    mujoco.mj_forward(m, d)
    if d.ncon:
        return None
    d.qvel[:] = 0.0
    d.qacc[:] = 0.0
    mujoco.mj_forward(m, d)
    tau = np.empty(m.nv)
    mujoco.mj_rne(m, d, 0, tau)
    gravity = (tau - d.qfrc_spring)[carried]
    reported = snap.qfrc_actuator[carried]
    # dry friction holds up to frictionloss of the load wherever the joint came to rest
    off = np.maximum(np.abs(reported - gravity) - m.dof_frictionloss[carried], 0.0)
    return float(off.max()), float(np.abs(gravity).max())


def _step_response(q, target, start, dt, band=SETTLED):
    """(overshoot share, settling time, total variation / step) of one joint's samples;
    settled within ``band`` of the step."""
    size = target - start
    x = (q - start) / size                      # 0 -> 1 when it follows
    overshoot = max(0.0, float(x.max()) - 1.0)
    outside = np.flatnonzero(np.abs(x - 1.0) > band)
    settling = (outside[-1] + 1) * dt if outside.size else 0.0
    variation = float(np.abs(np.diff(np.concatenate([[0.0], x]))).sum())
    return overshoot, settling, variation


def _settling_time(ctx, goal):
    """How long a position servo's step takes to settle to 2 % at the pose now, as its
    stiffness, damping (the servo's and the joint's) and inertia make it: about 5.8 / w
    critically damped, 4 c / kp overdamped."""
    from ..description.servo_gains import inertia_at
    m = ctx.model
    d = mujoco.MjData(m)
    d.qpos[:] = ctx.dev.snapshot.qpos
    dof = int(m.jnt_dofadr[goal.joint])
    _own, moved = inertia_at(m, d, [dof])
    kp = max(float(m.actuator_gainprm[goal.actuator, 0]), 1e-12)
    c = max(-float(m.actuator_biasprm[goal.actuator, 2]), 0.0) + float(m.dof_damping[dof])
    w = np.sqrt(kp / max(float(moved[0]), 1e-12))
    return max(CRITICAL_SETTLING / w, 4.0 * c / kp)


def _free_step(ctx, adr, q0, lo, hi):
    """A step target STEP from ``q0`` (up, else down) inside the range whose sweep
    touches nothing the pose does not already touch (an arm stepped into the floor its
    base stands on measures the floor); None when neither way is free."""
    m = ctx.model
    d = mujoco.MjData(m)
    d.qpos[:] = ctx.dev.snapshot.qpos
    mujoco.mj_forward(m, d)
    contacts0 = _contact_pairs(m, d)
    for sign in (1.0, -1.0):
        target = q0 + sign * STEP
        if not lo <= q0 + 2 * sign * STEP <= hi and not lo <= target <= hi:
            continue
        q = ctx.dev.snapshot.qpos.copy()
        q[adr] = q0 + 1.5 * sign * STEP            # the overshoot's room too
        if _clear_line(m, ctx.dev.snapshot.qpos.copy(), q, contacts0, 4):
            d.qpos[:] = q
            mujoco.mj_forward(m, d)
            if not _contact_pairs(m, d) - contacts0 and lo <= target <= hi:
                return target
    return None


def check_step(ctx: Context) -> CheckResult:
    """Every position-servo joint stepped by STEP in turn (the others held): the response
    overshoots by at most MAX_OVERSHOOT, settles within MAX_SETTLING and does not chatter
    (its total variation, sample by sample, stays near the step itself)."""
    dev, m = ctx.dev, ctx.model
    if not ctx.zoo.urdf:
        return _skip(ctx, 'step', 'the model\'s own servos: their tuning is its author\'s '
                     '(the step check covers the servos the URDF import builds)')
    goals = [g for g in ctx.held if g.drive == 'position' and g.max_change_per_s is None]
    if not goals:
        return _skip(ctx, 'step', 'no position servo takes a setpoint step')
    dt = m.opt.timestep
    worst = {'overshoot': (0.0, ''), 'settling': (0.0, ''), 'variation': (0.0, '')}
    bad, skipped = [], []
    for g in goals:
        dev.hold()
        dev.step(ctx.steps(0.2))
        adr = int(m.jnt_qposadr[g.joint])
        q0 = float(dev.snapshot.qpos[adr])
        lo, hi = (m.jnt_range[g.joint] if m.jnt_limited[g.joint] else (-np.inf, np.inf))
        target = _free_step(ctx, adr, q0, lo, hi)
        if target is None:
            skipped.append(m.joint(g.joint).name)
            continue
        dev.set_goals({g.name: g.to_unit(target)})
        # A joint whose effort limit caps its stiffness below the step's bandwidth
        # settles as slowly as that stiffness on its inertia makes a critically damped
        # loop (about 5.8 / w to 2 %): allowed half as long again.
        allowed = max(MAX_SETTLING, 1.5 * _settling_time(ctx, g))
        n = ctx.steps(max(STEP_FOR, allowed + 0.1))
        q = np.empty(n)
        for k in range(n):
            dev.step(1)
            q[k] = dev.snapshot.qpos[adr]
        # Dry friction leaves a dead band of friction / kp that no servo closes: settled
        # means within it.
        kp = float(m.actuator_gainprm[g.actuator, 0]) or np.inf
        band = max(SETTLED, 1.5 * float(m.dof_frictionloss[m.jnt_dofadr[g.joint]]) / kp / STEP)
        over, settle, var = _step_response(q, target, q0, dt, band)
        name = m.joint(g.joint).name
        for key, value in (('overshoot', over), ('settling', settle), ('variation', var)):
            if value > worst[key][0]:
                worst[key] = (value, name)
        if over > MAX_OVERSHOOT or settle > allowed or var > MAX_VARIATION:
            bad.append(f'{name}: overshoot {over:.0%}, settles in {settle:.3f} s, '
                       f'variation {var:.2f}')
        dev.set_goals({g.name: g.to_unit(float(np.clip(q0, lo, hi)))})
        dev.step(ctx.steps(0.2))
    detail = (f'{len(goals)} joints stepped {STEP:g}: worst overshoot '
              f'{worst["overshoot"][0]:.1%} ({worst["overshoot"][1]}), settling '
              f'{worst["settling"][0]:.3f} s ({worst["settling"][1]}), variation '
              f'{worst["variation"][0]:.2f} ({worst["variation"][1]})')
    if skipped:
        detail += (f'; not stepped (no room within the range clear of contact): '
                   f'{", ".join(skipped)}')
    r = _fail(ctx, 'step', detail + '; ' + '; '.join(bad[:3])) if bad else \
        _pass(ctx, 'step', detail)
    r.metrics = {k: v for k, v in worst.items()}
    return r


def _joint_equalities(m):
    return [e for e in range(m.neq) if int(m.eq_type[e]) == int(mujoco.mjtEq.mjEQ_JOINT)
            and m.eq_obj2id[e] >= 0]


def check_mimic(ctx: Context) -> CheckResult:
    """Joints coupled to a leader (URDF ``<mimic>``, MuJoCo joint equalities) follow it
    when only the leader is driven: the leader moved to three points of its range, each
    follower is where its polynomial puts it, and the leader stays within its limits."""
    dev, m = ctx.dev, ctx.model
    if not ctx.zoo.urdf:
        return _skip(ctx, 'mimic', 'URDF <mimic> joints only (an MJCF model\'s joint '
                     'equalities are its author\'s)')
    eqs = _joint_equalities(m)
    if not eqs:
        return _skip(ctx, 'mimic', 'no mimic joints (joint equalities)')
    by_joint = {g.joint: g for g in ctx.held}
    leaders = sorted({int(m.eq_obj2id[e]) for e in eqs if int(m.eq_obj2id[e]) in by_joint})
    if not leaders:
        return _skip(ctx, 'mimic', 'no mimic leader is driven to a position')
    worst, out_of_range = 0.0, []
    for share in (0.2, 0.8, 0.5):
        goals = {}
        for j in leaders:
            lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-0.5, 0.5)
            goals[by_joint[j].name] = by_joint[j].to_unit(lo + share * (hi - lo))
        dev.set_goals(goals)
        dev.step(ctx.steps(1.5))
        q = dev.snapshot.qpos
        for e in eqs:
            j1, j2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
            want = np.polyval(m.eq_data[e, 4::-1], q[m.jnt_qposadr[j2]])
            worst = max(worst, abs(float(q[m.jnt_qposadr[j1]] - want)))
        for j in leaders:
            lo, hi = m.jnt_range[j]
            if m.jnt_limited[j] and not lo - MIMIC_TOL <= q[m.jnt_qposadr[j]] <= hi + MIMIC_TOL:
                out_of_range.append(m.joint(j).name)
    detail = (f'{len(eqs)} mimic joints on {len(leaders)} leaders: worst {worst:.2e} off '
              f'the leader\'s relation')
    if out_of_range:
        return _fail(ctx, 'mimic', detail + f'; leaders outside their range: {out_of_range}')
    if worst > MIMIC_TOL:
        return _fail(ctx, 'mimic', detail)
    return _pass(ctx, 'mimic', detail)


def _subtree(m, top):
    return [b for b in range(m.nbody) if b == top or _is_below(m, b, top)]


def _is_below(m: mujoco.MjModel, b: int, top: int) -> bool:
    while b > 0:
        b = int(m.body_parentid[b])
        if b == top:
            return True
    return False


def finger_groups(m: mujoco.MjModel, fingers: Iterable[int], joint: int
                  ) -> list[list[int]]:
    """The geoms of each finger of the hand that ``joint`` (the gripper's) is on, and of
    the hand itself when only one finger moves. The hand is the first body above
    ``joint`` with two child branches holding finger joints (not servo horns), else the
    body the joint's own link hangs from; each such branch is one finger. A bimanual
    robot's other hand is not this one."""
    fingers = {int(j) for j in fingers if not gr.is_horn(m, int(j))}
    finger_bodies = {int(m.jnt_bodyid[j]) for j in fingers}
    children: dict[int, list[int]] = {b: [] for b in range(m.nbody)}
    for b in range(1, m.nbody):
        children[int(m.body_parentid[b])].append(b)

    def branches(body):
        out = []
        for child in children[body]:
            below = _subtree(m, child)
            if finger_bodies & set(below):
                out.append(below)
        return out

    def fingers_only(found):       # a finger is a short branch; an arm is not one
        return all(sum(is_one_dof(m, k) for b in below
                       for k in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
                   <= gr.MAX_FINGER_JOINTS for below in found)
    own = int(m.jnt_bodyid[joint])
    hand, body = None, int(m.body_parentid[own])
    while body > 0 and hand is None:
        found = branches(body)
        if len(found) >= 2 and fingers_only(found):
            hand = body
        body = int(m.body_parentid[body])
    if hand is None:
        hand = int(m.body_parentid[own])
    groups = [[g for g in range(m.ngeom) if int(m.geom_bodyid[g]) in set(below)]
              for below in branches(hand)]
    groups = [g for g in groups if g]
    if len(groups) < 2:       # one moving jaw: its opening is against the hand's own
        groups.append([g for g in range(m.ngeom) if int(m.geom_bodyid[g]) == hand])
    return [g for g in groups if g]


def finger_distances(m: mujoco.MjModel, d: mujoco.MjData, groups: Sequence[Sequence[int]]
                     ) -> np.ndarray:
    """The distances in metres between the geometric centres of every two groups
    (``finger_groups``) at the state in ``d`` (after kinematics): the fingers' opening
    measured from the model's geometry, not from any joint value."""
    centres = [d.geom_xpos[g].mean(axis=0) for g in groups]
    return np.array([float(np.linalg.norm(a - b)) for i, a in enumerate(centres)
                     for b in centres[i + 1:]])


def _gripper_of(ctx):
    """(Gripper, finger joints) as zero-config binds it, or as the user bound it
    (``ZooModel.gripper_joint``, check_robot's --gripper-joint); (None, why) without one."""
    m, layout = ctx.model, ctx.dev.layout
    # a gripper alone (the zoo's kind 'gripper') has no arm above its fingers
    fingers = gr.finger_joints(m, min_arm_joints=0 if ctx.zoo.kind == 'gripper' else None)
    if ctx.zoo.gripper_joint:
        try:
            return gr.gripper_on_joint(layout, ctx.zoo.gripper_joint), fingers
        except DeviceError as exc:
            return None, str(exc)
    g = gr.find_gripper(layout, fingers)
    return (g, fingers) if g is not None else (None, 'no gripper found (no finger joint '
                                               'driven to a position, no finger tendon)')


def check_gripper(ctx: Context) -> CheckResult:
    """The gripper channel zero-config binds (the one gripper_controller drives) moves
    the fingers: commanded closed, then open, the fingers' opening measured from the
    model's geometry (``finger_distances`` on a fresh MjData from the published state:
    some two fingers' distance) changes by at least ``MIN_OPENING_CHANGE``. A channel on
    a servo horn or any other joint that moves no finger fails, whatever the joint's own
    position says."""
    dev, m = ctx.dev, ctx.model
    g, fingers = _gripper_of(ctx)
    if g is None:
        return _skip(ctx, 'gripper', fingers)
    groups = finger_groups(m, fingers, m.joint(g.joint).id)
    if len(groups) < 2:
        return _skip(ctx, 'gripper', f'gripper on {g.joint}, but its fingers have no '
                     'geometry to measure an opening on')
    lo, hi = (g.lo, g.hi) if np.isfinite(g.lo) and np.isfinite(g.hi) else (-0.5, 0.5)
    channel = dev.layout.goals[g.channel]
    d = mujoco.MjData(m)
    gaps, reached = {}, {}
    for label, position in (('closed', lo), ('open', hi)):
        dev.set_goals({g.channel: channel.to_unit(g.native_goal(position))})
        dev.step(ctx.steps(GRIPPER_SETTLE))
        snap = dev.snapshot
        d.qpos[:] = snap.qpos
        mujoco.mj_kinematics(m, d)
        gaps[label] = finger_distances(m, d, groups)
        reached[label] = g.position(snap)
    change = float(np.abs(gaps['open'] - gaps['closed']).max())
    detail = (f'{g.joint} [{g.lo:g}, {g.hi:g}] (channel {g.channel}): finger opening '
              f'{gaps["closed"].max() * 1e3:.1f} mm closed, {gaps["open"].max() * 1e3:.1f} mm '
              f'open, the fingers moved {change * 1e3:.1f} mm apart (the joint read '
              f'{reached["closed"]:.4g} and {reached["open"]:.4g})')
    if change < MIN_OPENING_CHANGE:
        return _fail(ctx, 'gripper', detail + f'; the fingers did not move (less than '
                     f'{MIN_OPENING_CHANGE * 1e3:g} mm): {g.joint} is not what moves them')
    return _pass(ctx, 'gripper', detail)


CHECK_FUNCTIONS = {'start': check_start, 'keyframe': check_keyframe,
                   'move_to': check_move_to, 'unreachable': check_unreachable,
                   'hold': check_hold, 'trajectory': check_trajectory,
                   'trajectory_small': check_trajectory_small, 'effort': check_effort,
                   'step': check_step, 'mimic': check_mimic, 'gripper': check_gripper}


def open_device(zm: zoo.ZooModel, folder: str | None = None, **kw: Any) -> 'Device':
    from ..sim.device import Device
    path = zoo.materialize(zm, folder)
    kw.setdefault('real_time_factor', 0)
    kw.setdefault('start_paused', True)
    return Device(model=path, **kw)


def run_named(name: str) -> dict[str, CheckResult]:
    """Every check on the zoo model ``name`` (MJCF or URDF zoo), by check name: a top-level
    function so that a process pool can run the zoo a model a worker."""
    from .zoo import by_name
    return {r.check: r for r in run(by_name(name))}


def run(zm: zoo.ZooModel, checks: Sequence[str] = CHECKS, folder: str | None = None
        ) -> list[CheckResult]:
    """Every check on one zoo model, in order, on one device; a list of CheckResult."""
    if zm.path is None:
        return [CheckResult(zm.name, c, True, '', zm.missing) for c in checks]
    try:
        dev = open_device(zm, folder)
    except DeviceError as exc:
        return [CheckResult(zm.name, 'start', False, f'{exc.code}: {exc}'[:240])] + [
            CheckResult(zm.name, c, False, 'did not start') for c in checks if c != 'start']
    out = []
    try:
        ctx = Context(zm, dev)
        for c in checks:
            try:
                out.append(CHECK_FUNCTIONS[c](ctx))
            except Exception as exc:  # noqa: BLE001 - one broken check must not hide the rest
                out.append(CheckResult(zm.name, c, False, f'{type(exc).__name__}: {exc}'[:240]))
    finally:
        dev.close()
    return out
