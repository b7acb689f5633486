"""Sensor streams: what they cost the physics, and point clouds / compressed images per second.

    python bench/bench_sensors.py [--quick]

1. Stepping with sensors. sim_node in-process on Menagerie's Go1 (an accelerometer, a
   gyro and a framequat added on its ``imu`` site) at real-time factor 0, with a client
   subscribed to ``sensors/imu`` and to a 360-ray planar lidar's ``front/scan``, against a
   bare ``mj_step`` loop on the same model in the same process. Sensor rates are in
   simulated time; at rtf 0 the simulation runs many times faster than real time, so the
   bench sets them from the bare speed measured first, to give the wall-clock load of an
   IMU at 500 Hz and a lidar at 10 Hz (what they cost on a real-time robot). Rounds
   alternate: the node steps while the bare loop waits, then the node is paused while the
   bare loop steps; a third round steps the node with nobody subscribed, which isolates
   what the sensors cost. Ratio = node steps/s / bare steps/s (goal >= 0.9). A stream sends
   at most one message per snapshot (one per chunk of steps, about 6 ms of wall time at
   rtf 0), so the IMU's received rate there is printed as well. Then at rtf 1 with the
   rates as asked: what arrives, and the sensor thread's CPU share.
2. Point clouds and compressed images. Frame by frame, alternating order: a bare
   ``mujoco.Renderer`` (rgb and depth, CameraRenderer's fast settings) against
   CameraRenderer plus what sim_node adds per frame: the organized xyz+rgb cloud
   (``pointcloud.Projector.cloud``) or the JPEG of ``image_raw/compressed``.
   Ratio = our frames/s / bare frames/s (goal >= 0.9).
"""

import argparse
import copy
import os
import sys
import tempfile
import threading
import time

from mujoco_hal_ros.render import gl

gl.ensure_headless_gl()

import mujoco  # noqa: E402

from mujoco_hal_ros.menagerie import bench_arm_path, model_path  # noqa: E402
from mujoco_hal_ros.sensors import compress, pointcloud  # noqa: E402

GOAL = 0.9
IMU_HZ, LIDAR_HZ = 500.0, 10.0
WIDTH, HEIGHT = 640, 480


def go1_with_imu(folder):
    path = model_path('go1')
    if path is None:
        return None
    spec = mujoco.MjSpec.from_file(path)
    spec.meshdir = os.path.join(os.path.dirname(path), 'assets')
    for name, kind in (('imu_acc', 'ACCELEROMETER'), ('imu_gyro', 'GYRO'),
                       ('imu_quat', 'FRAMEQUAT')):
        spec.add_sensor(name=name, type=getattr(mujoco.mjtSensor, f'mjSENS_{kind}'),
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname='imu')
    out = os.path.join(folder, 'go1_imu.xml')
    with open(out, 'w', encoding='utf-8') as handle:
        handle.write(spec.to_xml())
    return out


def bare_steps(m, d, seconds):
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        mujoco.mj_step(m, d, 20)
        n += 20
    return n / (time.perf_counter() - start)


