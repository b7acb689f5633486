"""Two robots as two devices against the same two robots as one device, in one run.

    . .venv/bin/activate && . install/setup.bash && python bench/bench_robots.py [--quick]

The world is the same in both: a UR5 and a Panda from example-robot-data, 0.9 m apart,
imported from their URDFs as sim_node imports a ``robots`` file. The baseline node opens
that world as one MJCF model (one device: one ``joint_states`` with all 15 joints); the
measured node opens the empty world with ``robots:=`` (two devices: ``left/joint_states``
and ``right/joint_states``, their own controllers and services). Both are the installed
sim_node in their own process at real_time_factor 1 and the default publish rate, so the
physics is the same work and the difference is what serving two devices costs.

Ratios (alternating windows, ratio of the sums):
- node CPU: CPU seconds per wall second of the two-device node ÷ the one-device node;
- joint_states p99 interval per robot, in publish periods (1.0 is perfect), as this
  process's middleware received them (MessageInfo ``received_timestamp``), beside the
  one-device node's.

The two-device node publishes no empty ``joint_states`` of its own (the world has no joint
that is not a robot's), so both nodes publish the 15 joints at 500 Hz, in one message or
in two.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

import mujoco
import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState

from mujoco_hal_ros.conformance import urdf_zoo
from mujoco_hal_ros.menagerie import empty_world_path
from mujoco_hal_ros.world import robots_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_node import process_cpu_s, sim_command, stop_sim  # noqa: E402

ROBOTS = [('left', 'ur_description/urdf/ur5_robot.urdf', (0.0, 0.45, 0.0)),
          ('right', 'panda_description/urdf/panda.urdf', (0.0, -0.45, 0.0))]


def write_worlds(folder):
    """(robots file, the same world as one MJCF file)."""
    paths = {p.split('/robots/', 1)[-1]: p for p in urdf_zoo.urdf_paths()}
    lines = ['robots:']
    for ns, urdf, pos in ROBOTS:
        match = [p for key, p in paths.items() if key.endswith(urdf)]
        if not match:
            sys.exit(f'{urdf} not found: {urdf_zoo.SHARE_MISSING}')
        lines += [f'  - namespace: {ns}', f'    urdf: {match[0]}',
                  f'    position: [{pos[0]}, {pos[1]}, {pos[2]}]']
    robots = os.path.join(folder, 'robots.yaml')
    with open(robots, 'w', encoding='utf-8') as out:
        out.write('\n'.join(lines) + '\n')
    spec = mujoco.MjSpec.from_file(empty_world_path())
    for entry in robots_file.load(robots):
        child = mujoco.MjSpec.from_file(robots_file.resource(entry))
        spec.attach(child, prefix=f'{entry.namespace}/',
                    frame=spec.worldbody.add_frame(pos=entry.position,
                                                   quat=entry.quaternion))
    spec.compile()
    world = os.path.join(folder, 'one_device.xml')
    with open(world, 'w', encoding='utf-8') as out:
        out.write(spec.to_xml())
    return robots, world


class Intervals:
    """Arrival times of joint_states on some topics, in this process."""

    def __init__(self, node, topics):
        self.times = {t: [] for t in topics}
        self.lock = threading.Lock()
        self.subs = [node.create_subscription(JointState, t, self._on(t), 1000, raw=True)
                     for t in topics]

    def _on(self, topic):
        # MessageInfo's received_timestamp: when this process's middleware got it, before
        # this process's Python executor adds its own delay (two topics are twice the work)
        def on_msg(_raw, info):
            with self.lock:
                self.times[topic].append(info['received_timestamp'] * 1e-9)
        return on_msg

    def clear(self):
        with self.lock:
            for v in self.times.values():
                v.clear()

    def p99(self, period):
        with self.lock:
            return {t: float(np.percentile(np.diff(v), 99)) / period if len(v) > 10 else None
                    for t, v in self.times.items()}


def window(node, ex, params, topics, seconds, period):
    proc = subprocess.Popen(sim_command() + ['--ros-args'] + [
        a for p in params for a in ('-p', p)], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    seen = Intervals(node, topics)
    try:
        end = time.monotonic() + 90
        while not all(seen.times[t] for t in topics):
            if time.monotonic() > end or proc.poll() is not None:
                raise RuntimeError(f'sim_node {params} did not publish {topics}')
            ex.spin_once(timeout_sec=0.05)
        settle = time.monotonic() + 3.0
        while time.monotonic() < settle:
            ex.spin_once(timeout_sec=0.05)
        seen.clear()
        c0, t0 = process_cpu_s(proc.pid), time.monotonic()
        while time.monotonic() - t0 < seconds:
            ex.spin_once(timeout_sec=0.05)
        cpu = process_cpu_s(proc.pid) - c0
        wall = time.monotonic() - t0
        return cpu, wall, seen.p99(period)
    finally:
        stop_sim(proc)
        for sub in seen.subs:
            node.destroy_subscription(sub)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--seconds', type=float, default=None)
    ap.add_argument('--rounds', type=int, default=None)
    args = ap.parse_args()
    seconds = args.seconds or (6.0 if args.quick else 15.0)
    rounds = args.rounds or (1 if args.quick else 3)
    os.environ.setdefault('ROS_PACKAGE_PATH', urdf_zoo.share_dir() or '')
    rate = 500.0
    period = 1.0 / rate
    with tempfile.TemporaryDirectory() as folder:
        robots, world = write_worlds(folder)
        rclpy.init()
        node = rclpy.create_node('bench_robots')
        ex = SingleThreadedExecutor()
        ex.add_node(node)
        common = [f'publish_rate:={rate}', 'web_viewer:=0']
        one = {'cpu': 0.0, 'wall': 0.0, 'p99': []}
        two = {'cpu': 0.0, 'wall': 0.0, 'p99': []}
        try:
            for r in range(rounds):
                c, w, p = window(node, ex, common + [f'model:={world}'], ['/joint_states'],
                                 seconds, period)
                one['cpu'] += c
                one['wall'] += w
                one['p99'].append(p)
                c, w, p = window(node, ex, common + [f'robots:={robots}'],
                                 ['/left/joint_states', '/right/joint_states'], seconds, period)
                two['cpu'] += c
                two['wall'] += w
                two['p99'].append(p)
                print(f'round {r + 1}: one device {one["p99"][-1]}, two {two["p99"][-1]}',
                      flush=True)
        finally:
            node.destroy_node()
            rclpy.shutdown()
    one_rate = one['cpu'] / one['wall']
    two_rate = two['cpu'] / two['wall']
    print(f'node CPU, one device (15 joints): {one_rate:.3f} CPU-s per s')
    print(f'node CPU, two devices (6 + 9 joints): {two_rate:.3f} CPU-s per s')
    print(f'ratio two robots / one (same joints): {two_rate / one_rate:.2f}')

    def worst(rows, topic):
        vals = [r[topic] for r in rows if r.get(topic) is not None]
        return max(vals) if vals else float('nan')
    print(f'joint_states p99 interval (periods at {rate:g} Hz): one device '
          f'{worst(one["p99"], "/joint_states"):.2f}; left '
          f'{worst(two["p99"], "/left/joint_states"):.2f}, right '
          f'{worst(two["p99"], "/right/joint_states"):.2f}')


if __name__ == '__main__':
    main()
