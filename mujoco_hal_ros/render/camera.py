"""Simulated cameras: RGB, depth and PNG frames from a named MuJoCo camera, plus ROS intrinsics.

Threads. An OpenGL context is current in at most one thread at a time: with EGL, a
context created in one thread and rendered from another fails with ``EGL_BAD_ACCESS`` in
``eglMakeCurrent`` (checked on Mesa llvmpipe), and once a second thread has made it current
the first one cannot use it either. ROS executors call back from whatever thread they like,
so ``CameraRenderer`` owns one private GL thread that creates the context (an
``offscreen.Offscreen``), draws and frees it. Callers from any thread hand the GL work to it
and wait (``render_*``) or collect it later (``submit``). The scene update
(``mjv_updateScene``, which reads ``MjData``) runs in the caller's thread, so the caller's
own locking around ``data`` covers it, and the GL thread only touches the renderer's private
scenes. The hand-off costs a small fraction of a frame. PNG encoding also
runs in the caller's thread: OpenCV releases the GIL, so several cameras encode in parallel.

Fast mode (``fast=True``, the default) turns off shadows and reflections for this renderer's
scene and renders without multisampling (a private model copy with ``offsamples=0``; the
caller's model is not modified). With Mesa's software rasteriser that makes a frame
several times to tens of times cheaper (``bench/README.md``). The cost: no cast shadows
(contact is harder to judge by eye), no mirror reflections on reflective floors, and
jagged edges. Geometry, colours, textures and depth are unchanged, so perception that
relies on them is unaffected.
"""

import atexit
import collections
import concurrent.futures
import copy
import math
import numbers
import threading
from types import TracebackType
from typing import Any

import numpy as np

from ..checks import is_bool
from ..errors import ClosedError, ConfigError, InvalidArgument, UnknownName
from ..fastpath import sched
from ..fastpath.raster import rasterisers_in_background
from . import gl, offscreen

try:  # before `import mujoco`, which reads MUJOCO_GL once
    gl.ensure_headless_gl()
    _GL_SETUP_ERROR = None
except ConfigError as _err:  # a process that never renders must still import this module
    _GL_SETUP_ERROR = _err

import cv2  # noqa: E402
import mujoco  # noqa: E402

MAX_SIZE = 2048

# zlib level 1 and no row filter, chosen for speed. Level 0 stores raw pixels (900 KiB at
# 640x480) and higher levels buy little size for much more time. OpenCV's default lets
# libpng try every row filter; on rendered frames that mostly costs time
# (bench/README.md has the comparison). Lossless either way.
PNG_PARAMS = (cv2.IMWRITE_PNG_COMPRESSION, 1, cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_NONE)

# v_optical = OPTICAL_FROM_MUJOCO @ v_mujoco_camera: MuJoCo cameras look along -z with y up;
# ROS optical frames (REP 103) look along +z with y down; x is "right" in both.
OPTICAL_FROM_MUJOCO = np.diag([1.0, -1.0, -1.0])

CameraDescription = collections.namedtuple(
    'CameraDescription', 'id name body orthographic fovy uses_intrinsics resolution')


def camera_names(model: mujoco.MjModel) -> list[str]:
    """Names a ``CameraRenderer`` accepts, in model order; unnamed cameras are skipped."""
    names = []
    for cid in range(model.ncam):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, cid)
        if name:
            names.append(name)
    return names


def list_cameras(model: mujoco.MjModel) -> list['CameraDescription']:
    """Describe every camera so a launch file or a UI can offer them without reading the XML."""
    out = []
    for cid in range(model.ncam):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, cid)
        body = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.cam_bodyid[cid]))
        out.append(CameraDescription(
            id=cid, name=name, body=body or 'world', orthographic=_orthographic(model, cid),
            fovy=float(model.cam_fovy[cid]),
            uses_intrinsics=bool(model.cam_sensorsize[cid][1] > 0),
            resolution=tuple(int(v) for v in model.cam_resolution[cid])))
    return out


