"""Publish serialized bytes without holding the GIL for the middleware's write.

rclpy's ``Publisher.publish`` keeps the GIL for the whole write. For a 640x480 image
(0.9 MB over Fast DDS) that is a large part of a joint_states period, and no other thread
of the node runs Python meanwhile: with a camera subscribed, joint_states left late next to
the frames (``bench/README.md``).

``BytesPublisher`` makes the same rcl call (``rcl_publish_serialized_message``) through
ctypes, which releases the GIL for the length of a foreign call, on the very ``librcl``
rclpy loaded, and points rcl at the caller's buffer instead of copying it into a
``std::string`` first. Where that library or rclpy's handle pointer is not there, it is
``Publisher.publish``. Callers build one only with the fast paths on
(``mujoco_hal_ros.fastpath``); otherwise they publish message objects.
"""

import ctypes
import ctypes.util
import os
from typing import Any, Protocol

import numpy as np


class RclPublisher(Protocol):
    """What this module uses of an rclpy ``Publisher`` (core code does not import rclpy)."""

    @property
    def handle(self) -> Any: ...

    @property
    def topic_name(self) -> str: ...

    def publish(self, msg: Any) -> None: ...


class _Allocator(ctypes.Structure):
    """rcutils_allocator_t: unused by a publish, which never resizes the buffer."""
    _fields_ = [('allocate', ctypes.c_void_p), ('deallocate', ctypes.c_void_p),
                ('reallocate', ctypes.c_void_p), ('zero_allocate', ctypes.c_void_p),
                ('state', ctypes.c_void_p)]


class _SerializedMessage(ctypes.Structure):
    """rcl_serialized_message_t (rcutils_uint8_array_t)."""
    _fields_ = [('buffer', ctypes.c_void_p), ('buffer_length', ctypes.c_size_t),
                ('buffer_capacity', ctypes.c_size_t), ('allocator', _Allocator)]


def _loaded(name):
    """Path of the shared library ``lib<name>.so`` already mapped into this process."""
    want = f'lib{name}.so'
    try:
        with open('/proc/self/maps') as maps:
            for line in maps:
                path = line.rstrip('\n').split(maxsplit=5)[-1]
                if os.path.basename(path) == want:
                    return path
    except OSError:
        pass
    return ctypes.util.find_library(name)


_RCL = None


def _rcl_functions():
    """(rcl_publish_serialized_message, rcutils_reset_error) from rclpy's own libraries, or
    None; looked up once."""
    global _RCL
    if _RCL is None:
        try:
            rcl = ctypes.CDLL(_loaded('rcl'))
            rcutils = ctypes.CDLL(_loaded('rcutils'))
            publish = rcl.rcl_publish_serialized_message
            publish.argtypes = [ctypes.c_void_p, ctypes.POINTER(_SerializedMessage),
                                ctypes.c_void_p]
            publish.restype = ctypes.c_int
            reset = rcutils.rcutils_reset_error
            reset.argtypes, reset.restype = [], None
            _RCL = (publish, reset)
        except (OSError, TypeError, AttributeError):
            _RCL = False
    return _RCL or None


class BytesPublisher:
    """Serialized messages out through ``publisher`` with the GIL released meanwhile."""

    def __init__(self, publisher: RclPublisher):
        self._pub = publisher
        functions = _rcl_functions()
        if functions is not None and not isinstance(
                getattr(publisher.handle, 'pointer', None), int):
            functions = None
        self._rcl = functions

    @property
    def unlocked(self) -> bool:
        """Whether publishes release the GIL (False: plain ``Publisher.publish``)."""
        return self._rcl is not None

    def publish(self, data: bytes | np.ndarray) -> None:
        """Send ``data``, the message's serialized bytes: ``bytes`` or a C-contiguous uint8
        array (``cdr.ImageBytes.pack_in_place``), which rcl copies before this returns."""
        if isinstance(data, np.ndarray):
            if data.dtype != np.uint8 or data.ndim != 1 or not data.flags.c_contiguous:
                raise TypeError('expected a 1-D C-contiguous uint8 array of serialized bytes')
            if self._rcl is None:
                return self._pub.publish(data.tobytes())
            address: int | None = data.ctypes.data
            size = data.nbytes
        elif isinstance(data, bytes):
            if self._rcl is None:
                return self._pub.publish(data)
            address = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
            size = len(data)
        else:
            raise TypeError(f'expected serialized bytes, got {type(data).__name__}')
        publish, reset = self._rcl
        msg = _SerializedMessage(address, size, size)
        with self._pub.handle:                     # not destroyed while rcl uses it
            ret = publish(self._pub.handle.pointer, ctypes.byref(msg), None)
        if ret != 0:
            reset()
            raise RuntimeError(f'publishing on {self._pub.topic_name} failed '
                               f'(rcl_publish_serialized_message returned {ret})')
