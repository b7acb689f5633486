"""The object a physics-thread closure receives: ``Physics`` over the running stepper.

One ``Door`` a closure (or an after-chunk callback): it works only on the thread it was
opened on (the physics thread) and only until the closure returns, so a closure cannot
hand the stepper's state to another thread. Everything it does goes to the stepper's parts
(``Holding``, ``Arbiter``, ``Pushes``) or the stepper's own thread-only methods.
"""

from __future__ import annotations

from collections.abc import Iterator
import contextlib
import threading
from typing import Any, Protocol, TYPE_CHECKING

import mujoco
import numpy as np

from .physics import Indices, Physics, Values

if TYPE_CHECKING:
    from ..motion.trajectory import Plan
    from .arbiter import Arbiter
    from .drive_state import DriveState
    from .holding import Holding
    from .pushes import Pushes
    from .snapshot import Snapshot


class Stepped(Protocol):
    """What a door reaches of the stepper behind it (``sim.stepper.Stepper`` is one): its
    parts and its own thread-only calls. Written here so the door does not import the
    stepper, which imports the door."""

    model: Any
    data: Any
    generation: int
    holding: Holding
    arbiter: Arbiter
    pushes: Pushes
    snapshot: Snapshot
    drive: DriveState

    def hold_now(self) -> None: ...

    def hold_pose(self) -> np.ndarray: ...

    def publish_snapshot(self) -> Snapshot: ...

    def set_timestep(self, timestep: float) -> None: ...


# What ``step`` counts as a bad step (MuJoCo resets the data itself on these).
_BAD = [int(mujoco.mjtWarning.mjWARN_BADQPOS), int(mujoco.mjtWarning.mjWARN_BADQVEL),
        int(mujoco.mjtWarning.mjWARN_BADQACC)]


