"""A URDF for any MuJoCo model, so rviz's RobotModel and MoveIt have a robot_description.

Links are the bodies, under the frame names /tf uses (``frames.body_frame_names``), so the
URDF and the published TF tree agree by construction. A body's joints become URDF joints
in MuJoCo's order: hinge -> ``revolute`` (``continuous`` when unlimited), slide ->
``prismatic``; a body with no joint hangs on its parent by a ``fixed`` joint. A hinge whose
anchor (``jnt_pos``) is off the body origin is expressed exactly by an extra link
``<body>__<joint>`` at the anchor and a fixed joint back to the body origin; /tf carries
the body frames only, so that extra link has no visuals. A free joint becomes ``floating``
and a ball joint ``fixed`` at its reference orientation: URDF has nothing better, and
robot_state_publisher ignores both, while /tf still carries the true pose of the body.

Limits: ``lower``/``upper`` from the joint range (prismatic joints without a range get
+-1e3 m, since URDF requires one); ``effort`` from the actuator's force range (or the
joint's actuator force range, or a motor's gain times its control range; 0 when nothing
bounds it); ``velocity`` from a velocity actuator's control range or ``velocity_limits``
(MuJoCo has no joint velocity limit; 0 = unknown, which MoveIt's joint_limits.yaml then
has to give, as for a real arm).

Inertia: each body's mass, centre of mass and principal inertia, so a MuJoCo model built
back from this URDF has the same dynamics. Geometry: a visual for each geom MuJoCo's viewer
shows by default (groups 0-2), a collision for each geom that collides (contype or
conaffinity). Sphere, box and cylinder map directly; a capsule is its cylinder plus two end
spheres; a plane is a thin box; an ellipsoid is a unit sphere mesh scaled; meshes are
written once as binary STL (from the compiled ``mesh_vert``/``mesh_face``, already scaled
and centred as the geom expects) into ``mesh_dir`` and referenced by ``file://``. Height
fields and SDFs are left out, and so are the world body's own geoms (floor, walls): they
are the scene, not the robot, and a floor inside the robot would be a collision object to
MoveIt; ``scene_markers`` shows them.
"""

from collections.abc import Sequence
import hashlib
import math
import os
import tempfile
from typing import Any
from xml.sax.saxutils import quoteattr

import mujoco
import numpy as np

from ..joint_view import BALL, FREE, HINGE, ONE_DOF, SLIDE, view
from .frames import body_frame_names

_OBJ = mujoco.mjtObj
_G = mujoco.mjtGeom
PRISMATIC_UNBOUNDED = 1e3      # metres: URDF requires prismatic limits
VISIBLE_GROUPS = 3             # MuJoCo's viewer shows groups 0, 1 and 2 by default


def default_mesh_dir() -> str:
    """Where generated meshes go: the XDG cache, shared by every node on the machine."""
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'),
                                                            '.cache')
    return os.path.join(base, 'mujoco_hal_ros', 'meshes')


def _f(v: float) -> str:
    return f'{float(v):.17g}'


def _vec(v):
    return ' '.join(_f(x) for x in v)


def quat_to_rpy(wxyz: Sequence[float] | np.ndarray) -> tuple[float, float, float]:
    """URDF's fixed-axis roll, pitch, yaw (R = Rz(yaw) Ry(pitch) Rx(roll)) of a quaternion."""
    m = np.empty(9)
    q = np.asarray(wxyz, dtype=float)
    mujoco.mju_quat2Mat(m, q / np.linalg.norm(q))
    r = m.reshape(3, 3)
    pitch = math.atan2(-r[2, 0], math.hypot(r[2, 1], r[2, 2]))
    if math.hypot(r[2, 1], r[2, 2]) < 1e-12:       # gimbal lock: put it all in yaw
        return 0.0, pitch, math.atan2(-r[0, 1], r[1, 1])
    return math.atan2(r[2, 1], r[2, 2]), pitch, math.atan2(r[1, 0], r[0, 0])


def _origin(pos: Sequence[float] | np.ndarray, quat: Sequence[float] | np.ndarray) -> str:
    return f'<origin xyz="{_vec(pos)}" rpy="{_vec(quat_to_rpy(quat))}"/>'


