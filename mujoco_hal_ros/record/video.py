"""VideoRecorder: one camera's frames into an MP4 file (PyAV), on a thread of its own.

Frames are the camera thread's, already rendered for its image topic; this only encodes
them (H.264 where the PyAV wheel has it, else MPEG-4 Part 2), at the camera's rate, so a
video plays at the speed the camera saw the run. Encoding a frame takes milliseconds, so
the camera thread hands each one over through a bounded queue and returns.
"""

import collections
import fractions
import threading

import numpy as np

from ..errors import ConfigError
from .drain import drain_until_stopped

QUEUE_FRAMES = 30


def _codec(av):
    for name in ('libx264', 'h264', 'mpeg4'):
        try:
            av.codec.Codec(name, 'w')
        except Exception:  # noqa: BLE001 - not in this build: try the next
            continue
        return name
    raise ConfigError('this PyAV has no H.264 or MPEG-4 encoder', where='record_video')


class VideoRecorder:
    """Write ``rate`` Hz frames of ``width`` x ``height`` RGB into ``path`` (MP4)."""

    def __init__(self, path: str, width: int, height: int, rate: float, *,
                 max_queue: int = QUEUE_FRAMES):
        try:
            import av
        except ImportError as err:
            raise ConfigError(f'camera video needs PyAV ({err}); pip install av',
                              where='record_video') from None
        self.path, self.width, self.height = path, int(width), int(height)
        self.rate = fractions.Fraction(rate).limit_denominator(1000)
        self.codec = _codec(av)
        self._container = av.open(path, 'w')
        stream = self._container.add_stream(self.codec, rate=self.rate)
        stream.width, stream.height = self.width + self.width % 2, self.height + self.height % 2
        stream.pix_fmt = 'yuv420p'
        if self.codec in ('libx264', 'h264'):
            stream.options = {'preset': 'veryfast', 'crf': '23'}
        self._stream = stream
        self._av = av
        self.max_queue = int(max_queue)
        self.frames_in = self.frames_written = self.dropped = 0
        self.error: str | None = None
        self._queue: collections.deque[np.ndarray] = collections.deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name='video', daemon=True)
        self._thread.start()

    def offer(self, rgb: np.ndarray, bottom_up: bool = False) -> bool:
        """Queue one HxWx3 uint8 frame (copied); never blocks. False when dropped."""
        if self._stopping or self.error is not None:
            return False
        frame = np.ascontiguousarray(rgb[::-1] if bottom_up else rgb).copy()
        with self._lock:
            self.frames_in += 1
            if len(self._queue) >= self.max_queue:
                self.dropped += 1
                return False
            self._queue.append(frame)
        self._wake.set()
        return True

    def _encode(self, rgb: np.ndarray) -> None:
        if rgb.shape[0] % 2 or rgb.shape[1] % 2:
            rgb = np.pad(rgb, ((0, rgb.shape[0] % 2), (0, rgb.shape[1] % 2), (0, 0)),
                         mode='edge')
        frame = self._av.VideoFrame.from_ndarray(rgb, format='rgb24')
        frame.pts = self.frames_written
        frame.time_base = 1 / self.rate
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        self.frames_written += 1

    def _take(self):
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def _write(self, rgb: np.ndarray) -> None:
        if self.error is not None:
            return
        try:
            self._encode(rgb)
        except Exception as err:  # noqa: BLE001 - ENOSPC and codec errors alike
            self.error = f'video {self.path}: {type(err).__name__}: {err}'

    def _run(self) -> None:
        drain_until_stopped(self._wake, self._take, self._write, lambda: self._stopping)
        try:
            if self.error is None:
                for packet in self._stream.encode():
                    self._container.mux(packet)
        except Exception as err:  # noqa: BLE001 - reported, the file is closed regardless
            self.error = f'video {self.path}: {type(err).__name__}: {err}'
        finally:
            self._container.close()

    def close(self, timeout: float = 30.0) -> str:
        """Encode what is queued and finish the file; idempotent."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)
        return self.path
