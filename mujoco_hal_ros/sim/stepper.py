"""The stepper: one thread that owns MjData and advances it in real time.

Callers never touch MjData. They post commands through one lock-guarded mailbox (the only
hand-off), and read the latest ``Snapshot``, a set of arrays copied after each chunk of
steps and swapped in by reference, so readers never block the physics and never see a
half-written state. A posted command changes the plans only through the stepper's own
methods (``take_over``, ``release``, ``hold_now``), and other threads ask about them through
the snapshot (``plans``, ``owns``), never the list the stepper thread rebinds. Steps run
in chunks: the setpoints for a whole chunk are computed with numpy in one go, so a running
goal costs a few microseconds per chunk, not per step.
"""

from concurrent.futures import Future
from dataclasses import dataclass
import functools
import math
import os
import threading
import time

import mujoco
from mujoco import rollout
import numpy as np

from ..description import servo_gains
from . import drives
from ..fastpath import sched
from ..sensors.contacts import active_contacts
from ..sensors.wrench import WrenchTable
from ..errors import ClosedError, DeviceError, NOT_PAUSED, STEPPER_DEAD, TIMEOUT

FULL_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS
ROLLOUT_MIN = 16     # steps in a chunk from which mujoco.rollout beats the Python loop
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
BAD_WARNINGS = (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS,
                mujoco.mjtWarning.mjWARN_BADQVEL, mujoco.mjtWarning.mjWARN_BADCTRL)


# Debug runs (the test suite sets it): the stepper-thread-only methods check that they run
# on the stepper thread, so a call that skipped the one door (``post``) fails where it is
# made instead of racing the physics. Off, the methods are left undecorated: no cost.
CHECK_THREADS = os.environ.get('MUJOCO_HAL_ROS_CHECK_THREADS', '') not in ('', '0')


def physics_thread_only(method):
    """Mark a Stepper method that only the stepper thread may call (checked in debug runs:
    ``MUJOCO_HAL_ROS_CHECK_THREADS=1``); before the thread starts and after it ends the
    caller owns the stepper alone, so those calls pass."""
    if not CHECK_THREADS:
        return method

    @functools.wraps(method)
    def checked(self, *args, **kwargs):
        thread = getattr(self, '_thread', None)
        if thread is not None and thread.is_alive() and threading.current_thread() is not thread:
            raise RuntimeError(
                f'Stepper.{method.__name__} runs on the physics thread only, called from '
                f'{threading.current_thread().name!r}: post it (device.on_physics(fn), or '
                'stepper.post(fn) inside sim/)')
        return method(self, *args, **kwargs)
    return checked


@dataclass
class Snapshot:
    """State after a chunk of steps; arrays are private copies, never written again."""

    time: float
    wall: float
    step: int
    qpos: np.ndarray
    qvel: np.ndarray
    qfrc_actuator: np.ndarray
    ctrl: np.ndarray
    setpoint: np.ndarray      # where each actuator's path is now
    xpos: np.ndarray
    xquat: np.ndarray
    site_xpos: np.ndarray
    site_xmat: np.ndarray
    sensordata: np.ndarray
    mocap_pos: np.ndarray
    mocap_quat: np.ndarray
    act: np.ndarray
    paused: bool
    moving: bool
    target: np.ndarray = None  # where each actuator's path ends (the goal it was given)
    cam_xpos: np.ndarray = None   # cameras in the world: tracking cameras move with the state
    cam_xmat: np.ndarray = None
    plans: tuple = ()          # the plans still running at ``time``
    contacts: np.ndarray = None   # active contacts (sensors.contacts) while asked for
    wrenches: tuple = ()       # the latched pushes (sensors.wrench.Wrench) at ``time``
    generation: int = 0        # the scene generation of the model these arrays belong to
    # The setpoints as joint positions (what a plan toward a joint goal starts from): the
    # setpoint, except that a velocity servo taking speeds gives its joint's position.
    joint_setpoint: np.ndarray = None
    position_mode: np.ndarray = None   # per actuator: a velocity servo held to a position


class _Closed:
    """Stands in for the stepper in requests that arrive while it closes."""

    def __getattr__(self, name):
        raise ClosedError('the device stepper')


