"""The joint_states baseline for bench_node: a hand-written rclpy driver, nothing else.

    python bench/bare_joint_states.py [--rate 500] [--priority 50] [--topic bare_joint_states]

One thread publishes a 4-joint sensor_msgs/JointState at ``rate`` against absolute
deadlines, at SCHED_FIFO ``priority`` where this user may (as sim_node's state thread),
with no physics, camera or services in the process. The p99 interval its subscriber sees
is what this machine and middleware allow any publisher; bench_node divides sim_node's by
it. Runs until SIGINT or SIGTERM.
"""

import argparse
import signal
import threading
import time

import rclpy
from rclpy.executors import ExternalShutdownException
from sensor_msgs.msg import JointState

from mujoco_hal_ros.fastpath import sched


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rate', type=float, default=500.0)
    parser.add_argument('--priority', type=int, default=50)
    parser.add_argument('--topic', default='bare_joint_states')
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node('bare_joint_states')
    pub = node.create_publisher(JointState, args.topic, 10)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def run():
        if args.priority:
            sched.realtime(args.priority)           # None or why not: the baseline still runs
        msg = JointState(name=['pan', 'lift', 'elbow', 'wrist'])
        period = 1.0 / args.rate
        t0 = due = time.monotonic()
        while not stop.is_set():
            due += period
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            t = time.monotonic() - t0
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(t), int(t % 1.0 * 1e9)
            msg.position = msg.velocity = msg.effort = [t, t, t, t]
            pub.publish(msg)
    thread = threading.Thread(target=run, name='bare-state', daemon=True)
    thread.start()
    try:
        while not stop.is_set():
            stop.wait(0.2)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        stop.set()
        thread.join(2.0)
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