def _compose(pos_a, quat_a, pos_b, quat_b):
    pos, quat = np.empty(3), np.empty(4)
    mujoco.mju_mulPose(pos, quat, np.asarray(pos_a, float), np.asarray(quat_a, float),
                       np.asarray(pos_b, float), np.asarray(quat_b, float))
    return pos, quat


def write_stl(path: str, vertices: np.ndarray, faces: np.ndarray) -> None:
    """Binary STL of a triangle mesh, written atomically (readers never see half a file)."""
    tri = vertices[faces]                                     # (n, 3, 3)
    normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    lengths = np.linalg.norm(normals, axis=1, keepdims=True)
    normals = np.divide(normals, lengths, out=np.zeros_like(normals), where=lengths > 0)
    rec = np.zeros(len(faces), dtype=[('n', '<f4', 3), ('v', '<f4', (3, 3)), ('a', '<u2')])
    rec['n'], rec['v'] = normals, tri
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix='.tmp')
    with os.fdopen(fd, 'wb') as out:
        out.write(b'mujoco_hal_ros'.ljust(80, b' '))
        out.write(np.uint32(len(faces)).tobytes())
        out.write(rec.tobytes())
    os.replace(tmp, path)


def _unit_sphere(n: int = 16) -> tuple[np.ndarray, np.ndarray]:
    lat, lon = np.linspace(0, np.pi, n + 1), np.linspace(0, 2 * np.pi, 2 * n + 1)[:-1]
    v = np.array([[math.sin(a) * math.cos(b), math.sin(a) * math.sin(b), math.cos(a)]
                  for a in lat for b in lon])
    m = 2 * n
    faces = []
    for i in range(n):
        for j in range(m):
            a, b = i * m + j, i * m + (j + 1) % m
            faces += [[a, a + m, b], [b, a + m, b + m]]
    return v, np.asarray(faces)


class _Meshes:
    """Mesh files in a cache folder, named by content so a changed mesh is a new file."""

    def __init__(self, model, mesh_dir):
        self.model, self.dir, self.files = model, mesh_dir or default_mesh_dir(), {}

    def _file(self, key, vertices, faces):
        if key not in self.files:
            digest = hashlib.sha1(vertices.astype('<f4').tobytes()
                                  + faces.astype('<i4').tobytes()).hexdigest()[:16]
            path = os.path.join(self.dir, f'{key}-{digest}.stl')
            if not os.path.exists(path):
                write_stl(path, vertices, faces)
            self.files[key] = 'file://' + path
        return self.files[key]

    def mesh(self, mesh_id):
        m = self.model
        va, vn = m.mesh_vertadr[mesh_id], m.mesh_vertnum[mesh_id]
        fa, fn = m.mesh_faceadr[mesh_id], m.mesh_facenum[mesh_id]
        name = mujoco.mj_id2name(m, _OBJ.mjOBJ_MESH, mesh_id) or f'mesh{mesh_id}'
        safe = ''.join(c if c.isalnum() or c in '-_' else '_' for c in name)
        return self._file(safe, np.asarray(m.mesh_vert[va:va + vn], float),
                          np.asarray(m.mesh_face[fa:fa + fn]))

    def sphere(self):
        return self._file('unit_sphere', *_unit_sphere())


