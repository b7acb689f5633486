"""The C++ batch libraries the batch engine can step with, behind one small interface.

``mujoco.batch`` ships with MuJoCo 4.0 and later. On MuJoCo 3.x the public ``mjbatch``
library (``pip install mjbatch``, built against one MuJoCo release) does the same work the
same way: every simulation is one ``mjSTATE_INTEGRATION`` row restored into a per-thread
MjData, stepped and saved back in C++ threads, so both are bit-identical to a serial
``mj_step`` loop and to the pool's own thread engine. Without either, the pool's threads
step (a Python loop per environment under the GIL, measurably slower on small batches).

Each adapter offers what ``engine.BatchEngine`` uses: ``state`` and ``warning`` row arrays,
``bind``, ``expand`` (names as ``randomization.FIELDS`` spells them), ``set_models`` where
the library has it, and ``step(sel, nstep, sensors)`` raising ``StepFailed`` with the
failing environments and MuJoCo's message.
"""

from collections.abc import Sequence
import importlib
import re
from typing import Any

import mujoco
import numpy as np

from ..checks import Vector
from .randomization import DERIVED, FIELDS, view

try:  # mujoco >= 4.0
    from mujoco import batch as _mujoco_batch
except ImportError:  # mujoco 3.x
    _mujoco_batch = None

_mjbatch: Any = None
if _mujoco_batch is None:
    try:  # built for one MuJoCo 3.x release; on another its import fails and threads serve
        _mjbatch = importlib.import_module('mjbatch')
    except Exception:  # noqa: BLE001 - absent or not loadable here: the same answer
        _mjbatch = None

_STAGE_NONE = int(mujoco.mjtStage.mjSTAGE_NONE)
_STAGE_ACC = int(mujoco.mjtStage.mjSTAGE_ACC)


class StepFailed(Exception):
    """MuJoCo raised in some simulations of a step: ``ids`` (None: not known which of
    those listed) and its ``message``."""

    def __init__(self, ids: Vector | None, message: str) -> None:
        super().__init__(message)
        self.ids = ids
        self.message = message


def _randomizable(model):
    """The model fields a randomization can write, where this model has them."""
    return [k for k in list(FIELDS) + list(DERIVED)
            if hasattr(model, k) or k.startswith('opt.')]


class MujocoBatch:
    """``mujoco.batch.Batch`` (MuJoCo >= 4.0)."""

    library = 'mujoco.batch'

    def __init__(self, variants: Sequence[mujoco.MjModel], variant_of: np.ndarray, nsim: int,
                 nthread: int) -> None:
        batch = _mujoco_batch.Batch(variants[0], nsim, nthread)
        if len(variants) > 1:
            batch.set_models([variants[v] for v in variant_of.tolist()])
        self.raw = batch
        self.state = batch.state
        self.warning = batch.warning

    @staticmethod
    def unsupported(variants: Sequence[mujoco.MjModel]) -> str | None:
        model = variants[0]
        missing = [k for k in _randomizable(model)
                   if view(model, k).size and k not in _mujoco_batch.MODEL_FIELDS]
        return f'mujoco.batch cannot expand {", ".join(missing)}' if missing else None

    def bind(self, name: str) -> Any:
        return self.raw.bind(name)

    def expand(self, key: str) -> Any:
        return self.raw.expand(key)

    def step(self, sel: Any, nstep: int, sensors: bool) -> None:
        try:
            self.raw.step(sel, nstep, _STAGE_ACC if sensors else _STAGE_NONE)
        except _mujoco_batch.SimulationError as exc:
            raise StepFailed(exc.ids, self.raw.error(int(exc.ids[0]))) from None


class PublicMjbatch:
    """The public ``mjbatch`` library on MuJoCo 3.x: one model for every simulation (no
    ``set_models``), option fields expanded by their bare names, sensors at the new state
    by a ``forward`` after the steps (what ``mujoco.batch``'s acceleration stage does)."""

    library = 'mjbatch'

    def __init__(self, variants: Sequence[mujoco.MjModel], variant_of: np.ndarray, nsim: int,
                 nthread: int) -> None:
        try:
            batch = _mjbatch.Batch(variants[0], num_sims=nsim, num_threads=nthread)
        except Exception as exc:  # noqa: BLE001 - e.g. sleep enabled: the caller falls back
            raise ValueError(f'mjbatch refused the model: {exc}') from None
        self.raw = batch
        self.state = batch.bind('state')
        self.warning = batch.bind('warning')

    @staticmethod
    def unsupported(variants: Sequence[mujoco.MjModel]) -> str | None:
        if len(variants) > 1:
            return 'mjbatch runs one model for every simulation (it has no set_models)'
        return None

    def bind(self, name: str) -> Any:
        return self.raw.bind(name)

    def expand(self, key: str) -> Any:
        return self.raw.expand(key[4:] if key.startswith('opt.') else key)

    def step(self, sel: Any, nstep: int, sensors: bool) -> None:
        try:
            self.raw.step(sel, nstep)
            if sensors:
                self.raw.forward(sel)
        except RuntimeError as exc:
            # it names the first failing simulation: 'sim 3: mj_stackAlloc: out of memory'
            text = str(exc)
            found = re.match(r'sim (\d+): ', text)
            if found is None:
                raise StepFailed(None, text) from None
            raise StepFailed([int(found.group(1))], f'{text[found.end():]} (mjbatch names the '
                             f'first environment that failed; others may have too)') from None


def mujoco_batch() -> Any:
    """MuJoCo's own ``mujoco.batch`` module (MuJoCo >= 4.0), or None: the one import of it."""
    return _mujoco_batch


def library() -> Any:
    """The adapter class for the batch library here, or None."""
    if _mujoco_batch is not None:
        return MujocoBatch
    if _mjbatch is not None:
        return PublicMjbatch
    return None


def why_none() -> str:
    """Why no batch library is here, saying how to get one."""
    return (f'mujoco {mujoco.__version__} has no mujoco.batch (MuJoCo >= 4.0) and the public '
            f'mjbatch library is not importable with it (pip install mjbatch, built for one '
            f'MuJoCo 3.x release)')
