"""The rendering state of one device: a render MjData per scene generation and the camera
renderers (GL contexts) drawn from it, owned here and closed here.

Readers pose their own view from a snapshot; the snapshot says which scene generation its
arrays belong to, so the registry keeps the current model and the one before (a reader may
hold a snapshot taken just before a swap). Renderers of older generations are retired at a
swap and closed later by ``close_retired``, on the thread that asked for the swap: a GL
context is never freed on the physics thread. Of the device it sees only
``sim.ports.CameraHost`` (its image channels, the latest snapshot, whether it is closed).
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from .. import errors
from ..errors import DeviceError
from ..world import snapshots as world_snapshots
from .state import RenderState

if TYPE_CHECKING:
    from ..sim.ports import CameraHost
    from ..sim.snapshot import Snapshot
    from .camera import CameraRenderer

    #: A renderer's key: camera, width, height, depth, background, scene generation.
    RendererKey = tuple[str | int, int, int, bool, bool, int]


class RenderRegistry:
    """``device.cameras``: render states by generation and the device's camera renderers."""

    def __init__(self, device: CameraHost, model: mujoco.MjModel, generation: int) -> None:
        self._device = device
        self._states = {generation: RenderState(model)}
        self._renderers: dict[RendererKey, CameraRenderer] = {}
        # renderers of replaced models: close_retired closes them
        self._retired: list[CameraRenderer] = []
        self._lock = threading.Lock()

    # --- following swaps (the device calls these) -------------------------------------------
    def follow(self, model: mujoco.MjModel, generation: int) -> None:
        """A new scene generation is in: its render state, and only the one before kept.
        Physics thread, at the swap: nothing here frees GL (``close_retired`` does)."""
        self._states[generation] = RenderState(model)
        for g in [g for g in self._states if g < generation - 1]:
            del self._states[g]
        with self._lock:
            old = [k for k in self._renderers if k[-1] < generation - 1]
            self._retired.extend(self._renderers.pop(k) for k in old)

    def close_retired(self) -> None:
        with self._lock:
            retired, self._retired = self._retired, []
        for r in retired:
            r.close()

    # --- drawing -------------------------------------------------------------------------------
    def image_size(self, camera: str | int, width: int | None = None,
                   height: int | None = None) -> tuple[str | int, int, int]:
        """(camera, width, height): an image channel's own, or a camera of the model's."""
        layout = self._device.layout
        chan = next((i for i in layout.images if i.name == camera), None)
        if chan is not None and camera not in layout.cameras:
            camera = chan.camera
        if chan is not None:
            width = chan.width if width is None else width
            height = chan.height if height is None else height
        return camera, 640 if width is None else width, 480 if height is None else height

    def renderer(self, camera: str | int, width: int | None = None, height: int | None = None,
                 depth: bool = False, background: bool = False,
                 generation: int | None = None) -> CameraRenderer:
        """A camera renderer owned by the device (closed with it). ``camera`` is a camera
        of the model or an image channel (whose size is then the default); ``background``
        as in ``CameraRenderer``. It draws the model of ``generation`` (by default the
        latest snapshot's): pose it only from snapshots of that generation."""
        from .camera import CameraRenderer
        if generation is None:
            generation = self._device.snapshot.generation
        model = self.state_of(generation).model
        camera, width, height = self.image_size(camera, width, height)
        key = (camera, width, height, bool(depth), bool(background), generation)
        with self._lock:
            if self._device.closed:
                raise errors.ClosedError('the device')
            if key not in self._renderers:
                self._renderers[key] = CameraRenderer(model, camera, width, height,
                                                      depth=depth, background=background)
            return self._renderers[key]

    def model_of(self, generation: int) -> mujoco.MjModel:
        """The model of a scene generation (the current one or the one before), for
        readers that pose their own MjData from a snapshot (``snapshot.generation``)."""
        return self.state_of(generation).model

    def state_of(self, generation: int) -> RenderState:
        state = self._states.get(generation)
        if state is None:
            raise DeviceError(world_snapshots.STALE_SNAPSHOT, f'scene generation {generation} '
                              'was replaced; use the latest snapshot', where='snapshot')
        return state

    def render_state(self, snap: Snapshot | None = None,
                     ) -> contextlib.AbstractContextManager[mujoco.MjData]:
        """``with device.cameras.render_state(snap) as data:`` the device's render MjData
        posed at ``snap`` (the latest snapshot by default), for as long as the block runs:
        the one way to draw from it, so two cameras never pose it under each other. The
        MjData is of the model ``snap`` belongs to (its ``generation``)."""
        snap = snap or self._device.snapshot
        return self.state_of(snap.generation).posed(snap)

    def render_data(self, snap: Snapshot | None = None) -> mujoco.MjData:
        """A new MjData of its own posed at ``snap`` (the latest by default): for a caller
        that keeps it; ``render_state`` draws without the copy."""
        snap = snap or self._device.snapshot
        return self.state_of(snap.generation).copy_of(snap)

    def render(self, camera: str | int, width: int | None = None, height: int | None = None,
               png: bool = False) -> np.ndarray | bytes:
        """RGB array (or PNG bytes) of a camera or image channel at the latest snapshot."""
        snap = self._device.snapshot
        r = self.renderer(camera, width, height, generation=snap.generation)
        with self.render_state(snap) as d:
            return r.render_png(d) if png else r.render_rgb(d)

    def close(self) -> None:
        with self._lock:
            for r in list(self._renderers.values()) + self._retired:
                r.close()
            self._renderers.clear()
            self._retired.clear()
