"""MP4s of chosen episodes, rendered after the evaluation from the physics rows it kept.

Why afterwards and not while stepping: rendering costs tens of milliseconds a frame on a
software GL (Mesa llvmpipe), a thousand times a pool step per environment, so the evaluation
keeps only each recorded episode's ``mjSTATE_FULLPHYSICS`` rows (a few hundred bytes a control
step) and replays them here into one MjData, one frame per control step, at the control rate.
Frames are encoded by ``record.video.VideoRecorder`` (PyAV; H.264 where the wheel has it).
"""

import os
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError
from ..pool.layout import FULLPHYSICS

if TYPE_CHECKING:     # the hints only
    from .evaluate import EvaluationReport
    from .task import Task


def render_episode(task: 'Task', states: np.ndarray, path: str) -> str:
    """Write ``states`` (T, state_size) of ``task`` as an MP4 at the control rate."""
    from ..render.gl import ensure_headless_gl
    ensure_headless_gl()
    import mujoco

    from ..record.video import VideoRecorder
    m = task.model
    opts = task.spec.video
    width, height = opts.get('width', 480), opts.get('height', 360)
    width = min(width, m.vis.global_.offwidth)
    height = min(height, m.vis.global_.offheight)
    try:
        renderer = mujoco.Renderer(m, height, width)
    except Exception as err:  # noqa: BLE001 - no GL here: say how to get one
        from ..render.gl import INSTALL_HINT
        raise ConfigError(f'cannot render video: {err}; {INSTALL_HINT}',
                          where='video') from None
    cam = _camera(task)
    d = mujoco.MjData(m)
    rec = VideoRecorder(path, width, height, 1.0 / task.control_dt, max_queue=len(states) + 1)
    try:
        for row in states:
            mujoco.mj_setState(m, d, row, FULLPHYSICS)
            mujoco.mj_forward(m, d)
            renderer.update_scene(d, cam)
            renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
            renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
            rec.offer(renderer.render())
    finally:
        rec.close()
        renderer.close()
    if rec.error:
        raise ConfigError(rec.error, where='video')
    return path


def _camera(task):
    """The task's named camera, a camera tracking ``video.track``, or MuJoCo's free camera."""
    import mujoco
    m = task.model
    opts = task.spec.video
    if opts.get('camera'):
        cid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, opts['camera'])
        if cid < 0:
            raise ConfigError(f'the model has no camera {opts["camera"]!r}',
                              where=f'{task.name}: video.camera')
        return cid
    cam = mujoco.MjvCamera()
    mujoco.mjv_defaultFreeCamera(m, cam)
    if opts.get('track'):
        bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, opts['track'])
        if bid < 0:
            raise ConfigError(f'the model has no body {opts["track"]!r}',
                              where=f'{task.name}: video.track')
        cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        cam.trackbodyid = bid
        cam.distance, cam.elevation, cam.azimuth = 1.6, -20.0, 135.0
    return cam


def write_videos(task: 'Task', report: 'EvaluationReport', directory: str) -> dict[int, str]:
    """One ``episode_<k>.mp4`` per recorded episode of ``report`` into ``directory``."""
    os.makedirs(directory, exist_ok=True)
    out = {}
    for episode, states in sorted(report.states.items()):
        out[episode] = render_episode(task, states, os.path.join(
            directory, f'{task.name}_episode_{episode}.mp4'))
    report.videos.update(out)
    return out
