"""Sensors a URDF declares, served in real time: a 360-beam lidar at 10 Hz and a 640x480
camera at 15 Hz from their Gazebo tags.

    python bench/bench_urdf_sensors.py [--quick] [--seconds S]

The robot is ``test/models/tb3_sensors.urdf`` (a TurtleBot3 Waffle-like base whose
``<gazebo>`` tags declare the LDS lidar, the IMU and a camera), its lidar set to 360
beams at 10 Hz and its camera to a 640x480 RGB camera at 15 Hz, in the walls of
``test/models/sensor_walls.xml``. sim_node runs in-process at real-time factor 1.

1. Real-time factor. The same node is measured with a client subscribed to ``/scan`` and
   ``camera/image_raw`` (both sensors working) and with nobody subscribed (both idle),
   alternating windows. Printed: each window's measured real-time factor (goal >= 0.99)
   and the ratio working / idle, the baseline measured in the same run.
2. Rates. Over the working windows, each sensor's received rate (messages over the span of
   their simulated stamps, and over wall time) ÷ its ``update_rate`` (goal >= 0.98).
3. Lidar cost. ``sensors.lidar.Lidar.scan`` (pose a private MjData from a snapshot, cast,
   ranges and points) against one bare ``mujoco.mj_multiRay`` call for the same 360 beams
   from the same point on an already-posed MjData, call by call, alternating
   (goal <= 1.2).
"""

import argparse
import os
import tempfile
import threading
import time

from mujoco_hal_ros.render import gl

gl.ensure_headless_gl()

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
URDF = os.path.join(ROOT, 'test', 'models', 'tb3_sensors.urdf')
WALLS = os.path.join(ROOT, 'test', 'models', 'sensor_walls.xml')
LIDAR_HZ, CAMERA_HZ, WIDTH, HEIGHT, BEAMS = 10.0, 15.0, 640, 480, 360
GOALS = {'rtf': 0.99, 'rate': 0.98, 'lidar': 1.2}


def bench_urdf():
    """The test URDF with the issue's sensors: the lidar at 10 Hz, the camera 640x480 RGB
    at 15 Hz (the tags changed as a user would write them)."""
    text = open(URDF, encoding='utf-8').read()
    text = text.replace('<update_rate>5</update_rate>\n      <ray>',
                        f'<update_rate>{LIDAR_HZ:g}</update_rate>\n      <ray>')
    text = text.replace('type="depth"', 'type="camera"')
    text = text.replace('<width>80</width>', f'<width>{WIDTH}</width>')
    text = text.replace('<height>60</height>', f'<height>{HEIGHT}</height>')
    text = text.replace('<update_rate>5</update_rate>\n      <camera',
                        f'<update_rate>{CAMERA_HZ:g}</update_rate>\n      <camera')
    assert text.count(f'<update_rate>{LIDAR_HZ:g}</update_rate>') == 1
    assert f'<update_rate>{CAMERA_HZ:g}</update_rate>' in text
    return text


class NodeRun:
    """sim_node and a client that counts /scan and camera/image_raw, in their own
    Context, each spun on its own thread."""

    def __init__(self, urdf_path):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.parameter import Parameter
        from sensor_msgs.msg import Image, LaserScan

        from mujoco_hal_ros.ros.sim.sim_node import SimNode
        self.rclpy = rclpy
        self.ctx = rclpy.Context()
        rclpy.init(context=self.ctx, args=[])
        self.node = SimNode(context=self.ctx, parameter_overrides=[
            Parameter('robot_description', value=urdf_path), Parameter('scene', value=WALLS),
            Parameter('trajectory_controller', value=''),
            Parameter('real_time_factor', value=1.0)])
        self.client = rclpy.create_node('bench_urdf_sensors_client', context=self.ctx)
        self._types = {'scan': (LaserScan, '/scan'), 'image': (Image, 'camera/image_raw')}
        self.stamps = {k: [] for k in self._types}      # (simulated stamp, wall) per message
        self._subs = []
        self._lock = threading.Lock()
        self.executors = [SingleThreadedExecutor(context=self.ctx) for _ in range(2)]
        self.executors[0].add_node(self.node)
        self.executors[1].add_node(self.client)
        self._stop = threading.Event()
        self._spinners = [threading.Thread(target=self._spin, args=(ex,), daemon=True)
                          for ex in self.executors]
        for t in self._spinners:
            t.start()
        self.device = self.node.device

    def _got(self, key, msg):
        st = msg.header.stamp
        self.stamps[key].append((st.sec + st.nanosec * 1e-9, time.perf_counter()))

    def listen(self, on):
        with self._lock:
            for sub in self._subs:
                self.client.destroy_subscription(sub)
            self._subs = [self.client.create_subscription(
                t, topic, lambda m, k=k: self._got(k, m), 10)
                for k, (t, topic) in self._types.items()] if on else []

    def _spin(self, executor):
        while not self._stop.is_set():
            with self._lock:
                executor.spin_once(timeout_sec=0.05)

    def close(self):
        self._stop.set()
        for t, ex in zip(self._spinners, self.executors, strict=True):
            t.join(5.0)
            ex.shutdown(timeout_sec=2.0)
        self.client.destroy_node()
        self.node.destroy_node()
        self.rclpy.shutdown(context=self.ctx)


