"""Domain randomization of the running simulation, with the pool's field table.

The fields, their lower bounds and which of them need ``mj_setConst`` are the pool's
(``pool.randomization.FIELDS``/``DERIVED``); the running sim adds the fields that only
change how the scene looks (colours, lights), which the pool leaves to its renderers. Values
are written into the live model on the stepper thread between chunks; the nominal values
of every field touched are kept once, so ``undo`` (run by ``reset``) puts the model back
bit for bit. Each field is given either explicit values (the field's shape) or
``{'scale': [low, high]}``: every element multiplied by a factor drawn uniformly from that
range with the request's seed, so the same seed gives the same scene. Object positions
are state, not model fields: ``{'object_positions': [dx, dy, dz]}`` moves every free body by
a uniform offset within +-d of where it is; ``reset`` puts them back at the keyframe.
"""

from typing import Any

import mujoco
import numpy as np

from ..checks import is_bool
from ..errors import InvalidArgument, UnknownName
from ..joint_view import FREE, view
from ..pool import randomization as pool_random
from ..pool.validate import float_array
from . import bounds

LOOKS = {'geom_rgba': (False, 0.0), 'light_diffuse': (False, 0.0),
         'light_specular': (False, 0.0), 'light_ambient': (False, 0.0)}
FIELDS = dict(pool_random.FIELDS, **LOOKS)
MAX_SEED = 2 ** 63 - 1
POSITIONS = 'object_positions'


def check_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if is_bool(seed) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise InvalidArgument(f'expected a seed 0..2^63-1, got {seed!r}', where='seed')
    return int(seed)


class Randomizer:
    """The live model's randomized fields and their nominal values (one per device)."""

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self._nominal: dict[str, np.ndarray] = {}
        self._scratch = None

    def check(self, fields: Any, seed: Any = None) -> dict[str, np.ndarray]:
        """``{key: values}`` for the model, drawn and checked; nothing is written yet."""
        seed = check_seed(seed)
        if not isinstance(fields, dict) or not fields:
            raise InvalidArgument('expected a non-empty dict of field -> values or '
                                  "{'scale': [low, high]}", where='randomization',
                                  allowed=', '.join(FIELDS))
        rng = np.random.default_rng(seed)
        out = {}
        for key in sorted(fields, key=str):
            if key == POSITIONS:
                out[key] = self._offsets(fields[key], rng)
                continue
            if key not in FIELDS:
                raise UnknownName('randomizable field', key, list(FIELDS) + [POSITIONS],
                                  where='randomization')
            nominal = self._nominal.get(key)
            base = nominal if nominal is not None else pool_random.view(self.model, key)
            base = np.array(base, dtype=np.float64)
            value = fields[key]
            where = f'randomization[{key!r}]'
            if isinstance(value, dict):
                if set(value) != {'scale'}:
                    raise InvalidArgument("expected {'scale': [low, high]}", where=where)
                scale = value['scale']
                if isinstance(scale, (str, bytes)) or not hasattr(scale, '__len__') \
                        or len(scale) != 2:
                    raise InvalidArgument('expected [low, high]', where=f'{where}.scale')
                lo, hi = bounds.scale_range(scale[0], scale[1], f'{where}.scale')
                arr = base * rng.uniform(lo, hi, size=base.shape)
            else:
                arr, _ = float_array(value, [base.shape], where, low=FIELDS[key][1])
            arr = bounds.values(arr, where)
            low = FIELDS[key][1]
            if low is not None and (arr < low).any():
                raise InvalidArgument(f'values below {low:g}', where=where)
            out[key] = np.array(arr, dtype=np.float64)
        return out

    def _free_qpos(self):
        m = self.model
        return [j.qposadr for j in view(m).of_kind(FREE)]

    def _offsets(self, value, rng):
        where = f'randomization[{POSITIONS!r}]'
        half, _ = float_array(value, [(3,)], where, low=0.0)
        half = bounds.values(half, where, top=bounds.MAX_POSITION)
        return rng.uniform(-half, half, size=(len(self._free_qpos()), 3))

    def apply(self, values: dict[str, np.ndarray], data: mujoco.MjData) -> None:
        """Write checked values (stepper thread); object offsets move ``data``'s free
        bodies, every other field goes into the model."""
        values = dict(values)
        offsets = values.pop(POSITIONS, None)
        if offsets is not None:
            for adr, off in zip(self._free_qpos(), offsets, strict=True):
                data.qpos[adr:adr + 3] += off
        m = self.model
        for key in values:
            if key not in self._nominal:
                self._nominal[key] = np.array(pool_random.view(m, key), copy=True)
        const = any(FIELDS[k][0] for k in values)
        if const:
            for key in pool_random.DERIVED:
                if hasattr(m, key) and key not in self._nominal:
                    self._nominal[key] = np.array(pool_random.view(m, key), copy=True)
        for key, arr in values.items():
            pool_random.view(m, key)[...] = arr
        if const:
            if self._scratch is None:
                self._scratch = mujoco.MjData(m)
            mujoco.mj_setConst(m, self._scratch)
        mujoco.mj_forward(m, data)

    @property
    def active(self) -> list[str]:
        return sorted(k for k in self._nominal if k in FIELDS)

    def undo(self) -> bool:
        """Nominal values back into the model (stepper thread); whether any were changed."""
        if not self._nominal:
            return False
        for key, arr in self._nominal.items():
            pool_random.view(self.model, key)[...] = arr
        self._nominal = {}
        return True
