"""Episodes of an evaluation (policy rollouts or a scripted expert) into a LeRobot dataset.

Why frames are buffered per episode and written in episode order: the pool runs several
episodes at once and restarts an environment as soon as its episode ends, so frames of
different episodes arrive interleaved, while the writer (``dataset.DatasetWriter``) takes one
episode at a time. Episode ``k`` of the evaluation becomes dataset episode ``k`` whatever the
number of environments; memory holds at most the episodes still running plus finished ones
waiting for an earlier one (about ``envs`` episodes).

A frame is one control step: ``observation.state`` (hinge and slide joint positions, then
their velocities as ``<joint>.vel``) at the step's start, the images rendered there on the
pool's threads,
and ``action``, the controls the step then applied, in actuator order, named as a
device made from the model names its goal channels (``<actuator>_goal``). The controls are
rounded to float32 before they are applied, so the stored action is exactly what ran and an
episode replays from its stored start (``sim.start_state``, ``mjSTATE_INTEGRATION``) and actions
bit for bit. ``observation.environment_state`` (LeRobot's name for object state) holds the
free bodies' poses. Each episode's metadata holds the evaluation's verdict (``success``,
``failure``, ``episode_return``, ``steps``, ``ended_by``) and its draw (``seed``,
``evaluation_episode``, ``command``, ``randomization``), so a rollout set can be filtered or
used for offline RL, and replayed.
"""

from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
import json
import math
import os
import queue
import threading
from typing import Any

import mujoco
import numpy as np

from .. import joint_view
from ..errors import InvalidArgument


def check_folder(folder: Any) -> str:
    if isinstance(folder, os.PathLike):
        folder = os.fspath(folder)
    if not isinstance(folder, str) or not folder.strip() or '\x00' in folder:
        raise InvalidArgument(f'dataset folder {folder!r} is not a path', where='dataset',
                              allowed='a folder path (new, or empty)')
    return folder


def check_fps(fps: Any, control_hz: float) -> float:
    """The dataset's fps: the task's control rate, one frame a control step."""
    if fps is None:
        return control_hz
    if isinstance(fps, bool) or not isinstance(fps, (int, float, np.number)) or \
            not math.isfinite(float(fps)) or float(fps) <= 0:
        raise InvalidArgument(f'fps {fps!r} is not a positive number', where='fps',
                              allowed=f'{control_hz:g} (the task\'s control rate)')
    if abs(float(fps) - control_hz) > 1e-9 * control_hz:
        raise InvalidArgument(f'fps {fps!r} differs from the task\'s control rate '
                              f'{control_hz:g} Hz: every control step is a frame, so the '
                              'actions replay', where='fps',
                              allowed=f'{control_hz:g} or none')
    return control_hz


def default_cameras(task: Any) -> list[str]:
    """The camera the task names (``video.camera``), or none."""
    cam = task.spec.video.get('camera')
    return [cam] if cam else []


def check_cameras(cameras: Any, model: mujoco.MjModel) -> list[str]:
    from ..pool.render import camera_id
    if isinstance(cameras, (str, bytes)) or not isinstance(cameras, Sequence):
        raise InvalidArgument(f'cameras {cameras!r} is not a list of names', where='cameras',
                              allowed='a list of the model\'s camera names')
    out = []
    for c in cameras:
        if not isinstance(c, str):
            raise InvalidArgument(f'camera {c!r} is not a name', where='cameras',
                                  allowed='camera names')
        camera_id(model, c)
        if c in out:
            raise InvalidArgument(f'camera {c!r} is listed twice', where='cameras',
                                  allowed='each camera once')
        out.append(c)
    return out