def _orthographic(model, cid):
    if hasattr(model, 'cam_projection'):
        return int(model.cam_projection[cid]) == int(mujoco.mjtProjection.mjPROJ_ORTHOGRAPHIC)
    return bool(model.cam_orthographic[cid])  # MuJoCo before 3.3


def _pixels(value, where, buffer_size):
    """An image side in pixels: whole numbers 1..MAX_SIZE, never bool or a fractional float."""
    allowed = f'an integer 1..{MAX_SIZE}'
    if is_bool(value) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise InvalidArgument(f'expected a whole number of pixels, got {value!r}',
                              where=where, allowed=allowed)
    as_float = float(value)
    if not math.isfinite(as_float) or as_float != int(as_float):
        raise InvalidArgument(f'expected a whole number of pixels, got {value!r}',
                              where=where, allowed=allowed)
    pixels = int(as_float)
    if not 1 <= pixels <= MAX_SIZE:
        raise InvalidArgument(
            f'{pixels} pixels is outside 1..{MAX_SIZE} (the model offscreen buffer is '
            f'{buffer_size}; sizes above it are served from a private enlarged copy, up to '
            f'{MAX_SIZE})', where=where, allowed=allowed)
    return pixels


class _GLThread:
    """The one thread that ever makes this renderer's GL context current."""

    def __init__(self, name):
        self._jobs = collections.deque()
        self._wake = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # Python around each frame holds the GIL: wake promptly so other threads of the
        # process never wait on a descheduled holder (sched.py)
        sched.short_slice()
        while True:
            with self._wake:
                while not self._jobs and not self._stopping:
                    self._wake.wait()
                if not self._jobs:
                    return
                fn, future = self._jobs.popleft()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as err:  # noqa: BLE001 - handed to the caller
                    future.set_exception(err)

    def submit(self, fn):
        """Queue ``fn`` for the GL thread; its Future. Jobs run in the order submitted."""
        future = concurrent.futures.Future()
        with self._wake:
            if self._stopping:
                raise RuntimeError('GL thread stopped')
            self._jobs.append((fn, future))
            self._wake.notify()
        return future

    def call(self, fn):
        if threading.current_thread() is self._thread:
            return fn()
        return self.submit(fn).result()

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()


class _Owned:
    """What must be freed; kept apart from CameraRenderer so finalizers do not revive it."""

    def __init__(self, thread):
        self.thread = thread
        self.renderer = None
        self.closed = False

    def release(self) -> None:
        if self.closed:
            return
        self.closed = True
        renderer, self.renderer = self.renderer, None
        try:
            if renderer is not None:
                self.thread.call(renderer.free)
        finally:
            self.thread.stop()


_LIVE: set['_Owned'] = set()
_LIVE_LOCK = threading.Lock()


def _close_all_at_exit() -> None:
    """Free contexts before mujoco.egl terminates the EGL display (atexit runs LIFO).

    Registered after ``import mujoco`` above, so it runs first; daemon GL threads are still
    alive during atexit.
    """
    with _LIVE_LOCK:
        owned = list(_LIVE)
        _LIVE.clear()
    for item in owned:
        try:
            item.release()
        except Exception:  # noqa: BLE001 - nothing left to report to at exit
            pass


atexit.register(_close_all_at_exit)


