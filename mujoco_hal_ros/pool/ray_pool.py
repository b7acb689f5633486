"""EnvPool's API over a Ray cluster: one EnvPool per shard, on whichever node Ray places it.

Scale-out is Ray's job here, not ours: Ray places the shard actors (``SPREAD`` by default),
moves the arrays through its object store (one batched call per shard and request, never a
message per environment) and tells us when an actor or its node is gone. What the pool adds
is what Ray cannot know: every request is checked on the driver with the same ``Requests``
the in-process pool uses before any shard is touched, and the driver keeps each
environment's last ``mjSTATE_INTEGRATION`` row and randomization, returned by the shards
with every call that changes them. A lost shard is therefore re-created from those rows on
another node and only its share of the call is rerun; since restoring an integration row is
bit-identical to never having left the MjData, the results equal an in-process ``EnvPool``'s.

Ray is an optional extra (``pip install "ray[default]"``); importing this module does not
need it, creating a pool does.

    with RayPool(model, 4096, nshard=8, address='auto', keyframe='home') as pool:
        res = pool.evaluate(ctrl, cost=cost)   # same call, same results as EnvPool

Why one module of this size: the driver (``RayPool``) and its shard actor (``Shard``) are
two halves of one protocol (which rows travel, when a lost shard is rebuilt and what is
rerun); they change together, so they are read together.
"""

from collections.abc import Callable, Sequence
import functools
from itertools import pairwise
import os
import threading
from typing import Any

import mujoco
import numpy as np

from ..checks import Vector
from ..errors import ClosedError, ConfigError, DeviceError, INTERNAL_ERROR
from .engine import simulation_error
from .layout import StateLayout
from .randomization import FIELDS, view
from .requests import (
    check_costs,
    check_engine,
    check_flag,
    check_models,
    check_variant_of,
    MAX_NBATCH,
    MAX_NTHREAD,
    Requests,
    user_call,
)
from .results import EvaluateResult, ForwardResult, step_result, StepResult
from .validate import integer

RESPAWN_TIMEOUT_S = 120.0
MAX_RESPAWNS = 3          # per shard and call: a shard that keeps dying is reported


def _ray():
    try:
        import ray
    except ImportError:
        raise ConfigError('RayPool needs Ray: pip install "ray[default]" (or use EnvPool '
                          'on one machine)', where='ray') from None
    return ray


