"""A MuJoCo model from the robot_description a real arm's launch already has.

MuJoCo's own URDF importer builds the bodies, joints, inertias and meshes; this module
prepares the URDF for it and adds what URDF leaves out:

- ``package://<pkg>/...`` mesh paths are resolved through the ament index (then through
  ``package_roots``, folders holding ``<pkg>/`` or ``share/<pkg>/``), ``file://`` ones to
  plain paths. Meshes MuJoCo cannot read (COLLADA ``.dae`` visuals, common in description
  packages) are left out with a note in ``notes``: the collision meshes (STL) still give
  the shape, and rviz draws the original URDF anyway.
- The importer's ``<mujoco>`` extension tag is honoured; where it leaves them unset, links
  on fixed joints are kept (``fusestatic="false"``, so every URDF link is a body and a TF
  frame of the same name), visual geoms are kept and mesh paths are not stripped; inertias
  are balanced and bounded below, and a tensor that is not positive definite (common in
  real packages) is replaced by the nearest one that is, with a note.
- Actuators come from the ``<ros2_control>`` command interfaces, one per joint, as the
  real hardware exposes them: ``position`` -> a position servo, ``velocity`` -> a velocity
  servo, ``effort`` -> a motor. Servo gains come from the inertia each joint moves and the
  timestep (``servo_gains``: critically damped, as fast as the step integrates stably,
  full effort only for large errors) and follow the pose as the arm moves; an interface's
  ``kp`` / ``kv`` / ``dampratio`` params win. The control range is the interface's
  ``min``/``max`` params, else the URDF limit (position lower/upper, +-velocity,
  +-effort), and the force range the URDF effort limit. The arm's own bodies get gravity
  compensation (``gravcomp``) through the drives of servo joints (``actuatorgravcomp``):
  a real arm's position interface holds its pose under gravity, and its effort reads the
  holding torque. A keyframe ``home`` puts every joint inside its range (``keyframe:=home``).
  Without a ``<ros2_control>`` block every revolute and prismatic joint gets a position
  servo.
- ``<mimic>`` joints are MuJoCo joint equalities (multiplier, offset; MuJoCo's importer)
  as stiff as the step allows; only the leader gets an actuator (a goal channel), the
  followers' own ranges give way to the leader's, and joint_states reports them all.
- ``<dynamics damping friction>`` become joint damping and frictionloss, the effort limit
  each joint's actuator force range. Every repair is noted with before and after: an
  inertia no rigid body has, a mass raised to ``MIN_MASS``, armature added to a joint
  that moves almost nothing (``MIN_JOINT_INERTIA``).
- ``implicitfast`` integration (unless the URDF's ``<mujoco><option>`` says otherwise) and,
  as Gazebo does by default, no contacts between the robot's own links
  (``self_collide=True`` keeps them): overlapping collision meshes of neighbouring links
  are common in description packages, and MoveIt keeps planned paths clear anyway.
- The sensors the description declares for a simulator (Gazebo Classic and Gazebo Sim
  ``<sensor>`` tags, ``<ros2_control>`` ``<sensor>`` components: ``gazebo_sensors``) are
  mounted where they sit (``sensor_mounts``: sites, cameras, MuJoCo sensors) and carried
  in the model, so sim_node publishes them on the topics and frames the tags give; what
  is not supported is noted.
- The robot is placed in a default scene (floor, just below whatever hangs lower than the
  base at ``home``; light; an ``overview`` camera looking at it) or attached to the
  world of a user's MJCF ``scene`` file.

The result is written as MJCF into a cache folder (named by content), because the device
loads a model file; ``model_from_urdf`` returns its path.

Why one module of this size: it is one pipeline (prepare the URDF, import, add actuators,
size gains, repair inertias, add home and scene) whose steps share the notes list and the
importer's quirks, run in one order by ``model_from_urdf``; each step is a function of its
own here.
"""

from collections.abc import Collection, Mapping, Sequence
import hashlib
import os
import tempfile
from typing import Any
import warnings
import xml.etree.ElementTree as ET

import mujoco
import numpy as np

from ..errors import ModelError
from ..joint_view import is_one_dof, KIND_NAME, ONE_DOF, view
from . import gazebo_sensors, joint_limits, mobile_base, sensor_mounts, servo_gains
from .urdf_out import write_stl

DEFAULT_KP = 100.0         # placeholders until _size_gains sizes each servo
DEFAULT_KV = 10.0
READABLE_MESHES = ('.stl', '.obj', '.msh')
COMMAND_KINDS = ('position', 'velocity', 'effort')
MIN_MASS = 1e-6            # kg and kg m^2: what a massless URDF link gets (boundmass/...)
MIN_INERTIA = 1e-9
# The least a joint may move at the ``home`` pose (kg m^2 for a hinge, kg for a slide):
# below it, armature (a drive's rotor inertia, which URDF does not carry) makes up the rest.
MIN_JOINT_INERTIA = {'hinge': 1e-4, 'slide': 1e-3}
MAX_STL_FACES = 200000     # MuJoCo's STL decoder limit
FLOOR_CLEARANCE = 0.01     # m between the default floor and a robot hanging below its base


