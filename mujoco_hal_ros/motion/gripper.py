"""Grippers: which joints are fingers rather than arm, and how a finger opening becomes a goal.

A real arm's ros2_control set-up runs two controllers: ``arm_controller`` (a
joint_trajectory_controller on the arm chain) and ``gripper_controller`` (a
gripper_action_controller on the finger joint). MoveIt sends the arm group's joints to the
first, so the fingers must not be in it, and ``GripperCommand`` to the second. Zero-config
tells them apart by structure: a finger joint sits in a branch of the body tree where at
least two jointed branches leave one body (the hand), that body has ``MIN_ARM_JOINTS``
movable joints above it (an arm first, so a quadruped's legs under its trunk are not
fingers), and each branch holds at most ``MAX_FINGER_JOINTS`` joints. A joint whose name
says so (``finger``, ``gripper``, ``jaw``, ``claw``, ``knuckle``) is a finger too, unless
it also says it turns the hand (``yaw``, ``roll``, ``pitch``, ``wrist``: a gripper's yaw
joint is a wrist).

A gripper is driven by one goal channel: a position servo on a finger joint, or a tendon
actuator coupling the fingers (Menagerie's Panda: one 0-255 ctrl for both); of several, the
one moving the most fingers (a mimic leader with its followers), then prismatic ones, then
one whose name says gripper (``gripper_candidates``). Never a joint that turns without
limits (``is_horn``): a hobby arm's gripper servo horn is a continuous joint named
``gripper`` beside the prismatic fingers, and a servo on it moves no finger. Its
position is the finger joint's (metres for a slide, radians for a hinge), as
ros2_controllers' gripper_action_controller reads its ``joint``; for a tendon the joints
are taken to move together, so the tendon's length is that position times the sum of its
coefficients, and the ctrl is where the actuator's force balances at that length.

Two commands name a finger position: GripperCommand's one number (``Gripper.native_goal``)
and ParallelGripperCommand's ``sensor_msgs/JointState`` (``parallel_command``: one
position, named by the gripper's joint or not named at all, with optional limits on
velocity and effort that are checked and reported, not applied).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TYPE_CHECKING

import mujoco
import numpy as np

from ..checks import finite_number, is_bool, unique_names
from ..errors import InvalidArgument, UnknownName
from ..joint_view import is_hinge, ONE_DOF, SLIDE

if TYPE_CHECKING:     # the hints only; channels is a sibling package
    from ..config.channels import Layout

MIN_ARM_JOINTS = 3
MAX_FINGER_JOINTS = 4
FINGER_WORDS = ('finger', 'gripper', 'jaw', 'claw', 'knuckle')
# ... unless it also says it turns the hand (Alex's ``LeftGripperYaw`` is a wrist joint)
WRIST_WORDS = ('yaw', 'roll', 'pitch', 'wrist')


def _movable(model, b):
    adr, n = model.body_jntadr[b], model.body_jntnum[b]
    return [j for j in range(adr, adr + n) if int(model.jnt_type[j]) in ONE_DOF]


def _subtree_joints(model, b, children):
    out, stack = [], [b]
    while stack:
        c = stack.pop()
        out += _movable(model, c)
        stack += children[c]
    return out


def finger_joints(model: mujoco.MjModel, min_arm_joints: int | None = None) -> list[int]:
    """Sorted ids of the joints zero-config counts as fingers (see the module docstring);
    ``min_arm_joints``: movable joints a hand needs above it (``MIN_ARM_JOINTS`` unless
    given; 0 for a gripper on its own)."""
    min_arm = MIN_ARM_JOINTS if min_arm_joints is None else min_arm_joints
    children: dict[int, list[int]] = {b: [] for b in range(model.nbody)}
    for b in range(1, model.nbody):
        children[int(model.body_parentid[b])].append(b)
    out = set()
    for j in range(model.njnt):
        name = (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) or '').lower()
        if int(model.jnt_type[j]) in ONE_DOF and any(w in name for w in FINGER_WORDS) \
                and not any(w in name for w in WRIST_WORDS):
            out.add(j)
    for b in range(model.nbody):
        branches = [_subtree_joints(model, c, children) for c in children[b]]
        branches = [br for br in branches if br]
        if len(branches) < 2 or any(len(br) > MAX_FINGER_JOINTS for br in branches):
            continue
        above, a = 0, b
        while a:
            above += len(_movable(model, a))
            a = int(model.body_parentid[a])
        if above >= min_arm:
            out.update(j for br in branches for j in br)
    return sorted(out)


@dataclass
class Gripper:
    """One gripper: the goal channel that drives it and the joint its position is read on."""

    channel: str
    joint: str
    qpos_adr: int
    lo: float
    hi: float
    to_ctrl: tuple = (1.0, 0.0)         # ctrl = a * position + b (native units)

    def native_goal(self, position: float) -> float:
        """The channel's native value (ctrl) for a finger position; refused outside range."""
        position = finite_number(position, 'command.position')   # no bool, NaN, 1e400
        if not self.lo - 1e-9 <= position <= self.hi + 1e-9:
            raise InvalidArgument(f'gripper position {position!r} is outside '
                                  f'[{self.lo:g}, {self.hi:g}] for {self.joint}; ask for '
                                  'an opening within the finger joint range',
                                  where='command.position')
        a, b = self.to_ctrl
        return a * min(max(position, self.lo), self.hi) + b

    def position(self, snapshot: Any) -> float:
        return float(snapshot.qpos[self.qpos_adr])


