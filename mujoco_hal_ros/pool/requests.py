"""Every argument check of a pool call, in one place for the in-process and the Ray pool.

``EnvPool`` and ``RayPool`` both run these before any environment (or any shard actor) is
touched, so a request one pool refuses the other refuses with the same error, and a refused
call never leaves half the shards changed. Only model-level facts are needed (names, sizes,
which variant each environment runs), never a state, which is why a driver can check
requests for actors on other machines.
"""

from collections.abc import Callable, Iterable, Sequence
import os
from typing import Any

import mujoco
import numpy as np

from ..checks import is_bool, Vector
from ..errors import DeviceError, InvalidArgument, ModelError, shorten, UnknownName
from . import hfield as hf
from .engine import ENGINES
from .randomization import check_patch, FIELDS
from .validate import contains_bool, env_ids, float_array, integer, name_or_index

MAX_NBATCH = 65536
MAX_NSTEP = 1_000_000
MAX_NTHREAD = 4 * (os.cpu_count() or 1)

# Sizes that must agree across model variants so that one state layout, one control width and
# one scratch-data shape serve every environment.
_SIGNATURE = ('nq', 'nv', 'nu', 'na', 'nbody', 'njnt', 'ngeom', 'nsite', 'nsensordata',
              'nmocap', 'neq', 'nhfield', 'nuserdata', 'ntendon', 'ncam', 'nlight')


def names(model: mujoco.MjModel, objtype: Any, count: int) -> list[str]:
    return [mujoco.mj_id2name(model, objtype, i) or '' for i in range(count)]


def check_engine(engine: Any) -> str:
    if not isinstance(engine, str) or engine not in ENGINES:
        raise InvalidArgument(f'unknown engine {shorten(engine)}', where='engine',
                              allowed=', '.join(ENGINES))
    return engine


def check_models(model: Any) -> list[mujoco.MjModel]:
    """One MjModel or a non-empty list of variants with identical sizes, as a list."""
    variants = [model] if isinstance(model, mujoco.MjModel) else model
    if isinstance(variants, (str, bytes)) or not hasattr(variants, '__len__'):
        raise InvalidArgument(f'expected an MjModel or a list of them, got {shorten(model)}',
                              where='model', allowed='MjModel or [MjModel, ...]')
    variants = list(variants)
    if not variants or not all(isinstance(m, mujoco.MjModel) for m in variants):
        raise InvalidArgument('expected at least one MjModel', where='model',
                              allowed='MjModel or a non-empty list of MjModel')
    for k, m in enumerate(variants[1:], 1):
        for attr in _SIGNATURE:
            if getattr(m, attr) != getattr(variants[0], attr):
                raise ModelError(f'variant {k} has {attr}={getattr(m, attr)} but variant 0 '
                                 f'has {getattr(variants[0], attr)}', where='model',
                                 allowed='variants with identical sizes')
    return variants


def check_variant_of(variant_of: Vector | None, nbatch: int, nvar: int) -> np.ndarray:
    """``(nbatch,)`` intp variant index per environment; default ``i % nvar``."""
    if variant_of is None:
        return np.arange(nbatch, dtype=np.intp) % nvar
    vmap = np.asarray(variant_of) if not contains_bool(variant_of) else None
    if (vmap is None or vmap.shape != (nbatch,) or vmap.dtype.kind not in 'iu'
            or vmap.min() < 0 or vmap.max() >= nvar):
        raise InvalidArgument(f'expected {nbatch} variant indices, got {shorten(variant_of)}',
                              where='variant_of', allowed=f'{nbatch} integers 0..{nvar - 1}')
    return vmap.astype(np.intp)


