"""Rendered bench-arm episodes and a dataset written from them, for the dataset tests.

The bench arm follows sine setpoints from its home keyframe, stepped 20 physics steps a
frame (25 frames a simulated second); its overhead camera is rendered headless at two
sizes, as two dataset cameras. ``render_run`` gives the frames exactly as they were
handed to the writer, so a test can compare what it reads back with what went in.
"""

import copy

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.dataset import DatasetWriter, features_for
from mujoco_hal_ros.menagerie import bench_arm_path
from mujoco_hal_ros.render import gl
from mujoco_hal_ros.render.camera import CameraRenderer

GL_PROBLEM = gl.probe()
REPO_ID = 'mujoco_hal_ros/bench_reach'
FPS = 25
STEPS_PER_FRAME = 20                 # 0.002 s timestep: 25 frames a simulated second
CAMERAS = {'overhead': (96, 128), 'overhead_wide': (120, 160)}
LENGTHS = (14, 9, 17)
TASKS = ('reach left', 'reach right', 'reach left')
JOINTS = ['pan', 'lift', 'elbow', 'wrist']
# AV1 at LeRobot's settings (crf 30) on these renders: 1.8 grey levels mean absolute error,
# 2.6 the worst frame; a frame's error may not exceed this (a shifted or wrong frame does,
# on the pixels that moved: the tests check those apart)
CODEC_ERROR = 4.0


def render_run():
    """Episodes of the bench arm following sine setpoints: frames and the rendered images."""
    if GL_PROBLEM is not None:
        pytest.skip(f'no headless GL: {GL_PROBLEM}')
    model = mujoco.MjModel.from_xml_path(bench_arm_path())
    data = mujoco.MjData(model)
    low, high = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    renderers = {name: CameraRenderer(model, 'overhead', w, h)
                 for name, (h, w) in CAMERAS.items()}
    episodes = []
    try:
        for e, length in enumerate(LENGTHS):
            mujoco.mj_resetDataKeyframe(model, data, 0)
            mujoco.mj_forward(model, data)
            start = data.ctrl.copy()
            frames = []
            for i in range(length):
                t = i / FPS
                side = 1 if TASKS[e] == 'reach left' else -1
                goal = start + np.array([side * 0.9 * np.sin(2.0 * t), 0.3 * np.sin(3.0 * t),
                                         -0.4 * np.sin(2.5 * t), 0.5 * np.sin(4.0 * t)])
                action = np.clip(goal, low, high)
                state = np.concatenate([data.qpos[:4], data.qvel[:4]])
                images = {name: r.render_rgb(data) for name, r in renderers.items()}
                frames.append({'observation.state': state, 'action': action,
                               **{f'observation.images.{n}': im for n, im in images.items()}})
                data.ctrl[:] = action
                mujoco.mj_step(model, data, nstep=STEPS_PER_FRAME)
            episodes.append(frames)
    finally:
        for r in renderers.values():
            r.close()
    return episodes


def write(root, episodes, first=0):
    features = features_for(JOINTS, JOINTS, CAMERAS, velocity_names=JOINTS)
    with DatasetWriter(root, repo_id=REPO_ID, fps=FPS,
                       features=features, robot_type='bench_arm') as writer:
        for e, frames in enumerate(episodes):
            for frame in frames:
                writer.add_frame(frame)
            assert writer.status.frames == len(frames)
            index = writer.save_episode(TASKS[(first + e) % len(TASKS)], extra={
                'success': e % 2 == 0, 'failure': '' if e % 2 == 0 else 'timeout',
                'sim.initial_state': [float(e), 0.5, -1.0]})
            assert index == first + e
        return writer.finalize()


CRASH_WRITER = """
import os, sys
import numpy as np
from mujoco_hal_ros.dataset import DatasetWriter, features_for
rng = np.random.default_rng(3)
f = features_for(['a', 'b'], ['a', 'b'], {'cam': (32, 48)})
w = DatasetWriter(sys.argv[1], repo_id='t/crash', fps=10, features=f)
for episode in range(3):
    for i in range(6):
        w.add_frame({'observation.state': rng.normal(size=2), 'action': rng.normal(size=2),
                     'observation.images.cam': rng.integers(0, 255, (32, 48, 3), np.uint8)})
    if episode < 2:
        w.save_episode('task')
os._exit(3)        # killed mid-episode: no save, no finalize, no close
"""
"""A process writing two whole episodes and part of a third, then killed: what a crash
leaves (``python -c CRASH_WRITER FOLDER``)."""


def fast_render(model: mujoco.MjModel, camera: str, width: int, height: int, *,
                qpos: np.ndarray | None = None, row: np.ndarray | None = None) -> np.ndarray:
    """An independent render (a plain ``mujoco.Renderer``) at ``qpos`` or at an
    ``mjSTATE_INTEGRATION`` ``row``, with the fast settings the pool and the cameras use (no
    multisampling, shadows or reflections)."""
    private = copy.copy(model)
    private.vis.quality.offsamples = 0
    d = mujoco.MjData(private)
    if row is not None:
        mujoco.mj_setState(private, d, row, mujoco.mjtState.mjSTATE_INTEGRATION)
    if qpos is not None:
        d.qpos[:] = qpos
    mujoco.mj_forward(private, d)
    r = mujoco.Renderer(private, height, width)
    try:
        r.update_scene(d, camera=camera)
        r.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
        r.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        return r.render().copy()
    finally:
        r.close()
