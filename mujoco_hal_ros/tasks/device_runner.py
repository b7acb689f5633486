"""One episode of a task and a policy on the real-time device (sim_node's ``run_policy``).

The episode is the one ``reference.run_episode`` and the pool run for the same task, policy,
seed and episode: the same draw (start state, command, model patch), the same observation,
the same two-row policy call, the same action map. What differs is where the physics runs:
on the device's own MjData, which the device's physics thread owns, so every state write
goes through the device's one door (``device.on_physics``, its closures given a
``sim.physics.Physics``) and nothing heavy runs there:
the policy, the draw and the episode's model are computed on the caller's thread.

The model. The device runs the task's model (the model with the sensors the task reads,
``Task.model``) with the episode's field patch written in (``reference.episode_model``),
swapped in whole through the device's model swap (``device.swap.replace_model(world=True)``,
the machinery ``load_world`` uses; ``device.swaps`` tells every part of sim_node). The
device's own model is never reused, even when it came from the same file: the task's
appended sensors, a device file's timestep or gravity compensation and the per-episode
patch all change what a step computes, and only the task's compiled model steps as the
pool's does. After the run the device stays on that model, holding; ``unload_world``
brings back the world it was opened with.

Two modes:

- **lockstep** (``lockstep=True``): the device is paused for the episode (and played again
  afterwards if it was playing) and the runner alone advances it, one control period at a
  time: the policy's controls written to ``ctrl``, ``mj_step`` x ``task.decimation`` and
  ``mj_forward`` when the task reads sensors, in one ``on_physics`` call (``Physics.set_ctrl``,
  ``step``, ``forward``). That is the
  reference loop step for step, so the episode equals the pool's bit for bit (every
  control step's FULLPHYSICS row; the tests hold them equal). The controls go to ``ctrl``
  as the pool writes them, not through the device's drive laws (a position servo's hold
  feed-forward, a velocity servo's outer loop): those are the device's model of a real
  driver, and the pool has none. Two things are not the reference's: the device's clock
  keeps running forward (a ROS graph on ``/clock`` never sees it jump back), so a row's
  time is the episode's time plus the time the episode started at, and nothing in a step
  reads it; and a device with ``gravity_compensation`` is refused, because it writes
  ``gravcomp`` into every model it runs. Another client stepping, resetting or swapping
  the device during the episode ends it with PREEMPTED.
- **real time** (``lockstep=False``): the device runs as it does (its real-time factor, its
  drive laws, other clients' pauses and steps); the runner waits for each control period of
  simulated time, reads the observation from the device's latest snapshot (qpos, qvel,
  sensordata) and sends the setpoints through the device's goal channels (``set_goals``,
  in each channel's units and limits), as a driver node would command the real arm. The
  episode is then close to the pool's, not equal: a snapshot's sensors are a physics step
  old, the goal channels ramp at their ``max_change_per_s`` and the drive laws add their
  torques. Every actuator the task acts on needs a goal channel.

Either way the run ends at the episode's end (success, failure, ``unstable``, horizon), at
``stop()`` or when ``progress`` returns False, and leaves the device holding
(``Device.hold``). An unstable episode leaves it back at its keyframe (``Device.reset``).
"""

from __future__ import annotations

from collections.abc import Callable
import copy
from dataclasses import dataclass
import threading
from typing import Any, TYPE_CHECKING

import mujoco
import numpy as np

from .. import errors
from ..errors import DeviceError, InvalidArgument
from ..pool.layout import FULLPHYSICS
from ..pool.validate import integer
from .evaluate import EpisodeResult, MAX_EPISODES
from .policies import check_actions, make_policy, Policy
from .reference import episode_model, verdict
from .task import Frame, Task

if TYPE_CHECKING:     # the hints only
    from ..sim.device import Device
    from ..sim.physics import Physics

POLL_S = 0.001          # real time: how often the next control period's snapshot is looked for


@dataclass
class DeviceRun:
    """What a run did: the episode's result, whether it ran to its end, its simulated
    start and end times, and (lockstep, ``record``) its FULLPHYSICS rows, the start state
    first and then one per control step, as ``reference.run_episode(record=True)``."""

    result: EpisodeResult
    completed: bool             # False: stop() or progress ended it first (failure 'stopped')
    lockstep: bool
    start_time: float
    end_time: float
    states: np.ndarray | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.result.to_dict(), completed=self.completed, lockstep=self.lockstep,
                    start_time=self.start_time, end_time=self.end_time)


