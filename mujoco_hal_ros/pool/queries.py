"""Kinematics of many environments at once in ``mujoco.batch``'s C++ threads, for queries.

Height-field lookups need only body and geom poses (``mj_kinematics``); a Python loop
restoring each state into one MjData costs several microseconds per environment in the
interpreter alone, more than the kinematics. Here a query batch of its own (never the
stepping engine's, whose every step would then copy these fields out) loads the listed
state rows, runs the position stage with contacts and constraints disabled, so no collision
is computed, and hands back the bound fields for every environment in one array each.

The query batch runs the nominal model values: no randomizable field moves a body or a
geom, so poses are identical to the patched model's. It is made on first use of each kind
of query (one model copy each) and is absent on MuJoCo 3.x, where the caller falls back to
its own loop. (Jacobians have their own compiled loop: ``jacobian``.)
"""

from collections.abc import Sequence
import copy

import mujoco
import numpy as np

from . import batch_libs

_mjbatch = batch_libs.mujoco_batch()    # positions-only forward, model variants: 4.0's only

KINDS = {
    'hfield': ('geom_xpos', 'geom_xmat', 'xpos', 'xmat'),
}
_POS = int(mujoco.mjtStage.mjSTAGE_POS)
_NO_CONTACT = int(mujoco.mjtDisableBit.mjDSBL_CONTACT) | int(
    mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)


class Queries:
    """Lazily made query batches, one per kind in ``KINDS``."""

    def __init__(self, variants: Sequence[mujoco.MjModel], variant_of: np.ndarray,
                 nthread: int) -> None:
        self._variants = variants
        self._variant_of = variant_of
        self._nthread = nthread
        self._batches: dict = {}     # kind -> (Batch, {field: bound array}) or None: unavailable

    def _batch(self, kind):
        if kind not in self._batches:
            self._batches[kind] = self._make(kind) if _mjbatch is not None else None
        return self._batches[kind]

    def _make(self, kind):
        models = []
        for m in self._variants:
            q = copy.copy(m)
            q.opt.disableflags |= _NO_CONTACT
            models.append(q)
        try:
            batch = _mjbatch.Batch(models[0], len(self._variant_of), self._nthread)
            if len(models) > 1:
                batch.set_models([models[v] for v in self._variant_of.tolist()])
            bound = {f: batch.bind(f) for f in KINDS[kind]}
        except ValueError:  # sleep or IPC models need a persistent batch: use the loop
            return None
        return batch, bound, models

    def gather(self, kind: str, state: np.ndarray, ids: np.ndarray) -> dict | None:
        """``{field: (n, ...)}`` at the rows ``state[ids]``, or None where unavailable."""
        made = self._batch(kind)
        if made is None:
            return None
        batch, bound, _ = made
        if len(ids) == len(self._variant_of):
            order = None  # distinct and in range: every environment
            sel = None
            batch.state[:] = state
        else:
            order = np.argsort(ids, kind='stable')
            sel = ids[order].astype(np.int32)
            batch.state[sel] = state[sel]
        try:
            batch.forward(sel, _POS)
        except _mjbatch.SimulationError:
            return None
        if order is None:
            return {f: np.take(v, ids, axis=0) for f, v in bound.items()}
        return {f: v[ids] for f, v in bound.items()}

    def close(self) -> None:
        self._batches = {}
