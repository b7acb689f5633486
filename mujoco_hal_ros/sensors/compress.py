"""Images compressed as image_transport's ``compressed`` and ``compressedDepth`` plugins do.

A subscriber's republisher (``ros2 run image_transport republish compressed raw``) decodes
``sensor_msgs/CompressedImage`` by its ``format`` string, so the strings and the depth
header follow those plugins exactly: ``"rgb8; jpeg compressed bgr8"`` (OpenCV's channel
order inside), and for 32FC1 depth ``"32FC1; compressedDepth png"`` with a 12-byte header
(format 0 = inverse depth, then the two float32 quantization parameters) before a 16-bit
PNG of ``A / depth + B``.
"""

import struct

import cv2
import numpy as np

from ..errors import InvalidArgument

FORMATS = ('jpeg', 'png')
DEPTH_QUANTIZATION = 100.0    # compressed_depth_image_transport's defaults
DEPTH_MAX = 10.0


def format_string(fmt: str) -> str:
    return f'rgb8; {fmt} compressed bgr8'


def encode(rgb: np.ndarray, fmt: str = 'jpeg', quality: int = 90, png_level: int = 1
           ) -> tuple[str, bytes]:
    """(H, W, 3) uint8 RGB, row 0 at the top -> (format string, encoded bytes)."""
    if fmt not in FORMATS:
        raise InvalidArgument(f'unknown image compression {fmt!r}', where='format',
                              allowed=', '.join(FORMATS))
    bgr = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR)
    params = ([cv2.IMWRITE_JPEG_QUALITY, int(quality)] if fmt == 'jpeg'
              else [cv2.IMWRITE_PNG_COMPRESSION, int(png_level)])
    ok, buf = cv2.imencode('.jpg' if fmt == 'jpeg' else '.png', bgr, params)
    if not ok:
        raise InvalidArgument(f'{fmt} encoding failed', where='image')
    return format_string(fmt), buf.tobytes()


def decode(data: bytes) -> np.ndarray:
    """Encoded bytes -> (H, W, 3) uint8 RGB (for tests and tools)."""
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise InvalidArgument('not an encoded image OpenCV can read', where='data')
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def encode_depth(depth: np.ndarray, depth_max: float = DEPTH_MAX,
                 quantization: float = DEPTH_QUANTIZATION, png_level: int = 1
                 ) -> tuple[str, bytes]:
    """(H, W) float32 metres -> (format string, header + 16-bit PNG); depth beyond
    ``depth_max`` or not finite is sent as 0 (no reading)."""
    a = quantization * (quantization + 1.0)
    b = 1.0 - a / depth_max
    z = np.asarray(depth, dtype=np.float32)
    valid = np.isfinite(z) & (z > 0) & (z < depth_max)
    q = np.zeros(z.shape, dtype=np.uint16)
    q[valid] = np.clip(a / z[valid] + b, 0, 65535).astype(np.uint16)
    ok, buf = cv2.imencode('.png', q, [cv2.IMWRITE_PNG_COMPRESSION, int(png_level)])
    if not ok:
        raise InvalidArgument('depth png encoding failed', where='depth')
    return '32FC1; compressedDepth png', struct.pack('<iff', 0, a, b) + buf.tobytes()


def decode_depth(data: bytes) -> np.ndarray:
    """``encode_depth``'s bytes -> (H, W) float32 metres, NaN where there was none."""
    _fmt, a, b = struct.unpack('<iff', data[:12])
    q = cv2.imdecode(np.frombuffer(data[12:], np.uint8), cv2.IMREAD_UNCHANGED)
    if q is None:
        raise InvalidArgument('not a compressedDepth PNG OpenCV can read', where='data')
    out = np.full(q.shape, np.nan, dtype=np.float32)
    nz = q != 0
    out[nz] = a / (q[nz].astype(np.float32) - b)
    return out
