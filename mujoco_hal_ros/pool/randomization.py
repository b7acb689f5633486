"""Per-environment model patches without a model copy per environment.

Why not one MjModel per randomized environment: a Menagerie Panda MjModel holds ~40 MB
(``model.nbuffer``, mostly collision meshes), so 1024 copies need ~40 GB and ran out of a
24 GiB machine. The randomizable fields are tiny by comparison (``body_mass`` is 12 doubles on
Panda), so the pool stores only those values per environment, in one dense
``(nbatch, *field shape)`` array per field, plus the derived constants ``mj_setConst``
recomputes from them (``dof_M0``, ``actuator_acc0``, ``body_invweight0``...). Each worker
thread owns one scratch copy of each model variant and writes an environment's patch into it
just before stepping that environment, restoring the previous environment's fields to nominal
first. Memory is therefore ``(1 + nthread) * nvariant`` models plus the randomized fields per
environment (what randomizing 1024 Panda environments cost is in ``bench/README.md``),
where a model per environment would need ~40 GB. Environments that were never randomized
step on the shared nominal model with no patching cost at all.

With the Batch engine the same stored values (derived constants included) are copied into
``Batch.expand``-ed per-simulation fields of the patched environments, so the C++ threads step
them without any scratch model; the scratch copies then serve only ``mj_setConst`` and the
pool's queries, at the same memory and time as the thread engine (``bench/README.md``).

A reset without randomization drops the environment's patch, which is how nominal values come
back; nothing is ever written into the shared nominal model.
"""

from collections.abc import Iterable, Sequence
from typing import Any

import mujoco
import numpy as np

from ..checks import Vector
from ..errors import InvalidArgument, UnknownName
from .validate import float_array

# field -> (needs mj_setConst, lower bound). Only fields whose effect is fully captured by the
# field itself plus mj_setConst's outputs are listed; geometry (sizes, positions) would also
# need bounding volumes recomputed, so it is left to model variants instead.
FIELDS = {
    'body_mass': (True, 0.0),
    'body_inertia': (True, 0.0),
    'dof_armature': (True, 0.0),
    'dof_damping': (False, 0.0),
    'dof_frictionloss': (False, 0.0),
    'jnt_stiffness': (False, 0.0),
    'geom_friction': (False, 0.0),
    'actuator_gainprm': (False, None),
    'actuator_biasprm': (False, None),
    'opt.gravity': (False, None),
    'opt.wind': (False, None),
}

# What mj_setConst rewrites from mass and armature (found by diffing every MjModel array
# before and after it; ``test_pool_randomization`` re-checks that nothing else changes).
DERIVED = ('body_subtreemass', 'body_invweight0', 'dof_invweight0', 'dof_M0',
           'tendon_invweight0', 'tendon_length0', 'actuator_acc0', 'actuator_length0',
           'cam_pos0', 'cam_poscom0', 'cam_mat0', 'light_pos0', 'light_poscom0',
           'light_dir0')


def view(model: mujoco.MjModel, key: str) -> np.ndarray:
    """Writable array view of a model field given as 'body_mass' or 'opt.gravity'."""
    if key.startswith('opt.'):
        return getattr(model.opt, key[4:])
    return getattr(model, key)


def check_patch(model: mujoco.MjModel, randomization: Any, n: int) -> dict:
    """Validate a ``{field: values}`` dict for ``n`` environments; returns float arrays.

    Values may be per environment ``(n, *shape)`` or one ``shape`` for all of them.
    """
    if not isinstance(randomization, dict):
        raise InvalidArgument(f'expected a dict of field -> values, got '
                              f'{type(randomization).__name__}', where='randomization',
                              allowed=', '.join(FIELDS))
    out = {}
    for key, values in randomization.items():
        if key not in FIELDS:
            raise UnknownName('randomizable field', key, list(FIELDS), where='randomization')
        shape = tuple(view(model, key).shape)
        arr, which = float_array(values, [(n,) + shape, shape], f'randomization[{key!r}]',
                                 low=FIELDS[key][1])
        out[key] = np.broadcast_to(arr, (n,) + shape) if which == 1 else arr
    return out


def _derived_keys(model):
    return tuple(k for k in DERIVED if hasattr(model, k) and view(model, k).size)


