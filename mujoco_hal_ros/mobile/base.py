"""A drive controller running on a Device: commands in, wheel and steering setpoints out,
odometry from the wheels' measured joint states.

As ros2_control runs a controller: every ``1 / update_rate`` seconds of simulated time the
latest command (zero once it is older than the timeout) goes through the speed limiters
and the drive's kinematics into the traction joints' velocity setpoints and the steering
joints' positions. That happens inside a ``Plan`` the stepper samples for each chunk, so
commands take effect at control ticks in simulated time whatever the real-time factor,
and the physics thread runs nothing heavier than a few multiplications. Odometry is
integrated after each chunk from the joints as MuJoCo moved them (wheel positions,
velocities, or the commands with ``open_loop``), so wheel slip shows in it as on the robot;
the base's true pose stays on the device's ground truth.

An idle controller (no fresh command, wheels commanded to rest) lets go of its plan, so a
device with a parked base reads idle; ``hold`` ends the plan too and holds the wheels where
they are; the next command takes the joints again.
"""

from collections.abc import Sequence
from dataclasses import dataclass
import math
import threading
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from ..checks import finite_number
from ..errors import ConfigError, DeviceError, InvalidArgument
from ..joint_view import is_hinge
from ..motion.trajectory import Plan
from . import config as cfg
from .kinematics import for_config

if TYPE_CHECKING:
    from ..sim.physics import Physics
from .motion import Odometry, SpeedLimiter

if TYPE_CHECKING:     # the hints only: the device builds its drive controllers
    from ..sim.ports import DriveHost

MAX_SPEED = 1e3          # m/s and rad/s: a command beyond it is no command a base can take


@dataclass(frozen=True)
class OdometryState:
    """What the controller's odometry says at simulated ``time`` (odometry frame)."""

    time: float
    x: float
    y: float
    heading: float
    vx: float
    vy: float
    wz: float
    command: tuple[float, float, float]      # the limited command sent at the last tick


class _Joints:
    """Addresses of the controller's joints in one model."""

    def __init__(self, model: mujoco.MjModel, config: cfg.DriveConfig) -> None:
        self.traction = self._find(model, config, config.wheel_joints, 'velocity')
        self.steering = self._find(model, config, config.steering_joints, 'position')
        acts = [a for a, _q, _d in self.traction + self.steering]
        self.actuators = np.array(acts, dtype=int)
        self.t_qpos = np.array([q for _a, q, _d in self.traction], dtype=int)
        self.t_dof = np.array([d for _a, _q, d in self.traction], dtype=int)
        self.s_qpos = np.array([q for _a, q, _d in self.steering], dtype=int)

    @staticmethod
    def _find(model, config, names, kind):
        out = []
        for name in names:
            j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
            if j < 0 or not is_hinge(model, j):
                raise ConfigError(f'{config.name} names joint {name!r}, which the model has '
                                  'no hinge joint for', where=f'controllers_file: {config.name}')
            acts = [a for a in range(model.nu) if model.actuator_trnid[a, 0] == j and
                    int(model.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT)]
            velocity = [a for a in acts if model.actuator_biasprm[a, 1] == 0 and
                        model.actuator_biasprm[a, 2] < 0]
            position = [a for a in acts if model.actuator_biasprm[a, 1] < 0]
            found = velocity if kind == 'velocity' else position
            if not found:
                raise ConfigError(f'{config.name} drives joint {name!r} by {kind}, but no '
                                  f'{kind} servo acts on it; load the robot from its URDF with '
                                  'this controllers_file (its wheels then get velocity servos)',
                                  where=f'controllers_file: {config.name}')
            out.append((found[0], int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])))
        return out


class _DrivePlan(Plan):
    """The controller's output as a plan: one row of setpoints per control tick."""

    def __init__(self, base: 'BaseController', actuators: Sequence[int] | np.ndarray,
                 t0: float) -> None:
        super().__init__(actuators, t0, math.inf)
        self.base = base
        self.mask = np.ones(len(actuators), dtype=bool)

    def _keep(self, mask):
        self.mask = self.mask.copy()
        self.mask[np.flatnonzero(self.mask)[~mask]] = False

    @property
    def end(self):
        return self.base.output()[self.mask]

    def sample(self, times):
        rows = np.empty((len(times), int(self.mask.sum())))
        for i, t in enumerate(times):
            rows[i] = self.base.tick_until(float(t))[self.mask]
        if self.base.idle():
            self.t_end = float(times[-1]) if len(times) else self.t0   # let go: parked
        return rows


