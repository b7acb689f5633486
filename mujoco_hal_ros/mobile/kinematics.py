"""Each drive's geometry: a body twist to wheel speeds and steering angles, and back.

The same equations ros2_controllers' controllers use, as pure functions of the
controller's parameters, so odometry and commands are checked without a simulation.
Twists are in the base frame (REP-103: x forward, y left, z up); wheel speeds in rad/s of
the joint, steering angles in rad of the joint. The joint lists keep the controller file's
order (steering controllers: right first, then left).
"""

import math

import numpy as np

from . import config as cfg

EPS = 1e-9


class Kinematics:
    """``commands`` (twist -> joints) and ``twist`` (measured joints -> twist)."""

    holonomic = False

    def commands(self, vx: float, vy: float, wz: float) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def twist(self, wheel_speeds: np.ndarray, steering: np.ndarray) -> tuple[float, float, float]:
        raise NotImplementedError


class DiffDrive(Kinematics):
    """Left and right wheel sets (several a side: each side's mean)."""

    def __init__(self, left: int, right: int, separation: float, left_radius: float,
                 right_radius: float) -> None:
        self.nl, self.nr = left, right
        self.sep, self.rl, self.rr = separation, left_radius, right_radius

    def commands(self, vx: float, vy: float, wz: float) -> tuple[np.ndarray, np.ndarray]:
        left = (vx - wz * self.sep / 2.0) / self.rl
        right = (vx + wz * self.sep / 2.0) / self.rr
        return np.array([left] * self.nl + [right] * self.nr), np.zeros(0)

    def twist(self, wheel_speeds: np.ndarray, steering: np.ndarray
              ) -> tuple[float, float, float]:
        left = float(np.mean(wheel_speeds[:self.nl])) * self.rl
        right = float(np.mean(wheel_speeds[self.nl:])) * self.rr
        return (left + right) / 2.0, 0.0, (right - left) / self.sep


class Mecanum(Kinematics):
    """Four mecanum wheels: front left, front right, rear right, rear left (the
    controller's order); ``lxly`` is the sum of the wheel's distances from the centre
    along x and y."""

    holonomic = True

    def __init__(self, radius: float, lxly: float,
                 offset: tuple[float, float, float] = (0.0, 0.0, 0.0)):
        self.r, self.k = radius, lxly
        self.offset = offset

    def commands(self, vx: float, vy: float, wz: float) -> tuple[np.ndarray, np.ndarray]:
        # the base frame's twist at the wheels' centre (base_frame_offset)
        ox, oy, oth = self.offset
        c, s = math.cos(oth), math.sin(oth)
        vx, vy = c * vx + s * vy + wz * oy, -s * vx + c * vy - wz * ox
        k = self.k
        return np.array([vx - vy - k * wz, vx + vy + k * wz, vx - vy + k * wz,
                         vx + vy - k * wz]) / self.r, np.zeros(0)

    def twist(self, wheel_speeds: np.ndarray, steering: np.ndarray
              ) -> tuple[float, float, float]:
        fl, fr, rr, rl = (float(w) * self.r for w in wheel_speeds)
        vx = (fl + fr + rr + rl) / 4.0
        vy = (-fl + fr - rr + rl) / 4.0
        wz = (-fl + fr + rr - rl) / (4.0 * self.k)
        ox, oy, oth = self.offset
        vx, vy = vx - wz * oy, vy + wz * ox
        c, s = math.cos(oth), math.sin(oth)
        return c * vx - s * vy, s * vx + c * vy, wz


class Steering(Kinematics):
    """Bicycle (one steered, one driven wheel), tricycle (one steered, two driven) and
    Ackermann (two steered, two driven). Steering on the front axle unless
    ``front_steering`` is false (then the angles turn the other way)."""

    def __init__(self, kind: str, wheelbase: float, traction_radius: float,
                 traction_track: float = 0.0, steering_track: float = 0.0,
                 front_steering: bool = True) -> None:
        self.kind, self.L, self.r = kind, wheelbase, traction_radius
        self.tt, self.st = traction_track, steering_track
        self.sign = 1.0 if front_steering else -1.0

    def commands(self, vx: float, vy: float, wz: float) -> tuple[np.ndarray, np.ndarray]:
        curvature = wz / vx if abs(vx) > EPS else 0.0
        if self.kind == cfg.BICYCLE:
            phi = math.atan(curvature * self.L)
            return np.array([vx / self.r]), np.array([self.sign * phi])
        # two driven wheels: right then left, each on its own radius about the turn centre
        right = (vx + wz * self.tt / 2.0) / self.r if abs(vx) > EPS else 0.0
        left = (vx - wz * self.tt / 2.0) / self.r if abs(vx) > EPS else 0.0
        if self.kind == cfg.TRICYCLE:
            return np.array([right, left]), np.array([self.sign * math.atan(curvature * self.L)])
        k, L, h = curvature, self.L, self.st / 2.0
        phi_r = math.atan(k * L / (1.0 + k * h))     # the outer wheel of a left turn
        phi_l = math.atan(k * L / (1.0 - k * h)) if abs(1.0 - k * h) > EPS else math.pi / 2
        return np.array([right, left]), self.sign * np.array([phi_r, phi_l])

    def curvature(self, steering: np.ndarray) -> float:
        """The turn's curvature (1/m, left positive) the measured steering angles give."""
        phis = [self.sign * float(p) for p in steering]
        if self.kind != cfg.ACKERMANN:
            return math.tan(phis[0]) / self.L
        h = self.st / 2.0
        ks = []
        for phi, side in zip(phis, (1.0, -1.0), strict=True):       # right, left
            t = math.tan(phi)
            ks.append(t / (self.L - side * t * h) if abs(self.L - side * t * h) > EPS else 0.0)
        return sum(ks) / len(ks)

    def twist(self, wheel_speeds: np.ndarray, steering: np.ndarray
              ) -> tuple[float, float, float]:
        v = float(np.mean(wheel_speeds)) * self.r
        return v, 0.0, v * self.curvature(steering)


def for_config(c: 'cfg.DriveConfig') -> Kinematics:
    """The kinematics of one drive controller's parameters."""
    g = c.geometry
    if c.type == cfg.DIFF_DRIVE:
        return DiffDrive(len(g['left']), len(g['right']), g['wheel_separation'],
                         g['left_radius'], g['right_radius'])
    if c.type == cfg.MECANUM:
        return Mecanum(g['radius'], g['lxly'], g['offset'])
    return Steering(c.type, g['wheelbase'], g['traction_radius'], g['traction_track'],
                    g['steering_track'], g['front_steering'])