def check_flag(value: Any, where: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidArgument(f'expected True or False, got {shorten(value)}', where=where,
                              allowed='bool')
    return bool(value)


class Requests:
    """The checks of one pool: ``nbatch`` environments on ``variants[variant_of[i]]``."""

    def __init__(self, variants: Sequence[mujoco.MjModel], variant_of: np.ndarray,
                 layout: Any) -> None:
        self.variants = variants
        self.variant_of = variant_of
        self.nbatch = len(variant_of)
        self.layout = layout
        m0 = variants[0]
        self.site_names = names(m0, mujoco.mjtObj.mjOBJ_SITE, m0.nsite)
        self.body_names = names(m0, mujoco.mjtObj.mjOBJ_BODY, m0.nbody)
        self.hfield_names = names(m0, mujoco.mjtObj.mjOBJ_HFIELD, m0.nhfield)

    def ids(self, ids: Vector | None) -> np.ndarray:
        return env_ids(ids, self.nbatch)

    def keyframe(self, keyframe: Any, variants: Iterable[int]) -> Any:
        """The keyframe must exist in every variant the listed environments use."""
        for v in variants:
            m = self.variants[v]
            name_or_index(keyframe, names(m, mujoco.mjtObj.mjOBJ_KEY, m.nkey), 'keyframe',
                          'keyframe')
        return keyframe

    def field(self, field: Any) -> str:
        """A randomizable field name."""
        if field not in FIELDS:
            raise UnknownName('randomizable field', field, list(FIELDS), where='field')
        return field

    def ctrl(self, ctrl: Any, n: int, nstep: int | None,
             where: str = 'ctrl') -> tuple[Any, Any]:
        """Returns ``(constant (n, nu) or None, per-step (n, nstep, nu) or None)``."""
        if ctrl is None:
            return None, None
        nu = self.variants[0].nu
        arr, which = float_array(ctrl, [(n, nu), (n, nstep, nu), (nu,)], where)
        if which == 0:
            return arr, None
        if which == 2:
            return np.broadcast_to(arr, (n, nu)), None
        return None, arr

    def states(self, states: Any, n: int, full: bool, where: str) -> np.ndarray:
        """``(n, width)`` rows; physics rows unless ``full``."""
        width = self.layout.full_size if full else self.layout.size
        arr, which = float_array(states, [(n, width), (width,)], where)
        return np.broadcast_to(arr, (n, width)) if which else arr

    def step(self, nstep: Any, ctrl: Any, ids: Any, sensors: Any) -> tuple:
        """``(ids, nstep, sensors, const ctrl, per-step ctrl)`` for a step call."""
        ids = self.ids(ids)
        nstep = integer(nstep, 'nstep', 1, MAX_NSTEP)
        sensors = check_flag(sensors, 'sensors')
        const, per_step = self.ctrl(ctrl, len(ids), nstep)
        return ids, nstep, sensors, const, per_step

    def reset(self, ids: Any, keyframe: Any, states: Any, randomization: Any,
              patch_refused: bool = False) -> tuple:
        """``(ids, physics rows or None, patch or None)``; the keyframe is checked too.

        ``patch_refused``: the pool runs variants on ``mujoco.batch`` by request, which
        cannot randomize them.
        """
        ids = self.ids(ids)
        if keyframe is not None and states is not None:
            raise InvalidArgument('give a keyframe or states, not both', where='reset',
                                  allowed='keyframe=..., states=... or neither')
        rows = None
        if states is not None:
            rows = self.states(states, len(ids), False, 'states')
        elif keyframe is not None:
            used = np.unique(self.variant_of[ids]) if len(ids) else [0]
            self.keyframe(keyframe, [int(v) for v in used])
        patch = None
        if randomization is not None:
            patch = check_patch(self.variants[0], randomization, len(ids))
            if patch and patch_refused:
                raise InvalidArgument(
                    'mujoco.batch cannot randomize environments of a pool of several '
                    'model variants (set_models and expand are exclusive)',
                    where='randomization', allowed="engine='auto' or 'threads'")
        return ids, rows, patch

    def evaluate(self, ctrl: Any, nstep: Any, ids: Any, cost: Any, progress: Any,
                 chunk_steps: Any) -> tuple:
        """``(ids, per-step ctrl (n, steps, nu), chunk_steps)`` for an evaluate call."""
        ids = self.ids(ids)
        n = len(ids)
        nu = self.variants[0].nu
        arr, which = float_array(ctrl, [(None, nu), (n, None, nu)], 'ctrl')
        steps = arr.shape[-2]
        if nstep is not None and integer(nstep, 'nstep', 1, MAX_NSTEP) != steps:
            raise InvalidArgument(f'nstep={nstep} but ctrl has {steps} steps',
                                  where='nstep', allowed=f'{steps} or None')
        if steps > MAX_NSTEP:
            raise InvalidArgument(f'{steps} steps is too many', where='ctrl',
                                  allowed=f'1..{MAX_NSTEP} steps')
        per_step = np.broadcast_to(arr, (n, steps, nu)) if which == 0 else arr
        chunk_steps = integer(chunk_steps, 'chunk_steps', 1, MAX_NSTEP)
        if cost is not None and not callable(cost):
            raise InvalidArgument('cost must be callable', where='cost',
                                  allowed='cost(qpos, qvel) -> (n,) array')
        if progress is not None and not callable(progress):
            raise InvalidArgument('progress must be callable', where='progress',
                                  allowed='progress(fraction) -> None or bool')
        return ids, per_step, chunk_steps

    def _objects(self, values, names_, kind):
        if isinstance(values, (str, int, np.integer)) and not is_bool(values):
            values = [values]
        if isinstance(values, np.ndarray):
            values = values.tolist() if values.ndim == 1 else None
        if not isinstance(values, (list, tuple)) or len(values) == 0:
            raise InvalidArgument(f'expected a non-empty list of {kind}s, got {shorten(values)}',
                                  where=f'{kind}s', allowed=f'{kind} names or indices')
        return np.array([name_or_index(s, names_, kind, f'{kind}s') for s in values],
                        dtype=np.intp)

    def sites(self, sites: Any) -> np.ndarray:
        return self._objects(sites, self.site_names, 'site')

    def bodies(self, bodies: Any) -> np.ndarray:
        return self._objects(bodies, self.body_names, 'body')

    def hfield(self, hfield: Any, points: Any, frame: Any, body: Any, ids: Any) -> tuple:
        """``(hfield id, points (m, 2|3), frame, body id or None, ids, geom per variant)``."""
        hid = name_or_index(hfield, self.hfield_names, 'hfield', 'hfield')
        if frame not in hf.FRAMES:
            raise InvalidArgument(f'unknown frame {shorten(frame)}', where='frame',
                                  allowed=', '.join(hf.FRAMES))
        bid = None
        if frame != 'world':
            if body is None:
                raise InvalidArgument(f'frame {shorten(frame)} needs a body', where='body',
                                      allowed='body name or index')
            bid = name_or_index(body, self.body_names, 'body', 'body')
        if isinstance(points, np.ndarray) and points.ndim == 2:
            m_pts = points.shape[0]
        else:
            m_pts = len(points) if hasattr(points, '__len__') else 0
        pts, _ = float_array(points, [(m_pts, 2), (m_pts, 3)], 'points')
        ids = self.ids(ids)
        geoms = []
        for model in self.variants:
            g = hf.geom_of(model, hid)
            if g is None:
                raise InvalidArgument(f'height field {shorten(hfield)} is not used by any geom',
                                      where='hfield', allowed='an hfield with a geom')
            geoms.append(g)
        return hid, pts, frame, bid, ids, geoms


def user_call(fn: Callable[..., Any], where: str, *args: Any) -> Any:
    """A user callback; whatever it raises becomes an error naming it."""
    try:
        return fn(*args)
    except DeviceError:
        raise
    except Exception as exc:
        raise InvalidArgument(f'the {where} callback raised {type(exc).__name__}: '
                              f'{shorten(str(exc), 200)}; the pool is left as it was',
                              where=where) from exc


def check_costs(out: Any, n: int) -> np.ndarray:
    """What a cost callback returned, as ``(n,)`` float64, or the error saying what it was."""
    try:
        costs = np.asarray(out, dtype=np.float64)
    except (TypeError, ValueError):
        costs = None
    if costs is None or costs.shape != (n,):
        raise InvalidArgument(
            f'cost returned {shorten(out)}, not {n} numbers'
            if costs is None else f'cost returned shape {costs.shape}',
            where='cost', allowed=f'({n},); the pool is left as it was')
    return costs
