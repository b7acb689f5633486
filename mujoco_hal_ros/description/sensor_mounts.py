"""Declared sensors (``gazebo_sensors``) mounted on the MuJoCo model built from a URDF.

Each declaration gets what the package's existing machinery serves it from, at its link and
pose: a lidar a site (``sensors.lidar`` casts from it), a camera a MuJoCo camera looking
along the sensor's x axis as Gazebo's do (rendered by ``render.camera``, published from
its REP-103 optical frame), an IMU a site with an accelerometer, a gyro and a framequat,
a force-torque sensor a site at the child link's origin with a force and a torque sensor,
a contact sensor a box site around the link's geometry with a touch sensor. The
declarations themselves go into the model as one custom text (``TEXT_NAME``), so whoever
loads the model (sim_node, ``check_robot``) finds topics, frames, rates and noise there.
"""

from collections.abc import Sequence
import hashlib
import math
import os
import tempfile

import mujoco
import numpy as np

from .gazebo_sensors import from_json, SensorDeclaration, TEXT_NAME, to_json

CONTACT_MARGIN = 0.005    # m the contact site reaches beyond the link's geometry
# columns: the camera's x, y, z axes in the sensor frame (x forward, z up): MuJoCo cameras
# look along their -z with y up, Gazebo's along the sensor's +x with z up
CAMERA_IN_SENSOR = np.array([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


def rpy_quat(rpy: Sequence[float]) -> np.ndarray:
    """w-first quaternion of URDF/SDF roll-pitch-yaw (fixed axes x, y, z)."""
    r, p, y = (0.5 * float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = (math.cos(r), math.sin(r), math.cos(p), math.sin(p),
                              math.cos(y), math.sin(y))
    return np.array([cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy,
                     cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy])


def camera_quat(rpy: Sequence[float]) -> np.ndarray:
    """The MuJoCo camera quaternion (in the link) of a Gazebo camera posed at ``rpy``."""
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, rpy_quat(rpy))
    out = np.zeros(4)
    mujoco.mju_mat2Quat(out, (mat.reshape(3, 3) @ CAMERA_IN_SENSOR).ravel())
    return out


def fovy_degrees(horizontal_fov: float, width: int, height: int) -> float:
    """MuJoCo's vertical field of view for Gazebo's horizontal one at this aspect."""
    return math.degrees(2.0 * math.atan(math.tan(horizontal_fov / 2.0) * height / width))


def mount(spec: mujoco.MjSpec, model: mujoco.MjModel, decls: list[SensorDeclaration],
          notes: list[str]) -> list[SensorDeclaration]:
    """Add each declaration's site, camera and MuJoCo sensors to ``spec`` (``model``: the
    same robot compiled, for the links' geometry); returns those mounted, written into the
    spec as ``TEXT_NAME``."""
    mounted = []
    for d in decls:
        body = spec.body(d.link)
        if body is None:
            notes.append(f'sensor {d.name}: link {d.link!r} is no body of the model (MuJoCo '
                         'merged or dropped it); left out')
            continue
        pos, quat = np.array(d.pose[:3], float), rpy_quat(d.pose[3:])
        if d.kind in ('camera', 'depth', 'rgbd'):
            cam = body.add_camera(name=d.name, pos=pos, quat=camera_quat(d.pose[3:]))
            cam.fovy = fovy_degrees(d.horizontal_fov, d.width, d.height)
            cam.resolution = [d.width, d.height]
        elif d.kind == 'contact':
            _contact_site(spec, model, body, d)
        else:
            if d.kind == 'force_torque':     # measured where the joint holds the link
                pos, quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
                d.pose = (0.0,) * 6
            body.add_site(name=d.name, pos=pos, quat=quat, size=[0.005, 0.005, 0.005],
                          group=4)
        for suffix, kind in _MUJOCO_SENSORS.get(d.kind, ()):
            spec.add_sensor(name=f'{d.name}_{suffix}', type=kind,
                            objtype=mujoco.mjtObj.mjOBJ_SITE, objname=d.name)
        mounted.append(d)
    _clip_note(model, [d for d in mounted if d.kind in ('camera', 'depth', 'rgbd')], notes)
    _frame_notes(model, mounted, notes)
    if mounted:
        given = next((t for t in spec.texts if t.name == TEXT_NAME), None)
        if given is None:
            spec.add_text(name=TEXT_NAME, data=to_json(mounted))
        else:          # a model imported from a URDF already carries its tags' sensors
            given.data = to_json(from_json(given.data) + mounted)
    return mounted


def mount_on_file(path: str, decls: list[SensorDeclaration], folder: str) -> str:
    """The MJCF file ``path`` with ``decls`` mounted, written into ``folder`` (named by
    content) with its mesh and texture folders made absolute, so it loads from there.
    Every link must be a body of the model (the caller checks and says which)."""
    spec = mujoco.MjSpec.from_file(path)
    src = os.path.dirname(os.path.abspath(path))
    spec.meshdir = os.path.join(src, spec.meshdir) if spec.meshdir else src
    spec.texturedir = os.path.join(src, spec.texturedir) if spec.texturedir else src
    notes: list[str] = []
    mount(spec, spec.compile(), decls, notes)
    spec.compile()
    xml = spec.to_xml()
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, hashlib.sha1(xml.encode()).hexdigest()[:16] + '.xml')
    if not os.path.exists(out):
        fd, tmp = tempfile.mkstemp(dir=folder, suffix='.tmp')
        with os.fdopen(fd, 'w', encoding='utf-8') as handle:
            handle.write(xml)
        os.replace(tmp, out)
    return out


S = mujoco.mjtSensor
_MUJOCO_SENSORS = {
    'imu': (('accel', S.mjSENS_ACCELEROMETER), ('gyro', S.mjSENS_GYRO),
            ('orientation', S.mjSENS_FRAMEQUAT)),
    'force_torque': (('force', S.mjSENS_FORCE), ('torque', S.mjSENS_TORQUE)),
    'contact': (('touch', S.mjSENS_TOUCH),),
}


def _contact_site(spec: mujoco.MjSpec, model: mujoco.MjModel, body: mujoco.MjsBody,
                  d: SensorDeclaration) -> None:
    """A box site around the link's geometry (its body frame), a little larger: MuJoCo's
    touch sensor sums the normal forces of contacts inside the site's volume."""
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, d.link)
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for g in np.flatnonzero(model.geom_bodyid == bid) if bid >= 0 else ():
        centre, half = model.geom_aabb[g, :3], model.geom_aabb[g, 3:]
        corners = centre + half * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1)
                                            for z in (-1, 1)])
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, model.geom_quat[g])
        pts = model.geom_pos[g] + corners @ rot.reshape(3, 3).T
        lo, hi = np.minimum(lo, pts.min(0)), np.maximum(hi, pts.max(0))
    if not np.all(np.isfinite(lo)):
        lo, hi = np.full(3, -0.05), np.full(3, 0.05)
    body.add_site(name=d.name, type=mujoco.mjtGeom.mjGEOM_BOX, pos=(lo + hi) / 2,
                  size=(hi - lo) / 2 + CONTACT_MARGIN, group=4)


