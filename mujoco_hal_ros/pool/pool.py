"""A batch of MuJoCo environments over one model (or a few variants), stepped in parallel.

Every environment is one ``mjSTATE_INTEGRATION`` row in a ``(nbatch, n)`` table; an engine
restores each row into scratch MjData, steps it and writes it back: ``mujoco.batch.Batch``
(MuJoCo >= 4.0, whose state rows are the table itself) or the pool's own worker threads (see
``engine`` for why Batch is the default and why neither uses ``mujoco.rollout``). That makes
sparse resets, get/set state and "which environments changed" plain array operations, keeps
memory at a few hundred bytes per environment, and makes every call atomic: every argument is
checked before any work starts, and a step that fails puts the listed rows back, so a refused
or failed call leaves every environment exactly as it was.
"""

import os
import threading

import mujoco
import numpy as np

from ..checks import is_bool
from ..errors import ClosedError, DeviceError, InvalidArgument, ModelError, UnknownName, shorten
from . import hfield as hf
from . import jacobian as jac
from .engine import ENGINES, BatchEngine, ThreadEngine, Workers, batch_available
from .layout import INTEGRATION, StateLayout
from .randomization import FIELDS, PatchStore, view
from .results import EvaluateResult, ForwardResult, StepResult
from .validate import env_ids as check_ids
from .validate import contains_bool, float_array, integer, name_or_index

MAX_NBATCH = 65536
MAX_NSTEP = 1_000_000
MAX_NTHREAD = 4 * (os.cpu_count() or 1)

# Sizes that must agree across model variants so that one state layout, one control width and
# one scratch-data shape serve every environment.
_SIGNATURE = ('nq', 'nv', 'nu', 'na', 'nbody', 'njnt', 'ngeom', 'nsite', 'nsensordata',
              'nmocap', 'neq', 'nhfield', 'nuserdata', 'ntendon', 'ncam', 'nlight')


def _names(model, objtype, count):
    return [mujoco.mj_id2name(model, objtype, i) or '' for i in range(count)]


