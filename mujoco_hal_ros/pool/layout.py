"""Where each part of a MuJoCo state vector sits, so flat arrays can cross a ROS boundary.

The pool stores every environment as one ``mjSTATE_INTEGRATION`` row (physics, user inputs
and solver warm start): restoring that row into any MjData and stepping is bit-identical to
never having left the original MjData. Callers see the smaller ``mjSTATE_FULLPHYSICS`` layout
(what ``mj_getState`` documents as the physical state); ``full=True`` exposes the whole row
when an exact continuation matters more than a compact message.
"""

import mujoco
import numpy as np

INTEGRATION = int(mujoco.mjtState.mjSTATE_INTEGRATION)
FULLPHYSICS = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
CTRL = int(mujoco.mjtState.mjSTATE_CTRL)


def _elementary_bits():
    """Single-bit mjtState members in the order mj_getState writes them (ascending bit)."""
    out = []
    for name, member in mujoco.mjtState.__members__.items():
        value = int(member)
        if value and value & (value - 1) == 0 and name.startswith('mjSTATE_'):
            out.append((value, name[len('mjSTATE_'):].lower()))
    return sorted(out)


class StateLayout:
    """Offsets of the elementary components inside the integration and physics vectors."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self.full_size = mujoco.mj_stateSize(model, INTEGRATION)
        self.size = mujoco.mj_stateSize(model, FULLPHYSICS)
        self.components = []  # (name, offset in physics vector, size)
        self.full_components = []  # (name, offset in integration vector, size)
        self._slices = {}
        physics_cols: list = []
        offset = 0
        physics_offset = 0
        for bit, name in _elementary_bits():
            if not bit & INTEGRATION:
                continue
            size = mujoco.mj_stateSize(model, bit)
            self.full_components.append((name, offset, size))
            self._slices[name] = slice(offset, offset + size)
            if bit & FULLPHYSICS:
                self.components.append((name, physics_offset, size))
                physics_cols.extend(range(offset, offset + size))
                physics_offset += size
            offset += size
        if offset != self.full_size or physics_offset != self.size:
            raise RuntimeError('mjtState layout does not add up; MuJoCo changed its state order')
        self.physics_columns = np.asarray(physics_cols, dtype=np.intp)

    def columns(self, name: str) -> slice:
        """Slice of component ``name`` (e.g. 'qpos', 'ctrl') inside an integration row."""
        return self._slices[name]

    @property
    def names(self) -> list[str]:
        return [name for name, _, _ in self.components]

    def describe(self, full: bool = False) -> list:
        """``[(name, offset, size), ...]`` for a message that ships the flat vector."""
        return list(self.full_components if full else self.components)