def _clip_note(model: mujoco.MjModel, cams: Sequence[SensorDeclaration],
               notes: list[str]) -> None:
    """MuJoCo clips every camera at the model's ``visual/map`` znear and zfar (fractions
    of its extent); a camera's own ``<clip>`` cannot be honoured, so say what holds."""
    if not cams:
        return
    extent = float(model.stat.extent)
    near = float(model.vis.map.znear) * extent
    far = float(model.vis.map.zfar) * extent
    for d in cams:
        if abs(d.near - near) > 1e-6 or abs(d.far - far) > 1e-6:
            notes.append(f'sensor {d.name}: <clip> {d.near:g}..{d.far:g} m: MuJoCo clips '
                         f'every camera at the model\'s {near:.3g}..{far:.3g} m '
                         '(visual/map znear, zfar)')


def _frame_notes(model: mujoco.MjModel, mounted: Sequence[SensorDeclaration],
                 notes: list[str]) -> None:
    """A sensor stamped with a frame that is another link (a URDF's own optical frame, a
    ``frame_name`` elsewhere) is published as the tag says; where that link does not sit
    where the sensor measures from (at the URDF's zero pose), say so: Gazebo publishes
    it that way too, and the stack would read the data off by that much."""
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    for d in mounted:
        camera = d.kind in ('camera', 'depth', 'rgbd')
        frame = d.frame or ('' if camera else d.link)
        fid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, frame) if frame else -1
        lid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, d.link)
        if fid < 0 or lid < 0:
            continue
        # the sensor's frame in the world (for a camera: its REP-103 optical frame)
        link_rot = data.xmat[lid].reshape(3, 3)
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, rpy_quat(d.pose[3:]))
        rot = link_rot @ rot.reshape(3, 3)
        if camera:
            rot = rot @ np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
        pos = data.xpos[lid] + link_rot @ np.array(d.pose[:3])
        off = float(np.linalg.norm(data.xpos[fid] - pos))
        turn = float(np.arccos(np.clip((np.trace(data.xmat[fid].reshape(3, 3).T @ rot) - 1)
                                       / 2, -1.0, 1.0)))
        if off > 1e-3 or turn > 1e-2:
            what = 'its optical frame (z forward, x right, y down)' if camera else 'it'
            notes.append(f'sensor {d.name}: frame {frame!r} is {off * 1e3:.0f} mm and '
                         f'{np.degrees(turn):.1f} degrees from where {what} measures from '
                         f'(<pose> in {d.link}); stamped {frame!r} as the tag says')
