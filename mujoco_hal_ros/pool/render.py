"""Camera images of pool environments, rendered on threads of the renderer's own.

Why threads of its own, and why a render is a job: a generated dataset needs an image per
environment per control step, and with Mesa's software rasteriser a frame costs far more
than the physics step. Rendering in one loop serialises the whole pool behind the
rasteriser; ``mjr_render`` releases the GIL, so ``nthread`` threads render ``nthread``
environments at once. Rendering on the stepping workers still left the cores idle while the
caller worked out the next actions (a scripted expert's IK) and the pool stepped: a job that
renders the states of the moment while the caller goes on (``EnvPool.render_async``) keeps
them busy (``bench/bench_dataset_generate.py``). So the renderer has its own ``Workers`` (its
own scratch MjData and patched-model copies, never the stepping slots') driven by one
dispatch thread that runs the jobs in order; a reset or restore that changes environments'
models waits for the jobs in flight first (``EnvPool``), so a job always draws the model the
state was stepped on.

Why a GL context per thread: a context is current in at most one thread, and with EGL one
that another thread has made current cannot be used again by the thread that made it
(``render/camera.py``, measured on llvmpipe). So every rendering thread (the dispatch thread,
which works slot 0, and the workers' executor threads) makes its own
``offscreen.Offscreen`` on first use, keeps it for the renderer's life, and frees it itself:
``close`` reaches every one of them once through ``Workers.run_on_each_thread``.

The environment's state row (copied when the job is made) is loaded into the worker slot's
scratch MjData, with ``mj_forward`` for the poses the scene reads, on the environment's own
(possibly randomized) model, so patched colours and sizes show. Images are "fast" as
``render/camera.py`` makes them: no shadows, reflections or multisampling (a private model
copy with ``offsamples=0``; the pool's models are untouched).
"""

from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
import copy
import threading
from typing import Any

import mujoco
import numpy as np

from ..errors import ClosedError, InvalidArgument, UnknownName
from ..render import gl
from .engine import Workers
from .layout import INTEGRATION

MAX_SIZE = 2048


def camera_id(model: mujoco.MjModel, camera: str | int) -> int:
    """A named camera's index; UnknownName listing the model's cameras otherwise."""
    names = [model.camera(i).name for i in range(model.ncam)]
    if isinstance(camera, str):
        if camera not in names:
            raise UnknownName('camera', camera, [n for n in names if n], where='cameras')
        return names.index(camera)
    if isinstance(camera, (bool, np.bool_)) or not isinstance(camera, (int, np.integer)) \
            or not 0 <= int(camera) < model.ncam:
        raise InvalidArgument(f'camera {camera!r} is not a camera name or index',
                              where='cameras', allowed=', '.join(n for n in names if n)
                              or 'the model has no cameras')
    return int(camera)


