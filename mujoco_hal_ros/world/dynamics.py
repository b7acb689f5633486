"""Mass matrix, inverse dynamics and Jacobians of the live state, for controller developers.

The stepper's state is copied (one ``mj_getState``, on its thread) into a private MjData and
everything is computed there, so a query never perturbs the running simulation (``mj_inverse``
writes ``qacc``-derived fields that the next step would otherwise read).
"""

from collections.abc import Sequence
import threading
from typing import Any

import mujoco
import numpy as np

from ..checks import finite_vector
from ..errors import InvalidArgument, UnknownName

ALL = int(mujoco.mjtState.mjSTATE_FULLPHYSICS) | int(mujoco.mjtState.mjSTATE_USER)


class Dynamics:
    """Queries on a private copy of one captured state."""

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self._data = mujoco.MjData(model)
        self._lock = threading.Lock()

    def capture(self, data: mujoco.MjData) -> np.ndarray:
        """State vector of the live data (stepper thread)."""
        state = np.empty(mujoco.mj_stateSize(self.model, ALL))
        mujoco.mj_getState(self.model, data, state, ALL)
        return state

    def _posed(self, state):
        d = self._data
        mujoco.mj_setState(self.model, d, state, ALL)
        mujoco.mj_forward(self.model, d)
        return d

    def mass_matrix(self, state: np.ndarray) -> np.ndarray:
        """(nv, nv) joint-space inertia, armature included."""
        with self._lock:
            d = self._posed(state)
            out = np.zeros((self.model.nv, self.model.nv))
            mujoco.mj_fullM(self.model, d, out)
            return out

    def inverse_dynamics(self, state: np.ndarray, qacc: Any) -> np.ndarray:
        """(nv,) generalized forces that produce ``qacc`` at the state's positions and
        velocities (contacts and constraints included, as ``mj_inverse`` computes them)."""
        qacc = finite_vector(qacc, self.model.nv, 'qacc')
        with self._lock:
            d = self._posed(state)
            d.qacc[:] = qacc
            mujoco.mj_inverse(self.model, d)
            return d.qfrc_inverse.copy()

    def jacobian(self, state: np.ndarray, kind: str, name: str, site_names: Sequence[str],
                 body_names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(jacp (3, nv), jacr (3, nv)) of a site's or body's origin in the world frame."""
        if kind not in ('site', 'body'):
            raise InvalidArgument(f'expected site or body, got {kind!r}', where='kind',
                                  allowed='site, body')
        known = site_names if kind == 'site' else body_names
        index = {n: i for i, n in enumerate(known) if n}
        if not isinstance(name, str) or name not in index:
            raise UnknownName(kind, name, list(index), where='jacobian')
        i = index[name]
        with self._lock:
            d = self._posed(state)
            jacp = np.zeros((3, self.model.nv))
            jacr = np.zeros((3, self.model.nv))
            if kind == 'site':
                mujoco.mj_jacSite(self.model, d, jacp, jacr, i)
            else:
                mujoco.mj_jacBody(self.model, d, jacp, jacr, i)
            return jacp, jacr
