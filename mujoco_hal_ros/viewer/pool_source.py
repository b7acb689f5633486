"""One environment of an EnvPool, read the way WebViewer reads a Device.

WebViewer needs only ``model`` and ``snapshot`` (time, qpos, qvel, act, mocap pose). Here
each ``snapshot`` is one ``get_state`` row of the chosen environment (the pool's public,
locked read, taken between step chunks) unpacked on a private MjData; a row equal to the
last one returns the same object, so an idle pool sends nothing.
"""

from types import SimpleNamespace
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from ..errors import ConfigError

if TYPE_CHECKING:     # the hints only
    from ..pool import EnvPool
    from ..pool.ray_pool import RayPool

FULLPHYSICS = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)


class PoolSource:
    """``model`` and ``snapshot`` of environment ``env`` of ``pool``."""

    def __init__(self, pool: 'EnvPool | RayPool', env: int = 0) -> None:
        if not isinstance(env, int) or isinstance(env, bool) or not 0 <= env < pool.nbatch:
            raise ConfigError(f'expected an environment 0..{pool.nbatch - 1}, got {env!r}',
                              where='web_viewer_env')
        self.pool, self.env = pool, env
        self.model = pool.variants[int(pool.variant_of[env])]
        self._data = mujoco.MjData(self.model)
        self._row: np.ndarray | None = None
        self._snap: SimpleNamespace | None = None

    @property
    def snapshot(self) -> SimpleNamespace:
        row = self.pool.get_state([self.env])[0]
        if self._snap is not None and self._row is not None and np.array_equal(row, self._row):
            return self._snap
        d = self._data
        mujoco.mj_setState(self.model, d, row, FULLPHYSICS)
        self._row = row.copy()
        self._snap = SimpleNamespace(time=float(d.time), qpos=d.qpos.copy(),
                                     qvel=d.qvel.copy(), act=d.act.copy(),
                                     mocap_pos=d.mocap_pos.copy(),
                                     mocap_quat=d.mocap_quat.copy())
        return self._snap
