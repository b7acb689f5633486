"""Pixel to world: camera pixels back-projected through the depth buffer.

A depth image holds the distance along the optical axis, so pixel (u, v) with depth z is
``z * ((u - cx) / fx, (v - cy) / fy, 1)`` in the ROS optical frame, then world by the
optical frame's pose. Pixels that see nothing hold the far clipping distance, which is no
surface at all, so they are refused rather than turned into a point on the far plane.
"""

from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from ..checks import finite_number, is_bool
from ..errors import InvalidArgument, shorten

MAX_PIXELS = 4096
FAR_MARGIN = 0.999   # depths this close to the far plane are the background


def check_pixels(pixels: Any, width: int, height: int) -> np.ndarray:
    """``[(u, v), ...]`` as an (n, 2) float array inside the image."""
    if isinstance(pixels, (str, bytes)) or is_bool(pixels):
        raise InvalidArgument(f'expected pixel pairs, got {shorten(pixels)}', where='pixels')
    try:
        items = list(pixels)
    except TypeError:
        raise InvalidArgument(f'expected pixel pairs, got {shorten(pixels)}',
                              where='pixels') from None
    if not 1 <= len(items) <= MAX_PIXELS:
        raise InvalidArgument(f'expected 1..{MAX_PIXELS} pixels, got {len(items)}',
                              where='pixels')
    out = np.empty((len(items), 2))
    for i, item in enumerate(items):
        try:
            pair = list(item)
        except TypeError:
            raise InvalidArgument(f'expected a (u, v) pair, got {shorten(item)}',
                                  where=f'pixels[{i}]') from None
        if len(pair) != 2:
            raise InvalidArgument(f'expected 2 values, got {len(pair)}', where=f'pixels[{i}]')
        u = finite_number(pair[0], f'pixels[{i}].u')
        v = finite_number(pair[1], f'pixels[{i}].v')
        if not (0 <= u <= width - 1 and 0 <= v <= height - 1):
            raise InvalidArgument(f'({u:g}, {v:g}) is outside the image',
                                  where=f'pixels[{i}]',
                                  allowed=f'u 0..{width - 1}, v 0..{height - 1}')
        out[i] = (u, v)
    return out


def far_plane(model: mujoco.MjModel) -> float:
    return float(model.vis.map.zfar * model.stat.extent)


def to_world(depth: np.ndarray, intrinsics: Sequence[float], position: np.ndarray,
             rotation: np.ndarray, pixels: np.ndarray, far: float) -> np.ndarray:
    """(n, 3) world points of ``pixels`` (checked) in ``depth``; refuses background pixels.

    Depth is read at the nearest pixel centre: interpolating across an edge would invent a
    surface between the foreground and the background.
    """
    fx, fy, cx, cy = intrinsics
    h, w = depth.shape
    cols = np.clip(np.rint(pixels[:, 0]).astype(int), 0, w - 1)
    rows = np.clip(np.rint(pixels[:, 1]).astype(int), 0, h - 1)
    z = depth[rows, cols].astype(np.float64)
    for i, value in enumerate(z):
        if not np.isfinite(value) or value <= 0:
            raise InvalidArgument(f'pixel {tuple(pixels[i])} has no valid depth',
                                  where=f'pixels[{i}]')
        if value >= far * FAR_MARGIN:
            raise InvalidArgument(f'pixel {tuple(pixels[i])} sees nothing (far plane)',
                                  where=f'pixels[{i}]', allowed='pixels on a surface')
    optical = np.stack([(pixels[:, 0] - cx) / fx * z, (pixels[:, 1] - cy) / fy * z, z], 1)
    return optical @ np.asarray(rotation).T + np.asarray(position)
