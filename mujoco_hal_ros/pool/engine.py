"""Stepping engines: a C++ batch library where one is here, our worker threads otherwise.

Both keep every environment as one ``mjSTATE_INTEGRATION`` row and, per call, restore it into
a scratch MjData, ``mj_step`` it and save it back, which is bit-identical to an uninterrupted
serial ``mj_step`` loop. ``mujoco.rollout`` is not: it restarts every call from a
``mjSTATE_FULLPHYSICS`` state with a zero solver warm start and model-default mocap/equality
inputs, so chunked calls drift from the serial loop (``bench/README.md`` says how far).

Why the batch engine is the default: it does exactly the thread engine's work, but the
per-environment load/step/save loop runs in C++ threads instead of three Python calls per
environment under the GIL, so in ``bench/bench_pool.py`` it is faster than the threads at
almost every batch size it runs (its numbers are in ``bench/README.md``). It drives
``mujoco.batch`` (MuJoCo >= 4.0) or, on MuJoCo 3.x, the public ``mjbatch`` where installed
(``batch_libs``). The pool uses the library's state rows as its row table: the per-call
snapshot that makes a failed call atomic costs less than copying rows in and out of a
separate table would. The library keeps one more copy of the model.

The thread engine stays for MuJoCo 3.x without mjbatch (``requirements.txt`` allows it) and
for what the libraries cannot do exactly: per-environment randomization on a pool of
several model variants (``mujoco.batch``'s ``set_models`` and ``expand`` are exclusive;
mjbatch has no ``set_models``) and models with sleep or IPC enabled (``mujoco.batch`` needs
a persistent MjData per simulation for those, mjbatch refuses sleep). Its scratch MjData
are per thread and per model variant, never per environment.
"""

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
import copy
import threading
from typing import Any

import mujoco
import numpy as np

from ..checks import Vector
from ..errors import DeviceError, INTERNAL_ERROR
from . import batch_libs
from .layout import INTEGRATION
from .randomization import Scratch, view

ENGINES = ('auto', 'batch', 'threads')

_BAD = [int(mujoco.mjtWarning.mjWARN_BADQPOS), int(mujoco.mjtWarning.mjWARN_BADQVEL),
        int(mujoco.mjtWarning.mjWARN_BADQACC)]


def batch_available() -> bool:
    """Whether a C++ batch library is here: ``mujoco.batch`` (MuJoCo 4.0 and later), or the
    public ``mjbatch`` on the MuJoCo 3.x release it was built for (``batch_libs``)."""
    return batch_libs.library() is not None


class Slot:
    """What one worker thread owns: a scratch MjData and (lazily) a scratch model per variant.

    ``datas`` and ``warnings`` are plain lists indexed by variant so the stepping loop reads
    them without a method call; the warning-counter views are cached because making one
    costs about a microsecond.
    """

    def __init__(self, variants: Sequence[mujoco.MjModel]) -> None:
        self._variants = variants
        self.datas = [mujoco.MjData(m) for m in variants]
        self.warnings = [d.warning.number for d in self.datas]
        self._scratch: list[Any] = [None] * len(variants)

    def data(self, variant: int) -> mujoco.MjData:
        return self.datas[variant]

    def scratch(self, variant: int) -> Any:
        """The private model copy for patched environments; made on first use (a model's
        worth of time and memory), never per environment."""
        if self._scratch[variant] is None:
            self._scratch[variant] = Scratch(copy.copy(self._variants[variant]))
        return self._scratch[variant]

    def release(self) -> None:
        self.datas = []
        self.warnings = []
        self._scratch = [None] * len(self._variants)


