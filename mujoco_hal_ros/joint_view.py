"""One view of a compiled model's joints and actuators: kinds, addresses, ranges, names.

Every publisher and controller asks the same questions of a model: which joints are hinges
or slides (the ones a ``joint_states`` message carries and a channel drives), where their
positions and velocities sit in ``qpos``/``qvel``, their ranges, which joint each actuator
drives. Written in each of them, the kind filter and the address arithmetic drift apart
(an unnamed joint named one way in joint_states and another in /tf). Here they are
computed once per model, in the spirit of dm_control's ``Physics.named`` and MuJoCo's
``model.joint(name)``: ``view(model)`` returns the model's ``JointView``, built on first
use and kept for as long as the model lives. A model swap (``device.swaps``) brings a new
``MjModel``, so a cache that follows swaps calls ``view(event.model)`` and gets the new
model's view; nothing here needs telling. The structure read here (types, addresses,
ranges) is never changed in place by this package.

Lowest layer: imports only MuJoCo and numpy, so every package may use it.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
import threading
import weakref

import mujoco
import numpy as np

FREE = int(mujoco.mjtJoint.mjJNT_FREE)
BALL = int(mujoco.mjtJoint.mjJNT_BALL)
SLIDE = int(mujoco.mjtJoint.mjJNT_SLIDE)
HINGE = int(mujoco.mjtJoint.mjJNT_HINGE)
ONE_DOF: tuple[int, int] = (HINGE, SLIDE)      # a position and a velocity each: joint_states'
KIND_NAME: dict[int, str] = {FREE: 'free', BALL: 'ball', SLIDE: 'slide', HINGE: 'hinge'}
QUANTITY: dict[int, str] = {HINGE: 'angle', SLIDE: 'length'}   # what a 1-DoF position measures
JOINT_TRANSMISSIONS: tuple[int, int] = (int(mujoco.mjtTrn.mjTRN_JOINT),
                                        int(mujoco.mjtTrn.mjTRN_JOINTINPARENT))


@dataclass(frozen=True)
class Joint:
    """One joint of a compiled model, as plain values."""

    id: int
    name: str                    # '' for an unnamed joint
    type: int                    # mjtJoint
    body: int
    qposadr: int
    dofadr: int
    nq: int                      # 7 free, 4 ball, 1 hinge or slide
    nv: int                      # 6 free, 3 ball, 1 hinge or slide
    limited: bool
    range: tuple[float, float]   # (-inf, inf) where not limited

    @property
    def kind(self) -> str:
        """``hinge``, ``slide``, ``ball`` or ``free``."""
        return KIND_NAME[self.type]

    @property
    def one_dof(self) -> bool:
        """A hinge or a slide: one position, one velocity."""
        return self.type in ONE_DOF

    @property
    def label(self) -> str:
        """The name joint_states and a URDF give it: its own, or ``joint<id>``."""
        return self.name or f'joint{self.id}'


@dataclass(frozen=True)
class Actuator:
    """One actuator and what it drives."""

    id: int
    name: str
    trntype: int                 # mjtTrn
    target: int                  # the joint, tendon, site or body id its transmission names
    joint: int                   # the joint it drives through a joint transmission, else -1


@dataclass(frozen=True)
class Addresses:
    """Names and addresses of a set of 1-DoF joints, in model order: what one
    ``joint_states`` message carries (``qpos[qpos]``, ``qvel[dofs]``)."""

    names: tuple[str, ...]
    qpos: np.ndarray
    dofs: np.ndarray


class JointView:
    """A model's joints and actuators by kind, name and address, computed once.

    It keeps no reference to the model (``view`` caches it beside the model), only plain
    values read from it."""

    def __init__(self, model: mujoco.MjModel) -> None:
        nq = {FREE: 7, BALL: 4, SLIDE: 1, HINGE: 1}
        nv = {FREE: 6, BALL: 3, SLIDE: 1, HINGE: 1}
        joints = []
        for j in range(model.njnt):
            t = int(model.jnt_type[j])
            limited = bool(model.jnt_limited[j])
            lo, hi = (float(v) for v in model.jnt_range[j]) if limited else (-np.inf, np.inf)
            joints.append(Joint(
                id=j, name=mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) or '',
                type=t, body=int(model.jnt_bodyid[j]), qposadr=int(model.jnt_qposadr[j]),
                dofadr=int(model.jnt_dofadr[j]), nq=nq[t], nv=nv[t], limited=limited,
                range=(lo, hi)))
        self.joints: tuple[Joint, ...] = tuple(joints)
        self.by_name: dict[str, Joint] = {j.name: j for j in joints if j.name}
        self.one_dof: tuple[Joint, ...] = tuple(j for j in joints if j.one_dof)
        actuators = []
        for a in range(model.nu):
            trn, target = int(model.actuator_trntype[a]), int(model.actuator_trnid[a, 0])
            actuators.append(Actuator(
                id=a, name=mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a) or '',
                trntype=trn, target=target,
                joint=target if trn in JOINT_TRANSMISSIONS else -1))
        self.actuators: tuple[Actuator, ...] = tuple(actuators)
        self.actuated: tuple[int, ...] = tuple(sorted({a.joint for a in actuators
                                                       if a.joint >= 0}))
        self._base = _floating_base(model, joints)

    def joint(self, key: int | str) -> Joint:
        """A joint by id or name; KeyError naming what there is when it is none."""
        if isinstance(key, str):
            if key not in self.by_name:
                raise KeyError(f'no joint {key!r}; the model has '
                               f'{", ".join(sorted(self.by_name)) or "no named joints"}')
            return self.by_name[key]
        if not 0 <= int(key) < len(self.joints):
            raise KeyError(f'no joint {key}; ids run 0..{len(self.joints) - 1}')
        return self.joints[int(key)]

    def of_kind(self, *types: int) -> tuple[Joint, ...]:
        """The joints of the given mjtJoint types, in model order."""
        wanted = {int(t) for t in types}
        return tuple(j for j in self.joints if j.type in wanted)

    def is_one_dof(self, j: int) -> bool:
        return self.joints[int(j)].one_dof

    def one_dof_ids(self) -> list[int]:
        return [j.id for j in self.one_dof]

    def moving(self, keep: Callable[[str], bool] | None = None) -> Addresses:
        """The 1-DoF joints a joint_states message carries (those whose ``label`` ``keep``
        accepts, when given): their labels, qpos and dof addresses."""
        chosen = [j for j in self.one_dof if keep is None or keep(j.label)]
        return Addresses(tuple(j.label for j in chosen),
                         np.array([j.qposadr for j in chosen], dtype=np.intp),
                         np.array([j.dofadr for j in chosen], dtype=np.intp))

    def dofs(self, joints: Iterable[int | str]) -> np.ndarray:
        """The first dof address of each joint (by id or name)."""
        return np.array([self.joint(j).dofadr for j in joints], dtype=np.intp)

    def in_body(self, body: int) -> tuple[Joint, ...]:
        """The joints of one body (its own, not those of the bodies below)."""
        return tuple(j for j in self.joints if j.body == int(body))

    @property
    def floating_base(self) -> int | None:
        """The first root body on a free joint that carries hinge or slide joints below it
        (a legged or mobile robot's base), or None. A free body without joints below it (a
        block on a table) is an object, not a base."""
        return self._base


def _floating_base(model: mujoco.MjModel, joints: list[Joint]) -> int | None:
    roots = {int(model.body_rootid[j.body]) for j in joints if j.one_dof}
    for b in range(1, model.nbody):
        j = int(model.body_jntadr[b])
        if int(model.body_parentid[b]) == 0 and j >= 0 and joints[j].type == FREE \
                and b in roots:
            return b
    return None


_VIEWS: 'weakref.WeakKeyDictionary[mujoco.MjModel, JointView]' = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def view(model: mujoco.MjModel) -> JointView:
    """The model's ``JointView``: built on first use, then kept beside the model (and
    dropped with it)."""
    with _LOCK:
        found = _VIEWS.get(model)
    if found is not None:
        return found
    built = JointView(model)
    with _LOCK:
        return _VIEWS.setdefault(model, built)


def is_one_dof(model: mujoco.MjModel, j: int) -> bool:
    """Whether joint ``j`` is a hinge or a slide."""
    return int(model.jnt_type[int(j)]) in ONE_DOF


def is_hinge(model: mujoco.MjModel, j: int) -> bool:
    return int(model.jnt_type[int(j)]) == HINGE
