"""Depth images as organized point clouds in the camera's optical frame.

ROS's optical frame is x right, y down, z forward, so a pixel (u, v) with depth z (the
distance along the optical axis, what the renderer returns) is at
``((u - cx) z / fx, (v - cy) z / fy, z)``: one vectorised expression over the image with
the renderer's own pinhole intrinsics. Pixels that see nothing (depth at the far clip)
become NaN, as depth_image_proc does, so the cloud stays organized (height x width).
"""

import numpy as np

# PointCloud2 layout of xyz + rgb: three float32 then the rgb packed into a float32 slot
# (the PCL convention rviz reads), 16 bytes a point.
POINT_STEP = 16
FIELDS = (('x', 0), ('y', 4), ('z', 8), ('rgb', 12))


class Projector:
    """Per-pixel rays of one camera size, computed once: ``points(depth)`` multiplies."""

    def __init__(self, width: int, height: int, fx: float, fy: float, cx: float, cy: float):
        u = np.arange(width, dtype=np.float32)
        v = np.arange(height, dtype=np.float32)
        self.width, self.height = int(width), int(height)
        self._rx = ((u - cx) / fx)[None, :]
        self._ry = ((v - cy) / fy)[:, None]
        self._buf: np.ndarray | None = None   # cloud()'s, made on first use

    def points(self, depth: np.ndarray, far: float | None = None) -> np.ndarray:
        """(H, W, 3) float32 xyz in the optical frame from (H, W) depth, row 0 at the top;
        depth at or beyond ``far`` (or not finite) is NaN."""
        z = np.asarray(depth, dtype=np.float32)
        if z.shape != (self.height, self.width):
            raise ValueError(f'expected a {self.height}x{self.width} depth image, got '
                             f'{z.shape}')
        bad = ~np.isfinite(z) | (z <= 0)
        if far is not None:
            bad |= z >= far
        z = np.where(bad, np.float32(np.nan), z)
        out = np.empty((self.height, self.width, 3), dtype=np.float32)
        np.multiply(self._rx, z, out=out[..., 0])
        np.multiply(self._ry, z, out=out[..., 1])
        out[..., 2] = z
        return out

    def cloud(self, depth: np.ndarray, rgb: np.ndarray | None = None, far: float | None = None
              ) -> bytes:
        """The PointCloud2 data bytes (``POINT_STEP`` a point, little-endian x, y, z and
        rgb) of a depth image and its colours, written into one buffer that this
        projector reuses (the bytes returned are a copy of it)."""
        z = np.asarray(depth, dtype=np.float32)
        if z.shape != (self.height, self.width):
            raise ValueError(f'expected a {self.height}x{self.width} depth image, got '
                             f'{z.shape}')
        if self._buf is None:
            self._buf = np.zeros((self.height, self.width, 4), dtype='<f4')
        buf = self._buf
        ok = z > 0                              # NaN compares False: invalid as well
        if far is not None:
            ok &= z < far
        else:
            ok &= np.isfinite(z)
        np.copyto(buf[..., 2], z)
        if not ok.all():
            np.copyto(buf[..., 2], np.float32(np.nan), where=~ok)
        np.multiply(self._rx, buf[..., 2], out=buf[..., 0])
        np.multiply(self._ry, buf[..., 2], out=buf[..., 1])
        raw = buf.view(np.uint8).reshape(self.height, self.width, POINT_STEP)
        if rgb is None:
            raw[..., 12:] = 0
        else:
            for k in range(3):                 # 0x00RRGGBB little-endian: B, G, R, 0
                np.copyto(raw[..., 12 + k], rgb[..., 2 - k])
            raw[..., 15] = 0
        return buf.tobytes()


def pack_xyzrgb(points: np.ndarray, rgb: np.ndarray | None = None) -> bytes:
    """(H, W, 3) float32 points and (H, W, 3) uint8 rgb -> the PointCloud2 data bytes
    (``POINT_STEP`` bytes a point, little-endian; rgb 0 without colour)."""
    h, w = points.shape[:2]
    buf = np.zeros((h, w, 4), dtype=np.float32)
    buf[..., :3] = points
    if rgb is not None:
        packed = buf.view(np.uint32)[..., 3]
        c = rgb.astype(np.uint32)
        packed[:] = (c[..., 0] << 16) | (c[..., 1] << 8) | c[..., 2]
    return buf.astype('<f4', copy=False).tobytes()