class Scratch:
    """A worker's private copy of one variant and which patch it currently holds."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self.model = model
        self.applied: frozenset = frozenset()   # keys whose values differ from nominal right now
        self.holding = None          # (env, version) whose patch is fully applied
        self._views: dict = {}

    def view(self, key: str) -> np.ndarray:
        """Cached field view: building one from MjModel costs about a microsecond."""
        out = self._views.get(key)
        if out is None:
            out = self._views[key] = view(self.model, key)
        return out


class PatchStore:
    """Per-environment overrides of model fields, stored densely per field."""

    def __init__(self, variants: Sequence[mujoco.MjModel], nbatch: int) -> None:
        self.variants = variants
        self.nbatch = nbatch
        self.derived = _derived_keys(variants[0])
        self.values: dict = {}  # key -> (nbatch, *shape) float64, allocated on first use
        self.keys_of: list[frozenset] = [frozenset()] * nbatch
        self.version = [0] * nbatch
        # whole-pool masks, so a reset of many environments needs no per-environment loop
        self.patched = np.zeros(nbatch, dtype=bool)
        self.has: dict = {}     # key -> (nbatch,) bool: which environments store a value for it
        self._nominal = [Scratch(m) for m in variants]  # only for cached read-only views

    def shape(self, key: str) -> tuple:
        return view(self.variants[0], key).shape

    def check(self, randomization: Any, n: int) -> dict:
        """Validate a ``{field: values}`` dict for ``n`` environments; see ``check_patch``."""
        return check_patch(self.variants[0], randomization, n)

    def needs_const(self, keys: Iterable[str]) -> bool:
        return any(FIELDS[k][0] for k in keys)

    def compute(self, slot: Any, variant: int, env: int, patch: dict) -> dict:
        """Effective field values for one env: its patch plus mj_setConst outputs if needed.

        Derived constants equal to nominal are not stored (a friction-only patch stays one
        field). Runs on the worker's scratch model, which is left holding this patch.
        """
        keys = frozenset(patch)
        scratch = slot.scratch(variant)
        self._restore(scratch, variant, keys)
        for key, values in patch.items():
            scratch.view(key)[...] = values
        out = dict(patch)
        if self.needs_const(keys):
            mujoco.mj_setConst(scratch.model, slot.data(variant))
            nominal = self._nominal[variant]
            for key in self.derived:
                value = scratch.view(key)
                if not np.array_equal(value, nominal.view(key)):
                    out[key] = value.copy()
        scratch.applied = frozenset(out)
        scratch.holding = None
        return out

    def commit(self, env: int, values: dict | None) -> None:
        """Store a computed patch for ``env`` (``None`` or empty drops it)."""
        self.version[env] += 1
        for key in self.keys_of[env]:
            self.has[key][env] = False
        if not values:
            self.keys_of[env] = frozenset()
            self.patched[env] = False
            return
        for key, val in values.items():
            dense = self.values.get(key)
            if dense is None:
                shape = self.shape(key)
                dense = np.empty((self.nbatch,) + tuple(shape), dtype=np.float64)
                self.values[key] = dense
                self.has[key] = np.zeros(self.nbatch, dtype=bool)
            dense[env] = val
            self.has[key][env] = True
        self.keys_of[env] = frozenset(values)
        self.patched[env] = True

    def drop(self, envs: Vector) -> None:
        """Back to nominal values for ``envs``; only the patched ones cost a Python step."""
        for env in np.asarray(envs)[self.patched[envs]].tolist():
            self.commit(env, None)

    def _restore(self, scratch, variant, keep):
        nominal = self._nominal[variant]
        for key in scratch.applied - keep:
            scratch.view(key)[...] = nominal.view(key)
        scratch.applied = scratch.applied & keep

    def model_for(self, slot: Any, variant: int, env: int) -> mujoco.MjModel:
        """The model env ``env`` must run on: nominal, or the slot's scratch with its patch."""
        keys = self.keys_of[env]
        if not keys:
            return self.variants[variant]
        scratch = slot.scratch(variant)
        tag = (env, self.version[env])
        if scratch.holding == tag:
            return scratch.model
        self._restore(scratch, variant, keys)
        for key in keys:
            scratch.view(key)[...] = self.values[key][env]
        scratch.applied = keys
        scratch.holding = tag
        return scratch.model

    def effective(self, variant: int, env: int, key: str) -> np.ndarray:
        """Current value of ``key`` for ``env`` (patched or nominal), as a copy."""
        if key in self.keys_of[env]:
            return self.values[key][env].copy()
        return np.array(view(self.variants[variant], key), dtype=np.float64, copy=True)

    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.values.values())