def state_names(model: mujoco.MjModel) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Names, qpos and dof addresses of the hinge and slide joints, in model order."""
    moving = joint_view.view(model).moving()
    return list(moving.names), moving.qpos, moving.dofs


def action_names(model: mujoco.MjModel) -> list[str]:
    """The action columns' names: the goal channel a device made from this model gives each
    actuator (``config.channels``: ``<actuator>_goal``, or ``<joint>_goal`` for an unnamed
    actuator on a joint), so ``dataset.replay.replay_episode`` finds them on that device."""
    out = []
    for a in range(model.nu):
        name = model.actuator(a).name
        if not name and int(model.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT):
            name = model.joint(int(model.actuator_trnid[a, 0])).name
        out.append(f'{name}_goal' if name else f'actuator{a}')
    if len(set(out)) != len(out):
        out = [f'actuator{a}' for a in range(model.nu)]
    return out


def environment_names(model: mujoco.MjModel) -> tuple[list[str], np.ndarray]:
    """Names and qpos columns of free bodies' poses (x, y, z, qw, qx, qy, qz each)."""
    names, cols = [], []
    for jt in joint_view.view(model).of_kind(joint_view.FREE):
        body = model.body(jt.body).name or f'body{jt.id}'
        names += [f'{body}.{a}' for a in ('x', 'y', 'z', 'qw', 'qx', 'qy', 'qz')]
        cols += list(range(jt.qposadr, jt.qposadr + 7))
    return names, np.asarray(cols, dtype=np.intp)


def episode_extra(result: Any, start_row: np.ndarray, draw: Any, seed: int, policy: str,
                  decimation: int, timestep: float) -> dict:
    """Per-episode metadata: the verdict, and what replays it (start row, draw). The
    ``sim.*`` columns are the ones the device recorder writes (``dataset.recorder``), so
    ``dataset.replay.replay_episode`` reads these episodes' start state and frame times."""
    patch = {} if draw.patch is None else {k: np.asarray(v).tolist()
                                           for k, v in draw.patch.items()}
    return {'success': bool(result.success), 'failure': result.failure or '',
            'episode_return': float(result.episode_return), 'steps': int(result.steps),
            'ended_by': result.ended_by, 'evaluation_episode': int(result.episode),
            'seed': int(seed), 'policy': policy, 'sim.decimation': int(decimation),
            'sim.timestep': float(timestep),
            'sim.start_time': float(start_row[0]),       # mjSTATE_TIME leads the row
            'sim.frame_times': [float(start_row[0]) + k * decimation * timestep
                                for k in range(int(result.steps))],
            'sim.start_state': [float(x) for x in start_row],
            'command': [float(x) for x in draw.command],
            'randomization': json.dumps(patch)}


RENDER_AHEAD = 4
"""Render jobs left running at most: how many control steps the evaluation may run ahead of
its images (each job holds one step's images of every environment)."""


class _Pending:
    """One image of a render job that may still be running."""

    __slots__ = ('job', 'camera', 'env')

    def __init__(self, job: 'Future[np.ndarray]', camera: int, env: int) -> None:
        self.job, self.camera, self.env = job, camera, env

    def get(self) -> np.ndarray:
        return self.job.result()[self.camera, self.env]