def default_cache_dir() -> str:
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'),
                                                            '.cache')
    return os.path.join(base, 'mujoco_hal_ros', 'urdf')


def is_urdf(text: Any) -> bool:
    """True when ``text`` is URDF (a ``<robot>`` document) rather than a path or MJCF."""
    return text.lstrip().startswith('<') and '<robot' in text[:4096]


def package_dir(pkg: str, package_roots: Sequence[str] = ()) -> str:
    """The share folder of ``pkg``: the ament index first, then ``package_roots``."""
    try:
        from ament_index_python.packages import get_package_share_directory
        return get_package_share_directory(pkg)
    except Exception:  # noqa: BLE001 - not in the index (or no index): try the roots
        pass
    for root in package_roots:
        for cand in (os.path.join(root, pkg), os.path.join(root, 'share', pkg)):
            if os.path.isdir(cand):
                return cand
    raise ModelError(f'package://{pkg} not found in the ament index or {list(package_roots)}; '
                     f'source the workspace that installs {pkg}', where='robot_description')


def resolve_uri(uri: str, package_roots: Sequence[str] = (), base_dir: str | None = None
                ) -> str:
    """An absolute path for a URDF mesh URI (``package://``, ``file://`` or a path)."""
    if uri.startswith('package://'):
        pkg, _, rest = uri[len('package://'):].partition('/')
        return os.path.join(package_dir(pkg, package_roots), rest)
    if uri.startswith('file://'):
        return uri[len('file://'):]
    return uri if os.path.isabs(uri) or base_dir is None else os.path.join(base_dir, uri)


def _is_ascii_stl(path, head):
    """ASCII STL starts with 'solid' and is not sized as the binary count says (some
    binary exporters also write 'solid' into the header)."""
    if not head.startswith(b'solid') or len(head) < 84:
        return False
    return os.path.getsize(path) != 84 + 50 * int.from_bytes(head[80:84], 'little')


def _ascii_stl_to_binary(path, cache_dir):
    """A binary copy of an ASCII STL (MuJoCo's decoder reads binary only), in the cache."""
    with open(path, encoding='ascii', errors='replace') as handle:
        corners = [[float(v) for v in line.split()[1:4]] for line in handle
                   if line.strip().startswith('vertex')]
    vertices = np.asarray(corners, float).reshape(-1, 3)
    out = os.path.join(cache_dir, 'meshes', hashlib.sha1(vertices.tobytes()).hexdigest()[:16]
                       + '.stl')
    if not os.path.exists(out):
        write_stl(out, vertices, np.arange(len(vertices)).reshape(-1, 3))
    return out


def _readable(path, cache_dir):
    """(path MuJoCo can load, '') or (None, why it cannot)."""
    if os.path.splitext(path)[1].lower() not in READABLE_MESHES:
        return None, 'MuJoCo reads STL, OBJ and MSH'
    if path.lower().endswith('.stl'):
        try:
            with open(path, 'rb') as handle:
                head = handle.read(84)
            if _is_ascii_stl(path, head):
                path = _ascii_stl_to_binary(path, cache_dir)
                with open(path, 'rb') as handle:
                    head = handle.read(84)
        except (OSError, ValueError) as err:
            return None, f'cannot read it: {err}'
        faces = int.from_bytes(head[80:84], 'little') if len(head) == 84 else 0
        if not 0 < faces <= MAX_STL_FACES:
            return None, f'{faces} faces, MuJoCo takes 1 to {MAX_STL_FACES}'
    return path, ''


def _fix_inertia(link: ET.Element, notes: list[str]) -> None:
    """Real description packages carry inertias MuJoCo refuses (not positive definite,
    zero, or principal moments breaking A + B >= C): replace the tensor by a valid one
    near it (eigenvalues clipped to MIN_INERTIA, the two smaller raised to half the
    largest where needed). Written into the URDF, so the saved MJCF loads as it is."""
    inertia = link.find('inertial/inertia')
    if inertia is None:
        return
    keys = ('ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz')
    try:
        v = {k: float(inertia.get(k, 0.0)) for k in keys}
    except ValueError:
        return
    m = np.array([[v['ixx'], v['ixy'], v['ixz']], [v['ixy'], v['iyy'], v['iyz']],
                  [v['ixz'], v['iyz'], v['izz']]])
    w, vecs = np.linalg.eigh(m)                      # ascending
    if np.all(w > MIN_INERTIA) and w[0] + w[1] >= w[2] * (1 + 1e-9):
        return
    w = np.maximum(w, MIN_INERTIA)
    if w[0] + w[1] < w[2] * (1 + 1e-9):              # no rigid body has that: raise the two
        w[0] = w[1] = max(w[1], 0.5 * w[2] * (1 + 1e-6))
    fixed = vecs @ np.diag(w) @ vecs.T
    for k, (i, j) in zip(keys, ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)), strict=True):
        inertia.set(k, repr(float(fixed[i, j])))
    before = ', '.join(f'{k}={v[k]:.3g}' for k in keys)
    after = ', '.join(f'{k}={float(inertia.attrib[k]):.3g}' for k in keys)   # set just above
    notes.append(f'{link.get("name")}: inertia is no rigid body\'s (not positive definite '
                 f'or A + B < C): replaced by the nearest valid one ({before} -> {after})')


