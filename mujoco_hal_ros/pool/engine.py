"""Worker threads that step environments on per-thread scratch MjData.

Why our own threads rather than ``mujoco.rollout``: rollout restarts every call from a
``mjSTATE_FULLPHYSICS`` state with a zero solver warm start and model-default mocap/equality
inputs, so chunked calls drift from an uninterrupted ``mj_step`` loop (measured 7e-8 in Go1
qpos after 30 calls of 10 steps, where contacts make the warm start matter). Restoring the full
``mjSTATE_INTEGRATION`` row per environment is bit-identical instead. mj_step releases the GIL,
and at 10 steps per call the three Python-level calls per environment (set state, step, get
state) cost about 2-3% of a Panda/Go1 environment's work: ``bench/bench_pool.py`` shows
the pool spending the same CPU time as a single-threaded loop doing the same steps
(cpu-eff 1.00-1.03 at N=256/1024), and on a lightly loaded 2-vCPU VM pool/bare was 1.87-1.97 with
pool/rollout 0.95-0.99 at N=256 and 1024 (rollout pays for copying out every step's state
instead). Scratch MjData are per thread and per model variant (~0.75 MB each on Panda), never
per environment, so memory does not grow with nbatch beyond the state rows.
"""

import copy
import threading
from concurrent.futures import ThreadPoolExecutor

import mujoco

from .randomization import Scratch


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
        self._scratch = [None] * len(variants)

    def data(self, variant):
        return self.datas[variant]

    def scratch(self, variant):
        """The private model copy for patched environments; made on first use (~40 ms and
        ~40 MB for Panda), never per environment."""
        if self._scratch[variant] is None:
            self._scratch[variant] = Scratch(copy.copy(self._variants[variant]))
        return self._scratch[variant]

    def release(self):
        self.datas = []
        self.warnings = []
        self._scratch = [None] * len(self._variants)


class Workers:
    """``nthread`` slots: the calling thread works slot 0, ``nthread - 1`` threads the rest.

    Chunks are claimed dynamically, so a thread slowed by other processes on the machine
    takes fewer of them instead of holding up the whole call, and the caller's thread steps
    environments too rather than sleeping on futures (measured: at 16 Panda envs per call,
    submitting every chunk to the executor left cpu/wall at 1.3 of 2 cores).
    """

    CHUNKS_PER_THREAD = 4
    MIN_CHUNK = 2

    def __init__(self, variants, nthread):
        self.nthread = nthread
        self.slots = [Slot(variants) for _ in range(nthread)]
        self._executor = None
        if nthread > 1:
            self._executor = ThreadPoolExecutor(nthread - 1, thread_name_prefix='envpool')

    def run(self, fn, n, parallel=True):
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

    def close(self):
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        for slot in self.slots:
            slot.release()
