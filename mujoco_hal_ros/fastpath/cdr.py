"""joint_states, /tf and /clock as serialized CDR bytes, written from arrays.

Why: at 1 kHz rclpy spends most of the state thread's time on Python message objects -
setting each field through its checked property, then converting the whole object to C,
many times what publishing the same message as bytes costs (``bench/README.md``). That
Python time holds the GIL, and the physics thread waits for it at every chunk boundary, so
it took a visible share of the stepper's core. Names and frame ids never change, so each
message is a fixed template: built once, then per tick only the stamp and the numbers are
written into it with NumPy and the bytes are handed to ``Publisher.publish``, which sends
them unchanged (``publish_raw``).

Encoding: classic little-endian CDR (encapsulation ``00 01 00 00``) as the ROS 2 rmw
layers put on the wire, alignment counted from the byte after the 4-byte encapsulation.
No rclpy here; ``streams`` checks a packed message against rclpy's own deserializer once at
start and falls back to message objects if the middleware speaks something else, or when
the fast paths are off (``mujoco_hal_ros.fastpath``).
"""

from collections.abc import Sequence
import struct

import numpy as np
from numpy.typing import ArrayLike

ENCAPSULATION = b'\x00\x01\x00\x00'  # CDR_LE
_F8 = np.dtype('<f8')


def split_stamp(seconds: float) -> tuple[int, int]:
    """Simulated seconds -> (sec, nanosec) as builtin_interfaces/Time holds them."""
    ns = max(0, int(round(seconds * 1e9)))
    return ns // 1_000_000_000, ns % 1_000_000_000


class _Writer:
    """Appends CDR fields and remembers where the ones written per tick start."""

    def __init__(self):
        self.buf = bytearray(ENCAPSULATION)

    def _align(self, n: int) -> None:
        self.buf += b'\x00' * (-(len(self.buf) - len(ENCAPSULATION)) % n)

    def u32(self, value: int) -> None:
        self._align(4)
        self.buf += struct.pack('<I', value)

    def stamp(self):
        """A builtin_interfaces/Time placeholder; returns its offset."""
        self._align(4)
        at = len(self.buf)
        self.buf += bytes(8)
        return at

    def string(self, text: str) -> None:
        data = text.encode('utf-8')
        self.u32(len(data) + 1)
        self.buf += data + b'\x00'

    def doubles(self, n, counted):
        """``n`` float64 placeholders (a sequence with its length when ``counted``)."""
        if counted:
            self.u32(n)
        self._align(8)
        at = len(self.buf)
        self.buf += bytes(8 * n)
        return at

    def template(self):
        return np.frombuffer(bytes(self.buf), dtype=np.uint8).copy()


def _stamp_bytes(seconds):
    sec, nsec = split_stamp(seconds)
    return np.frombuffer(struct.pack('<iI', sec, nsec), dtype=np.uint8)


class JointStateBytes:
    """sensor_msgs/JointState with fixed names, empty frame_id; stamp and arrays per call."""

    def __init__(self, names: Sequence[str], frame_id: str = '') -> None:
        w = _Writer()
        self._stamp_at = w.stamp()
        w.string(frame_id)
        w.u32(len(names))
        for name in names:
            w.string(name)
        n = len(names)
        at = [w.doubles(n, counted=True) for _ in range(3)]   # position, velocity, effort
        self._buf = w.template()
        self._fields = [self._buf[a:a + 8 * n].view(_F8) for a in at]

    def pack(self, seconds: float, position: ArrayLike, velocity: ArrayLike,
             effort: ArrayLike) -> bytes:
        buf = self._buf
        buf[self._stamp_at:self._stamp_at + 8] = _stamp_bytes(seconds)
        for view, values in zip(self._fields, (position, velocity, effort), strict=True):
            view[:] = values
        return buf.tobytes()


