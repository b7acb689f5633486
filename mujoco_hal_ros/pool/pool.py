"""A batch of MuJoCo environments over one model (or a few variants), stepped in parallel.

Every environment is one ``mjSTATE_INTEGRATION`` row in a ``(nbatch, n)`` table; an engine
restores each row into scratch MjData, steps it and writes it back: ``mujoco.batch.Batch``
(MuJoCo >= 4.0, whose state rows are the table itself) or the pool's own worker threads (see
``engine`` for why Batch is the default and why neither uses ``mujoco.rollout``). That makes
sparse resets, get/set state and "which environments changed" plain array operations, keeps
memory at a few hundred bytes per environment, and makes every call atomic: every argument is
checked before any work starts, and a step that fails puts the listed rows back, so a refused
or failed call leaves every environment exactly as it was.

Why one module past 600 lines: ``EnvPool`` is the pool's one public class, a facade whose
methods check a request (``requests``) and hand it to the engine, the queries, the patch
store or the renderer; what it holds is the lock and the order those calls take.
"""

from collections.abc import Callable, Sequence
from concurrent.futures import Future
import threading
from typing import Any

import mujoco
import numpy as np

from ..checks import Vector
from ..errors import ClosedError, InvalidArgument, ModelError
from . import batch_libs, hfield as hf, jacobian as jac
from .engine import batch_available, BatchEngine, ThreadEngine, Workers
from .layout import INTEGRATION, StateLayout
from .queries import Queries
from .randomization import FIELDS, PatchStore, view
from .requests import (  # noqa: F401
    check_costs,
    check_engine,
    check_flag,
    check_models,
    check_variant_of,
    MAX_NBATCH,
    MAX_NSTEP,
    MAX_NTHREAD,
    Requests,
    user_call,
)
from .results import EvaluateResult, ForwardResult, step_result, StepResult
from .validate import integer


