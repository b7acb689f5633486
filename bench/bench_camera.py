"""Camera frame rate: CameraRenderer against a bare mujoco.Renderer doing the same work.

    python bench/bench_camera.py [--quick]

The bare loop is what a hand-written node would do: ``mujoco.Renderer`` on a model copy with
``offsamples=0``, shadows and reflections off (CameraRenderer's fast mode), ``update_scene``,
``render``, RGB->BGR and the same PNG parameters. The ratio (goal >= 0.9) therefore measures
only CameraRenderer's overhead: input checks, the hand-off to its GL thread, the lock.
Frames alternate between the two (order swapped every frame) so that load from other
processes on a shared machine hits both alike; each side reports its best round.

Models: the built-in bench arm (camera ``overhead``) and Menagerie's Panda scene, which has
no camera, so one is added with MjSpec looking at the arm from the front-right: a named
fixed camera is what a real deployment configures, and the default free camera (id -1)
would frame the whole floor rather than the robot.
"""

import argparse
import copy
import importlib.util
import os
import sys
import time

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from mujoco_hal_ros.render import gl  # noqa: E402

gl.ensure_headless_gl()

import cv2  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from mujoco_hal_ros.menagerie import bench_arm_path, model_path  # noqa: E402
from mujoco_hal_ros.render.camera import CameraRenderer, PNG_PARAMS  # noqa: E402

WIDTH, HEIGHT = 640, 480
GOAL = 0.9


def look_at(pos, target):
    """MJCF ``xyaxes`` of a camera at ``pos`` looking at ``target`` with world z up."""
    forward = np.asarray(target, float) - np.asarray(pos, float)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    return list(right) + list(up)


def load_bench_arm():
    m = mujoco.MjModel.from_xml_path(bench_arm_path())
    return 'bench_arm', m, 'overhead'


def load_panda():
    path = model_path('panda')
    if path is None:
        return None
    spec = mujoco.MjSpec.from_file(path)
    pos, target = [1.3, 0.9, 1.0], [0.2, 0.0, 0.4]
    spec.worldbody.add_camera(name='bench_cam', pos=pos, xyaxes=look_at(pos, target), fovy=50)
    return 'panda', spec.compile(), 'bench_cam'


def make_data(m):
    d = mujoco.MjData(m)
    if m.nkey:
        mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    return d


def bare_renderer(m):
    """The hand-written equivalent of CameraRenderer(fast=True)."""
    private = copy.copy(m)
    private.vis.quality.offsamples = 0
    private.vis.global_.offwidth = max(private.vis.global_.offwidth, WIDTH)
    private.vis.global_.offheight = max(private.vis.global_.offheight, HEIGHT)
    r = mujoco.Renderer(private, HEIGHT, WIDTH)
    r.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
    r.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
    return r


def wiggle(m, d, i):
    """Move the first joints a little each frame so every frame needs a fresh scene."""
    n = min(m.nq, 4)
    d.qpos[:n] += 0.002 * (1 if i % 2 else -1)
    mujoco.mj_kinematics(m, d)
    mujoco.mj_camlight(m, d)


def race(fn_bare, fn_ours, frames, m, d):
    """Frames/s of both, interleaved frame by frame (order alternating) so load drift cancels."""
    spent = [0.0, 0.0]
    pair = ((0, fn_bare), (1, fn_ours))
    for i in range(frames):
        wiggle(m, d, i)
        for side, fn in (pair if i % 2 else pair[::-1]):
            start = time.perf_counter()
            fn()
            spent[side] += time.perf_counter() - start
    return frames / spent[1], frames / spent[0]


def bench_model(name, m, cam_name, frames, rounds):
    d = make_data(m)
    bare = bare_renderer(m)
    ours = CameraRenderer(m, cam_name, WIDTH, HEIGHT, depth=True)

    def bare_rgb():
        bare.update_scene(d, cam_name)
        return bare.render()

    def bare_png():
        ok, buf = cv2.imencode('.png', cv2.cvtColor(bare_rgb(), cv2.COLOR_RGB2BGR), PNG_PARAMS)
        return buf.tobytes()

    def bare_depth():
        bare.enable_depth_rendering()
        try:
            bare.update_scene(d, cam_name)
            return bare.render()
        finally:
            bare.disable_depth_rendering()

    cases = {
        'png': (bare_png, lambda: ours.render_png(d)),
        'rgb': (bare_rgb, lambda: ours.render_rgb(d)),
        'depth': (bare_depth, lambda: ours.render_depth(d)),
    }
    try:
        # Same pixels from both, and warm-up (first frames compile shaders, fill caches).
        assert np.array_equal(bare_rgb(), ours.render_rgb(d)), 'renderers disagree'
        png_kib = len(ours.render_png(d)) / 1024
        for fn_bare, fn_ours in cases.values():
            fn_bare()
            fn_ours()
        rows = []
        for case, (fn_bare, fn_ours) in cases.items():
            best_bare = best_ours = 0.0
            for _ in range(rounds):
                fps_ours, fps_bare = race(fn_bare, fn_ours, frames, m, d)
                best_bare = max(best_bare, fps_bare)
                best_ours = max(best_ours, fps_ours)
            rows.append((name, case, best_ours, best_bare, best_ours / best_bare))
        return rows, png_kib
    finally:
        ours.close()
        bare.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true', help='fewer frames (a smoke run)')
    args = parser.parse_args(argv)
    frames, rounds = (10, 2) if args.quick else (40, 3)

    problem = gl.probe()
    if problem is not None:
        print(f'cannot render: {problem}')
        return 2
    print(f'{WIDTH}x{HEIGHT}, MUJOCO_GL={os.environ.get("MUJOCO_GL")}, {frames} frames x '
          f'{rounds} rounds per side, best round; mujoco {mujoco.__version__}, '
          f'OpenCV {cv2.__version__}')
    print(f'{"model":<10} {"stream":<6} {"CameraRenderer fps":>19} {"bare fps":>9} '
          f'{"ratio":>6}')
    below = []
    for loader in (load_bench_arm, load_panda):
        loaded = loader()
        if loaded is None:
            print(f'{loader.__name__[5:]}: model not installed, skipped')
            continue
        rows, png_kib = bench_model(*loaded, frames, rounds)
        for name, case, fps_ours, fps_bare, ratio in rows:
            print(f'{name:<10} {case:<6} {fps_ours:>19.1f} {fps_bare:>9.1f} {ratio:>6.2f}')
            if case == 'png' and ratio < GOAL:
                below.append(f'{name} png {ratio:.2f}')
        print(f'{loaded[0]:<10} PNG frame {png_kib:.0f} KiB')
    verdict = 'OK' if not below else 'BELOW GOAL: ' + ', '.join(below)
    print(f'png ratio goal >= {GOAL}: {verdict}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
