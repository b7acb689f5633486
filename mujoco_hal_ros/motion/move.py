"""move_to: from a request to a stepper plan, and from snapshots to the move's result.

The pipeline a ``Device`` runs for a move: check the request (``check_request``), solve
the joints on a private MjData, away from self-collision, and plan a Cartesian line when
asked (``Planner.plan``), build the path from the setpoints at the instant it starts
(``start_plan``, on the stepper thread), then read each snapshot until the point settled
(``settle``) and say how it went (``result``). All of it reads a model, a layout, snapshots
and parameters; none of it owns the stepper, so the device decides what runs where.
"""

from collections.abc import Callable
import threading
import time
from typing import Any, TYPE_CHECKING

import mujoco
import numpy as np

from .. import errors
from ..checks import finite_number, Vector
from ..config import limits
from ..description import joint_limits
from ..errors import ConfigError, DeviceError
from ..joint_view import is_hinge
from . import cartesian, ik, settling
from .trajectory import duration, MinJerkPlan, PEAK, Plan, WaypointPlan

if TYPE_CHECKING:     # the hints only; channels is a sibling package
    from ..config.channels import Action, GoalChannel, Layout

COLLISION_RETRIES = 6   # IK restarts that look for an answer where the arm misses itself
IK_SHARE = 0.2       # IK solves to this share of the tolerance; the servos get the rest
SETTLE_LIMIT = 10.0  # simulated seconds after its path before a moving arm counts as stuck
SETTLE_QUIET = 0.3   # simulated seconds without progress that count as settled
STUCK_AFTER = 2.0    # simulated seconds without progress that end a move still moving
MOVE_RATE = {'angle': 1.0, 'length': 0.25}   # rad/s, m/s: a move's joint speed without a rate
CORRECTIONS = 4      # closed-loop re-aims of a move that stopped out of tolerance
CORRECT_WITHIN = 0.1  # metres: a stop further off than this is no servo offset; not re-aimed
CORRECT_TIME = 0.3   # seconds the shortest re-aim path takes
NEAR_SHARES = (0.05, 0.05, 0.1, 0.1, 0.2, 0.2)   # of each range: perturbations of the start


class Move:
    """A move in flight: wait for it, poll it, be called back, or read its result.

    Besides the target and the point (``('site'|'body', name)``) it carries what the
    planner resolved once, so the stepper thread and the settling check never look names
    up again: the actuators and joint addresses it drives, the aim, the ``then`` goals, the
    solved joints and where they put the point.
    """

    def __init__(self, target: Vector, point: tuple, action: Any) -> None:
        self.target = np.asarray(target, dtype=float)
        self.point = point          # ('site'|'body', name)
        self.action = action
        self.result: dict | None = None
        self.plan_end: float | None = None
        self.duration: float | None = None
        self.best_miss: float | None = None
        self.best_time: float | None = None
        self.planned: Any = None     # where the solved joints put the point, and its miss
        self.planned_miss: float | None = None
        self.actuators: list[int] = []
        self.joints_qadr: list[int] = []
        self.joints_dof: list[int] = []
        self.rates: list[float] = []
        self.aim: Any = None
        self.then: dict[str, float] = {}
        self.q_goal: Any = None
        self.path: str | None = None
        self.cartesian: Any = None   # the straight line, for path == 'cartesian'
        self.min_duration = 0.0      # what the requested tool speed allows at the least
        self.tolerance: float | None = None  # this goal's own (m); None: the device's
        self.lower: Any = None       # the joint range the move may use (native)
        self.upper: Any = None
        self.corrections = 0         # re-aims so far (``Planner.correct``)
        self.limited: list[str] = []   # joints a re-aim wanted past their range
        self.accepted_wall = time.monotonic()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[Move], Any]] = []

    def finish(self, result: dict) -> None:
        with self._lock:
            if self.result is not None:
                return
            self.result = result
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn(self)

    def add_done_callback(self, fn: Callable[['Move'], Any]) -> None:
        """``fn(move)`` once the move has its result: on the thread that finishes it (the
        stepper's: keep it short), or here at once if it already has one."""
        with self._lock:
            if self.result is None:
                self._callbacks.append(fn)
                return
        fn(self)

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)