class EnvPool:
    """``nbatch`` environments; env ``i`` runs on ``variants[variant_of[i]]``.

    Args:
      model: an MjModel, or a sequence of compatible MjModel variants (same sizes, e.g.
        different link lengths), each compiled once and shared by its environments.
      nbatch: number of environments, 1..65536.
      nthread: worker threads, 1..4*os.cpu_count(); 1 runs on the calling thread.
      variant_of: optional length-nbatch variant index per environment; default ``i % len``.
      keyframe: optional keyframe (name or index) every environment starts from.
      engine: 'batch' steps in a C++ batch library's threads (``mujoco.batch.Batch`` on
        MuJoCo >= 4.0, the public ``mjbatch`` on the MuJoCo 3.x it was built for),
        'threads' with the pool's own worker threads, 'auto' (default) picks a batch
        library when one is here and can run the models exactly. Results are bit-identical
        either way; ``engine`` (the property) says which one runs, ``engine_library`` which
        library. An 'auto' pool of several variants moves to threads at its first
        randomization, which mujoco.batch cannot combine with variants.
    """

    def __init__(self, model: mujoco.MjModel | Sequence[mujoco.MjModel], nbatch: int, *,
                 nthread: int = 1, variant_of: Vector | None = None,
                 keyframe: int | str | None = None, engine: str = 'auto') -> None:
        check_engine(engine)
        if engine == 'batch' and not batch_available():
            raise InvalidArgument(f"engine='batch' needs a batch library: {batch_libs.why_none()}",
                                  where='engine', allowed="'auto' or 'threads'")
        variants = check_models(model)
        self._nbatch = integer(nbatch, 'nbatch', 1, MAX_NBATCH)
        self._nthread = integer(nthread, 'nthread', 1, MAX_NTHREAD)
        nvar = len(variants)
        vmap = check_variant_of(variant_of, self._nbatch, nvar)
        self._variants = tuple(variants)
        self._variant_of = vmap
        m0 = variants[0]
        self.layout = StateLayout(m0)
        if any(StateLayout(m).full_size != self.layout.full_size for m in variants[1:]):
            raise ModelError('variants have different state sizes', where='model')
        self._requests = Requests(self._variants, vmap, self.layout)
        self._ctrl_cols = self.layout.columns('ctrl')
        key = None if keyframe is None else self._requests.keyframe(keyframe, range(nvar))
        self._base_rows: dict = {}  # (variant, keyframe or None) -> integration row after reset
        self._patches = PatchStore(self._variants, self._nbatch)
        self._lock = threading.RLock()
        self._closed = False
        self._workers = Workers(self._variants, self._nthread)
        self._engine_choice = engine
        rows = self._base_row_table(key)[self._variant_of].copy()
        self._engine = self._make_engine(engine, rows)
        self._queries = Queries(self._variants, self._variant_of, self._nthread)
        self._jacobian_models = None    # jac.lean_models, made by the first Jacobian query
        self._renderer: Any = None      # pool.render.PoolRenderer, made by the first render

    def _make_engine(self, choice, rows):
        """Batch unless told otherwise or unable to run these models exactly."""
        if choice != 'threads':
            why = BatchEngine.supports(self._variants)
            if why is None:
                try:
                    return BatchEngine(self._variants, self._variant_of, self._nthread,
                                       self._patches, self.layout, rows)
                except ValueError as exc:  # e.g. sleep or IPC: Batch must be persistent
                    why = str(exc)
            if choice == 'batch':
                raise InvalidArgument(f'no batch library can run this pool: {why}',
                                      where='engine', allowed="'auto' or 'threads'")
        return ThreadEngine(self._variants, self._variant_of, self._workers, self._patches,
                            self.layout, rows)

    @property
    def _state(self):
        """The ``(nbatch, full_state_size)`` row table; the engine's, so never stale."""
        return self._engine.state

    # ------------------------------------------------------------------ description
    @property
    def nbatch(self) -> int:
        return self._nbatch

    @property
    def nthread(self) -> int:
        return self._nthread

    @property
    def engine(self) -> str:
        """'batch' or 'threads': the engine stepping the environments now."""
        return self._engine.name

    @property
    def engine_library(self) -> str | None:
        """'mujoco.batch' or 'mjbatch' on the batch engine, None on threads."""
        return self._engine.library

    @property
    def variants(self) -> tuple[mujoco.MjModel, ...]:
        """The nominal models; treat as read-only (randomization never writes into them)."""
        return self._variants

    @property
    def model(self) -> mujoco.MjModel:
        return self._variants[0]

    @property
    def variant_of(self) -> np.ndarray:
        return self._variant_of.copy()

    @property
    def state_size(self) -> int:
        """Width of a ``get_state()`` row: ``mj_stateSize(m, mjSTATE_FULLPHYSICS)``."""
        return self.layout.size

    @property
    def full_state_size(self) -> int:
        """Width of a ``get_state(full=True)`` row: ``mjSTATE_INTEGRATION``."""
        return self.layout.full_size

    @property
    def state_names(self) -> list[str]:
        return self.layout.names

    def state_layout(self, full: bool = False) -> list:
        """``[(component, offset, size), ...]`` describing a state row for a ROS message."""
        return self.layout.describe(full)

    @property
    def randomizable_fields(self) -> tuple[str, ...]:
        return tuple(FIELDS)

    @property
    def site_names(self) -> list[str]:
        return list(self._requests.site_names)

    @property
    def body_names(self) -> list[str]:
        return list(self._requests.body_names)

    @property
    def variant_patches_refused(self) -> bool:
        """True when randomization is refused: variants on mujoco.batch by request."""
        return (self._engine.name == 'batch' and len(self._variants) > 1
                and self._engine_choice == 'batch')

    def __repr__(self) -> str:
        state = 'closed' if self._closed else 'open'
        return (f'EnvPool(nbatch={self._nbatch}, nthread={self._nthread}, '
                f'variants={len(self._variants)}, engine={self._engine.name}, {state})')

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Stop the worker threads and drop scratch data; later calls raise ClosedError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            renderer, self._renderer = getattr(self, '_renderer', None), None
            if renderer is not None:
                renderer.close()
            self._engine.close()
            self._queries.close()
            self._jacobian_models = None
            self._workers.close()

    def __enter__(self):
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if hasattr(self, '_engine'):  # a refused constructor never started threads
            self.close()

    def _check_open(self):
        if self._closed:
            raise ClosedError('EnvPool')

    # ------------------------------------------------------------------ rows
    def _key_index(self, variant, keyframe):
        m = self._variants[variant]
        if isinstance(keyframe, str):
            return mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, keyframe)
        return int(keyframe)

    def _base_row_table(self, keyframe):
        """Integration rows after mj_resetData(Keyframe) per variant, cached.

        They do not depend on any randomizable field, so a reset is a row copy.
        """
        rows = []
        for v, m in enumerate(self._variants):
            cache_key = (v, keyframe)
            if cache_key not in self._base_rows:
                d = self._workers.slots[0].data(v)
                if keyframe is None:
                    mujoco.mj_resetData(m, d)
                else:
                    mujoco.mj_resetDataKeyframe(m, d, self._key_index(v, keyframe))
                row = np.empty(self.layout.full_size)
                mujoco.mj_getState(m, d, row, INTEGRATION)
                self._base_rows[cache_key] = row
            rows.append(self._base_rows[cache_key])
        return np.stack(rows)

    # ------------------------------------------------------------------ state
    def get_state(self, env_ids: Vector | None = None, *, full: bool = False) -> np.ndarray:
        """``(n, state_size)`` mjSTATE_FULLPHYSICS rows (``full``: mjSTATE_INTEGRATION)."""
        with self._lock:
            self._check_open()
            ids = self._requests.ids(env_ids)
            full = check_flag(full, 'full')
            rows = self._state[ids]
            return rows if full else rows[:, self.layout.physics_columns]

    def set_state(self, states: Vector, env_ids: Vector | None = None, *,
                  full: bool = False) -> None:
        """Overwrite the state of listed environments; the others are untouched.

        Physics rows are applied as ``mj_resetData`` + ``mj_setState(FULLPHYSICS)`` would:
        controls, applied forces and the solver warm start go back to their reset values, so
        the outcome depends only on the row. ``full=True`` rows (from ``get_state(full=True)``)
        restore everything and continue bit-identically. Randomization patches are kept.
        """
        with self._lock:
            self._check_open()
            ids = self._requests.ids(env_ids)
            full = check_flag(full, 'full')
            rows = self._requests.states(states, len(ids), full, 'states')
            self._state[ids] = rows if full else self._physics_rows(ids, rows)

    def _physics_rows(self, ids, physics):
        """Integration rows: the reset row of each env's variant with ``physics`` written in."""
        rows = self._base_row_table(None)[self._variant_of[ids]]
        rows[:, self.layout.physics_columns] = physics
        return rows

    def field_values(self, field: str, env_ids: Vector | None = None) -> np.ndarray:
        """Effective ``(n, *shape)`` values of a randomizable field (patched or nominal)."""
        with self._lock:
            self._check_open()
            ids = self._requests.ids(env_ids)
            self._requests.field(field)
            shape = view(self.model, field).shape
            out = np.empty((len(ids),) + tuple(shape))
            for p, env in enumerate(ids):
                out[p] = self._patches.effective(self._variant_of[env], env, field)
            return out

    def randomized(self, env_ids: Vector | None = None) -> np.ndarray:
        """``(n,)`` bool: which environments currently run on patched model values."""
        with self._lock:
            self._check_open()
            ids = self._requests.ids(env_ids)
            return self._patches.patched[ids]

    # ------------------------------------------------------------------ reset
    def reset(self, env_ids: Vector | None = None, *, keyframe: int | str | None = None,
              states: Vector | None = None, randomization: dict | None = None) -> None:
        """Reset only the listed environments; all others keep state and model values.

        Args:
          keyframe: name or index to reset to (default: the model's qpos0 reset).
          states: ``(n, state_size)`` or ``(state_size,)`` physics rows instead of a keyframe.
          randomization: ``{field: (n, *shape) or shape}`` per-environment model values,
            e.g. ``{'body_mass': masses, 'opt.gravity': [0, 0, -9.7]}``. Derived constants are
            recomputed with mj_setConst when mass, inertia or armature change. Without it the
            environments go back to nominal model values.
        """
        with self._lock:
            self._check_open()
            ids, rows, patch = self._check_reset(env_ids, keyframe, states, randomization)
            self._apply_reset(ids, rows, patch)

    def _check_reset(self, env_ids, keyframe, states, randomization):
        ids, physics, patch = self._requests.reset(env_ids, keyframe, states, randomization,
                                                   self.variant_patches_refused)
        if physics is not None:
            rows = self._physics_rows(ids, physics)
        else:
            rows = self._base_row_table(keyframe)[self._variant_of[ids]]
        return ids, rows, patch

    def _apply_reset(self, ids, rows, patch):
        if self._renderer is not None:   # its jobs draw the models about to change
            self._renderer.wait()
        if patch:
            computed = [None] * len(ids)
            heavy = self._patches.needs_const(patch)

            def work(slot, chunk):
                for p in chunk:
                    env = ids[p]
                    one = {k: v[p] for k, v in patch.items()}
                    computed[p] = self._patches.compute(slot, self._variant_of[env], env, one)

            self._workers.run(work, len(ids), parallel=heavy)
            if self._engine.name == 'batch' and len(self._variants) > 1:
                # an 'auto' pool of variants: the thread engine reads each environment's
                # patch per step; the rows move over unchanged
                state = self._engine.state.copy()
                self._engine.close()
                self._engine = ThreadEngine(self._variants, self._variant_of, self._workers,
                                            self._patches, self.layout, state)
            for p, env in enumerate(ids):
                self._patches.commit(env, computed[p])
        else:
            self._patches.drop(ids)
        self._engine.sync(ids)
        self._state[ids] = rows

    # ------------------------------------------------------------------ stepping
    def step(self, nstep: int = 1, ctrl: Vector | None = None,
             env_ids: Vector | None = None, *, sensors: bool = False) -> StepResult:
        """Advance the listed environments ``nstep`` steps; return only their final state.

        Args:
          nstep: steps per environment, 1..1e6.
          ctrl: ``(n, nu)`` held for the whole call, ``(n, nstep, nu)`` per step, ``(nu,)``
            shared, or None to keep each environment's current controls.
          sensors: also return sensordata evaluated at the returned state (one extra
            mj_forward per environment; the stored state is not affected by it).
        """
        with self._lock:
            self._check_open()
            ids, nstep, sensors, const, per_step = self._requests.step(nstep, ctrl, env_ids,
                                                                       sensors)
            rows, sens, unstable = self._engine.step(ids, nstep, const, per_step, sensors)
            return step_result(self.layout, ids, rows, sens, unstable)

    # ------------------------------------------------------------------ queries
    def _gather(self, ids, fields, stage):
        """Copy MjData ``fields`` of every listed env after ``stage`` at its current state.

        ``stage`` is 'kinematics' or 'forward'. Runs on the calling thread: a few
        microseconds per environment, less than handing chunks to threads under the GIL
        costs. Array views of the scratch data are made once per call (each attribute
        access builds a new view, about a microsecond).
        """
        slot = self._workers.slots[0]
        n = len(ids)
        out = {f: np.empty((n,) + getattr(slot.datas[0], f).shape) for f in fields}
        views = [[getattr(d, f) for f in fields] for d in slot.datas]
        targets = [out[f] for f in fields]
        variant = self._variant_of[ids].tolist()
        state = self._state
        models, model_for = self._variants, self._patches.model_for
        keys_of = self._patches.keys_of
        set_state = mujoco.mj_setState
        first = mujoco.mj_forward if stage == 'forward' else mujoco.mj_kinematics
        for p, env in enumerate(ids.tolist()):
            v = variant[p]
            m = model_for(slot, v, env) if keys_of[env] else models[v]
            d = slot.datas[v]
            set_state(m, d, state[env], INTEGRATION)
            first(m, d)
            for target, source in zip(targets, views[v], strict=True):
                target[p] = source
        return out

    def forward(self, env_ids: Vector | None = None) -> ForwardResult:
        """Sensors and kinematics at the current state (mj_forward); no time advances."""
        with self._lock:
            self._check_open()
            ids = self._requests.ids(env_ids)
            got = self._gather(ids, ('sensordata', 'xpos', 'xquat', 'site_xpos', 'site_xmat'),
                               'forward')
            return ForwardResult(ids.copy(), **got)

    def _kinematics(self, kind, ids, fields, stage):
        """Fields of ``queries.KINDS[kind]`` at every listed state: batched, else our loop."""
        got = self._queries.gather(kind, self._state, ids)
        return got if got is not None else self._gather(ids, fields, stage)

    def site_jacobians(self, sites: Sequence[str | int],
                       env_ids: Vector | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Translational and rotational site Jacobians, each ``(n, nsite, 3, nv)``.

        Bit-identical to ``mj_jacSite`` after ``mj_kinematics`` + ``mj_comPos`` on each
        environment's state, which is what it runs, in C on threads of its own
        (``jacobian``). A randomized environment is answered on its variant's model: no
        randomizable field moves a body or a joint axis, so only rounding can differ.
        """
        with self._lock:
            self._check_open()
            sids = self._requests.sites(sites)
            ids = self._requests.ids(env_ids)
            return self._jacobians('site', ids, sids)

    def body_jacobians(self, bodies: Sequence[str | int],
                       env_ids: Vector | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Translational and rotational Jacobians of body origins, each ``(n, nbody, 3, nv)``.

        As ``site_jacobians`` with ``mj_jacBody``, for models that have no sites where the
        caller needs a Jacobian.
        """
        with self._lock:
            self._check_open()
            bids = self._requests.bodies(bodies)
            ids = self._requests.ids(env_ids)
            return self._jacobians('body', ids, bids)

    def _jacobians(self, kind, ids, objs):
        n, nv = len(ids), self.model.nv
        jacp = np.empty((n, len(objs), 3, nv))
        jacr = np.empty_like(jacp)
        objs = np.asarray(objs, dtype=np.int32)
        state = np.ascontiguousarray(self._state)
        parts = jac.kinematic_parts(self.layout)
        rows = np.asarray(ids, dtype=np.int64)
        slots = np.arange(n, dtype=np.int64)
        if self._jacobian_models is None:
            self._jacobian_models = jac.lean_models(self._variants)
        for v, model in enumerate(self._jacobian_models):
            sel = self._select(ids, v)
            if sel is None:
                continue
            datas = [slot.datas[v] for slot in self._workers.slots]
            jac.jacobians(kind, model, datas, state, parts, np.ascontiguousarray(rows[sel]),
                          np.ascontiguousarray(slots[sel]), objs, jacp, jacr)
        return jacp, jacr

    def _select(self, ids, variant):
        """Rows of ``ids`` on ``variant``: a full slice when there is one variant (no copy)."""
        if len(self._variants) == 1:
            return slice(None)
        sel = np.nonzero(self._variant_of[ids] == variant)[0]
        return sel if sel.size else None

    def hfield_heights(self, hfield: str | int, points: Vector, frame: str = 'world',
                       body: str | int | None = None,
                       env_ids: Vector | None = None) -> np.ndarray:
        """World z of a height field under points given in a world, body or yaw frame.

        Args:
          hfield: height-field asset name or index; its first hfield geom gives the pose.
          points: ``(m, 2)`` or ``(m, 3)`` xy(z) offsets; z only matters in the 'body' frame.
          frame: 'world' (absolute xy), 'body' (body position and full rotation) or 'yaw'
            (body position and heading only).
          body: body name or index, required for 'body' and 'yaw'.
        Returns ``(n, m)`` heights, NaN where a point falls outside the field.
        """
        with self._lock:
            self._check_open()
            hid, pts, frame, bid, ids, geoms = self._requests.hfield(hfield, points, frame,
                                                                     body, env_ids)
            n = len(ids)
            got = self._kinematics('hfield', ids, ('geom_xpos', 'geom_xmat', 'xpos', 'xmat'),
                                   'kinematics')
            out = np.empty((n, len(pts)))
            for v in range(len(self._variants)):
                sel = self._select(ids, v)
                if sel is None:
                    continue
                g = geoms[v]
                body_pos = got['xpos'][sel][:, bid if bid is not None else 0]
                body_mat = got['xmat'][sel][:, bid if bid is not None else 0]
                heights, half = hf.grid(self._variants[v], hid)
                xy = hf.to_world_xy(pts, frame, body_pos, body_mat)
                out[sel] = hf.sample(heights, half, xy, got['geom_xpos'][sel][:, g],
                                     got['geom_xmat'][sel][:, g])
            return out

    # ------------------------------------------------------------------ rendering
    def render(self, cameras: Sequence[str | int], env_ids: Vector | None = None, *,
               width: int = 128, height: int = 128) -> np.ndarray:
        """RGB images of the listed environments' current states, rendered on the pool's
        rendering threads (``pool.render``): ``(len(cameras), n, height, width, 3)`` uint8,
        top row first, each environment on its own (randomized) model; fast (no shadows,
        reflections or multisampling), as the sim node's cameras are by default."""
        return self.render_async(cameras, env_ids, width=width, height=height).result()

    def render_async(self, cameras: Sequence[str | int], env_ids: Vector | None = None, *,
                     width: int = 128, height: int = 128) -> 'Future[np.ndarray]':
        """``render`` as a job: the states are taken now and drawn while the caller steps
        on, which keeps every core busy (``bench/bench_dataset_generate.py``). Jobs run in
        order; resets wait for those in flight, so an image shows the model its state was
        stepped on. ``.result()`` gives the images or raises the job's error."""
        from .render import check_request, PoolRenderer
        with self._lock:
            self._check_open()
            ids = self._requests.ids(env_ids)
            cams, width, height = check_request(self.model, cameras, width, height)
            if self._renderer is None:
                self._renderer = PoolRenderer(self._variants, self._nthread, self._patches,
                                              self._variant_of)
            return self._renderer.submit(self._state[ids], ids, cams, width, height)

    # ------------------------------------------------------------------ evaluate
    def evaluate(self, ctrl: Vector, nstep: int | None = None, *,
                 keyframe: int | str | None = None, initial_state: Vector | None = None,
                 env_ids: Vector | None = None, randomization: dict | None = None,
                 cost: Callable[[np.ndarray, np.ndarray], Vector] | None = None,
                 progress: Callable[[float], Any] | None = None,
                 chunk_steps: int = 50) -> EvaluateResult:
        """Reset, roll open-loop controls forward in chunks, return final states and costs.

        Args:
          ctrl: ``(nstep, nu)`` shared by every environment or ``(n, nstep, nu)``.
          nstep: defaults to the control length; must match it when given.
          keyframe / initial_state / randomization: as in ``reset``.
          cost: optional ``cost(qpos (n, nq), qvel (n, nv)) -> (n,)`` at the final state.
          progress: optional ``progress(fraction)`` called after each chunk; returning False
            stops early (``completed=False``), the hook a ROS action uses for cancellation.
        """
        with self._lock:
            self._check_open()
            ids, per_step, chunk_steps = self._requests.evaluate(ctrl, nstep, env_ids, cost,
                                                                 progress, chunk_steps)
            steps = per_step.shape[1]
            ids, rows, patch = self._check_reset(ids, keyframe, initial_state, randomization)
            saved = self._save(ids)
            try:
                return self._evaluate(ids, rows, patch, per_step, steps, chunk_steps, cost,
                                      progress)
            except BaseException:
                self._restore(ids, saved)
                raise

    def _save(self, ids):
        """What evaluate changes in the listed environments: state rows and patches."""
        patches = self._patches
        return self._state[ids].copy(), [
            {k: patches.values[k][env].copy() for k in patches.keys_of[env]} for env in ids]

    def _restore(self, ids, saved):
        """Put the listed environments back as ``_save`` found them (all or nothing: a user
        callback that raises must not leave them reset and half-way through a rollout)."""
        rows, patches = saved
        if self._renderer is not None:
            self._renderer.wait()
        for env, values in zip(ids, patches, strict=True):
            self._patches.commit(env, values or None)
        self._engine.sync(ids)
        self._state[ids] = rows

    _call = staticmethod(user_call)

    def _evaluate(self, ids, rows, patch, per_step, steps, chunk_steps, cost, progress):
        n = len(ids)
        self._apply_reset(ids, rows, patch)
        done, unstable, sens = 0, np.zeros(n, dtype=bool), None
        completed = True
        while done < steps:
            k = min(chunk_steps, steps - done)
            last = done + k == steps
            rows, sens, bad = self._engine.step(ids, k, None, per_step[:, done:done + k],
                                                last)
            unstable |= bad
            done += k
            if progress is not None and \
                    self._call(progress, 'progress', done / steps) is False and not last:
                completed = False
                break
        if sens is None:
            sens = self.forward(ids).sensordata
        costs = None
        if cost is not None and completed:
            lay = self.layout
            rows = self._state[ids]
            costs = check_costs(self._call(cost, 'cost', rows[:, lay.columns('qpos')],
                                           rows[:, lay.columns('qvel')]), n)
        return EvaluateResult(ids.copy(), self._state[ids][:, self.layout.physics_columns],
                              sens, costs, done, completed, unstable)
