"""Site and body Jacobians of many environments: MuJoCo's own functions in a compiled loop.

A Python loop over environments (``mj_setState``, ``mj_kinematics``, ``mj_comPos``, then
``mj_jacSite`` per site) spends most of its time in the interpreter, not in MuJoCo. The same
loop in C (``src/query_kernels.c``, built by colcon next to this module) calls the same
MuJoCo functions, so its numbers are bit-identical to that loop, on threads of its own (one
scratch MjData of the pool's per thread) while ctypes has released the GIL.

The loop runs on a copy of each model whose bodies own no geoms (``lean_models``):
``mj_kinematics`` then poses bodies and sites but no geoms, which no Jacobian reads, and the
result is unchanged bit for bit (the tests compare against ``mj_jacSite`` on the model as
given).

MuJoCo is reached through function pointers taken from the libmujoco the bindings already
loaded, never a second copy: the compiled loop needs no MuJoCo headers and serves MuJoCo 3.x
and 4.x alike. Where it is missing (a pip install without a compiler, or not Linux),
``why_unavailable()`` says why and ``python_jacobians`` does the same work in Python.
"""

from collections.abc import Sequence
import copy
import ctypes
import glob
import os
from typing import Any

import mujoco
import numpy as np

from .layout import INTEGRATION

KERNELS_VERSION = 3     # src/query_kernels.c's mhr_kernels_version()
_LIB_GLOB = '_query_kernels*.so'
_MUJOCO_FUNCTIONS = ('mj_setState', 'mj_kinematics', 'mj_comPos', 'mj_jacSite', 'mj_jacBody')
KINDS = {'site': 0, 'body': 1}
MAX_LEAN_COPIES = 4    # model copies (tens of MB each for meshy robots) a pool may make
_SLEEP = int(getattr(mujoco.mjtEnableBit, 'mjENBL_SLEEP', 0))    # 0 where MuJoCo has none


class _Api(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p)
                for name in ('set_state', 'kinematics', 'com_pos', 'jac_site', 'jac_body')]


def _loaded_libmujoco():
    """The one libmujoco mapped into this process (by ``import mujoco``), or a reason."""
    try:
        with open('/proc/self/maps') as maps:
            paths = {line.split(None, 5)[-1].strip() for line in maps if 'libmujoco.so' in line}
    except OSError:
        return None, 'no /proc/self/maps to find the libmujoco the bindings loaded (not Linux)'
    if len(paths) != 1:
        return None, f'expected one libmujoco in this process, found {sorted(paths) or "none"}'
    return paths.pop(), None


def _load():
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, _LIB_GLOB)))
    if not found:
        return None, (f'no {_LIB_GLOB} in {here}: build the package with colcon (CMakeLists.txt '
                      'compiles src/query_kernels.c) or pip install it with a C compiler')
    libmujoco, why = _loaded_libmujoco()
    if libmujoco is None:
        return None, why
    try:
        kernels = ctypes.CDLL(found[0])
        mj = ctypes.CDLL(libmujoco)     # already loaded: dlopen returns that same copy
        version = kernels.mhr_kernels_version()
        api = _Api(*(ctypes.cast(getattr(mj, f), ctypes.c_void_p).value
                     for f in _MUJOCO_FUNCTIONS))
    except (OSError, AttributeError) as exc:
        return None, f'{found[0]} could not be used: {exc}; rebuild the package'
    if version != KERNELS_VERSION:
        return None, (f'{found[0]} is version {version}, this module needs {KERNELS_VERSION}: '
                      'rebuild the package')
    fn = kernels.mhr_jacobians
    p = ctypes.c_void_p
    fn.argtypes = [p, ctypes.c_int32, p, p, ctypes.c_int32, p, ctypes.c_int64, ctypes.c_int32,
                   p, p, p, p, ctypes.c_int64, p, ctypes.c_int32, ctypes.c_int32, p, p]
    fn.restype = None
    return (fn, api), None


_KERNEL, _WHY = _load()