def _shapes(model, g, meshes):
    """(pos offset along the geom's z, URDF geometry element) pieces of one geom."""
    t, s = int(model.geom_type[g]), model.geom_size[g]
    if t == _G.mjGEOM_SPHERE:
        return [(0.0, f'<sphere radius="{_f(s[0])}"/>')]
    if t == _G.mjGEOM_BOX:
        return [(0.0, f'<box size="{_vec(2 * s)}"/>')]
    if t == _G.mjGEOM_CYLINDER:
        return [(0.0, f'<cylinder radius="{_f(s[0])}" length="{_f(2 * s[1])}"/>')]
    if t == _G.mjGEOM_CAPSULE:
        ball = f'<sphere radius="{_f(s[0])}"/>'
        return [(0.0, f'<cylinder radius="{_f(s[0])}" length="{_f(2 * s[1])}"/>'),
                (float(s[1]), ball), (-float(s[1]), ball)]
    if t == _G.mjGEOM_PLANE:
        sx, sy = (float(v) if v > 0 else 50.0 for v in s[:2])
        return [(-0.0005, f'<box size="{_f(2 * sx)} {_f(2 * sy)} 0.001"/>')]
    if t == _G.mjGEOM_ELLIPSOID:
        return [(0.0, f'<mesh filename="{meshes.sphere()}" scale="{_vec(s)}"/>')]
    if t == _G.mjGEOM_MESH and model.geom_dataid[g] >= 0:
        return [(0.0, f'<mesh filename="{meshes.mesh(int(model.geom_dataid[g]))}"/>')]
    return []


def _inertial(model, b):
    """Mass, centre of mass and principal inertia (rotated by ``body_iquat``) of a body."""
    if model.body_mass[b] <= 0:
        return []
    return [f'    <inertial>{_origin(model.body_ipos[b], model.body_iquat[b])}'
            f'<mass value="{_f(model.body_mass[b])}"/>'
            f'<inertia ixx="{_f(model.body_inertia[b][0])}" ixy="0" ixz="0" '
            f'iyy="{_f(model.body_inertia[b][1])}" iyz="0" '
            f'izz="{_f(model.body_inertia[b][2])}"/></inertial>']


def _rgba(model, g):
    mat = model.geom_matid[g]
    return model.mat_rgba[mat] if mat >= 0 else model.geom_rgba[g]


def _geoms(model, body, meshes):
    out = []
    for g in range(model.body_geomadr[body], model.body_geomadr[body] + model.body_geomnum[body]):
        visual = 0 <= model.geom_group[g] < VISIBLE_GROUPS and _rgba(model, g)[3] > 0
        collides = model.geom_contype[g] != 0 or model.geom_conaffinity[g] != 0
        name = mujoco.mj_id2name(model, _OBJ.mjOBJ_GEOM, g) or f'geom{g}'
        for k, (dz, shape) in enumerate(_shapes(model, g, meshes)):
            pos, quat = _compose(model.geom_pos[g], model.geom_quat[g], (0, 0, dz), (1, 0, 0, 0))
            origin = _origin(pos, quat)
            tag = quoteattr(name if k == 0 else f'{name}_{k}')
            if visual:
                out.append(f'    <visual name={tag}>{origin}<geometry>{shape}</geometry>'
                           f'<material name={quoteattr(f"{name}_rgba")}>'
                           f'<color rgba="{_vec(_rgba(model, g))}"/></material></visual>')
            if collides:
                out.append(f'    <collision name={tag}>{origin}<geometry>{shape}</geometry>'
                           '</collision>')
    return out


def _joint_limits(model, j, velocity_limits):
    """(effort, velocity) for joint ``j`` from its actuators; 0 where nothing bounds it."""
    effort = velocity = 0.0
    name = mujoco.mj_id2name(model, _OBJ.mjOBJ_JOINT, j)
    for a in range(model.nu):
        if int(model.actuator_trntype[a]) not in (int(mujoco.mjtTrn.mjTRN_JOINT),
                                                  int(mujoco.mjtTrn.mjTRN_JOINTINPARENT)):
            continue
        if model.actuator_trnid[a, 0] != j:
            continue
        gear = abs(float(model.actuator_gear[a, 0])) or 1.0
        ctrl = float(np.max(np.abs(model.actuator_ctrlrange[a]))) \
            if model.actuator_ctrllimited[a] else 0.0
        if model.actuator_forcelimited[a]:
            effort = max(effort, gear * float(np.max(np.abs(model.actuator_forcerange[a]))))
        elif (int(model.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_NONE)
              and int(model.actuator_gaintype[a]) == int(mujoco.mjtGain.mjGAIN_FIXED)):
            effort = max(effort, gear * abs(float(model.actuator_gainprm[a, 0])) * ctrl)
        kv = float(model.actuator_gainprm[a, 0])
        if (int(model.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_AFFINE)
                and model.actuator_biasprm[a, 1] == 0 and kv > 0
                and model.actuator_biasprm[a, 2] == -kv):
            velocity = max(velocity, ctrl / gear)
    if not effort and model.jnt_actfrclimited[j]:
        effort = float(np.max(np.abs(model.jnt_actfrcrange[j])))
    if velocity_limits and name in velocity_limits:
        velocity = float(velocity_limits[name])
    return effort, velocity


