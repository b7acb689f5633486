"""The drive laws bound to one model, with what they remember from chunk to chunk.

``drives`` holds the laws (pure functions of a model and a state); this module holds what
the stepper keeps for them between steps and chunks (the paths' last speeds, scratch mass
matrices, the servos' scheduled gains) and turns one chunk of setpoint rows into the ctrl
of each step (``Chunk``): position servos lead their path and carry their links' weight,
velocity servos held to positions run the outer position loop, torque motors the joint
impedance loop, stiff servos are kept off MuJoCo's force-limit cycle.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

from ..description import servo_gains
from . import drives
from .holding import Holding


class Chunk:
    """The ctrl of each step of one chunk. ``per_step``: some law reads the joints every
    step (otherwise the row, or ``held`` when no plan runs, is the whole ctrl)."""

    def __init__(self, laws: DriveState, rows: np.ndarray | None, held: np.ndarray,
                 setpoint: np.ndarray) -> None:
        self.laws, self.rows, self.held, self.setpoint = laws, rows, held, setpoint
        self.per_step = False
        self.imp: drives.Impedance | None = None
        self.vel: np.ndarray | None = None
        self.acc: np.ndarray | None = None
        self.speeds: tuple[np.ndarray, np.ndarray | None] | None = None
        self.speed_mask: np.ndarray = np.zeros(0, dtype=bool)
        self.guard: drives.ClampGuard | None = None
        self.mobility: Any = None

    def write(self, i: int, ctrl: np.ndarray) -> None:
        """Step ``i``'s ctrl into ``ctrl``."""
        rows = self.rows
        target = rows[i] if rows is not None else self.setpoint
        ctrl[:] = target if rows is not None else self.held
        imp = self.imp
        if imp is not None:
            acts = imp.actuators
            ctrl[acts] = self.laws.joint_torque(
                target[acts], None if self.vel is None else self.vel[i],
                None if self.acc is None else self.acc[i]) / imp.gain
        if self.speeds is not None:
            vacts, v_ref = self.speeds
            ctrl[vacts] = self.laws.joint_speed(self.speed_mask, target[vacts],
                                                None if v_ref is None else v_ref[i])
        if self.guard is not None:
            drives.keep_implicit(self.guard, self.laws.data, ctrl, self.mobility)


