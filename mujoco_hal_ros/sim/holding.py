"""Holding: the setpoints each actuator holds between plans (physics thread only).

A setpoint is in each actuator's own ctrl meaning (a position for a servo, a speed for a
velocity servo) except where ``pos_mode`` says a velocity servo is held to a joint position
(a driver's position mode: the stepper's velocity loop turns it into speeds). Holding means
not moving: a hold freezes the setpoints where the paths are now and holds velocity servos
at their joints' positions; drive wheels hold a zero speed instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from . import drives
from .arbiter import Arbiter


class Holding:
    """The setpoints and position modes of one model's actuators."""

    def __init__(self, model: Any, data: Any, laws: drives.Drives) -> None:
        self.model, self.data = model, data
        self.adopt(laws)
        # True where a velocity servo's setpoint is a joint position (position mode); a
        # servo starts taking speeds (a zero speed), as its goal channel does.
        self.pos_mode = np.zeros(model.nu, dtype=bool)
        self.setpoint = np.array(data.ctrl, dtype=float)

    def adopt(self, laws: drives.Drives) -> None:
        """The drives of ``laws`` (rebuilt for a new timestep); setpoints stay."""
        self.drives = laws.drives                # per actuator: (kind, qpos address or -1)
        self.velocity_loop = laws.velocity_loop  # a VelocityLoop, or None

    def initial_setpoint(self) -> np.ndarray:
        """Setpoints that hold the current pose: joint positions for servos and torque
        motors, zero for velocity servos, the (keyframe's) ctrl for everything else."""
        m, d = self.model, self.data
        sp = np.array(d.ctrl, dtype=float)
        for a, (drive, qadr) in enumerate(self.drives):
            if drive in ('position', 'motor_impedance') and qadr >= 0:
                q = float(d.qpos[qadr])
                if drive == 'position' and m.actuator_ctrllimited[a]:
                    q = min(max(q, m.actuator_ctrlrange[a, 0]), m.actuator_ctrlrange[a, 1])
                sp[a] = q
            elif drive == 'velocity':
                sp[a] = 0.0
        return sp

    def hold_initial(self) -> None:
        """``initial_setpoint`` replaces the setpoints; velocity servos take speeds again
        (a zero speed), as at the start."""
        self.setpoint = self.initial_setpoint()
        self.pos_mode[:] = False

    def hold_now(self, arbiter: Arbiter) -> None:
        """Freeze every setpoint where its path is now and stop velocity servos."""
        arbiter.freeze(self.setpoint, self.data.time)
        vl = self.velocity_loop
        if vl is None:
            for a, (drive, _qadr) in enumerate(self.drives):
                if drive == 'velocity':
                    self.setpoint[a] = 0.0
        else:
            # A driver in position mode holds the position, not a zero speed that lets the
            # load drift the joint: where its path is, or where it is now if it had speeds.
            speeds = ~self.pos_mode[vl.actuators]
            self.setpoint[vl.actuators[speeds]] = self.data.qpos[vl.qadrs[speeds]]
            self.pos_mode[vl.actuators] = True
            self.stop_wheels(vl.rolling)

    def hold_actuators(self, arbiter: Arbiter, actuators: Iterable[int]) -> None:
        """``hold_now`` for some actuators only (one robot of several in the world): their
        setpoints freeze where their paths are now, velocity servos among them hold their
        joints' positions, and every other actuator goes on as it was."""
        acts = np.asarray(sorted({int(a) for a in actuators}), dtype=int)
        if not acts.size:
            return
        arbiter.freeze(self.setpoint, self.data.time, acts)
        vl = self.velocity_loop
        if vl is None:
            for a in acts:
                if self.drives[a][0] == 'velocity':
                    self.setpoint[a] = 0.0
        else:
            ours = np.isin(vl.actuators, acts)
            speeds = ours & ~self.pos_mode[vl.actuators]
            self.setpoint[vl.actuators[speeds]] = self.data.qpos[vl.qadrs[speeds]]
            self.pos_mode[vl.actuators[ours]] = True
            self.stop_wheels(ours & vl.rolling)

    def stop_wheels(self, which: np.ndarray) -> None:
        """Drive wheels among the held velocity servos (``which``, over the velocity loop's
        actuators) hold a zero speed instead of a position, as a drive controller stops a
        base: a position loop sized on the wheel's own inertia overshot the robot's mass
        behind it at the torque limit and rocked TIAGo back and forth for seconds."""
        vl = self.velocity_loop
        assert vl is not None
        self.setpoint[vl.actuators[which]] = 0.0
        self.pos_mode[vl.actuators[which]] = False

    def holds_positions(self) -> bool:
        """Whether any velocity servo is held to a joint position now."""
        vl = self.velocity_loop
        return vl is not None and bool(self.pos_mode[vl.actuators].any())

    def joint_setpoint(self) -> np.ndarray:
        """The setpoints as joint positions: what a move or a trajectory starts from. A
        velocity servo taking speeds gives its joint's position."""
        sp = self.setpoint.copy()
        vl = self.velocity_loop
        if vl is not None:
            speeds = ~self.pos_mode[vl.actuators]
            sp[vl.actuators[speeds]] = self.data.qpos[vl.qadrs[speeds]]
        return sp

    def goal_setpoint(self) -> np.ndarray:
        """The setpoints in their goal channels' meaning: what a ``set_goals`` ramp starts
        from. A velocity servo held to a position gives the speed it is commanded now."""
        sp = self.setpoint.copy()
        vl = self.velocity_loop
        if vl is not None:
            held = self.pos_mode[vl.actuators]
            sp[vl.actuators[held]] = self.data.ctrl[vl.actuators[held]]
        return sp

    def set_position_mode(self, actuators: Iterable[int] | np.ndarray,
                          positions: bool) -> None:
        """Whether these actuators' setpoints and paths are joint positions (velocity
        servos then run the position loop) or their own ctrl meaning."""
        vl = self.velocity_loop
        if vl is not None:
            acts = np.asarray(actuators, dtype=int)
            self.pos_mode[acts[np.isin(acts, vl.actuators)]] = bool(positions)
