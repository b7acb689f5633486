"""Min-jerk plans: shape, peak rate, synchronised durations, hand-over of actuators."""

import numpy as np
import pytest

from mujoco_hal_ros.motion.trajectory import duration, min_jerk, MinJerkPlan, PEAK, WaypointPlan


def test_min_jerk_shape():
    tau = np.linspace(0, 1, 100001)
    s = min_jerk(tau)
    assert s[0] == 0 and s[-1] == 1 and np.all(np.diff(s) >= 0)
    assert min_jerk(0.5) == pytest.approx(0.5)
    rate = np.gradient(s, tau)
    assert rate.max() == pytest.approx(PEAK, rel=1e-6)
    assert abs(rate[0]) < 1e-6 and abs(rate[-1]) < 1e-6
    assert min_jerk(-1.0) == 0 and min_jerk(2.0) == 1


def test_duration_peaks_at_the_rate():
    assert duration([1.0], [2.0]) == pytest.approx(PEAK / 2.0)
    assert duration([-1.0], [2.0]) == pytest.approx(PEAK / 2.0)
    # The slowest joint sets a synchronised move's duration.
    assert duration([1.0, 0.1, 3.0], [1.0, 0.01, 3.0]) == pytest.approx(PEAK * 10.0)
    assert duration([1.0], [None]) == 0.0 and duration([1.0], [np.inf]) == 0.0
    assert duration([], []) == 0.0 and duration([0.0], [1.0]) == 0.0


def test_plan_samples_and_peak_rate():
    rate = 0.7
    start, end = np.array([0.2, -1.0]), np.array([1.2, -0.5])
    T = duration(end - start, [rate, rate])
    plan = MinJerkPlan([3, 5], start, end, 10.0, T)
    assert plan.t_end == pytest.approx(10.0 + T)
    t = np.linspace(10.0, 10.0 + T, 20001)
    q = plan.sample(t)
    assert q[0] == pytest.approx(start) and q[-1] == pytest.approx(end)
    speed = np.abs(np.diff(q, axis=0)) / np.diff(t)[:, None]
    assert speed[:, 0].max() == pytest.approx(rate, rel=1e-4)   # the longer one peaks
    assert speed[:, 1].max() == pytest.approx(rate / 2, rel=1e-4)   # and they arrive together
    assert plan.sample([9.0, 99.0]) == pytest.approx(np.array([start, end]))


def test_zero_duration_jumps():
    plan = MinJerkPlan([0], [0.0], [1.0], 5.0, 0.0)
    assert plan.sample([5.0, 5.001]) == pytest.approx(np.array([[1.0], [1.0]]))


def test_release_hands_actuators_over():
    plan = MinJerkPlan([1, 2, 3], [0, 0, 0], [1, 2, 3], 0.0, 1.0)
    assert plan.release([2]) is True
    assert list(plan.actuators) == [1, 3]
    assert plan.end == pytest.approx([1, 3])
    assert plan.sample([1.0])[0] == pytest.approx([1, 3])
    assert plan.release([1, 3]) is False and plan.actuators.size == 0


def test_waypoint_plan():
    times = np.array([0.0, 1.0, 2.0])
    qs = np.array([[0.0, 0.0], [1.0, 2.0], [1.0, 4.0]])
    plan = WaypointPlan([4, 7], times, qs, 3.0)
    assert plan.t_end == 5.0
    assert plan.sample([3.0, 3.5, 4.5, 9.0]) == pytest.approx(
        np.array([[0, 0], [0.5, 1.0], [1.0, 3.0], [1.0, 4.0]]))
    plan.release([4])
    assert plan.sample([4.0])[0] == pytest.approx([2.0])


def test_per_actuator_durations():
    plan = MinJerkPlan([0, 1, 2], [0, 0, 0], [1, 2, 3], 1.0, [1.0, 2.0, 0.0])
    assert plan.t_end == 3.0
    q = plan.sample([1.0, 1.5, 2.0, 2.5, 3.0])
    assert q[:, 0] == pytest.approx([0, 0.5, 1, 1, 1])
    assert q[:, 1] == pytest.approx([0, 2 * min_jerk(0.25), 1.0, 2 * min_jerk(0.75), 2])
    assert q[:, 2] == pytest.approx([3] * 5)                 # no duration: there at once
    plan.release([1])
    assert plan.t_end == 2.0 and list(plan.actuators) == [0, 2]
