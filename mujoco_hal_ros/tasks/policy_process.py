"""A policy run in a worker process of its own, every call under a deadline (no ROS here).

Why: a policy a node runs for a peer (sim_node's ``run_policy``, pool_node's
``evaluate_policy``) is code, and code can block forever (a deadlock, an inference server
that stops answering), exit, fork, or leak. In the node's own process a call that never
returns keeps the run's thread, and the device, for good; a fork copies the whole node.
``ProcessPolicy`` runs the callable in ``policy_worker.py`` (started per run, capped in
address space) and waits for each answer at most ``timeout_s``: a late answer, or
``cancel()`` from any thread (``stop_policy``, a cancelled goal), kills the worker and
every process it started and raises TIMEOUT or STOPPED, so the run ends between two control
steps with its own code and the device holds. The cost is one pipe round trip per control
step (``bench/bench_policy_worker.py``).

``ProcessPolicy`` is a ``Policy``: ``make_policy``/``check_policy``, the device runner and
the pool's evaluator use it as they use an in-process one, and its failures read as an
in-process policy's do (an exception is re-raised under its own type name, an exit is the
INVALID_ARGUMENT ``CallablePolicy`` gives).
"""

import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np

from ..errors import DeviceError, InvalidArgument, shorten, STOPPED, TIMEOUT
from .policies import Policy

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'policy_worker.py')
START_S = 60.0              # importing the module and making the policy (torch takes seconds)
MAX_ANSWER = 64 << 20       # bytes of one answer: far above any (n, act) batch
KILL_ROUNDS = 20            # a forking policy's tree is swept this many times at most


class PolicyRaised(Exception):
    """The policy raised in its worker; raised here under the policy's own type name."""


_RAISED: dict[str, type[PolicyRaised]] = {}


def _raised(name, message):
    kind = _RAISED.get(name)
    if kind is None and len(_RAISED) < 256:
        kind = _RAISED[name] = type(name if name.isidentifier() else 'PolicyRaised',
                                    (PolicyRaised,), {})
    return (kind or PolicyRaised)(message)