# --- where a point is -----------------------------------------------------------------------
def point_pos(layout: 'Layout', snap: Any, point: tuple) -> np.ndarray:
    """Where a ``('site'|'body', name)`` point is in a snapshot (world frame, a copy)."""
    kind, name = point
    if kind == 'site':
        return snap.site_xpos[layout.sites.index(name)].copy()
    return snap.xpos[layout.bodies.index(name)].copy()


def point_mat(layout: 'Layout', snap: Any, point: tuple) -> np.ndarray:
    """The point's frame in a snapshot, as a 3x3 rotation (world from local)."""
    kind, name = point
    if kind == 'site':
        return snap.site_xmat[layout.sites.index(name)].reshape(3, 3)
    mat = np.empty(9)
    mujoco.mju_quat2Mat(mat, snap.xquat[layout.bodies.index(name)])
    return mat.reshape(3, 3)


def aim_error(layout: 'Layout', snap: Any, point: tuple, aim: Any) -> float | None:
    """Radians between where the point's aim axis points and where it should (None
    without an aim)."""
    if aim is None:
        return None
    axis, toward = (np.asarray(v, dtype=float) for v in aim)
    world = point_mat(layout, snap, point) @ (axis / np.linalg.norm(axis))
    return ik.angle_between(world, toward / np.linalg.norm(toward))


def distance_to_go(layout: 'Layout', move: Move, snap: Any) -> float:
    """Metres from where the move's point is in ``snap`` to its target."""
    return float(np.linalg.norm(point_pos(layout, snap, move.point) - move.target))


def result(layout: 'Layout', move: Move, code: str, success: bool, message: str,
           snap: Any) -> dict:
    """The result dict of a move, measured in ``snap``."""
    reached = point_pos(layout, snap, move.point)
    out = {'success': bool(success), 'code': code, 'message': message,
           'reached': reached.tolist(),
           'miss': float(np.linalg.norm(reached - move.target)),
           'target': move.target.tolist()}
    angle = aim_error(layout, snap, move.point, move.aim)
    if angle is not None:
        out['aim_error'] = angle
    return out


# --- the request ----------------------------------------------------------------------------
def check_request(act: 'Action', args: Any, point: Any, speed: Any, aim: Any, wait: Any,
                  timeout: Any, path: Any) -> tuple:
    """Refuse a bad move_to request before anything is solved; the checked
    ``(target, speed_ms, aim, path, timeout)`` (``path`` None: the action's own)."""
    if not isinstance(wait, (bool, np.bool_)):
        raise errors.InvalidArgument(f'wait takes true or false, got {wait!r}', where='wait')
    if timeout is not None:
        timeout = finite_number(timeout, 'timeout')
        if timeout < 0:
            raise errors.InvalidArgument('cannot be negative', where='timeout')
    if path not in (None, 'joint', 'cartesian'):
        raise errors.InvalidArgument(f'unknown path {path!r}', where='path',
                                     allowed='joint, cartesian')
    target, speed_ms = limits.check_move(act, args, point, speed)
    aim = act.aim if aim is None else limits.check_aim(aim)
    return target, speed_ms, aim, path or act.path, timeout


def move_rate(model: mujoco.MjModel, goal: 'GoalChannel') -> float:
    """The joint speed a move_to path peaks at on this goal: its ``max_change_per_s``, else
    a moderate default (``MOVE_RATE``). A goal without a rate jumps when set directly; a
    move that jumped its setpoints would slam a zero-config arm into what it meets."""
    if goal.native_rate is not None:
        return goal.native_rate
    kind = 'angle' if is_hinge(model, goal.joint) else 'length'
    return min(MOVE_RATE[kind], speed_limit(model, goal))


def speed_limit(model: mujoco.MjModel, goal: 'GoalChannel') -> float:
    """The fastest a path may ask of this goal's joint: ``effort_speed``, the joint's
    velocity limit (a URDF's, ``joint_limits``), and for a velocity servo half its speed
    limit (the rest is its position loop's to correct)."""
    rate = min(effort_speed(model, goal.actuator), joint_limits.speed_of(model, goal.joint))
    if goal.drive == 'velocity' and model.actuator_ctrllimited[goal.actuator]:
        rate = min(rate, 0.5 * float(np.abs(model.actuator_ctrlrange[goal.actuator]).min()))
    return rate