class Door:
    """``Physics`` for one closure on the physics thread (see ``sim.physics``)."""

    __slots__ = ('_s', '_ident', '_open')

    def __init__(self, stepper: Stepped) -> None:
        self._s = stepper
        self._ident = threading.get_ident()
        self._open = True

    def _in(self) -> Stepped:
        if not self._open or threading.get_ident() != self._ident:
            raise RuntimeError(
                'this Physics object belongs to a closure that has returned, or to the '
                f'physics thread (used from {threading.current_thread().name!r}): use it only '
                'inside the closure device.on_physics(fn) runs, and return plain values')
        return self._s

    def _close(self) -> None:
        """The closure returned: the door refuses every use from now on."""
        self._open = False

    # --- reading ---------------------------------------------------------------------------
    @property
    def model(self) -> Any:
        return self._in().model

    @property
    def data(self) -> Any:
        return self._in().data

    @property
    def time(self) -> float:
        return float(self._in().data.time)

    @property
    def generation(self) -> int:
        return self._in().generation

    @property
    def snapshot(self) -> Snapshot:
        return self._in().snapshot

    @property
    def setpoint(self) -> np.ndarray:
        view = self._in().holding.setpoint.view()
        view.flags.writeable = False
        return view

    @property
    def joint_setpoint(self) -> np.ndarray:
        return self._in().holding.joint_setpoint()

    @property
    def goal_setpoint(self) -> np.ndarray:
        return self._in().holding.goal_setpoint()

    @property
    def position_mode(self) -> np.ndarray:
        return self._in().holding.pos_mode.copy()

    @property
    def plans(self) -> tuple[Plan, ...]:
        return tuple(self._in().arbiter.running)

    # --- state, controls, stepping ---------------------------------------------------------
    def forward(self) -> None:
        s = self._in()
        mujoco.mj_forward(s.model, s.data)

    def step(self, n: int = 1) -> bool:
        s = self._in()
        m, d = s.model, s.data
        before = d.warning.number[_BAD].copy()
        d.warning.number[_BAD] = 0
        for _ in range(int(n)):
            mujoco.mj_step(m, d)
        bad = bool(d.warning.number[_BAD].any())
        d.warning.number[_BAD] += before     # the device's own count goes on
        return bad

    def get_state(self, spec: int) -> np.ndarray:
        s = self._in()
        state = np.empty(mujoco.mj_stateSize(s.model, spec))
        mujoco.mj_getState(s.model, s.data, state, spec)
        return state

    def set_state(self, state: np.ndarray, spec: int, *, reset: bool = False,
                  keep_time: bool = False) -> None:
        s = self._in()
        m, d = s.model, s.data
        t = d.time
        if reset:
            mujoco.mj_resetData(m, d)
        mujoco.mj_setState(m, d, state, spec)
        if keep_time:
            d.time = t
        mujoco.mj_forward(m, d)

    def restore_step_inputs(self, fields: dict[str, Values]) -> None:
        s = self._in()
        for name, values in fields.items():
            field = getattr(s.data, name, None)
            if isinstance(field, np.ndarray) and field.size == np.size(values):
                field.reshape(-1)[:] = np.asarray(values, dtype=float).reshape(-1)
        s.drive.after_chunk()

    def set_joints(self, qpos_adr: Indices, qpos: Values, dof_adr: Indices | None = None,
                   qvel: Values | None = None) -> None:
        s = self._in()
        s.data.qpos[qpos_adr] = qpos
        if qvel is not None:
            s.data.qvel[dof_adr] = qvel
        mujoco.mj_forward(s.model, s.data)

    def set_ctrl(self, values: Values, actuators: Indices | None = None) -> None:
        ctrl = self._in().data.ctrl
        if actuators is None:
            ctrl[:] = values
        else:
            ctrl[actuators] = values

    def set_timestep(self, timestep: float) -> None:
        self._in().set_timestep(timestep)

    def set_gravity(self, gravity: Values) -> None:
        self._in().model.opt.gravity[:] = gravity

    # --- setpoints and plans ---------------------------------------------------------------
    def set_setpoint(self, values: Values, actuators: Indices | None = None) -> None:
        sp = self._in().holding.setpoint
        if actuators is None:
            sp[:] = values
        else:
            sp[actuators] = values

    def hold_pose(self) -> np.ndarray:
        return self._in().hold_pose()

    def hold_now(self) -> None:
        self._in().hold_now()

    def hold_actuators(self, actuators: Indices) -> None:
        s = self._in()
        s.holding.hold_actuators(s.arbiter, actuators)

    def take_over(self, plan: Plan, positions: bool = False) -> None:
        s = self._in()
        s.arbiter.release(plan.actuators)
        s.holding.set_position_mode(plan.actuators, positions)
        s.arbiter.running.append(plan)      # (Arbiter.take_over, with the mode set between)

    def release(self, actuators: Indices, hold_at: Values | None = None) -> None:
        s = self._in()
        s.arbiter.release(actuators)
        if hold_at is not None:
            s.holding.set_position_mode(actuators, True)
            s.holding.setpoint[actuators] = hold_at

    def set_position_mode(self, actuators: Indices, positions: bool) -> None:
        self._in().holding.set_position_mode(actuators, positions)

    # --- pushes, contacts, snapshots -------------------------------------------------------
    def push(self, checked: dict) -> Any:
        s = self._in()
        return s.pushes.push(checked, s.data.time)

    def clear_pushes(self, bodies: Indices | None = None) -> list:
        s = self._in()
        return s.pushes.clear(s.data, bodies)

    def report_contacts(self, on: bool) -> None:
        self._in().pushes.report_contacts(on)

    def publish_snapshot(self) -> Snapshot:
        return self._in().publish_snapshot()


@contextlib.contextmanager
def opened(stepper: Stepped) -> Iterator[Physics]:
    """A ``Door`` to ``stepper`` for one closure, closed when it returns (stepper thread)."""
    door = Door(stepper)
    try:
        yield door
    finally:
        door._close()


if TYPE_CHECKING:
    _door_is_physics: Physics = Door.__new__(Door)   # mypy: Door satisfies the protocol
