"""The policy worker process: an operator-declared ``module:attr`` policy, away from the node.

Run as a script (``python policy_worker.py MODULE:ATTR MEMORY_MB``) by
``tasks.policy_process``. It imports nothing of the package (no node, no ROS, no MuJoCo),
only numpy, the standard library and the operator's module, so a policy that exits,
forks, leaks or blocks ends or wedges this process and never the node, which kills it
(and everything it started) when a call misses its deadline or the run is stopped.

At start it takes its request and answer pipes off fds 0 and 1 (the policy's own ``print``
goes to stderr, its ``input()`` reads nothing), caps its address space (RLIMIT_AS, when
MEMORY_MB > 0) and makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``), so every
process a policy forks, even one that starts a session of its own, stays its descendant
and the node can find and kill it.

Frames, both ways: a 4-byte big-endian header length, a JSON header, an 8-byte data length
and that many bytes. Requests: ``{"op": "act", "shape": [n, m]}`` with float64
observations; ``{"op": "reset", "n": n}`` with int64 slots then episodes. Answers:
``{"ok": true, "dtype": ..., "shape": [...]}`` with the actions' bytes, or
``{"ok": false, "kind": "raise" | "exit" | "type", ...}``. The first answer (``hello``)
says whether the policy could be made, and its sizes.
"""

import importlib
import json
import os
import resource
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def read_frame(fd):
    head = _read(fd, 4)
    if head is None:
        return None, None
    header = json.loads(_read(fd, struct.unpack('>I', head)[0]) or b'{}')
    (n,) = struct.unpack('>Q', _read(fd, 8) or b'\0' * 8)
    return header, (_read(fd, n) if n else b'')


def _read(fd, n):
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b''.join(chunks)


def write_frame(fd, header, data=b''):
    head = json.dumps(header).encode()
    buf = struct.pack('>I', len(head)) + head + struct.pack('>Q', len(data)) + data
    view = memoryview(buf)
    while view:
        view = view[os.write(fd, view):]


def _size(obj, attr):
    value = getattr(obj, attr, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _failure(err):
    if isinstance(err, SystemExit):
        return {'ok': False, 'kind': 'exit', 'code': repr(err.code)[:200]}
    return {'ok': False, 'kind': 'raise', 'type': type(err).__name__[:100],
            'message': str(err)[:2000]}


def make(target):
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


def _confine(memory_mb):
    if memory_mb > 0:
        cap = memory_mb << 20
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard == resource.RLIM_INFINITY or hard > cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - not Linux: the node still kills the process group
        pass


def main(argv):
    if sys.path and os.path.abspath(sys.path[0] or '.') == HERE:
        del sys.path[0]              # the package's own folder is no place to import from
    rfd, wfd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)                    # a policy's print must not corrupt the frames
    sys.stdout = sys.stderr
    target, memory_mb = argv[1], int(argv[2])
    _confine(memory_mb)
    import numpy as np
    try:
        fn = make(target)
        hello = {'ok': True, 'obs_size': _size(fn, 'obs_size'),
                 'act_size': _size(fn, 'act_size'),
                 'reset': callable(getattr(fn, 'reset', None))}
    except (Exception, SystemExit) as err:  # noqa: BLE001 - answered, the node refuses it
        hello = dict(_failure(err), kind='load')
    write_frame(wfd, hello)
    if not hello['ok']:
        return 0
    while True:
        header, data = read_frame(rfd)
        if header is None:
            return 0
        try:
            if header.get('op') == 'reset':
                n = int(header['n'])
                ids = np.frombuffer(data, dtype=np.int64)
                fn.reset(ids[:n].copy(), ids[n:].copy())
                write_frame(wfd, {'ok': True})
                continue
            obs = np.frombuffer(data, dtype=np.float64).reshape(header['shape']).copy()
            out = np.asarray(fn(obs))
            if out.dtype.kind not in 'biuf':
                write_frame(wfd, {'ok': False, 'kind': 'type', 'dtype': str(out.dtype)[:100]})
                continue
            out = np.ascontiguousarray(out)
            write_frame(wfd, {'ok': True, 'dtype': out.dtype.str, 'shape': list(out.shape)},
                        out.tobytes())
        except (Exception, SystemExit) as err:  # noqa: BLE001 - the policy's own failure
            write_frame(wfd, _failure(err))


if __name__ == '__main__':
    sys.exit(main(sys.argv))