class Workers:
    """``nthread`` slots: the calling thread works slot 0, ``nthread - 1`` threads the rest.

    Chunks are claimed dynamically, so a thread slowed by other processes on the machine
    takes fewer of them instead of holding up the whole call, and the caller's thread steps
    environments too rather than sleeping on futures (submitting every chunk to the
    executor left a core partly idle on small batches; ``bench/README.md``).
    """

    CHUNKS_PER_THREAD = 4
    MIN_CHUNK = 2

    def __init__(self, variants: Sequence[mujoco.MjModel], nthread: int) -> None:
        self.nthread = nthread
        self.slots = [Slot(variants) for _ in range(nthread)]
        self._executor = None
        if nthread > 1:
            self._executor = ThreadPoolExecutor(nthread - 1, thread_name_prefix='envpool')

    def run(self, fn: Callable[[Any, Any], Any], n: int, parallel: bool = True) -> None:
        """Call ``fn(slot, range)`` over contiguous chunks covering ``range(n)``; wait for all.

        Exceptions propagate after every participant has stopped, so no worker is still
        writing into a caller's buffer when the caller sees the error.
        """
        if self._executor is None or not parallel or n < 2:
            fn(self.slots[0], range(n))
            return
        nchunk = min(n, max(self.nthread,
                            min(self.nthread * self.CHUNKS_PER_THREAD, n // self.MIN_CHUNK)))
        bounds = [n * k // nchunk for k in range(nchunk + 1)]
        claim = iter(range(nchunk))
        lock = threading.Lock()
        errors = []

        def drain(slot):
            try:
                while True:
                    with lock:
                        k = next(claim, None)
                    if k is None:
                        return
                    fn(slot, range(bounds[k], bounds[k + 1]))
            except BaseException as exc:  # noqa: B902 - re-raised by the caller below
                errors.append(exc)

        futures = [self._executor.submit(drain, slot) for slot in self.slots[1:]]
        drain(self.slots[0])
        for future in futures:
            future.result()
        if errors:
            raise errors[0]

    def run_on_each_thread(self, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` once on the calling thread and once on every executor thread.

        For per-thread resources (the pool renderer's GL contexts) that must be released on
        the thread that made them: ``nthread - 1`` tasks meet at a barrier, so each one holds
        a different executor thread while it runs ``fn``.
        """
        fn()
        if self._executor is None:
            return
        count = self.nthread - 1
        barrier = threading.Barrier(count)

        def once():
            barrier.wait(timeout=30)
            fn()

        for future in [self._executor.submit(once) for _ in range(count)]:
            future.result()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        for slot in self.slots:
            slot.release()


def simulation_error(env_ids: Any, message: str) -> DeviceError:
    """The pool's error for MuJoCo raising inside a step: which environments, and why."""
    shown = ', '.join(str(e) for e in env_ids[:5]) + (', ...' if len(env_ids) > 5 else '')
    return DeviceError(INTERNAL_ERROR, f'MuJoCo raised an error stepping environment(s) '
                       f'{shown}: {message}; no environment was changed', where='step',
                       allowed='a model and state MuJoCo can step',
                       env_ids=[int(e) for e in env_ids], reason=message)


class ThreadEngine:
    """Steps environments on our own worker threads; owns the ``(nbatch, full)`` row table.

    The fallback for MuJoCo 3.x and for pools Batch cannot run exactly (randomized model
    variants, sleep/IPC models). Each environment's model is looked up per step through the
    pool's PatchStore, so randomization needs no work here (``sync`` is a no-op).
    """

    name = 'threads'
    library = None

    def __init__(self, variants: Sequence[mujoco.MjModel], variant_of: np.ndarray,
                 workers: Any, patches: Any, layout: Any, rows: np.ndarray) -> None:
        self._variants = variants
        self._variant_of = variant_of
        self._workers = workers
        self._patches = patches
        self._ctrl_cols = layout.columns('ctrl')
        self._nsensordata = variants[0].nsensordata
        self.state: Any = rows

    def step(self, ids: np.ndarray, nstep: int, const: Any, per_step: Any,
             sensors: bool) -> tuple[np.ndarray, Any, np.ndarray]:
        """Step ``ids`` and commit; returns ``(rows, sensordata or None, unstable)``.

        The rows are stepped in a private copy committed only after every environment
        finished, so an exception leaves the table as it was.
        """
        rows = self.state[ids]  # fancy indexing: a private copy, committed below
        if const is not None:
            rows[:, self._ctrl_cols] = const
        n = len(ids)
        sens = np.empty((n, self._nsensordata)) if sensors else None
        unstable = np.zeros(n, dtype=bool)
        # plain Python lists: the per-environment loop below is the pool's only overhead
        envs = ids.tolist()
        variant = self._variant_of[ids].tolist()
        patched = [bool(self._patches.keys_of[e]) for e in envs]
        models = self._variants
        model_for = self._patches.model_for
        bad0, bad1, bad2 = _BAD
        step, set_state, get_state = mujoco.mj_step, mujoco.mj_setState, mujoco.mj_getState
        failed = []

        def work(slot, chunk):
            datas, warnings = slot.datas, slot.warnings
            for p in chunk:
                v = variant[p]
                m = model_for(slot, v, envs[p]) if patched[p] else models[v]
                d = datas[v]
                warn = warnings[v]
                row = rows[p]
                set_state(m, d, row, INTEGRATION)
                warn[:] = 0
                try:
                    if per_step is None:
                        step(m, d, nstep)
                    else:
                        c = per_step[p]
                        ctrl = d.ctrl
                        for t in range(nstep):
                            ctrl[:] = c[t]
                            step(m, d)
                except mujoco.FatalError as exc:
                    failed.append((envs[p], str(exc)))
                    continue
                get_state(m, d, row, INTEGRATION)
                if warn[bad0] or warn[bad1] or warn[bad2]:
                    unstable[p] = True
                if sens is not None:
                    mujoco.mj_forward(m, d)
                    sens[p] = d.sensordata

        self._workers.run(work, n)
        if failed:
            failed.sort()
            raise simulation_error([e for e, _ in failed], failed[0][1])
        self.state[ids] = rows
        return rows, sens, unstable

    def sync(self, envs: Vector) -> None:
        """Randomization is read from the PatchStore at every step: nothing to copy."""

    def close(self) -> None:
        self.state = None


class BatchEngine:
    """Steps environments in a C++ batch library's threads; its state rows are the table.

    ``mujoco.batch`` (MuJoCo >= 4.0) or, on MuJoCo 3.x, the public ``mjbatch``
    (``batch_libs``). Either keeps every simulation as the same ``mjSTATE_INTEGRATION`` row
    the thread engine does and runs load-step-save in C++ threads, so results are
    bit-identical to it and to a serial ``mj_step`` loop; the pool's resets, ``set_state``
    and queries read and write those rows directly (no copy in or out per call).
    Per-environment model values come from the pool's PatchStore (validated and completed
    with ``mj_setConst`` there) and are written into expanded fields by ``sync``; model
    variants run through ``mujoco.batch``'s ``set_models`` with one reference per
    environment, never a copy.
    """

    name = 'batch'

    def __init__(self, variants: Sequence[mujoco.MjModel], variant_of: np.ndarray,
                 nthread: int, patches: Any, layout: Any, rows: np.ndarray) -> None:
        self._variants = variants
        self._patches = patches
        self._nbatch = len(rows)
        self._lib = batch_libs.library()(variants, variant_of, self._nbatch, nthread)
        self.library = self._lib.library
        self.state: Any = self._lib.state
        self.state[:] = rows
        self._ctrl = self.state[:, layout.columns('ctrl')]
        self._warning = self._lib.warning
        self._nsensordata = variants[0].nsensordata
        self._sensordata: Any = None
        self._expanded: dict = {}  # randomizable or derived field -> live (nbatch, ...) values

    @staticmethod
    def supports(variants: Sequence[mujoco.MjModel]) -> str | None:
        """Why no batch library here can run these models exactly, or None when one can."""
        lib = batch_libs.library()
        return batch_libs.why_none() if lib is None else lib.unsupported(variants)

    @property
    def batch(self) -> Any:
        """The library's own batch object."""
        return self._lib.raw

    def step(self, ids: np.ndarray, nstep: int, const: Any, per_step: Any,
             sensors: bool) -> tuple[np.ndarray, Any, np.ndarray]:
        """Step ``ids`` and commit; returns ``(rows, sensordata or None, unstable)``.

        The library steps its rows in place, and a simulation MuJoCo raised in keeps its old
        row while the others advance, so the listed rows are saved first and put back on
        any error: a failed call changes nothing, as with the thread engine.
        """
        n = len(ids)
        if n == self._nbatch:      # distinct and in range, so every env in order
            ordered, sids, sel = True, ids, None
            rows_at: Any = slice(None)
        else:
            order = np.argsort(ids, kind='stable')
            ordered = bool((order == np.arange(n)).all())
            sids = ids if ordered else ids[order]
            sel = sids.astype(np.int32)
            rows_at = sids
        if not ordered:
            const = None if const is None else const[order]
            per_step = None if per_step is None else per_step[order]
        if sensors and self._nsensordata and self._sensordata is None:
            # bound on first use: every call then copies it out, so only pools that ask
            self._sensordata = self._lib.bind('sensordata')
        full = sel is None
        before = self.state.copy() if full else self.state[ids]
        try:
            self._warning[rows_at] = 0
            if const is not None:
                self._ctrl[rows_at] = const
            if per_step is None:
                self._lib.step(sel, nstep, sensors)
            else:
                for t in range(nstep):
                    self._ctrl[rows_at] = per_step[:, t]
                    self._lib.step(sel, 1, sensors and t == nstep - 1)
        except batch_libs.StepFailed as exc:
            self.state[ids] = before
            raise simulation_error(ids if exc.ids is None else exc.ids, exc.message) from None
        except BaseException:
            self.state[ids] = before
            raise
        # in the caller's order; whole-pool calls (the common case) copy without indexing
        rows = self.state.copy() if full else self.state[ids]
        warning = self._warning if full else self._warning[ids]
        unstable = (warning[:, _BAD, 1] > 0).any(axis=1)
        sens = None
        if sensors:
            if not self._nsensordata:
                sens = np.empty((n, 0))
            else:
                sens = self._sensordata.copy() if full else self._sensordata[ids]
        return rows, sens, unstable

    def sync(self, envs: Vector) -> None:
        """Write the PatchStore's values for ``envs`` into the batch's per-sim fields.

        Fields another environment expanded go back to the nominal values for these
        environments, so a plain reset undoes randomization exactly.
        """
        patches = self._patches
        model = self._variants[0]
        envs = np.asarray(envs, dtype=np.intp)
        for key, has in patches.has.items():
            if key not in self._expanded and has[envs].any():
                self._expanded[key] = self._lib.expand(key)
        for key, values in self._expanded.items():
            values[envs] = view(model, key)
            has = patches.has.get(key)
            if has is not None:
                sel = envs[has[envs]]
                values[sel] = patches.values[key][sel]

    def close(self) -> None:
        self._lib = self.state = self._ctrl = self._warning = self._sensordata = None
        self._expanded = {}
