"""Tracking and start latency of a 5 s Panda trajectory through FollowJointTrajectory.

    python bench/bench_trajectory.py [--quick]

The trajectory (joint1..joint7 of Menagerie's Panda from its ``home`` keyframe, out and
back, 10 points every 0.5 s with positions and velocities, so cubic Hermite segments) runs
twice per round at real-time factor 1:

* direct: the same checked trajectory handed straight to the Device in-process
  (``joint_trajectory.follow``), the baseline: what the physics and the spline give;
* action: sent by an rclpy action client in its own Context (its own DDS participant) to
  the FollowJointTrajectory server of ``attach_swap_interfaces`` on a node spun by a
  MultiThreadedExecutor, as sim_node does.

A sampler thread reads every device snapshot (one per 4 ms stepper chunk) and stamps it
with the monotonic clock. Tracking error is desired (the spline at the snapshot's
simulated time) minus measured joint position, per joint, max and RMS in rad over the
trajectory. Latency is from the goal being accepted (the server's goal callback returning
ACCEPT; for direct, the call) to the first snapshot whose setpoint left the start, i.e. to
the first physics step that carries the new command, in ms; the client-side time from
sending the goal to that step is printed too. Rounds alternate direct and action so load
from other processes hits both alike; the medians over rounds are printed.
"""

import argparse
import importlib.util
import math
import os
import random
import sys
import threading
import time

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import numpy as np  # noqa: E402

from mujoco_hal_ros.menagerie import model_path  # noqa: E402
from mujoco_hal_ros.motion import joint_trajectory as jt  # noqa: E402
from mujoco_hal_ros.sim.device import Device  # noqa: E402

DURATION = 5.0
POINTS = 11
AMPLITUDE = np.array([0.3, -0.25, 0.3, 0.25, 0.3, 0.3, 0.4])   # rad, at mid-trajectory


def plan_points(q0):
    """Out and back: q0 + A (1 - cos(2 pi t / T)) / 2, sampled with exact velocities."""
    out = []
    for t in np.linspace(DURATION / (POINTS - 1), DURATION, POINTS - 1):
        w = 2 * math.pi / DURATION
        out.append({'time_from_start': float(t),
                    'positions': list(q0 + AMPLITUDE * (1 - math.cos(w * t)) / 2),
                    'velocities': list(AMPLITUDE * w * math.sin(w * t) / 2)})
    return out


class Sampler:
    """Every new snapshot with the monotonic time it was first seen."""

    def __init__(self, device):
        self.device = device
        self.samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        last = None
        while not self._stop.is_set():
            snap = self.device.snapshot
            if snap is not last:
                self.samples.append((time.monotonic(), snap))
                last = snap
            time.sleep(0.0002)

    def stop(self):
        self._stop.set()
        self._thread.join(2.0)
        return self.samples


def analyse(samples, execution, start_setpoint, t_accept, t_send=None):
    c = execution.checked
    first = next((w for w, s in samples if w >= (t_send or t_accept) - 1.0 and
                  not np.array_equal(s.setpoint[c.actuators], start_setpoint)), None)
    errs = np.array([execution.desired(s.time)[0] - s.qpos[c.qpos_adr]
                     for _w, s in samples if execution.t0 <= s.time <= execution.t_end])
    return {'max': np.abs(errs).max(axis=0), 'rms': np.sqrt((errs ** 2).mean(axis=0)),
            'latency_ms': (first - t_accept) * 1e3 if first is not None else math.nan,
            'send_ms': (first - t_send) * 1e3 if first is not None and t_send else math.nan,
            'samples': len(errs)}


def settle(device, seconds=0.5):
    time.sleep(seconds)
    return device.snapshot.setpoint.copy()


def run_direct(device, joints):
    sp = settle(device)
    checked = jt.check_trajectory(device.layout, joints, plan_points(sp[:7]))
    sampler = Sampler(device)
    time.sleep(0.05)
    t_accept = time.monotonic()
    execution = jt.follow(device, checked)
    time.sleep(DURATION + 0.3)
    return analyse(sampler.stop(), execution, sp[checked.actuators], t_accept)