def effort_speed(model: mujoco.MjModel, actuator: int) -> float:
    """The joint speed at which the joint's damping takes half of the actuator's force
    limit: faster, the arm could not follow within its effort limits. (A servo's own kv
    is no load: the driver leads its setpoint by kv * speed / kp.)"""
    a = actuator
    jid = int(model.actuator_trnid[a, 0])
    damping = float(model.dof_damping[model.jnt_dofadr[jid]])
    limits = []
    if model.actuator_forcelimited[a]:
        limits.append(float(np.abs(model.actuator_forcerange[a]).min()))
    if model.jnt_actfrclimited[jid]:
        limits.append(float(np.abs(model.jnt_actfrcrange[jid]).min()))
    if not limits or damping <= 0 or min(limits) <= 0:
        return np.inf
    return 0.5 * min(limits) / damping


def goal_for_joint(layout: 'Layout', joint: str, act: 'Action') -> 'GoalChannel':
    """The goal channel that drives a joint of the action, as a joint-position channel
    (``Layout.position_view``: a velocity servo's is its joint's position); ConfigError if
    none does."""
    jid = layout.joints.index(joint)
    for g in layout.goals.values():
        if g.joint == jid:
            return layout.position_view(g)
    raise ConfigError(f'joint {joint!r} has no goal channel', where=f'actions.{act.name}')


def joint_bounds(layout: 'Layout',
                 act: 'Action') -> tuple[list, np.ndarray, np.ndarray]:
    """The action's goal channels, and the native joint range each may move in: the
    channel's own limits narrowed by the device file's min/max."""
    goals = [goal_for_joint(layout, j, act) for j in act.joints]
    lower, upper = [], []
    for g in goals:
        ends = [g.to_native(v) for v in (g.min, g.max) if v is not None]
        lower.append(max([g.native_lo] + ([min(ends)] if g.min is not None else [])))
        upper.append(min([g.native_hi] + ([max(ends)] if g.max is not None else [])))
    return goals, np.array(lower, dtype=float), np.array(upper, dtype=float)


