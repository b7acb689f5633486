"""The policy worker process: an operator-declared ``module:attr`` policy, away from the node.

Run as a script (``python policy_worker.py MODULE:ATTR MEMORY_MB NODE_PID``) by
``tasks.policy_process``. It imports nothing of the package (no node, no ROS, no MuJoCo),
only numpy, the standard library and the operator's module, so a policy that exits,
forks, leaks or blocks ends or wedges this process and never the node, which kills it
(and everything it started) when a call misses its deadline or the run is stopped.

At start it takes its request and answer pipes off fds 0 and 1 (the policy's own ``print``
goes to stderr, its ``input()`` reads nothing), caps its address space (RLIMIT_AS, when
MEMORY_MB > 0) and makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``), so every
process a policy forks, even one that starts a session of its own, stays its descendant
and the node can find and kill it; and it dies with the node (``PR_SET_PDEATHSIG``), even
one killed with SIGKILL while the policy computes.

Binary frames, so that a control step costs one write and one read each way. Requests:
``A`` with ``>cII`` (n, m) and n*m float64 observations; ``R`` with (n, 0), n slots and n
episodes as int64 (this machine's byte order: the worker is local). Answers: ``X`` with
``>4sB`` (the dtype's string, ndim), ndim ``>Q`` dimensions and the actions' bytes; or
``J`` with a ``>I`` length and a JSON object: ``{"ok": true}`` (a reset) or ``{"ok":
false, "kind": "raise" | "exit" | "type", ...}``. The first answer (``J``, the hello) says
whether the policy could be made, and its sizes.
"""

import importlib
import json
import os
import resource
import struct
import sys
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:     # the hints only: numpy is imported when the worker starts (main)
    import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


class Frames:
    """Frames in from ``fd``, read a megabyte at a time (one read a request, usually)."""

    def __init__(self, fd: int):
        self.fd, self.buf = fd, bytearray()

    def take(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return None
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def request(self) -> tuple[bytes, int, int, bytes] | None:
        """(op, n, m, data) or None at the end of the input."""
        head = self.take(9)
        if head is None:
            return None
        op, n, m = struct.unpack('>cII', head)
        size = n * m * 8 if op == b'A' else n * 16
        data = self.take(size) if size else b''
        return None if data is None else (op, n, m, data)


def write_all(fd: int, buf: bytes) -> None:
    view = memoryview(buf)
    while view:
        view = view[os.write(fd, view):]


def write_json(fd: int, header: dict[str, Any]) -> None:
    body = json.dumps(header).encode()
    write_all(fd, b'J' + struct.pack('>I', len(body)) + body)


def write_array(fd: int, out: 'np.ndarray') -> None:
    head = b'X' + struct.pack('>4sB', out.dtype.str.encode().ljust(4), out.ndim)
    write_all(fd, head + struct.pack(f'>{out.ndim}Q', *out.shape) + out.tobytes())


def _size(obj, attr):
    value = getattr(obj, attr, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _failure(err):
    if isinstance(err, SystemExit):
        return {'ok': False, 'kind': 'exit', 'code': repr(err.code)[:200]}
    return {'ok': False, 'kind': 'raise', 'type': type(err).__name__[:100],
            'message': str(err)[:2000]}


def make(target: str) -> Any:
    """The callable ``module:attr`` names (a class is instantiated with no arguments)."""
    module, _, attr = target.partition(':')
    obj = importlib.import_module(module)
    for part in attr.split('.'):
        obj = getattr(obj, part)
    if isinstance(obj, type):
        obj = obj()
    if not callable(obj):
        raise TypeError(f'{target} is a {type(obj).__name__}, not callable')
    return obj


def _confine(memory_mb, parent):
    if memory_mb > 0:
        cap = memory_mb << 20
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard == resource.RLIM_INFINITY or hard > cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)                      # PR_SET_CHILD_SUBREAPER
        libc.prctl(1, 9, 0, 0, 0)                       # PR_SET_PDEATHSIG: SIGKILL
    except Exception:  # noqa: BLE001 - not Linux: the node still kills the process group
        pass
    if os.getppid() != parent:
        os._exit(0)                  # the node was gone before the line above


def main(argv: list[str]) -> int:
    if sys.path and os.path.abspath(sys.path[0] or '.') == HERE:
        del sys.path[0]              # the package's own folder is no place to import from
    rfd, wfd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)                    # a policy's print must not corrupt the frames
    sys.stdout = sys.stderr
    target, memory_mb = argv[1], int(argv[2])
    _confine(memory_mb, int(argv[3]) if len(argv) > 3 else os.getppid())
    import numpy as np
    try:
        fn = make(target)
        hello = {'ok': True, 'obs_size': _size(fn, 'obs_size'),
                 'act_size': _size(fn, 'act_size'),
                 'reset': callable(getattr(fn, 'reset', None))}
    except (Exception, SystemExit) as err:  # noqa: BLE001 - answered, the node refuses it
        hello = dict(_failure(err), kind='load')
    write_json(wfd, hello)
    if not hello['ok']:
        return 0
    frames = Frames(rfd)
    while True:
        req = frames.request()
        if req is None:
            return 0
        op, n, m, data = req
        try:
            if op == b'R':
                ids = np.frombuffer(data, dtype=np.int64).copy()
                fn.reset(ids[:n].copy(), ids[n:].copy())
                write_json(wfd, {'ok': True})
                continue
            obs = np.frombuffer(data, dtype=np.float64).reshape(n, m).copy()
            out = np.asarray(fn(obs))
            if out.dtype.kind not in 'biuf':
                write_json(wfd, {'ok': False, 'kind': 'type', 'dtype': str(out.dtype)[:100]})
                continue
            if out.ndim > 8:
                write_json(wfd, {'ok': False, 'kind': 'shape', 'ndim': int(out.ndim)})
                continue
            write_array(wfd, np.ascontiguousarray(out))
        except (Exception, SystemExit) as err:  # noqa: BLE001 - the policy's own failure
            write_json(wfd, _failure(err))


if __name__ == '__main__':
    sys.exit(main(sys.argv))
