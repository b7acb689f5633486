"""Inverse kinematics for one point (a site or a body origin), optionally aiming one axis.

Modelled on dm_control's ``inverse_kinematics.qpos_from_site_pose``: a pure function that
returns a result instead of raising when the target is out of reach, so ``move_to`` can
report the closest miss. What differs, and why:

* the answer always lies inside the joint bounds (the caller's goal limits, intersected with
  the model's ranges), because a servo asked to go past a limit never gets there;
* a body origin works as well as a site, since Menagerie's Panda and UR5e ship no tool site;
* an aim constraint (one local axis along a world direction) is the 2-DOF orientation goal a
  pick needs ("point the gripper down"), which a full quaternion target over-constrains;
* a descent that stalls restarts from seeded random configurations, so an unlucky start
  does not fail and the same request always returns the same answer.

The solver is Levenberg-Marquardt (damped least squares) with gain-ratio damping, on
``mj_kinematics`` + ``mj_comPos`` + ``mj_jacSite``/``mj_jacBody`` only: no ``mj_forward``,
no dynamics, and every array in the hot loop is sized once.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
import math
import numbers
from typing import Any

import mujoco
import numpy as np

from .. import errors
from ..checks import finite_number, finite_vector, is_bool, Vector
from ..config import limits
from ..errors import InvalidArgument, UnknownName
from ..joint_view import HINGE, ONE_DOF

__all__ = ['IKResult', 'IKSolver', 'solve', 'AIM_WEIGHT']

# Metres of position error that weigh as much as one radian of aim error. Only matters when
# both cannot be met (the closest miss trades them) and for the descent's conditioning; 0.1
# makes a 3 degree aim miss cost about as much as a 5 mm position miss.
AIM_WEIGHT = 0.1
# The default aim tolerance (rad): 3 degrees between the site axis and the wanted direction
AIM_TOLERANCE = float(np.deg2rad(3.0))
# A descent that lost less than 10 % of its cost over 10 steps is crawling along a valley or
# a limit; measured on Panda and UR5e, a seeded restart finds the answer sooner.
_STALL = 0.9


@dataclass
class IKResult:
    """What the solver reached; ``qpos`` is meaningful even when ``success`` is False."""

    success: bool
    qpos: np.ndarray
    joint_names: tuple
    pos_error: float
    aim_error: float
    reached: np.ndarray
    iterations: int
    restarts: int
    reached_axis: np.ndarray | None = field(default=None, repr=False)

    @property
    def code(self) -> str:
        """The shared result code, so the ROS layer need not re-derive it."""
        return errors.DONE if self.success else errors.UNREACHABLE

    def as_dict(self) -> dict[str, float]:
        """Joint name -> value, the form a goal message wants."""
        return dict(zip(self.joint_names, (float(v) for v in self.qpos), strict=True))


def check_int(value: Any, where: str, minimum: int) -> int:
    if is_bool(value) or not isinstance(value, (numbers.Integral, np.integer)):
        raise InvalidArgument(f'expected an integer, got {value!r}', where=where,
                              allowed=f'an integer >= {minimum}')
    if value < minimum:
        raise InvalidArgument(f'expected an integer >= {minimum}, got {value}', where=where)
    return int(value)


def check_positive(value: Any, where: str) -> float:
    out = finite_number(value, where)
    if out <= 0.0:
        raise InvalidArgument(f'must be positive, got {out}', where=where,
                              allowed='a finite number > 0')
    return out


def vector3(value: Any, where: str) -> np.ndarray:
    """``finite_vector(value, 3)`` with a fast path for the common clean inputs (a float64
    array or a tuple of floats), whose per-element checks would cost more than a solve."""
    if type(value) is np.ndarray:
        if value.dtype == np.float64 and value.shape == (3,) and np.isfinite(value).all():
            return value.copy()
    elif type(value) in (tuple, list) and len(value) == 3 \
            and all(type(v) is float and math.isfinite(v) for v in value):
        return np.array(value)
    return finite_vector(value, 3, where)


def bound_vector(values: Any, length: int, where: str, *,
                 allow: tuple[float, ...] = (-math.inf, math.inf)) -> np.ndarray:
    """Like ``finite_vector`` but an infinity in ``allow`` passes: it means "no bound" (a
    joint without a goal limit, a joint without a rate limit). NaN and bools are refused."""
    items = None
    if isinstance(values, np.ndarray):
        if values.ndim == 1 and values.dtype.kind == 'f':
            items = list(values)
    elif not isinstance(values, (str, bytes)):
        try:
            items = list(values)
        except TypeError:
            pass
    if items is None:
        return finite_vector(values, length, where)
    infinite = {i: float(v) for i, v in enumerate(items)
                if isinstance(v, (float, np.floating)) and math.isinf(v) and float(v) in allow}
    out = finite_vector([0.0 if i in infinite else v for i, v in enumerate(items)], length,
                        where)
    for i, v in infinite.items():
        out[i] = v
    return out


def _names(model, objtype, count):
    out = []
    for i in range(count):
        name = mujoco.mj_id2name(model, objtype, i)
        if name:
            out.append(name)
    return out


def _resolve_point(model, site, body):
    if (site is None) == (body is None):
        raise InvalidArgument('name exactly one of site or body', where='site/body',
                              allowed='site=NAME or body=NAME')
    if site is not None:
        ident = (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, site)
                 if isinstance(site, str) else -1)
        if ident < 0:
            raise UnknownName('site', site,
                              _names(model, mujoco.mjtObj.mjOBJ_SITE, model.nsite))
        return 'site', ident, int(model.site_bodyid[ident])
    ident = (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
             if isinstance(body, str) else -1)
    if ident < 0:
        raise UnknownName('body', body, _names(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody))
    return 'body', ident, ident


def chain_joints(model: mujoco.MjModel, body_id: int) -> list[int]:
    """Joint ids on the path from the world to ``body_id``, root first."""
    jntadr, jntnum, parent = model.body_jntadr, model.body_jntnum, model.body_parentid
    out: list[int] = []
    b = body_id
    while b > 0:
        start = int(jntadr[b])
        out[:0] = range(start, start + int(jntnum[b]))
        b = int(parent[b])
    return out


# Name resolution and chain walking cost more than a whole warm-started solve; a compiled
# model's structure cannot change, so it is resolved once per (model, point, joints). The
# entry holds the model itself, so its id cannot be reused by another while cached.
_STRUCTURE_CACHE: dict = {}
_STRUCTURE_CACHE_SIZE = 64


def _structure(model, site, body, joints):
    key = None
    if (isinstance(site, (str, type(None))) and isinstance(body, (str, type(None)))
            and (joints is None or (isinstance(joints, (list, tuple))
                                    and all(isinstance(j, str) for j in joints)))):
        key = (id(model), site, body, None if joints is None else tuple(joints))
        hit = _STRUCTURE_CACHE.get(key)
        if hit is not None and hit[0] is model:
            return hit[1]
    kind, point_id, body_id = _resolve_point(model, site, body)
    chain = chain_joints(model, body_id)
    if joints is None:
        types = model.jnt_type
        jids = [j for j in chain if int(types[j]) in ONE_DOF]
        if not jids:
            raise InvalidArgument(f'no hinge or slide joint moves {kind} '
                                  f'{site if site is not None else body!r}', where='joints')
    else:
        jids = _check_joints(model, joints, chain)
    joint_ids = np.array(jids, dtype=np.int64)
    names = tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in jids)
    qadr = model.jnt_qposadr[joint_ids].astype(np.int64)
    in_chain = set(chain)
    # Named joints off the chain cannot move the point: they keep their value rather than
    # being refused, so a caller may pass "all actuated joints" (fingers too).
    active = np.array([i for i, j in enumerate(jids) if j in in_chain], dtype=np.int64)
    dadr = model.jnt_dofadr[joint_ids[active]].astype(np.int64)
    out = (kind, point_id, joint_ids, names, qadr, active, dadr)
    for array in (joint_ids, qadr, active, dadr):
        array.flags.writeable = False
    if key is not None:
        if len(_STRUCTURE_CACHE) >= _STRUCTURE_CACHE_SIZE:
            _STRUCTURE_CACHE.clear()
        _STRUCTURE_CACHE[key] = (model, out)
    return out


def _check_joints(model, joints, chain):
    if isinstance(joints, (str, bytes)):
        raise InvalidArgument('expected a list of joint names, got one string',
                              where='joints', allowed=f'[{joints!r}]')
    try:
        names = list(joints)
    except TypeError:
        raise InvalidArgument(f'expected a list of joint names, got {joints!r}',
                              where='joints') from None
    if not names:
        raise InvalidArgument('at least one joint must be allowed to move', where='joints')
    jids = []
    for name in names:
        ident = (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
                 if isinstance(name, str) else -1)
        if ident < 0:
            raise UnknownName('joint', name, _names(model, mujoco.mjtObj.mjOBJ_JOINT,
                                                    model.njnt))
        if int(model.jnt_type[ident]) not in ONE_DOF:
            raise InvalidArgument('only hinge and slide joints can be solved for',
                                  where=f'joints[{name!r}]')
        if ident in jids:
            raise InvalidArgument('joint named twice', where=f'joints[{name!r}]')
        jids.append(ident)
    if not set(jids) & set(chain):
        movers = [model.joint(j).name for j in chain if int(model.jnt_type[j]) in ONE_DOF]
        raise InvalidArgument('none of these joints moves the point', where='joints',
                              allowed=', '.join(movers) or 'none')
    return jids


class IKSolver:
    """Resolved names, bounds and buffers for repeated solves on one model and one point.

    ``solve()`` builds one per call; ``cartesian`` keeps one for the hundreds of nearby solves
    of a path, where re-resolving names would cost more than the solves themselves.
    ``data`` is scratch: every solve overwrites its ``qpos`` and kinematics, nothing else.
    """

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, *,
                 site: str | None = None, body: str | None = None,
                 joints: Sequence[str] | None = None, lower: Vector | None = None,
                 upper: Vector | None = None) -> None:
        if not isinstance(model, mujoco.MjModel):
            raise InvalidArgument(f'expected a mujoco.MjModel, got {type(model).__name__}',
                                  where='model')
        if not isinstance(data, mujoco.MjData):
            raise InvalidArgument(f'expected a mujoco.MjData, got {type(data).__name__}',
                                  where='data')
        if data.qpos.shape[0] != model.nq:
            raise InvalidArgument('data was made for another model', where='data')
        self.model, self.data = model, data
        self.point_name = site if site is not None else body
        (self.kind, self.point_id, self.joint_ids, self.joint_names, self.qadr, self.active,
         self._dadr) = _structure(model, site, body, joints)
        self._hinge_active = model.jnt_type[self.joint_ids[self.active]] == HINGE
        self.lower, self.upper = self._bounds(model, lower, upper)

        if self.kind == 'site':
            self._pos = data.site_xpos[self.point_id]
            self._mat = data.site_xmat[self.point_id]
            self._jac = mujoco.mj_jacSite
        else:
            self._pos = data.xpos[self.point_id]
            self._mat = data.xmat[self.point_id]
            self._jac = mujoco.mj_jacBody
        self._qpos = data.qpos
        self._jacp = np.zeros((3, model.nv))
        self._jacr = np.zeros((3, model.nv))

    def _bounds(self, model, lower, upper):
        n = len(self.joint_ids)
        rng = model.jnt_range[self.joint_ids]
        lo, hi = rng[:, 0].copy(), rng[:, 1].copy()
        limited = model.jnt_limited[self.joint_ids]
        if not limited.all():
            free = limited == 0
            lo[free], hi[free] = -np.inf, np.inf
        if lower is None and upper is None:
            return lo, hi
        # The caller's limits only tighten the model's: a servo cannot pass its range.
        # Infinite entries add no bound (the ROS layer passes them for unlimited goals).
        if lower is not None:
            lo = np.maximum(lo, bound_vector(lower, n, 'lower'))
        if upper is not None:
            hi = np.minimum(hi, bound_vector(upper, n, 'upper'))
        if (lo > hi).any():
            i = int(np.argmax(lo > hi))
            raise InvalidArgument(f'empty range [{lo[i]:.6g}, {hi[i]:.6g}] after intersecting '
                                  f'with the joint range', where=f'lower/upper[{i}] '
                                  f'({self.joint_names[i]})')
        return lo, hi

    # -- validation of per-solve inputs ------------------------------------------------

    def current(self) -> np.ndarray:
        """The chosen joints' values as ``data`` holds them now."""
        return self._qpos[self.qadr].copy()

    def check_q(self, q: Any, where: str = 'q_init') -> np.ndarray:
        if q is None:
            return self.current()
        return finite_vector(q, len(self.joint_ids), where)

    # -- kinematics ----------------------------------------------------------------------

    def fk(self, q: Vector) -> tuple[np.ndarray, np.ndarray]:
        """Position and 3x3 orientation of the point at ``q`` (copies; data is overwritten)."""
        self._qpos[self.qadr] = q
        mujoco.mj_kinematics(self.model, self.data)
        return self._pos.copy(), self._mat.reshape(3, 3).copy()

    def _jacobian(self, out: np.ndarray, w: float | None) -> None:
        mujoco.mj_comPos(self.model, self.data)
        if w is None:
            self._jac(self.model, self.data, self._jacp, None, self.point_id)
            out[:] = self._jacp[:, self._dadr]
            return
        self._jac(self.model, self.data, self._jacp, self._jacr, self.point_id)
        out[:3] = self._jacp[:, self._dadr]
        jr = self._jacr[:, self._dadr]
        # Spinning about the aimed axis does not change it: drop that component so the
        # descent neither rewards nor resists it.
        out[3:] = AIM_WEIGHT * (jr - np.outer(w, w @ jr))

    # -- solving ----------------------------------------------------------------------------

    def solve(self, target: Any, *, aim: Any = None, q_init: Any = None,
              tolerance: Any = 1e-3, aim_tolerance: Any = AIM_TOLERANCE, max_iter: Any = 100,
              max_restarts: Any = 10, seed: Any = 0) -> IKResult:
        """Validate, then solve; see the module function ``solve`` for the meaning."""
        target = vector3(target, 'target')
        axis, direction = (None, None) if aim is None else limits.check_aim(aim)
        q0 = self.check_q(q_init)
        tolerance = check_positive(tolerance, 'tolerance')
        aim_tolerance = check_positive(aim_tolerance, 'aim_tolerance')
        max_iter = check_int(max_iter, 'max_iter', 1)
        max_restarts = check_int(max_restarts, 'max_restarts', 0)
        seed = check_int(seed, 'seed', 0)
        return self.run(target, axis, direction, q0, tolerance, aim_tolerance, max_iter,
                        max_restarts, seed)

    def run(self, target: np.ndarray, axis: np.ndarray | None,
            direction: np.ndarray | None, q0: np.ndarray, tolerance: float,
            aim_tolerance: float, max_iter: int = 100, max_restarts: int = 10,
            seed: int = 0) -> IKResult:
        """The unchecked solve: arguments already validated (unit aim vectors, floats)."""
        model, data = self.model, self.data
        kinematics = mujoco.mj_kinematics
        chol_factor, chol_solve = mujoco.mju_cholFactor, mujoco.mju_cholSolve
        qpos, pos, mat = self._qpos, self._pos, self._mat
        act = self.active
        qadr_a = self.qadr[act]
        lo_a, hi_a = self.lower[act], self.upper[act]
        q_full = np.minimum(np.maximum(q0, self.lower), self.upper)
        # Joints that cannot move the point are written once; the loop writes the rest.
        qpos[self.qadr] = q_full
        aim = axis is not None
        rows = 6 if aim else 3
        jac = np.empty((rows, act.size))
        eye = np.eye(rows)
        factor = np.empty((rows, rows))
        y = np.empty(rows)
        tol2 = tolerance * tolerance

        def evaluate(qa):
            qpos[qadr_a] = qa
            kinematics(model, data)
            ep = target - pos
            pe2 = float(ep @ ep)
            if not aim:
                return ep, pe2, pe2, 0.0, None
            w = mat.reshape(3, 3) @ axis
            er, ae = _rotation_to(w, direction)
            er *= AIM_WEIGHT
            return np.concatenate((ep, er)), pe2 + float(er @ er), pe2, ae, w

        best: Any = None  # (success, cost, qa, pe2, ae)
        iterations = 0
        restarts = 0
        sampler = None
        qa = q_full[act]
        for attempt in range(max_restarts + 1):
            if attempt:
                if sampler is None:
                    sampler = _Sampler(seed, lo_a, hi_a, qa)
                qa = sampler.draw()
                restarts += 1
            res, cost, pe2, ae, w = evaluate(qa)
            done = pe2 <= tol2 and ae <= aim_tolerance
            lam = -1.0
            ref_cost, ref_iter = cost, 0
            it = 0
            while not done and it < max_iter:
                it += 1
                self._jacobian(jac, w)
                jjt = jac @ jac.T
                if lam < 0.0:
                    scale = max(float(jjt.trace()), 1e-12)
                    lam, lam_min, lam_max = 1e-3 * scale / rows, 1e-12 * scale, 1e8 * scale
                at_lo = qa <= lo_a
                at_hi = qa >= hi_a
                pinned = bool(at_lo.any() or at_hi.any())
                jac_step, jjt_step = jac, jjt
                accepted = False
                while True:
                    np.multiply(eye, lam, out=factor)
                    factor += jjt_step
                    chol_factor(factor, 0.0)
                    chol_solve(y, factor, res)
                    dq = jac_step.T @ y
                    if pinned:
                        push = (at_lo & (dq < 0.0)) | (at_hi & (dq > 0.0))
                        if push.any():
                            # A joint pressed against its bound would only be clipped back:
                            # solve again without it, so the others take up the motion.
                            jac_step = jac * ~push
                            jjt_step = jac_step @ jac_step.T
                            np.multiply(eye, lam, out=factor)
                            factor += jjt_step
                            chol_factor(factor, 0.0)
                            chol_solve(y, factor, res)
                            dq = jac_step.T @ y
                    qa_new = np.minimum(np.maximum(qa + dq, lo_a), hi_a)
                    res_new, cost_new, pe2_new, ae_new, w_new = evaluate(qa_new)
                    if cost_new < cost:
                        # Gain ratio: a step that did what the linear model promised earns
                        # less damping (Gauss-Newton speed); a poor one keeps it.
                        lin = res - jac_step @ (qa_new - qa)
                        predicted = cost - float(lin @ lin)
                        rho = (cost - cost_new) / predicted if predicted > 0.0 else 0.0
                        if rho > 0.75:
                            lam = max(lam * 0.2, lam_min)
                        elif rho > 0.25:
                            lam = max(lam * 0.5, lam_min)
                        qa, res, cost, pe2, ae, w = qa_new, res_new, cost_new, pe2_new, \
                            ae_new, w_new
                        accepted = True
                        break
                    lam *= 8.0
                    if lam > lam_max or float(dq @ dq) < 1e-24:
                        break
                if not accepted:
                    break  # no descent direction left: a local minimum (or the true miss)
                done = pe2 <= tol2 and ae <= aim_tolerance
                if it - ref_iter >= 10:
                    if cost > _STALL * ref_cost:
                        break  # creeping: a restart is cheaper than waiting
                    ref_cost, ref_iter = cost, it
            iterations += it
            if best is None or (done, -cost) > (best[0], -best[1]):
                best = (done, cost, qa, pe2, ae)
            if done:
                break
        done, cost, qa, pe2, ae = best
        qa = self._nearest_turn(qa, np.minimum(np.maximum(q0, self.lower), self.upper)[act])
        # Leave data at the answer (the last configuration evaluated may be a rejected trial).
        _, _, _, ae, w = evaluate(qa)
        q_full[act] = qa
        return IKResult(success=bool(done), qpos=q_full, joint_names=self.joint_names,
                        pos_error=math.sqrt(pe2), aim_error=float(ae), reached=pos.copy(),
                        iterations=iterations, restarts=restarts,
                        reached_axis=None if w is None else w.copy())

    def _nearest_turn(self, qa, start):
        """The same pose with each hinge a whole turn nearer the start where bounds allow.

        Arms like UR5e have +-2 pi joint ranges, so a restart can land a full turn away from
        where the joint is, and the move would spin the joint around for nothing."""
        hinge = self._hinge_active
        if not hinge.any():
            return qa
        lo, hi = self.lower[self.active], self.upper[self.active]
        turns = np.round((start - qa) / (2 * np.pi))
        moved = qa + 2 * np.pi * turns
        ok = hinge & (turns != 0) & (moved >= lo) & (moved <= hi)
        return np.where(ok, moved, qa)


