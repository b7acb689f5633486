"""The README's pictures, made from a real run: the web viewer and a recorded bag.

    . .venv/bin/activate && . install/setup.bash && python doc/make_pictures.py

Runs sim_node in this process on the built-in arm with ``web_viewer``, ``record`` and
``record_video``, moves the arm through three points, takes a headless Chromium screenshot
of the viewer mid-run (doc/web_viewer.png, the viewer's status line cropped), then reads
the bag back with ``rosbags`` and the MP4 with PyAV and draws doc/recorded_run.png: four
camera frames across the run over the recorded joint positions.
"""

import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'test'))

from mujoco_hal_ros.render import gl  # noqa: E402

gl.ensure_headless_gl()

import av  # noqa: E402
from browser import Page, STATUS_BAR, viewer_drawn  # noqa: E402
import cv2  # noqa: E402
import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from rosbags.typesys import get_typestore, Stores  # noqa: E402

from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402

POINTS = [(0.17, 0.03, 0.05), (0.145, -0.055, 0.085), (0.195, 0.055, 0.035)]
COLOURS = [(60, 120, 230), (60, 180, 60), (200, 90, 40), (160, 60, 160)]   # BGR


def record_run(folder, port):
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=[])
    node = SimNode(context=ctx, parameter_overrides=[Parameter(k, value=v) for k, v in {
        'web_viewer': port, 'record': folder, 'record_video': ['overhead'],
        'record_topics': ['joint_states', '/tf', 'overhead/image_raw'],
        'thread_priority': 0}.items()])
    ex = MultiThreadedExecutor(num_threads=4, context=ctx)
    ex.add_node(node)
    stop = threading.Event()
    spinner = threading.Thread(target=lambda: [ex.spin_once(timeout_sec=0.1)
                                               for _ in iter(stop.is_set, True)], daemon=True)
    spinner.start()
    try:
        time.sleep(1.0)
        shot = None
        for i, point in enumerate(POINTS):
            node.device.move_to(point=point, wait=True)
            time.sleep(0.5)
            if i == 0:
                with Page(node.viewer.url, width=1000, height=640) as page:
                    _, shot = page.shot_until(viewer_drawn, 90.0)
        path = node.recording.stop()
    finally:
        stop.set()
        spinner.join(5.0)
        ex.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.shutdown(context=ctx)
    return shot, path


def joint_positions(path):
    ts = get_typestore(Stores.ROS2_JAZZY)
    t, q, names = [], [], None
    with Reader(path) as reader:
        conns = [c for c in reader.connections if c.topic == '/joint_states']
        for conn, _stamp, raw in reader.messages(connections=conns):
            msg = ts.deserialize_cdr(raw, conn.msgtype)
            names = list(msg.name)
            t.append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
            q.append(np.array(msg.position))
    return np.array(t), np.array(q), names


def plot(t, q, names, width, height):
    img = np.full((height, width, 3), 255, np.uint8)
    left, right, top, bottom = 60, 20, 30, 40
    lo, hi = float(q.min()) - 0.1, float(q.max()) + 0.1

    def xy(ti, qi):
        x = left + (ti - t[0]) / max(t[-1] - t[0], 1e-9) * (width - left - right)
        y = top + (hi - qi) / (hi - lo) * (height - top - bottom)
        return int(x), int(y)
    cv2.rectangle(img, (left, top), (width - right, height - bottom), (180, 180, 180), 1)
    for j in range(q.shape[1]):
        pts = np.array([xy(ti, qi) for ti, qi in zip(t, q[:, j], strict=True)], np.int32)
        cv2.polylines(img, [pts], False, COLOURS[j % len(COLOURS)], 2, cv2.LINE_AA)
        cv2.putText(img, names[j], (left + 10 + 110 * j, top - 8), cv2.FONT_HERSHEY_SIMPLEX,
                    0.6, COLOURS[j % len(COLOURS)], 2, cv2.LINE_AA)
    cv2.putText(img, f'joint_states position (rad) from the bag, {t[-1] - t[0]:.1f} s of '
                'simulated time', (left, height - 12), cv2.FONT_HERSHEY_SIMPLEX, 0.55,
                (60, 60, 60), 1, cv2.LINE_AA)
    for v in (lo + 0.1, 0.0, hi - 0.1):
        cv2.putText(img, f'{v:+.1f}', (5, xy(t[0], v)[1] + 5), cv2.FONT_HERSHEY_SIMPLEX, 0.45,
                    (90, 90, 90), 1, cv2.LINE_AA)
    return img


def frames(mp4, count):
    with av.open(mp4) as container:
        all_frames = [f.to_ndarray(format='bgr24') for f in container.decode(video=0)]
    picks = np.linspace(0, len(all_frames) - 1, count).astype(int)
    return [all_frames[i] for i in picks], len(all_frames)


def main():
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    work = tempfile.mkdtemp(prefix='doc_pictures_')
    try:
        shot, path = record_run(os.path.join(work, 'run'), port)
        cv2.imwrite(os.path.join(HERE, 'web_viewer.png'), shot[:-STATUS_BAR])
        t, q, names = joint_positions(path)
        picked, total = frames(os.path.join(path, 'overhead.mp4'), 4)
        tiles = [cv2.resize(f, (320, 240)) for f in picked]
        for i, tile in enumerate(tiles):
            cv2.putText(tile, f'overhead.mp4 {i + 1}/4', (8, 22), cv2.FONT_HERSHEY_SIMPLEX,
                        0.55, (255, 255, 255), 2, cv2.LINE_AA)
        top = np.concatenate(tiles, axis=1)
        picture = np.concatenate([top, plot(t, q, names, top.shape[1], 300)], axis=0)
        cv2.imwrite(os.path.join(HERE, 'recorded_run.png'), picture)
        print(f'doc/web_viewer.png, doc/recorded_run.png ({len(t)} joint_states, '
              f'{total} video frames)')
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
