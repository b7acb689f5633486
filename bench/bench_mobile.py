"""A mobile robot driving in real time with its drive controller at 50 Hz.

sim_node (in this process, real DDS) runs Clearpath's Husky from its xacro-expanded URDF
with its diff_drive_controller config; a client publishes ``cmd_vel`` at 50 Hz. Printed:
the real-time factor while driving (goal >= 0.99), and the process's CPU time per wall
second driving divided by the same robot welded (``base:=fixed``) and idle, measured in
the same run. Also printed: the skid-steer's ground-truth yaw rate over the commanded one
(tyre slip, what ``wheel_separation_multiplier`` calibrates on the real robot).

    python bench/bench_mobile.py [--quick] [--seconds S]
"""

import argparse
import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import threading
import time

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(__file__), '..')))

from geometry_msgs.msg import Twist  # noqa: E402
import mujoco  # noqa: E402
import pybullet_data  # noqa: E402
import rclpy  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONTROLLERS = os.path.join(HERE, '..', 'test', 'models', 'mobile', 'husky_controllers.yaml')
TOPIC = 'husky_velocity_controller/cmd_vel'


def husky_urdf(folder):
    src = os.path.join(pybullet_data.getDataPath(), 'husky', 'husky.urdf')
    text = subprocess.run([sys.executable, '-c', 'import xacro; xacro.main()', src],
                          capture_output=True, text=True, check=True).stdout
    text = text.replace('filename="meshes/', f'filename="{os.path.dirname(src)}/meshes/')
    path = os.path.join(folder, 'husky.urdf')
    with open(path, 'w', encoding='utf-8') as out:
        out.write(text)
    return path


def measure(urdf, seconds, drive, fixed, command=(0.5, 0.0)):
    """(rtf, CPU s per wall s, ground-truth yaw rate) of one run."""
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    params = [Parameter('robot_description', value=urdf), Parameter('web_viewer', value=0),
              Parameter('base', value='fixed' if fixed else 'auto')]
    if not fixed:
        params.append(Parameter('controllers_file', value=CONTROLLERS))
    node = SimNode(context=ctx, parameter_overrides=params)
    client = rclpy.create_node('bench_mobile', context=ctx)
    pub = client.create_publisher(Twist, TOPIC, 10)
    ex = MultiThreadedExecutor(num_threads=3, context=ctx)
    ex.add_node(node)
    ex.add_node(client)
    spin = threading.Thread(target=ex.spin, daemon=True)
    spin.start()
    dev = node.device
    body = mujoco.mj_name2id(dev.model, mujoco.mjtObj.mjOBJ_BODY, 'base_footprint')
    try:
        time.sleep(2.0)                                  # start-up out of the window
        msg = Twist()
        msg.linear.x, msg.angular.z = command
        sim0, wall0, cpu0 = dev.snapshot.time, time.monotonic(), time.process_time()
        q0 = dev.snapshot.xquat[body].copy()
        next_t = wall0
        while time.monotonic() - wall0 < seconds:
            if drive:
                pub.publish(msg)
            next_t += 0.02                               # 50 Hz
            time.sleep(max(0.0, next_t - time.monotonic()))
        wall = time.monotonic() - wall0
        sim = dev.snapshot.time - sim0
        cpu = time.process_time() - cpu0
        q1 = dev.snapshot.xquat[body]
        yaw = [math.atan2(2 * (q[0] * q[3] + q[1] * q[2]), 1 - 2 * (q[2] ** 2 + q[3] ** 2))
               for q in (q0, q1)]
        turned = (yaw[1] - yaw[0] + math.pi) % (2 * math.pi) - math.pi
        return sim / wall, cpu / wall, turned / sim if sim > 0 else 0.0
    finally:
        ex.shutdown(timeout_sec=2.0)
        client.destroy_node()
        node.destroy_node()
        rclpy.shutdown(context=ctx)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='shorter runs (5 s each)')
    ap.add_argument('--seconds', type=float, default=None)
    args = ap.parse_args()
    seconds = args.seconds or (5.0 if args.quick else 20.0)
    print(f'mujoco {mujoco.__version__}, {os.cpu_count()} CPUs, {seconds:g} s a run')
    with tempfile.TemporaryDirectory() as folder:
        urdf = husky_urdf(folder)
        rtf_w, cpu_w, _ = measure(urdf, seconds, drive=False, fixed=True)
        rtf_d, cpu_d, _ = measure(urdf, seconds, drive=True, fixed=False)
        _, _, wz = measure(urdf, min(seconds, 6.0), drive=True, fixed=False,
                           command=(0.0, 0.5))
    print(f'welded, idle: rtf {rtf_w:.3f}, CPU {cpu_w:.3f} s/s')
    print(f'driving at 50 Hz cmd_vel: rtf {rtf_d:.3f} (goal >= 0.99), CPU {cpu_d:.3f} s/s')
    print(f'node CPU driving / welded idle: {cpu_d / cpu_w:.2f}')
    print(f'skid-steer turn in place: ground-truth yaw rate / command {wz / 0.5:.2f} '
          '(tyre slip; the ramp-up is inside the window)')


if __name__ == '__main__':
    main()