class _Sampler:
    """Seeded restart configurations: uniform inside the bounds, a turn either way of the
    start for an unbounded joint (it still needs a box to sample from)."""

    def __init__(self, seed, lo, hi, start):
        self._rng = np.random.default_rng(seed)
        self._lo = np.where(np.isfinite(lo), lo, np.minimum(start, hi) - math.pi)
        self._hi = np.where(np.isfinite(hi), hi, np.maximum(start, lo) + math.pi)
        self._clip = (lo, hi)

    def draw(self):
        return np.clip(self._rng.uniform(self._lo, self._hi), *self._clip)


def angle_between(a: np.ndarray, b: np.ndarray) -> float:
    """Radians between two directions: the one measure of an aim's error, for IK results,
    Cartesian paths and move results alike."""
    return math.atan2(float(np.linalg.norm(np.cross(a, b))), float(a @ b))


def _rotation_to(w, d):
    """Rotation vector (axis * angle) turning unit ``w`` onto unit ``d``, and the angle."""
    c0 = w[1] * d[2] - w[2] * d[1]
    c1 = w[2] * d[0] - w[0] * d[2]
    c2 = w[0] * d[1] - w[1] * d[0]
    s = math.sqrt(c0 * c0 + c1 * c1 + c2 * c2)
    cos = float(w[0] * d[0] + w[1] * d[1] + w[2] * d[2])
    angle = math.atan2(s, cos)
    if s > 1e-12:
        k = angle / s
        return np.array((c0 * k, c1 * k, c2 * k)), angle
    if cos > 0.0:
        return np.zeros(3), angle
    # Exactly opposite: any axis perpendicular to w turns it over; pick a stable one.
    other = np.array((1.0, 0.0, 0.0)) if abs(w[0]) < 0.9 else np.array((0.0, 1.0, 0.0))
    axis = np.cross(w, other)
    return axis * (math.pi / np.linalg.norm(axis)), angle