def window(run, seconds):
    """The real-time factor over ``seconds`` of wall time: simulated over wall."""
    s0, t0 = run.device.snapshot.time, time.perf_counter()
    time.sleep(seconds)
    return (run.device.snapshot.time - s0) / (time.perf_counter() - t0)


def rate_of(stamps, since):
    """(rate by simulated stamps, rate by wall clock) of the messages after ``since``."""
    got = [(s, w) for s, w in stamps if w >= since]
    if len(got) < 3:
        return float('nan'), float('nan')
    sim = (len(got) - 1) / (got[-1][0] - got[0][0])
    wall = (len(got) - 1) / (got[-1][1] - got[0][1])
    return sim, wall


def bench_node(seconds, rounds):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, 'tb3_bench.urdf')
        with open(path, 'w', encoding='utf-8') as handle:
            handle.write(bench_urdf())
        run = NodeRun(path)
        try:
            working, idle, spans = [], [], []
            for _ in range(rounds):
                run.listen(True)
                time.sleep(min(3.0, seconds))        # discovery, first frames, GL context
                start = time.perf_counter()
                working.append(window(run, seconds))
                spans.append((start, time.perf_counter()))
                run.listen(False)
                time.sleep(0.5)
                idle.append(window(run, seconds))
            rates = {}
            for key, hz in (('scan', LIDAR_HZ), ('image', CAMERA_HZ)):
                per = [rate_of([x for x in run.stamps[key] if a <= x[1] <= b], a)
                       for a, b in spans]
                rates[key] = (float(np.nanmedian([p[0] for p in per])) / hz,
                              float(np.nanmedian([p[1] for p in per])) / hz)
            return working, idle, rates
        finally:
            run.close()


def bench_lidar(calls):
    """Median cost of Lidar.scan and of one bare mj_multiRay for the same beams, call by
    call, alternating."""
    from types import SimpleNamespace

    from mujoco_hal_ros.description.urdf_in import model_from_urdf
    from mujoco_hal_ros.sensors import declared
    from mujoco_hal_ros.sensors.lidar import Lidar
    with tempfile.TemporaryDirectory() as folder:
        path, _notes = model_from_urdf(bench_urdf(), scene=WALLS, cache_dir=folder)
        m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    cfg = declared.lidar_settings(m)['hls_lfcd_lds']
    scanner = Lidar(m, cfg)
    snap = SimpleNamespace(qpos=d.qpos.copy(), time=0.0, mocap_pos=d.mocap_pos.copy(),
                           mocap_quat=d.mocap_quat.copy())
    # the bare call: the same beams from the same site, on an MjData posed already
    bare_d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, bare_d)
    site = scanner.site
    dirs = (scanner.pattern.directions @ bare_d.site_xmat[site].reshape(3, 3).T).ravel()
    origin = bare_d.site_xpos[site].copy()
    geomid = np.zeros(BEAMS, np.int32)
    dist = np.zeros(BEAMS)
    body = int(m.site_bodyid[site])
    ours, bare = [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        mujoco.mj_multiRay(m, bare_d, origin, dirs, None, 1, body, geomid, dist, None,
                           BEAMS, cfg['range_max'])
        t1 = time.perf_counter()
        scanner.scan(snap)
        t2 = time.perf_counter()
        bare.append(t1 - t0)
        ours.append(t2 - t1)
    return float(np.median(ours)), float(np.median(bare))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--quick', action='store_true', help='short windows (make bench)')
    ap.add_argument('--seconds', type=float, default=None, help='seconds per window')
    args = ap.parse_args()
    seconds = args.seconds or (4.0 if args.quick else 15.0)
    rounds = 2 if args.quick else 3
    print(f'mujoco {mujoco.__version__}; {BEAMS}-beam lidar at {LIDAR_HZ:g} Hz, '
          f'{WIDTH}x{HEIGHT} camera at {CAMERA_HZ:g} Hz, from the URDF\'s Gazebo tags')
    ours, bare = bench_lidar(300 if args.quick else 2000)
    print(f'lidar: Lidar.scan {ours * 1e6:.0f} us, one mj_multiRay {bare * 1e6:.0f} us: '
          f'ratio {ours / bare:.2f} (goal <= {GOALS["lidar"]})')
    working, idle, rates = bench_node(seconds, rounds)
    print('real-time factor, sensors working: ' + ', '.join(f'{r:.3f}' for r in working)
          + f' (goal >= {GOALS["rtf"]}); idle: ' + ', '.join(f'{r:.3f}' for r in idle))
    print(f'real-time factor working / idle: {np.median(working) / np.median(idle):.3f}')
    for key, name, hz in (('scan', '/scan', LIDAR_HZ), ('image', 'camera/image_raw',
                                                        CAMERA_HZ)):
        sim, wall = rates[key]
        print(f'{name}: published rate / update_rate {hz:g} Hz = {sim:.3f} by simulated '
              f'stamps, {wall:.3f} by wall clock (goal >= {GOALS["rate"]})')


if __name__ == '__main__':
    main()
