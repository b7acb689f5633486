"""The stepper: one thread that owns MjData and advances it in real time.

Callers never touch MjData. They post closures through one lock-guarded mailbox (the only
hand-off; ``post``/``submit``, and ``device.on_physics`` outside ``sim/``); each closure
runs between two chunks with a ``Physics`` object (``sim.physics``: what it may change).
Readers take the latest ``Snapshot``, a set of arrays copied after each chunk of steps and
swapped in by reference, so they never block the physics and never see a half-written state.

This module is the loop: the thread, the mailbox, pacing and snapshots. What a chunk does
lives beside it, one job a module: which plan drives which actuator (``arbiter``), the
setpoints held between plans (``holding``), the drive laws' per-chunk state
(``drive_state``, over the laws in ``drives``), latched pushes and contacts (``pushes``),
mujoco.rollout for plain chunks (``roller``) and the way back after an instability
(``recovery``). Steps run in chunks: the setpoints for a whole chunk are computed with
numpy in one go, so a running goal costs a few microseconds per chunk, not per step.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
import functools
import os
import threading
import time
from typing import Any

import mujoco
import numpy as np

from ..errors import ClosedError, DeviceError, NOT_PAUSED, STEPPER_DEAD, TIMEOUT
from ..fastpath import sched
from .arbiter import Arbiter
from .door import opened
from .drive_state import DriveState
from .drives import Drives
from .holding import Holding
from .pushes import Pushes
from .recovery import Recovery
from .roller import Roller
from .snapshot import Snapshot

# Wall seconds of lag the real-time loop makes up; beyond, the debt is dropped and counted
# (``health()['dropped_s']``, ``['stalls']``): after a stall (a stopped process, a long
# request) running it off at full speed would be a burst of motion no real device makes.
# Below it is a busy host's scheduling hiccup, made up within a few chunks as before.
MAX_LAG_S = 0.25
# Steps per chunk of a paused step(n): a fixed count, so that the same requests give the
# same chunks and so the same physics (a chunk boundary restarts mujoco.rollout), and large
# enough that a chunk's snapshot, callbacks and mailbox check stay a small share of it; a
# hold sent meanwhile waits at most one chunk.
STEP_CHUNK = 200


# Debug runs (the test suite sets it): the stepper-thread-only methods check that they run
# on the stepper thread, so a call that skipped the one door (``post``) fails where it is
# made instead of racing the physics. Off, the methods are left undecorated: no cost.
CHECK_THREADS = os.environ.get('MUJOCO_HAL_ROS_CHECK_THREADS', '') not in ('', '0')


def physics_thread_only(method: Callable) -> Callable:
    """Mark a Stepper method that only the stepper thread may call (checked in debug runs:
    ``MUJOCO_HAL_ROS_CHECK_THREADS=1``); before the thread starts and after it ends the
    caller owns the stepper alone, so those calls pass."""
    if not CHECK_THREADS:
        return method

    @functools.wraps(method)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        thread = getattr(self, '_thread', None)
        if thread is not None and thread.is_alive() and threading.current_thread() is not thread:
            raise RuntimeError(
                f'Stepper.{method.__name__} runs on the physics thread only, called from '
                f'{threading.current_thread().name!r}: post it (device.on_physics(fn), or '
                'stepper.post(fn) inside sim/)')
        return method(self, *args, **kwargs)
    return checked


class _Closed:
    """Stands in for the stepper in requests that arrive while it closes."""

    def __getattr__(self, name: str) -> Any:
        raise ClosedError('the device stepper')


class Stepper:
    """Real-time stepping with chunked setpoint paths, pause/step/reset and health.

    Its parts, public to ``sim/`` (``sim.door.Door`` reaches them for a closure):
    ``arbiter`` (the plans), ``holding`` (the setpoints), ``drive`` (the drive laws' state),
    ``pushes`` (wrenches, contacts), ``recovery`` (after an instability), ``roller``.
    """

    def __init__(self, model: Any, data: Any, *, laws: Drives, real_time_factor: float = 1.0,
                 start_paused: bool = False, keyframe: int | None = None,
                 chunk_time: float = 0.004, on_chunk: Callable | None = None,
                 on_unstable: Callable | None = None, on_error: Callable | None = None,
                 fast_chunk_wall: float = 0.006, use_rollout: bool = True,
                 relaw: Callable[[Any], Drives] | None = None) -> None:
        self.model, self.data = model, data
        self.keyframe = keyframe
        self._relaw = relaw          # model -> its drive laws again (a new timestep)
        self.arbiter = Arbiter()     # stepper thread only; readers: Snapshot.plans
        self.holding = Holding(model, data, laws)
        self.drive = DriveState(model, data, laws)
        self._lock = threading.Lock()
        self._mail: list[Callable] = []
        self._urgent: list[Callable] = []  # hold and the like: also between step(n)'s chunks
        self._wake = threading.Event()
        self._closed = False
        self._paused = bool(start_paused)
        self._rtf = float(real_time_factor)
        self._chunk_steps = max(1, int(round(chunk_time / model.opt.timestep)))
        # At rtf 0 a chunk is sized by wall time (``fast_chunk_wall``), so the per-chunk
        # costs (mailbox, snapshot, checks, callbacks) stay a few % of the stepping itself.
        self._fast_wall = float(fast_chunk_wall)
        self._step_cost: float | None = None     # wall seconds per step, smoothed
        self._on_chunk = on_chunk
        self._on_unstable = on_unstable
        self._on_error = on_error
        self.nstep = 0
        self.overruns = 0
        self.worst_lag = 0.0
        self.errors = 0
        self.last_error: str | None = None
        self._busy: str | None = None
        self.skipped = 0.0                       # simulated seconds given up after stalls
        self.stalls = 0                          # ... how many times
        self._use_rollout = use_rollout          # for a model swapped in later (swap_model)
        self.roller = Roller()
        self.roller.bind(model, data, use_rollout and laws.impedance is None)
        self.recovery = Recovery(model, data)
        self._rebase()
        self._rate_window: list[tuple[float, float]] = []
        self.pushes = Pushes(model)              # latched pushes, the contacts flag
        self.generation = 0                      # stamped on snapshots; swap_model sets it
        self.snapshot = self._snap()
        self._thread = threading.Thread(target=self._run, name='mujoco_hal_ros-stepper',
                                        daemon=True)
        self._thread.start()

    # --- the hand-off -------------------------------------------------------------------
    def post(self, fn: Callable, wait: bool = False, timeout: float = 10.0,
             urgent: bool = False) -> Any:
        """Run ``fn(physics)`` on the stepper thread before the next chunk (``physics``: a
        ``sim.physics.Physics``, valid while ``fn`` runs).

        With ``wait``, returns what ``fn`` returned (or raises what it raised). A request
        that has not started within ``timeout`` is withdrawn and never runs (TIMEOUT: nothing
        changed); one that has started is waited for. ``urgent`` requests run first, and
        also between the chunks of a running ``step(n)``, so a hold is never queued behind
        a million steps.
        """
        if not self._thread.is_alive() and not self._closed:
            raise DeviceError(STEPPER_DEAD, 'the stepping thread has stopped '
                              f'({self.last_error}); close the device and open a new one')
        done = threading.Event() if wait else None
        box: dict[str, Any] = {'state': 'queued'}

        def call(stepper: Stepper | _Closed) -> None:
            with self._lock:
                if box['state'] != 'queued':
                    return                      # withdrawn by a caller that gave up
                box['state'] = 'running'
            try:
                if isinstance(stepper, Stepper):
                    with opened(stepper) as physics:
                        box['value'] = fn(physics)
                else:
                    box['value'] = fn(stepper)  # closing: any use raises ClosedError
            except BaseException as exc:  # noqa: B902 - handed back to the caller
                box['error'] = exc
            finally:
                box['state'] = 'done'
                if done is not None:
                    done.set()
        with self._lock:
            if self._closed:
                raise ClosedError('the device stepper')
            (self._urgent if urgent else self._mail).append(call)
        self._wake.set()
        if done is None:
            return None
        if not done.wait(timeout):
            with self._lock:
                withdrawn = box['state'] == 'queued'
                if withdrawn:
                    box['state'] = 'withdrawn'
            if withdrawn:
                if self._closed:
                    raise ClosedError('the device stepper')
                raise DeviceError(TIMEOUT, f'the stepper did not take the request within '
                                  f'{timeout:g} s (busy: {self._busy or "stepping"}); '
                                  'nothing was changed')
            done.wait()
        if 'error' in box:
            raise box['error']
        return box.get('value')

    def submit(self, fn: Callable) -> Future:
        """``post`` without waiting: a ``concurrent.futures.Future`` of what ``fn`` returns
        (or raises), for callers that must not block, such as a ROS service coroutine."""
        job: Future = Future()

        def call(physics: Any) -> None:
            if not job.set_running_or_notify_cancel():
                return
            try:
                job.set_result(fn(physics))
            except BaseException as exc:  # noqa: B902 - handed back to the caller
                job.set_exception(exc)
        self.post(call)
        return job

    # --- controls -----------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def real_time_factor(self) -> float:
        return self._rtf

    def set_real_time_factor(self, rtf: float) -> None:
        def apply(_physics: Any) -> None:
            self._rtf = rtf
            self._rebase()
        self.post(apply, wait=True)

    def pause(self, paused: bool) -> None:
        def apply(_physics: Any) -> None:
            self._paused = paused
            self._rebase()
        self.post(apply, wait=True)

    def step(self, n: int, timeout: float | None = None, wait: bool = True) -> Any:
        """Advance ``n`` steps while paused; the simulated time after them. Urgent requests
        (hold) run between chunks. With ``wait=False``, a Future of that time."""
        timeout = 60.0 + 1e-3 * n if timeout is None else timeout

        def apply(_physics: Any) -> float:
            if not self._paused:
                raise DeviceError(NOT_PAUSED, 'step(n) runs only while paused; pause first')
            left = n
            self._busy = f'step({n})'
            try:
                while left > 0:
                    if self._closed:
                        raise ClosedError('the device stepper')
                    k = min(left, max(self._chunk_steps, STEP_CHUNK))
                    self._chunk(k)
                    left -= k
                    self._drain(urgent_only=True)
            finally:
                self._busy = None
            return self.snapshot.time
        if not wait:
            return self.submit(apply)
        return self.post(apply, wait=True, timeout=timeout)

    def reset(self, on_reset: Callable | None = None) -> Any:
        """Back to the keyframe; simulated time keeps going forward. ``on_reset(physics)``
        runs after, on the physics thread; its value comes back."""
        def apply(physics: Any) -> Any:
            self.recovery.reset(self.data.time, self.keyframe, self.pushes)
            self._held_still()
            out = on_reset(physics) if on_reset else None
            self._rebase()
            self.publish_snapshot()
            return out
        return self.post(apply, wait=True)

    @property
    def setpoint(self) -> np.ndarray:
        """The setpoints (``Holding.setpoint``; sim-internal, the array itself)."""
        return self.holding.setpoint

    @physics_thread_only
    def hold_pose(self) -> np.ndarray:
        """Setpoints that hold the current pose (``Holding.initial_setpoint``) replace the
        ones there are (stepper thread only); a copy of them."""
        self.holding.hold_initial()
        return self.holding.setpoint.copy()

    @physics_thread_only
    def hold_now(self) -> None:
        """Freeze every setpoint where its path is now and stop velocity servos
        (stepper thread only): holding means not moving."""
        self.holding.hold_now(self.arbiter)

    @physics_thread_only
    def position_mode(self) -> np.ndarray:
        """Per actuator, whether it is a velocity servo held to joint positions (stepper
        thread only; readers elsewhere: ``Snapshot.position_mode``)."""
        return self.holding.pos_mode.copy()

    @physics_thread_only
    def set_position_mode(self, actuators: Any, positions: bool) -> None:
        """``Holding.set_position_mode`` (stepper thread only): what carries a held velocity
        servo over to a model swapped in."""
        self.holding.set_position_mode(actuators, positions)

    @property
    def plans(self) -> tuple:
        """The plans running at the latest snapshot's time; any thread."""
        return self.snapshot.plans

    def owns(self, plan: Any) -> bool:
        """Whether ``plan`` still ran at the latest snapshot; any thread. The plans and the
        time come from one snapshot, so a plan that ended is never mistaken for one taken
        over (it is missing only once the snapshot's time is past its end)."""
        return any(p is plan for p in self.snapshot.plans)

    @physics_thread_only
    def running_plans(self) -> tuple:
        """The plans as they are at this instant (stepper thread only)."""
        return tuple(self.arbiter.running)

    @property
    def last_recovery(self) -> str | None:
        """'last good state' or 'keyframe': where the last instability went back to."""
        return self.recovery.last

    @physics_thread_only
    def set_timestep(self, timestep: float) -> None:
        """The integration timestep from the next step on (stepper thread only): a chunk
        keeps its simulated length, and the drive laws are built again for the new step
        (their gains derive from it); setpoints and position modes stay."""
        chunk_time = self._chunk_steps * self.model.opt.timestep
        self.model.opt.timestep = timestep
        self._chunk_steps = max(1, int(round(chunk_time / self.model.opt.timestep)))
        self._step_cost = None
        if self._relaw is not None:
            laws = self._relaw(self.model)
            self.holding.adopt(laws)
            self.drive = DriveState(self.model, self.data, laws)

    @physics_thread_only
    def publish_snapshot(self) -> Snapshot:
        """Copy the state into a new snapshot now (stepper thread only), so what a request
        changed reads back at once; returns it."""
        self.snapshot = self._snap()
        return self.snapshot

    # --- the model swapped at run time (scene edits) -------------------------------------
    @physics_thread_only
    def swap_model(self, model: Any, data: Any, *, laws: Drives, keyframe: int | None,
                   plans: Any, generation: int) -> Snapshot:
        """Step ``model``/``data`` from the next chunk on (stepper thread only, between
        chunks: nothing steps meanwhile). Everything sized or indexed by the old model is
        rebuilt here; ``plans`` (indexed by the new model's actuators) keep running, the
        setpoints hold the new pose until the caller sets them, latched pushes end (their
        bodies are another model's), and snapshots carry ``generation`` from now on."""
        chunk_time = self._chunk_steps * self.model.opt.timestep
        self.model, self.data = model, data
        self.keyframe = keyframe
        self.holding = Holding(model, data, laws)
        self.drive = DriveState(model, data, laws)
        self._chunk_steps = max(1, int(round(chunk_time / model.opt.timestep)))
        self._step_cost = None
        self.roller.bind(model, data, self._use_rollout and laws.impedance is None)
        self.recovery.bind(model, data)
        self.pushes = Pushes(model, self.pushes.want_contacts)
        self.arbiter = Arbiter(plans)
        self.holding.hold_initial()
        self.generation = int(generation)
        self._rebase()
        return self.publish_snapshot()

    # --- the loop -----------------------------------------------------------------------
    def _run(self) -> None:
        # At real time this thread wakes every step and holds the GIL between steps: when a
        # busy core makes it wait for a slice, every other thread of the process waits with
        # it. A short slice wakes it sooner without slowing rtf-0 stepping (sched.py;
        # bench/README.md).
        sched.short_slice()
        while not self._closed:
            self._wake.clear()
            try:
                self._drain()
                if self._closed:
                    break
                if self._paused:
                    self._wake.wait(0.05)
                    continue
                n = self._due_steps()
                if n > 0:
                    self._chunk(n)
            except Exception as exc:  # noqa: BLE001 - the thread must survive a bad callback
                self._failed(exc)

    def _due_steps(self) -> int:
        """How many steps the next chunk runs: at rtf 0 about ``fast_chunk_wall`` of wall
        time; in real time what simulated time owes the wall clock (after a sleep when it
        owes nothing yet, 0), a stall's debt dropped."""
        dt = self.model.opt.timestep       # a swapped-in model may have its own
        if self._rtf <= 0:
            return self._fast_chunk()
        wall = time.monotonic()
        due = self._sim0 + (wall - self._wall0) * self._rtf
        lag = due - self.data.time
        n = int(lag / dt + 1e-9)
        if n <= 0:
            self._wake.wait(min(dt, (dt - lag) / self._rtf))
            return 0
        if lag > 2 * dt * self._chunk_steps:
            self.overruns += 1
        self.worst_lag = max(self.worst_lag, lag)
        if lag > MAX_LAG_S * self._rtf:
            # A stall: give up the debt, run one chunk, pace from now on.
            self.skipped += lag
            self.stalls += 1
            self._rebase()
            n = self._chunk_steps
        return min(n, self._chunk_steps * 4)

    def _fast_chunk(self) -> int:
        """Steps per chunk at rtf 0: about ``fast_chunk_wall`` of wall time."""
        if self._step_cost is None:
            return self._chunk_steps
        n = int(self._fast_wall / max(self._step_cost, 1e-7))
        return max(self._chunk_steps, min(n, 5000))

    def _chunk(self, n: int) -> None:
        """``n`` steps, then the snapshot and the after-chunk callback."""
        self._advance(n)
        self.publish_snapshot()
        if self._on_chunk is not None:
            with opened(self) as physics:
                self._on_chunk(physics)

    def _advance(self, n: int) -> None:
        """One chunk: the plans sampled for its ``n`` steps, the drive laws' ctrl for each
        step, the steps (in one call when nothing reads the joints per step), then the
        bookkeeping and the instability check."""
        model, data = self.model, self.data
        t_start, w_start = data.time, time.perf_counter()
        hold = self.holding
        before = hold.setpoint.copy() if self.drive.needs_path_speed(hold) else None
        rows, smooth = self.arbiter.sample(hold.setpoint, t_start, model.opt.timestep, n)
        chunk = self.drive.chunk(hold, before, rows, smooth)
        pushes = self.pushes.table if self.pushes.table else None
        if chunk.per_step or pushes is not None:
            # Laws that read the joints every step: the torque motors' joint loop, velocity
            # servos held to positions, latched wrenches (xfrc_applied turns with the bodies
            # and ends mid-chunk), servos kept off a limit cycle (drives.keep_implicit).
            for i in range(n):
                chunk.write(i, data.ctrl)
                if pushes is not None:
                    pushes.apply(data)
                mujoco.mj_step(model, data)
        elif rows is None:
            # one call for the whole chunk: the same steps as a loop, but the GIL is
            # released once, not per step; with a loop the state thread's Python kept
            # the physics thread waiting at every step (bench/README.md)
            data.ctrl[:] = chunk.held
            mujoco.mj_step(model, data, n)
        elif self.roller.usable(n):
            self.roller.roll(rows)
        else:
            for row in rows:
                data.ctrl[:] = row
                mujoco.mj_step(model, data)
        self.drive.after_chunk()
        if pushes is not None:
            pushes.expire(data)
        self._count(n, w_start)
        if not self.recovery.passed(t_start + n * model.opt.timestep):
            self._unstable(t_start + n * model.opt.timestep)

    def _count(self, n: int, w_start: float) -> None:
        """Steps taken, and the wall cost per step for sizing rtf-0 chunks: the fastest
        recent chunk, drifting up slowly, so a chunk that lost the CPU to another process
        does not shrink the next."""
        self.nstep += n
        cost = (time.perf_counter() - w_start) / n
        self._step_cost = cost if self._step_cost is None else \
            min(cost, self._step_cost * 1.02)
        self._rate_window.append((time.monotonic(), self.data.time))
        if len(self._rate_window) > 400:
            del self._rate_window[:200]

    def _unstable(self, t_expected: float | None = None) -> None:
        """NaN or a divergence MuJoCo caught: back to the last good state (or the keyframe,
        ``Recovery``) and hold there; the device hears of it (``on_unstable``)."""
        self.recovery.recover(t_expected, self.keyframe, self.pushes)
        self._held_still()
        self._rebase()
        if self._on_unstable is not None:
            self._on_unstable(self)

    def _held_still(self) -> None:
        """After the state was put back: no plans, setpoints that hold the pose."""
        self.holding.hold_initial()
        self.arbiter.clear()

    def _rebase(self) -> None:
        self._wall0 = time.monotonic()
        self._sim0 = self.data.time

    def _drain(self, urgent_only: bool = False) -> None:
        with self._lock:
            mail, self._urgent = self._urgent, []
            if not urgent_only:
                mail, self._mail = mail + self._mail, []
        if not mail:
            return
        for call in mail:
            call(self)
        if not self._closed:
            self.publish_snapshot()

    def _failed(self, exc: Exception) -> None:
        """An exception in the loop: hold every setpoint, record it, keep stepping."""
        self.errors += 1
        self.last_error = f'{type(exc).__name__}: {exc}'
        try:
            self.holding.hold_now(self.arbiter)
        except Exception:  # noqa: BLE001
            self.arbiter.clear()
        if self._on_error is not None:
            try:
                self._on_error(self, exc)
            except Exception:  # noqa: BLE001
                pass
        self._rebase()
        self.publish_snapshot()

    def _snap(self) -> Snapshot:
        d, hold = self.data, self.holding
        return Snapshot(time=d.time, wall=time.time(), step=self.nstep, qpos=d.qpos.copy(),
                        qvel=d.qvel.copy(), qfrc_actuator=d.qfrc_actuator.copy(),
                        ctrl=d.ctrl.copy(), setpoint=hold.setpoint.copy(),
                        xpos=d.xpos.copy(), xquat=d.xquat.copy(),
                        site_xpos=d.site_xpos.copy(), site_xmat=d.site_xmat.copy(),
                        sensordata=d.sensordata.copy(), mocap_pos=d.mocap_pos.copy(),
                        mocap_quat=d.mocap_quat.copy(), act=d.act.copy(),
                        paused=self._paused, moving=bool(self.arbiter.running),
                        target=self.arbiter.targets(hold.setpoint),
                        cam_xpos=d.cam_xpos.copy(), cam_xmat=d.cam_xmat.copy(),
                        plans=tuple(self.arbiter.running),
                        contacts=self.pushes.contacts(d), wrenches=self.pushes.table.active,
                        generation=self.generation, joint_setpoint=hold.joint_setpoint(),
                        position_mode=hold.pos_mode.copy())

    # --- health ---------------------------------------------------------------------------
    def health(self) -> dict:
        window = self._rate_window[-200:]
        rtf = None
        if len(window) >= 2 and window[-1][0] > window[0][0]:
            rtf = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])
        lag = 0.0
        if not self._paused and self._rtf > 0:
            lag = self._sim0 + (time.monotonic() - self._wall0) * self._rtf - self.data.time
        return {'sim_time': self.data.time, 'steps': self.nstep, 'measured_rtf': rtf,
                'target_rtf': self._rtf, 'lag_s': max(lag, 0.0), 'worst_lag_s': self.worst_lag,
                'overruns': self.overruns, 'paused': self._paused,
                'unstable_events': self.recovery.events, 'errors': self.errors,
                'last_error': self.last_error, 'alive': self._thread.is_alive(),
                'dropped_s': self.skipped, 'stalls': self.stalls}

    # --- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        with self._lock:
            mail, self._mail, self._urgent = self._urgent + self._mail, [], []
        for call in mail:   # requests that raced with close: answer them, do nothing
            call(_Closed())

    @property
    def closed(self) -> bool:
        return self._closed