def _values(values, field):
    """A JointState array field as a list; anything that is not a list of values refused."""
    if isinstance(values, (str, bytes, dict)) or is_bool(values):
        raise InvalidArgument(f'expected a list of numbers, got {type(values).__name__}',
                              where=f'command.{field}')
    try:
        return list(values)
    except TypeError:
        raise InvalidArgument(f'expected a list of numbers, got {type(values).__name__}',
                              where=f'command.{field}') from None


def _optional_limit(values, joint, field):
    """An optional per-joint limit of a JointState command: none, or one number >= 0."""
    values = _values(values, field)
    if not values:
        return None
    if len(values) != 1:
        raise InvalidArgument(f'{len(values)} {field} values for the one gripper joint '
                              f'{joint}', where=f'command.{field}',
                              allowed=f'none, or one value for {joint}')
    value = finite_number(values[0], f'command.{field}')
    if value < 0:
        raise InvalidArgument(f'{field} limit {value:g} is negative', where=f'command.{field}',
                              allowed='0 or more')
    return value


def parallel_command(gripper: Gripper, names: Sequence[str], positions: Sequence[float],
                     velocities: Sequence[float] = (), efforts: Sequence[float] = ()) -> float:
    """A ParallelGripperCommand's ``command`` (JointState fields) -> the finger position
    asked for, checked against the gripper; DeviceError with the reason otherwise, so the
    goal is rejected before anything moves. Velocity and effort limits are checked only."""
    names = unique_names(names, 'command.name', 'joint')     # so at most one: the joint
    for name in names:
        if name != gripper.joint:
            raise UnknownName('gripper joint', name, [gripper.joint], where='command.name')
    positions = _values(positions, 'position')
    if len(positions) != 1:
        raise InvalidArgument(f'{len(positions)} positions for the one gripper joint '
                              f'{gripper.joint}', where='command.position',
                              allowed=f'one position for {gripper.joint}')
    _optional_limit(velocities, gripper.joint, 'velocity')
    _optional_limit(efforts, gripper.joint, 'effort')
    position = positions[0]
    gripper.native_goal(position)
    return float(position)


def _range(model, j):
    if model.jnt_limited[j]:
        return float(model.jnt_range[j, 0]), float(model.jnt_range[j, 1])
    return -np.inf, np.inf


def is_horn(model: mujoco.MjModel, j: int) -> bool:
    """Whether joint ``j`` turns without limits (a URDF ``continuous`` joint): a servo horn
    or a wheel, never a finger, whatever its name says. A hobby arm's gripper servo horn is
    often a continuous joint named ``gripper`` beside the prismatic fingers it drives. A
    mimic joint (it follows a leader through a joint equality) is not one: the URDF import
    leaves its limits to the leader."""
    if not is_hinge(model, j) or model.jnt_limited[j]:
        return False
    return not any(int(model.eq_type[e]) == int(mujoco.mjtEq.mjEQ_JOINT)
                   and int(model.eq_obj1id[e]) == j for e in range(model.neq))


def _followers(model, j):
    """Joints coupled to ``j`` as their leader (URDF ``<mimic>``: a joint equality)."""
    return {int(model.eq_obj1id[e]) for e in range(model.neq)
            if int(model.eq_type[e]) == int(mujoco.mjtEq.mjEQ_JOINT)
            and int(model.eq_obj2id[e]) == j}


def _marked(*names):
    return any(w in (n or '').lower() for n in names for w in FINGER_WORDS + ('grip',))


