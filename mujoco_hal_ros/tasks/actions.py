"""Policy outputs to controls: which actuators, absolute or delta, normalized or channel units.

Why the mapping lives in the task and not in the policy: the same network must drive the
pool, the real-time device and later the real robot, and only the task knows the actuators'
ranges. Every control is clipped to its actuator's ``ctrlrange`` (where limited), as a real
servo's driver would, so a policy cannot command what the hardware refuses.

    normalized absolute   ctrl = centre + scale * halfrange * a      (a in [-1, 1] spans the range)
    normalized delta      ctrl = last   + scale * halfrange * a
    channel absolute      ctrl = offset + scale * a                  (offset 0 or the start ctrl)
    channel delta         ctrl = last   + scale * a
"""

import mujoco
import numpy as np

from ..errors import UnknownName
from .spec import ActionSpec, TaskError


class ActionMap:
    """Resolved action terms for one model; ``apply`` maps a batch of actions to controls."""

    def __init__(self, model: mujoco.MjModel, spec: ActionSpec, start_ctrl: np.ndarray,
                 source: str):
        names = [model.actuator(i).name for i in range(model.nu)]
        if spec.actuators is None:
            ids = list(range(model.nu))
        else:
            ids = []
            for i, name in enumerate(spec.actuators):
                if name not in names:
                    raise UnknownName('actuator', name, [n for n in names if n],
                                      where=f'{source}: action.actuators[{i}]')
                ids.append(names.index(name))
        if not ids:
            raise TaskError('the model has no actuators to act on', where=f'{source}: action')
        self.spec = spec
        self.ids = np.asarray(ids, dtype=np.intp)
        self.names = [names[i] for i in ids]
        self.size = len(ids)
        self.decimation = spec.decimation
        self.start_ctrl = np.asarray(start_ctrl, dtype=np.float64).copy()
        limited = model.actuator_ctrllimited[self.ids].astype(bool)
        rng = model.actuator_ctrlrange[self.ids]
        self.low = np.where(limited, rng[:, 0], -np.inf)
        self.high = np.where(limited, rng[:, 1], np.inf)
        if spec.units == 'normalized':
            unlimited = [self.names[i] for i in np.nonzero(~limited)[0]]
            if unlimited:
                raise TaskError(f'actuator {unlimited[0]!r} has no ctrlrange, so a normalized '
                                'action has nothing to span', where=f'{source}: action.units',
                                allowed="'channel' units, or actuators with ctrlrange")
            self.gain = spec.scale * (rng[:, 1] - rng[:, 0]) / 2.0
            self.centre = (rng[:, 1] + rng[:, 0]) / 2.0
        else:
            self.gain = np.full(self.size, spec.scale)
            self.centre = (self.start_ctrl[self.ids] if spec.offset == 'start'
                           else np.zeros(self.size))

    def first_setpoints(self, n: int) -> np.ndarray:
        """``(n, size)`` setpoints before the first action: the start ctrl, clipped."""
        return np.broadcast_to(np.clip(self.start_ctrl[self.ids], self.low, self.high),
                               (n, self.size)).copy()

    def apply(self, actions: np.ndarray, last: np.ndarray) -> np.ndarray:
        """``(n, size)`` setpoints from ``(n, size)`` actions and the last setpoints."""
        base = last if self.spec.mode == 'delta' else self.centre
        return np.clip(base + self.gain * actions, self.low, self.high)

    def full_ctrl(self, setpoints: np.ndarray) -> np.ndarray:
        """``(n, nu)`` controls: the acted actuators' setpoints, the others at the start."""
        out = np.broadcast_to(self.start_ctrl, (len(setpoints), len(self.start_ctrl))).copy()
        out[:, self.ids] = setpoints
        return out
