"""Untrusted MJCF is read and compiled in a separate, capped process before the node sees it.

MuJoCo expands ``<replicate>`` and loads meshes while it parses, so a short request can ask
for a million geoms or gigabytes; parsed in the node, that memory and CPU time are the
simulation's. ``Sandbox.check`` hands the resource to one warm worker process
(``sandbox_worker.py``, started once, restarted after a job ends it) whose address space
(RLIMIT_AS) and CPU time per job (RLIMIT_CPU) are capped, and which checks element counts
(bodies, geoms, mesh vertices; ``<replicate>`` multiplied in before MuJoCo parses) and the
resource roots files must lie under. Over a limit the request is refused with
LIMIT_EXCEEDED (INVALID_ARGUMENT for a file outside the roots) and the limit named; the
node's own memory does not grow. What passes is bounded, so the node then parses it itself
(an MjSpec is needed for later edits); a world comes back compiled (a pickled MjModel, the
only type the answer may unpickle), so the node does not compile it twice.

A warm worker rather than a process per request: starting Python and MuJoCo costs about
half a second, a round trip to a running worker about a millisecond (bench/bench_sandbox.py).
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
import io
import json
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any, TYPE_CHECKING

from ..errors import DeviceError, LIMIT_EXCEEDED, ModelError
from .scene import MAX_RESOURCE

if TYPE_CHECKING:     # the hints only: the node imports mujoco, this module need not
    import mujoco

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sandbox_worker.py')


def reap(proc: subprocess.Popen, wait_s: float = 5.0) -> None:
    """Wait for a killed worker (at most ``wait_s``) and close its pipes: what every worker
    owner here (the sandbox, the policy worker) does after the kill."""
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        pass
    for pipe in (proc.stdin, proc.stdout):
        if pipe is None:
            continue
        try:
            pipe.close()
        except Exception:  # noqa: BLE001 - already closed
            pass


@dataclass(frozen=True)
class Limits:
    """What one untrusted model may take. The defaults fit real robots and scenes (a
    Menagerie humanoid has ~30 bodies and ~100 geoms, a cluttered scene a few thousand)."""

    memory_mb: int = 2048               # the worker's address space
    cpu_s: float = 20.0                 # CPU seconds per model
    max_bodies: int = 10_000
    max_geoms: int = 50_000
    max_mesh_vertices: int = 5_000_000
    max_bytes: int = MAX_RESOURCE       # characters of an MJCF string or bytes of its file

    @property
    def wall_s(self) -> float:
        """How long the node waits for an answer: CPU time, plus start-up and a busy host."""
        return 3.0 * self.cpu_s + 10.0


class _Unpickler(pickle.Unpickler):
    """The worker's answer may hold an MjModel and nothing else that runs code."""

    def find_class(self, module, name):
        if (module, name) == ('mujoco._structs', 'MjModel'):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f'{module}.{name} is not expected from the sandbox')


