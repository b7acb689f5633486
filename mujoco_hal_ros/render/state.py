"""The render state: the one MjData that cameras draw from, with the one lock that guards it.

Rendering never touches the stepper's MjData: a snapshot carries positions, not the derived
quantities a scene needs, so a private MjData is posed from it (``mj_forward``) first.
Every camera of a device shares that MjData, and posing it for one snapshot while another
camera's scene is being built from it would draw a mix of two states; so it has one owner,
and the only way in is a ``with`` block that holds its lock while the caller draws.
``pose_at`` is how any private MjData is posed from a snapshot (entities read theirs so).
"""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
import threading
from typing import TYPE_CHECKING

import mujoco

if TYPE_CHECKING:
    from ..sim.snapshot import Snapshot


class RenderState:
    """A model's render MjData, posed from snapshots under one lock."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self.model = model
        # made on first use: a device without cameras never
        self._data: mujoco.MjData | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def posed(self, snap: Snapshot) -> Iterator[mujoco.MjData]:
        """``with state.posed(snap) as data:`` the MjData at ``snap`` for the block."""
        with self._lock:
            if self._data is None:
                self._data = mujoco.MjData(self.model)
            pose_at(self.model, self._data, snap)
            yield self._data

    def copy_of(self, snap: Snapshot) -> mujoco.MjData:
        """A new MjData of the caller's own, posed at ``snap``."""
        data = mujoco.MjData(self.model)
        pose_at(self.model, data, snap)
        return data


def pose_at(model: mujoco.MjModel, data: mujoco.MjData, snap: Snapshot) -> None:
    """Pose a private MjData at a snapshot: its state, and everything derived from it
    (``mj_forward``), so frames, poses and velocities read from it are the snapshot's."""
    data.qpos[:], data.qvel[:] = snap.qpos, snap.qvel
    data.mocap_pos[:], data.mocap_quat[:] = snap.mocap_pos, snap.mocap_quat
    data.act[:] = snap.act
    data.time = snap.time
    mujoco.mj_forward(model, data)
