"""An offscreen OpenGL target with two scenes, built on MuJoCo's public rendering API.

Why not ``mujoco.Renderer``: it holds one scene, so the next frame's scene update has to
wait until this frame is read back, and the rasteriser idles meanwhile. With two scenes a
caller fills one (``mjv_updateScene``, in its own thread) while the GL thread draws the
other, so a stream of frames keeps the rasteriser busy. Rows also stay as OpenGL reads
them, bottom row first, until someone needs them top-down: ``mujoco.Renderer`` flips every
frame through a temporary copy, while a ROS image can be serialized from the rows in
reverse order with one copy (``ros/cdr.py``).

Everything here runs on the one thread that owns the context (``camera.CameraRenderer``'s
GL thread). The depth conversion is the one ``mujoco.Renderer`` applies; the tests compare
the two pixel for pixel.
"""

from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

SCENES = 2
MAX_GEOM = 10000


@dataclass(frozen=True)
class Frame:
    """One drawn frame as OpenGL reads it: row 0 is the *bottom* row of the image.

    ``rgb``: (H, W, 3) uint8 or None; ``depth``: (H, W) float32 metres along the optical
    axis, or None.
    """

    rgb: np.ndarray | None = None
    depth: np.ndarray | None = None

    def rgb_top_down(self) -> np.ndarray | None:
        """(H, W, 3) uint8, row 0 at the top (ROS ``rgb8``); a new array."""
        return None if self.rgb is None else np.ascontiguousarray(self.rgb[::-1])

    def depth_top_down(self) -> np.ndarray | None:
        """(H, W) float32, row 0 at the top (ROS ``32FC1``); a new array."""
        return None if self.depth is None else np.ascontiguousarray(self.depth[::-1])


def _context_class():
    """The GL context class ``mujoco.Renderer`` would use (the backend chosen by
    ``gl.ensure_headless_gl``)."""
    from mujoco.rendering.classic import gl_context
    cls = getattr(gl_context, 'GLContext', None)
    if cls is None:
        raise RuntimeError('mujoco rendering is disabled (MUJOCO_GL)')
    return cls


class Offscreen:
    """A GL context of one size, its MuJoCo render context and ``SCENES`` scenes.

    Create, draw and free on the same thread.
    """

    def __init__(self, model: mujoco.MjModel, width: int, height: int, fast: bool = True,
                 scenes: int = SCENES, max_geom: int = MAX_GEOM) -> None:
        vis = model.vis.global_
        if width > vis.offwidth or height > vis.offheight:
            raise ValueError(f'{width}x{height} exceeds the offscreen buffer '
                             f'{vis.offwidth}x{vis.offheight}')
        self.width, self.height = int(width), int(height)
        self._model = model
        self._gl: Any = None        # the GL context class gl.py picks (EGL, OSMesa, GLFW)
        self._con: mujoco.MjrContext | None = None
        self.scenes = [mujoco.MjvScene(model, max_geom) for _ in range(scenes)]
        if fast:
            for scene in self.scenes:
                scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
                scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        self._rect = mujoco.MjrRect(0, 0, self.width, self.height)
        self._gl = _context_class()(self.width, self.height)
        self._gl.make_current()
        self._con = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150.value)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, self._con)
        self._con.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        extent = model.stat.extent
        self._znear = np.float32(model.vis.map.znear * extent)
        self._zfar = np.float32(model.vis.map.zfar * extent)

    def draw(self, scene: mujoco.MjvScene, rgb: bool = True, depth: bool = False) -> 'Frame':
        """Draw ``scene`` (already updated) and read it back: a ``Frame``."""
        if self._con is None:
            raise RuntimeError('draw after free')
        self._gl.make_current()
        image = distance = None
        if rgb:
            mujoco.mjr_render(self._rect, scene, self._con)
            image = np.empty((self.height, self.width, 3), np.uint8)
            mujoco.mjr_readPixels(image, None, self._rect, self._con)
        if depth:
            distance = self._draw_depth(scene)
        return Frame(image, distance)

    def _draw_depth(self, scene):
        """Depth as ``mujoco.Renderer`` makes it: drawn with segmentation colours (flat
        shading, which it says keeps far depth accurate), then the reversed-Z buffer
        mapped back to metres in float64."""
        flags = scene.flags
        saved = flags.copy()
        try:
            flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = True
            flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = True
            mujoco.mjr_render(self._rect, scene, self._con)
        finally:
            np.copyto(flags, saved)
        raw = np.empty((self.height, self.width), np.float32)
        mujoco.mjr_readPixels(None, raw, self._rect, self._con)
        znear, zfar = self._znear, self._zfar
        z = raw.astype(np.float64)
        if scene.camera[0].orthographic:
            metres = zfar - z * (zfar - znear)
        else:
            c = -(zfar + znear) / (zfar - znear)
            d = -(np.float32(2) * zfar * znear) / (zfar - znear)
            c = np.float32(-0.5) * c - np.float32(0.5)
            d = np.float32(-0.5) * d
            metres = d / (z + c)
        return metres.astype(np.float32)

    def free(self) -> None:
        """Free the render context, then the GL context; safe to call twice."""
        con, self._con = self._con, None
        context, self._gl = self._gl, None
        if con is not None:
            context.make_current()
            con.free()
        if context is not None:
            context.free()