class TransformsBytes:
    """tf2_msgs/TFMessage of fixed parent -> child frames; stamp and poses per call."""

    def __init__(self, parents: Sequence[str], children: Sequence[str]):
        if len(parents) != len(children):
            raise ValueError('one parent frame per child frame')
        w = _Writer()
        w.u32(len(children))
        stamps, poses = [], []
        for parent, child in zip(parents, children, strict=True):
            stamps.append(w.stamp())
            w.string(parent)
            w.string(child)
            poses.append(w.doubles(7, counted=False))   # translation xyz, rotation xyzw
        self._buf = w.template()
        self._n = len(children)
        self._stamp_idx = np.asarray(stamps)[:, None] + np.arange(8)
        self._pose_idx = np.asarray(poses)[:, None] + np.arange(56)
        self._poses = np.empty((self._n, 7), dtype=_F8)

    @property
    def size(self) -> int:
        """Number of transforms in each message."""
        return self._n

    def pack(self, seconds: float, translation: np.ndarray, rotation_xyzw: np.ndarray
             ) -> bytes:
        """``translation`` (n, 3) metres, ``rotation_xyzw`` (n, 4) in ROS order."""
        buf, poses = self._buf, self._poses
        if self._n:
            poses[:, :3] = translation
            poses[:, 3:] = rotation_xyzw
            buf[self._stamp_idx] = _stamp_bytes(seconds)
            buf[self._pose_idx] = poses.view(np.uint8).reshape(self._n, 56)
        return buf.tobytes()


class ImageBytes:
    """sensor_msgs/Image of a fixed size and encoding; stamp and pixels per call.

    ``data`` is the message's last field, so a frame is the fixed header followed by the
    pixel buffer: one copy of the pixels, no per-byte Python (rclpy's ``data`` setter checks
    every byte of a plain ``bytes``) and no second copy into a C message.
    """

    def __init__(self, height: int, width: int, encoding: str, step: int, frame_id: str,
                 bigendian: bool = False) -> None:
        w = _Writer()
        self._stamp_at = w.stamp()
        w.string(frame_id)
        w.u32(height)
        w.u32(width)
        w.string(encoding)
        w.buf += bytes([1 if bigendian else 0])
        w.u32(step)
        self._size = height * step
        w.u32(self._size)
        self._head = w.template()
        self._rows_up = [slice(r * step, (r + 1) * step) for r in reversed(range(height))]
        self._frame: np.ndarray | None = None

    def pack(self, seconds: float, pixels: np.ndarray, bottom_up: bool = False) -> bytes:
        """``pixels``: a C-contiguous array of exactly ``height * step`` bytes, row 0 at the
        top, or with ``bottom_up`` row 0 at the bottom as OpenGL reads them (the rows are
        then written in reverse order, still one copy)."""
        view = memoryview(pixels).cast('B')  # type: ignore[arg-type]  # (numpy: Buffer at 3.12)
        if view.nbytes != self._size:
            raise ValueError(f'expected {self._size} bytes of pixels, got {view.nbytes}')
        head = self._head
        head[self._stamp_at:self._stamp_at + 8] = _stamp_bytes(seconds)
        if bottom_up:
            return b''.join([head] + [view[rows] for rows in self._rows_up])
        return b''.join((head, view))

    def pack_in_place(self, seconds: float, pixels: np.ndarray, bottom_up: bool = False
                      ) -> np.ndarray:
        """``pack`` into a uint8 array this packer owns and rewrites at its next call: no
        allocation per frame, and NumPy copies the pixels without holding the GIL. Send it
        (``unlocked_publish.BytesPublisher`` takes it as it is) before packing again."""
        if pixels.nbytes != self._size or not pixels.flags.c_contiguous:
            raise ValueError(f'expected {self._size} C-contiguous bytes of pixels, got '
                             f'{pixels.nbytes}')
        head = self._head
        if self._frame is None:
            self._frame = np.empty(len(head) + self._size, np.uint8)
            self._frame[:len(head)] = head
        frame = self._frame
        frame[self._stamp_at:self._stamp_at + 8] = _stamp_bytes(seconds)
        rows = pixels.reshape(len(self._rows_up), -1).view(np.uint8)
        np.copyto(frame[len(head):].reshape(rows.shape), rows[::-1] if bottom_up else rows)
        return frame


class HeaderFirstBytes:
    """A message whose first field is a std_msgs/Header, serialized once (by rclpy, say);
    per call only the stamp changes. For camera_info: the intrinsics never do, and
    converting the message object every frame is work the send path need not do."""

    def __init__(self, serialized: bytes):
        if bytes(serialized[:4]) != ENCAPSULATION or len(serialized) < 12:
            raise ValueError('expected little-endian CDR starting with a header stamp')
        self._buf = np.frombuffer(bytes(serialized), dtype=np.uint8).copy()

    def pack(self, seconds: float) -> bytes:
        self._buf[4:12] = _stamp_bytes(seconds)
        return self._buf.tobytes()


def clock_bytes(seconds: float) -> bytes:
    """rosgraph_msgs/Clock."""
    return ENCAPSULATION + _stamp_bytes(seconds).tobytes()