class DevicePolicyRunner:
    """Run episode ``episode`` of ``task`` under ``policy`` and ``seed`` on ``device``.

    Everything that can be refused is checked here, before the device is touched: the task
    (a Task, a built-in name or a task file), the policy (``make_policy``: kinds and sizes),
    the seed and episode, the mode, and (real time) the goal channels the task's actuators
    need. A refusal raises DeviceError (CONFIG_ERROR, INVALID_ARGUMENT, UNKNOWN_NAME) and
    changes nothing. ``run()`` then runs the episode on the calling thread (once);
    ``stop()``, from any thread, ends it between two control steps.
    """

    def __init__(self, device: Device, task: Task | str,
                 policy: Policy | Callable[..., Any] | str, seed: int = 0, episode: int = 0, *,
                 lockstep: bool = True, record: bool = False) -> None:
        from . import load_task
        self.device = device
        self.task = task if isinstance(task, Task) else load_task(task)
        self.seed = integer(seed, 'seed', 0, 2 ** 63 - 1)
        self.episode = integer(episode, 'episode', 0, MAX_EPISODES - 1)
        if not isinstance(lockstep, (bool, np.bool_)):
            raise InvalidArgument(f'lockstep takes true or false, got {errors.shorten(lockstep)}',
                                  where='lockstep')
        self.lockstep = bool(lockstep)
        self.record = bool(record)
        if self.lockstep and device.gravity_compensation:
            raise InvalidArgument(
                'a lockstep episode runs the task\'s model as the pool does, and this device '
                'compensates gravity (it writes gravcomp into every model it runs)',
                where='lockstep', allowed='lockstep false, or a device without '
                'gravity_compensation')
        self.policy = make_policy(policy, self.task, self.seed)
        self.draw = self.task.draw(self.seed, self.episode)
        # the controls the episode starts from: its servos at the randomized start
        self.ctrl0 = self.task.start_ctrl if self.draw.ctrl is None else self.draw.ctrl
        model = episode_model(self.task, self.draw.patch)
        # The device keeps the model it runs (and may edit it: gravity, timestep): its own copy.
        self.model = copy.copy(model) if model is self.task.model else model
        self.goals = None if self.lockstep else self._goal_channels()
        self._stop = threading.Event()
        self._started = False
        self.steps = 0

    # ------------------------------------------------------------------ checks
    def _goal_channels(self):
        """Per acted actuator, the goal channel that takes its setpoint (real time)."""
        layout, _file = self.device.swap.world_layout(self.model)
        missing = [self.task.actions.names[i] for i, a in enumerate(self.task.actions.ids)
                   if int(a) not in layout.goal_by_actuator]
        if missing:
            raise InvalidArgument(
                f'task {self.task.name!r} acts on {", ".join(missing)}, which the device has '
                'no goal channel for, so a real-time episode cannot command them',
                where='lockstep', allowed='lockstep true, or a device file with a goal '
                'channel per acted actuator')
        return [layout.goal_by_actuator[int(a)] for a in self.task.actions.ids]

    # ------------------------------------------------------------------ control
    def stop(self) -> None:
        """End the run between two control steps (any thread); the device then holds. A
        policy that can be interrupted (``cancel()``: one in a worker process) is, so a
        call that never returns cannot keep the run going."""
        self._stop.set()
        cancel = getattr(getattr(self, 'policy', None), 'cancel', None)
        if cancel is not None:
            cancel()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self, progress: Callable[[int, float, float], bool | None] | None = None
            ) -> DeviceRun:
        """The episode, on this thread; ``progress(steps, return, sim_time)`` after each
        control step, the last one included (returning False stops the run, as ``stop()``
        does, unless that step ended the episode). A runner stopped before ``run`` returns
        a stopped run at once and leaves the device as it was."""
        if self._started:
            raise InvalidArgument('this runner already ran its episode', where='run',
                                  allowed='a new DevicePolicyRunner')
        self._started = True
        device = self.device
        if self._stop.is_set():            # stopped before it began: the device is untouched
            t = device.snapshot.time
            return DeviceRun(EpisodeResult(self.episode, False, 'stopped', 0.0, 0, 'stopped'),
                             False, self.lockstep, t, t)
        resume = self.lockstep and not device.paused
        unstable = False
        try:
            if self.lockstep:
                device.pause(True)
            device.swap.replace_model(
                self.model, world=True,
                why=f'run_policy: task {self.task.name} episode {self.episode}',
                model_path=self.task.model_path)
            run = (self._lockstep if self.lockstep else self._real_time)(progress)
            unstable = run.result.failure == 'unstable'
            return run
        finally:
            if not device.closed:
                if unstable:
                    device.reset()      # MuJoCo reset the data itself: back to the keyframe
                device.hold()
                if resume:
                    device.pause(False)

    # ------------------------------------------------------------------ the episode
    def _start(self):
        """Physics thread: the episode's start state (the device's clock runs on), held."""
        draw, model = self.draw, self.model
        record = self.record

        def apply(p: Physics) -> tuple[np.ndarray, np.ndarray, np.ndarray, float,
                                       np.ndarray | None]:
            if p.model is not model:
                raise DeviceError(errors.PREEMPTED, 'another request swapped the device\'s '
                                  'model before the episode started; nothing ran',
                                  where='run_policy')
            p.set_state(draw.state, FULLPHYSICS, reset=True, keep_time=True)  # and forward
            p.hold_pose()
            p.publish_snapshot()
            return _read(p.model, p.data, record)
        return self.device.on_physics(apply, wait=True)

    def _step(self, ctrl, t_expected):
        """Physics thread: one control period of the reference loop on the device's data."""
        model, task, record = self.model, self.task, self.record

        def apply(p: Physics) -> tuple[np.ndarray, np.ndarray, np.ndarray, float,
                                       np.ndarray | None, bool]:
            if p.model is not model or p.time != t_expected:
                raise DeviceError(errors.PREEMPTED, 'another request stepped, reset or '
                                  'swapped the device during the lockstep episode',
                                  where='run_policy', allowed='no other stepping while a '
                                  'lockstep episode runs')
            p.set_ctrl(ctrl)
            p.set_setpoint(ctrl)
            bad = p.step(task.decimation)        # MuJoCo warned of a bad state meanwhile
            if task.uses_sensordata:
                p.forward()                      # sensors at the state the step ended in
            p.publish_snapshot()
            return _read(p.model, p.data, record) + (bad,)
        return self.device.on_physics(apply, wait=True)

    def _lockstep(self, progress):
        task, amap, policy = self.task, self.task.actions, self.policy
        qpos, qvel, sens, t, row = self._start()
        t0 = t
        rows: list[np.ndarray] = [row] if self.record else []
        slots = np.array([0, -1])        # as ``evaluate`` pads a batch of one
        policy.reset(slots[:1], np.array([self.episode]))
        cmd = self.draw.command[None]
        last = np.zeros((1, task.act_size))
        setpoint = amap.first_setpoints(1, self.ctrl0)
        ret, steps, completed = 0.0, 0, True
        # the horizon ends an episode with no success predicate a success, else a failure
        ok, failure, by = _at_horizon(task)
        while steps < task.horizon:
            if self._stop.is_set():
                completed = False
                break
            act = self._actions(Frame(qpos, qvel, sens, cmd, last, last), slots, steps)
            if act is None:
                completed = False
                break
            setpoint = amap.apply(act, setpoint)
            qpos, qvel, sens, t, row, bad = self._step(amap.full_ctrl(setpoint, self.ctrl0)[0], t)
            steps += 1
            self.steps = steps
            if self.record:
                rows.append(row)
            ret, end = _scored(task, Frame(qpos, qvel, sens, cmd, act, last), ret, bool(bad))
            last = act
            keep = progress(steps, ret, t) if progress is not None else True
            if end is not None:
                ok, failure, by = end
                break
            if keep is False:
                completed = False
                break
        if not completed:
            ok, failure, by = False, 'stopped', 'stopped'
        return DeviceRun(EpisodeResult(self.episode, ok, failure, ret, steps, by), completed,
                         True, t0, t, np.stack(rows) if self.record else None)

    def _actions(self, frame, slots, steps):
        """The policy's actions for this control step; None when ``stop()`` interrupted a
        policy computing them (its worker ended: STOPPED)."""
        try:
            return _actions(self.policy, self.task, frame, slots, steps)
        except DeviceError as err:
            if err.code == errors.STOPPED and self._stop.is_set():
                return None
            raise

    def _wait_for(self, t):
        """Real time: the first snapshot at or after simulated time ``t``; None on stop()."""
        device = self.device
        while not self._stop.is_set():
            if device.closed:
                raise errors.ClosedError('the device')
            snap = device.snapshot
            if snap.time >= t - 1e-9:
                return snap
            self._stop.wait(POLL_S)
        return None

    def _command(self, setpoint):
        """Real time: the setpoints as goal channel values, inside each channel's limits."""
        goals = {}
        for g, native in zip(self.goals, setpoint[0], strict=True):
            native = min(max(float(native), g.native_lo), g.native_hi)
            value = float(g.to_unit(native))
            lo, hi = sorted((g.min if g.min is not None else -np.inf,
                             g.max if g.max is not None else np.inf))
            goals[g.name] = min(max(value, lo), hi)
        self.device.set_goals(goals)

    def _real_time(self, progress):
        task, amap, policy, device = self.task, self.task.actions, self.policy, self.device
        unstable0 = device.health()['unstable_events']
        qpos, qvel, sens, t, _row = self._start()
        t0 = t_next = t
        slots = np.array([0, -1])
        policy.reset(slots[:1], np.array([self.episode]))
        cmd = self.draw.command[None]
        last = np.zeros((1, task.act_size))
        setpoint = amap.first_setpoints(1, self.ctrl0)
        ret, steps, completed = 0.0, 0, True
        # the horizon ends an episode with no success predicate a success, else a failure
        ok, failure, by = _at_horizon(task)
        while steps < task.horizon:
            act = self._actions(Frame(qpos, qvel, sens, cmd, last, last), slots, steps)
            if act is None:
                completed = False
                break
            setpoint = amap.apply(act, setpoint)
            self._command(setpoint)
            t_next += task.control_dt
            snap = self._wait_for(t_next)
            if snap is None:
                completed = False
                break
            if device.model is not self.model:
                raise DeviceError(errors.PREEMPTED, 'another request swapped the device\'s '
                                  'model during the episode', where='run_policy')
            steps += 1
            self.steps = steps
            t = snap.time
            qpos, qvel, sens = (snap.qpos[None].copy(), snap.qvel[None].copy(),
                                snap.sensordata[None].copy())
            ret, end = _scored(task, Frame(qpos, qvel, sens, cmd, act, last), ret,
                               device.health()['unstable_events'] > unstable0)
            last = act
            keep = progress(steps, ret, t) if progress is not None else True
            if end is not None:
                ok, failure, by = end
                break
            if keep is False:
                completed = False
                break
        if not completed:
            ok, failure, by = False, 'stopped', 'stopped'
        return DeviceRun(EpisodeResult(self.episode, ok, failure, ret, steps, by), completed,
                         False, t0, t)


