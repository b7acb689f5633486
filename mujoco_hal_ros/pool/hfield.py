"""Bilinear height-field sampling around a body, batched over environments.

MuJoCo collides against two triangles per grid cell, but a terrain-aware planner wants a
smooth, cheap lookup of "ground height under this offset"; bilinear interpolation of the
stored grid is exact on planes and at grid vertices, which is what the tests pin down (checked
against ``mj_ray`` on the real hfield geom). Points outside the field come back as NaN rather
than a clamped edge height so a caller cannot mistake "off the map" for flat ground.
"""

from typing import Any

import mujoco
import numpy as np

from ..errors import InvalidArgument

FRAMES = ('world', 'body', 'yaw')


def grid(model: mujoco.MjModel, hfield_id: int) -> tuple[np.ndarray, tuple[float, float]]:
    """``(heights (nrow, ncol) in metres above the geom origin, half extents (sx, sy))``."""
    nrow = int(model.hfield_nrow[hfield_id])
    ncol = int(model.hfield_ncol[hfield_id])
    adr = int(model.hfield_adr[hfield_id])
    size = model.hfield_size[hfield_id]
    data = np.asarray(model.hfield_data[adr:adr + nrow * ncol], dtype=np.float64)
    return data.reshape(nrow, ncol) * size[2], (float(size[0]), float(size[1]))


def geom_of(model: mujoco.MjModel, hfield_id: int) -> int | None:
    """The first geom that instantiates the height field (it carries the world pose)."""
    for g in range(model.ngeom):
        if (model.geom_type[g] == mujoco.mjtGeom.mjGEOM_HFIELD
                and model.geom_dataid[g] == hfield_id):
            return g
    return None


def to_world_xy(points: np.ndarray, frame: str, body_pos: Any, body_mat: Any) -> np.ndarray:
    """Offsets ``(m, 2|3)`` to world xy ``(n, m, 2)`` given per-env body poses ``(n, 3|9)``.

    'body' applies the full body rotation (a tilted trunk looks at tilted offsets); 'yaw' uses
    only the heading, the usual choice for a legged robot's terrain scan.
    """
    n = body_pos.shape[0]
    if frame == 'world':
        return np.broadcast_to(points[None, :, :2], (n, points.shape[0], 2))
    p3 = np.zeros((points.shape[0], 3))
    p3[:, :points.shape[1]] = points
    mats = body_mat.reshape(n, 3, 3)
    if frame == 'body':
        world = body_pos[:, None, :] + np.einsum('nij,mj->nmi', mats, p3)
        return world[:, :, :2]
    yaw = np.arctan2(mats[:, 1, 0], mats[:, 0, 0])
    c, s = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    x = body_pos[:, None, 0] + c * p3[None, :, 0] - s * p3[None, :, 1]
    y = body_pos[:, None, 1] + s * p3[None, :, 0] + c * p3[None, :, 1]
    return np.stack([x, y], axis=-1)


def sample(heights: np.ndarray, half: tuple[float, float], world_xy: np.ndarray,
           geom_pos: np.ndarray, geom_mat: np.ndarray) -> np.ndarray:
    """World z of the bilinear surface under ``world_xy (n, m, 2)``; NaN outside the grid.

    The geom may be yawed and shifted but not tilted: a tilted field has no single "height
    under a point", so it is refused.
    """
    n = world_xy.shape[0]
    mats = geom_mat.reshape(n, 3, 3)
    if np.any(np.abs(mats[:, 2, 2] - 1.0) > 1e-9):
        raise InvalidArgument('height field geom is tilted; heights along world z are '
                              'undefined', where='hfield', allowed='hfield geoms whose z axis '
                              'is the world z axis')
    rel = world_xy - geom_pos[:, None, :2]
    # local = R^T rel, using the xy block of the geom rotation
    lx = mats[:, None, 0, 0] * rel[..., 0] + mats[:, None, 1, 0] * rel[..., 1]
    ly = mats[:, None, 0, 1] * rel[..., 0] + mats[:, None, 1, 1] * rel[..., 1]
    nrow, ncol = heights.shape
    sx, sy = half
    u = (lx + sx) / (2.0 * sx) * (ncol - 1)
    v = (ly + sy) / (2.0 * sy) * (nrow - 1)
    eps = 1e-12
    inside = (u >= -eps) & (u <= ncol - 1 + eps) & (v >= -eps) & (v <= nrow - 1 + eps)
    u = np.clip(u, 0.0, ncol - 1)
    v = np.clip(v, 0.0, nrow - 1)
    c0 = np.minimum(np.floor(u).astype(np.intp), max(ncol - 2, 0))
    r0 = np.minimum(np.floor(v).astype(np.intp), max(nrow - 2, 0))
    c1 = np.minimum(c0 + 1, ncol - 1)
    r1 = np.minimum(r0 + 1, nrow - 1)
    fu = u - c0
    fv = v - r0
    h = ((1 - fv) * ((1 - fu) * heights[r0, c0] + fu * heights[r0, c1])
         + fv * ((1 - fu) * heights[r1, c0] + fu * heights[r1, c1]))
    out = geom_pos[:, None, 2] + h
    out[~inside] = np.nan
    return out