class Sandbox:
    """One warm worker process, one job at a time (a lock); thread-safe."""

    def __init__(self, limits: Limits | None = None, roots: Sequence[str] | None = None):
        self.limits = limits or Limits()
        self.roots = None if roots is None else [os.path.abspath(r) for r in roots]
        self._lock = threading.Lock()
        self._proc = None
        self.restarts = 0

    # --- the worker -------------------------------------------------------------------------
    def warm(self) -> None:
        """Start the worker now (it imports MuJoCo meanwhile) rather than at the first job."""
        with self._lock:
            self._start()

    def _start(self):
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        env = dict(os.environ)
        env['PYTHONPATH'] = os.pathsep.join(p for p in sys.path if p)
        # glibc reserves 64 MiB of address space per thread arena: with MuJoCo's threads
        # that alone could reach RLIMIT_AS before a legitimate model does
        env['MALLOC_ARENA_MAX'] = '2'
        self._proc = subprocess.Popen(
            [sys.executable, '-u', WORKER, str(int(self.limits.memory_mb))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, start_new_session=True, close_fds=True)
        return self._proc

    def _kill(self):
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        reap(proc)
        self.restarts += 1
        return proc.returncode

    def close(self) -> None:
        with self._lock:
            if self._proc is not None:
                self._kill()
                self.restarts -= 1

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    # --- jobs -------------------------------------------------------------------------------
    def check(self, resource: str, world: bool = False) -> dict[str, Any]:
        """Check (and, for a ``world``, compile) an MJCF string or file in the worker.
        Returns ``{'counts': {...}, 'model': MjModel or None}``; raises DeviceError
        (LIMIT_EXCEEDED naming the limit, INVALID_ARGUMENT, MODEL_ERROR) with nothing
        changed."""
        request = {'resource': resource, 'world': bool(world), 'roots': self.roots,
                   'limits': asdict(self.limits)}
        data = json.dumps(request).encode()
        with self._lock:
            for attempt in (0, 1):
                proc = self._start()
                try:
                    _write(proc.stdin, data)
                    head = json.loads(self._read(proc))
                    payload = self._read(proc)
                    if head.get('restart'):
                        self._kill()      # out of memory once: the next job gets a new one
                    break
                except _Died as died:
                    code = self._kill()
                    if died.timeout:
                        raise self._over('wall-clock time', f'{self.limits.wall_s:g} s') \
                            from None
                    if attempt == 0 and died.before_job:
                        continue                  # a worker that died idle: start one again
                    if code == -signal.SIGXCPU:
                        raise self._over('CPU time',
                                         f'sandbox_cpu_s = {self.limits.cpu_s:g}') from None
                    raise self._over('memory (or CPU time)',
                                     f'sandbox_memory_mb = {self.limits.memory_mb}, '
                                     f'sandbox_cpu_s = {self.limits.cpu_s:g}') from None
        if not head.get('ok'):
            limit = head.get('limit')
            message = head.get('message', 'refused')
            if limit:
                message = f'{message} (limit: {limit})'
            raise DeviceError(head.get('code') or LIMIT_EXCEEDED,
                              f'{message}; nothing was changed', where=head.get('where'))
        model = None
        if payload:
            try:
                model = _Unpickler(io.BytesIO(payload)).load()
            except Exception as exc:  # noqa: BLE001 - a worker answer the node cannot use
                raise ModelError(f'the sandbox answered a model this process cannot read: '
                                 f'{exc}', where='resource') from None
        return {'counts': head.get('counts', {}), 'model': model}

    def check_totals(self, model: 'mujoco.MjModel') -> None:
        """The whole scene after an edit, compiled here from vetted parts: each spawn was
        within the limits, so their sum is checked too (LIMIT_EXCEEDED naming it)."""
        lim = self.limits
        for what, n, cap, name in (('bodies', model.nbody - 1, lim.max_bodies, 'bodies'),
                                   ('geoms', model.ngeom, lim.max_geoms, 'geoms'),
                                   ('mesh vertices', model.nmeshvert, lim.max_mesh_vertices,
                                    'mesh_vertices')):
            if n > cap:
                raise DeviceError(LIMIT_EXCEEDED, f'the scene would have {n} {what}, over the '
                                  f'limit of {cap} (world_max_{name}); nothing was changed: '
                                  'delete entities first', where='scene')

    def _over(self, what, limit):
        return DeviceError(LIMIT_EXCEEDED, f'reading and compiling the model went over the '
                           f"sandbox's {what} limit ({limit}); nothing was changed: a smaller "
                           'model, or raise the limit if it is trusted', where='resource')

    def _read(self, proc):
        deadline = time.monotonic() + self.limits.wall_s
        head = _read_exact(proc, 8, deadline)
        n = int.from_bytes(head, 'big')
        return _read_exact(proc, n, deadline)


class _Died(Exception):
    def __init__(self, timeout: bool = False, before_job: bool = False) -> None:
        super().__init__('the sandbox worker ended')
        self.timeout, self.before_job = timeout, before_job


def _write(stream, data):
    try:
        stream.write(len(data).to_bytes(8, 'big'))
        stream.write(data)
        stream.flush()
    except (BrokenPipeError, OSError, ValueError):
        raise _Died(before_job=True) from None


def _read_exact(proc, n, deadline):
    fd = proc.stdout.fileno()
    chunks, got = [], 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Died(timeout=True)
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise _Died()
        chunks.append(chunk)
        got += len(chunk)
    return b''.join(chunks)
