"""Worker threads that step environments on per-thread scratch MjData.

Why our own threads rather than ``mujoco.rollout``: rollout restarts every call from a
``mjSTATE_FULLPHYSICS`` state with a zero solver warm start and model-default mocap/equality
inputs, so chunked calls drift from an uninterrupted ``mj_step`` loop (measured 7e-8 in Go1
qpos after 30 calls of 10 steps, where contacts make the warm start matter). Restoring the full
``mjSTATE_INTEGRATION`` row per environment is bit-identical instead. mj_step releases the GIL,
and at 10 steps per call the three Python-level calls per environment (set state, step, get
state) cost about 2-3% of a Panda/Go1 environment's work (measured single-threaded: pool
44.9k vs bare loop 44.0k vs rollout 40.8k Panda steps/s). Scratch MjData are per thread and
per model variant (~0.75 MB each on Panda), never per environment, so memory does not grow
with nbatch beyond the state rows.
"""

import copy
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

import mujoco


class Slot:
    """What one worker thread owns: a scratch MjData and (lazily) a scratch model per variant.

    ``datas`` and ``warnings`` are plain lists indexed by variant so the stepping loop reads
    them without a method call; the warning-counter views are cached because making one
    costs about a microsecond.
    """

    def __init__(self, variants):
        self._variants = variants
        self.datas = [mujoco.MjData(m) for m in variants]
        self.warnings = [d.warning.number for d in self.datas]
        self._models = [None] * len(variants)
        self.applied = [frozenset()] * len(variants)

    def data(self, variant):
        return self.datas[variant]

    def scratch_model(self, variant):
        """A private copy for patched environments; made on first use (~40 ms for Panda)."""
        if self._models[variant] is None:
            self._models[variant] = copy.copy(self._variants[variant])
            self.applied[variant] = frozenset()
        return self._models[variant]

    def release(self):
        self.datas = []
        self.warnings = []
        self._models = [None] * len(self._variants)


class Workers:
    """``nthread`` slots; ``run`` splits a list of env indices over them and waits for all."""

    # Several chunks per thread so a thread slowed by other processes does not hold up the
    # call; fewer than this many environments per chunk is not worth a task.
    CHUNKS_PER_THREAD = 4
    MIN_CHUNK = 4

    def __init__(self, variants, nthread):
        self.nthread = nthread
        self.slots = [Slot(variants) for _ in range(nthread)]
        self._local = threading.local()
        self._next_slot = itertools.count()
        self._executor = None
        if nthread > 1:
            self._executor = ThreadPoolExecutor(nthread, initializer=self._bind,
                                                thread_name_prefix='envpool')

    def _bind(self):
        self._local.slot = self.slots[next(self._next_slot)]

    def _task(self, fn, chunk):
        return fn(self._local.slot, chunk)

    def run(self, fn, n, parallel=True):
        """Call ``fn(slot, range)`` over contiguous chunks of ``range(n)``; wait for all.

        Exceptions propagate after every chunk has finished, so no worker is still writing
        into a caller's buffer when the caller sees the error.
        """
        if self._executor is None or not parallel or n < 2 * self.MIN_CHUNK:
            return [fn(self.slots[0], range(n))]
        nchunk = max(1, min(self.nthread * self.CHUNKS_PER_THREAD, n // self.MIN_CHUNK))
        bounds = [n * k // nchunk for k in range(nchunk + 1)]
        futures = [self._executor.submit(self._task, fn, range(bounds[k], bounds[k + 1]))
                   for k in range(nchunk)]
        results, error = [], None
        for future in futures:
            try:
                results.append(future.result())
            except BaseException as exc:  # noqa: B902 - re-raised below after all finish
                error = error or exc
        if error is not None:
            raise error
        return results

    def close(self):
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        for slot in self.slots:
            slot.release()