class RolloutRecorder:
    """Collects an evaluation's frames per episode and writes them in episode order.

    Every argument is checked and the writer created (which refuses a folder that is
    neither new, empty nor a dataset; a dataset is appended to) before the evaluation steps
    anything.
    """

    def __init__(self, task: Any, folder: Any, *, cameras: Sequence[str] | None = None,
                 fps: Any = None, repo_id: str | None = None, task_text: str | None = None,
                 width: int | None = None, height: int | None = None, seed: int = 0,
                 policy: str = 'policy') -> None:
        from ..pool.render import check_size
        from . import DatasetWriter, features_for
        model = task.model
        self.folder = check_folder(folder)
        self.fps = check_fps(fps, 1.0 / task.control_dt)
        self.cameras = check_cameras(default_cameras(task) if cameras is None else cameras,
                                     model)
        video = task.spec.video
        self.width, self.height = check_size(video.get('width', 480) if width is None
                                             else width,
                                             video.get('height', 360) if height is None
                                             else height)
        if task_text is not None and (not isinstance(task_text, str) or not task_text):
            raise InvalidArgument(f'task text {task_text!r} is not a non-empty string',
                                  where='task_text', allowed='a sentence')
        self.task_text = task_text or task.name
        self.seed, self.policy, self.decimation = seed, policy, task.decimation
        self.timestep = float(model.opt.timestep)
        names, self._qadr, self._dadr = state_names(model)
        env_names, self._env_cols = environment_names(model)
        actions = action_names(model)
        features = features_for(names, actions,
                                {c: (self.height, self.width) for c in self.cameras},
                                velocity_names=names)
        if env_names:
            features['observation.environment_state'] = {
                'dtype': 'float32', 'shape': (len(env_names),), 'names': env_names}
        self._writer = DatasetWriter(self.folder, repo_id=repo_id or f'local/{task.name}',
                                     fps=self.fps, features=features,
                                     robot_type=os.path.splitext(
                                         os.path.basename(task.model_path))[0],
                                     use_videos=bool(self.cameras))
        self._frames: dict[int, list[dict]] = {}
        self._jobs: deque[Future] = deque()     # render jobs perhaps still running
        self._start: dict[int, tuple] = {}
        self._done: dict[int, Any] = {}
        self._next = 0                  # the next episode to write
        self.written = 0
        # Finished episodes are encoded and saved on a writer thread of their own, in
        # episode order, while the pool steps the next ones: encoding on the evaluation's
        # thread left the pool's workers idle for the length of every save.
        self._todo: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def begin(self, episodes: np.ndarray, rows: np.ndarray, draws: list) -> None:
        """Episodes start from ``rows`` (``mjSTATE_INTEGRATION``) with ``draws``."""
        for e, row, draw in zip(np.asarray(episodes).tolist(), rows, draws, strict=True):
            self._frames[e] = []
            self._start[e] = (row.copy(), draw)

    def frames(self, episodes: np.ndarray, qpos: np.ndarray, qvel: np.ndarray,
               ctrl: np.ndarray, images: 'np.ndarray | Future[np.ndarray] | None') -> None:
        """One frame per listed episode: state at the step's start, then its controls.

        ``images`` may be a render job still running (``EnvPool.render_async``): the
        frames keep it and the writer thread takes its images. At most ``RENDER_AHEAD`` jobs
        are left running; past that this waits for the oldest (and raises its error)."""
        if isinstance(images, Future):
            self._jobs.append(images)
            while len(self._jobs) > RENDER_AHEAD:
                self._jobs.popleft().result()
        for p, e in enumerate(np.asarray(episodes).tolist()):
            state = np.concatenate([qpos[p, self._qadr], qvel[p, self._dadr]])
            frame = {'observation.state': state.astype(np.float32),
                     'action': ctrl[p].astype(np.float32)}
            if len(self._env_cols):
                frame['observation.environment_state'] = \
                    qpos[p, self._env_cols].astype(np.float32)
            if images is not None:
                for k, cam in enumerate(self.cameras):
                    frame[f'observation.images.{cam}'] = images[k, p] if not \
                        isinstance(images, Future) else _Pending(images, k, p)
            self._frames[e].append(frame)

    def end(self, result: Any) -> None:
        """Episode ``result.episode`` finished: hand it, and any that waited for it, to
        the writer thread (a failure of an earlier save is raised here)."""
        self._raise()
        self._done[result.episode] = result
        while self._next in self._done:
            e = self._next
            res = self._done.pop(e)
            row, draw = self._start.pop(e)
            if self._thread is None:
                self._thread = threading.Thread(target=self._write_loop, daemon=True,
                                                name='dataset-writer')
                self._thread.start()
            self._todo.put((self._frames.pop(e), res, row, draw))
            self._next += 1

    def _write_loop(self) -> None:
        while (item := self._todo.get()) is not None:
            if self._error is not None:
                continue                       # drain: the dataset ends incomplete
            frames, res, row, draw = item
            try:
                for k, frame in enumerate(frames):
                    self._writer.add_frame({key: v.get() if isinstance(v, _Pending) else v
                                            for key, v in frame.items()},
                                           timestamp=k / self.fps)
                self._writer.save_episode(self.task_text, extra=episode_extra(
                    res, row, draw, self.seed, self.policy, self.decimation, self.timestep))
                self.written += 1
            except BaseException as exc:  # noqa: BLE001 - raised on the evaluation's thread
                self._error = exc

    def _join(self) -> None:
        if self._thread is not None:
            self._todo.put(None)
            self._thread.join()
            self._thread = None

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def finish(self) -> str | None:
        """Finalise the dataset with the episodes written; episodes still running, and
        finished ones after the first of them (a stopped evaluation), are dropped. None when
        no episode was written (the writer then removes a folder it made)."""
        self._frames.clear()
        self._join()
        if self._error is not None:
            self._writer.close()               # incomplete, as the failure left it
            self._raise()
        if not self.written:
            self._writer.close()
            return None
        self._writer.finalize()
        self._writer.close()
        return self.folder

    def abort(self) -> None:
        """An error ended the evaluation: close without finalising (the writer marks the
        dataset incomplete)."""
        self._frames.clear()
        self._join()
        self._writer.close()