def _serialised(method):
    """One call at a time, like EnvPool's lock: the driver's rows have one writer."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        with self._lock:
            self._check_open()
            return method(self, *args, **kwargs)
    return call


class ShardFailure(Exception):
    """A DeviceError raised in a shard, in a form that pickles (DeviceError's keyword-only
    arguments do not survive pickling): ``(code, text, where, allowed, details)``."""


def _carried(method):
    @functools.wraps(method)
    def call(self, *args):
        try:
            return method(self, *args)
        except DeviceError as err:
            raise ShardFailure(err.code, str(err), err.where, err.allowed,
                               dict(err.details)) from None
    return call


def _as_device_error(failure, first_env):
    """The driver's DeviceError for a shard's failure, with global environment ids."""
    code, text, where, allowed, details = failure.args
    if 'env_ids' in details and 'reason' in details:
        return simulation_error([first_env + e for e in details['env_ids']],
                                details['reason'])
    err = DeviceError(code, text, **details)
    err.where, err.allowed = where, allowed
    return err


class Shard:
    """The body of one shard actor: an EnvPool of ``hi - lo`` environments on its node.

    Every call that changes environments returns their new integration rows, which is how the
    driver can re-create this shard anywhere after losing it.
    """

    def __init__(self, variants: Sequence[mujoco.MjModel], nbatch: int, nthread: int,
                 variant_of: Vector | None, keyframe: int | str | None,
                 engine: str) -> None:
        from .pool import EnvPool
        self.pool = EnvPool(variants, nbatch, nthread=nthread, variant_of=variant_of,
                            keyframe=keyframe, engine=engine)

    def info(self) -> dict:
        import ray
        return {'engine': self.pool.engine, 'pid': os.getpid(),
                'node_id': ray.get_runtime_context().get_node_id(),
                'rows': self.pool.get_state(full=True)}

    @_carried
    def step(self, ids: np.ndarray, nstep: int, ctrl: Any, sensors: bool) -> Any:
        res = self.pool.step(nstep, ctrl, ids, sensors=sensors)
        return self.pool.get_state(ids, full=True), res.sensordata, res.unstable

    @_carried
    def reset(self, ids: np.ndarray, keyframe: Any, states: Any, randomization: Any) -> Any:
        self.pool.reset(ids, keyframe=keyframe, states=states, randomization=randomization)
        return self.pool.get_state(ids, full=True)

    @_carried
    def set_state(self, ids: np.ndarray, states: Any, full: bool) -> Any:
        self.pool.set_state(states, ids, full=full)
        return self.pool.get_state(ids, full=True)

    @_carried
    def evaluate(self, ids: np.ndarray, ctrl: Any, keyframe: Any, states: Any,
                 randomization: Any, chunk_steps: int) -> Any:
        res = self.pool.evaluate(ctrl, keyframe=keyframe, initial_state=states, env_ids=ids,
                                 randomization=randomization, chunk_steps=chunk_steps)
        return (self.pool.get_state(ids, full=True), res.sensordata, res.steps_done,
                res.unstable)

    @_carried
    def query(self, method: str, ids: np.ndarray, *args: Any) -> Any:
        return getattr(self.pool, method)(*args, env_ids=ids)

    @_carried
    def restore(self, groups: Any, rows: Any) -> None:
        """Back to ``rows`` and the listed randomizations, whatever this shard held before."""
        self.pool.reset()
        for ids, patch in groups:
            self.pool.reset(ids, randomization=patch)
        self.pool.set_state(rows, full=True)


class RayPool:
    """``nbatch`` environments split over ``nshard`` Ray actors; EnvPool's methods and results.

    Args:
      model, nbatch, nthread, variant_of, keyframe, engine: as EnvPool; ``nthread`` is per
        shard.
      nshard: number of shard actors, 1..nbatch, or None for as many as the cluster's CPUs
        hold (``actor_options`` num_cpus each); environments are split into contiguous
        blocks.
      address: None to use the Ray connection this process has (or start a local Ray),
        'local' for a new local Ray, 'auto' or 'host:port' for a running cluster. A Ray this
        pool started is shut down by ``close()``.
      actor_options: Ray ``.options()`` for each shard actor, default
        ``{'num_cpus': 1, 'scheduling_strategy': 'SPREAD'}``.
      init_options: extra ``ray.init`` arguments when the pool connects.
    """

    def __init__(self, model: mujoco.MjModel | Sequence[mujoco.MjModel], nbatch: int, *,
                 nshard: int | None = None, nthread: int = 1,
                 variant_of: Vector | None = None, keyframe: int | str | None = None,
                 engine: str = 'auto', address: str | None = None,
                 actor_options: dict | None = None,
                 init_options: dict | None = None) -> None:
        check_engine(engine)
        variants = check_models(model)
        self._nbatch = integer(nbatch, 'nbatch', 1, MAX_NBATCH)
        self._nthread = integer(nthread, 'nthread', 1, MAX_NTHREAD)
        if nshard is not None:
            nshard = integer(nshard, 'nshard', 1, self._nbatch)
        self._variants = tuple(variants)
        self._variant_of = check_variant_of(variant_of, self._nbatch, len(variants))
        self.layout = StateLayout(variants[0])
        self._requests = Requests(self._variants, self._variant_of, self.layout)
        if keyframe is not None:
            self._requests.keyframe(keyframe, range(len(variants)))
        self._actors = []
        self._closed = False
        self._lock = threading.RLock()
        ray = self._ray = _ray()
        self._owns_ray = False
        if address is not None and ray.is_initialized():
            raise ConfigError(f'this process is already connected to Ray, so address='
                              f'{address!r} cannot apply; pass address=None to use that '
                              f'connection', where='address')
        if not ray.is_initialized():
            opts: dict[str, Any] = {'include_dashboard': False, 'log_to_driver': False}
            opts.update(init_options or {})
            if address not in (None, 'local'):
                opts['address'] = address
            ray.init(**opts)
            self._owns_ray = True
        options: dict[str, Any] = {'num_cpus': 1, 'scheduling_strategy': 'SPREAD'}
        options.update(actor_options or {})
        if nshard is None:
            cpus = ray.cluster_resources().get('CPU', 1) / max(options['num_cpus'], 1e-3)
            nshard = min(self._nbatch, max(1, int(cpus)))
        self._nshard = nshard
        self._args = dict(nthread=self._nthread, keyframe=keyframe, engine=engine)
        self._bounds = np.array([self._nbatch * k // self._nshard
                                 for k in range(self._nshard + 1)], dtype=np.intp)
        self._models_ref = ray.put(self._variants)
        self._actor_class = ray.remote(Shard).options(**options)
        self._rows = np.empty((self._nbatch, self.layout.full_size))
        self._patch_of = [None] * self._nbatch   # last randomization per environment
        self._nodes = [None] * self._nshard
        self._engine_name: str | None = None
        self._respawns = 0
        try:
            self._actors = [self._spawn(k) for k in range(self._nshard)]
            for k, info in enumerate(ray.get([a.info.remote() for a in self._actors])):
                self._adopt(k, info)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ shards
    def _spawn(self, k):
        lo, hi = self._bounds[k], self._bounds[k + 1]
        return self._actor_class.remote(self._models_ref, int(hi - lo),
                                        variant_of=self._variant_of[lo:hi], **self._args)

    def _adopt(self, k, info):
        lo, hi = self._bounds[k], self._bounds[k + 1]
        self._rows[lo:hi] = info['rows']
        self._nodes[k] = info['node_id']
        self._engine_name = info['engine']

    def _groups(self, k):
        """Shard ``k``'s randomized environments grouped by field set, as reset arguments."""
        lo, hi = self._bounds[k], self._bounds[k + 1]
        by_keys = {}
        for env in range(lo, hi):
            patch = self._patch_of[env]
            if patch:
                by_keys.setdefault(tuple(sorted(patch)), []).append(env)
        return [(np.array(envs) - lo,
                 {key: np.stack([self._patch_of[e][key] for e in envs]) for key in keys})
                for keys, envs in by_keys.items()]

    def _restore(self, k, actor):
        lo, hi = self._bounds[k], self._bounds[k + 1]
        return actor.restore.remote(self._groups(k), self._rows[lo:hi])

    def _respawn(self, k):
        """Re-create shard ``k`` wherever Ray can place it, from the rows the driver holds."""
        ray = self._ray
        try:
            ray.kill(self._actors[k], no_restart=True)
        except Exception:  # noqa: BLE001 - it is gone already, which is why we are here
            pass
        actor = self._spawn(k)
        try:
            ray.get(self._restore(k, actor), timeout=RESPAWN_TIMEOUT_S)
            info = ray.get(actor.info.remote(), timeout=RESPAWN_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            ray.kill(actor)
            raise DeviceError(INTERNAL_ERROR, f'shard {k} was lost and no node could host it '
                              f'again within {RESPAWN_TIMEOUT_S:.0f} s; add a node to the Ray '
                              f'cluster or lower actor_options num_cpus',
                              where='ray') from None
        self._actors[k] = actor
        self._nodes[k] = info['node_id']
        self._respawns += 1

    def _split(self, ids):
        """``[(shard, positions in ids, shard-local ids)]`` for the shards ``ids`` touch."""
        shard = np.searchsorted(self._bounds, ids, side='right') - 1
        parts = []
        for k in np.unique(shard).tolist():
            pos = np.nonzero(shard == k)[0]
            parts.append((k, pos, ids[pos] - self._bounds[k]))
        return parts

    def _run(self, parts, method, args_of):
        """``method(*args_of(k, pos, local))`` on every shard of ``parts`` at once.

        A shard lost to a dead actor or node is re-created and only its share rerun. Any other
        error (MuJoCo failing in a step) puts every shard of the call back to the rows and
        randomizations the driver held before it, so a failed call changes nothing.
        """
        ray = self._ray
        refs = [getattr(self._actors[k], method).remote(*args_of(k, pos, local))
                for k, pos, local in parts]
        out = [None] * len(parts)
        pending = list(range(len(parts)))
        for _attempt in range(MAX_RESPAWNS + 1):
            lost, failure = [], None
            for i in pending:
                try:
                    out[i] = ray.get(refs[i])
                except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError):
                    lost.append(i)   # the actor, or its node with the reply on it, is gone
                except ray.exceptions.RayTaskError as exc:
                    failure = failure or (parts[i][0], exc)
            if failure is not None:
                self._put_back([k for k, _, _ in parts])
                k, task_error = failure
                cause = task_error.cause
                if isinstance(cause, ShardFailure):
                    raise _as_device_error(cause, int(self._bounds[k])) from None
                raise cause if isinstance(cause, BaseException) else task_error
            if not lost:
                return out
            for i in lost:
                k, pos, local = parts[i]
                self._respawn(k)
                refs[i] = getattr(self._actors[k], method).remote(*args_of(k, pos, local))
            pending = lost
        raise DeviceError(INTERNAL_ERROR, f'shard(s) {[parts[i][0] for i in pending]} were '
                          f'lost {MAX_RESPAWNS + 1} times in one call; check the Ray nodes',
                          where='ray')

    def _put_back(self, shards):
        """Every listed shard back to the driver's rows (a lost one is re-created)."""
        ray = self._ray
        for k in shards:
            try:
                ray.get(self._restore(k, self._actors[k]))
            except ray.exceptions.RayActorError:
                self._respawn(k)

    def _commit(self, parts, rows_of, ids=None, patch=None):
        """Record the rows (and, for a reset, the randomization) the shards returned."""
        for (k, _pos, local), rows in zip(parts, rows_of, strict=True):
            self._rows[self._bounds[k] + local] = rows
        if ids is not None:
            for p, env in enumerate(ids.tolist()):
                self._patch_of[env] = ({key: np.array(v[p]) for key, v in patch.items()}
                                       if patch else None)

    def _gather_rows(self, n, parts, rows_of):
        rows = np.empty((n, self.layout.full_size))
        for (_, pos, _), r in zip(parts, rows_of, strict=True):
            rows[pos] = r
        return rows

    @staticmethod
    def _concat(n, parts, arrays):
        """Per-shard ``(n_k, ...)`` arrays into one ``(n, ...)`` in the caller's order."""
        first = arrays[0]
        out = np.empty((n,) + first.shape[1:], dtype=first.dtype)
        for (_, pos, _), a in zip(parts, arrays, strict=True):
            out[pos] = a
        return out

    # ------------------------------------------------------------------ description
    nbatch = property(lambda self: self._nbatch)
    nthread = property(lambda self: self._nthread)
    nshard = property(lambda self: self._nshard)
    variants = property(lambda self: self._variants)
    model = property(lambda self: self._variants[0])
    variant_of = property(lambda self: self._variant_of.copy())
    state_size = property(lambda self: self.layout.size)
    full_state_size = property(lambda self: self.layout.full_size)
    state_names = property(lambda self: self.layout.names)
    randomizable_fields = property(lambda self: tuple(FIELDS))
    site_names = property(lambda self: list(self._requests.site_names))
    body_names = property(lambda self: list(self._requests.body_names))

    @property
    def engine(self) -> str | None:
        """The engine the shards' EnvPools step with ('batch' or 'threads')."""
        return self._engine_name

    @property
    def shard_nodes(self) -> list:
        """Ray node id of each shard actor now (changes when a lost shard is re-created)."""
        return list(self._nodes)

    @property
    def shard_bounds(self) -> list[tuple[int, int]]:
        """``[(first env, end)]`` of each shard."""
        return [(int(a), int(b)) for a, b in pairwise(self._bounds)]

    @property
    def respawns(self) -> int:
        """How many times a lost shard was re-created."""
        return self._respawns

    @_serialised
    def shard_rows(self) -> np.ndarray:
        """``(nbatch, full_state_size)`` rows read from the shard actors themselves.

        ``get_state`` answers from the driver's copy; this asks the shards, to check that
        they agree (tests, debugging).
        """
        infos = self._ray.get([a.info.remote() for a in self._actors])
        return np.concatenate([info['rows'] for info in infos])

    def state_layout(self, full: bool = False) -> list:
        return self.layout.describe(full)

    def __repr__(self) -> str:
        state = 'closed' if self._closed else 'open'
        return (f'RayPool(nbatch={self._nbatch}, nshard={self._nshard}, '
                f'nthread={self._nthread}, engine={self._engine_name}, {state})')

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Kill every shard actor (and a Ray this pool started); later calls raise."""
        lock = getattr(self, '_lock', None)
        if lock is None or self._closed:
            return
        with lock:
            self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = getattr(self, '_ray', None)
        if ray is None:         # never started
            self._actors = []
            return
        for actor in self._actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - a dead actor is as closed as it gets
                pass
        self._actors = []
        if getattr(self, '_owns_ray', False) and ray.is_initialized():
            ray.shutdown()

    def __enter__(self):
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if hasattr(self, '_closed'):
            try:
                self.close()
            except Exception:  # noqa: BLE001 - interpreter shutdown: Ray may be gone
                pass

    def _check_open(self):
        if self._closed:
            raise ClosedError('RayPool')

    # ------------------------------------------------------------------ state
    @_serialised
    def get_state(self, env_ids: Vector | None = None, *, full: bool = False) -> np.ndarray:
        """From the driver's rows, which every changing call keeps current: no shard call."""
        ids = self._requests.ids(env_ids)
        rows = self._rows[ids]
        return rows if check_flag(full, 'full') else rows[:, self.layout.physics_columns]

    @_serialised
    def set_state(self, states: Vector, env_ids: Vector | None = None, *,
                  full: bool = False) -> None:
        ids = self._requests.ids(env_ids)
        full = check_flag(full, 'full')
        rows = self._requests.states(states, len(ids), full, 'states')
        parts = self._split(ids)
        got = self._run(parts, 'set_state', lambda k, pos, local: (local, rows[pos], full))
        self._commit(parts, got)

    @_serialised
    def field_values(self, field: str, env_ids: Vector | None = None) -> np.ndarray:
        ids = self._requests.ids(env_ids)
        self._requests.field(field)
        parts = self._split(ids)
        if not parts:
            return np.empty((0,) + tuple(view(self.model, field).shape))
        got = self._run(parts, 'query', lambda k, pos, local: ('field_values', local, field))
        return self._concat(len(ids), parts, got)

    @_serialised
    def randomized(self, env_ids: Vector | None = None) -> np.ndarray:
        ids = self._requests.ids(env_ids)
        return np.array([bool(self._patch_of[e]) for e in ids.tolist()], dtype=bool)

    # ------------------------------------------------------------------ calls
    @_serialised
    def reset(self, env_ids: Vector | None = None, *, keyframe: int | str | None = None,
              states: Vector | None = None, randomization: dict | None = None) -> None:
        """As EnvPool.reset; refused before any shard is touched when any argument is bad."""
        ids, physics, patch = self._requests.reset(env_ids, keyframe, states, randomization,
                                                   self._patches_refused())
        self._reset(ids, keyframe, physics, patch)

    def _patches_refused(self):
        return (self._engine_name == 'batch' and len(self._variants) > 1
                and self._args['engine'] == 'batch')

    def _reset(self, ids, keyframe, physics, patch):
        parts = self._split(ids)

        def args(k, pos, local):
            return (local, keyframe, None if physics is None else physics[pos],
                    {key: v[pos] for key, v in patch.items()} if patch else patch)
        self._commit(parts, self._run(parts, 'reset', args), ids, patch)

    @_serialised
    def step(self, nstep: int = 1, ctrl: Vector | None = None,
             env_ids: Vector | None = None, *, sensors: bool = False) -> StepResult:
        ids, nstep, sensors, const, per_step = self._requests.step(nstep, ctrl, env_ids,
                                                                   sensors)
        ctrl = const if per_step is None else per_step
        return self._step(ids, nstep, ctrl, sensors)

    def _step(self, ids, nstep, ctrl, sensors):
        parts = self._split(ids)

        def args(k, pos, local):
            return local, nstep, None if ctrl is None else ctrl[pos], sensors
        got = self._run(parts, 'step', args)
        self._commit(parts, [g[0] for g in got])
        n = len(ids)
        rows = self._gather_rows(n, parts, [g[0] for g in got])
        sens = self._concat(n, parts, [g[1] for g in got]) if sensors and parts else None
        unstable = (self._concat(n, parts, [g[2] for g in got]) if parts
                    else np.zeros(0, dtype=bool))
        if sensors and sens is None:
            sens = np.empty((0, self.model.nsensordata))
        return step_result(self.layout, ids, rows, sens, unstable)

    def _query(self, method, ids, *args):
        parts = self._split(ids)
        got = self._run(parts, 'query', lambda k, pos, local: (method, local) + args)
        return parts, got

    @_serialised
    def forward(self, env_ids: Vector | None = None) -> ForwardResult:
        ids = self._requests.ids(env_ids)
        parts, got = self._query('forward', ids)
        if not parts:
            m = self.model
            return ForwardResult(ids.copy(), np.empty((0, m.nsensordata)),
                                 np.empty((0, m.nbody, 3)), np.empty((0, m.nbody, 4)),
                                 np.empty((0, m.nsite, 3)), np.empty((0, m.nsite, 9)))
        fields = ('sensordata', 'xpos', 'xquat', 'site_xpos', 'site_xmat')
        return ForwardResult(ids.copy(), **{
            f: self._concat(len(ids), parts, [getattr(g, f) for g in got]) for f in fields})

    def _pair(self, method, ids, objs):
        parts, got = self._query(method, ids, objs)
        if not parts:
            shape = (0, len(objs), 3, self.model.nv)
            return np.empty(shape), np.empty(shape)
        n = len(ids)
        return (self._concat(n, parts, [g[0] for g in got]),
                self._concat(n, parts, [g[1] for g in got]))

    @_serialised
    def site_jacobians(self, sites: Sequence[str | int],
                       env_ids: Vector | None = None) -> tuple[np.ndarray, np.ndarray]:
        sids = self._requests.sites(sites)
        return self._pair('site_jacobians', self._requests.ids(env_ids), sids)

    @_serialised
    def body_jacobians(self, bodies: Sequence[str | int],
                       env_ids: Vector | None = None) -> tuple[np.ndarray, np.ndarray]:
        bids = self._requests.bodies(bodies)
        return self._pair('body_jacobians', self._requests.ids(env_ids), bids)

    @_serialised
    def hfield_heights(self, hfield: str | int, points: Vector, frame: str = 'world',
                       body: str | int | None = None,
                       env_ids: Vector | None = None) -> np.ndarray:
        hid, pts, frame, bid, ids, _ = self._requests.hfield(hfield, points, frame, body,
                                                             env_ids)
        parts, got = self._query('hfield_heights', ids, hid, pts, frame, bid)
        if not parts:
            return np.empty((0, len(pts)))
        return self._concat(len(ids), parts, got)

    # ------------------------------------------------------------------ evaluate
    @_serialised
    def evaluate(self, ctrl: Vector, nstep: int | None = None, *,
                 keyframe: int | str | None = None, initial_state: Vector | None = None,
                 env_ids: Vector | None = None, randomization: dict | None = None,
                 cost: Callable[[np.ndarray, np.ndarray], Vector] | None = None,
                 progress: Callable[[float], Any] | None = None,
                 chunk_steps: int = 50) -> EvaluateResult:
        """As EnvPool.evaluate. Without ``progress`` each shard runs its share in one call;
        with it the driver steps every shard one chunk at a time and calls ``progress``
        between chunks, so a lost shard reruns only its current chunk."""
        ids, per_step, chunk_steps = self._requests.evaluate(ctrl, nstep, env_ids, cost,
                                                             progress, chunk_steps)
        ids, physics, patch = self._requests.reset(ids, keyframe, initial_state,
                                                   randomization, self._patches_refused())
        before = (self._rows.copy(), list(self._patch_of))
        try:
            return self._evaluate(ids, per_step, keyframe, physics, patch, chunk_steps, cost,
                                  progress)
        except BaseException:
            # a raising callback, a bad cost or a failed chunk: back to before the call
            self._rows[:] = before[0]
            self._patch_of = before[1]
            self._put_back([k for k, _, _ in self._split(ids)])
            raise

    def _evaluate(self, ids, per_step, keyframe, physics, patch, chunk_steps, cost, progress):
        if progress is None:
            done, completed, sens, unstable = self._evaluate_whole(ids, per_step, keyframe,
                                                                   physics, patch,
                                                                   chunk_steps)
        else:
            done, completed, sens, unstable = self._evaluate_chunks(ids, per_step, keyframe,
                                                                    physics, patch,
                                                                    chunk_steps, progress)
        rows = self._rows[ids]
        costs = None
        if cost is not None and completed:
            lay = self.layout
            costs = check_costs(user_call(cost, 'cost', rows[:, lay.columns('qpos')],
                                          rows[:, lay.columns('qvel')]), len(ids))
        return EvaluateResult(ids.copy(), rows[:, self.layout.physics_columns], sens, costs,
                              done, completed, unstable)

    def _evaluate_whole(self, ids, per_step, keyframe, physics, patch, chunk_steps):
        parts = self._split(ids)

        def args(k, pos, local):
            return (local, per_step[pos], keyframe, None if physics is None else physics[pos],
                    {key: v[pos] for key, v in patch.items()} if patch else patch,
                    chunk_steps)
        got = self._run(parts, 'evaluate', args)
        self._commit(parts, [g[0] for g in got], ids, patch)
        n = len(ids)
        if not parts:
            return (per_step.shape[1], True, np.empty((0, self.model.nsensordata)),
                    np.zeros(0, dtype=bool))
        return (per_step.shape[1], True, self._concat(n, parts, [g[1] for g in got]),
                self._concat(n, parts, [g[3] for g in got]))

    def _evaluate_chunks(self, ids, per_step, keyframe, physics, patch, chunk_steps,
                         progress):
        self._reset(ids, keyframe, physics, patch)
        steps = per_step.shape[1]
        done, unstable, sens, completed = 0, np.zeros(len(ids), dtype=bool), None, True
        while done < steps:
            k = min(chunk_steps, steps - done)
            last = done + k == steps
            res = self._step(ids, k, per_step[:, done:done + k], last)
            unstable |= res.unstable
            sens = res.sensordata
            done += k
            if user_call(progress, 'progress', done / steps) is False and not last:
                completed = False
                break
        if sens is None:
            sens = self.forward(ids).sensordata
        return done, completed, sens, unstable