class NodeRun:
    """sim_node and a subscribing client in a private Context, spun on a thread."""

    def __init__(self, params):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.parameter import Parameter
        from sensor_msgs.msg import Imu, LaserScan

        from mujoco_hal_ros.ros.sim.sim_node import SimNode
        self.rclpy = rclpy
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, args=[])
        self.node = SimNode(context=self.ctx, parameter_overrides=[
            Parameter(k, value=v) for k, v in params.items()])
        self.client = rclpy.create_node('bench_sensors_client', context=self.ctx)
        self.got = {'imu': 0, 'scan': 0}
        self._types = {'imu': (Imu, 'sensors/imu'), 'scan': (LaserScan, 'front/scan')}
        self._subs = []
        self._lock = threading.Lock()            # subscriptions change between spins only
        self.listen(True)
        # one executor each: the node's many services would slow the client's wait sets
        self.executors = [SingleThreadedExecutor(context=self.ctx) for _ in range(2)]
        self.executors[0].add_node(self.node)
        self.executors[1].add_node(self.client)
        self._stop = threading.Event()
        self._spinners = [threading.Thread(target=self._spin, args=(ex,), daemon=True)
                          for ex in self.executors]
        for t in self._spinners:
            t.start()
        self.device = self.node.device
        time.sleep(1.0)                           # discovery, subscriber counts

    def _count(self, key):
        self.got[key] += 1

    def listen(self, on):
        """Subscribe to the IMU and the scan, or drop both (the streams then idle)."""
        with self._lock:
            for sub in self._subs:
                self.client.destroy_subscription(sub)
            self._subs = [self.client.create_subscription(
                t, topic, lambda _m, k=k: self._count(k), 10)
                for k, (t, topic) in self._types.items()] if on else []

    def _spin(self, executor):
        while not self._stop.is_set():
            with self._lock:
                executor.spin_once(timeout_sec=0.05)

    def sent(self):
        """Messages the node has published on sensors/imu and front/scan."""
        by_topic = {s.pub.topic_name.rsplit('/', 2)[-2] + '/' + s.pub.topic_name.rsplit(
            '/', 1)[-1]: s.sent for s in self.node.sensors.streams}
        return {'imu': by_topic.get('sensors/imu', 0), 'scan': by_topic.get('front/scan', 0)}

    def sensor_cpu(self):
        """CPU seconds the sensor thread has used (Linux /proc)."""
        tid = self.node.sensors.native_id
        try:
            with open(f'/proc/self/task/{tid}/stat', encoding='ascii') as handle:
                fields = handle.read().rsplit(')', 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
        except (OSError, IndexError, ValueError, TypeError):
            return float('nan')

    def close(self):
        self._stop.set()
        for t, ex in zip(self._spinners, self.executors, strict=True):
            t.join(5.0)
            ex.shutdown(timeout_sec=2.0)
        self.client.destroy_node()
        self.node.destroy_node()
        self.rclpy.shutdown(context=self.ctx)


def bench_stepping(seconds, rounds):
    """(node steps/s, bare steps/s, imu msgs/s, scans/s) at rtf 0, alternating rounds."""
    with tempfile.TemporaryDirectory() as folder:
        path = go1_with_imu(folder)
        if path is None:
            print('go1: model not installed, skipped')
            return None, None
        m = mujoco.MjModel.from_xml_path(path)
        d = mujoco.MjData(m)
        mujoco.mj_resetDataKeyframe(m, d, 0)
        bare = bare_steps(m, d, 1.0)
        speedup = bare * m.opt.timestep          # simulated seconds per wall second
        base = {'model': path, 'keyframe': 'home', 'trajectory_controller': '',
                'lidars': ['front=imu'], 'lidar_rays': 360}
        run = NodeRun(dict(base, real_time_factor=0.0, start_paused=True,
                           sensor_rate=IMU_HZ / speedup, lidar_rate=LIDAR_HZ / speedup))
        best_node = best_quiet = best_bare = node_wall = 0.0
        try:
            dev = run.device

            def node_round():
                dev.pause(False)
                s0, t0 = dev.snapshot.step, time.perf_counter()
                time.sleep(seconds)
                dev.pause(True)
                wall = time.perf_counter() - t0
                return (dev.snapshot.step - s0) / wall, wall
            for _ in range(rounds):
                rate, wall = node_round()
                node_wall += wall
                best_node = max(best_node, rate)
                run.listen(False)
                time.sleep(0.3)                   # the streams see no subscriber
                best_quiet = max(best_quiet, node_round()[0])
                run.listen(True)
                time.sleep(0.3)
                best_bare = max(best_bare, bare_steps(m, d, seconds))
            fast = (best_node, best_quiet, best_bare, run.got['imu'] / node_wall,
                    run.got['scan'] / node_wall)
        finally:
            run.close()
        # At real time: the rates as asked, and what the sensor thread costs for them.
        run = NodeRun(dict(base, real_time_factor=1.0, sensor_rate=IMU_HZ,
                           lidar_rate=LIDAR_HZ))
        try:
            got0, sent0 = dict(run.got), run.sent()
            cpu0, t0 = run.sensor_cpu(), time.perf_counter()
            time.sleep(seconds * rounds / 2)
            wall = time.perf_counter() - t0
            sent = run.sent()
            real = ({k: (sent[k] - sent0[k]) / wall for k in sent},
                    {k: (run.got[k] - got0[k]) / wall for k in got0},
                    (run.sensor_cpu() - cpu0) / wall)
        finally:
            run.close()
        return fast, real


def bare_renderer(m):
    private = copy.copy(m)
    private.vis.quality.offsamples = 0
    private.vis.global_.offwidth = max(private.vis.global_.offwidth, WIDTH)
    private.vis.global_.offheight = max(private.vis.global_.offheight, HEIGHT)
    r = mujoco.Renderer(private, HEIGHT, WIDTH)
    r.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
    r.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
    return r


def bench_frames(frames, rounds):
    from mujoco_hal_ros.render.camera import CameraRenderer
    m = mujoco.MjModel.from_xml_path(bench_arm_path())
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    cam = 'overhead'
    bare = bare_renderer(m)
    ours = CameraRenderer(m, cam, WIDTH, HEIGHT, depth=True)
    proj = pointcloud.Projector(WIDTH, HEIGHT, *ours.intrinsics())
    far = float(m.vis.map.zfar * m.stat.extent) * 0.999

    def bare_rgb():
        bare.update_scene(d, cam)
        return bare.render()

    def bare_rgbd():
        rgb = bare_rgb()
        bare.enable_depth_rendering()
        try:
            bare.update_scene(d, cam)
            return rgb, bare.render()
        finally:
            bare.disable_depth_rendering()

    def our_points():
        rgb, depth = ours.render_rgbd(d)
        return proj.cloud(depth, rgb, far)

    def our_jpeg():
        return compress.encode(ours.render_rgb(d), 'jpeg', 90)

    cases = {'points': (bare_rgbd, our_points), 'compressed': (bare_rgb, our_jpeg)}
    rows = []
    try:
        for fn_bare, fn_ours in cases.values():   # warm-up: shaders, caches
            fn_bare()
            fn_ours()
        for case, (fn_bare, fn_ours) in cases.items():
            best = [0.0, 0.0]
            for _ in range(rounds):
                spent = [0.0, 0.0]
                for i in range(frames):
                    d.qpos[:min(m.nq, 4)] += 0.002 * (1 if i % 2 else -1)
                    mujoco.mj_kinematics(m, d)
                    mujoco.mj_camlight(m, d)
                    order = ((0, fn_bare), (1, fn_ours))
                    for side, fn in (order if i % 2 else order[::-1]):
                        start = time.perf_counter()
                        fn()
                        spent[side] += time.perf_counter() - start
                best = [max(best[k], frames / spent[k]) for k in (0, 1)]
            rows.append((case, best[1], best[0]))
    finally:
        ours.close()
        bare.close()
    return rows


def main(argv=None):
    # a domain of our own: other ROS processes on this machine neither see nor load ours
    os.environ.setdefault('ROS_DOMAIN_ID', str(100 + os.getpid() % 100))
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='short rounds (under a minute)')
    args = parser.parse_args(argv)
    seconds, rounds, frames = (2.0, 2, 8) if args.quick else (5.0, 4, 30)
    below = []
    print(f'mujoco {mujoco.__version__}; best round of {rounds} per side')
    fast, real = bench_stepping(seconds, rounds)
    if fast is not None:
        node, quiet, bare, imu_hz, scan_hz = fast
        ratio = node / bare
        print(f'go1 at rtf 0 with IMU ({imu_hz:.0f} msgs/s received) + 360-ray lidar '
              f'({scan_hz:.1f} scans/s): node {node:.0f} steps/s, bare mj_step {bare:.0f}, '
              f'ratio {ratio:.2f}; the same node with nobody subscribed {quiet:.0f} '
              f'(sensors / no sensors {node / quiet:.2f})')
        if ratio < GOAL:
            below.append(f'stepping {ratio:.2f}')
        sent, got, cpu = real
        print(f'go1 at rtf 1, IMU {IMU_HZ:g} Hz + lidar {LIDAR_HZ:g} Hz asked: sent '
              f'{sent["imu"]:.0f} msgs/s and {sent["scan"]:.1f} scans/s, received '
              f'{got["imu"]:.0f} and {got["scan"]:.1f}; sensor thread {100 * cpu:.1f} % of '
              'a core')
    problem = gl.probe()
    if problem is not None:
        print(f'cannot render: {problem}')
    else:
        for case, ours, bare in bench_frames(frames, rounds):
            ratio = ours / bare
            print(f'bench_arm {WIDTH}x{HEIGHT} {case:<10}: ours {ours:.1f} frames/s, bare '
                  f'renderer {bare:.1f}, ratio {ratio:.2f}')
            if ratio < GOAL:
                below.append(f'{case} {ratio:.2f}')
    verdict = 'OK' if not below else 'BELOW GOAL: ' + ', '.join(below)
    print(f'ratio goal >= {GOAL}: {verdict}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
