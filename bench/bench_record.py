"""What watching and keeping a run costs sim_node, all measured in this one run.

    . .venv/bin/activate && . install/setup.bash && python bench/bench_record.py [--quick]

sim_node runs in this process at real_time_factor 0 (physics as fast as it goes) with
joint_states and /tf at 100 Hz and its 640x480 camera at 10 Hz, so its physics steps per
second show what everything else in the process takes from it (bench_node.py's approach).
Windows of each configuration in turn, ``rounds`` times, a fresh node each, ratio of the
sums, because this shared VM's speed drifts:

- plain: nothing watches or records.
- viewer: ``web_viewer`` on, with headless Chromium on this machine showing the page (the
  browser's own WebGL rendering lands on the same two cores here; on a user's machine it
  would not).
- watched: the camera subscribed in this process, as rviz would watch it (rendering the
  camera is then part of the node's work with or without recording).
- recording: as watched, plus ``record`` of joint_states, /tf and the camera, and the
  camera's MP4 (``record_video``).

Ratios: viewer / plain and recording / watched (goals >= 0.9), recording / plain (which
also pays for rendering the camera), and MP4 frames written / frames the camera published
while recording (goal >= 0.98). Steps/s follow whatever else the machine runs (other
processes take the cores); steps per CPU second of the physics thread show what the rest
of this process costs the stepping itself (the GIL between chunks, caches), which that
load does not distort, so both are printed.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from mujoco_hal_ros.render import gl

gl.ensure_headless_gl()

import rclpy  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

GOAL = 0.9
VIDEO_GOAL = 0.98
BROWSER_SETTLE_S = 12.0
BROWSER_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
                 '--no-first-run', '--disable-background-networking',
                 '--disable-component-update', '--disable-sync', '--use-angle=swiftshader',
                 '--enable-unsafe-swiftshader', '--window-size=800,600',
                 '--remote-debugging-port=0']


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def stepper_cpu_s():
    """CPU seconds of this process's physics thread, from /proc (0 if not found)."""
    for t in threading.enumerate():
        if t.name == 'mujoco_hal_ros-stepper' and t.native_id:
            try:
                with open(f'/proc/self/task/{t.native_id}/stat') as f:
                    fields = f.read().rsplit(')', 1)[1].split()
            except OSError:
                return 0.0
            return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    return 0.0