def _actions(policy, task, frame, slots, steps):
    """The policy's checked actions for one observation (the two-row call the pool makes);
    a policy that raises is refused (INVALID_ARGUMENT, naming the control step), as one
    that returns NaN is: its code's failure, not the node's."""
    obs = task.observe(frame)
    try:
        out = policy.act(np.concatenate([obs, np.zeros_like(obs)]), slots)
    except DeviceError:
        raise
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the policy's own failure
        raise InvalidArgument(f'{policy.name} raised at control step {steps + 1}: '
                              f'{type(err).__name__}: {errors.shorten(str(err), 200)}',
                              where='policy') from None
    return check_actions(out[:1] if np.ndim(out) == 2 else out, 1, task, policy.name)


def _at_horizon(task):
    """(success, failure, what ended it) of an episode that ran to its horizon."""
    return not task.success_names, ('horizon' if task.success_names else None), 'horizon'


def _scored(task, after, ret, unstable):
    """A control step's reward added to ``ret``, and how the episode ends there (None: it
    goes on), judged as the pool's evaluator judges it (``reference.verdict``)."""
    succ, fail = task.predicates(after)
    return ret + float(task.reward(after, succ, fail)[0]), verdict(task, succ, fail, unstable)


def _read(m, d, record):
    """(qpos, qvel, sensordata) as one-row arrays, the time, and the FULLPHYSICS row."""
    row = None
    if record:
        row = np.empty(mujoco.mj_stateSize(m, FULLPHYSICS))
        mujoco.mj_getState(m, d, row, FULLPHYSICS)
    return (d.qpos[None].copy(), d.qvel[None].copy(), d.sensordata[None].copy(), d.time, row)


def run_on_device(device: Device, task: Task | str, policy: Policy | Callable[..., Any] | str,
                  seed: int = 0, episode: int = 0, *, lockstep: bool = True,
                  record: bool = False,
                  progress: Callable[[int, float, float], bool | None] | None = None,
                  ) -> DeviceRun:
    """``DevicePolicyRunner(...).run(progress)`` in one call."""
    return DevicePolicyRunner(device, task, policy, seed, episode, lockstep=lockstep,
                              record=record).run(progress)


__all__ = ['DevicePolicyRunner', 'DeviceRun', 'run_on_device']