def check_size(width: Any, height: Any) -> tuple[int, int]:
    """(width, height) as ints in 1..MAX_SIZE, or InvalidArgument."""
    out = []
    for name, value in (('width', width), ('height', height)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or not 1 <= int(value) <= MAX_SIZE:
            raise InvalidArgument(f'image {name} {value!r} is not an integer in 1..{MAX_SIZE}',
                                  where=name, allowed=f'1..{MAX_SIZE}')
        out.append(int(value))
    return out[0], out[1]


def check_request(model: mujoco.MjModel, cameras: Any, width: Any, height: Any
                  ) -> tuple[list[int], int, int]:
    """(camera indices, width, height) of a render request, or the error naming what to fix."""
    if isinstance(cameras, (str, bytes)) or not isinstance(cameras, Sequence) or not cameras:
        raise InvalidArgument(f'cameras must be a non-empty list, got {cameras!r}',
                              where='cameras', allowed='camera names or indices')
    return [camera_id(model, c) for c in cameras], *check_size(width, height)


class _ThreadView:
    """One thread's GL context for one (variant, size), with a scene and its options."""

    def __init__(self, render_model: mujoco.MjModel, width: int, height: int) -> None:
        from ..render import offscreen
        self.offscreen = offscreen.Offscreen(render_model, width, height, fast=True, scenes=1)
        self.scene = self.offscreen.scenes[0]
        self.option = mujoco.MjvOption()
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_FIXED

    def draw(self, model: mujoco.MjModel, data: mujoco.MjData, cam: int,
             out: np.ndarray) -> None:
        self.camera.fixedcamid = cam
        mujoco.mjv_updateScene(model, data, self.option, None, self.camera,
                               mujoco.mjtCatBit.mjCAT_ALL, self.scene)
        frame = self.offscreen.draw(self.scene)
        assert frame.rgb is not None    # asked for colour
        out[...] = frame.rgb[::-1]     # OpenGL reads bottom row first

    def free(self) -> None:
        self.offscreen.free()


class PoolRenderer:
    """RGB images of environments' states, as jobs run in order on the renderer's threads."""

    def __init__(self, variants: tuple, nthread: int, patches: Any, variant_of: np.ndarray
                 ) -> None:
        problem = gl.probe()
        if problem is not None:
            from ..errors import ConfigError
            raise ConfigError(f'the pool cannot render: {problem}')
        self._variants = variants
        self._workers = Workers(variants, nthread)
        self._dispatch = ThreadPoolExecutor(1, thread_name_prefix='envpool-render')
        self._patches = patches
        self._variant_of = variant_of
        self._render_models: dict = {}         # (variant, w, h) -> private model copy
        self._views: dict = {}                 # thread ident -> {(variant, w, h): _ThreadView}
        self._lock = threading.Lock()
        self._jobs: deque[Future] = deque()    # submitted, perhaps not finished
        self._closed = False

    def _render_model(self, variant: int, width: int, height: int) -> mujoco.MjModel:
        key = (variant, width, height)
        with self._lock:
            if key not in self._render_models:
                private = copy.copy(self._variants[variant])
                vis = private.vis
                vis.global_.offwidth = max(vis.global_.offwidth, width)
                vis.global_.offheight = max(vis.global_.offheight, height)
                vis.quality.offsamples = 0
                self._render_models[key] = private
            return self._render_models[key]

    def _view(self, variant: int, width: int, height: int) -> _ThreadView:
        me = threading.get_ident()
        with self._lock:
            mine = self._views.setdefault(me, {})
            view = mine.get((variant, width, height))
        if view is None:
            view = _ThreadView(self._render_model(variant, width, height), width, height)
            with self._lock:
                mine[(variant, width, height)] = view
        return view

    def submit(self, rows: np.ndarray, ids: np.ndarray, cams: list[int], width: int,
               height: int) -> 'Future[np.ndarray]':
        """A job drawing ``rows`` (state rows of environments ``ids``, owned by the job from
        now on): its result is ``(len(cams), n, height, width, 3)`` uint8, top row first."""
        if self._closed:
            raise ClosedError('PoolRenderer')
        envs = ids.tolist()
        variant = self._variant_of[ids].tolist()
        patches, models = self._patches, self._variants

        def job() -> np.ndarray:
            out = np.empty((len(cams), len(envs), height, width, 3), np.uint8)

            def work(slot, chunk):
                for p in chunk:
                    v = variant[p]
                    m = patches.model_for(slot, v, envs[p]) if patches.keys_of[envs[p]] \
                        else models[v]
                    d = slot.datas[v]
                    mujoco.mj_setState(m, d, rows[p], INTEGRATION)
                    mujoco.mj_forward(m, d)
                    view = self._view(v, width, height)
                    for k, cam in enumerate(cams):
                        view.draw(m, d, cam, out[k, p])

            self._workers.run(work, len(envs))
            return out

        future = self._dispatch.submit(job)
        with self._lock:
            while self._jobs and self._jobs[0].done():
                self._jobs.popleft()
            self._jobs.append(future)
        return future

    def render(self, rows: np.ndarray, ids: np.ndarray, cams: list[int], width: int,
               height: int) -> np.ndarray:
        """``submit``, waiting for the images."""
        return self.submit(rows, ids, cams, width, height).result()

    def wait(self) -> None:
        """Return once every job submitted so far has finished (its errors stay its own)."""
        with self._lock:
            jobs, self._jobs = list(self._jobs), deque()
        wait(jobs)

    def close(self) -> None:
        """Finish the jobs in flight, then free every thread's contexts on the thread that
        made them (see the module doc)."""
        if self._closed:
            return
        self._closed = True
        self.wait()

        def free_mine():
            with self._lock:
                mine = self._views.pop(threading.get_ident(), {})
            for view in mine.values():
                view.free()

        try:
            self._dispatch.submit(self._workers.run_on_each_thread, free_mine).result()
        finally:
            self._dispatch.shutdown(wait=True)
            self._workers.close()
        with self._lock:
            rest, self._views = list(self._views.values()), {}
        for views in rest:
            for view in views.values():
                view.free()
        self._render_models = {}
