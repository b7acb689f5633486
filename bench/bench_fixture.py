"""A user test's start-up to ready with the fixture (``mujoco_hal_ros.testing.SimRobot``),
in-process and as a process, against the same node started by hand in the same run: a
``SimNode`` in a fresh context and a client that waits for its first ``joint_states``
(in-process), and the installed ``sim_node`` executable with a client doing the same (as a
process). Each ratio is fixture ÷ by hand (goal: about 1; the fixture adds only its client
and a thread).

    python bench/bench_fixture.py [--quick] [--rounds N]
"""

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(__file__), '..')))

import rclpy  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402
from mujoco_hal_ros.testing import free_domain_id, SimRobot  # noqa: E402
from mujoco_hal_ros.testing.robot import _end_group, _installed_sim_node  # noqa: E402


def wait_joint_states(ctx, node_to_spin=None, budget=60.0):
    from rclpy.executors import SingleThreadedExecutor
    client = rclpy.create_node('bench_client', context=ctx)
    got = []
    client.create_subscription(JointState, 'joint_states', got.append, 10)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(client)
    if node_to_spin is not None:
        ex.add_node(node_to_spin)
    end = time.monotonic() + budget
    while not got and time.monotonic() < end:
        ex.spin_once(timeout_sec=0.05)
    ex.shutdown()
    client.destroy_node()
    return bool(got)


def by_hand_in_process():
    t0 = time.perf_counter()
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=[], domain_id=free_domain_id())
    node = SimNode(context=ctx, parameter_overrides=[Parameter('web_viewer', value=0),
                                                     Parameter('log_summary', value=False)])
    ok = wait_joint_states(ctx, node)
    dt = time.perf_counter() - t0
    node.destroy_node()
    rclpy.shutdown(context=ctx)
    assert ok
    return dt


def by_hand_process():
    domain = free_domain_id()
    t0 = time.perf_counter()
    proc = subprocess.Popen([_installed_sim_node(), '--ros-args', '-p', 'web_viewer:=0'],
                            env=dict(os.environ, ROS_DOMAIN_ID=str(domain)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=[], domain_id=domain)
    ok = wait_joint_states(ctx)
    dt = time.perf_counter() - t0
    rclpy.shutdown(context=ctx)
    _end_group(proc)
    assert ok
    return dt


def fixture(process):
    t0 = time.perf_counter()
    robot = SimRobot(process=process, deterministic=not process)
    dt = time.perf_counter() - t0
    robot.close()
    return dt


def simulated_speed():
    """Simulated seconds per wall second of a deterministic ``run_until`` (the bench arm
    following a trajectory): how much faster than real time a user's test runs."""
    with SimRobot() as robot:
        t0, w0 = robot.time, time.perf_counter()
        robot.follow_trajectory(['pan', 'lift', 'elbow', 'wrist'], [[0.3, 0.2, 0.9, 0.9]],
                                [1.5])
        robot.run_until(lambda: False if robot.time - t0 < 5.0 else True, 10.0)
        return (robot.time - t0) / (time.perf_counter() - w0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='two rounds')
    ap.add_argument('--rounds', type=int, default=None)
    args = ap.parse_args()
    rounds = args.rounds or (2 if args.quick else 5)
    rows = {k: [] for k in ('hand_in', 'fix_in', 'hand_proc', 'fix_proc')}
    for _ in range(rounds):                 # interleaved: neighbours share the load
        rows['hand_in'].append(by_hand_in_process())
        rows['fix_in'].append(fixture(False))
        rows['hand_proc'].append(by_hand_process())
        rows['fix_proc'].append(fixture(True))
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f'{rounds} rounds, medians: by hand in-process {med["hand_in"]:.2f} s, fixture '
          f'{med["fix_in"]:.2f} s; by hand as a process {med["hand_proc"]:.2f} s, fixture '
          f'{med["fix_proc"]:.2f} s')
    print(f'fixture / by hand: in-process {med["fix_in"] / med["hand_in"]:.2f}, '
          f'as a process {med["fix_proc"] / med["hand_proc"]:.2f}')
    print(f'a test in simulated time: {simulated_speed():.1f}x real time (goal >= 5)')


if __name__ == '__main__':
    main()