def urdf_from_model(model: mujoco.MjModel, name: str | None = None, prefix: str = '',
                    world: str = 'world', mesh_dir: str | None = None,
                    velocity_limits: dict[str, float] | None = None) -> str:
    """URDF text of ``model``: link names are /tf's frame names (``prefix``, ``world``);
    joint names are joint_states' (MuJoCo's, never prefixed), as robot_state_publisher
    matches them."""
    frames = body_frame_names(model, prefix, world)
    meshes = _Meshes(model, mesh_dir)
    robot = name or model.names[:model.names.index(b'\0')].decode() or 'mujoco'
    links: dict[int, list[Any]] = {0: []}   # the world body's geoms are the scene, not the robot
    extra_links, joints = [], []
    identity = (np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))

    def fixed(parent: str, child: str, pos: Sequence[float] | np.ndarray,
              quat: Sequence[float] | np.ndarray) -> None:
        joints.append(f'  <joint name={quoteattr(f"{child}_fixed")} type="fixed">'
                      f'<parent link={quoteattr(parent)}/><child link={quoteattr(child)}/>'
                      f'{_origin(pos, quat)}</joint>')

    for b in range(1, model.nbody):
        links[b] = _inertial(model, b) + _geoms(model, b, meshes)
        parent, child = frames[model.body_parentid[b]], frames[b]
        pending = (model.body_pos[b].copy(), model.body_quat[b].copy())
        current = parent
        n = model.body_jntnum[b]
        for k, j in enumerate(range(model.body_jntadr[b], model.body_jntadr[b] + n)):
            jtype = int(model.jnt_type[j])
            jname = view(model).joints[j].label
            if jtype == BALL:
                continue        # URDF has no ball joint: fixed at the reference orientation
            anchor = model.jnt_pos[j] if jtype == HINGE else np.zeros(3)
            origin = _compose(*pending, anchor, identity[1])
            last = k == n - 1
            target = child if last and not np.any(anchor) else f'{child}__{jname}'
            if target != child:
                extra_links.append(target)
            kind = {HINGE: 'revolute', SLIDE: 'prismatic',
                    FREE: 'floating'}[jtype]
            limit = ''
            if jtype in ONE_DOF:
                effort, velocity = _joint_limits(model, j, velocity_limits)
                if model.jnt_limited[j]:
                    lo, hi = model.jnt_range[j]
                elif jtype == HINGE:
                    kind, lo, hi = 'continuous', None, None
                else:
                    lo, hi = -PRISMATIC_UNBOUNDED, PRISMATIC_UNBOUNDED
                bounds = '' if lo is None else f' lower="{_f(lo)}" upper="{_f(hi)}"'
                limit = f'<limit{bounds} effort="{_f(effort)}" velocity="{_f(velocity)}"/>'
                limit += f'<axis xyz="{_vec(model.jnt_axis[j])}"/>'
            joints.append(f'  <joint name={quoteattr(jname)} type="{kind}">'
                          f'<parent link={quoteattr(current)}/>'
                          f'<child link={quoteattr(target)}/>'
                          f'{_origin(*origin)}{limit}</joint>')
            current = target
            pending = (-np.asarray(anchor, float), identity[1].copy())
        if current != child:
            fixed(current, child, *pending)
    out = ['<?xml version="1.0"?>', f'<robot name={quoteattr(robot)}>']
    for b, geoms in links.items():
        out.append(f'  <link name={quoteattr(frames[b])}>')
        out.extend(geoms)
        out.append('  </link>')
    out.extend(f'  <link name={quoteattr(link)}/>' for link in extra_links)
    out.extend(joints)
    out.append('</robot>')
    return '\n'.join(out) + '\n'