def _tendon_gripper(layout, goal, fingers):
    """(fingers moved, Gripper) of a tendon actuator coupling finger joints, or None."""
    model, a = layout.model, goal.actuator
    t = int(model.actuator_trnid[a, 0])
    adr, num = model.tendon_adr[t], model.tendon_num[t]
    joints = [int(model.wrap_objid[w]) for w in range(adr, adr + num)
              if int(model.wrap_type[w]) == int(mujoco.mjtWrap.mjWRAP_JOINT)]
    if len(joints) != num or not joints or not set(joints) <= set(fingers):
        return None
    coef = float(np.sum(model.wrap_prm[adr:adr + num]))
    gain, bias = model.actuator_gainprm[a], model.actuator_biasprm[a]
    if (int(model.actuator_biastype[a]) != int(mujoco.mjtBias.mjBIAS_AFFINE)
            or gain[0] == 0 or bias[1] == 0 or coef == 0):
        return None
    # force = gain*ctrl + b0 + b1*length = 0 at rest; length = coef * position
    j = joints[0]
    lo, hi = _range(model, j)
    if model.actuator_ctrllimited[a]:
        reach = sorted((c * gain[0] + bias[0]) / (-bias[1] * coef)
                       for c in model.actuator_ctrlrange[a])
        lo, hi = max(lo, reach[0]), min(hi, reach[1])
    marked = _marked(goal.actuator_name, mujoco.mj_id2name(
        model, mujoco.mjtObj.mjOBJ_TENDON, t))
    return (set(joints), marked, Gripper(goal.name, layout.joints[j],
                                         int(model.jnt_qposadr[j]), lo, hi,
                                         (-bias[1] * coef / gain[0], -bias[0] / gain[0])))


def gripper_candidates(layout: 'Layout', fingers: Sequence[int] | None = None) -> list:
    """Every goal channel that could be the gripper, best first, as ``(score, Gripper)``.

    A candidate drives finger joints: a position servo on one (never a joint that turns
    without limits: ``is_horn``), or a tendon actuator coupling several. Best is the one
    that moves the most fingers (a mimic leader moves its followers too; a tendon all it
    couples), then one on a slide (prismatic fingers), then one whose actuator, tendon or
    joint name marks it as the gripper, then the first in the model."""
    model = layout.model
    finger_set = set(finger_joints(model) if fingers is None else fingers)
    out = []
    for order, goal in enumerate(layout.goals.values()):
        a = goal.actuator
        if goal.drive == 'position' and goal.joint in finger_set:
            j = goal.joint
            if is_horn(model, j):
                continue
            moved = {j} | (_followers(model, j) & finger_set)
            lo, hi = _range(model, j)
            if model.actuator_ctrllimited[a] and model.actuator_gear[a, 0] == 1:
                # the servo reaches no further than its ctrl range (ALOHA: 0.002..0.037 m)
                lo = max(lo, float(model.actuator_ctrlrange[a, 0]))
                hi = min(hi, float(model.actuator_ctrlrange[a, 1]))
            found = (moved, _marked(goal.actuator_name, layout.joints[j]),
                     Gripper(goal.name, layout.joints[j], int(model.jnt_qposadr[j]), lo, hi))
        elif int(model.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_TENDON):
            found = _tendon_gripper(layout, goal, finger_set)
            if found is None:
                continue
        else:
            continue
        moved, marked, g = found
        slide = any(int(model.jnt_type[j]) == SLIDE for j in moved)
        out.append(((len(moved), slide, marked, -order), g))
    out.sort(key=lambda c: c[0], reverse=True)
    return out


def find_gripper(layout: 'Layout', fingers: Sequence[int] | None = None) \
        -> Gripper | None:
    """The gripper zero-config finds in ``layout`` (a channels.Layout), or None: the best
    of ``gripper_candidates`` (``fingers``: the finger joints, ``finger_joints`` unless
    given)."""
    found = gripper_candidates(layout, fingers)
    return found[0][1] if found else None


def gripper_on_joint(layout: 'Layout', joint: str) -> Gripper:
    """The gripper a user binds to ``joint`` (``gripper_controller.joint``): the
    position goal channel on that joint, as given, even one that moves no finger (the
    conformance battery's ``gripper`` check then says so); InvalidArgument naming the
    joints that have one otherwise."""
    model = layout.model
    driven = []
    for goal in layout.goals.values():
        if goal.drive == 'position' and goal.joint >= 0:
            name = layout.joints[goal.joint]
            driven.append(name)
            if name == joint:
                j = goal.joint
                lo, hi = _range(model, j)
                return Gripper(goal.name, joint, int(model.jnt_qposadr[j]), lo, hi)
    raise InvalidArgument(f'joint {joint!r} is not driven by a position goal channel; '
                          'name a finger joint that is', allowed=', '.join(driven) or 'none')
