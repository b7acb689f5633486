"""The sandbox's worker process: reads, checks and compiles untrusted MJCF under rlimits.

Run as a script (``python sandbox_worker.py MEMORY_MB``) by ``world.sandbox``; it imports
nothing of the package (so no node, no ROS, no second copy of the simulation) and only
MuJoCo, numpy and the standard library. It caps its own address space (RLIMIT_AS) at
start and its CPU time (RLIMIT_CPU, SIGXCPU ends it) before every job, so a model that
expands without bound ends this process, never the node.

One job at a time over stdin/stdout: a frame is an 8-byte big-endian length and that many
bytes; a request is one JSON frame, an answer one JSON frame and one payload frame (the
pickled MjModel of a world, or empty). Each job:

1. a static look at the XML (ElementTree; cheap, before MuJoCo sees it): bodies and geoms
   counted with every ``<replicate count>`` around them multiplied in, so a nested
   replicate that would expand to a million geoms is refused in milliseconds; every
   ``file`` an element names must lie under the allowed resource roots (when given);
2. MuJoCo parses it (MjSpec) and the element counts are checked on the spec;
3. it compiles (a world: the whole model; an entity: the entity alone) and the compiled
   counts (bodies, geoms, mesh vertices) are checked again.

After a job that ran out of memory the answer asks for a new worker (``restart``): MuJoCo
and the C++ heap are not to be trusted after an allocation failed.
"""

from collections.abc import Sequence
import json
import os
import pickle
import resource
import struct
import sys
from typing import Any, BinaryIO
import xml.etree.ElementTree as ET

FILE_TAGS = ('include', 'mesh', 'texture', 'hfield', 'skin', 'model')
DIR_ATTRS = {'mesh': 'meshdir', 'skin': 'meshdir', 'texture': 'texturedir',
             'hfield': 'assetdir'}


class Refused(Exception):
    def __init__(self, code: str, message: str, where: str = 'resource',
                 limit: str | None = None) -> None:
        super().__init__(message)
        self.code, self.where, self.limit = code, where, limit


def read_frame(stream: BinaryIO) -> bytes | None:
    head = stream.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack('>Q', head)
    return stream.read(n)


def write_frame(stream: BinaryIO, data: bytes) -> None:
    stream.write(struct.pack('>Q', len(data)))
    stream.write(data)


def _under(path, roots):
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def static_check(text: str | bytes, base: str, limits: dict[str, Any],
                 roots: Sequence[str] | None) -> dict[str, Any]:
    """Counts with replicate multiplied in, and the files named, before MuJoCo parses: a
    pull parser, so the count that goes over a cap stops the read there."""
    # Any: for these two events read_events() gives (event, Element); typeshed's union also
    # has the tuples the namespace events give
    parser: Any = ET.XMLPullParser(events=('start', 'end'))
    counts = {'bodies': 0, 'geoms': 0}
    caps = (('bodies', limits['max_bodies']), ('geoms', limits['max_geoms']))
    dirs = {}
    mults = [1]
    data = text.encode() if isinstance(text, str) else text
    step = 1 << 16
    try:
        for i in range(0, max(len(data), 1), step):
            parser.feed(data[i:i + step])
            for event, elem in parser.read_events():
                tag = elem.tag if isinstance(elem.tag, str) else ''
                if event == 'end':
                    if tag == 'replicate':
                        mults.pop()
                    elem.clear()
                    continue
                if len(mults) > 200:
                    raise Refused('INVALID_ARGUMENT', '<replicate> nested more than 200 deep')
                if tag == 'replicate':
                    try:
                        count = int(elem.get('count', '1'))
                    except ValueError:
                        raise Refused('MODEL_ERROR', 'a <replicate> count is not a '
                                      'number') from None
                    mults.append(mults[-1] * max(count, 0))
                elif tag == 'body':
                    counts['bodies'] += mults[-1]
                elif tag == 'geom':
                    counts['geoms'] += mults[-1]
                elif tag == 'compiler':
                    for attr in ('meshdir', 'texturedir', 'assetdir'):
                        if elem.get(attr):
                            dirs[attr] = elem.get(attr)
                for key, cap in caps:
                    if counts[key] > cap:
                        raise Refused('LIMIT_EXCEEDED', f'the model has more than {cap} '
                                      f'{key} (counted with <replicate> expanded)',
                                      limit=f'world_max_{key} = {cap}')
                name = elem.get('file')
                if tag in FILE_TAGS and name is not None and roots is not None:
                    sub = dirs.get(DIR_ATTRS.get(tag, ''), '') or dirs.get('assetdir', '')
                    path = name if os.path.isabs(name) else os.path.join(base, sub, name)
                    if not _under(path, roots):
                        raise Refused('INVALID_ARGUMENT', f'<{tag} file={name[:120]!r}> is '
                                      'outside the allowed resource roots',
                                      limit='resource_roots: ' + ', '.join(roots))
        parser.close()
    except ET.ParseError as exc:
        raise Refused('MODEL_ERROR', f'not XML: {exc}') from None
    return counts


def _cap(what, n, cap, name):
    if n > cap:
        raise Refused('LIMIT_EXCEEDED', f'the model has {n} {what}, over the limit of {cap}',
                      limit=f'{name} = {cap}')


