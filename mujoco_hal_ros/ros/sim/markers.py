"""The model's geoms as a latched MarkerArray, each in its body's TF frame.

With these and /tf, rviz shows the scene with no URDF: every marker is ``frame_locked`` in
its body frame, so it moves with the body as TF updates. Geoms in groups 0-2 are drawn, as
MuJoCo's viewer does by default (Menagerie puts collision geoms in group 3). Meshes become
TRIANGLE_LISTs from the compiled vertices and faces, which already carry the mesh scale and
sit in the geom frame. The other geoms (groups 3-5: Menagerie's collision shapes, often
made invisible) go to a second array, drawn in one colour, as rviz's RobotModel offers
its collision geometry: off until asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import mujoco
import numpy as np
from visualization_msgs.msg import Marker, MarkerArray

from .. import conversions as cv

if TYPE_CHECKING:                      # types only: no import at run time
    from numpy.typing import ArrayLike

    from .tf import FrameTree

VISIBLE_GROUPS = 3
INFINITE_PLANE = 5.0          # metres drawn for a plane with a zero (infinite) size
PLANE_THICKNESS = 0.001
DEFAULT_RGBA = np.array([0.5, 0.5, 0.5, 1.0], dtype=np.float32)
COLLISION_RGBA = np.array([0.9, 0.45, 0.1, 0.6])


def geom_rgba(model: mujoco.MjModel, g: int) -> np.ndarray:
    """The colour MuJoCo draws: the material's unless the geom sets its own rgba."""
    rgba = np.array(model.geom_rgba[g], dtype=float)
    mat = int(model.geom_matid[g])
    if mat >= 0 and np.allclose(rgba, DEFAULT_RGBA):
        rgba = np.array(model.mat_rgba[mat], dtype=float)
    return rgba


def _marker(frame, ns, mid, mtype, pos, wxyz, scale, rgba):
    m = Marker()
    m.header.frame_id = frame
    m.ns = ns
    m.id = mid
    m.type = mtype
    m.action = Marker.ADD
    m.frame_locked = True
    m.pose.position = cv.point(pos)
    m.pose.orientation = cv.quat_ros(wxyz)
    m.scale.x, m.scale.y, m.scale.z = (float(v) for v in scale)
    m.color.r, m.color.g, m.color.b, m.color.a = (float(v) for v in rgba)
    return m


def mesh_points(model: mujoco.MjModel, mesh: int) -> np.ndarray:
    """(3 * nface, 3) triangle corners of a compiled mesh, in its geom frame."""
    v0, nv = int(model.mesh_vertadr[mesh]), int(model.mesh_vertnum[mesh])
    f0, nf = int(model.mesh_faceadr[mesh]), int(model.mesh_facenum[mesh])
    verts = model.mesh_vert[v0:v0 + nv]
    faces = model.mesh_face[f0:f0 + nf]
    return verts[faces.reshape(-1)]


def geom_markers(model: mujoco.MjModel, g: int, frame: str, rgba: ArrayLike | None = None
                 ) -> list[Marker]:
    """Markers for geom ``g``; empty for types rviz has no shape for (height fields, SDFs)."""
    gtype = mujoco.mjtGeom(int(model.geom_type[g]))
    size = model.geom_size[g]
    pos, quat = model.geom_pos[g], model.geom_quat[g]
    rgba = geom_rgba(model, g) if rgba is None else rgba
    ns = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or f'geom{g}'
    mid = 4 * g
    if gtype == mujoco.mjtGeom.mjGEOM_PLANE:
        sx = 2 * size[0] if size[0] > 0 else INFINITE_PLANE
        sy = 2 * size[1] if size[1] > 0 else INFINITE_PLANE
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, quat)
        below = np.asarray(pos) - rot.reshape(3, 3)[:, 2] * PLANE_THICKNESS / 2
        return [_marker(frame, ns, mid, Marker.CUBE, below, quat, (sx, sy, PLANE_THICKNESS),
                        rgba)]
    if gtype == mujoco.mjtGeom.mjGEOM_SPHERE:
        return [_marker(frame, ns, mid, Marker.SPHERE, pos, quat, [2 * size[0]] * 3, rgba)]
    if gtype == mujoco.mjtGeom.mjGEOM_ELLIPSOID:
        return [_marker(frame, ns, mid, Marker.SPHERE, pos, quat, 2 * size[:3], rgba)]
    if gtype == mujoco.mjtGeom.mjGEOM_BOX:
        return [_marker(frame, ns, mid, Marker.CUBE, pos, quat, 2 * size[:3], rgba)]
    if gtype in (mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_CAPSULE):
        r, h = size[0], size[1]
        out = [_marker(frame, ns, mid, Marker.CYLINDER, pos, quat, (2 * r, 2 * r, 2 * h),
                       rgba)]
        if gtype == mujoco.mjtGeom.mjGEOM_CAPSULE:
            rot = np.zeros(9)
            mujoco.mju_quat2Mat(rot, quat)
            axis = rot.reshape(3, 3)[:, 2]
            for k, sign in ((1, 1.0), (2, -1.0)):
                out.append(_marker(frame, ns, mid + k, Marker.SPHERE,
                                   np.asarray(pos) + sign * h * axis, quat, [2 * r] * 3, rgba))
        return out
    if gtype == mujoco.mjtGeom.mjGEOM_MESH and model.geom_dataid[g] >= 0:
        m = _marker(frame, ns, mid, Marker.TRIANGLE_LIST, pos, quat, (1.0, 1.0, 1.0), rgba)
        m.points = [cv.point(p) for p in mesh_points(model, int(model.geom_dataid[g])).tolist()]
        return [m]
    return []


def scene_markers(model: mujoco.MjModel, frames: FrameTree,
                  cancelled: Callable[[], bool] = lambda: False, collision: bool = False
                  ) -> MarkerArray | None:
    """Every visible geom of the model as one MarkerArray, or with ``collision`` every other
    geom (see module docstring).

    ``cancelled()`` is asked between geoms so a node shutting down need not wait for
    10^5 triangles; it then returns None.
    """
    array = MarkerArray()
    for g in range(model.ngeom):
        if cancelled():
            return None
        visible = model.geom_group[g] < VISIBLE_GROUPS and geom_rgba(model, g)[3] > 0
        if visible == collision:
            continue
        frame = frames.body_frames[model.geom_bodyid[g]]
        array.markers.extend(geom_markers(model, g, frame, COLLISION_RGBA if collision
                                          else None))
    return array