def window(mode, seconds, folder):
    """(steps/s, steps per physics-thread CPU s, extra) of one fresh node in ``mode``."""
    from mujoco_hal_ros.ros.run import tune_interpreter
    from mujoco_hal_ros.ros.sim.sim_node import SimNode
    tune_interpreter()
    params = {'real_time_factor': 0.0, 'publish_rate': 100.0, 'tf_rate': 100.0,
              'camera_rate': 10.0, 'thread_priority': 0}
    port = free_port()
    if mode == 'viewer':
        params['web_viewer'] = port
    if mode == 'recording':
        params.update(record=os.path.join(folder, f'bag{time.monotonic_ns()}'),
                      record_topics=['joint_states', '/tf', 'overhead/image_raw'],
                      record_video=['overhead'])
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=[])
    node = SimNode(context=ctx, parameter_overrides=[Parameter(k, value=v)
                                                     for k, v in params.items()])
    ex = MultiThreadedExecutor(num_threads=4, context=ctx)
    ex.add_node(node)
    stop = threading.Event()
    images = []
    if mode in ('watched', 'recording'):
        node.create_subscription(Image, 'overhead/image_raw', lambda d: images.append(len(d)),
                                 2, raw=True)

    def spin():
        while not stop.is_set():
            ex.spin_once(timeout_sec=0.1)
    spinner = threading.Thread(target=spin, name='executor', daemon=True)
    spinner.start()
    browser = profile = None
    extra = {}
    try:
        if mode == 'viewer':
            profile = tempfile.mkdtemp(prefix='bench_record_chromium_')
            browser = subprocess.Popen(
                [shutil.which('chromium'), *BROWSER_FLAGS, f'--user-data-dir={profile}',
                 node.viewer.url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(BROWSER_SETTLE_S)       # the page loads and compiles its WebAssembly
        else:
            time.sleep(1.5)
        h0, t0, c0 = node.device.health()['steps'], time.monotonic(), stepper_cpu_s()
        time.sleep(seconds)
        h1, t1, c1 = node.device.health()['steps'], time.monotonic(), stepper_cpu_s()
        if mode == 'viewer':
            extra['browser_alive'] = browser.poll() is None
            extra['viewer_frames'] = node.viewer.frames
        if mode == 'recording':
            video = node.recording.videos['overhead']
            rec = node.recording.recorder
            node.recording.stop()
            extra.update(video_in=video.frames_in, video_written=video.frames_written,
                         bag_messages=sum(rec.counts().values()), bag_dropped=rec.dropped)
    finally:
        if browser is not None:
            browser.terminate()
            browser.wait(10)
            shutil.rmtree(profile, ignore_errors=True)
        stop.set()
        spinner.join(5.0)
        ex.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.shutdown(context=ctx)
    return (h1 - h0) / (t1 - t0), (h1 - h0) / max(c1 - c0, 1e-9), extra


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='short runs (under a minute)')
    parser.add_argument('--json', action='store_true', help='print one JSON line as well')
    args = parser.parse_args()
    seconds, rounds = (4.0, 1) if args.quick else (8.0, 3)
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    os.environ.setdefault('ROS_DOMAIN_ID', str(100 + os.getpid() % 100))
    modes = ['plain', 'watched', 'recording']
    if shutil.which('chromium'):
        modes.insert(1, 'viewer')
    else:
        print('no chromium here: the viewer window is skipped (apt-get install chromium)')
    folder = tempfile.mkdtemp(prefix='bench_record_')
    rates = {m: [] for m in modes}
    per_cpu = {m: [] for m in modes}
    video = {'in': 0, 'written': 0}
    extras = {}
    try:
        for _ in range(rounds):
            for mode in modes:
                rate, cpu_rate, extra = window(mode, seconds, folder)
                rates[mode].append(rate)
                per_cpu[mode].append(cpu_rate)
                extras.setdefault(mode, []).append(extra)
                if mode == 'recording':
                    video['in'] += extra['video_in']
                    video['written'] += extra['video_written']
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    mean = {m: sum(v) / len(v) for m, v in rates.items()}
    cpu = {m: sum(v) / len(v) for m, v in per_cpu.items()}
    r = {'steps_per_s': mean, 'steps_per_stepper_cpu_s': cpu, 'extras': extras,
         'recording_vs_watched': mean['recording'] / mean['watched'],
         'recording_vs_plain': mean['recording'] / mean['plain'],
         'video_ratio': video['written'] / max(video['in'], 1)}
    print(f'load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; '
          f'{rounds} x {seconds:g} s windows per configuration')
    if 'viewer' in mean:
        r['viewer_vs_plain'] = mean['viewer'] / mean['plain']
        print(f'web viewer: {mean["viewer"]:.0f} steps/s at rtf 0 with a browser connected / '
              f'{mean["plain"]:.0f} without = {r["viewer_vs_plain"]:.2f} (goal >= {GOAL}; the '
              'browser renders on this machine too)')
    print(f'recording joint_states, /tf and the camera (+ MP4): {mean["recording"]:.0f} '
          f'steps/s / {mean["watched"]:.0f} with the camera only watched = '
          f'{r["recording_vs_watched"]:.2f} (goal >= {GOAL}); / {mean["plain"]:.0f} with '
          f'nothing watched = {r["recording_vs_plain"]:.2f} (that one renders no camera)')
    print('physics thread, steps per CPU second of it (what the rest of the process costs '
          'the stepping itself, which other processes\' load does not distort): '
          + ', '.join(f'{m} {v:.0f}' for m, v in cpu.items())
          + ''.join(f'; {m} / {base} = {cpu[m] / cpu[base]:.2f}'
                    for m, base in (('viewer', 'plain'), ('recording', 'watched'))
                    if m in cpu))
    print(f'MP4: {video["written"]} frames written / {video["in"]} published while recording '
          f'= {r["video_ratio"]:.3f} (goal >= {VIDEO_GOAL})')
    if args.json:
        print(json.dumps(r))
    return 0


if __name__ == '__main__':
    sys.exit(main())