class Stepper:
    """Real-time stepping with chunked setpoint paths, pause/step/reset and health."""

    def __init__(self, model, data, *, laws, real_time_factor=1.0,
                 start_paused=False, keyframe=None, chunk_time=0.004, on_chunk=None,
                 on_unstable=None, on_error=None, fast_chunk_wall=0.006, use_rollout=True):
        self.model, self.data = model, data
        self.keyframe = keyframe
        self._bind_drives(model, laws)
        self.setpoint = np.array(data.ctrl, dtype=float)
        self._plans = []                         # stepper thread only; readers: plans/owns
        self._lock = threading.Lock()
        self._mail = []
        self._urgent = []        # hold and the like: also taken between the chunks of a step(n)
        self._wake = threading.Event()
        self._closed = False
        self._paused = bool(start_paused)
        self._rtf = float(real_time_factor)
        self._chunk_steps = max(1, int(round(chunk_time / model.opt.timestep)))
        # At rtf 0 a chunk is sized by wall time (``fast_chunk_wall``), so the per-chunk
        # costs (mailbox, snapshot, checks, callbacks) stay a few % of the stepping itself.
        self._fast_wall = float(fast_chunk_wall)
        self._step_cost = None                   # wall seconds per step, smoothed
        self._on_chunk = on_chunk
        self._on_unstable = on_unstable
        self._on_error = on_error
        self.nstep = 0
        self.overruns = 0
        self.worst_lag = 0.0
        self.unstable_events = 0
        self.errors = 0
        self.last_error = None
        self._busy = None
        self.skipped = 0.0                       # simulated seconds given up after stalls
        self.stalls = 0                          # ... how many times
        self._bad_idx = np.array([int(w) for w in BAD_WARNINGS])
        self._use_rollout = use_rollout          # for a model swapped in later (swap_model)
        self._roller = None
        self._bind_state(model, data, laws.impedance)
        self.last_recovery = None     # 'last good state' or 'keyframe', after an instability
        self._rebase()
        self._rate_window = []
        self._wrenches = WrenchTable(model)     # latched pushes: push / clear_pushes
        self._want_contacts = False
        self.generation = 0                      # stamped on snapshots; swap_model sets it
        self.snapshot = self._snap()
        self._thread = threading.Thread(target=self._run, name='mujoco_hal_ros-stepper',
                                        daemon=True)
        self._thread.start()

    # --- the hand-off -------------------------------------------------------------------
    def post(self, fn, wait=False, timeout=10.0, urgent=False):
        """Run ``fn(stepper)`` on the stepper thread before the next chunk.

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
        box = {'state': 'queued'}

        def call(stepper):
            with self._lock:
                if box['state'] != 'queued':
                    return                      # withdrawn by a caller that gave up
                box['state'] = 'running'
            try:
                box['value'] = fn(stepper)
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

    def submit(self, fn):
        """``post`` without waiting: a ``concurrent.futures.Future`` of what ``fn`` returns
        (or raises), for callers that must not block, such as a ROS service coroutine."""
        job = Future()

        def call(stepper):
            if not job.set_running_or_notify_cancel():
                return
            try:
                job.set_result(fn(stepper))
            except BaseException as exc:  # noqa: B902 - handed back to the caller
                job.set_exception(exc)
        self.post(call)
        return job

    # --- controls -----------------------------------------------------------------------
    @property
    def paused(self):
        return self._paused

    @property
    def real_time_factor(self):
        return self._rtf

    def set_real_time_factor(self, rtf):
        def apply(s):
            s._rtf = rtf
            s._rebase()
        self.post(apply, wait=True)

    def pause(self, paused):
        def apply(s):
            s._paused = paused
            s._rebase()
        self.post(apply, wait=True)

    def step(self, n, timeout=None, wait=True):
        """Advance ``n`` steps while paused; the simulated time after them. Urgent requests
        (hold) run between chunks. With ``wait=False``, a Future of that time."""
        timeout = 60.0 + 1e-3 * n if timeout is None else timeout

        def apply(s):
            if not s._paused:
                raise DeviceError(NOT_PAUSED, 'step(n) runs only while paused; pause first')
            left = n
            s._busy = f'step({n})'
            try:
                while left > 0:
                    if s._closed:
                        raise ClosedError('the device stepper')
                    k = min(left, max(s._chunk_steps, STEP_CHUNK))
                    s._advance(k)
                    left -= k
                    s.publish_snapshot()
                    if s._on_chunk is not None:
                        s._on_chunk(s)
                    s._drain(urgent_only=True)
            finally:
                s._busy = None
            return s.snapshot.time
        if not wait:
            return self.submit(apply)
        return self.post(apply, wait=True, timeout=timeout)

    def reset(self, on_reset=None):
        """Back to the keyframe; simulated time keeps going forward."""
        def apply(s):
            s._reset_to_keyframe(s.data.time)
            out = on_reset(s) if on_reset else None
            s._rebase()
            s.publish_snapshot()
            return out
        return self.post(apply, wait=True)

    def initial_setpoint(self):
        """Setpoints that hold the current pose: joint positions for servos and torque
        motors, zero for velocity servos, the (keyframe's) ctrl for everything else."""
        sp = np.array(self.data.ctrl, dtype=float)
        m = self.model
        for a, (drive, qadr) in enumerate(self._drives):
            if drive in ('position', 'motor_impedance') and qadr >= 0:
                q = float(self.data.qpos[qadr])
                if drive == 'position' and m.actuator_ctrllimited[a]:
                    q = min(max(q, m.actuator_ctrlrange[a, 0]), m.actuator_ctrlrange[a, 1])
                sp[a] = q
            elif drive == 'velocity':
                sp[a] = 0.0
        return sp

    def _hold_initial(self):
        """``initial_setpoint`` replaces the setpoints; velocity servos take speeds again
        (a zero speed), as at the start."""
        self.setpoint = self.initial_setpoint()
        self._pos_mode[:] = False

    @physics_thread_only
    def hold_pose(self):
        """Setpoints that hold the current pose (``initial_setpoint``) replace the ones
        there are (stepper thread only); a copy of them."""
        self._hold_initial()
        return self.setpoint.copy()

    @physics_thread_only
    def hold_now(self):
        """Freeze every setpoint where its path is now and stop velocity servos
        (stepper thread only): holding means not moving."""
        now = self.data.time
        for plan in self._plans:
            self.setpoint[plan.actuators] = plan.sample([now])[0]
        self._plans = []
        vl = self._velocity_loop
        if vl is None:
            for a, (drive, _qadr) in enumerate(self._drives):
                if drive == 'velocity':
                    self.setpoint[a] = 0.0
        else:
            # A driver in position mode holds the position, not a zero speed that lets the
            # load drift the joint: where its path is, or where it is now if it had speeds.
            speeds = ~self._pos_mode[vl.actuators]
            self.setpoint[vl.actuators[speeds]] = self.data.qpos[vl.qadrs[speeds]]
            self._pos_mode[vl.actuators] = True
            self._stop_wheels(vl.rolling)

    @physics_thread_only
    def hold_actuators(self, actuators):
        """``hold_now`` for some actuators only (one robot of several in the world): their
        setpoints freeze where their paths are now, velocity servos among them hold their
        joints' positions, and every other actuator goes on as it was (stepper thread
        only)."""
        acts = np.asarray(sorted(set(int(a) for a in actuators)), dtype=int)
        if not acts.size:
            return
        now = self.data.time
        for plan in self._plans:
            mine = np.isin(plan.actuators, acts)
            if mine.any():
                self.setpoint[np.asarray(plan.actuators)[mine]] = plan.sample([now])[0][mine]
        self._plans = [p for p in self._plans if p.release(acts)]
        vl = self._velocity_loop
        if vl is None:
            for a in acts:
                if self._drives[a][0] == 'velocity':
                    self.setpoint[a] = 0.0
        else:
            ours = np.isin(vl.actuators, acts)
            speeds = ours & ~self._pos_mode[vl.actuators]
            self.setpoint[vl.actuators[speeds]] = self.data.qpos[vl.qadrs[speeds]]
            self._pos_mode[vl.actuators[ours]] = True
            self._stop_wheels(ours & vl.rolling)

    def _stop_wheels(self, which):
        """Drive wheels among the held velocity servos (``which``, over the velocity loop's
        actuators) hold a zero speed instead of a position, as a drive controller stops a
        base: a position loop sized on the wheel's own inertia overshot the robot's mass
        behind it at the torque limit and rocked TIAGo back and forth for seconds."""
        vl = self._velocity_loop
        self.setpoint[vl.actuators[which]] = 0.0
        self._pos_mode[vl.actuators[which]] = False

    @physics_thread_only
    def joint_setpoint(self):
        """The setpoints as joint positions (stepper thread only): what a move or a
        trajectory starts from. A velocity servo taking speeds gives its joint's position."""
        sp = self.setpoint.copy()
        vl = self._velocity_loop
        if vl is not None:
            speeds = ~self._pos_mode[vl.actuators]
            sp[vl.actuators[speeds]] = self.data.qpos[vl.qadrs[speeds]]
        return sp

    @physics_thread_only
    def goal_setpoint(self):
        """The setpoints in their goal channels' meaning (stepper thread only): what a
        ``set_goals`` ramp starts from. A velocity servo held to a position gives the speed
        it is commanded now."""
        sp = self.setpoint.copy()
        vl = self._velocity_loop
        if vl is not None:
            held = self._pos_mode[vl.actuators]
            sp[vl.actuators[held]] = self.data.ctrl[vl.actuators[held]]
        return sp

    # --- pushes and contacts -----------------------------------------------------------
    @physics_thread_only
    def push(self, checked):
        """Latch a checked wrench (``sensors.wrench.check``) from now (stepper thread
        only); the ``Wrench``."""
        return self._wrenches.add(dict(checked), self.data.time)

    @physics_thread_only
    def clear_pushes(self, bodies=None):
        """End the wrenches on ``bodies`` (ids; None: all) now (stepper thread only); the
        ids of the bodies that had one."""
        gone = self._wrenches.clear(bodies)
        self._wrenches.apply(self.data)     # zero what the cleared ones wrote
        return gone

    def report_contacts(self, on):
        """Whether snapshots carry the active contacts (``Snapshot.contacts``); any thread:
        a flag the stepper reads after each chunk."""
        self._want_contacts = bool(on)

    # --- plans: written on the stepper thread, read anywhere through the snapshot ---------
    @physics_thread_only
    def take_over(self, plan, positions=False):
        """Run ``plan``; older plans give up its actuators (stepper thread only).
        ``positions``: the plan gives joint positions (a move, a trajectory), which
        velocity servos then follow in position mode; otherwise it gives each actuator's
        own ctrl meaning (a speed for a velocity servo)."""
        self.release(plan.actuators)
        self.set_position_mode(plan.actuators, positions)
        self._plans.append(plan)

    @physics_thread_only
    def release(self, actuators, hold_at=None):
        """Older plans give up these actuators (a plan left with none ends); with
        ``hold_at`` (joint positions), their setpoints stay there (stepper thread only)."""
        self._plans = [p for p in self._plans if p.release(actuators)]
        if hold_at is not None:
            self.set_position_mode(actuators, True)
            self.setpoint[actuators] = hold_at

    def position_mode(self):
        """Per actuator, whether it is a velocity servo held to joint positions (stepper
        thread only; readers elsewhere: ``Snapshot.position_mode``)."""
        return self._pos_mode.copy()

    @physics_thread_only
    def set_position_mode(self, actuators, positions):
        """Whether these actuators' setpoints and paths are joint positions (velocity
        servos then run the position loop) or their own ctrl meaning (stepper thread only):
        what carries a held velocity servo over to a model swapped in."""
        vl = self._velocity_loop
        if vl is not None:
            acts = np.asarray(actuators, dtype=int)
            self._pos_mode[acts[np.isin(acts, vl.actuators)]] = bool(positions)

    @physics_thread_only
    def running_plans(self):
        """The plans as they are at this instant, between two requests (stepper thread
        only: a request posted before this one may have changed them since the snapshot)."""
        return tuple(self._plans)

    @property
    def plans(self):
        """The plans running at the latest snapshot's time; any thread."""
        return self.snapshot.plans

    def owns(self, plan):
        """Whether ``plan`` still ran at the latest snapshot; any thread. The plans and the
        time come from one snapshot, so a plan that ended is never mistaken for one taken
        over (it is missing only once the snapshot's time is past its end)."""
        return any(p is plan for p in self.snapshot.plans)

    @physics_thread_only
    def publish_snapshot(self):
        """Copy the state into a new snapshot now (stepper thread only), so what a request
        changed reads back at once; returns it."""
        self.snapshot = self._snap()
        return self.snapshot

    def _bind_state(self, model, data, impedance):
        """The rollout and recovery buffers sized for ``model``: at start and for a model
        swapped in. Chunks of servo setpoints step in C through mujoco.rollout (no Python per
        step); it resets mocap bodies unless they ride along as controls (they do), and
        applied forces and equality switches (then the plain loop runs: _roll_safe)."""
        self._rollout = self._use_rollout and impedance is None
        if self._rollout and self._roller is None:
            self._roller = rollout.Rollout(nthread=0)            # this thread
        self._roll_spec = int(mujoco.mjtState.mjSTATE_CTRL)
        if model.nmocap:
            self._roll_spec |= int(mujoco.mjtState.mjSTATE_MOCAP_POS |
                                   mujoco.mjtState.mjSTATE_MOCAP_QUAT)
        self._nstate = mujoco.mj_stateSize(model, FULL_STATE)
        self._state0 = np.empty(self._nstate)
        self._roll_state = self._roll_sensor = None
        self._warn0 = self._bad_warnings()
        # The state after the last chunk that passed the checks: where an instability goes
        # back to (the keyframe only when that state diverges again at once).
        self._good = np.empty(self._nstate)
        mujoco.mj_getState(model, data, self._good, FULL_STATE)
        self._bad_streak = 0

    def _bind_drives(self, model, laws):
        """What the drives (``laws``, a ``drives.Drives``) need from ``model``: at start and
        for a model swapped in."""
        impedance, hold_torque = laws.impedance, laws.hold_torque
        self._drives = laws.drives               # per actuator: position/motor_impedance/...
        self._velocity_loop = laws.velocity_loop  # a VelocityLoop, or None
        self._guard = laws.clamp_guard          # a ClampGuard, or None
        self._guarding = False                  # a guarded servo is about to flip
        self._guard_mass = np.zeros((model.nv, model.nv)) if self._guard is not None \
            else None
        # True where a velocity servo's setpoint is a joint position (position mode); a
        # servo starts taking speeds (a zero speed), as its goal channel does.
        self._pos_mode = np.zeros(model.nu, dtype=bool)
        self._hold_torque = hold_torque          # a HoldTorque, or None
        # Servos whose gains follow the configuration (the ones the URDF import built)
        self._schedule = servo_gains.schedule_of(model)
        self._schedule_full = np.zeros((model.nv, model.nv)) \
            if self._schedule is not None else None
        self._gravity_data = mujoco.MjData(model) if hold_torque is not None else None
        if hold_torque is not None:
            self._ff_vel = np.zeros(len(hold_torque.actuators))  # the path's speed, last step
            # above[b, c]: body b is c or one of c's ancestors (links a contact holds up)
            self._above = np.zeros((model.nbody, model.nbody), dtype=bool)
            for c in range(model.nbody):
                b = c
                while b > 0:
                    self._above[c, b] = True
                    b = int(model.body_parentid[b])
        self._impedance = impedance             # an Impedance, or None
        if impedance is not None:
            self._imp_vel = np.zeros(len(impedance.actuators))  # the path's speed, last step
            self._imp_mass = np.zeros((model.nv, model.nv))
            # The dofs of the kinematic trees the motors are in: the mass matrix couples
            # nothing else to them (a free object on the table is a tree of its own).
            tree = model.body_rootid[model.dof_bodyid]
            self._imp_tree = np.flatnonzero(np.isin(tree, tree[impedance.dofs]))
            self._imp_local = np.searchsorted(self._imp_tree, impedance.dofs)
            self._imp_eye = np.eye(len(self._imp_tree))[self._imp_local].T

    # --- the model swapped at run time (scene edits) -------------------------------------
    @physics_thread_only
    def swap_model(self, model, data, *, laws, keyframe, plans, generation):
        """Step ``model``/``data`` from the next chunk on (stepper thread only, between
        chunks: nothing steps meanwhile). Everything sized or indexed by the old model is
        rebuilt here; ``plans`` (indexed by the new model's actuators) keep running, the
        setpoints hold the new pose until the caller sets them, latched pushes end (their
        bodies are another model's), and snapshots carry ``generation`` from now on."""
        chunk_time = self._chunk_steps * self.model.opt.timestep
        self.model, self.data = model, data
        self.keyframe = keyframe
        self._bind_drives(model, laws)
        self._chunk_steps = max(1, int(round(chunk_time / model.opt.timestep)))
        self._step_cost = None
        self._bind_state(model, data, laws.impedance)
        self._wrenches = WrenchTable(model)
        self._plans = list(plans)
        self._hold_initial()
        self.generation = int(generation)
        self._rebase()
        return self.publish_snapshot()

    # --- the loop -----------------------------------------------------------------------
    def _rebase(self):
        self._wall0 = time.monotonic()
        self._sim0 = self.data.time

    def _bad_warnings(self):
        return int(self.data.warning.number[self._bad_idx].sum())

    def _drain(self, urgent_only=False):
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

    def _run(self):
        # At real time this thread wakes every step and holds the GIL between steps: when a
        # busy core makes it wait for a slice, every other thread of the process waits with
        # it. A short slice wakes it sooner without slowing rtf-0 stepping (sched.py;
        # bench/README.md).
        sched.short_slice()
        while not self._closed:
            dt = self.model.opt.timestep       # a swapped-in model may have its own
            self._wake.clear()
            try:
                self._drain()
                if self._closed:
                    break
                if self._paused:
                    self._wake.wait(0.05)
                    continue
                if self._rtf <= 0:
                    n = self._fast_chunk()
                else:
                    wall = time.monotonic()
                    due = self._sim0 + (wall - self._wall0) * self._rtf
                    lag = due - self.data.time
                    n = int(lag / dt + 1e-9)
                    if n <= 0:
                        self._wake.wait(min(dt, (dt - lag) / self._rtf))
                        continue
                    if lag > 2 * dt * self._chunk_steps:
                        self.overruns += 1
                    self.worst_lag = max(self.worst_lag, lag)
                    if lag > MAX_LAG_S * self._rtf:
                        # A stall: give up the debt, run one chunk, pace from now on.
                        self.skipped += lag
                        self.stalls += 1
                        self._rebase()
                        n = self._chunk_steps
                    n = min(n, self._chunk_steps * 4)
                self._advance(n)
                self.publish_snapshot()
                if self._on_chunk is not None:
                    self._on_chunk(self)
            except Exception as exc:  # noqa: BLE001 - the thread must survive a bad callback
                self._failed(exc)

    def _fast_chunk(self):
        """Steps per chunk at rtf 0: about ``fast_chunk_wall`` of wall time."""
        if self._step_cost is None:
            return self._chunk_steps
        n = int(self._fast_wall / max(self._step_cost, 1e-7))
        return max(self._chunk_steps, min(n, 5000))

    def _failed(self, exc):
        """An exception in the loop: hold every setpoint, record it, keep stepping."""
        self.errors += 1
        self.last_error = f'{type(exc).__name__}: {exc}'
        try:
            self.hold_now()
        except Exception:  # noqa: BLE001
            self._plans = []
        if self._on_error is not None:
            try:
                self._on_error(self, exc)
            except Exception:  # noqa: BLE001
                pass
        self._rebase()
        self.publish_snapshot()

    def _advance(self, n):
        model, data = self.model, self.data
        dt = model.opt.timestep
        t_start = data.time
        w_start = time.perf_counter()
        ctrl = data.ctrl
        vl = self._velocity_loop
        held_q = vl is not None and bool(self._pos_mode[vl.actuators].any())
        before = self.setpoint.copy() if self._impedance is not None \
            or self._hold_torque is not None or held_q else None
        if self._plans:
            times = t_start + dt * np.arange(1, n + 1)
            rows = np.empty((n, model.nu))
            rows[:] = self.setpoint
            smooth = np.zeros(model.nu, dtype=bool)
            for plan in self._plans:
                rows[:, plan.actuators] = plan.sample(times)
                T = getattr(plan, 'T', plan.t_end - plan.t0)
                smooth[plan.actuators] = np.asarray(T) > dt
            self.setpoint[:] = rows[-1]
            self._plans = [p for p in self._plans if p.t_end > times[-1]]
        else:
            rows = None
        if self._schedule is not None:
            self._reschedule()
        hold_ff = self._feed_forward()
        if hold_ff is not None:
            acts_ff, ctrl_ff = hold_ff
            if rows is not None:
                # The servo's damping pulls against a moving setpoint: lead it by the
                # path's own speed (none across a jump), as a driver's velocity feed-forward.
                ht = self._hold_torque
                moving = smooth[acts_ff]
                speed = np.diff(np.vstack([before[acts_ff], rows[:, acts_ff]]), axis=0) / dt
                accel = np.diff(np.vstack([self._ff_vel, speed]), axis=0) / dt
                self._ff_vel = speed[-1] * moving
                lead = (ht.kv * speed + ht.inertia * accel) / ht.kp * moving
                rows[:, acts_ff] = np.clip(rows[:, acts_ff] + ctrl_ff + lead, ht.lo, ht.hi)
            else:
                self._ff_vel = np.zeros(len(acts_ff))
        imp = self._impedance
        step = mujoco.mj_step
        pushes = self._wrenches if self._wrenches else None
        speeds = self._velocity_speeds(before, rows, smooth if rows is not None else None) \
            if held_q else None
        held = self.setpoint
        if rows is None and hold_ff is not None:
            held = self.setpoint.copy()
            held[acts_ff] = np.clip(held[acts_ff] + ctrl_ff, self._hold_torque.lo,
                                    self._hold_torque.hi)
        guard = self._guard if self._guarding else None
        if guard is not None:
            mobility = drives.guard_mobility(guard, model, data, self._guard_mass)
        if imp is None and speeds is None and pushes is None and guard is None:
            if rows is None:
                # one call for the whole chunk: the same steps as a loop, but the GIL is
                # released once, not per step; with a loop the state thread's Python kept
                # the physics thread waiting at every step (bench/README.md)
                ctrl[:] = held
                step(model, data, n)
            elif self._rollout and n >= ROLLOUT_MIN and self._roll_safe():
                self._roll(rows)
            else:
                for row in rows:
                    ctrl[:] = row
                    step(model, data)
        else:
            # Laws that read the joints every step: the torque motors' joint loop, velocity
            # servos held to positions, latched wrenches (xfrc_applied turns with the bodies
            # and ends mid-chunk), servos kept off a limit cycle (drives.keep_implicit).
            vel = acc = None
            if imp is not None:
                acts = imp.actuators
                if rows is not None:
                    # The path's own speed and acceleration, so the joint loop tracks a
                    # moving setpoint instead of lagging it.
                    vel = np.diff(np.vstack([before[acts], rows[:, acts]]), axis=0) / dt
                    acc = np.diff(np.vstack([self._imp_vel, vel]), axis=0) / dt
                    self._imp_vel = vel[-1] * smooth[acts]
                    vel = vel * smooth[acts]                       # none across a jump
                    acc = acc * smooth[acts]
                else:
                    self._imp_vel = np.zeros(len(acts))
            for i in range(n):
                target = rows[i] if rows is not None else self.setpoint
                ctrl[:] = target if rows is not None else held
                if imp is not None:
                    ctrl[acts] = self._joint_torque(
                        target[acts], None if vel is None else vel[i],
                        None if acc is None else acc[i]) / imp.gain
                if speeds is not None:
                    vacts, v_ref = speeds
                    ctrl[vacts] = self._joint_speed(target[vacts], None if v_ref is None
                                                    else v_ref[i])
                if guard is not None:
                    drives.keep_implicit(guard, data, ctrl, mobility)
                if pushes is not None:
                    pushes.apply(data)
                step(model, data)
        if self._guard is not None:
            # a guarded servo about to flip: the next chunk checks it every step
            self._guarding = drives.cycling(self._guard, model, data, self._guard_mass)
        if pushes is not None:
            pushes.expire(data)
        self.nstep += n
        # Wall cost per step, for sizing rtf-0 chunks: the fastest recent chunk, drifting up
        # slowly, so a chunk that lost the CPU to another process does not shrink the next.
        cost = (time.perf_counter() - w_start) / n
        self._step_cost = cost if self._step_cost is None else \
            min(cost, self._step_cost * 1.02)
        self._rate_window.append((time.monotonic(), data.time))
        if len(self._rate_window) > 400:
            del self._rate_window[:200]
        # MuJoCo resets MjData itself on a bad position, velocity or acceleration and counts
        # a warning (time then is not where n steps put it, unless it was near 0); NaN that
        # slipped past its checks shows in the sums. All cheap enough for every chunk.
        expected = t_start + n * dt
        if abs(data.time - expected) > 0.5 * dt or self._bad_warnings() != self._warn0 or \
                not math.isfinite(float(data.qpos.sum()) + float(data.qvel.sum())):
            self._unstable(expected)
        else:
            mujoco.mj_getState(model, data, self._good, FULL_STATE)
            self._bad_streak = 0

    def _joint_torque(self, q_ref, v_ref, a_ref):
        """The torque motors' torques for one step (``drives.joint_torque``)."""
        return drives.joint_torque(self._impedance, self.model, self.data, self._imp_tree,
                                   self._imp_local, self._imp_mass, self._imp_eye, q_ref,
                                   v_ref, a_ref)

    def _velocity_speeds(self, before, rows, smooth):
        """(velocity servos held to positions, their path speeds per step or None) for
        a chunk: the path's own speed is the outer loop's feed-forward (none across a
        jump), as a driver's position mode sends it."""
        vl = self._velocity_loop
        held = self._pos_mode[vl.actuators]
        vacts = vl.actuators[held]
        if rows is None:
            return vacts, None
        dt = self.model.opt.timestep
        v_ref = np.diff(np.vstack([before[vacts], rows[:, vacts]]), axis=0) / dt
        return vacts, v_ref * smooth[vacts]

    def _joint_speed(self, q_ref, v_ref):
        """The speed commands of the velocity servos held to positions ``q_ref`` (the ones
        ``_velocity_speeds`` gives) for one step (``drives.joint_speed``)."""
        vl = self._velocity_loop
        return drives.joint_speed(vl, self._pos_mode[vl.actuators], self.data, q_ref, v_ref)

    def _reschedule(self):
        """Size the scheduled servos' gains from the mass matrix of the last step, and
        give the hold feed-forward the same stiffness and damping."""
        m, d = self.model, self.data
        self._schedule.apply(m, d, self._schedule_full)
        ht = self._hold_torque
        if ht is not None:
            ht.kp[:] = m.actuator_gainprm[ht.actuators, 0]
            ht.kv[:] = np.maximum(-m.actuator_biasprm[ht.actuators, 2], 0.0) + \
                m.dof_damping[ht.dofs]

    def _feed_forward(self):
        """(actuators, ctrl offsets) that make position servos hold against gravity at the
        current pose, or None (``drives.feed_forward``). Computed once a chunk."""
        if self._hold_torque is None:
            return None
        return drives.feed_forward(self._hold_torque, self.model, self.data,
                                   self._gravity_data, self._above)

    def _roll_safe(self):
        """mujoco.rollout resets applied forces and equality switches it is not given:
        anything that set them (now or one day) gets the plain loop instead."""
        d, m = self.data, self.model
        return not (d.qfrc_applied.any() or d.xfrc_applied.any()
                    or (m.neq and not np.array_equal(d.eq_active, m.eq_active0)))

    def _roll(self, rows):
        """Step through a chunk's setpoints in C (``mujoco.rollout``): the same steps as
        ``ctrl[:] = row; mj_step`` per row, without Python between them."""
        m, d = self.model, self.data
        n = len(rows)
        if self._roll_state is None or self._roll_state.shape[1] < n:
            size = max(n, 256)
            self._roll_state = np.empty((1, size, self._nstate))
            self._roll_sensor = np.empty((1, size, m.nsensordata))
        mujoco.mj_getState(m, d, self._state0, FULL_STATE)
        controls = rows
        if m.nmocap:   # rollout resets mocap unless it is part of the controls
            controls = np.hstack([rows, np.broadcast_to(d.mocap_pos.ravel(), (n, 3 * m.nmocap)),
                                  np.broadcast_to(d.mocap_quat.ravel(), (n, 4 * m.nmocap))])
        self._roller.rollout(
            [m], [d], self._state0[None], np.ascontiguousarray(controls)[None],
            control_spec=self._roll_spec, skip_checks=True, nstep=n,
            initial_warmstart=d.qacc_warmstart[None].copy(),
            state=self._roll_state[:, :n], sensordata=self._roll_sensor[:, :n])

    def _unstable(self, t_expected=None):
        """NaN or a divergence MuJoCo caught: back to the last good state and hold there.

        The scene stays as it was a chunk ago (objects, the arm's pose); only what was
        moving stops. When that state diverges again at once, the keyframe instead.
        MuJoCo resets MjData itself on a bad acceleration (time back to 0); simulated time
        is put back where the chunk should have ended, so it never runs backwards.
        """
        self.unstable_events += 1
        t = self.data.time
        t = max(t if np.isfinite(t) else 0.0, t_expected or 0.0)
        if self._bad_streak == 0:
            self._restore_good(t)
        else:
            self._reset_to_keyframe(t)
            self.last_recovery = 'keyframe'
        self._bad_streak += 1
        self._rebase()
        if self._on_unstable is not None:
            self._on_unstable(self)

    def _restore_good(self, t):
        """MjData back to the last good state at simulated time ``t``, holding there."""
        mujoco.mj_setState(self.model, self.data, self._good, FULL_STATE)
        self.data.qvel[:] = 0.0          # what diverged was moving: it starts again at rest
        self.data.time = t
        mujoco.mj_forward(self.model, self.data)
        self._hold_initial()
        self._plans = []
        self._warn0 = self._bad_warnings()
        self.last_recovery = 'last good state'

    def _reset_to_keyframe(self, t):
        """MjData back to the keyframe (or the model's defaults) at simulated time ``t``,
        holding there: no plans, setpoints that hold the pose, warnings counted from here."""
        if self.keyframe is not None:
            mujoco.mj_resetDataKeyframe(self.model, self.data, self.keyframe)
        else:
            mujoco.mj_resetData(self.model, self.data)
        self._wrenches.clear()
        self._wrenches.release(self.data)
        self.data.time = t
        mujoco.mj_forward(self.model, self.data)
        self._hold_initial()
        self._plans = []
        self._warn0 = self._bad_warnings()

    def _targets(self):
        target = self.setpoint.copy()
        for plan in self._plans:
            target[plan.actuators] = plan.end
        return target

    def _snap(self):
        d = self.data
        return Snapshot(time=d.time, wall=time.time(), step=self.nstep, qpos=d.qpos.copy(),
                        qvel=d.qvel.copy(), qfrc_actuator=d.qfrc_actuator.copy(),
                        ctrl=d.ctrl.copy(), setpoint=self.setpoint.copy(),
                        xpos=d.xpos.copy(), xquat=d.xquat.copy(),
                        site_xpos=d.site_xpos.copy(), site_xmat=d.site_xmat.copy(),
                        sensordata=d.sensordata.copy(), mocap_pos=d.mocap_pos.copy(),
                        mocap_quat=d.mocap_quat.copy(), act=d.act.copy(),
                        paused=self._paused, moving=bool(self._plans),
                        target=self._targets(), cam_xpos=d.cam_xpos.copy(),
                        cam_xmat=d.cam_xmat.copy(), plans=tuple(self._plans),
                        contacts=active_contacts(self.model, d) if self._want_contacts
                        else None, wrenches=self._wrenches.active,
                        generation=self.generation, joint_setpoint=self.joint_setpoint(),
                        position_mode=self._pos_mode.copy())

    # --- health ---------------------------------------------------------------------------
    def health(self):
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
                'unstable_events': self.unstable_events, 'errors': self.errors,
                'last_error': self.last_error, 'alive': self._thread.is_alive(),
                'dropped_s': self.skipped, 'stalls': self.stalls}

    # --- lifetime -------------------------------------------------------------------------
    def close(self):
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
    def closed(self):
        return self._closed
