"""Policy outputs to controls: which actuators, absolute or delta, normalized or channel units.

Why the mapping lives in the task and not in the policy: the same network must drive the
pool, the real-time device and later the real robot, and only the task knows the actuators'
ranges. Every control is clipped to its actuator's ``ctrlrange`` (where limited), as a real
servo's driver would, so a policy cannot command what the hardware refuses.

    normalized absolute   ctrl = centre + scale * halfrange * a      (a in [-1, 1] spans the range)
    normalized delta      ctrl = last   + scale * halfrange * a
    channel absolute      ctrl = offset + scale * a                  (offset 0 or the start ctrl)
    channel delta         ctrl = last   + scale * a

``last`` starts at the episode's starting controls (``EpisodeDraw.ctrl``): a position or
velocity servo starts at the randomized start, not at the keyframe's ctrl (``servos``), so
zero delta actions hold the start. Absolute actions set the setpoint outright each step;
``offset: start`` is the task's nominal start (the "default pose" of legged RL), not the
randomized one.
"""


import mujoco
import numpy as np

from ..errors import UnknownName
from .spec import ActionSpec, TaskError


class ActionMap:
    """Resolved action terms for one model; ``apply`` maps a batch of actions to controls."""

    def __init__(self, model: mujoco.MjModel, spec: ActionSpec, start_ctrl: np.ndarray,
                 source: str) -> None:
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

    def first_setpoints(self, n: int, start_ctrl: np.ndarray | None = None) -> np.ndarray:
        """``(n, size)`` setpoints before the first action, clipped: the episodes' starting
        controls (``(n, nu)`` or ``(nu,)``, ``EpisodeDraw.ctrl``: the servos at the
        randomized start), or the task's start ctrl when not given. Delta actions integrate
        from here."""
        ctrl = self.start_ctrl if start_ctrl is None else np.asarray(start_ctrl, np.float64)
        return np.broadcast_to(np.clip(ctrl[..., self.ids], self.low, self.high),
                               (n, self.size)).copy()

    def apply(self, actions: np.ndarray, last: np.ndarray) -> np.ndarray:
        """``(n, size)`` setpoints from ``(n, size)`` actions and the last setpoints."""
        base = last if self.spec.mode == 'delta' else self.centre
        return np.clip(base + self.gain * actions, self.low, self.high)

    def full_ctrl(self, setpoints: np.ndarray, start_ctrl: np.ndarray | None = None
                  ) -> np.ndarray:
        """``(n, nu)`` controls: the acted actuators' setpoints, the others at the episodes'
        starting controls (``(n, nu)`` or ``(nu,)``; default the task's start ctrl), so a
        servo the policy does not drive holds the randomized start."""
        base = self.start_ctrl if start_ctrl is None else start_ctrl
        out = np.array(np.broadcast_to(base, (len(setpoints), len(self.start_ctrl))),
                       dtype=np.float64)
        out[:, self.ids] = setpoints
        return out