class Planner:
    """Solves move_to requests on a private MjData, one at a time, off the stepper."""

    def __init__(self, model: mujoco.MjModel, layout: 'Layout') -> None:
        self.model = model
        self.layout = layout
        self._scratch = mujoco.MjData(model)
        self._lock = threading.Lock()

    def model_names(self, act: 'Action') -> dict:
        """The action's site, body and joints by the model's names, for IK: one robot of a
        world names them its own way (``hand``), the world model ``<prefix>hand``."""
        prefix = getattr(self.layout, 'prefix', '')

        def named(name: str | None) -> str | None:
            return f'{prefix}{name}' if prefix and name else name
        return {'site': named(act.site), 'body': named(act.body),
                'joints': None if act.joints is None else [named(j) for j in act.joints]}

    def plan(self, act: 'Action', snap: Any, target: np.ndarray, speed_ms: float | None,
             aim: Any, path: str, tolerance: float, aim_tolerance: float) -> Move:
        """A ``Move`` for the action from the state in ``snap``, ready for ``start_plan``;
        UNREACHABLE (nothing moved) when no joints within limits put the point there."""
        model, layout = self.model, self.layout
        goals, lower, upper = joint_bounds(layout, act)
        jids = [layout.joints.index(j) for j in act.joints]
        jq = [int(model.jnt_qposadr[j]) for j in jids]
        jdof = [int(model.jnt_dofadr[j]) for j in jids]
        q_start = np.clip(snap.joint_setpoint[[g.actuator for g in goals]], lower, upper)
        rates = [move_rate(model, g) for g in goals]
        tol, aim_tol = tolerance, aim_tolerance
        with self._lock:
            scratch = self._scratch
            scratch.qpos[:] = snap.qpos
            scratch.mocap_pos[:] = snap.mocap_pos
            scratch.mocap_quat[:] = snap.mocap_quat
            # Solve tighter than the tolerance, so the servos' own error still fits in it.
            common = dict(**self.model_names(act), aim=aim, lower=lower, upper=upper)
            sol = ik.solve(model, scratch, target, q_init=q_start,
                           tolerance=IK_SHARE * tol, aim_tolerance=IK_SHARE * aim_tol, **common)
            ok = sol.pos_error <= tol and (aim is None or sol.aim_error <= aim_tol)
            if ok and sol.restarts:
                sol = self.near_start(sol, target, q_start, lower, upper, snap, tol,
                                      aim_tol, common)
            if ok and self._self_collides(act, jq, sol.qpos, snap):
                sol = self._collision_free(act, jq, sol, target, lower, upper, snap, tol,
                                           aim_tol, common)
            if not ok:
                raise _unreachable(act, target, sol, tol, aim_tol)
            cart = None
            if path == 'cartesian':
                scratch.qpos[:] = snap.qpos
                cart = cartesian.straight_line(
                    model, scratch, target, max_rates=[
                        np.inf if r is None else r for r in rates],
                    q_start=q_start, max_speed=speed_ms, tolerance=act.path_tolerance,
                    aim_tolerance=aim_tol, **common)
                if not cart.success:
                    raise DeviceError(errors.UNREACHABLE, f'no straight line to the target: '
                                      f'{cart.message}', where=act.name,
                                      reached_fraction=float(cart.reached_fraction),
                                      target=target.tolist())
        move = Move(target, ('site', act.site) if act.site else ('body', act.body), act)
        move.actuators = [g.actuator for g in goals]
        move.joints_qadr = jq
        move.joints_dof = jdof
        move.rates = rates
        move.aim = aim
        move.then = limits.check_goals(layout, act.then) if act.then else {}
        move.q_goal = np.clip(sol.qpos, lower, upper)
        move.lower, move.upper = lower, upper
        move.path = path
        move.cartesian = cart
        move.planned = np.asarray(sol.reached, dtype=float)   # where the IK puts the point
        move.planned_miss = float(sol.pos_error)
        if speed_ms:
            move.min_duration = PEAK * distance_to_go(layout, move, snap) / speed_ms
        return move

    def correct(self, move: Move, snap: Any, tolerance: float, aim_tolerance: float,
                setpoint: np.ndarray | None = None) -> np.ndarray | None:
        """New joint goals for a move that stopped out of tolerance: IK again from where
        the joints and the base really are, so a floating base that shifted under the arm
        (or a joint that ended elsewhere) is taken up the way a driver's outer loop would;
        None when IK has nothing better. Runs at the end of a missed move, on the
        device's aiming thread (never the physics thread: the solve can take milliseconds).

        ``setpoint``: where the joints were sent. A soft servo (a hobby arm's, tens of
        N m/rad against its load, friction or backlash) settles short of it by an offset
        that a second identical goal would reproduce; the new goal carries that offset, as
        an integrating position loop on a real arm would, so the joint lands on the
        solution. A goal the joint range clips is recorded in ``move.limited``."""
        act = move.action
        q_now = snap.qpos[move.joints_qadr].copy()
        move.lower, move.upper = pinned_bounds(self.model, move, snap, q_now)
        with self._lock:
            scratch = self._scratch
            scratch.qpos[:] = snap.qpos
            scratch.mocap_pos[:] = snap.mocap_pos
            scratch.mocap_quat[:] = snap.mocap_quat
            sol = ik.solve(self.model, scratch, move.target, **self.model_names(act),
                           aim=move.aim, q_init=q_now,
                           tolerance=IK_SHARE * tolerance,
                           aim_tolerance=IK_SHARE * aim_tolerance, lower=move.lower,
                           upper=move.upper)
        if not sol.pos_error < distance_to_go(self.layout, move, snap):
            return None
        goal = sol.qpos
        if setpoint is not None:
            # The offset the servo settled at, measured while still: at most what separates
            # setpoint and joint now, so a joint still creeping on to its setpoint (dry
            # friction) overshoots the new one by no more than it would have anyway.
            goal = goal + (np.asarray(setpoint, dtype=float) - q_now)
        clipped = np.clip(goal, move.lower, move.upper)
        move.limited = [name for name, hit in
                        zip(act.joints, np.abs(clipped - goal) > 1e-9, strict=True) if hit]
        return clipped

    def _self_collides(self, act, jq, q, snap):
        """Whether the arm touches itself at ``q`` where it does not now (scratch data).

        Contacts count only between two bodies of the moving point's own tree; touching
        the table or an object is what a move_to often means to do.
        """
        m, d = self.model, self._scratch
        root = m.body_rootid[m.site_bodyid[self.layout.sites.index(act.site)] if act.site
                             else self.layout.bodies.index(act.body)]

        def pairs():
            mujoco.mj_kinematics(m, d)
            mujoco.mj_collision(m, d)
            out = set()
            for c in d.contact[:d.ncon]:
                b1, b2 = m.geom_bodyid[c.geom1], m.geom_bodyid[c.geom2]
                if m.body_rootid[b1] == root and m.body_rootid[b2] == root:
                    out.add((min(b1, b2), max(b1, b2)))
            return out
        d.qpos[:] = snap.qpos
        now = pairs()
        d.qpos[jq] = q
        return bool(pairs() - now)

    def near_start(self, sol: Any, target: np.ndarray, q_start: np.ndarray,
                   lower: np.ndarray, upper: np.ndarray, snap: Any, tol: float,
                   aim_tol: float, common: dict) -> Any:
        """An answer nearer the start for one a random restart found: the descent from
        the start stalled (a joint near its limit), and a restart drawn anywhere in the
        ranges may land on the far branch of the arm, whose joint path sweeps through
        the scene. Descents from perturbations of the start, growing, keep the answer
        with the smallest largest joint change (the restart's one when none does better).
        Uses the planner's scratch data: ``plan`` calls it holding the planner's lock."""
        rng = np.random.default_rng(0)
        span = np.where(np.isfinite(upper - lower), upper - lower, 2 * np.pi)
        best, best_far = sol, float(np.abs(sol.qpos - q_start).max())
        for share in NEAR_SHARES:
            self._scratch.qpos[:] = snap.qpos
            q_init = np.clip(q_start + rng.uniform(-share, share) * span, lower, upper)
            alt = ik.solve(self.model, self._scratch, target, q_init=q_init, max_restarts=0,
                           tolerance=IK_SHARE * tol, aim_tolerance=IK_SHARE * aim_tol,
                           **common)
            far = float(np.abs(alt.qpos - q_start).max())
            if alt.pos_error <= tol and (common['aim'] is None or alt.aim_error <= aim_tol) \
                    and far < best_far:
                best, best_far = alt, far
        return best

    def _collision_free(self, act, jq, sol, target, lower, upper, snap, tol, aim_tol, common):
        """Seeded retries from other starting configurations for an answer where the arm
        does not run into itself; the first answer stands when none is found."""
        rng = np.random.default_rng(0)
        lo = np.where(np.isfinite(lower), lower, -np.pi)
        hi = np.where(np.isfinite(upper), upper, np.pi)
        for k in range(COLLISION_RETRIES):
            self._scratch.qpos[:] = snap.qpos
            alt = ik.solve(self.model, self._scratch, target, q_init=rng.uniform(lo, hi),
                           seed=k + 1, tolerance=IK_SHARE * tol,
                           aim_tolerance=IK_SHARE * aim_tol, **common)
            if alt.pos_error <= tol and (common['aim'] is None or alt.aim_error <= aim_tol) \
                    and not self._self_collides(act, jq, alt.qpos, snap):
                return alt
        return sol


