"""Named snapshots of the full physics state, and the scene generation that makes them stale.

A snapshot is ``mj_getState(mjSTATE_FULLPHYSICS)`` minus the time: restoring one puts every
position, velocity, activation, warm start and mocap pose back bit for bit, while simulated
time keeps running forward (as ``reset`` does), so ``/clock`` never jumps back. A snapshot
records the scene generation it was taken in; once the scene changed (an entity spawned or
deleted, a world loaded) its state vector describes another model, so loading it is refused
with ``STALE_SNAPSHOT`` instead of writing garbage into the new model.
"""

import threading
from typing import Any

import mujoco
import numpy as np

from ..errors import DeviceError, InvalidArgument, shorten, UnknownName

STALE_SNAPSHOT = 'STALE_SNAPSHOT'
SPEC = int(mujoco.mjtState.mjSTATE_FULLPHYSICS) & ~int(mujoco.mjtState.mjSTATE_TIME)
MAX_SNAPSHOTS = 256
MAX_NAME = 256


def snapshot_name(name: Any, where: str = 'name') -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise InvalidArgument(f'expected a snapshot name (1..{MAX_NAME} characters), got '
                              f'{shorten(name)}', where=where)
    return name


def capture(model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    """The state vector of ``data`` (stepper thread, or a data nobody else writes)."""
    state = np.empty(mujoco.mj_stateSize(model, SPEC))
    mujoco.mj_getState(model, data, state, SPEC)
    return state


class Snapshots:
    """Name -> (generation, state); the scene generation is owned here."""

    def __init__(self):
        self._lock = threading.Lock()
        self._store = {}
        self.generation = 0

    def scene_changed(self) -> None:
        """Every snapshot taken so far now describes another model."""
        with self._lock:
            self.generation += 1

    def put(self, name: str, state: np.ndarray) -> None:
        with self._lock:
            if name not in self._store and len(self._store) >= MAX_SNAPSHOTS:
                raise InvalidArgument(f'{MAX_SNAPSHOTS} snapshots are stored already',
                                      where='save_state',
                                      allowed='overwrite or delete_state one first')
            self._store[name] = (self.generation, state)

    def get(self, name: str) -> np.ndarray:
        with self._lock:
            if name not in self._store:
                raise UnknownName('snapshot', name, list(self._store), where='load_state')
            generation, state = self._store[name]
            if generation != self.generation:
                raise DeviceError(STALE_SNAPSHOT, f'snapshot {shorten(name)} was taken before '
                                  'the scene changed; save a new one', where='load_state',
                                  taken_in=generation, scene=self.generation)
            return state

    def delete(self, name: str) -> None:
        with self._lock:
            if name not in self._store:
                raise UnknownName('snapshot', name, list(self._store), where='delete_state')
            del self._store[name]

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._store)

    def fresh(self, name: str) -> bool:
        with self._lock:
            return name in self._store and self._store[name][0] == self.generation