def ros2_control_joints(root: ET.Element) -> dict[str, dict[str, Any]]:
    """joint -> {'kind': first command interface, 'params': {...}} from ``<ros2_control>``."""
    out: dict[str, dict[str, Any]] = {}
    for block in root.findall('ros2_control'):
        for joint in block.findall('joint'):
            name = joint.get('name')
            for iface in joint.findall('command_interface'):
                kind = iface.get('name')
                if kind not in COMMAND_KINDS or name is None or name in out:
                    continue
                params = {p.get('name'): p.text.strip() for p in iface.findall('param')
                          if p.text}
                out[name] = {'kind': kind, 'params': params}
    return out


_SIZES = {'sphere': ('radius',), 'cylinder': ('radius', 'length'),
          'capsule': ('radius', 'length'), 'box': ('size',)}


def _degenerate(elem: ET.Element) -> str:
    """Why a visual or collision shape cannot be built (a sphere of radius 0, as real
    packages carry for a frame marker), or ''."""
    geometry = elem.find('geometry')
    for shape in (geometry if geometry is not None else ()):
        for key in _SIZES.get(shape.tag, ()):
            try:
                values = [float(v) for v in (shape.get(key) or '').split()]
            except ValueError:
                return f'{shape.tag} {key}="{shape.get(key)}" is no number'
            if not values or min(values) <= 0:
                return f'{shape.tag} {key}="{shape.get(key)}": a shape needs a size above 0'
    return ''


def _unexpanded_xacro(root):
    """The first attribute that still holds xacro (``$(...)`` or ``${...}``), or None."""
    for elem in root.iter():
        for key, value in elem.attrib.items():
            if '$(' in value or '${' in value:
                return f'<{elem.tag} {key}="{value}">'
    return None


def _prepare(root: ET.Element, package_roots: Sequence[str], base_dir: str | None,
             cache_dir: str, notes: list[str]) -> None:
    """Resolve meshes, drop what MuJoCo cannot read, set the importer's defaults."""
    for link in root.findall('link'):
        for tag in ('visual', 'collision'):
            for elem in link.findall(tag):
                why = _degenerate(elem)
                if why:
                    notes.append(f'{link.get("name")}: {tag} left out ({why})')
                    link.remove(elem)
                    continue
                mesh = elem.find('geometry/mesh')
                if mesh is None:
                    continue
                given = resolve_uri(mesh.get('filename', ''), package_roots, base_dir)
                path, why = _readable(given, cache_dir)
                if why:
                    notes.append(f'{link.get("name")}: {tag} mesh {os.path.basename(given)} '
                                 f'left out ({why})')
                    link.remove(elem)
                    continue
                mesh.set('filename', path)
        _fix_inertia(link, notes)
    for tag in ('ros2_control', 'gazebo', 'transmission'):
        for elem in root.findall(tag):
            root.remove(elem)
    ext = root.find('mujoco')
    if ext is None:
        ext = ET.SubElement(root, 'mujoco')
    compiler = ext.find('compiler')
    if compiler is None:
        compiler = ET.SubElement(ext, 'compiler')
    for key, value in (('fusestatic', 'false'), ('discardvisual', 'false'),
                       ('strippath', 'false'), ('balanceinertia', 'true'),
                       ('boundmass', str(MIN_MASS)), ('boundinertia', str(MIN_INERTIA))):
        compiler.attrib.setdefault(key, value)


def _number(text, what):
    """``text`` as a finite float, or a ModelError naming where it came from: a URDF value
    like pybullet biped2d's ``lower="-1.57."`` stops robot_state_publisher too."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float('nan')
    if not np.isfinite(value):
        raise ModelError(f'{what} is {text!r}, not a finite number; fix it in the URDF',
                         where='robot_description')
    return value


def _urdf_limits(root):
    """joint -> (lower, upper, effort, velocity) from the URDF (None where not given).

    A ``continuous`` joint has no position limits whatever its ``<limit>`` says, as the
    URDF spec, MuJoCo's importer, ros2_control's joint limits and MoveIt read it (pybullet's
    r2d2 gives its continuous head swivel lower/upper, and its servo refused to turn)."""
    out = {}
    for joint in root.findall('joint'):
        lim = joint.find('limit')
        name = joint.get('name')
        lower, upper = _limit(lim, name, 'lower'), _limit(lim, name, 'upper')
        if joint.get('type') == 'continuous':
            lower = upper = None
        out[name] = (lower, upper, _limit(lim, name, 'effort'), _limit(lim, name, 'velocity'))
    return out


def _limit(lim, joint, key):
    """One attribute of a joint's ``<limit>`` as a float, None where not given."""
    if lim is None or not lim.get(key):
        return None
    return _number(lim.get(key), f'joint {joint}: <limit {key}=...>')


