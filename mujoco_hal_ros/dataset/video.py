"""Camera streams for a dataset: one episode encoded as it comes, appended to a file of many.

LeRobot's writer encodes each episode to its own MP4 (AV1 through SVT-AV1, yuv420p, a key
frame every 2 frames, crf 30) and then appends it to the camera's current file by
remuxing the packets (no second encode); an episode is found again by its from/to
timestamps in that file. We do the same, but encode frame by frame while the episode is
recorded, so memory stays bounded whatever its length.

The default codec is H.264 (libx264), not LeRobot's AV1: SVT-AV1, run as root (a container,
a CI runner), puts the thread that opens it and the encoder threads it starts at SCHED_FIFO
priority 99 (seen here with strace: ``sched_setscheduler(tid, SCHED_FIFO, [99])``), and a
real-time simulator's physics thread would then wait behind a video encoder. H.264 decodes
wherever LeRobot loads a dataset (torchcodec, PyAV) and encodes a 640x480 frame in 2.6 ms
against SVT-AV1's 6.3 ms. ``vcodec='libsvtav1'`` still gives AV1; the scheduling it changes
is put back after the encoder opens (``_keep_scheduling``).
"""

import fractions
import logging
import os
from pathlib import Path
import tempfile
from typing import Any

import numpy as np

from ..errors import ConfigError

CODEC = 'libx264'            # LeRobot writes libsvtav1 by default: see above for why not
FALLBACK_CODECS = ('libsvtav1', 'mpeg4')
PIX_FMT = 'yuv420p'
GOP = 2
CRF = 30
CRF_X264 = 23


def _av() -> Any:
    try:
        import av
    except ImportError as err:
        raise ConfigError(f'dataset videos need PyAV ({err}); pip install av',
                          where='dataset') from None
    logging.getLogger('libav').setLevel(logging.ERROR)
    # SVT-AV1 prints its banner and settings to stderr per encoder unless told otherwise
    os.environ.setdefault('SVT_LOG', '1')
    return av


def pick_codec(preferred: str = CODEC) -> str:
    av = _av()
    for name in (preferred,) + FALLBACK_CODECS:
        try:
            av.codec.Codec(name, 'w')
        except Exception:  # noqa: BLE001 - not in this PyAV build: try the next
            continue
        return name
    raise ConfigError('this PyAV has no AV1, H.264 or MPEG-4 encoder', where='dataset')


def _threads() -> dict[int, tuple[int, int]]:
    """This process's threads: native id -> (scheduling policy, priority)."""
    out = {}
    for name in os.listdir('/proc/self/task'):
        tid = int(name)
        try:
            out[tid] = (os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority)
        except OSError:          # ended meanwhile
            continue
    return out


def _keep_scheduling(before: dict[int, tuple[int, int]]) -> None:
    """Put back the scheduling an encoder changed while it opened: every thread that was
    there keeps what it had, and threads it started run as ordinary threads."""
    for tid, (policy, prio) in _threads().items():
        want = before.get(tid, (os.SCHED_OTHER, 0))
        if (policy, prio) != want and policy in (os.SCHED_FIFO, os.SCHED_RR):
            try:
                os.sched_setscheduler(tid, want[0], os.sched_param(want[1]))
            except OSError:      # ended meanwhile, or not ours to change
                continue


def _rate(fps: float) -> fractions.Fraction:
    return fractions.Fraction(fps).limit_denominator(1001)