def pinned_bounds(model: mujoco.MjModel, move: Move, snap: Any,
                  q_now: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The move's joint bounds, less what a servo pinned at its ctrl limit cannot reach: a
    joint that stopped short of its setpoint with its ctrl (setpoint plus the gravity
    feed-forward) clamped at the range's end pushing toward it can go no further that way,
    so a re-aim must reach the point with the other joints (a wrist that sags under the
    hand near the end of its range). The bounds only tighten, re-aim after re-aim."""
    lower, upper = move.lower.copy(), move.upper.copy()
    for i, a in enumerate(move.actuators):
        if not model.actuator_ctrllimited[a]:
            continue
        lo, hi = model.actuator_ctrlrange[a]
        span = max(float(hi - lo), 1e-9)
        ctrl, short = float(snap.ctrl[a]), float(snap.setpoint[a]) - q_now[i]
        if ctrl >= hi - 1e-6 * span and short > 0:
            upper[i] = max(min(upper[i], q_now[i]), lower[i])
        elif ctrl <= lo + 1e-6 * span and short < 0:
            lower[i] = min(max(lower[i], q_now[i]), upper[i])
    return lower, upper


def _unreachable(act, target, sol, tol, aim_tol):
    what = act.site or act.body
    if sol.pos_error > tol:
        text = (f'closest miss {sol.pos_error * 1000:.1f} mm, at '
                f'{np.round(sol.reached, 4).tolist()} m')
    else:
        text = (f'the position is reachable but the aim misses by '
                f'{np.rad2deg(sol.aim_error):.1f} deg (tolerance '
                f'{np.rad2deg(aim_tol):g} deg)')
    return DeviceError(errors.UNREACHABLE,
                       f'no joint configuration within limits puts {what} at '
                       f'{np.round(target, 4).tolist()} m; {text}',
                       where=act.name, miss=float(sol.pos_error),
                       reached=sol.reached.tolist(), target=target.tolist(),
                       aim_error=float(sol.aim_error))


# --- on the stepper thread ------------------------------------------------------------------
def start_plan(model: mujoco.MjModel, move: Move, start: np.ndarray, now: float) -> Plan:
    """The move's path from setpoints ``start`` at simulated time ``now``: the Cartesian
    line's waypoints, or one synchronised min-jerk segment to the solved joints."""
    cart = move.cartesian
    if cart is not None:
        step = model.opt.timestep
        times = np.append(np.arange(0.0, cart.duration, step), cart.duration)
        qs = np.array([cart.sample(t) for t in times])
        qs[0] = start     # from where the setpoints are now (q_start is clipped)
        return WaypointPlan(move.actuators, times, qs, now)
    T = duration(move.q_goal - start, move.rates)
    if move.min_duration:
        T = max(T, move.min_duration)
    return MinJerkPlan(move.actuators, start, move.q_goal, now, T)


def correction_plan(move: Move, start: np.ndarray, q_goal: np.ndarray,
                    now: float) -> MinJerkPlan:
    """A short min-jerk path from setpoints ``start`` to a re-aim's joint goals."""
    T = max(duration(q_goal - start, move.rates), CORRECT_TIME)
    return MinJerkPlan(move.actuators, start, q_goal, now, T)


def then_plans(layout: 'Layout', then: dict, setpoint: np.ndarray,
               now: float) -> list[Plan]:
    """Min-jerk paths from ``setpoint`` to an action's ``then`` goals (native values)."""
    plans: list[Plan] = []
    for name, native in then.items():
        g = layout.goals[name]
        start = setpoint[g.actuator]
        plans.append(MinJerkPlan([g.actuator], [start], [native], now,
                                 duration([native - start], [g.native_rate])))
    return plans


def settle(layout: 'Layout', move: Move, snap: Any, tolerance: float,
           aim_tolerance: float) -> tuple[bool, str] | None:
    """After the move's path ended: None while the point may still get closer, else
    ``(arrived, message)``. Keeps the move's best miss so far.

    Arrived means within tolerance *and* settled: the move's joints are still
    (``settling.is_still``), so the point stays where the result says it is. A point that stopped
    getting closer is a miss: for ``SETTLE_QUIET`` s while still, or for ``STUCK_AFTER`` s
    while it keeps moving without progress (chatter against a contact, a servo that cannot
    lift its load), or ``SETTLE_LIMIT`` s after the path at the latest.
    """
    if snap.time < move.plan_end:
        return None
    tol = tolerance if move.tolerance is None else move.tolerance
    aim_tol = aim_tolerance
    miss = distance_to_go(layout, move, snap)
    angle = aim_error(layout, snap, move.point, move.aim)
    within = miss <= tol and (angle is None or angle <= aim_tol)
    late = snap.time - move.plan_end
    if move.best_miss is None or miss < move.best_miss - 0.02 * tol:
        move.best_miss, move.best_time = miss, snap.time
    speed = settling.joint_speed(snap.qvel, move.joints_dof)
    still = settling.is_still(speed)
    quiet = snap.time - move.best_time
    if within and still:
        return True, 'arrived'
    if not ((still and quiet > SETTLE_QUIET) or quiet > STUCK_AFTER or late > SETTLE_LIMIT):
        return None
    if miss > tol:
        what = 'stopped' if still else 'stuck, still moving,'
        return False, (f'{what} {miss * 1000:.2f} mm from the target (tolerance '
                       f'{tol * 1000:g} mm)')
    if angle is not None and angle > aim_tol:
        return False, (f'reached the point, but aimed {np.rad2deg(angle):.1f} deg off '
                       f'(tolerance {np.rad2deg(aim_tol):g} deg)')
    return False, (f'within {miss * 1000:.2f} mm but never settled (joints at '
                   f'{speed:.3f} rad/s)')


def action_for(layout: 'Layout', site: Any = None) -> 'Action':
    """The device file's move_to action of ``layout``, or one built for ``site`` (a site or
    body of the model; its chain's driven joints may turn)."""
    base = next((a for a in layout.actions.values() if a.command == 'move_to'), None)
    if site is not None and not isinstance(site, str):
        raise errors.InvalidArgument(f'expected a site or body name, got {site!r}',
                                     where='site')
    if site in (None, '') and base is not None:
        return base
    if site in (None, ''):
        raise DeviceError(errors.INVALID_ARGUMENT,
                          'this device has no move_to action; name a site or body',
                          where='site', allowed=', '.join(
                              n for n in layout.sites + layout.bodies[1:] if n)
                          or 'none')
    if base is not None and site in (base.site, base.body):
        return base
    if site in layout.sites:
        amap = {'site': site}
    elif site in layout.bodies and site != layout.bodies[0]:
        amap = {'body': site}
    else:
        raise errors.UnknownName('site or body', site,
                                 [n for n in layout.sites + layout.bodies[1:]
                                  if n])
    try:
        if base is not None:
            spec = {'command': 'move_to', 'effects': base.effects,
                    'args': {n: {'unit': a.unit, 'min': a.min, 'max': a.max}
                             for n, a in base.args.items()},
                    'map': dict(amap, axes={a: 'xyz'[i] for a, i in base.axes.items()},
                                speed=base.speed, path=base.path)}
            act = layout.build_action(base.name, spec, f'actions.{base.name}')
            act.aim, act.at, act.then = base.aim, dict(base.at), {}
            return act
        spec = {'command': 'move_to', 'effects': [], 'args': {}, 'map': amap}
        return layout.build_action('move_to', spec, 'move_to')
    except ConfigError as exc:
        raise errors.InvalidArgument(f'cannot move {site!r}: {exc}', where='site') from None


def why_short(model: mujoco.MjModel, move: Move, snap: Any) -> str:
    """What held a missed move back, naming the joints: a goal past a joint's range
    (from a re-aim), or a drive at its effort limit."""
    m, parts = model, []
    if move.limited:
        parts.append(f'at a joint limit: {", ".join(move.limited)}')
    saturated = []
    for name, a, dof in zip(move.action.joints, move.actuators, move.joints_dof, strict=True):
        jid = int(m.actuator_trnid[a, 0])
        limit = min(float(np.abs(m.actuator_forcerange[a]).min())
                    if m.actuator_forcelimited[a] else np.inf,
                    float(np.abs(m.jnt_actfrcrange[jid]).min())
                    if m.jnt_actfrclimited[jid] else np.inf)
        if abs(float(snap.qfrc_actuator[dof])) >= limit * (1 - 1e-3):
            saturated.append(name)
    if saturated:
        parts.append(f'at the effort limit: {", ".join(saturated)}')
    return f' ({"; ".join(parts)})' if parts else ''
