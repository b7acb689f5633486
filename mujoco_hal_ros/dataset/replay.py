"""Replaying a dataset episode's actions on a device, frame by frame, against its states.

``replay_episode(device, root, episode, *, lockstep=True) -> ReplayReport`` is the stable
entry point (the pool's generators and ``evaluate_policy`` use it to check what they wrote).

How. The episode's start state (``sim.start_state`` in its metadata: ``mj_getState`` with
``mjSTATE_INTEGRATION`` at its first frame, which ``DatasetRecorder`` stores) is written into
the device through its one door, the device's clock kept running forward (a ROS graph on
``/clock`` never sees it jump back); an episode without one starts from its first frame's
joint positions, at rest. Then each frame's ``action`` is held as the setpoints of the
robot's goal actuators (``release(..., hold_at=...)``: any path or move on them ends) for the
frame's interval, and the state reached at the next frame's instant is compared with the
recorded ``observation.state``.

- **lockstep** (default): the device is paused (and played again afterwards if it was
  playing) and advanced with ``device.step`` the recorded number of physics steps between
  two frames (from each frame's simulated time, ``sim.frame_times``), so the replay does not
  depend on the machine's speed. Where the start state and the model are the same and the
  recorded command was constant over each frame's interval (a lockstep policy at the
  dataset's rate, a replay recorded again, goals held between ``device.step`` calls), the
  replayed states equal the recorded ones bit for bit. A command that moved within a frame
  (a minimum-jerk path of ``move_to`` or a trajectory, sampled at 30 fps) is replayed as held
  steps of it, so the states come back close, not equal: the report says how close.
- **real time**: the device runs as it does; each action is sent at its frame's instant of
  simulated time and the state is read from the first snapshot at or after the next frame's
  instant (within a chunk of steps, ~4 ms), so divergence includes that sampling offset.

The report gives, per frame, the largest absolute difference over the state columns
(radians, metres) and whether every frame's state came back bit for bit (float32, the
dataset's dtype).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import os
import time
from typing import Any, TYPE_CHECKING

import mujoco
import numpy as np

from .. import errors
from ..checks import is_bool
from ..errors import DeviceError, InvalidArgument, UnknownName
from .recorder import DERIVED, INTEGRATION, resolve_robots

if TYPE_CHECKING:
    from ..sim.physics import Physics

POLL_S = 0.001


@dataclass
class ReplayReport:
    """What a replay measured: per-frame divergence from the recorded states."""

    episode: int
    frames: int
    lockstep: bool
    state_names: list[str]
    divergence: np.ndarray          # (frames,) max |replayed - recorded| over the state
    exact: bool                     # every frame's state equal bit for bit (float32)
    start: str                      # 'state' (the stored start state) or 'positions'
    worst_frame: int = 0
    per_joint: dict[str, float] = field(default_factory=dict)   # max over frames, a column

    @property
    def max_divergence(self) -> float:
        return float(self.divergence.max()) if self.divergence.size else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {'episode': self.episode, 'frames': self.frames, 'lockstep': self.lockstep,
                'exact': self.exact, 'max_divergence': self.max_divergence,
                'worst_frame': self.worst_frame, 'start': self.start,
                'per_joint': dict(self.per_joint), 'divergence': self.divergence.tolist()}


@dataclass
class RecordedEpisode:
    """One episode as replay needs it."""

    index: int
    fps: float
    state_names: list[str]
    action_names: list[str]
    states: np.ndarray              # (frames, state columns) float32
    actions: np.ndarray             # (frames, action columns) float32
    sim_times: np.ndarray | None    # (frames,) simulated time of each frame, or None
    start_state: np.ndarray | None
    start_derived: dict | None
    timestep: float | None


def load_episode(root: str | os.PathLike, episode: int) -> RecordedEpisode:
    """Read one episode of a dataset (``DatasetReader``): UNKNOWN_NAME for an episode that is
    not there, INVALID_ARGUMENT for a folder that is not a dataset."""
    from .reader import DatasetReader
    if is_bool(episode) or not isinstance(episode, (int, np.integer)) or episode < 0:
        raise InvalidArgument(f'expected an episode index, got {errors.shorten(episode)}',
                              where='episode')
    if not os.path.exists(os.path.join(os.fspath(root), 'meta', 'info.json')):
        raise InvalidArgument(f'{root} is not a dataset (no meta/info.json)', where='folder')
    with DatasetReader(root) as reader:
        features = reader.features
        count = len(reader.episodes)
        if not 0 <= int(episode) < count:
            raise UnknownName('episode', int(episode), [str(i) for i in range(count)],
                              where='episode')
        frames = reader.frames(int(episode))
        meta = reader.episodes[int(episode)]
        fps = float(reader.fps)
    states = np.asarray(frames['observation.state'], dtype=np.float32)
    actions = np.asarray(frames['action'], dtype=np.float32)
    start = _array(meta.get('sim.start_state'))
    times = _array(meta.get('sim.frame_times'))
    if times is not None and len(times) != len(states):
        times = None
    step = meta.get('sim.timestep')
    derived = {key[len('sim.derived.'):]: value for key, value in meta.items()
               if key.startswith('sim.derived.') and value is not None}
    return RecordedEpisode(int(episode), fps, _names(features['observation.state']),
                           _names(features['action']), states, actions, times, start,
                           derived or None, None if step is None else float(step))


def _names(feature: dict) -> list[str]:
    names = feature.get('names')
    if isinstance(names, dict):          # {'motors': [...]}, as some LeRobot datasets write
        names = next(iter(names.values()))
    return list(names or [])


def _array(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    out = np.asarray(value, dtype=float).reshape(-1)
    return out if out.size else None


class _Columns:
    """The device's addresses of an episode's state and action columns."""

    def __init__(self, device: Any, ep: RecordedEpisode, robot: Any) -> None:
        robots = resolve_robots(device, robot)
        joints = {r.prefix + j: (int(q), int(d)) for r in robots
                  for j, q, d in zip(r.joints, r.qpos, r.dofs, strict=True)}
        goals = {r.prefix + g: int(a) for r in robots
                 for g, a in zip(r.goals, r.actuators, strict=True)}
        for name in ep.state_names:
            base = name[:-len('.vel')] if name.endswith('.vel') else name
            if base not in joints:
                raise UnknownName('joint', name, list(joints), where='observation.state')
        for name in ep.action_names:
            if name not in goals:
                raise UnknownName('goal channel', name, list(goals), where='action')
        self.velocity = np.array([n.endswith('.vel') for n in ep.state_names], dtype=bool)
        self.index = np.array([joints[n[:-len('.vel')]][1] if v else joints[n][0]
                               for n, v in zip(ep.state_names, self.velocity, strict=True)],
                              dtype=int)
        self.qpos = self.index[~self.velocity]
        self.actuators = np.array([goals[n] for n in ep.action_names], dtype=int)


def replay_episode(device: Any, root: str | os.PathLike, episode: int, *, lockstep: bool = True,
                   robot: Any = None, progress: Any = None) -> ReplayReport:
    """Play episode ``episode`` of the dataset in ``root`` on ``device`` (module docstring);
    ``robot``: the namespace(s) it was recorded from (None: the whole device). Refusals
    (UNKNOWN_NAME, INVALID_ARGUMENT, MODEL_ERROR for a start state of another model) come
    before the device changes. ``progress(frame, frames)`` is called after each frame; False
    stops the replay there (the report covers the frames replayed)."""
    if not is_bool(lockstep):
        raise InvalidArgument('lockstep takes true or false', where='lockstep')
    ep = load_episode(root, episode)
    cols = _Columns(device, ep, robot)
    model = device.model
    size = mujoco.mj_stateSize(model, INTEGRATION)
    if ep.start_state is not None and ep.start_state.size != size:
        raise errors.ModelError(
            f'the episode starts from a state of {ep.start_state.size} numbers, this model '
            f'has {mujoco.mj_stateSize(model, INTEGRATION)}: it was recorded on another '
            'model', where='sim.start_state')
    dt = float(model.opt.timestep)
    n = len(ep.states)
    if ep.sim_times is not None:
        offsets = ep.sim_times - ep.sim_times[0]
    else:
        offsets = np.arange(n) / ep.fps
    steps = np.maximum(np.rint(np.diff(offsets) / dt).astype(int), 0)
    was_paused = device.paused
    if lockstep and not was_paused:
        device.pause(True)
    replayed = np.empty_like(ep.states)
    try:
        t_start = _restore(device, ep, cols)
        replayed[0] = _state_of(device.snapshot, cols)
        done = 1
        for k in range(n - 1):
            _hold(device, cols, ep.actions[k])
            if lockstep:
                if steps[k] > 0:
                    device.step(int(steps[k]))
                snap = device.snapshot
            else:
                snap = _wait_for(device, t_start + offsets[k + 1])
            replayed[k + 1] = _state_of(snap, cols)
            done = k + 2
            if progress is not None and progress(done, n) is False:
                break
        _hold(device, cols, ep.actions[done - 1])
    finally:
        if lockstep and not was_paused and not device.closed:
            device.pause(False)
    diff = np.abs(replayed[:done].astype(np.float64) - ep.states[:done].astype(np.float64))
    per_frame = diff.max(axis=1) if diff.shape[1] else np.zeros(done)
    exact = bool(np.array_equal(replayed[:done], ep.states[:done]))
    return ReplayReport(ep.index, done, bool(lockstep), ep.state_names, per_frame, exact,
                        'state' if ep.start_state is not None else 'positions',
                        int(per_frame.argmax()) if done else 0,
                        {name: float(diff[:, i].max()) for i, name in enumerate(ep.state_names)})


def _state_of(snap: Any, cols: _Columns) -> np.ndarray:
    out = np.where(cols.velocity, snap.qvel[np.where(cols.velocity, cols.index, 0)],
                   snap.qpos[np.where(cols.velocity, 0, cols.index)])
    return out.astype(np.float32)


def _restore(device: Any, ep: RecordedEpisode, cols: _Columns) -> float:
    """Physics thread: the episode's start (its state, or its first positions at rest),
    its first action held, the device's clock kept; the simulated time it starts at."""
    start, first = ep.start_state, ep.states[0][~cols.velocity].astype(np.float64)
    acts, hold = cols.actuators, ep.actions[0].astype(np.float64)
    derived = ep.start_derived if start is not None else None

    def apply(s: Physics) -> float:
        now = s.time
        if start is not None:
            s.set_state(start, INTEGRATION, keep_time=True)
        else:
            d = s.data
            s.set_joints(cols.qpos, first, np.arange(d.qvel.size), np.zeros(d.qvel.size))
        if derived:    # as the recording's last step left them, and the laws' checks on them
            s.restore_step_inputs({k: v for k, v in derived.items() if k in DERIVED})
        device.preempt_moves_touching(list(acts))
        s.release(acts, hold_at=hold)
        s.publish_snapshot()
        return float(now)
    return float(device.on_physics(apply, wait=True))


def _hold(device: Any, cols: _Columns, action: np.ndarray) -> None:
    acts, hold = cols.actuators, action.astype(np.float64)

    def apply(s: Any) -> None:
        device.preempt_moves_touching(list(acts))
        s.release(acts, hold_at=hold)
    device.on_physics(apply, wait=True)


def _wait_for(device: Any, t: float, timeout: float = 60.0) -> Any:
    """Real time: the first snapshot at or after simulated time ``t``."""
    deadline = time.monotonic() + timeout
    while True:
        snap = device.snapshot
        if snap.time >= t - 1e-9:
            return snap
        if device.closed:
            raise errors.ClosedError('the device')
        if device.paused:
            raise DeviceError(errors.STOPPED, 'the device was paused during a real-time '
                              'replay; replay in lockstep instead', where='replay')
        if time.monotonic() > deadline:
            raise DeviceError(errors.TIMEOUT, f'simulated time did not reach {t:.3f} s within '
                              f'{timeout:g} s of wall time', where='replay')
        time.sleep(POLL_S)