def _followers(root):
    """joint -> leader for every ``<mimic>`` joint: MuJoCo's importer makes each a joint
    equality (multiplier, offset), so only the leader is driven."""
    return {j.get('name'): j.find('mimic').get('joint') for j in root.findall('joint')
            if j.find('mimic') is not None and j.find('mimic').get('joint')}


def _add_actuators(spec, commands, limits, followers, notes, overrides=None):
    """One actuator per commanded joint (every movable joint without a <ros2_control>
    block), mimic followers left to their equality; gains are sized later (``_size_gains``)
    from the inertia each joint moves. Returns {actuator name: (kind, params, effort)}."""
    movable = [spec.joints[j] for j in range(len(spec.joints))
               if int(spec.joints[j].type) in ONE_DOF]
    if not commands:
        commands = {j.name: {'kind': 'position', 'params': {}} for j in movable}
    for joint, kind in (overrides or {}).items():
        # a drive controller's wheels and steering: driven as it drives them; casters: none
        if kind is None:
            commands.pop(joint, None)
        else:
            commands[joint] = {'kind': kind,
                               'params': commands.get(joint, {}).get('params', {})}
    names = {j.name for j in movable}
    unknown = sorted(set(commands) - names)
    if unknown:
        raise ModelError(f'<ros2_control> names joints the URDF has no movable joint for: '
                         f'{unknown}; fix the names (known: {sorted(names)})',
                         where='robot_description')
    built = {}
    for joint in movable:
        if joint.name not in commands:
            continue
        if joint.name in followers:
            notes.append(f'{joint.name}: mimics {followers[joint.name]} (a joint equality), '
                         'so it gets no actuator of its own')
            continue
        kind, params = commands[joint.name]['kind'], commands[joint.name]['params']
        lower, upper, effort, velocity = limits.get(joint.name, (None,) * 4)
        act = spec.add_actuator()
        act.name = joint.name
        act.target = joint.name
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        if kind == 'position':
            act.set_to_position(kp=DEFAULT_KP, kv=1.0)
            lo, hi = lower, upper
        elif kind == 'velocity':
            act.set_to_velocity(kv=DEFAULT_KV)
            lo, hi = (-velocity, velocity) if velocity else (None, None)
        else:
            act.set_to_motor()
            lo, hi = (-effort, effort) if effort else (None, None)
        where = f'<ros2_control> joint {joint.name}: <param name'
        lo = _number(params['min'], f'{where}="min">') if 'min' in params else lo
        hi = _number(params['max'], f'{where}="max">') if 'max' in params else hi
        for key in ('kp', 'kv', 'dampratio'):     # read when the gains are sized
            if key in params:
                _number(params[key], f'{where}="{key}">')
        if lo is not None and hi is not None and hi > lo:
            act.ctrlrange = [lo, hi]
            act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        if effort:
            act.forcerange = [-effort, effort]
            act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        if velocity and velocity > 0:
            joint_limits.mark_speed(spec, joint.name, velocity)
        built[joint.name] = (kind, params, effort)
    return built


def _at_home(spec):
    """(model, data) of ``spec`` compiled, the data at keyframe ``home`` where there is one
    (positions only: nothing computed yet)."""
    model = spec.compile()
    data = mujoco.MjData(model)
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, 'home')
    if key >= 0:
        mujoco.mj_resetDataKeyframe(model, data, key)
    return model, data


#: What ``_add_actuators`` built: {actuator name: (kind, params, effort)}.
_Built = Mapping[str, tuple[str, dict[str, str], float | None]]