class CameraRenderer:
    """Renders one named camera of a model; owns a GL context and the thread that uses it.

    ``depth=True`` declares an RGB-D camera: ``render_depth``/``render_rgbd`` are refused
    otherwise, so a node can tell from the object which streams it has to offer.
    ``background=True`` rasterises only on CPU time nothing else in the machine wants (see
    ``fastpath.raster``; nothing changes with the fast paths off): for a process whose
    physics and state publishing must keep their rate while frames are best effort. Mesa's
    rasteriser threads may serve every renderer of the process.
    """

    def __init__(self, model: mujoco.MjModel, camera: str | int, width: int = 640,
                 height: int = 480, depth: bool = False, fast: bool = True,
                 background: bool = False) -> None:
        if not isinstance(model, mujoco.MjModel):
            raise InvalidArgument(f'expected a mujoco.MjModel, got {type(model).__name__}',
                                  where='model')
        names = camera_names(model)
        if not isinstance(camera, str) or camera not in names:
            raise UnknownName('camera', camera, names)
        buffer = f'{model.vis.global_.offwidth}x{model.vis.global_.offheight}'
        self._width = _pixels(width, 'width', buffer)
        self._height = _pixels(height, 'height', buffer)
        if not isinstance(depth, (bool, np.bool_)) or not isinstance(fast, (bool, np.bool_)):
            raise InvalidArgument('depth and fast must be booleans', where='depth/fast')
        if not is_bool(background):
            raise InvalidArgument(f'background must be a boolean, got {background!r}',
                                  where='background')
        self._depth = bool(depth)
        self._fast = bool(fast)
        self._name = camera
        self._model = model
        self._cam_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        self._mjv_camera = mujoco.MjvCamera()
        self._mjv_camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._mjv_camera.fixedcamid = self._cam_id
        self._orthographic = _orthographic(model, self._cam_id)
        self._intrinsics = None if self._orthographic else self._compute_intrinsics()
        self._option = mujoco.MjvOption()
        self._lock = threading.Lock()
        self._next_scene = 0
        # the frame last drawn from each scene
        self._scene_jobs: list[Any] = [None] * offscreen.SCENES

        if _GL_SETUP_ERROR is not None:
            raise ConfigError(f'cannot render camera {camera!r}: {_GL_SETUP_ERROR}',
                              where='camera')
        self._owned = _Owned(_GLThread(f'camera-gl-{camera}'))
        try:
            self._owned.renderer = self._owned.thread.call(self._create_renderer)
            if background:
                rasterisers_in_background()
        except Exception as err:
            self._owned.release()
            raise ConfigError(f'cannot render camera {camera!r}: '
                              f'{gl.describe_failure(err)}', where='camera') from err
        with _LIVE_LOCK:
            _LIVE.add(self._owned)

    def _render_model(self):
        """The model the GL context is built from: the caller's, or a private copy.

        A copy only when needed: MSAA is fixed at context creation (``offsamples``) and the
        framebuffer must cover the image (``offwidth``/``offheight``). Changing them on the
        caller's model would alter every other renderer built from it later.
        """
        vis = self._model.vis
        grow = self._width > vis.global_.offwidth or self._height > vis.global_.offheight
        no_msaa = self._fast and vis.quality.offsamples != 0
        if not grow and not no_msaa:
            return self._model
        private = copy.copy(self._model)
        private.vis.global_.offwidth = max(private.vis.global_.offwidth, self._width)
        private.vis.global_.offheight = max(private.vis.global_.offheight, self._height)
        if no_msaa:
            private.vis.quality.offsamples = 0
        return private

    def _create_renderer(self):
        return offscreen.Offscreen(self._render_model(), self._width, self._height,
                                   fast=self._fast)

    # -- properties -----------------------------------------------------------------------

    @property
    def camera(self) -> str:
        return self._name

    @property
    def camera_id(self) -> int:
        return self._cam_id

    @property
    def width(self) -> int:
        return self._width

    @property
    def height(self) -> int:
        return self._height

    @property
    def has_depth(self) -> bool:
        return self._depth

    @property
    def closed(self) -> bool:
        return self._owned.closed

    # -- rendering ------------------------------------------------------------------------

    def _check_data(self, data):
        if not isinstance(data, mujoco.MjData):
            raise InvalidArgument(f'expected a mujoco.MjData, got {type(data).__name__}',
                                  where='data')
        m = self._model
        if data.qpos.shape[0] != m.nq or data.xpos.shape[0] != m.nbody:
            raise InvalidArgument('data was made for a different model '
                                  f'(nq {data.qpos.shape[0]} vs {m.nq})', where='data')

    def submit(self, data: mujoco.MjData, rgb: bool = True, depth: bool = False
               ) -> 'concurrent.futures.Future[offscreen.Frame]':
        """Start a frame of ``data`` as it is now; a Future of an ``offscreen.Frame``.

        The scene is updated here, in the caller's thread, so ``data`` may change as soon
        as this returns; the GL thread draws it while the caller prepares the next one. Up
        to ``offscreen.SCENES`` frames are in flight: a further call first waits for the
        oldest to be drawn. The frame's rows are bottom-up, as OpenGL reads them.
        """
        self._check_data(data)
        if depth:
            self._need_depth()
        with self._lock:
            if self._owned.closed:
                raise ClosedError(f'camera renderer {self._name!r}')
            target = self._owned.renderer
            i = self._next_scene
            self._next_scene = (i + 1) % len(self._scene_jobs)
            if self._scene_jobs[i] is not None:
                concurrent.futures.wait([self._scene_jobs[i]])
            scene = target.scenes[i]
            mujoco.mjv_updateScene(self._model, data, self._option, None, self._mjv_camera,
                                   mujoco.mjtCatBit.mjCAT_ALL.value, scene)
            job = self._owned.thread.submit(lambda: target.draw(scene, rgb, depth))
            self._scene_jobs[i] = job
            return job

    def _render(self, data, rgb, depth):
        """One frame, top-down, for a caller that waits for it."""
        frame = self.submit(data, rgb, depth).result()
        return frame.rgb_top_down(), frame.depth_top_down()

    def _need_depth(self):
        if not self._depth:
            raise InvalidArgument(f'camera renderer {self._name!r} was created without depth',
                                  where='depth', allowed='CameraRenderer(..., depth=True)')

    def render_rgb(self, data: mujoco.MjData) -> np.ndarray:
        """(H, W, 3) uint8 RGB, row 0 at the top, as ROS ``rgb8`` images expect."""
        return self._render(data, True, False)[0]

    def render_depth(self, data: mujoco.MjData) -> np.ndarray:
        """(H, W) float32 distance along the optical axis in metres (ROS ``32FC1``).

        Pixels that see nothing hold the far clipping distance (``vis.map.zfar`` times the
        model extent), not infinity.
        """
        self._need_depth()
        return self._render(data, False, True)[1]

    def render_rgbd(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
        """RGB and depth of the same scene update, so the two images match pixel for pixel."""
        self._need_depth()
        return self._render(data, True, True)

    def render_png(self, data: mujoco.MjData) -> bytes:
        """Lossless PNG bytes of ``render_rgb``; encoded in the caller's thread (see module)."""
        return encode_png(self.render_rgb(data))

    # -- geometry -------------------------------------------------------------------------

    def _compute_intrinsics(self):
        """Pinhole intrinsics matching what the renderer draws, in ROS pixel conventions.

        MuJoCo builds an OpenGL frustum from the camera: from ``fovy`` or, when
        ``sensorsize`` is set (MuJoCo 3+), from focal length, sensor size and principal
        point (``cam_intrinsic``, in length units), which may shift it off-centre.
        ``mjv_cameraFrustum`` returns that frustum at the near plane, so one formula covers
        both. A ``fovy`` camera has no horizontal extent of its own: the renderer widens it
        to the image aspect ratio, so pixels are square (fx = fy). A sensor camera keeps
        the sensor's horizontal extent, so an image whose aspect differs from the sensor's
        has non-square pixels (fx != fy); the tests check both against rendered images.

        ROS (like OpenCV) puts pixel (0, 0) at the centre of the top-left pixel while
        OpenGL's window coordinates put it at that pixel's corner, hence the -0.5: a
        centred optical axis lands at cx = (W - 1) / 2, cy = (H - 1) / 2.
        """
        zver = np.zeros(2, np.float32)
        zhor = np.zeros(2, np.float32)
        zclip = np.zeros(2, np.float32)
        mujoco.mjv_cameraFrustum(zver, zhor, zclip, self._model, self._mjv_camera)
        near = float(zclip[0])
        top, bottom = float(zver[0]), -float(zver[1])
        center = (float(zhor[1]) - float(zhor[0])) / 2.0
        halfwidth = (float(zhor[1]) + float(zhor[0])) / 2.0
        if halfwidth <= 0.0:
            halfwidth = 0.5 * self._width / self._height * (top - bottom)
        fx = self._width * near / (2.0 * halfwidth)
        fy = self._height * near / (top - bottom)
        cx = self._width * (halfwidth - center) / (2.0 * halfwidth) - 0.5
        cy = self._height * top / (top - bottom) - 0.5
        return fx, fy, cx, cy

    def _pinhole(self):
        if self._intrinsics is None:
            raise InvalidArgument(f'camera {self._name!r} is orthographic; a pinhole model '
                                  '(CameraInfo) cannot describe it', where='camera')
        return self._intrinsics

    def intrinsics(self) -> tuple[float, float, float, float]:
        """(fx, fy, cx, cy) in pixels for this renderer's width and height."""
        return self._pinhole()

    def camera_info_fields(self) -> dict[str, Any]:
        """Fields of ``sensor_msgs/CameraInfo`` under their ROS 2 names (``k``, ``p``...).

        Pass them straight to the message constructor. No distortion: the renderer is an
        ideal pinhole, so ``d`` is five zeros under ``plumb_bob``, ``r`` is the identity
        (monocular), and ``p`` is ``k`` with a zero fourth column (no stereo baseline).
        """
        fx, fy, cx, cy = self._pinhole()
        return {
            'width': self._width,
            'height': self._height,
            'distortion_model': 'plumb_bob',
            'd': [0.0] * 5,
            'k': [fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0],
            'r': [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
            'p': [fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0],
        }

    @staticmethod
    def optical_frame_rotation() -> np.ndarray:
        """R with v_optical = R @ v_mujoco_camera (diag(1, -1, -1); it is its own inverse).

        The optical frame's orientation in the world is ``cam_xmat @ R``.
        """
        return OPTICAL_FROM_MUJOCO.copy()

    def optical_pose(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
        """(position (3,), rotation (3, 3)) of the ROS optical frame in world coordinates.

        Reads ``data.cam_xpos``/``cam_xmat``, which are current after ``mj_forward`` or a step.
        """
        self._check_data(data)
        pos = np.array(data.cam_xpos[self._cam_id], dtype=np.float64)
        rot = np.array(data.cam_xmat[self._cam_id], dtype=np.float64).reshape(3, 3)
        return pos, rot @ OPTICAL_FROM_MUJOCO

    # -- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        """Free the GL context and stop the GL thread; safe to call twice, from any thread."""
        with self._lock:
            owned = self._owned
            with _LIVE_LOCK:
                _LIVE.discard(owned)
            owned.release()

    def __enter__(self):
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        owned = getattr(self, '_owned', None)
        if owned is not None and not owned.closed:
            with _LIVE_LOCK:
                _LIVE.discard(owned)
            try:
                owned.release()
            except Exception:  # noqa: BLE001 - interpreter may be shutting down
                pass

    def __repr__(self) -> str:
        state = 'closed' if self.closed else 'open'
        return (f'CameraRenderer({self._name!r}, {self._width}x{self._height}, '
                f'depth={self._depth}, fast={self._fast}, {state})')


def encode_png(rgb: np.ndarray) -> bytes:
    """Lossless PNG of an (H, W, 3) uint8 RGB image; OpenCV wants BGR order."""
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode('.png', bgr, PNG_PARAMS)
    if not ok:
        raise InvalidArgument('PNG encoding failed', where='image')
    return buf.tobytes()