def solve(model: mujoco.MjModel, data: mujoco.MjData, target: Any, *,
          site: str | None = None, body: str | None = None, aim: Any = None,
          joints: Sequence[str] | None = None, q_init: Any = None, tolerance: Any = 1e-3,
          aim_tolerance: Any = AIM_TOLERANCE, max_iter: Any = 100, max_restarts: Any = 10,
          seed: Any = 0, lower: Vector | None = None,
          upper: Vector | None = None) -> IKResult:
    """Joint values that put a site (or a body's origin) at ``target``.

    ``data`` is scratch and is overwritten (pass a private copy; on return it holds the best
    configuration with its kinematics); joints not in ``joints`` keep the values it holds, and
    ``q_init`` defaults to the chosen joints' values in it. Bad input raises
    ``InvalidArgument``/``UnknownName`` before ``data`` is touched. An unreachable target is
    not an error: ``success`` is False and ``qpos``/``reached`` are the closest miss.

    ``aim=(local_axis, world_direction)`` also turns the point's frame so that its local axis
    points along the world direction (``aim_error`` is the angle left; 0 without an aim).
    ``joints`` names the hinge/slide joints allowed to move (default: all on the point's
    kinematic chain); ``lower``/``upper`` tighten their ranges (an infinite entry adds no
    bound), and the answer stays inside.
    ``max_iter`` bounds each descent; ``max_restarts`` seeded random restarts follow a stall.
    """
    solver = IKSolver(model, data, site=site, body=body, joints=joints, lower=lower,
                      upper=upper)
    return solver.solve(target, aim=aim, q_init=q_init, tolerance=tolerance,
                        aim_tolerance=aim_tolerance, max_iter=max_iter,
                        max_restarts=max_restarts, seed=seed)