def job(req: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    import mujoco
    limits = req['limits']
    roots = req.get('roots')
    if roots is not None:
        roots = [os.path.realpath(r) for r in roots]
    res = req['resource']
    path = None
    if res.lstrip().startswith('<'):
        text, base = res, os.getcwd()
        if len(text) > limits['max_bytes']:
            raise Refused('LIMIT_EXCEEDED', f'{len(text)} characters, over the limit of '
                          f'{limits["max_bytes"]}', limit=f'MAX_RESOURCE = {limits["max_bytes"]}')
    else:
        path = res[len('file://'):] if res.startswith('file://') else res
        if roots is not None and not _under(path, roots):
            raise Refused('INVALID_ARGUMENT', f'{path[:200]!r} is outside the allowed '
                          'resource roots', limit='resource_roots: ' + ', '.join(roots))
        if not os.path.isfile(path):
            raise Refused('INVALID_ARGUMENT', f'no file {path[:200]!r}')
        size = os.path.getsize(path)
        if size > limits['max_bytes']:
            raise Refused('LIMIT_EXCEEDED', f'{size} bytes, over the limit of '
                          f'{limits["max_bytes"]}', limit=f'MAX_RESOURCE = {limits["max_bytes"]}')
        with open(path, 'rb') as handle:
            text = handle.read(limits['max_bytes'] + 1)
        base = os.path.dirname(os.path.abspath(path))
    static = static_check(text, base, limits, roots)
    try:
        spec = mujoco.MjSpec.from_string(text) if path is None else \
            mujoco.MjSpec.from_file(path)
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - MuJoCo's parser raises several types
        if 'unknown exception' in str(exc) or 'bad_alloc' in str(exc):
            # std::bad_alloc under RLIMIT_AS reaches Python without its type
            raise Refused('LIMIT_EXCEEDED', 'reading it failed, most likely for want of '
                          'memory', limit=f'sandbox_memory_mb = {limits["memory_mb"]}') from None
        raise Refused('MODEL_ERROR', f'MuJoCo could not read it: {exc}') from None
    _cap('bodies', len(spec.bodies) - 1, limits['max_bodies'], 'world_max_bodies')
    _cap('geoms', len(spec.geoms), limits['max_geoms'], 'world_max_geoms')
    user = sum(len(m.uservert) // 3 for m in spec.meshes)
    _cap('mesh vertices', user, limits['max_mesh_vertices'], 'world_max_mesh_vertices')
    try:
        model = spec.compile()
    except Exception as exc:  # noqa: BLE001 - MuJoCo's compiler raises ValueError
        text = str(exc)
        if 'allocate' in text or 'out of memory' in text:
            raise Refused('LIMIT_EXCEEDED', f'it needs more memory than the sandbox allows '
                          f'({" ".join(text.split())[:300]})',
                          limit=f'sandbox_memory_mb = {limits["memory_mb"]}') from None
        raise Refused('MODEL_ERROR', f'it does not compile: {exc}', where='scene') from None
    _cap('bodies', model.nbody - 1, limits['max_bodies'], 'world_max_bodies')
    _cap('geoms', model.ngeom, limits['max_geoms'], 'world_max_geoms')
    _cap('mesh vertices', model.nmeshvert, limits['max_mesh_vertices'],
         'world_max_mesh_vertices')
    counts = {'bodies': int(model.nbody - 1), 'geoms': int(model.ngeom),
              'mesh_vertices': int(model.nmeshvert), 'static': static}
    payload = pickle.dumps(model) if req.get('world') else b''
    return counts, payload


def _limit_cpu(seconds: float) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    now = used.ru_utime + used.ru_stime
    soft = int(now + seconds) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def main(argv: list[str]) -> int:
    memory = int(argv[1]) << 20
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    import mujoco  # noqa: F401 - imported once, before the first job, under the limit
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr            # a stray print must not corrupt the frames
    while True:
        raw = read_frame(stdin)
        if raw is None:
            return 0
        try:
            req = json.loads(raw)
            _limit_cpu(float(req['limits']['cpu_s']))
            counts, payload = job(req)
            head = {'ok': True, 'counts': counts}
        except Refused as exc:
            head = {'ok': False, 'code': exc.code, 'message': str(exc), 'where': exc.where,
                    'limit': exc.limit,
                    'restart': bool(exc.limit and exc.limit.startswith('sandbox_memory'))}
            payload = b''
        except MemoryError:
            head = {'ok': False, 'code': 'LIMIT_EXCEEDED', 'message': 'it needs more memory '
                    'than the sandbox allows', 'where': 'resource',
                    'limit': f'sandbox_memory_mb = {req["limits"]["memory_mb"]}',
                    'restart': True}
            payload = b''
        except Exception as exc:  # noqa: BLE001 - answered, never a dead worker
            head = {'ok': False, 'code': 'MODEL_ERROR', 'message': f'{type(exc).__name__}: '
                    f'{exc}'[:2000], 'where': 'resource', 'limit': None, 'restart': True}
            payload = b''
        write_frame(stdout, json.dumps(head).encode())
        write_frame(stdout, payload)
        stdout.flush()


if __name__ == '__main__':
    sys.exit(main(sys.argv))
