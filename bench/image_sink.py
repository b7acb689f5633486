"""A camera viewer in its own process, as rviz is: subscribes to an image topic and counts.

    python bench/image_sink.py [--topic overhead/image_raw]

Takes every frame as raw bytes (no deserialization, as a C++ viewer pays none) and, on
SIGINT or SIGTERM, prints one JSON line: frames and the seconds between the first and
the last. bench_node runs it so that the process measuring joint_states does not also
receive 70 MB/s of images, which a controller next to an rviz never does.
"""

import argparse
import json
import signal
import threading
import time

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from sensor_msgs.msg import Image


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--topic', default='overhead/image_raw')
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node('image_sink')
    times = []
    node.create_subscription(Image, args.topic, lambda raw: times.append(time.monotonic()), 2,
                             raw=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    try:
        while not stop.is_set():
            ex.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        span = times[-1] - times[0] if len(times) > 1 else 0.0
        print(json.dumps({'frames': len(times), 'span_s': span}), flush=True)
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