class BaseController:
    """One drive controller (``config.DriveConfig``) on ``device``."""

    def __init__(self, device: 'DriveHost', config: cfg.DriveConfig):
        self.device = device
        self.config = config
        self.kinematics = for_config(config)
        self.period = 1.0 / config.update_rate
        self._lock = threading.Lock()
        self._command = (0.0, 0.0, 0.0, -math.inf)      # vx, vy, wz, simulated time given
        self._limiters = (SpeedLimiter(config.linear), SpeedLimiter(config.linear),
                          SpeedLimiter(config.angular))
        self._odom = Odometry(config.velocity_rolling_window_size)
        self._joints = _Joints(device.model, config)
        self._generation = device.snapshot.generation
        self._out = np.zeros(len(self._joints.actuators))
        self._sent = (0.0, 0.0, 0.0)
        self._next_tick: float | None = None
        self._plan: _DrivePlan | None = None
        self._last: tuple[float, np.ndarray, np.ndarray] | None = None   # odometry: (time,
        # traction qpos, steering qpos)
        self.state = OdometryState(device.snapshot.time, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                                   (0.0, 0.0, 0.0))
        self.commands = 0
        self._unhook = device.on_every_chunk(self._after_chunk)

    # --- any thread ------------------------------------------------------------------------
    def command(self, vx: float, vy: float, wz: float) -> None:
        """A body twist (m/s, rad/s, base frame): refused unless finite and within
        ``MAX_SPEED``; a non-holonomic drive ignores ``vy`` as its controller does. The
        joints are taken again when the controller had let go (idle, or a hold)."""
        values = []
        for name, v in (('linear.x', vx), ('linear.y', vy), ('angular.z', wz)):
            v = finite_number(v, f'{self.config.name}: {name}')
            if abs(v) > MAX_SPEED:
                raise InvalidArgument(f'{v!r} is beyond any base ({MAX_SPEED:g} at most)',
                                      where=f'{self.config.name}: {name}')
            values.append(v)
        if not self.kinematics.holonomic:
            values[1] = 0.0
        now = self.device.snapshot.time
        with self._lock:
            self._command = (values[0], values[1], values[2], now)
            self.commands += 1
        plan = self._plan
        if plan is None or not any(p is plan for p in self.device.snapshot.plans):
            self.device.on_physics(self._engage, wait=False)

    def stop(self) -> None:
        """Drop the last command (the base brakes within its limits)."""
        with self._lock:
            self._command = (0.0, 0.0, 0.0, -math.inf)

    def close(self) -> None:
        """Stop reading odometry and let go of the wheels (they hold a zero speed)."""
        self._unhook()
        plan = self._plan
        if plan is None:
            return

        def release(physics: 'Physics') -> None:
            if any(p is plan for p in physics.plans):
                wheels = np.intersect1d(plan.actuators,
                                        self._joints.actuators[:len(self._joints.traction)])
                physics.release(plan.actuators)
                physics.set_setpoint(0.0, wheels)
        try:
            self.device.on_physics(release, wait=True)
        except DeviceError:
            pass                            # the device closed first: nothing steps

    # --- the physics thread ----------------------------------------------------------------
    def _engage(self, physics: 'Physics') -> None:
        if self._plan is not None and any(p is self._plan for p in physics.plans):
            return
        if self._plan is None or self._next_tick is None:
            self._next_tick = physics.data.time
        else:
            self._next_tick = max(self._next_tick, physics.data.time)
        for lim in self._limiters:
            lim.reset()
        self._out[:len(self._joints.traction)] = 0.0
        self._plan = _DrivePlan(self, self._joints.actuators, physics.data.time)
        physics.take_over(self._plan, positions=False)

    def tick_until(self, t: float) -> np.ndarray:
        """The output at simulated time ``t``: control ticks up to it run first."""
        if self._next_tick is None:
            self._next_tick = t
        while self._next_tick <= t + 1e-12:
            self._update(self._next_tick)
            self._next_tick += self.period
        return self._out

    def _update(self, now: float) -> None:
        with self._lock:
            vx, vy, wz, given = self._command
        if now - given > self.config.cmd_vel_timeout:
            vx = vy = wz = 0.0
        lx, ly, az = self._limiters
        dt = self.period
        sent = (lx.limit(vx, dt), ly.limit(vy, dt), az.limit(wz, dt))
        wheels, steering = self.kinematics.commands(*sent)
        self._out[:len(wheels)] = wheels
        self._out[len(wheels):] = steering
        self._sent = sent

    def output(self) -> np.ndarray:
        return self._out.copy()

    def idle(self) -> bool:
        with self._lock:
            given = self._command[3]
        stale = self._next_tick is None or self._next_tick - given > self.config.cmd_vel_timeout
        return stale and not any(self._sent) and not self._out[:len(self._joints.traction)].any()

    def _after_chunk(self, physics: 'Physics') -> None:
        """Odometry from the joints as the chunk left them (physics thread)."""
        if physics.generation != self._generation:
            self._rebind(physics)
            return
        d, j = physics.data, self._joints
        t = float(d.time)
        q_t, q_s = d.qpos[j.t_qpos].copy(), d.qpos[j.s_qpos].copy()
        last = self._last
        self._last = (t, q_t, q_s)
        if last is None or t <= last[0]:
            return
        dt = t - last[0]
        c = self.config
        if c.open_loop:
            vx, vy, wz = self._sent
        else:
            speeds = (q_t - last[1]) / dt if c.position_feedback else d.qvel[j.t_dof]
            vx, vy, wz = self.kinematics.twist(speeds, 0.5 * (q_s + last[2]))
        self._odom.integrate(vx, vy, wz, dt)
        o = self._odom
        self.state = OdometryState(t, o.x, o.y, o.heading, *o.twist(), command=self._sent)

    def _rebind(self, physics: 'Physics') -> None:
        """The model was swapped (a scene edit): the joints' new addresses; the plan, if
        it ran, is taken again on the new model's actuators."""
        self._generation = physics.generation
        self._joints = _Joints(physics.model, self.config)
        self._last = None
        was = self._plan is not None and any(p is self._plan for p in physics.plans)
        self._plan = None
        if was:
            self._engage(physics)

    def reset_odometry(self) -> None:
        """Odometry back to the origin (the world was reset)."""
        def apply(_stepper):
            self._odom.reset()
            self._last = None
        self.device.on_physics(apply, wait=True)