class ProcessPolicy(Policy):
    """``target`` (``module:attr``) in a worker; ``timeout_s`` per call; ``close()`` at the end.

    The worker starts at construction and answers its hello (the policy made, its sizes) at
    the first use; ``cancel()`` may come at any time from any thread and ends the worker.
    """

    def __init__(self, target: str, timeout_s: float, *, name: str | None = None,
                 memory_mb: int = 0, start_s: float = START_S) -> None:
        self.target, self.name = target, name or target
        self.timeout_s, self.start_s = float(timeout_s), float(start_s)
        self._lock = threading.Lock()        # one call at a time
        self._cancelled = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._hello = None
        self._reset = False
        self._buf = bytearray()
        self.calls = 0
        env = dict(os.environ)
        # the node's own import path, never its working directory
        cwd = os.getcwd()
        env['PYTHONPATH'] = os.pathsep.join(p for p in sys.path if p and p != cwd)
        env['MALLOC_ARENA_MAX'] = '2'
        for var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'):
            env.setdefault(var, '1')     # one batch per step: threads would only spin
        self._proc: subprocess.Popen | None = subprocess.Popen(
            [sys.executable, '-u', WORKER, target, str(int(memory_mb)), str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            start_new_session=True, close_fds=True)
        self.pid = self._proc.pid
        assert self._proc.stdout is not None and self._proc.stdin is not None   # PIPE above
        self._out = self._proc.stdout.fileno()
        self._in = self._proc.stdin.fileno()
        os.set_blocking(self._in, False)

    # --- sizes, known once the worker said hello ---------------------------------------------
    # the worker's sizes, read-only here where Policy lets a subclass set them
    @property
    def obs_size(self) -> int | None:  # type: ignore[override]
        return self._ready().get('obs_size')

    @property
    def act_size(self) -> int | None:  # type: ignore[override]
        return self._ready().get('act_size')

    def _ready(self):
        if self._hello is None:
            with self._lock:
                if self._hello is None:
                    header = self._receive(self.start_s, START_WHAT)
                    if not isinstance(header, dict) or not header.get('ok'):
                        header = header if isinstance(header, dict) else {}
                        self.close()
                        raise InvalidArgument(
                            f'{self.name} ({shorten(self.target)}) cannot be made a policy: '
                            f'{_text(header)}', where='policy',
                            allowed='a function f(obs) -> actions, declared by the operator')
                    self._hello = header
                    self._reset = bool(header.get('reset'))
        return self._hello

    # --- Policy --------------------------------------------------------------------------------
    def reset(self, slots: np.ndarray, episodes: np.ndarray) -> None:
        self._ready()
        if not self._reset:
            return
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        episodes = np.ascontiguousarray(episodes, dtype=np.int64)
        header = self._call(struct.pack('>cII', b'R', len(slots), 0) + slots.tobytes()
                            + episodes.tobytes(), 'reset')
        if not isinstance(header, dict) or not header.get('ok'):
            self._fail(header if isinstance(header, dict) else {}, 'reset')

    def act(self, obs: np.ndarray, slots: np.ndarray) -> np.ndarray:
        self._ready()
        obs = np.ascontiguousarray(obs, dtype=np.float64)
        if obs.ndim != 2:
            raise InvalidArgument(f'observations of shape {obs.shape}', where='policy',
                                  allowed='(n, obs)')
        answer = self._call(struct.pack('>cII', b'A', *obs.shape) + obs.tobytes(), 'act')
        self.calls += 1
        if isinstance(answer, dict):
            self._fail(answer, 'asked for actions')
        return answer

    def _fail(self, header, doing):
        kind = header.get('kind')
        if kind == 'exit':
            raise InvalidArgument(f'{self.name} called exit ({header.get("code")}) when '
                                  f'{doing}', where='policy',
                                  allowed='a function f(obs) -> actions that returns')
        if kind == 'type':
            raise InvalidArgument(f'{self.name} returned {header.get("dtype")} actions',
                                  where='policy', allowed='numbers')
        if kind == 'shape':
            raise InvalidArgument(f'{self.name} returned actions of {header.get("ndim")} '
                                  'dimensions', where='policy', allowed='(n, act) numbers')
        raise _raised(str(header.get('type', 'PolicyRaised')), str(header.get('message', '')))

    # --- the pipe, under the deadline ------------------------------------------------------------
    def _call(self, request, what):
        with self._lock:
            self._send(request)
            return self._receive(self.timeout_s, what)

    def _send(self, request):
        buf = memoryview(request)
        deadline = time.monotonic() + self.timeout_s
        while buf:
            try:        # non-blocking: a worker that stopped reading cannot hold this call
                buf = buf[os.write(self._in, buf):]
            except BlockingIOError:
                self._wait(self._in, deadline, 'take its observations', write=True)
            except OSError:
                self._ended('take its observations')

    def _receive(self, timeout, what):
        """The next answer: a dict (the JSON ones) or an array (``X``)."""
        deadline = time.monotonic() + timeout
        kind = self._take(1, deadline, what)
        if kind == b'J':
            (n,) = struct.unpack('>I', self._take(4, deadline, what))
            self._check_size(n)
            return json.loads(self._take(n, deadline, what))
        if kind != b'X':
            self.close()
            raise InvalidArgument(f'{self.name}\'s worker answered something unreadable',
                                  where='policy')
        code, ndim = struct.unpack('>4sB', self._take(5, deadline, what))
        shape = struct.unpack(f'>{ndim}Q', self._take(8 * ndim, deadline, what))
        try:
            dtype = np.dtype(code.decode().strip())
        except (TypeError, ValueError, UnicodeDecodeError):
            self.close()
            raise InvalidArgument(f'{self.name} answered actions of an unknown type',
                                  where='policy') from None
        n = dtype.itemsize * int(np.prod(shape, dtype=np.float64))
        self._check_size(n)
        return np.frombuffer(self._take(n, deadline, what), dtype=dtype).reshape(shape)

    def _check_size(self, n):
        if n > MAX_ANSWER:
            self.close()
            raise InvalidArgument(f'{self.name} answered {n} bytes', where='policy',
                                  allowed=f'at most {MAX_ANSWER} bytes')

    def _take(self, n, deadline, what):
        """``n`` bytes of the answer: the buffer first, then reads of up to a megabyte."""
        buf = self._buf
        while len(buf) < n:
            self._wait(self._out, deadline, what)
            try:
                chunk = os.read(self._out, max(n - len(buf), 1 << 20))
            except OSError:
                chunk = b''
            if not chunk:
                self._ended(what)
            buf += chunk
        out = bytes(buf[:n])
        del buf[:n]
        return out

    def _wait(self, fd: int, deadline: float, what: str, write: bool = False) -> None:
        """Until ``fd`` is ready; a cancel or the deadline kills the worker and raises."""
        while True:
            if self._cancelled.is_set():
                self.close()
                raise DeviceError(STOPPED, f'stopped while {self.name} was computing '
                                  f'({what}); its worker process was ended', where='policy')
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise DeviceError(TIMEOUT, f'{self.name} did not {_verb(what)} within '
                                  f'{self.timeout_s if what != START_WHAT else self.start_s:g}'
                                  ' s; its worker process was ended', where='policy',
                                  allowed='a policy that answers within policy_timeout_s '
                                  '(raise it if the policy is that slow)')
            try:
                readers = [self._wake_r] + ([] if write else [fd])
                writers = [fd] if write else []
                ready_r, ready_w, _ = select.select(readers, writers, [], left)
            except (OSError, ValueError):
                self._ended(what)
            if (fd in ready_w) if write else (fd in ready_r):
                return

    def _ended(self, what):
        code = self._proc.poll() if self._proc is not None else None
        if self._proc is not None and code is None:
            try:
                code = self._proc.wait(0.5)
            except subprocess.TimeoutExpired:
                code = None
        self.close()
        if self._cancelled.is_set():
            raise DeviceError(STOPPED, f'stopped while {self.name} was computing ({what}); '
                              'its worker process was ended', where='policy')
        how = ('was killed by signal ' + signal.Signals(-code).name if code is not None and
               code < 0 and -code in signal.valid_signals() else f'ended (exit code {code})')
        raise InvalidArgument(f'{self.name}\'s worker process {how} when asked to {what}',
                              where='policy', allowed='a policy that returns (and fits in '
                              'policy_memory_mb)')

    # --- ending ----------------------------------------------------------------------------------
    def cancel(self) -> None:
        """From any thread: the call waiting now (or the next) ends STOPPED, the worker dies."""
        self._cancelled.set()
        try:
            os.write(self._wake_w, b'x')
        except OSError:
            pass

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        """Kill the worker and every process it started; idempotent, any thread."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        kill_tree(proc.pid)
        from ..world.sandbox import reap
        reap(proc)

    def __del__(self) -> None:
        try:
            self.close()
            os.close(self._wake_r)
            os.close(self._wake_w)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


START_WHAT = 'start (import and make the policy)'


def _verb(what):
    return {'act': 'answer a call for actions', 'reset': 'answer a reset',
            START_WHAT: 'start (import and make the policy)'}.get(what, what)


def _text(header):
    if header.get('kind') == 'load' and 'type' in header:
        return f'{header["type"]}: {shorten(header.get("message", ""), 200)}'
    if 'code' in header:
        return f'it called exit ({header["code"]})'
    return shorten(header.get('message', 'refused'), 200)


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, theirs...), from /proc."""
    parents: dict[int, list[int]] = {}
    try:
        names = os.listdir('/proc')
    except OSError:
        return []
    for entry in names:
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat', 'rb') as handle:
                stat = handle.read().decode(errors='replace')
        except OSError:
            continue
        fields = stat[stat.rfind(')') + 2:].split()
        if len(fields) > 2 and fields[0] != 'Z':
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group and every descendant: the worker is stopped first (a
    subreaper: the orphans of its children stay below it), then its tree is swept until
    nothing is left, then it dies."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except (ProcessLookupError, PermissionError):
        return
    for _ in range(KILL_ROUNDS):
        below = descendants(pid)
        if not below:
            break
        for child in below:
            try:
                os.kill(child, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.001)
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass
