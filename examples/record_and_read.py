#!/usr/bin/env python3
"""Record two seconds of a running sim_node into a rosbag2 folder and read it back.

    make run                                  # in one shell
    python examples/record_and_read.py        # in another

``start_recording`` / ``stop_recording`` (std_srvs/Trigger) write the topics the node was
told to record (``record_topics``; all of its own by default) as MCAP into a folder named
``rosbag2_<date>-<time>`` in the node's working directory; ``stop_recording`` answers with
the folder. The bag carries the message definitions of every type in it, so the ``rosbags``
reader decodes this package's own types (``mujoco_hal_ros/msg/Contacts``...) once they are
registered from the bag, as below.
"""

import collections
import sys
import time

import rclpy
from rosbags.rosbag2 import Reader
from rosbags.typesys import get_types_from_msg, get_typestore, Stores
from std_srvs.srv import Trigger


def trigger(node, name):
    client = node.create_client(Trigger, name)
    try:
        if not client.wait_for_service(timeout_sec=30.0):
            sys.exit(f'no {name} service: is sim_node running (make run)?')
        future = client.call_async(Trigger.Request())
        rclpy.spin_until_future_complete(node, future, timeout_sec=60.0)
        return future.result()
    finally:
        node.destroy_client(client)


def read_back(folder):
    """{topic: count} and the last joint_states, decoded."""
    store = get_typestore(Stores.ROS2_JAZZY)
    counts, last = collections.Counter(), None
    with Reader(folder) as reader:
        for conn in reader.connections:         # types the stock store does not know
            if conn.msgtype not in store.types:
                store.register(get_types_from_msg(conn.msgdef.data, conn.msgtype))
        for conn, _stamp, raw in reader.messages():
            counts[conn.topic] += 1
            msg = store.deserialize_cdr(raw, conn.msgtype)
            if conn.topic == '/joint_states':
                last = msg
    return counts, last


def main(seconds=2.0):
    rclpy.init()
    node = rclpy.create_node('record_example')
    try:
        started = trigger(node, 'start_recording')
        print(started.message)
        time.sleep(seconds)
        stopped = trigger(node, 'stop_recording')
    finally:
        node.destroy_node()
        rclpy.shutdown()
    if not stopped.success:
        sys.exit(f'stop_recording: {stopped.message}')
    folder = stopped.message.split('recorded to ', 1)[1]
    counts, last = read_back(folder)
    for topic, n in sorted(counts.items()):
        print(f'{n:6d} {topic}')
    if last is None:
        sys.exit('no joint_states in the bag')
    print('last joint_states:',
          dict(zip(last.name, [round(float(p), 3) for p in last.position], strict=True)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