def _size_gains(spec: mujoco.MjSpec, built: _Built,
                wheels: Collection[str] = ()) -> None:
    """Each servo's gains from the inertia its joint moves at the ``home`` keyframe and
    the timestep (``servo_gains``); a ``kp`` / ``kv`` / ``dampratio`` param of the
    <ros2_control> interface wins, as the real drive's tuning would."""
    model, data = _at_home(spec)
    for kind in ('position', 'velocity'):
        acts = [a for a in range(model.nu) if model.actuator(a).name in built
                and built[model.actuator(a).name][0] == kind]
        if not acts:
            continue
        dofs = [int(model.jnt_dofadr[model.actuator_trnid[a, 0]]) for a in acts]
        efforts = [built[model.actuator(a).name][2] for a in acts]
        if kind == 'position':
            ratio = [float(built[model.actuator(a).name][1].get('dampratio', 1.0))
                     for a in acts]
            kps, kvs, inertia = servo_gains.servo_gains(model, data, dofs, efforts, ratio)
            for i, a in enumerate(acts):
                params = built[model.actuator(a).name][1]
                kp = float(params.get('kp', kps[i]))
                kv = float(params.get('kv', kvs[i] if 'kp' not in params else
                                      ratio[i] * 2.0 * np.sqrt(kp * inertia[i])))
                spec.actuators[a].set_to_position(kp=kp, kv=kv)
                if 'kp' not in params and 'kv' not in params:
                    e = efforts[i]
                    cap = e / servo_gains.FULL_EFFORT_AT if e and e > 0 else np.inf
                    servo_gains.mark(spec, model.actuator(a).name, cap, ratio[i])
        else:
            kvs = servo_gains.velocity_gains(model, data, dofs, efforts)
            for i, a in enumerate(acts):
                name = model.actuator(a).name
                if name in wheels:       # a wheel drives its share of the robot's mass too
                    kvs[i] = mobile_base.wheel_gains(
                        model, data, [dofs[i]], [efforts[i]],
                        [mobile_base.wheel_radius(model, data, name)])[0]
                params = built[model.actuator(a).name][1]
                spec.actuators[a].set_to_velocity(kv=float(params.get('kv', kvs[i])))


WEIGHT_SHARE = 0.8   # a drive carries its links' weight when that takes at most this share


GRAVITY_SAMPLES = 64  # poses over which a joint's worst holding torque is taken


def _worst_gravity_torque(model):
    """Per dof, the largest torque gravity asks of it at ``home`` and over
    GRAVITY_SAMPLES poses drawn within the joint ranges (seeded: the same model gives the
    same answer)."""
    data = mujoco.MjData(model)
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, 'home')
    home = model.key_qpos[key].copy() if key >= 0 else model.qpos0.copy()
    rng = np.random.default_rng(0)
    tau = np.empty(model.nv)
    worst = np.zeros(model.nv)
    movable = view(model).one_dof_ids()
    for k in range(GRAVITY_SAMPLES + 1):
        data.qpos[:] = home
        if k:
            for j in movable:
                lo, hi = model.jnt_range[j] if model.jnt_limited[j] else (-np.pi, np.pi)
                data.qpos[model.jnt_qposadr[j]] = rng.uniform(lo, hi)
        data.qvel[:] = 0.0
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_comVel(model, data)
        data.qacc[:] = 0.0
        mujoco.mj_rne(model, data, 0, tau)
        worst = np.maximum(worst, np.abs(tau))
    return worst


def _drives_carry_weight(spec: mujoco.MjSpec, built: _Built, notes: list[str]) -> None:
    """The servo joints' drives carry their links' weight (``actgravcomp``): the
    compensation is actuator force, so effort in joint_states is the holding torque,
    within the joint's effort limit. A joint whose effort limit is below what holding
    it takes somewhere in its range (a PR2 shoulder: the real one has a spring
    counterbalance the URDF leaves out) keeps the compensation passive, noted, rather than
    sag there."""
    model = spec.compile()
    need_all = _worst_gravity_torque(model)
    passive = []
    for name, (kind, _params, effort) in built.items():
        if kind not in ('position', 'velocity'):
            continue
        need = float(need_all[model.jnt_dofadr[model.joint(name).id]])
        if effort and need > WEIGHT_SHARE * effort:
            passive.append(f'{name} ({need:.3g} of {effort:g} N m)')
            continue
        spec.joint(name).actgravcomp = True
    if passive:
        notes.append('holding these joints somewhere in their range takes more than '
                     f'{WEIGHT_SHARE:.0%} of their effort limit, so their links\' weight is '
                     'carried passively (a counterbalance): ' + ', '.join(passive))


def _armature_floor(spec: mujoco.MjSpec, notes: list[str]) -> None:
    """Armature for joints that move almost nothing: massless links (URDF links with no
    <inertial>, raised to ``MIN_MASS``) on a mimic chain or a fingertip are ill-conditioned
    at a 2 ms step (an equality on a 1e-9 kg m^2 link spun it at thousands of rad/s), and
    every real joint carries its drive's rotor inertia anyway. Noted per joint."""
    model, data = _at_home(spec)
    mujoco.mj_forward(model, data)
    full = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, full)
    raised = []
    for j in range(model.njnt):
        if not is_one_dof(model, j):
            continue
        kind = KIND_NAME[int(model.jnt_type[j])]
        dof = model.jnt_dofadr[j]
        short = MIN_JOINT_INERTIA[kind] - full[dof, dof]
        if short > 0:
            joint = spec.joint(model.joint(j).name)
            joint.armature = float(joint.armature) + float(short)
            raised.append(f'{model.joint(j).name} ({full[dof, dof]:.2g})')
    if raised:
        notes.append(f'joints moving less than {MIN_JOINT_INERTIA["hinge"]:g} kg m^2 '
                     f'({MIN_JOINT_INERTIA["slide"]:g} kg on a slide) get armature up to it: '
                     + ', '.join(raised))


