"""A drive controller's speed limiter and odometry, as ros2_controllers runs them.

``SpeedLimiter`` is the controllers' limiter on one axis: jerk, then acceleration, then
velocity, each against the last two commands, once per control period (NaN: no limit).
``Odometry`` integrates a body twist over each period in the plane, exactly along the
arc a constant twist drives (second-order Runge-Kutta where the turn is negligible), and
reports the twist as the mean over the last ``window`` updates, as the controllers'
rolling window does.
"""

from collections import deque
import math

from .config import AxisLimits


def _clamp(v, lo, hi):
    if not math.isnan(lo):
        v = max(v, lo)
    if not math.isnan(hi):
        v = min(v, hi)
    return v


class SpeedLimiter:
    """Limits one axis of the commanded twist; ``limit`` returns the limited value."""

    def __init__(self, limits: AxisLimits):
        self.limits = limits
        self.v0 = 0.0          # the last command sent
        self.v1 = 0.0          # the one before

    def limit(self, v: float, dt: float) -> float:
        lim = self.limits
        if dt > 0:
            dv, dv0 = v - self.v0, self.v0 - self.v1
            dt2 = 2.0 * dt * dt
            da = _clamp(dv - dv0, lim.min_jerk * dt2, lim.max_jerk * dt2)
            v = self.v0 + dv0 + da
            dv = _clamp(v - self.v0, lim.min_acceleration * dt, lim.max_acceleration * dt)
            v = self.v0 + dv
        v = _clamp(v, lim.min_velocity, lim.max_velocity)
        self.v1, self.v0 = self.v0, v
        return v

    def reset(self) -> None:
        self.v0 = self.v1 = 0.0


class Odometry:
    """The base's pose in the odometry frame (x, y, heading) from body twists."""

    def __init__(self, window: int = 10):
        self.x = self.y = self.heading = 0.0
        self._vx: deque = deque(maxlen=window)
        self._vy: deque = deque(maxlen=window)
        self._wz: deque = deque(maxlen=window)

    def integrate(self, vx: float, vy: float, wz: float, dt: float) -> None:
        """Move by the twist (base frame) held for ``dt`` seconds."""
        if dt <= 0:
            return
        dx, dy, dth = vx * dt, vy * dt, wz * dt
        th = self.heading
        if abs(dth) < 1e-6:        # Runge-Kutta 2: the heading at the middle of the step
            mid = th + 0.5 * dth
            c, s = math.cos(mid), math.sin(mid)
            self.x += c * dx - s * dy
            self.y += s * dx + c * dy
        else:                      # exact: the arc of a constant twist
            s0, c0 = math.sin(th), math.cos(th)
            s1, c1 = math.sin(th + dth), math.cos(th + dth)
            self.x += (dx * (s1 - s0) + dy * (c1 - c0)) / dth
            self.y += (-dx * (c1 - c0) + dy * (s1 - s0)) / dth
        self.heading = math.atan2(math.sin(th + dth), math.cos(th + dth))
        self._vx.append(vx)
        self._vy.append(vy)
        self._wz.append(wz)

    def twist(self) -> tuple[float, float, float]:
        """The rolling mean of the last updates' twists (zero before the first)."""
        n = len(self._vx)
        if not n:
            return 0.0, 0.0, 0.0
        return sum(self._vx) / n, sum(self._vy) / n, sum(self._wz) / n

    def reset(self) -> None:
        self.x = self.y = self.heading = 0.0
        self._vx.clear()
        self._vy.clear()
        self._wz.clear()
