"""Recording a device to a LeRobot dataset: frames sampled on simulation time.

Why snapshots and simulation time: a frame's state, action and images must belong to one
instant, and only the stepper's ``Snapshot`` (copied after each chunk of steps, never written
again) holds a consistent state. The recorder follows every chunk (``device.on_every_chunk``)
and takes, for frame ``k`` of an episode, the first snapshot at or after ``t0 + k / fps`` of
simulated time (``t0``: the episode's first frame). Real time or lockstep, a slow or a fast
machine: the frames are the same instants of the simulation.

What a frame holds, all from that one snapshot:

- ``observation.state``: the robot's hinge and slide joint positions (native units: radians,
  metres), then with ``velocities=True`` their velocities, named ``<joint>`` and
  ``<joint>.vel``;
- ``action``: the commanded setpoint of each of the robot's goal channels (native units, the
  order of the dataset's ``names``), whatever drove it (goal topics, FollowJointTrajectory,
  move_to, run_policy, a gripper command): the stepper's ``setpoint``, where each actuator's
  path is at that instant, not its ``target`` (where the path ends). The setpoint is what the
  servo is told to hold now, what a real arm's position interface receives and a teleoperated
  leader arm gives; the target is a step function that says nothing of the motion in between,
  and replaying it would re-plan paths the recording never ran. The action of frame ``k`` is
  the setpoint of the first snapshot after frame ``k``'s: the command issued from that
  state on (the LeRobot convention: an observation and the action taken from it);
- ``observation.images.<camera>``: the camera rendered at that snapshot's state.

Nothing heavy runs on the physics thread: the chunk hook compares a time, slices two small
arrays and puts a reference to the (immutable) snapshot on a bounded queue; rendering and
encoding run on the recorder's own worker thread, behind a backlog bounded by memory
(``BACKLOG_BYTES`` of snapshots: a Panda's is about 1 kB), so a machine that renders
slower than ``fps`` still writes every frame and ``save_episode`` waits for the backlog. A
frame that finds even that full is dropped and counted (``status()['dropped']``, the
episode's ``frames_dropped`` metadata), never silently. A paused device stepped in lockstep
(``device.step``) waits for room instead of dropping (there is no real time to keep up
with), so a lockstep recording is complete.

For an exact lockstep replay (``dataset.replay``) each episode's metadata carries its start
state (``mj_getState(mjSTATE_INTEGRATION)`` at its first frame, taken on the physics thread)
and each frame's simulated time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
import math
import os
import queue
import shutil
import threading
from typing import Any

import mujoco
import numpy as np

from .. import errors
from ..checks import finite_number, is_bool
from ..config.channels import camera_size
from ..errors import DeviceError, InvalidArgument, UnknownName

INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION
MAX_FPS = 1000.0          # a frame a millisecond of simulated time at most
MIN_FREE_BYTES = 64 << 20  # a dataset is not started on a disk with less free
# MjData fields the stepper's drive laws read from the last step at a chunk's start (hold
# feed-forward, gain schedule, joint loops): a replay writes them back after the start state
# so that its first chunk computes what the recording's did, bit for bit.
DERIVED = ('qfrc_bias', 'qfrc_spring', 'qfrc_gravcomp', 'qM', 'M', 'qLD', 'qacc',
           'actuator_force', 'qfrc_actuator', 'qfrc_smooth', 'qacc_smooth')
RENDER_NICE = 10           # the recorder's thread's nice value (bench_dataset_record.py)
# Frames waiting for the renderer: a frame is a reference to an immutable snapshot (a few
# kB to tens of kB), so the backlog is bounded by memory, not by a small count: a machine that
# renders slower than ``fps`` keeps every frame (save_episode waits for the backlog) rather
# than write a dataset whose uniform timestamps skip instants. Only past the budget is a
# frame dropped (counted).
BACKLOG_BYTES = 256 << 20
MIN_BACKLOG_FRAMES = 16


def backlog_frames(snapshot: Any, budget: int = BACKLOG_BYTES) -> int:
    """How many frames of ``snapshot``'s size the backlog holds within ``budget`` bytes."""
    size = sum(v.nbytes for v in vars(snapshot).values() if isinstance(v, np.ndarray))
    return max(MIN_BACKLOG_FRAMES, int(budget // max(size, 1)))


LOCKSTEP_WAIT_S = 30.0     # a paused device's frame waits this long for room, then drops


# --- what is recorded --------------------------------------------------------------------
@dataclass
class RobotChannels:
    """The columns of one robot (or the whole device): joints for the state, goal channels
    (their actuators) for the action, in dataset order; ``prefix`` goes before each name."""

    joints: list[str]
    qpos: np.ndarray
    dofs: np.ndarray
    goals: list[str]
    actuators: np.ndarray
    prefix: str = ''

    @classmethod
    def of(cls, model: mujoco.MjModel, layout: Any, prefix: str = '') -> RobotChannels:
        joints, qpos, dofs = [], [], []
        for j, name in enumerate(layout.joints):
            if name and layout.joint_kind(j) is not None:
                joints.append(name)
                qpos.append(int(model.jnt_qposadr[j]))
                dofs.append(int(model.jnt_dofadr[j]))
        goals = list(layout.goals.values())
        return cls(joints, np.array(qpos, dtype=int), np.array(dofs, dtype=int),
                   [g.name for g in goals], np.array([g.actuator for g in goals], dtype=int),
                   prefix)


def resolve_robots(device: Any, robot: str | Sequence[str] | None) -> list[RobotChannels]:
    """The robots a dataset records: None (the device's own channels), a namespace (one robot
    of the world, its own names), or several namespaces (one dataset, names prefixed
    ``<namespace>/``). An unknown namespace is UNKNOWN_NAME."""
    model = device.model
    if robot is None or robot == '':
        return [RobotChannels.of(model, device.layout)]
    many = not isinstance(robot, str)
    names = list(robot) if many else [robot]
    if not names:
        raise InvalidArgument('name at least one robot, or none for the whole device',
                              where='robot')
    out = []
    known = device.robots.names() if hasattr(device, 'robots') else []
    for ns in names:
        if not isinstance(ns, str) or ns not in known:
            raise UnknownName('robot', ns, known, where='robot')
        view = device.robots.get(ns)
        out.append(RobotChannels.of(model, view.layout, f'{ns}/' if many else ''))
    if len({ns for ns in names}) != len(names):
        raise InvalidArgument('a robot is named twice', where='robot')
    return out


def check_fps(fps: Any) -> float:
    """A frame rate: a finite real above zero, at most MAX_FPS (INVALID_ARGUMENT)."""
    value = finite_number(fps, 'fps')          # no bool, NaN, inf, text, 10**400
    if not 0 < value <= MAX_FPS:
        raise InvalidArgument(f'fps must be above 0 and at most {MAX_FPS:g}, got {value!r}',
                              where='fps', allowed=f'a number above 0, at most {MAX_FPS:g}')
    return value


def check_folder(root: Any, min_free_bytes: int = MIN_FREE_BYTES) -> str:
    """The dataset folder: new, empty, or a dataset already (the writer then adds episodes
    to it if its features and fps are the same, else refuses). An existing folder with
    anything else in it is refused (INVALID_ARGUMENT): never mixed with a dataset. Too little
    free disk is LIMIT_EXCEEDED."""
    if not isinstance(root, (str, os.PathLike)) or not os.fspath(root):
        raise InvalidArgument(f'expected a folder path, got {errors.shorten(root)}',
                              where='folder')
    root = os.path.abspath(os.fspath(root))
    if os.path.exists(root):
        if not os.path.isdir(root):
            raise InvalidArgument(f'{root} exists and is not a folder', where='folder',
                                  allowed='a new or empty folder')
        if os.listdir(root) and not os.path.exists(os.path.join(root, 'meta', 'info.json')):
            raise InvalidArgument(f'{root} already holds files that are not a dataset; '
                                  'nothing was changed', where='folder',
                                  allowed='a new or empty folder, or a dataset to add to')
    parent = root
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.access(parent, os.W_OK):
        raise InvalidArgument(f'{parent} is not writable', where='folder')
    free = shutil.disk_usage(parent).free
    if free < min_free_bytes:
        raise errors.LimitExceeded(
            f'{free >> 20} MB free under {parent}; a dataset needs at least '
            f'{min_free_bytes >> 20} MB: free some space or pick another disk; nothing was '
            'written', where='folder')
    return root


def check_cameras(device: Any, cameras: Any, size: Any = None) -> dict[str, tuple[int, int]]:
    """{camera: (width, height)}: cameras of the model (or image channels), each at ``size``
    or its channel's own size. An unknown camera is UNKNOWN_NAME."""
    if cameras is None:
        return {}
    if isinstance(cameras, str):
        cameras = [cameras]
    if isinstance(cameras, Mapping):
        items = list(cameras.items())
    else:
        items = [(c, size) for c in cameras]
    model_cams = [mujoco.mj_id2name(device.model, mujoco.mjtObj.mjOBJ_CAMERA, i) or ''
                  for i in range(device.model.ncam)]
    channels = [i.name for i in device.layout.images]
    known = sorted({c for c in model_cams + channels if c})
    out: dict[str, tuple[int, int]] = {}
    for cam, wh in items:
        if not isinstance(cam, str) or cam not in known:
            raise UnknownName('camera', cam, known, where='cameras')
        if cam in out:
            raise InvalidArgument(f'camera {cam!r} named twice', where='cameras')
        w = h = None
        if wh is not None:
            def bad(v: Any) -> bool:
                return is_bool(v) or not isinstance(v, (int, np.integer)) \
                    or not 16 <= v <= 2048
            if not isinstance(wh, (tuple, list)) or len(wh) != 2 or any(bad(v) for v in wh):
                raise InvalidArgument(f'expected (width, height) in 16..2048, got '
                                      f'{errors.shorten(wh)}', where=f'cameras.{cam}')
            w, h = int(wh[0]), int(wh[1])
        if w is None and cam not in channels:     # the camera's own resolution, if any
            w, h = camera_size(device.model, model_cams.index(cam))
        _, w, h = device.cameras.image_size(cam, w, h)
        out[cam] = (int(w), int(h))
    return out


# --- the episode being sampled ---------------------------------------------------------
@dataclass
class _Episode:
    serial: int
    t0: float | None = None          # simulated time of its first frame
    next_tick: int = 0               # the frame index whose instant comes next
    pending: Any = None              # (snapshot, tick) waiting for the next one's setpoint
    start_state: np.ndarray | None = None
    start_derived: dict | None = None
    dropped: int = 0                 # frames that found the queue full
    skipped: int = 0                 # frame instants no snapshot fell in (a chunk > a frame)
    sampled: int = 0


@dataclass
class _Work:
    """What the worker writes of an episode."""

    frames: int = 0
    sim_times: list[float] = field(default_factory=list)


class DatasetRecorder:
    """Record ``device`` to a new LeRobot dataset in ``root`` until ``stop()``.

    Recording starts at once: the first episode begins with the next chunk of steps. Mark
    its end with ``save_episode()`` (written, with ``task`` and any extra metadata) or
    ``discard_episode()`` (dropped); the next begins at once. ``stop()`` discards the episode
    in progress (an interrupted episode is never written as if complete) and finalises the
    dataset. Every refusal (INVALID_ARGUMENT, UNKNOWN_NAME, LIMIT_EXCEEDED) comes before anything
    is written or hooked.

    ``follow_chunks=False``: no chunk hook; the caller feeds snapshots with ``offer`` (a
    runner that steps the physics itself, such as a lockstep ``run_policy``).
    """

    def __init__(self, device: Any, root: str | os.PathLike, *, repo_id: str, fps: float,
                 task: str = '', cameras: Any = None, image_size: tuple[int, int] | None = None,
                 robot: str | Sequence[str] | None = None, velocities: bool = False,
                 robot_type: str = '', use_videos: bool = True, follow_chunks: bool = True,
                 queue_frames: int | None = None, min_free_bytes: int = MIN_FREE_BYTES) -> None:
        from .layout import features_for
        from .writer import DatasetWriter
        if getattr(device, 'closed', False):
            raise errors.ClosedError('the device')
        self.fps = check_fps(fps)
        if not isinstance(repo_id, str) or not repo_id or len(repo_id) > 256:
            raise InvalidArgument(f'expected a repo id such as "user/name", got '
                                  f'{errors.shorten(repo_id)}', where='repo_id')
        if not isinstance(task, str):
            raise InvalidArgument(f'expected task text, got {errors.shorten(task)}', where='task')
        if not is_bool(velocities):
            raise InvalidArgument('velocities takes true or false', where='velocities')
        self.device = device
        self.robots = resolve_robots(device, robot)
        self.cameras = check_cameras(device, cameras, image_size)
        self.root = check_folder(root, min_free_bytes)
        # a folder this recorder makes (new, or empty) goes again if no episode is saved
        self._made = not os.path.isdir(self.root) or not os.listdir(self.root)
        self.repo_id, self.task, self.velocities = repo_id, task, bool(velocities)
        self.generation = device.snapshot.generation
        self.state_names = [r.prefix + j for r in self.robots for j in r.joints]
        self.velocity_names = list(self.state_names) if velocities else None
        self.action_names = [r.prefix + g for r in self.robots for g in r.goals]
        if not self.state_names and not self.action_names:
            raise InvalidArgument('the robot has neither joints nor goal channels to record',
                                  where='robot')
        self._qpos = np.concatenate([r.qpos for r in self.robots])
        self._dofs = np.concatenate([r.dofs for r in self.robots])
        self._acts = np.concatenate([r.actuators for r in self.robots])
        features = features_for(self.state_names, self.action_names,
                                {c: (h, w) for c, (w, h) in self.cameras.items()},
                                velocity_names=self.velocity_names)
        self._writer = DatasetWriter(self.root, repo_id=repo_id, fps=self.fps, features=features,
                                     robot_type=robot_type, use_videos=use_videos)
        self._model = device.model
        self._timestep = float(device.model.opt.timestep)
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        if queue_frames is None:
            queue_frames = backlog_frames(device.snapshot)
        self.queue_frames = max(1, int(queue_frames))
        self._room = threading.Semaphore(self.queue_frames)
        self._episode = _Episode(0)
        self._serial = 0
        self._saved = 0
        self._written = 0        # frames the worker handed to the writer in this episode
        self._dropped_total = 0
        self._skipped_total = 0
        self._other_model = 0    # snapshots of another scene generation, not recorded
        self._failure: DeviceError | None = None
        self._stopped = False
        self._closed = False
        self._work = _Work()
        self._work_serial = 0    # the episode the worker writes
        self._worker = threading.Thread(target=self._run, name='mujoco_hal_ros-dataset',
                                        daemon=True)
        self._worker.start()
        if self.cameras:
            # GL contexts and the first render (shaders compiled, meshes uploaded: seconds on
            # a software rasteriser) before the first frame, so that they never hold up a
            # frame nor land in the first episode's drops
            warm: Future = Future()
            self._queue.put(('warm', warm, None, None))
            try:
                warm.result(timeout=120.0)
            except BaseException:
                self.close()
                raise
        self._unhook = device.on_every_chunk(self._on_chunk) if follow_chunks else None

    # --- sampling (the physics thread, or the caller of offer) ----------------------------
    def _on_chunk(self, stepper: Any) -> None:
        self.offer(stepper.snapshot, stepper)

    def offer(self, snap: Any, stepper: Any = None) -> None:
        """Consider one snapshot for the frame grid (the chunk hook calls this for every
        chunk). ``stepper``: given on the physics thread, where the episode's start state is
        read (a runner that steps the device itself offers through the device's door:
        ``device.on_physics(lambda s: recorder.offer(s.snapshot, s))``)."""
        if self._stopped or self._failure is not None:
            return
        if snap.generation != self.generation:
            self._other_model += 1
            return
        with self._lock:            # frames and episode ends reach the worker in order
            ep = self._episode
            if ep.pending is not None:
                psnap, tick = ep.pending
                if snap.time <= psnap.time:
                    return                      # the same instant again
                ep.pending = None
                self._emit(ep, psnap, tick, snap.setpoint[self._acts].copy())
            if ep.t0 is None:
                ep.t0 = snap.time
                ep.start_state, ep.start_derived = self._start_state(snap, stepper)
            k = int(math.floor((snap.time - ep.t0) * self.fps + 1e-6))
            if k >= ep.next_tick:
                ep.skipped += k - ep.next_tick
                ep.pending = (snap, k)
                ep.next_tick = k + 1

    @staticmethod
    def _start_state(snap: Any, stepper: Any) -> tuple[np.ndarray | None, dict | None]:
        """The full integration state at ``snap`` (physics thread: ``stepper`` given) and the
        derived quantities the drive laws read at the next chunk's start (``DERIVED``: as of
        the last step, so not recomputable from the state alone), or (None, None) when they
        cannot be read exactly here (a replay then starts from the first frame's joint
        positions only and says so)."""
        if stepper is None or stepper.data.time != snap.time:
            return None, None
        m, d = stepper.model, stepper.data
        buf = np.empty(mujoco.mj_stateSize(m, INTEGRATION))
        mujoco.mj_getState(m, d, buf, INTEGRATION)
        return buf, {name: getattr(d, name).tolist() for name in DERIVED if hasattr(d, name)}

    def _emit(self, ep: _Episode, snap: Any, tick: int, action: np.ndarray) -> None:
        """Hand one frame to the worker, or count it dropped when the queue is full."""
        wait = LOCKSTEP_WAIT_S if snap.paused else 0.0
        if not self._room.acquire(timeout=wait) if wait else not self._room.acquire(False):
            ep.dropped += 1
            self._dropped_total += 1
            return
        ep.sampled += 1
        self._queue.put(('frame', ep.serial, snap, tick, action))

    # --- episode boundaries -----------------------------------------------------------------
    def _check_open(self, what: str) -> None:
        if self._closed or self._stopped:
            raise DeviceError(errors.INVALID_ARGUMENT, f'{what}: the dataset was stopped; start '
                              'a new one', where='dataset')
        if self._failure is not None:
            raise self._failure

    def _cut(self, kind: str, keep_pending: bool, meta_of: Any = None) -> Any:
        """End the episode being sampled (the next starts with the next snapshot) and hand
        ``kind`` (save, discard, stop) to the worker after its last frame; its answer."""
        done: Future = Future()
        with self._lock:
            ep = self._episode
            self._serial += 1
            self._episode = _Episode(self._serial)
            pending, ep.pending = ep.pending, None
            if keep_pending and pending is not None:
                psnap, tick = pending
                # no later snapshot: the command at the last frame is its own setpoint
                self._emit(ep, psnap, tick, psnap.setpoint[self._acts].copy())
            self._queue.put((kind, done, ep, meta_of(ep) if meta_of else None))
        return done.result()

    def save_episode(self, task: str | None = None, *, extra: Mapping[str, Any] | None = None
                     ) -> dict[str, Any]:
        """Write the episode in progress (its frames so far) with ``task`` (default: the
        dataset's) and ``extra`` metadata; the next episode starts at once. Returns
        {'episode', 'frames', 'dropped', 'skipped'}. An episode without frames is refused
        (INVALID_ARGUMENT) and recording goes on."""
        self._check_open('save_episode')
        task = self.task if task is None else task
        if not isinstance(task, str) or not task:
            raise InvalidArgument('an episode needs its task text (the dataset has none)',
                                  where='task')
        if extra is not None and not isinstance(extra, Mapping):
            raise InvalidArgument('extra takes a mapping of metadata', where='extra')

        def meta_of(ep: _Episode) -> dict:
            meta = {'sim.start_state': None if ep.start_state is None
                    else ep.start_state.tolist(),
                    'sim.start_time': ep.t0, 'sim.timestep': self._timestep,
                    'frames_dropped': ep.dropped, 'frames_skipped': ep.skipped}
            for name, values in (ep.start_derived or {}).items():
                meta[f'sim.derived.{name}'] = values
            meta.update(extra or {})
            return {'task': task, 'meta': meta}
        return self._cut('save', True, meta_of)

    def discard_episode(self) -> dict[str, Any]:
        """Drop the episode in progress; the next starts at once. {'frames': dropped count}."""
        self._check_open('discard_episode')
        return self._cut('discard', False)

    def stop(self) -> dict[str, Any]:
        """Discard the episode in progress, finalise the dataset and stop recording.
        {'folder', 'episodes', 'discarded_frames'}. With no episode saved, a folder the
        recorder made is removed (nothing is left that looks like a dataset). A second stop
        is INVALID_ARGUMENT."""
        if self._stopped:
            raise InvalidArgument('the dataset was already stopped', where='dataset')
        if self._unhook is not None:
            self._unhook()
        self._stopped = True
        out = self._cut('stop', False)
        self._worker.join(timeout=30.0)
        if self._failure is not None:
            raise self._failure
        return out

    def status(self) -> dict[str, Any]:
        """The dataset and the episode in progress: {'recording', 'folder', 'repo_id', 'fps',
        'episode' (its index), 'frames' (sampled so far), 'episodes' (saved), 'dropped',
        'skipped', 'other_model', 'error'}."""
        ep = self._episode
        return {'recording': not self._stopped and self._failure is None,
                'folder': self.root, 'repo_id': self.repo_id, 'fps': self.fps,
                'episode': self._saved, 'frames': ep.sampled + (ep.pending is not None),
                'written': self._work.frames,
                'episodes': self._saved, 'dropped': self._dropped_total,
                'skipped': self._skipped_total + ep.skipped, 'other_model': self._other_model,
                'cameras': dict(self.cameras), 'state_names': list(self.state_names),
                'action_names': list(self.action_names),
                'error': None if self._failure is None else str(self._failure)}

    # --- the worker: rendering and writing -------------------------------------------------
    def _run(self) -> None:
        # Recording yields the cores to the physics: this thread, and the GL and rasteriser
        # threads it starts (they inherit its nice value), run at a lower priority, so a
        # busy machine drops frames (counted) rather than slow the simulation.
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), RENDER_NICE)
        except (OSError, AttributeError):
            pass                           # not Linux, or not allowed: as it was
        renderers: dict = {}
        self._renderers = renderers
        while True:
            item = self._queue.get()
            kind = item[0]
            try:
                if kind == 'frame':
                    self._room.release()
                    if self._failure is None:
                        self._frame(item[1], item[2], item[3], item[4], renderers)
                    continue
                _, done, ep, arg = item
                if kind == 'warm':
                    snap = self.device.snapshot
                    for cam, (w, h) in self.cameras.items():
                        self._image(renderers, cam, w, h, snap)
                    done.set_result(True)
                elif kind == 'save':
                    done.set_result(self._save(ep, arg['task'], arg['meta']))
                elif kind == 'discard':
                    done.set_result(self._discard(ep))
                elif kind == 'stop':
                    out = self._discard(ep)
                    if self._failure is None and self._writer.episodes:
                        self._writer.finalize()
                    self._writer.close()
                    if not self._writer.episodes and self._made:
                        shutil.rmtree(self.root, ignore_errors=True)   # nothing was kept
                    done.set_result({'folder': self.root, 'episodes': self._saved,
                                     'discarded_frames': out['frames']})
                    return
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                self._failure = _as_device_error(exc, self.root)
                if kind != 'frame' and not item[1].done():
                    item[1].set_exception(self._failure)
                if kind == 'stop':
                    try:
                        self._writer.close()
                    except Exception:  # noqa: BLE001 - the first error is the one to report
                        pass
                    return

    def _frame(self, serial: int, snap: Any, tick: int, action: np.ndarray,
               renderers: dict) -> None:
        if serial != self._work_serial:
            return                             # an episode already ended (not expected)
        state = snap.qpos[self._qpos]
        if self.velocity_names is not None:      # positions, then <joint>.vel
            state = np.concatenate([state, snap.qvel[self._dofs]])
        frame: dict[str, np.ndarray] = {'observation.state': state.astype(np.float32),
                                        'action': action.astype(np.float32)}
        for cam, (w, h) in self.cameras.items():
            frame[f'observation.images.{cam}'] = self._image(renderers, cam, w, h, snap)
        # the format's clock is frame_index / fps; the simulated instant goes to the
        # episode's sim.frame_times (a frame instant no snapshot fell in is counted skipped)
        self._writer.add_frame(frame)
        self._work.frames += 1
        self._work.sim_times.append(float(snap.time))

    def _image(self, renderers: dict, cam: str, w: int, h: int, snap: Any) -> np.ndarray:
        """One camera at one snapshot's state (the device's renderer, its render MjData)."""
        key = (cam, w, h, snap.generation)
        r = renderers.get(key)
        if r is None:
            r = renderers[key] = self.device.cameras.renderer(
                cam, w, h, generation=snap.generation)
        with self.device.cameras.render_state(snap) as d:
            return r.render_rgb(d)

    def _save(self, ep: _Episode, task: str, meta: dict) -> dict[str, Any]:
        work, self._work = self._work, _Work()
        self._work_serial = ep.serial + 1
        if work.frames == 0:
            raise InvalidArgument('the episode has no frames yet (the simulation has not run '
                                  'since it started); nothing was written', where='save_episode')
        meta = dict(meta, **{'sim.frame_times': work.sim_times})
        index = self._writer.save_episode(task, extra=meta)
        self._saved += 1
        self._skipped_total += ep.skipped
        return {'episode': int(index), 'frames': work.frames, 'dropped': ep.dropped,
                'skipped': ep.skipped}

    def _discard(self, ep: _Episode) -> dict[str, Any]:
        work, self._work = self._work, _Work()
        self._work_serial = ep.serial + 1
        if work.frames:
            self._writer.discard_episode()
        return {'frames': work.frames}

    # --- lifetime ------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop (the episode in progress discarded, the dataset finalised) if still
        recording; a second close does nothing."""
        if self._closed:
            return
        try:
            if not self._stopped:
                self.stop()
        finally:
            self._closed = True

    def __enter__(self) -> DatasetRecorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _as_device_error(exc: BaseException, root: str) -> DeviceError:
    if isinstance(exc, DeviceError):
        return exc
    if isinstance(exc, OSError) and exc.errno in (28, 27, 122):   # ENOSPC, EFBIG, EDQUOT
        return errors.LimitExceeded(
            f'the disk under {root} is full: the episode in progress was not written and the '
            f'dataset is left incomplete (no finalised meta); free space and record again '
            f'({exc})', where='dataset')
    return DeviceError(errors.INTERNAL_ERROR, f'writing the dataset failed: '
                       f'{type(exc).__name__}: {exc}; the dataset is left incomplete',
                       where='dataset')
