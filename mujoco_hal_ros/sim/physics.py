"""The physics thread's door: what a closure posted to it may do (``Physics``).

Code outside ``sim/`` reaches the running simulation only by handing a closure to
``device.on_physics(fn)`` (inside ``sim/``: ``stepper.post(fn)`` / ``stepper.submit(fn)``;
after every chunk: ``device.on_every_chunk(fn)``). The closure runs on the physics thread
between two chunks of steps and receives one argument typed ``Physics``: this protocol is
the whole list of what it may read and change there. The object it gets
(``sim.door.Door``) refuses use from another thread and after the closure returned, so a
closure cannot smuggle it out.

This module imports nothing of the package at run time: lower layers (``motion``,
``world``, ``tasks``, ``mobile``, ``sensors``) name the type under ``TYPE_CHECKING`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..motion.trajectory import Plan
    from .snapshot import Snapshot

#: A vector argument: an array, a list of floats, or one float broadcast to all entries.
Values = np.ndarray | Sequence[float] | float
#: Actuator (or joint address) indices.
Indices = np.ndarray | Sequence[int]


class Physics(Protocol):
    """What a closure on the physics thread may change, and how.

    - **State and controls**: ``data`` (the live ``MjData``) may be read, and its state
      (``qpos``, ``qvel``, ``act``, ``mocap_pos``/``mocap_quat``, ``xfrc_applied``) written;
      call ``forward()`` after writing positions so derived quantities follow. Whole states
      go in through ``set_state`` (a replay adds the recorded step's derived quantities
      with ``restore_step_inputs``), joints through ``set_joints``, controls through
      ``set_ctrl``. ``model`` is read-only here except through ``set_timestep`` and
      ``set_gravity`` (they keep the stepper's chunk size and the drives' timestep-derived
      gains consistent) and the owners of randomized fields (``world.randomize``).
    - **Stepping**: ``step(n)`` (a closure's own loop, as a lockstep episode runs it) and
      ``forward()``. The stepper's own chunks do not run while a closure runs.
    - **Setpoints** (what the servos hold; the next chunk drives toward them):
      ``set_setpoint``, ``hold_pose``, ``hold_now``, ``hold_actuators``; read them as
      ``setpoint`` (read-only), ``joint_setpoint``, ``goal_setpoint``.
    - **Plans** (paths the stepper samples every chunk): ``take_over`` and ``release``
      actuators, ``set_position_mode``; ``plans`` are the ones running at this instant.
    - **Pushes and contacts**: ``push``, ``clear_pushes``, ``report_contacts``.
    - **Snapshots**: ``publish_snapshot`` makes what the closure changed visible to readers
      at once (otherwise after the next chunk); ``snapshot`` is the latest published.

    Nothing heavy (IK, compiling, rendering, disk I/O) belongs here: the physics waits.
    """

    # --- reading ---------------------------------------------------------------------------
    @property
    def model(self) -> Any:
        """The live ``mujoco.MjModel`` (options: ``set_timestep``, ``set_gravity``)."""

    @property
    def data(self) -> Any:
        """The live ``mujoco.MjData``: state and controls, as the class docstring says."""

    @property
    def time(self) -> float:
        """Simulated seconds now."""

    @property
    def generation(self) -> int:
        """The scene generation of ``model`` (a model swap raises it)."""

    @property
    def snapshot(self) -> Snapshot:
        """The latest published snapshot (``publish_snapshot`` makes a new one)."""

    @property
    def setpoint(self) -> np.ndarray:
        """Each actuator's setpoint now, read-only (write: ``set_setpoint``)."""

    @property
    def joint_setpoint(self) -> np.ndarray:
        """The setpoints as joint positions (a velocity servo taking speeds gives its
        joint's position): what a move or a trajectory starts from."""

    @property
    def goal_setpoint(self) -> np.ndarray:
        """The setpoints in their goal channels' meaning (a velocity servo held to a
        position gives the speed commanded now): what a ``set_goals`` ramp starts from."""

    @property
    def position_mode(self) -> np.ndarray:
        """Per actuator: a velocity servo held to joint positions (a copy)."""

    @property
    def plans(self) -> tuple[Plan, ...]:
        """The plans running at this instant (a request before this one may have changed
        them since the snapshot)."""

    # --- state, controls, stepping ---------------------------------------------------------
    def forward(self) -> None:
        """``mj_forward``: derived quantities after the state was written."""

    def step(self, n: int = 1) -> bool:
        """``n`` plain ``mj_step`` calls with the controls as they are; whether MuJoCo
        warned of a bad position, velocity or acceleration during them (the
        device's own count of those warnings goes on)."""

    def get_state(self, spec: int) -> np.ndarray:
        """``mj_getState`` of ``spec`` (an ``mjtState`` mask)."""

    def set_state(self, state: np.ndarray, spec: int, *, reset: bool = False,
                  keep_time: bool = False) -> None:
        """``mj_setState`` of ``spec``, then ``forward()``. ``reset``: ``mj_resetData``
        first (what the spec does not hold starts from the model's defaults);
        ``keep_time``: simulated time stays where it is (it never runs backwards)."""

    def set_joints(self, qpos_adr: Indices, qpos: Values, dof_adr: Indices | None = None,
                   qvel: Values | None = None) -> None:
        """Write joint positions (and velocities) at these addresses, then ``forward()``."""

    def set_ctrl(self, values: Values, actuators: Indices | None = None) -> None:
        """Write ``data.ctrl`` (these actuators, or all) for the steps a closure runs."""

    def set_timestep(self, timestep: float) -> None:
        """The integration timestep from the next step on; the chunk keeps its wall
        length and the drive laws their timestep-derived gains."""

    def set_gravity(self, gravity: Values) -> None:
        """World gravity (3 numbers, m/s^2) from the next step on."""

    # --- setpoints and plans ---------------------------------------------------------------
    def set_setpoint(self, values: Values, actuators: Indices | None = None) -> None:
        """Write setpoints (these actuators, or all) in each actuator's current meaning
        (``position_mode``); a plan that drives them overwrites them next chunk."""

    def hold_pose(self) -> np.ndarray:
        """Setpoints that hold the current pose replace the ones there are (velocity
        servos take a zero speed); a copy of them."""

    def hold_now(self) -> None:
        """Every plan ends, each setpoint frozen where its path is now; velocity servos
        hold their joints' positions (drive wheels a zero speed)."""

    def hold_actuators(self, actuators: Indices) -> None:
        """``hold_now`` for these actuators only; the others go on."""

    def take_over(self, plan: Plan, positions: bool = False) -> None:
        """Run ``plan``; older plans give up its actuators. ``positions``: the plan gives
        joint positions, which velocity servos then follow in position mode."""

    def release(self, actuators: Indices, hold_at: Values | None = None) -> None:
        """Older plans give up these actuators; with ``hold_at`` (joint positions) their
        setpoints stay there (velocity servos in position mode)."""

    def set_position_mode(self, actuators: Indices, positions: bool) -> None:
        """Whether these actuators' setpoints are joint positions or their own ctrl
        meaning (velocity servos: speeds)."""

    # --- pushes, contacts, snapshots -------------------------------------------------------
    def push(self, checked: dict) -> Any:
        """Latch a checked wrench (``sensors.wrench.check``) from now; the ``Wrench``."""

    def clear_pushes(self, bodies: Indices | None = None) -> list:
        """End the wrenches on ``bodies`` (ids; None: all); the ids that had one."""

    def report_contacts(self, on: bool) -> None:
        """Whether snapshots carry the active contacts (``Snapshot.contacts``)."""

    def restore_step_inputs(self, fields: dict[str, Values]) -> None:
        """Write back what a recorded step left in ``data``'s derived quantities (name ->
        values, e.g. ``qfrc_bias``, ``qM``: fields of that size only) after ``set_state``,
        and re-derive the drive laws' once-a-chunk checks from them: a replay's next chunk
        then runs as the recorded one did (``dataset.replay``)."""

    def publish_snapshot(self) -> Snapshot:
        """Copy the state into a new snapshot now, so what changed reads back at once."""