class EnvPool:
    """``nbatch`` environments; env ``i`` runs on ``variants[variant_of[i]]``.

    Args:
      model: an MjModel, or a sequence of compatible MjModel variants (same sizes, e.g.
        different link lengths), each compiled once and shared by its environments.
      nbatch: number of environments, 1..65536.
      nthread: worker threads, 1..4*os.cpu_count(); 1 runs on the calling thread.
      variant_of: optional length-nbatch variant index per environment; default ``i % len``.
      keyframe: optional keyframe (name or index) every environment starts from.
      engine: 'batch' steps with ``mujoco.batch.Batch`` (MuJoCo >= 4.0), 'threads' with the
        pool's own worker threads, 'auto' (default) picks Batch when this MuJoCo has it and
        can run the models exactly. Results are bit-identical either way; ``engine`` (the
        property) says which one runs. An 'auto' pool of several variants moves to threads
        at its first randomization, which Batch cannot combine with variants.
    """

    def __init__(self, model, nbatch, *, nthread=1, variant_of=None, keyframe=None,
                 engine='auto'):
        if not isinstance(engine, str) or engine not in ENGINES:
            raise InvalidArgument(f'unknown engine {shorten(engine)}', where='engine',
                                  allowed=', '.join(ENGINES))
        if engine == 'batch' and not batch_available():
            raise InvalidArgument(f'engine=\'batch\' needs mujoco >= 4.0 (mujoco.batch), this '
                                  f'is mujoco {mujoco.__version__}', where='engine',
                                  allowed="'auto' or 'threads'")
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
        self._nbatch = integer(nbatch, 'nbatch', 1, MAX_NBATCH)
        self._nthread = integer(nthread, 'nthread', 1, MAX_NTHREAD)
        nvar = len(variants)
        if variant_of is None:
            vmap = np.arange(self._nbatch, dtype=np.intp) % nvar
        else:
            vmap = np.asarray(variant_of) if not contains_bool(variant_of) else None
            if (vmap is None or vmap.shape != (self._nbatch,) or vmap.dtype.kind not in 'iu'
                    or vmap.min() < 0 or vmap.max() >= nvar):
                raise InvalidArgument(f'expected {self._nbatch} variant indices, got '
                                      f'{shorten(variant_of)}', where='variant_of',
                                      allowed=f'{self._nbatch} integers 0..{nvar - 1}')
            vmap = vmap.astype(np.intp)
        self._variants = tuple(variants)
        self._variant_of = vmap
        m0 = variants[0]
        self.layout = StateLayout(m0)
        if any(StateLayout(m).full_size != self.layout.full_size for m in variants[1:]):
            raise ModelError('variants have different state sizes', where='model')
        self._site_names = _names(m0, mujoco.mjtObj.mjOBJ_SITE, m0.nsite)
        self._body_names = _names(m0, mujoco.mjtObj.mjOBJ_BODY, m0.nbody)
        self._hfield_names = _names(m0, mujoco.mjtObj.mjOBJ_HFIELD, m0.nhfield)
        self._ctrl_cols = self.layout.columns('ctrl')
        key = None if keyframe is None else self._check_keyframe(keyframe, range(nvar))
        self._base_rows = {}  # (variant, keyframe or None) -> integration row after reset
        self._patches = PatchStore(self._variants, self._nbatch)
        self._lock = threading.RLock()
        self._closed = False
        self._workers = Workers(self._variants, self._nthread)
        self._engine_choice = engine
        rows = self._base_row_table(key)[self._variant_of].copy()
        self._engine = self._make_engine(engine, rows)

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
                raise InvalidArgument(f'mujoco.batch cannot run this pool: {why}',
                                      where='engine', allowed="'auto' or 'threads'")
        return ThreadEngine(self._variants, self._variant_of, self._workers, self._patches,
                            self.layout, rows)

    @property
    def _state(self):
        """The ``(nbatch, full_state_size)`` row table; the engine's, so never stale."""
        return self._engine.state

    # ------------------------------------------------------------------ description
    @property
    def nbatch(self):
        return self._nbatch

    @property
    def nthread(self):
        return self._nthread

    @property
    def engine(self):
        """'batch' or 'threads': the engine stepping the environments now."""
        return self._engine.name

    @property
    def variants(self):
        """The nominal models; treat as read-only (randomization never writes into them)."""
        return self._variants

    @property
    def model(self):
        return self._variants[0]

    @property
    def variant_of(self):
        return self._variant_of.copy()

    @property
    def state_size(self):
        """Width of a ``get_state()`` row: ``mj_stateSize(m, mjSTATE_FULLPHYSICS)``."""
        return self.layout.size

    @property
    def full_state_size(self):
        """Width of a ``get_state(full=True)`` row: ``mjSTATE_INTEGRATION``."""
        return self.layout.full_size

    @property
    def state_names(self):
        return self.layout.names

    def state_layout(self, full=False):
        """``[(component, offset, size), ...]`` describing a state row for a ROS message."""
        return self.layout.describe(full)

    @property
    def randomizable_fields(self):
        return tuple(FIELDS)

    @property
    def site_names(self):
        return list(self._site_names)

    def __repr__(self):
        state = 'closed' if self._closed else 'open'
        return (f'EnvPool(nbatch={self._nbatch}, nthread={self._nthread}, '
                f'variants={len(self._variants)}, engine={self._engine.name}, {state})')

    # ------------------------------------------------------------------ lifecycle
    def close(self):
        """Stop the worker threads and drop scratch data; later calls raise ClosedError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._engine.close()
            self._workers.close()

    def __enter__(self):
        self._check_open()
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if hasattr(self, '_engine'):  # a refused constructor never started threads
            self.close()

    def _check_open(self):
        if self._closed:
            raise ClosedError('EnvPool')

    # ------------------------------------------------------------------ checks
    def _check_keyframe(self, keyframe, variants):
        """The keyframe must exist in every variant the listed environments use."""
        for v in variants:
            m = self._variants[v]
            name_or_index(keyframe, _names(m, mujoco.mjtObj.mjOBJ_KEY, m.nkey), 'keyframe',
                          'keyframe')
        return keyframe

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

    def _check_ctrl(self, ctrl, n, nstep, where='ctrl'):
        """Returns ``(constant (n, nu) or None, per-step (n, nstep, nu) or None)``."""
        if ctrl is None:
            return None, None
        nu = self.model.nu
        arr, which = float_array(ctrl, [(n, nu), (n, nstep, nu), (nu,)], where)
        if which == 0:
            return arr, None
        if which == 2:
            return np.broadcast_to(arr, (n, nu)), None
        return None, arr

    @staticmethod
    def _check_flag(value, where):
        if not isinstance(value, (bool, np.bool_)):
            raise InvalidArgument(f'expected True or False, got {shorten(value)}', where=where,
                                  allowed='bool')
        return bool(value)

    def _check_sites(self, sites):
        if isinstance(sites, (str, int, np.integer)) and not is_bool(sites):
            sites = [sites]
        if isinstance(sites, np.ndarray):
            sites = sites.tolist() if sites.ndim == 1 else None
        if not isinstance(sites, (list, tuple)) or len(sites) == 0:
            raise InvalidArgument(f'expected a non-empty list of sites, got {shorten(sites)}',
                                  where='sites', allowed='site names or indices')
        return np.array([name_or_index(s, self._site_names, 'site', 'sites') for s in sites],
                        dtype=np.intp)

    # ------------------------------------------------------------------ state
    def get_state(self, env_ids=None, *, full=False):
        """``(n, state_size)`` mjSTATE_FULLPHYSICS rows (``full``: mjSTATE_INTEGRATION)."""
        with self._lock:
            self._check_open()
            ids = check_ids(env_ids, self._nbatch)
            full = self._check_flag(full, 'full')
            rows = self._state[ids]
            return rows if full else rows[:, self.layout.physics_columns]

    def set_state(self, states, env_ids=None, *, full=False):
        """Overwrite the state of listed environments; the others are untouched.

        Physics rows are applied as ``mj_resetData`` + ``mj_setState(FULLPHYSICS)`` would:
        controls, applied forces and the solver warm start go back to their reset values, so
        the outcome depends only on the row. ``full=True`` rows (from ``get_state(full=True)``)
        restore everything and continue bit-identically. Randomization patches are kept.
        """
        with self._lock:
            self._check_open()
            ids = check_ids(env_ids, self._nbatch)
            full = self._check_flag(full, 'full')
            rows = self._state_rows(states, ids, full, 'states')
            self._state[ids] = rows

    def _state_rows(self, states, ids, full, where):
        n = len(ids)
        width = self.layout.full_size if full else self.layout.size
        arr, which = float_array(states, [(n, width), (width,)], where)
        if full:
            return np.broadcast_to(arr, (n, width)) if which else arr
        rows = self._base_row_table(None)[self._variant_of[ids]]
        rows[:, self.layout.physics_columns] = arr
        return rows

    def field_values(self, field, env_ids=None):
        """Effective ``(n, *shape)`` values of a randomizable field (patched or nominal)."""
        with self._lock:
            self._check_open()
            ids = check_ids(env_ids, self._nbatch)
            if field not in FIELDS:
                raise UnknownName('randomizable field', field, list(FIELDS), where='field')
            shape = view(self.model, field).shape
            out = np.empty((len(ids),) + tuple(shape))
            for p, env in enumerate(ids):
                out[p] = self._patches.effective(self._variant_of[env], env, field)
            return out

    def randomized(self, env_ids=None):
        """``(n,)`` bool: which environments currently run on patched model values."""
        with self._lock:
            self._check_open()
            ids = check_ids(env_ids, self._nbatch)
            return np.array([bool(self._patches.keys_of[e]) for e in ids], dtype=bool)

    # ------------------------------------------------------------------ reset
    def reset(self, env_ids=None, *, keyframe=None, states=None, randomization=None):
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
        ids = check_ids(env_ids, self._nbatch)
        if keyframe is not None and states is not None:
            raise InvalidArgument('give a keyframe or states, not both', where='reset',
                                  allowed='keyframe=..., states=... or neither')
        if states is not None:
            rows = self._state_rows(states, ids, False, 'states')
        else:
            if keyframe is not None:
                used = np.unique(self._variant_of[ids]) if len(ids) else [0]
                self._check_keyframe(keyframe, [int(v) for v in used])
            rows = self._base_row_table(keyframe)[self._variant_of[ids]]
        patch = None
        if randomization is not None:
            patch = self._patches.check(randomization, len(ids))
            if patch and self._engine.name == 'batch' and len(self._variants) > 1:
                if self._engine_choice == 'batch':
                    raise InvalidArgument(
                        'mujoco.batch cannot randomize environments of a pool of several '
                        'model variants (set_models and expand are exclusive)',
                        where='randomization', allowed="engine='auto' or 'threads'")
        return ids, rows, patch

    def _apply_reset(self, ids, rows, patch):
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
            self._patches.commit(env, computed[p] if patch else None)
        self._engine.sync(ids)
        self._state[ids] = rows

    # ------------------------------------------------------------------ stepping
    def step(self, nstep=1, ctrl=None, env_ids=None, *, sensors=False):
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
            ids = check_ids(env_ids, self._nbatch)
            nstep = integer(nstep, 'nstep', 1, MAX_NSTEP)
            sensors = self._check_flag(sensors, 'sensors')
            const, per_step = self._check_ctrl(ctrl, len(ids), nstep)
            rows, sens, unstable = self._engine.step(ids, nstep, const, per_step, sensors)
            return self._result(ids, rows, sens, unstable)

    def _result(self, ids, rows, sens, unstable):
        lay = self.layout
        return StepResult(env_ids=ids.copy(), state=rows[:, lay.physics_columns],
                          time=rows[:, lay.columns('time')][:, 0].copy(),
                          qpos=rows[:, lay.columns('qpos')].copy(),
                          qvel=rows[:, lay.columns('qvel')].copy(),
                          act=rows[:, lay.columns('act')].copy(),
                          sensordata=sens, unstable=unstable)

    # ------------------------------------------------------------------ queries
    def _gather(self, ids, fields, stage):
        """Copy MjData ``fields`` of every listed env after ``stage`` at its current state.

        ``stage`` is 'kinematics', 'com' (kinematics + mj_comPos) or 'forward'. Runs on the
        calling thread: a few microseconds per environment, less than handing chunks to
        threads under the GIL costs. Array views of the scratch data are made once per call
        (each attribute access builds a new view, about a microsecond).
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
        com_pos = mujoco.mj_comPos if stage == 'com' else None
        for p, env in enumerate(ids.tolist()):
            v = variant[p]
            m = model_for(slot, v, env) if keys_of[env] else models[v]
            d = slot.datas[v]
            set_state(m, d, state[env], INTEGRATION)
            first(m, d)
            if com_pos is not None:
                com_pos(m, d)
            for target, source in zip(targets, views[v]):
                target[p] = source
        return out

    def forward(self, env_ids=None):
        """Sensors and kinematics at the current state (mj_forward); no time advances."""
        with self._lock:
            self._check_open()
            ids = check_ids(env_ids, self._nbatch)
            got = self._gather(ids, ('sensordata', 'xpos', 'xquat', 'site_xpos', 'site_xmat'),
                               'forward')
            return ForwardResult(ids.copy(), **got)

    def site_jacobians(self, sites, env_ids=None):
        """Translational and rotational site Jacobians, each ``(n, nsite, 3, nv)``.

        Same numbers as ``mj_jacSite`` after ``mj_forward`` on each environment's state (to
        rounding: evaluated in NumPy for all sites at once, see ``jacobian``).
        """
        with self._lock:
            self._check_open()
            sids = self._check_sites(sites)
            ids = check_ids(env_ids, self._nbatch)
            n, m0 = len(ids), self.model
            got = self._gather(ids, ('cdof', 'subtree_com', 'site_xpos'), 'com')
            jacp = np.empty((n, len(sids), 3, m0.nv))
            jacr = np.empty_like(jacp)
            for v, model in enumerate(self._variants):
                sel = self._select(ids, v)
                if sel is None:
                    continue
                roots = jac.site_roots(model, sids)
                jacp[sel], jacr[sel] = jac.jacobians(
                    got['cdof'][sel], got['subtree_com'][sel][:, roots],
                    got['site_xpos'][sel][:, sids], jac.chain_mask(model, sids))
            return jacp, jacr

    def _select(self, ids, variant):
        """Rows of ``ids`` on ``variant``: a full slice when there is one variant (no copy)."""
        if len(self._variants) == 1:
            return slice(None)
        sel = np.nonzero(self._variant_of[ids] == variant)[0]
        return sel if sel.size else None

    def hfield_heights(self, hfield, points, frame='world', body=None, env_ids=None):
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
            hid = name_or_index(hfield, self._hfield_names, 'hfield', 'hfield')
            if frame not in hf.FRAMES:
                raise InvalidArgument(f'unknown frame {shorten(frame)}', where='frame',
                                      allowed=', '.join(hf.FRAMES))
            bid = None
            if frame != 'world':
                if body is None:
                    raise InvalidArgument(f'frame {shorten(frame)} needs a body', where='body',
                                          allowed='body name or index')
                bid = name_or_index(body, self._body_names, 'body', 'body')
            if isinstance(points, np.ndarray) and points.ndim == 2:
                m_pts = points.shape[0]
            else:
                m_pts = len(points) if hasattr(points, '__len__') else 0
            pts, _ = float_array(points, [(m_pts, 2), (m_pts, 3)], 'points')
            ids = check_ids(env_ids, self._nbatch)
            geoms = []
            for v in range(len(self._variants)):
                g = hf.geom_of(self._variants[v], hid)
                if g is None:
                    raise InvalidArgument(
                        f'height field {shorten(hfield)} is not used by any geom',
                        where='hfield', allowed='an hfield with a geom')
                geoms.append(g)
            n = len(ids)
            got = self._gather(ids, ('geom_xpos', 'geom_xmat', 'xpos', 'xmat'), 'kinematics')
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

    # ------------------------------------------------------------------ evaluate
    def evaluate(self, ctrl, nstep=None, *, keyframe=None, initial_state=None, env_ids=None,
                 randomization=None, cost=None, progress=None, chunk_steps=50):
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
            ids = check_ids(env_ids, self._nbatch)
            n = len(ids)
            nu = self.model.nu
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
        for env, values in zip(ids, patches):
            self._patches.commit(env, values or None)
        self._engine.sync(ids)
        self._state[ids] = rows

    @staticmethod
    def _call(fn, where, *args):
        """A user callback; whatever it raises becomes an error naming it."""
        try:
            return fn(*args)
        except DeviceError:
            raise
        except Exception as exc:
            raise InvalidArgument(f'the {where} callback raised {type(exc).__name__}: '
                                  f'{shorten(str(exc), 200)}; the pool is left as it was',
                                  where=where) from exc

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
            out = self._call(cost, 'cost', rows[:, lay.columns('qpos')],
                             rows[:, lay.columns('qvel')])
            try:
                costs = np.asarray(out, dtype=np.float64)
            except (TypeError, ValueError):
                costs = None
            if costs is None or costs.shape != (n,):
                raise InvalidArgument(
                    f'cost returned {shorten(out)}, not {n} numbers'
                    if costs is None else f'cost returned shape {costs.shape}',
                    where='cost', allowed=f'({n},); the pool is left as it was')
        return EvaluateResult(ids.copy(), self._state[ids][:, self.layout.physics_columns],
                              sens, costs, done, completed, unstable)