class ActionRig:
    """Server node (swap interfaces) on a MultiThreadedExecutor thread; a client elsewhere."""

    def __init__(self, device):
        from control_msgs.action import FollowJointTrajectory
        import rclpy
        from rclpy.action import ActionClient, GoalResponse
        from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

        from mujoco_hal_ros.ros.swap.serve import attach_swap_interfaces
        self.rclpy = rclpy
        self.FJT = FollowJointTrajectory
        domain = random.randint(100, 200)
        self.server_ctx, self.client_ctx = rclpy.Context(), rclpy.Context()
        rclpy.init(context=self.server_ctx, domain_id=domain)
        rclpy.init(context=self.client_ctx, domain_id=domain)
        self.server = rclpy.create_node('sim_node', context=self.server_ctx)
        self.parts = attach_swap_interfaces(self.server, device)
        ctrl = self.parts.trajectory
        self.accepted_at = []
        on_goal = ctrl._on_goal

        def timed(goal):
            answer = on_goal(goal)
            if answer == GoalResponse.ACCEPT:
                self.accepted_at.append(time.monotonic())
            return answer
        ctrl._server.register_goal_callback(timed)
        self.server_ex = MultiThreadedExecutor(num_threads=4, context=self.server_ctx)
        self.server_ex.add_node(self.server)
        self._spin = threading.Thread(target=self.server_ex.spin, daemon=True)
        self._spin.start()
        self.client = rclpy.create_node('bench_client', context=self.client_ctx)
        self.ex = SingleThreadedExecutor(context=self.client_ctx)
        self.ex.add_node(self.client)
        self.action = ActionClient(self.client, FollowJointTrajectory,
                                   'arm_controller/follow_joint_trajectory')
        if not self.action.wait_for_server(timeout_sec=20.0):
            raise RuntimeError('the action server did not come up')

    def wait(self, future, timeout):
        deadline = time.monotonic() + timeout
        while not future.done():
            if time.monotonic() > deadline:
                raise RuntimeError('timed out')
            self.ex.spin_once(timeout_sec=0.01)
        return future.result()

    def run(self, device, joints):
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectoryPoint
        sp = settle(device)
        goal = self.FJT.Goal()
        goal.trajectory.joint_names = list(joints)
        for p in plan_points(sp[:7]):
            ns = int(round(p['time_from_start'] * 1e9))
            goal.trajectory.points.append(JointTrajectoryPoint(
                positions=p['positions'], velocities=p['velocities'],
                time_from_start=Duration(sec=ns // 10 ** 9, nanosec=ns % 10 ** 9)))
        sampler = Sampler(device)
        time.sleep(0.05)
        n = len(self.accepted_at)
        t_send = time.monotonic()
        gh = self.wait(self.action.send_goal_async(goal), 10.0)
        assert gh.accepted
        deadline = time.monotonic() + 5.0
        while self.parts.trajectory.active is None:      # execute runs just after accept
            if time.monotonic() > deadline:
                raise RuntimeError('the goal never started')
            self.ex.spin_once(timeout_sec=0.001)
        execution = self.parts.trajectory.active.execution
        result = self.wait(gh.get_result_async(), DURATION + 10.0)
        samples = sampler.stop()
        if result.result.error_code != 0:
            raise RuntimeError(f'goal failed: {result.result.error_string}')
        acts = execution.checked.actuators
        return analyse(samples, execution, sp[acts], self.accepted_at[n], t_send)

    def close(self):
        self.server_ex.shutdown(timeout_sec=2.0)
        self.parts.destroy()
        self.ex.shutdown(timeout_sec=1.0)
        self.server.destroy_node()
        self.client.destroy_node()
        self.rclpy.try_shutdown(context=self.server_ctx)
        self.rclpy.try_shutdown(context=self.client_ctx)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='one round instead of three')
    args = parser.parse_args(argv)
    path = model_path('panda')
    if path is None:
        print('bench_trajectory: Menagerie Panda is not installed (pip install -r '
              'requirements-test.txt)')
        return 1
    rounds = 1 if args.quick else 3
    device = Device(model=path, keyframe='home', real_time_factor=1.0)
    joints = [f'joint{i}' for i in range(1, 8)]
    rig = None
    try:
        rig = ActionRig(device)
        direct, action = [], []
        for _ in range(rounds):
            direct.append(run_direct(device, joints))
            action.append(rig.run(device, joints))
    finally:
        if rig is not None:
            rig.close()
        device.close()

    def med(runs, key):
        return np.median(np.array([r[key] for r in runs]), axis=0)

    print(f'bench_trajectory: Panda joint1..7, {DURATION:g} s, {POINTS - 1} points with '
          f'velocities (cubic), real_time_factor 1, {rounds} round(s), medians')
    head = ' '.join(f'{j:>7}' for j in joints)
    print(f'{"":38} {head}')
    for name, runs in (('direct Device (baseline)', direct), ('FollowJointTrajectory', action)):
        print(f'{name + " max err rad":38} ' + ' '.join(f'{v:7.4f}' for v in med(runs, 'max')))
        print(f'{name + " RMS rad":38} ' + ' '.join(f'{v:7.4f}' for v in med(runs, 'rms')))
    extra = np.abs(med(action, 'max') - med(direct, 'max')).max()
    print(f'largest difference in max error, action vs direct: {extra:.5f} rad')
    print(f'accepted -> first step with the new setpoint: direct {med(direct, "latency_ms"):.2f}'
          f' ms, action {med(action, "latency_ms"):.2f} ms (server accept); action '
          f'send_goal -> first step {med(action, "send_ms"):.2f} ms')
    print(f'samples per run: {int(med(action, "samples"))} snapshots over {DURATION:g} s')
    return 0


if __name__ == '__main__':
    sys.exit(main())
