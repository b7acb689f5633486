"""Camera images of pool environments, rendered on threads of the renderer's own.

Why threads of its own, and why a render is a job: a generated dataset needs an image per
environment per control step, and with Mesa's software rasteriser a frame costs far more
than the physics step. Rendering in one loop serialises the whole pool behind the
rasteriser; ``mjr_render`` releases the GIL, so ``nthread`` threads render ``nthread``
environments at once. Rendering on the stepping workers still left the cores idle while the
caller worked out the next actions (a scripted expert's IK) and the pool stepped: a job that
renders the states of the moment while the caller goes on (``EnvPool.render_async``) keeps
them busy (``bench/bench_dataset_generate.py``). So the renderer has threads of its own, each
with its own scratch MjData and patched-model copies (never the stepping slots'), taking one
environment's task at a time from one queue in order; a reset or restore that changes
environments' models waits for the jobs in flight first (``EnvPool``), so a job always
draws the model the state was stepped on.

Why a GL context per thread: a context is current in at most one thread, and with EGL one
that another thread has made current cannot be used again by the thread that made it
(``render/camera.py``, measured on llvmpipe). So each rendering thread makes its own
``offscreen.Offscreen`` on first use, keeps it for the renderer's life, and frees it itself
when ``close`` ends the thread.

The environment's state row (copied when the job is made) is loaded into the worker slot's
scratch MjData, with ``mj_forward`` for the poses the scene reads, on the environment's own
(possibly randomized) model, so patched colours and sizes show. Images are "fast" as
``render/camera.py`` makes them: no shadows, reflections or multisampling (a private model
copy with ``offsamples=0``; the pool's models are untouched).
"""

from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
import copy
import functools
import queue
import threading
from typing import Any

import mujoco
import numpy as np

from ..errors import ClosedError, InvalidArgument, UnknownName
from ..render import gl
from .engine import Slot
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
    """RGB images of environments' states, as jobs of one task an environment, taken in
    order by the renderer's threads; each thread owns its scratch data and GL contexts."""

    def __init__(self, variants: tuple, nthread: int, patches: Any, variant_of: np.ndarray
                 ) -> None:
        problem = gl.probe()
        if problem is not None:
            from ..errors import ConfigError
            raise ConfigError(f'the pool cannot render: {problem}')
        self._variants = variants
        self._patches = patches
        self._variant_of = variant_of
        self._render_models: dict = {}         # (variant, w, h) -> private model copy
        self._lock = threading.Lock()
        self._jobs: deque[Future] = deque()    # submitted, perhaps not finished
        self.contexts = 0                      # GL contexts made and not yet freed
        self._closed = False
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._serve, daemon=True,
                                          name=f'envpool-render-{k}') for k in range(nthread)]
        for thread in self._threads:
            thread.start()

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

    def _serve(self) -> None:
        """A rendering thread: tasks until ``close``'s None, then free what it made."""
        slot = Slot(self._variants)
        views: dict[tuple[int, int, int], _ThreadView] = {}

        def view(variant: int, width: int, height: int) -> _ThreadView:
            key = (variant, width, height)
            if key not in views:
                views[key] = _ThreadView(self._render_model(*key), width, height)
                with self._lock:
                    self.contexts += 1
            return views[key]

        try:
            while (task := self._tasks.get()) is not None:
                task(slot, view)
        finally:
            for made in views.values():
                made.free()
                with self._lock:
                    self.contexts -= 1
            slot.release()

    def submit(self, rows: np.ndarray, ids: np.ndarray, cams: list[int], width: int,
               height: int) -> 'Future[np.ndarray]':
        """A job drawing ``rows`` (state rows of environments ``ids``, owned by the job from
        now on): its result is ``(len(cams), n, height, width, 3)`` uint8, top row first.

        Why a task an environment rather than a batch the threads share: a thread that
        finishes its part of one job starts on the next job at once instead of waiting for
        the other threads at the end of each (about a tenth of two cores, measured with
        ``bench/bench_dataset_generate.py``)."""
        if self._closed:
            raise ClosedError('PoolRenderer')
        envs = ids.tolist()
        variant = self._variant_of[ids].tolist()
        patches, models = self._patches, self._variants
        out = np.empty((len(cams), len(envs), height, width, 3), np.uint8)
        job: Future[np.ndarray] = Future()
        job.set_running_or_notify_cancel()
        left, errors = [len(envs)], []
        count = threading.Lock()

        def part(p: int, slot: Slot, view: Callable[[int, int, int], _ThreadView]) -> None:
            try:
                v = variant[p]
                m = patches.model_for(slot, v, envs[p]) if patches.keys_of[envs[p]] \
                    else models[v]
                d = slot.datas[v]
                mujoco.mj_setState(m, d, rows[p], INTEGRATION)
                mujoco.mj_forward(m, d)
                drawer = view(v, width, height)
                for k, cam in enumerate(cams):
                    drawer.draw(m, d, cam, out[k, p])
            except BaseException as exc:  # noqa: BLE001 - the job's caller gets it
                errors.append(exc)
            finally:
                with count:
                    left[0] -= 1
                    last = left[0] == 0
                if last:
                    if errors:
                        job.set_exception(errors[0])
                    else:
                        job.set_result(out)

        if not envs:
            job.set_result(out)
        for p in range(len(envs)):
            self._tasks.put(functools.partial(part, p))
        with self._lock:
            while self._jobs and self._jobs[0].done():
                self._jobs.popleft()
            self._jobs.append(job)
        return job

    def wait(self) -> None:
        """Return once every job submitted so far has finished (its errors stay its own)."""
        with self._lock:
            jobs, self._jobs = list(self._jobs), deque()
        wait(jobs)

    def close(self) -> None:
        """Finish the jobs in flight; every thread then frees its contexts and ends."""
        if self._closed:
            return
        self._closed = True
        self.wait()
        for _ in self._threads:
            self._tasks.put(None)
        for thread in self._threads:
            thread.join()
        self._render_models = {}