def _no_self_collision(spec: mujoco.MjSpec) -> None:
    """As Gazebo does for a model unless it asks for ``self_collide``: the robot's links
    collide with the world and whatever is spawned into it, not with each other (URDF
    collision meshes of neighbouring links often overlap; MoveIt's SRDF keeps the planned
    paths clear of self-contact anyway). contype 2 / conaffinity 1 against the default
    1 / 1 of every other geom does exactly that."""
    for geom in spec.geoms:
        if geom.contype or geom.conaffinity:
            geom.contype, geom.conaffinity = 2, 1


def _log_mass_repairs(root: ET.Element, model: mujoco.MjModel, notes: list[str]) -> None:
    """A note for each link whose mass MuJoCo had to raise (missing or below
    ``MIN_MASS``), before and after."""
    for link in root.findall('link'):
        name = link.get('name')
        bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name or '')
        if bid <= 0:
            continue
        mass = link.find('inertial/mass')
        try:
            given = float(mass.get('value', '')) if mass is not None else None
        except (TypeError, ValueError):
            given = None
        got = float(model.body_mass[bid])
        if given is None and link.find('inertial') is None and \
                (link.find('collision') is not None or link.find('visual') is not None):
            continue          # the importer derives inertia from the geometry: not a repair
        if given is None or got > given * (1 + 1e-9) + 1e-12:
            notes.append(f'{name}: mass {given if given is not None else "missing"} kg -> '
                         f'{got:.3g} kg (every moving link needs mass; boundmass)')


def _compile_lenient(spec, notes):
    """Compile; a mesh too thin for a volume (a flat plate) gets shell inertia instead."""
    try:
        return spec.compile()
    except ValueError as err:
        if 'volume is too small' not in str(err):
            raise
    for mesh in spec.meshes:
        mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL
    notes.append('meshes too thin for a volume: shell inertia for the geoms')
    return spec.compile()


def _with_balanced_inertia(xml):
    """MjSpec.to_xml leaves ``balanceinertia`` out of <compiler>; the inertias a URDF
    without <inertial> gets from its meshes can need it, so it goes back in."""
    root = ET.fromstring(xml)
    compiler = root.find('compiler')
    if compiler is None:
        compiler = ET.Element('compiler')
        root.insert(0, compiler)
    compiler.set('balanceinertia', 'true')
    for text in root.iterfind('custom/text'):
        # MuJoCo writes a text's data as CDATA, which ElementTree turns into plain element
        # text that MuJoCo's reader refuses; as the data attribute it reads back the same
        if text.get('data') is None and text.text:
            text.set('data', text.text)
            text.text = None
    return ET.tostring(root, encoding='unicode')


def _add_home(spec: mujoco.MjSpec, off_limits: float = 0.0) -> None:
    """Keyframe ``home``: every joint at 0 moved into its range (a URDF's zero pose can lie
    outside it, Panda's joint4 does), position servos aimed there. ``off_limits``: the
    share of its range a joint starts away from a limit it sits on (a free base: a
    TIAGo's torso resting on its lower stop while its drive holds the body up fought the
    stop's constraint into a blow-up once the base rocked on its wheels)."""
    model = spec.compile()
    qpos = model.qpos0.copy()
    for j in range(model.njnt):
        if model.jnt_limited[j] and is_one_dof(model, j):
            adr = model.jnt_qposadr[j]
            lo, hi = model.jnt_range[j]
            if not lo <= qpos[adr] <= hi:
                qpos[adr] = 0.5 * (lo + hi)
            gap = off_limits * (hi - lo)
            qpos[adr] = min(max(qpos[adr], lo + gap), hi - gap)
    for e in range(model.neq):     # mimic joints where their equality puts them
        if int(model.eq_type[e]) == int(mujoco.mjtEq.mjEQ_JOINT) and model.eq_obj2id[e] >= 0:
            follower = model.jnt_qposadr[model.eq_obj1id[e]]
            leader = qpos[model.jnt_qposadr[model.eq_obj2id[e]]]
            qpos[follower] = np.polyval(model.eq_data[e, 4::-1], leader)
    ctrl = np.zeros(model.nu)
    for a in range(model.nu):
        if int(model.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_AFFINE) and \
                model.actuator_biasprm[a, 1] != 0:
            ctrl[a] = qpos[model.jnt_qposadr[model.actuator_trnid[a, 0]]]
    key = spec.add_key()
    key.name, key.qpos, key.ctrl = 'home', qpos, ctrl