class EpisodeEncoder:
    """One camera's frames of one episode into ``path``, encoded as they are added."""

    def __init__(self, path: Path, height: int, width: int, fps: float, codec: str) -> None:
        av = _av()
        self.path = Path(path)
        self.frames = 0
        self._container = av.open(str(self.path), 'w')
        try:
            options = {'g': str(GOP), 'crf': str(CRF)}
            if codec == 'libsvtav1':
                options['preset'] = '12'
            elif codec == 'libx264':
                # x264's CRF scale is not AV1's: 23 (its default) keeps the decoded frames as
                # near the renders as SVT-AV1's 30 does (under 4 grey levels on average)
                options.update(preset='veryfast', crf=str(CRF_X264))
            stream = self._container.add_stream(codec, rate=_rate(fps), options=options)
            stream.width, stream.height = width, height
            stream.pix_fmt = PIX_FMT
            if codec == 'mpeg4':
                stream.options = {'g': str(GOP), 'qscale': '3'}
        except Exception:
            self._container.close()
            raise
        self._stream = stream
        self._av = av
        # SVT-AV1 changes scheduling when it opens, at the first frame (see the docstring)
        self._guard = codec == 'libsvtav1' and hasattr(os, 'sched_getscheduler') \
            and os.path.isdir('/proc/self/task')
        self._time_base = 1 / _rate(fps)

    def add(self, rgb: np.ndarray) -> None:
        frame = self._av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format='rgb24')
        frame.pts = self.frames
        frame.time_base = self._time_base
        before = _threads() if self._guard and self.frames == 0 else None
        try:
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        finally:
            if before is not None:
                _keep_scheduling(before)
        self.frames += 1

    def finish(self) -> Path:
        """Flush the encoder and close the file; it is then a playable MP4."""
        try:
            for packet in self._stream.encode():
                self._container.mux(packet)
        finally:
            self._container.close()
        return self.path

    def abandon(self) -> None:
        try:
            self._container.close()
        except Exception:  # noqa: BLE001 - the file is deleted next; its state is moot
            pass
        self.path.unlink(missing_ok=True)


def duration_s(path: Path) -> float:
    """The video stream's duration in seconds, as LeRobot measures it."""
    av = _av()
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        if stream.duration is not None:
            return float(stream.duration * stream.time_base)
        return float(container.duration / av.time_base)


def video_info(path: Path) -> dict[str, Any]:
    """The ``info`` LeRobot stores under a video feature in info.json."""
    av = _av()
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        info = {
            'video.height': stream.height,
            'video.width': stream.width,
            'video.codec': stream.codec.canonical_name,
            'video.pix_fmt': stream.pix_fmt,
            'video.is_depth_map': False,
            'video.fps': int(stream.base_rate),
            'video.channels': 3,
            'has_audio': bool(container.streams.audio),
        }
    return info


def append(existing: Path, episode: Path, out: Path) -> None:
    """``existing`` then ``episode`` into ``out`` by remuxing (ffmpeg's concat demuxer)."""
    av = _av()
    listing = tempfile.NamedTemporaryFile('w', suffix='.ffconcat', dir=out.parent,
                                          delete=False)
    try:
        with listing:
            listing.write('ffconcat version 1.0\n')
            for path in (existing, episode):
                quoted = str(Path(path).resolve()).replace("'", "'\\''")
                listing.write(f"file '{quoted}'\n")
        source = av.open(listing.name, 'r', format='concat', options={'safe': '0'})
        try:
            target = av.open(str(out), 'w', format='mp4', options={'movflags': 'faststart'})
            try:
                into = {}
                for stream in source.streams.video:
                    copy = target.add_stream_from_template(template=stream, opaque=True)
                    copy.time_base = stream.time_base
                    into[stream.index] = copy
                for packet in source.demux():
                    if packet.dts is None or packet.stream.index not in into:
                        continue
                    packet.stream = into[packet.stream.index]
                    target.mux(packet)
            finally:
                target.close()
        finally:
            source.close()
    finally:
        os.unlink(listing.name)


def decode(path: Path, start_s: float, end_s: float, tolerance_s: float
           ) -> tuple[np.ndarray, np.ndarray]:
    """Frames with presentation time in [start_s - tol, end_s - tol): (timestamps, NxHxWx3)."""
    av = _av()
    times, frames = [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        if start_s > 0:
            container.seek(int(start_s / stream.time_base), stream=stream, backward=True,
                           any_frame=False)
        for frame in container.decode(stream):
            t = float(frame.pts * stream.time_base)
            if t < start_s - tolerance_s:
                continue
            if t >= end_s - tolerance_s:
                break
            times.append(t)
            frames.append(frame.to_ndarray(format='rgb24'))
    if not frames:
        return np.zeros(0), np.zeros((0, 0, 0, 3), dtype=np.uint8)
    return np.array(times), np.stack(frames)