def why_unavailable() -> str | None:
    """None where the compiled loop is in use, else why the Python loop answers instead."""
    return _WHY


def kinematic_parts(layout: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, specs)``: the parts of an integration row that kinematics reads.

    Positions and mocap poses only: restoring the rest (velocities, controls, warm start, a
    hundred values on Panda) was about a sixth of the compiled loop's time.
    """
    offsets, specs = [], []
    for name in ('qpos', 'mocap_pos', 'mocap_quat'):
        cols = layout.columns(name)
        if cols.stop > cols.start:
            offsets.append(cols.start)
            specs.append(int(getattr(mujoco.mjtState, 'mjSTATE_' + name.upper())))
    return np.asarray(offsets, dtype=np.int64), np.asarray(specs, dtype=np.int32)


def native_jacobians(kind: str, model: mujoco.MjModel, datas: Sequence[mujoco.MjData],
                     state: np.ndarray, parts: Any, rows: np.ndarray, slots: np.ndarray,
                     objs: np.ndarray, jacp: np.ndarray, jacr: np.ndarray) -> None:
    """Jacobians of ``objs`` at ``state[rows]`` into ``jacp[slots]``, ``jacr[slots]``, in C
    on ``len(datas)`` threads (``datas``: one scratch MjData of ``model``'s sizes each).

    ``state`` (nrow, width) float64 and the outputs (n, nobj, 3, nv) float64 must be
    C-contiguous, ``parts`` come from ``kinematic_parts``, ``rows`` and ``slots`` are int64,
    ``objs`` int32, every id valid: the pool's request checks have run, and nothing here is
    checked again (C trusts its caller).
    """
    fn, api = _KERNEL
    offsets, specs = parts
    addresses = (ctypes.c_void_p * len(datas))(*[d._address for d in datas])
    fn(ctypes.byref(api), KINDS[kind], model._address, addresses, len(datas),
       state.ctypes.data, state.shape[1], len(offsets), offsets.ctypes.data, specs.ctypes.data,
       rows.ctypes.data, slots.ctypes.data, len(rows), objs.ctypes.data, len(objs),
       jacp.shape[-1], jacp.ctypes.data, jacr.ctypes.data)


def python_jacobians(kind: str, model: mujoco.MjModel, datas: Sequence[mujoco.MjData],
                     state: np.ndarray, parts: Any, rows: np.ndarray, slots: np.ndarray,
                     objs: np.ndarray, jacp: np.ndarray, jacr: np.ndarray) -> None:
    """The loop a user would write, whole rows restored, on ``datas[0]``: the fallback where
    the compiled loop is missing (threads would only queue on the GIL), and the reference."""
    del parts
    data = datas[0]
    jac = mujoco.mj_jacSite if kind == 'site' else mujoco.mj_jacBody
    for row, slot in zip(rows.tolist(), slots.tolist(), strict=True):
        mujoco.mj_setState(model, data, state[row], INTEGRATION)
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        for k, obj in enumerate(objs.tolist()):
            jac(model, data, jacp[slot, k], jacr[slot, k], obj)


jacobians = native_jacobians if _KERNEL is not None else python_jacobians


def lean_models(variants: Sequence[mujoco.MjModel]) -> tuple[mujoco.MjModel, ...]:
    """The models the loop runs, one per variant: copies whose bodies own no geoms.

    MuJoCo's kinematics poses each body's geoms with the body; without them it does the
    same body and site arithmetic, in the same order, in about half the time on
    Menagerie's Panda (bench/README.md). Sleeping is off in the copies: every restored row
    is computed whole, whatever the scratch data last held. A pool of more than
    ``MAX_LEAN_COPIES`` variants runs on its models as given instead of holding a copy of
    each (with sleeping as the model has it).
    """
    if len(variants) > MAX_LEAN_COPIES:
        return tuple(variants)
    lean = []
    for model in variants:
        q = copy.copy(model)
        q.body_geomnum[:] = 0
        q.opt.enableflags &= ~_SLEEP
        lean.append(q)
    return tuple(lean)