class DriveState:
    """The laws (``drives.Drives``) bound to ``model``/``data``: at start, for a model
    swapped in and for a new timestep."""

    def __init__(self, model: Any, data: Any, laws: drives.Drives) -> None:
        self.model, self.data = model, data
        impedance, hold_torque = laws.impedance, laws.hold_torque
        self.velocity_loop = laws.velocity_loop  # a VelocityLoop, or None
        self.guard = laws.clamp_guard            # a ClampGuard, or None
        self.guarding = False                    # a guarded servo is about to flip
        self.guard_mass = np.zeros((model.nv, model.nv)) if self.guard is not None else None
        self.hold_torque = hold_torque           # a HoldTorque, or None
        # Servos whose gains follow the configuration (the ones the URDF import built)
        self.schedule = servo_gains.schedule_of(model)
        self.schedule_full = np.zeros((model.nv, model.nv)) \
            if self.schedule is not None else None
        self.gravity_data = mujoco.MjData(model) if hold_torque is not None else None
        if hold_torque is not None:
            self.ff_vel = np.zeros(len(hold_torque.actuators))  # the path's speed, last step
            # above[b, c]: body b is c or one of c's ancestors (links a contact holds up)
            self.above = np.zeros((model.nbody, model.nbody), dtype=bool)
            for c in range(model.nbody):
                b = c
                while b > 0:
                    self.above[c, b] = True
                    b = int(model.body_parentid[b])
        self.impedance = impedance               # an Impedance, or None
        if impedance is not None:
            self.imp_vel = np.zeros(len(impedance.actuators))  # the path's speed, last step
            self.imp_mass = np.zeros((model.nv, model.nv))
            # The dofs of the kinematic trees the motors are in: the mass matrix couples
            # nothing else to them (a free object on the table is a tree of its own).
            tree = model.body_rootid[model.dof_bodyid]
            self.imp_tree = np.flatnonzero(np.isin(tree, tree[impedance.dofs]))
            self.imp_local = np.searchsorted(self.imp_tree, impedance.dofs)
            self.imp_eye = np.eye(len(self.imp_tree))[self.imp_local].T

    def needs_path_speed(self, holding: Holding) -> bool:
        """Whether the chunk's laws use the paths' speeds (then the setpoints before the
        chunk are kept for them)."""
        return self.impedance is not None or self.hold_torque is not None or \
            holding.holds_positions()

    def chunk(self, holding: Holding, before: np.ndarray | None, rows: np.ndarray | None,
              smooth: np.ndarray | None) -> Chunk:
        """Once a chunk, before its steps: gains from the last step's mass matrix, the
        hold feed-forward added to ``rows`` (in place), and what the per-step laws need.
        ``before``: the setpoints before the chunk; ``rows``/``smooth``: the plans'
        (``Arbiter.sample``), None when no plan runs."""
        model, data = self.model, self.data
        dt = model.opt.timestep
        if self.schedule is not None:
            self.reschedule()
        hold_ff = self.feed_forward()
        if hold_ff is not None:
            ht = self.hold_torque
            assert ht is not None
            acts_ff, ctrl_ff = hold_ff
            if rows is not None:
                assert before is not None and smooth is not None
                # The servo's damping pulls against a moving setpoint: lead it by the
                # path's own speed (none across a jump), as a driver's velocity feed-forward.
                moving = smooth[acts_ff]
                speed = np.diff(np.vstack([before[acts_ff], rows[:, acts_ff]]), axis=0) / dt
                accel = np.diff(np.vstack([self.ff_vel, speed]), axis=0) / dt
                self.ff_vel = speed[-1] * moving
                lead = (ht.kv * speed + ht.inertia * accel) / ht.kp * moving
                rows[:, acts_ff] = np.clip(rows[:, acts_ff] + ctrl_ff + lead, ht.lo, ht.hi)
            else:
                self.ff_vel = np.zeros(len(acts_ff))
        held = holding.setpoint
        if rows is None and hold_ff is not None:
            assert self.hold_torque is not None
            held = holding.setpoint.copy()
            held[acts_ff] = np.clip(held[acts_ff] + ctrl_ff, self.hold_torque.lo,
                                    self.hold_torque.hi)
        out = Chunk(self, rows, held, holding.setpoint)
        if holding.holds_positions():
            assert self.velocity_loop is not None
            out.speed_mask = holding.pos_mode[self.velocity_loop.actuators]
            out.speeds = self.velocity_speeds(out.speed_mask, before, rows, smooth)
        if self.guarding:
            assert self.guard is not None and self.guard_mass is not None
            out.guard = self.guard
            out.mobility = drives.guard_mobility(self.guard, model, data, self.guard_mass)
        imp = self.impedance
        if imp is not None:
            out.imp = imp
            acts = imp.actuators
            if rows is not None:
                assert before is not None and smooth is not None
                # The path's own speed and acceleration, so the joint loop tracks a
                # moving setpoint instead of lagging it.
                vel = np.diff(np.vstack([before[acts], rows[:, acts]]), axis=0) / dt
                acc = np.diff(np.vstack([self.imp_vel, vel]), axis=0) / dt
                self.imp_vel = vel[-1] * smooth[acts]
                out.vel = vel * smooth[acts]                       # none across a jump
                out.acc = acc * smooth[acts]
            else:
                self.imp_vel = np.zeros(len(acts))
        out.per_step = imp is not None or out.speeds is not None or out.guard is not None
        return out

    def after_chunk(self) -> None:
        """After a chunk's steps: a guarded servo about to flip has the next chunk checked
        every step."""
        if self.guard is not None:
            assert self.guard_mass is not None
            self.guarding = drives.cycling(self.guard, self.model, self.data, self.guard_mass)

    def joint_torque(self, q_ref: np.ndarray, v_ref: np.ndarray | None,
                     a_ref: np.ndarray | None) -> np.ndarray:
        """The torque motors' torques for one step (``drives.joint_torque``)."""
        assert self.impedance is not None
        return drives.joint_torque(self.impedance, self.model, self.data, self.imp_tree,
                                   self.imp_local, self.imp_mass, self.imp_eye, q_ref,
                                   v_ref, a_ref)

    def velocity_speeds(self, held: np.ndarray, before: np.ndarray | None,
                        rows: np.ndarray | None,
                        smooth: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """(velocity servos held to positions, their path speeds per step or None) for
        a chunk: the path's own speed is the outer loop's feed-forward (none across a
        jump), as a driver's position mode sends it. ``held``: over the velocity loop's
        actuators, the ones held to positions."""
        vl = self.velocity_loop
        assert vl is not None
        vacts = vl.actuators[held]
        if rows is None:
            return vacts, None
        assert before is not None and smooth is not None
        dt = self.model.opt.timestep
        v_ref = np.diff(np.vstack([before[vacts], rows[:, vacts]]), axis=0) / dt
        return vacts, v_ref * smooth[vacts]

    def joint_speed(self, held: np.ndarray, q_ref: np.ndarray,
                    v_ref: np.ndarray | None) -> np.ndarray:
        """The speed commands of the velocity servos ``held`` to positions ``q_ref`` for
        one step (``drives.joint_speed``)."""
        vl = self.velocity_loop
        assert vl is not None
        return drives.joint_speed(vl, held, self.data, q_ref, v_ref)

    def reschedule(self) -> None:
        """Size the scheduled servos' gains from the mass matrix of the last step, and
        give the hold feed-forward the same stiffness and damping."""
        m, d = self.model, self.data
        assert self.schedule is not None and self.schedule_full is not None
        self.schedule.apply(m, d, self.schedule_full)
        ht = self.hold_torque
        if ht is not None:
            ht.kp[:] = m.actuator_gainprm[ht.actuators, 0]
            ht.kv[:] = np.maximum(-m.actuator_biasprm[ht.actuators, 2], 0.0) + \
                m.dof_damping[ht.dofs]

    def feed_forward(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(actuators, ctrl offsets) that make position servos hold against gravity at the
        current pose, or None (``drives.feed_forward``). Computed once a chunk."""
        if self.hold_torque is None:
            return None
        return drives.feed_forward(self.hold_torque, self.model, self.data,
                                   self.gravity_data, self.above)
