"""Camera streams: <camera>/image_raw + camera_info (and depth), rendered on one thread.

Derived streams come from the same frames, each only while subscribed and encoded on this
thread (never the physics one): ``image_raw/compressed`` (jpeg or png, as
image_transport's compressed plugin), and for depth cameras ``points`` (an organized
xyz + rgb PointCloud2 in the optical frame) and ``depth/image_raw/compressedDepth``.

Rendering costs tens of milliseconds a frame on a software rasteriser, so it never runs in
an executor callback: one thread walks the cameras, renders those that are due *and* have
a subscriber (an idle camera costs a subscriber count ten times a second and creates no GL
context), and publishes image and camera_info with the same stamp, the simulated time of
the snapshot the frame shows. Frames are posed on the device's private render MjData,
never on the stepper's.

Frames overlap on two threads. This thread poses the render MjData, updates a scene and
queues it on the camera's GL thread, then serializes and publishes the frame before it
(several copies of the pixels) while the GL thread draws. So the rasteriser never waits
for a scene update, a snapshot, a send or the GIL between frames, as it did with a frame
at a time (``bench/README.md``). The cost is latency, not truth: a frame may show a
state one frame older than with one frame at a time, stamped with its own simulated
time. Every rendered frame is published.

Two ways out, chosen once in ``CameraPublisher.__init__``: with the fast paths on
(``mujoco_hal_ros.fastpath``) images and camera_info go out as CDR bytes, images through
``BytesPublisher`` without the GIL, and ``camera_background`` applies; with them off they
are rclpy messages through ``Publisher.publish`` and rendering stays at normal priority
(``camera_background`` behaves as ``false``). A subscriber gets the same bytes either way.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
import concurrent.futures
from dataclasses import dataclass, field
import sys
import threading
import time
from typing import TYPE_CHECKING

from builtin_interfaces.msg import Time
import numpy as np
from rclpy.qos import QoSProfile
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, PointCloud2

from ... import fastpath
from ...errors import DeviceError
from ...fastpath import cdr, sched
from ...fastpath.raster import rasterisers_in_background
from ...fastpath.unlocked_publish import BytesPublisher
from ...sensors import compress
from ...sensors.pointcloud import Projector
from .. import conversions as cv
from .sensors import cloud_msg
from .streams import RateMeter

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.impl.rcutils_logger import RcutilsLogger
    from rclpy.node import Node
    from rclpy.publisher import Publisher

    from ...sim.device import Device
    from .tf import FrameTree

IMAGE_QOS = QoSProfile(depth=2)
IDLE_POLL_S = 0.1
# camera_background:=auto: a camera watched this long that publishes under this fraction of
# its rate over the last second moves rendering to normal priority
FOREGROUND_SETTLE_S = 1.5
FOREGROUND_BELOW = 0.9
ADAPT_EVERY_S = 0.25


@dataclass
class CameraConfig:
    channel: str          # topic namespace (the device file's image channel name)
    camera: str           # MuJoCo camera name
    width: int
    height: int
    rate: float
    depth: bool = False
    # role -> topic where a robot description names them (image, info, depth, depth_info,
    # points); the rest are <channel>/image_raw, <channel>/camera_info...
    topics: dict[str, str] = field(default_factory=dict)

    def topic(self, role: str) -> str:
        return self.topics.get(role) or f'{self.channel}/{_DEFAULT_TOPICS[role]}'


_DEFAULT_TOPICS = {'image': 'image_raw', 'info': 'camera_info', 'depth': 'depth/image_raw',
                   'depth_info': 'depth/camera_info', 'points': 'points'}


@dataclass
class _Stream:
    cfg: CameraConfig
    frame: str
    image_pub: Publisher
    info_pub: Publisher
    depth_pub: Publisher | None = None
    depth_info_pub: Publisher | None = None
    info: CameraInfo = None
    info_bytes: cdr.HeaderFirstBytes | None = None     # the same, serialized (raw path)
    due: float = 0.0
    watched_since: float = 0.0     # monotonic time a subscriber appeared; 0 while unwatched
    meter: RateMeter = field(default_factory=lambda: RateMeter(100))
    frames: int = 0
    failed: str = ''
    packers: dict = field(default_factory=dict)    # encoding -> cdr.ImageBytes
    # what sends images: BytesPublisher of image_pub, or it
    image_out: BytesPublisher | Publisher | None = None
    depth_out: BytesPublisher | Publisher | None = None
    # image_raw/compressed; depth cameras: points and depth/image_raw/compressedDepth, all
    # on subscription
    compressed_pub: Publisher | None = None
    points_pub: Publisher | None = None
    cdepth_pub: Publisher | None = None
    projector: Projector | None = None
    generation: int = 0            # the scene generation ``info`` was made for
    absent: int = -1               # a generation whose model lacks the camera (logged once)


class CameraPublisher:
    """Renders subscribed cameras at their rates: one thread here, plus each camera's GL
    thread."""

    def __init__(self, node: Node, device: Device, frames: FrameTree,
                 configs: Sequence[CameraConfig], logger: RcutilsLogger,
                 background: str = 'auto',
                 compression: tuple[str, int] = ('jpeg', 90)) -> None:
        self.device = device
        self.compression = compression            # (jpeg or png, jpeg quality)
        self._far = float(device.model.vis.map.zfar * device.model.stat.extent)
        fast = fastpath.enabled()             # the one choice of path for every camera
        self.raw = fast and raw_images_ok()
        if not fast:
            background = 'false'              # the rasterisers' priority is a fast path
        self.mode = background                      # camera_background: auto, true, false
        self.background = background != 'false'    # where the rasterisers are now
        # auto may leave the background while this says so (the state thread is at FIFO)
        self.may_raise: Callable[[], bool] = lambda: False
        self._cannot_raise = False  # the kernel refused raising the rasterisers back
        self._renderers: set[int] = set()   # ids of renderers whose rasteriser threads were set
        self._next_adapt = 0.0
        self._raised_before = False
        self.frames = frames
        self.logger = logger
        # channel -> fn(rgb rows bottom-up, simulated seconds), called with every frame sent;
        # a hooked camera renders without a subscriber (video recording)
        self.frame_hooks: dict[str, Callable[[np.ndarray, float], None]] = {}
        self.streams: list[_Stream] = []
        for cfg in configs:
            topic = cfg.topic
            s = _Stream(cfg, frames.optical_frame(cfg.camera),
                        node.create_publisher(Image, topic('image'), IMAGE_QOS),
                        node.create_publisher(CameraInfo, topic('info'), IMAGE_QOS))
            if cfg.depth:
                s.depth_pub = node.create_publisher(Image, topic('depth'), IMAGE_QOS)
                s.depth_info_pub = node.create_publisher(CameraInfo, topic('depth_info'),
                                                         IMAGE_QOS)
            s.compressed_pub = node.create_publisher(CompressedImage,
                                                     f'{topic("image")}/compressed', IMAGE_QOS)
            if cfg.depth:
                s.points_pub = node.create_publisher(PointCloud2, topic('points'), IMAGE_QOS)
                s.cdepth_pub = node.create_publisher(
                    CompressedImage, f'{topic("depth")}/compressedDepth', IMAGE_QOS)
            s.image_out = BytesPublisher(s.image_pub) if self.raw else s.image_pub
            s.depth_out = (s.depth_pub if s.depth_pub is None or not self.raw
                           else BytesPublisher(s.depth_pub))
            self.streams.append(s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not self.streams:
            return
        self._thread = threading.Thread(target=self._run, name='sim_node-cameras',
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)

    def describe(self) -> list[str]:
        out = []
        for s in self.streams:
            c = s.cfg
            out.append(f'{c.topic("image")} + {c.topic("info")} ({c.width}x{c.height} @ '
                       f'{c.rate:g} Hz, on subscription, in {s.frame})')
            out.append(f'{c.topic("image")}/compressed ({self.compression[0]})')
            if c.depth:
                out.append(f'{c.topic("depth")} + {c.topic("depth_info")}, '
                           f'{c.topic("depth")}/compressedDepth, {c.topic("points")}')
        return out

    def rates(self) -> dict[str, float]:
        return {s.cfg.channel: s.meter.rate(5.0) for s in self.streams}

    def lagging(self, fraction: float = 0.5, settle_s: float = 3.0, span_s: float = 2.0
                ) -> list[tuple[str, float, float]]:
        """``(channel, fps, rate)`` of each watched stream publishing under ``fraction`` of
        its rate for the last ``span_s``, once it has been watched for ``settle_s``."""
        now = time.monotonic()
        out = []
        for s in self.streams:
            span = max(span_s, 3.0 / s.cfg.rate)        # three frames at least, at low rates
            if s.failed or not s.watched_since or now - s.watched_since < max(settle_s, span):
                continue
            fps = s.meter.rate(span)
            if fps < fraction * s.cfg.rate:
                out.append((s.cfg.channel, fps, s.cfg.rate))
        return out

    # --- where frames render ----------------------------------------------------------------
    def _adapt(self, now):
        """camera_background:=auto. Frames start in the background, which keeps every
        waking thread on the machine on time (a subscriber's middleware too, which SCHED_FIFO
        in this node cannot protect). A watched camera that cannot keep its rate there
        moves rendering to normal priority, which a bare renderer also has, for more of a
        bare renderer's frames, but only while the state thread runs at SCHED_FIFO; the
        background returns once no camera is watched (``bench/README.md`` has both
        sides)."""
        if self.mode != 'auto' or now < self._next_adapt:
            return
        self._next_adapt = now + ADAPT_EVERY_S
        watched = any(s.watched_since and not s.failed for s in self.streams)
        allowed = self.may_raise() and not self._cannot_raise
        if not self.background:
            if not (watched and allowed):   # nobody watches, or the state thread lost FIFO
                rasterisers_in_background(True)
                self.background = True
            return
        slow = self.lagging(FOREGROUND_BELOW, FOREGROUND_SETTLE_S, 1.0) \
            if watched and allowed else []
        if not slow:
            return
        name, fps, rate = slow[0]
        if not rasterisers_in_background(False):
            rasterisers_in_background(True)
            self._cannot_raise = True
            self.logger.info(f'camera {name} at {fps:.1f} fps of {rate:g} asked stays in the '
                             'background: raising its rasteriser threads back needs '
                             'CAP_SYS_NICE or an RLIMIT_NICE of 20; camera_background:=false '
                             'renders at normal priority from the start')
            return
        self.background = False
        log = self.logger.debug if self._raised_before else self.logger.info
        self._raised_before = True
        log(f'camera {name} at {fps:.1f} fps of {rate:g} asked in the background: rendering '
            f'at normal priority while it is watched (the state thread runs at SCHED_FIFO)')

    def _track(self, renderer):
        """A new renderer may have started the process's rasteriser threads: put them
        where frames render now."""
        if id(renderer) not in self._renderers:
            self._renderers.add(id(renderer))
            if self.background:
                rasterisers_in_background(True)

    # --- the loop ---------------------------------------------------------------------------
    @staticmethod
    def _wanted(s):
        pubs = [s.image_pub, s.info_pub, s.depth_pub, s.depth_info_pub, s.compressed_pub,
                s.points_pub, s.cdepth_pub]
        return any(p is not None and p.get_subscription_count() > 0 for p in pubs)

    def _run(self):
        # This thread and the GL thread take the GIL around every frame; descheduled while
        # holding it behind the frame's other work (DDS copies, a subscriber), they kept
        # joint_states waiting (sched.py; bench/README.md)
        sched.short_slice()
        pending = collections.deque()      # submitted frames, oldest first
        while not self._stop.is_set():
            now = time.monotonic()
            wake = now + IDLE_POLL_S
            for s in self.streams:
                if s.failed or not (self._wanted(s) or s.cfg.channel in self.frame_hooks):
                    s.watched_since = 0.0
                    continue
                if not s.watched_since:
                    s.watched_since = now
                if now >= s.due:
                    s.due = max(s.due + 1.0 / s.cfg.rate, now)
                    try:
                        submitted = self._submit(s)
                        if submitted is not None:
                            pending.append(submitted)
                    except Exception as err:  # noqa: BLE001 - reported once, stream stopped
                        if self._stop.is_set():
                            return
                        self._fail(s, err)
                        continue
                    # keep the GL thread one frame ahead: finish the older frame only once
                    # the next one is queued behind it
                    while len(pending) > 1:
                        if not self._deliver(pending.popleft()):
                            return
                wake = min(wake, s.due)
            # Nothing more is due now. Deliver what the GL thread finishes before the next
            # frame is due; a frame still drawing then waits until that one is queued.
            while pending and time.monotonic() < wake:
                oldest = pending[0][1]
                concurrent.futures.wait([oldest], timeout=max(0.0, wake - time.monotonic()))
                if not oldest.done():
                    break
                if not self._deliver(pending.popleft()):
                    return
            self._adapt(time.monotonic())
            delay = wake - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def _deliver(self, submitted):
        """Wait for a submitted frame and publish it; False once stopping."""
        s, job, seconds, generation = submitted
        try:
            frame = job.result()
            if not s.failed:
                self._send(s, frame, seconds)
        except Exception as err:  # noqa: BLE001 - reported once, stream stopped
            if self._stop.is_set():
                return False
            if generation == self.device.snapshot.generation:
                self._fail(s, err)
            # else: a frame of a model replaced meanwhile, whose renderer was closed: dropped
        return not self._stop.is_set()

    def _fail(self, s, err):
        s.failed = f'{type(err).__name__}: {err}'
        self.logger.error(f'camera {s.cfg.channel}: {s.failed}; not publishing it any more')

    def _submit(self, s):
        """Start a frame of stream ``s`` at the latest snapshot: ``(s, future of the frame,
        simulated time, scene generation)``, or None while the scene lacks its camera."""
        c = s.cfg
        snap = self.device.snapshot
        try:
            renderer = self.device.cameras.renderer(c.camera, c.width, c.height,
                                                    depth=c.depth, generation=snap.generation)
        except DeviceError as err:
            if snap.generation == 0 and s.generation == 0:
                raise
            if s.absent != snap.generation:       # a scene edit took the camera away
                s.absent = snap.generation
                self.logger.info(f'camera {c.channel}: not in the scene now ({err}); it '
                                 'publishes again once a world with it is loaded')
            return None
        self._track(renderer)
        if s.generation != snap.generation:
            s.generation, s.info, s.info_bytes, s.projector = snap.generation, None, None, None
        if s.info is None:
            try:
                s.info = CameraInfo(**renderer.camera_info_fields())
            except Exception as err:  # noqa: BLE001 - orthographic cameras have no pinhole
                self.logger.warning(f'camera {c.channel}: no camera_info ({err})')
                s.info = CameraInfo(width=c.width, height=c.height)
            s.info.header.frame_id = s.frame
            if s.points_pub is not None and s.info.k[0] > 0:
                s.projector = Projector(c.width, c.height, *renderer.intrinsics())
            if self.raw:
                s.info_bytes = cdr.HeaderFirstBytes(serialize_message(s.info))
        with self.device.cameras.render_state(snap) as data:      # the device's one render lock
            job = renderer.submit(data, rgb=True, depth=c.depth)
        return s, job, snap.time, snap.generation

    def _send(self, s, frame, seconds):
        st = cv.stamp(seconds)
        if s.info_bytes is not None:
            info = s.info_bytes.pack(seconds)
        else:
            s.info.header.stamp = st
            info = s.info
        image = self._image(s, frame.rgb, 'rgb8', 3, seconds, st)
        s.image_out.publish(image)
        s.info_pub.publish(info)
        if frame.depth is not None and s.depth_pub is not None:
            depth = self._image(s, frame.depth, '32FC1', 4, seconds, st)
            s.depth_out.publish(depth)
            s.depth_info_pub.publish(info)
        self._send_derived(s, frame, st)
        s.meter.tick()
        s.frames += 1
        hook = self.frame_hooks.get(s.cfg.channel)
        if hook is not None:
            hook(frame.rgb, seconds)

    def _send_derived(self, s, frame, st):
        """Compressed images and point clouds, each only while subscribed: encoded here,
        on the camera thread, never on the physics path."""
        rgb = None
        if s.compressed_pub.get_subscription_count() > 0:
            rgb = frame.rgb[::-1]
            fmt, data = compress.encode(rgb, *self.compression)
            s.compressed_pub.publish(compressed_msg(fmt, data, st, s.frame))
        if frame.depth is None:
            return
        depth = None
        if s.points_pub is not None and s.projector is not None and \
                s.points_pub.get_subscription_count() > 0:
            depth = frame.depth[::-1]
            rgb = frame.rgb[::-1] if rgb is None else rgb
            data = s.projector.cloud(depth, rgb, far=self._far * 0.999)
            s.points_pub.publish(cloud_msg(data, s.cfg.height, s.cfg.width, st, s.frame,
                                           rgb=True))
        if s.cdepth_pub is not None and s.cdepth_pub.get_subscription_count() > 0:
            depth = frame.depth[::-1] if depth is None else depth
            fmt, data = compress.encode_depth(np.where(depth >= self._far * 0.999, np.nan,
                                                       depth))
            s.cdepth_pub.publish(compressed_msg(fmt, data, st, s.frame))

    def _image(self, s, rows_up, encoding, bytes_per_pixel, seconds, stamp):
        """Serialized bytes on the fast path (flipped on the way: one copy into the stream's
        own buffer, without the GIL; a message object costs several copies and the GIL),
        else the message. ``rows_up``: the frame's pixels bottom row first, as OpenGL reads
        them."""
        if not self.raw:
            return image_msg(rows_up[::-1], encoding, bytes_per_pixel, stamp, s.frame)
        packer = s.packers.get(encoding)
        if packer is None:
            h, w = int(rows_up.shape[0]), int(rows_up.shape[1])
            packer = s.packers[encoding] = cdr.ImageBytes(
                h, w, encoding, w * bytes_per_pixel, s.frame, sys.byteorder == 'big')
        return packer.pack_in_place(seconds, rows_up, bottom_up=True)


def raw_images_ok() -> bool:
    """Whether this middleware reads a packed frame (flipped from OpenGL's row order) and
    a restamped camera_info back as the messages they stand for."""
    pixels = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    try:
        msg = deserialize_message(
            cdr.ImageBytes(2, 4, 'rgb8', 12, 'f').pack(1.5, pixels[::-1].copy(),
                                                       bottom_up=True), Image)
        info = CameraInfo(width=4, height=2, k=[float(i) for i in range(9)])
        info.header.frame_id = 'f'
        info = deserialize_message(
            cdr.HeaderFirstBytes(serialize_message(info)).pack(2.25), CameraInfo)
    except Exception:  # noqa: BLE001 - any failure to read back means: send messages
        return False
    return ((msg.height, msg.width, msg.step, msg.encoding, msg.header.frame_id)
            == (2, 4, 12, 'rgb8', 'f') and bytes(msg.data) == pixels.tobytes()
            and msg.header.stamp.nanosec == 500_000_000
            and (info.header.stamp.sec, info.header.stamp.nanosec) == (2, 250_000_000)
            and info.header.frame_id == 'f' and list(info.k) == [float(i) for i in range(9)])


def image_msg(pixels: np.ndarray, encoding: str, bytes_per_pixel: int, stamp: Time,
              frame: str) -> Image:
    msg = Image()
    msg.header.stamp = stamp
    msg.header.frame_id = frame
    msg.height, msg.width = int(pixels.shape[0]), int(pixels.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = 1 if sys.byteorder == 'big' else 0
    msg.step = msg.width * bytes_per_pixel
    msg.data = pixels.tobytes()
    return msg


def compressed_msg(fmt: str, data: bytes, stamp: Time, frame: str) -> CompressedImage:
    msg = CompressedImage(format=fmt)
    msg.header.stamp = stamp
    msg.header.frame_id = frame
    msg.data = data
    return msg
