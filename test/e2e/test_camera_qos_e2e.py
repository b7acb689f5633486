"""A best-effort (sensor-data QoS) image subscriber in another process gets the frames.

rviz, image_view and most perception nodes subscribe images with the sensor-data profile
(best effort, depth 5). Over UDP a 640x480 rgb8 frame is some 15 fragments, and a best-
effort reader that loses one fragment loses the frame; sim_node and the launch files load
``config/fastdds.xml`` (shared memory with a segment that holds whole frames) unless the
user has chosen a profile, and this checks what such a subscriber receives against a
reliable one in the same process, as rviz would see it.
"""

import os
import time

import pytest

rclpy = pytest.importorskip('rclpy')

from helpers import child_env, node_command, ros_args, SpunNodes, START_S, wait_for  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import qos_profile_sensor_data, QoSProfile  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

RATE = 10.0
WINDOW_S = 8.0


def _count(node, topic, qos, counts, key):
    def cb(_msg):
        counts[key] += 1
    return node.create_subscription(Image, topic, cb, qos)


def test_best_effort_subscriber_gets_the_frames(spawn):
    # sim_node loads config/fastdds.xml itself; this process keeps Fast DDS's defaults,
    # as a user's rviz would (MUJOCO_HAL_ROS_TEST_TRANSPORTS=DEFAULT shows the old loss)
    env = {k: v for k in ('FASTDDS_BUILTIN_TRANSPORTS',)
           if (v := os.environ.get('MUJOCO_HAL_ROS_TEST_TRANSPORTS'))}
    params = [f'camera_rate:={RATE}', 'camera_width:=640', 'camera_height:=480']
    proc = spawn(node_command('sim_node') + ros_args(params), env={**child_env(), **env},
                 name='sim_node')
    nodes = SpunNodes(lambda ctx: [rclpy.create_node('camera_qos_client', context=ctx)],
                      lambda ctx: SingleThreadedExecutor(context=ctx))
    counts = {'reliable': 0, 'best_effort': 0}
    try:
        node = nodes.nodes[0]
        _count(node, '/overhead/image_raw', QoSProfile(depth=5), counts, 'reliable')
        _count(node, '/overhead/image_raw', qos_profile_sensor_data, counts, 'best_effort')
        nodes.spin(START_S + 3 * WINDOW_S)
        if not wait_for(lambda: counts['reliable'] >= 3 and counts['best_effort'] >= 1,
                        START_S):
            pytest.fail(f'no frames ({counts}); sim_node said:\n{spawn.output(proc)[-3000:]}')
        start = dict(counts)
        time.sleep(WINDOW_S)
        got = {k: counts[k] - start[k] for k in counts}
    finally:
        nodes.close()
    print(f'frames in {WINDOW_S:g} s at {RATE:g} fps: {got}')
    assert got['reliable'] >= 0.5 * RATE * WINDOW_S, got
    assert got['best_effort'] >= 0.9 * got['reliable'], got