def _wheels(model, root, commands, drives, continuous):
    """The drive wheels: the velocity joints a drive controller names; else continuous
    joints with a ``<ros2_control>`` velocity interface; else (no ``<ros2_control>``) at
    least two continuous joints with level axles whose own links touch the ground."""
    named = [j for j, kind in drives.items() if kind == 'velocity']
    if named:
        return named
    if commands:
        return [j for j in continuous if commands.get(j, {}).get('kind') == 'velocity']
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    level = []
    for name in mobile_base.touching_wheels(model, continuous):
        j = model.joint(name).id
        if abs(float(data.xaxis[j][2])) < 0.1:
            level.append(name)
    return level if len(level) >= 2 else []


def _look_at(pos, target):
    f = np.asarray(target, float) - pos
    f /= np.linalg.norm(f)
    x = np.cross(f, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    return np.concatenate([x, np.cross(x, f)])


def _default_scene(spec: mujoco.MjSpec, floating: bool = False) -> None:
    """Floor, light and an ``overview`` camera framing the robot's bounding sphere. The
    floor is at the robot's base (z = 0), or just below whatever hangs lower at ``home``
    (an arm whose zero pose reaches down, a legged robot fixed by its root link)."""
    model, data = _at_home(spec)
    mujoco.mj_kinematics(model, data)
    floor_z = min(0.0, mobile_base.lowest_point(model, data) - FLOOR_CLEARANCE)
    if floating:                 # a free base stands on its wheels from the first step
        floor_z = mobile_base.floor_height(model, data)
    world = spec.worldbody
    floor = world.add_geom()
    floor.name, floor.type = 'floor', mujoco.mjtGeom.mjGEOM_PLANE
    floor.size = [0.0, 0.0, 0.05]
    floor.pos = [0.0, 0.0, floor_z]
    floor.rgba = [0.75, 0.75, 0.75, 1.0]
    light = world.add_light()
    light.name, light.pos, light.dir = 'top', [0.0, 0.0, 3.0], [0.0, 0.0, -1.0]
    centre = data.xpos[1:].mean(axis=0) if model.nbody > 1 else np.zeros(3)
    reach = max(0.5, float(np.max(np.linalg.norm(data.xpos[1:] - centre, axis=1),
                                  initial=0.0)) * 3.0)
    cam = world.add_camera()
    cam.name = 'overview'
    cam.pos = centre + np.array([reach, -reach, 0.6 * reach])
    cam.alt.xyaxes = _look_at(cam.pos, centre)


def model_from_urdf(urdf: str, scene: str | None = None, package_roots: Sequence[str] = (),
                    base_dir: str | None = None, cache_dir: str | None = None,
                    gravcomp: bool = True, self_collide: bool = False, bare: bool = False,
                    base: str = 'auto', drives: Mapping[str, str | None] | None = None
                    ) -> tuple[str, list[str]]:
    """(MJCF path, notes): the robot of ``urdf`` (text) ready to simulate, in the default
    scene or attached to the world of the MJCF file ``scene``; ``bare``: the robot alone,
    to be spawned into a world that has its own floor and lights. ``base``: ``auto``,
    ``fixed`` or ``floating`` (``mobile_base``); ``drives``: joint -> ``velocity`` or
    ``position`` for the joints a drive controller commands (``mobile.config``)."""
    base = mobile_base.check_base(base)
    drives = dict(drives or {})
    # What robot_state_publisher's parser (TinyXML2 on the C string) takes, this takes too:
    # blank lines before the XML declaration (pybullet's biped2d), and the text up to a
    # NUL (pybullet's humanoid ends in one).
    urdf = urdf.split('\0', 1)[0].strip() if isinstance(urdf, str) else urdf
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as err:
        raise ModelError(f'robot_description is not valid XML: {err}',
                         where='robot_description') from None
    if root.tag != 'robot':
        raise ModelError(f'robot_description must be a URDF <robot>, got <{root.tag}>',
                         where='robot_description')
    xacro = _unexpanded_xacro(root)
    if xacro:
        raise ModelError(f'robot_description still holds xacro: {xacro}; give the output '
                         'of `xacro file.urdf.xacro` (what robot_state_publisher gets), '
                         'not the source', where='robot_description')
    notes: list[str] = []
    commands = ros2_control_joints(root)
    friction = mobile_base.gazebo_friction(root)      # before _prepare drops <gazebo>
    continuous = mobile_base.continuous_joints(root)
    limits = _urdf_limits(root)
    followers = _followers(root)
    own_option = root.find('mujoco/option')
    own_integrator = own_option is not None and own_option.get('integrator')
    folder = cache_dir or default_cache_dir()
    # the sensors the <gazebo> and <ros2_control> tags declare, read before _prepare
    # removes those tags (MuJoCo's importer does not read them)
    sensors, sensor_notes = gazebo_sensors.parse(root)
    notes.extend(f'sensors: {n}' for n in sensor_notes)
    _prepare(root, tuple(package_roots), base_dir, folder, notes)
    try:
        robot = mujoco.MjSpec.from_string(ET.tostring(root, encoding='unicode'))
        # the URDF's <compiler> applies while parsing; these must hold for every compile
        robot.compiler.balanceinertia = True
        robot.compiler.boundmass = max(robot.compiler.boundmass, MIN_MASS)
        robot.compiler.boundinertia = max(robot.compiler.boundinertia, MIN_INERTIA)
        for name in followers:
            # A mimic joint goes where its leader puts it, as ros2_control's mimic joints
            # do; its own range (often narrower, or the other sign) would fight the equality
            # and hold the leader back.
            joint = robot.joint(name)
            if joint is not None:
                joint.limited = mujoco.mjtLimited.mjLIMITED_FALSE
        for eq in robot.equalities:
            # the mimic coupling as stiff as the step allows (MuJoCo's default 0.02 s time
            # constant is slower than the servos, and the chain swings against them)
            if eq.type == mujoco.mjtEq.mjEQ_JOINT:
                eq.solref = [2.0 * robot.option.timestep, 1.0]
        if not own_integrator:
            # servo damping solved implicitly: a stiff servo on a light link stays stable
            robot.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        model = _compile_lenient(robot, notes)
        _log_mass_repairs(root, model, notes)
    except Exception as err:  # noqa: BLE001 - MuJoCo's importer raises ValueError and more
        raise ModelError(f'MuJoCo could not import the URDF: {err}',
                         where='robot_description') from None
    wheels = _wheels(model, root, commands, drives, continuous)
    floating = mobile_base.decide(base, root, wheels)
    if floating:
        mobile_base.free_base(robot, notes)
        if own_option is None or not own_option.get('cone'):
            # A base on wheels and casters is an over-constrained contact set: with pyramidal
            # cones the solver's default iterations left TIAGo's casters with 30 kN each
            # (the robot leapt off the floor); elliptic cones solve it (and model the tyre's
            # friction circle)
            robot.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
        for joint in wheels:
            drives.setdefault(joint, 'velocity')
        mobile_base.tyre_friction(robot, friction, wheels, notes)
        notes.append(f'drive wheels (velocity servos): {", ".join(wheels) or "none"}')
        passive = mobile_base.casters(model, continuous,
                                      [j for j in continuous if j in drives or j in commands])
        for joint in passive:        # casters roll where the base pushes them
            drives[joint] = None
        if passive:
            notes.append(f'casters (passive, no actuator): {", ".join(passive)}')
    # A free base must carry its arm's weight to the floor: body gravcomp would lift it
    # through the free joint too, so a mobile robot's arm holds itself as a position-mode
    # drive does (the stepper's hold feed-forward), not by weightless links.
    gravcomp = gravcomp and not floating
    if gravcomp:
        for body in robot.bodies[1:]:
            body.gravcomp = 1.0
    if not self_collide:
        _no_self_collision(robot)
    try:
        mounted = sensor_mounts.mount(robot, model, sensors, notes)
        if mounted:
            notes.append('sensors: ' + ', '.join(f'{d.name} ({d.kind} on {d.link})'
                                                 for d in mounted))
        built = _add_actuators(robot, commands, limits, followers, notes, overrides=drives)
        _add_home(robot, off_limits=0.02 if floating else 0.0)
        if gravcomp:
            _drives_carry_weight(robot, built, notes)
        _armature_floor(robot, notes)
        _size_gains(robot, built, wheels=set(wheels))
        mobile_base.mark_wheels(robot, [w for w in wheels
                                        if built.get(w, ('',))[0] == 'velocity'])
    except ValueError as err:
        raise ModelError(f'the model built from the URDF does not compile: {err}',
                         where='robot_description') from None
    if scene:
        try:
            spec = mujoco.MjSpec.from_file(scene)
        except Exception as err:  # noqa: BLE001
            raise ModelError(f'scene {scene}: {err}', where='scene') from None
        with warnings.catch_warnings():
            # names stay the URDF's (the TF frames); a clash is refused by compile() below
            warnings.filterwarnings('ignore', message='Attaching a spec with an empty prefix')
            spec.attach(robot, frame=spec.worldbody.add_frame(), prefix='')
    else:
        spec = robot
        if not bare:
            _default_scene(spec, floating=floating)
    try:
        spec.compile()
        with warnings.catch_warnings():
            warnings.filterwarnings('ignore', message='Attaching a spec with an empty prefix')
            xml = _with_balanced_inertia(spec.to_xml())
    except Exception as err:  # noqa: BLE001
        raise ModelError(f'the model built from the URDF does not compile: {err}',
                         where='robot_description') from None
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, hashlib.sha1(xml.encode()).hexdigest()[:16] + '.xml')
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=folder, suffix='.tmp')
        with os.fdopen(fd, 'w', encoding='utf-8') as out:
            out.write(xml)
        os.replace(tmp, path)
    return path, notes
