"""The stepper: one thread that owns MjData and advances it in real time.

Callers never touch MjData. They post commands through one lock-guarded mailbox (the only
hand-off), and read the latest ``Snapshot``, a set of arrays copied after each chunk of
steps and swapped in by reference, so readers never block the physics and never see a
half-written state. Steps run in chunks: the setpoints for a whole chunk are computed with
numpy in one go, so a running goal costs a few microseconds per chunk, not per step.
"""

from dataclasses import dataclass
import threading
import time

import mujoco
import numpy as np

from .errors import ClosedError, DeviceError, NOT_PAUSED

BAD_WARNINGS = (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS,
                mujoco.mjtWarning.mjWARN_BADQVEL)


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
    setpoint: np.ndarray
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


class Stepper:
    """Real-time stepping with chunked setpoint paths, pause/step/reset and health."""

    def __init__(self, model, data, *, drives, impedance=None, real_time_factor=1.0,
                 start_paused=False, keyframe=None, chunk_time=0.004, on_chunk=None,
                 on_unstable=None):
        self.model, self.data = model, data
        self.keyframe = keyframe
        self._drives = drives                    # per actuator: position/motor_impedance/...
        self._impedance = impedance              # (actuator ids, dof ids, kp, kd, gear)
        self.setpoint = np.array(data.ctrl, dtype=float)
        self.plans = []
        self._lock = threading.Lock()
        self._mail = []
        self._wake = threading.Event()
        self._closed = False
        self._paused = bool(start_paused)
        self._rtf = float(real_time_factor)
        self._chunk_steps = max(1, int(round(chunk_time / model.opt.timestep)))
        self._on_chunk = on_chunk
        self._on_unstable = on_unstable
        self.nstep = 0
        self.overruns = 0
        self.worst_lag = 0.0
        self.unstable_events = 0
        self._warn0 = self._bad_warnings()
        self._rebase()
        self._rate_window = []
        self.snapshot = self._snap()
        self._thread = threading.Thread(target=self._run, name='mujoco_hal_ros-stepper',
                                        daemon=True)
        self._thread.start()

    # --- the hand-off -------------------------------------------------------------------
    def post(self, fn, wait=False, timeout=10.0):
        """Run ``fn(stepper)`` on the stepper thread before the next chunk."""
        if self._closed:
            raise ClosedError('the device stepper')
        done = threading.Event() if wait else None
        box = {}

        def call(stepper):
            try:
                box['value'] = fn(stepper)
            except BaseException as exc:  # noqa: B902 - handed back to the caller
                box['error'] = exc
            finally:
                if done is not None:
                    done.set()
        with self._lock:
            self._mail.append(call)
        self._wake.set()
        if done is None:
            return None
        if not done.wait(timeout):
            raise DeviceError('TIMEOUT', f'the stepper did not answer within {timeout} s')
        if 'error' in box:
            raise box['error']
        return box.get('value')

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

    def step(self, n, timeout=60.0):
        def apply(s):
            if not s._paused:
                raise DeviceError(NOT_PAUSED, 'step(n) runs only while paused; pause first')
            s._advance(n)
            s.snapshot = s._snap()
            return s.snapshot.time
        return self.post(apply, wait=True, timeout=timeout)

    def reset(self, on_reset=None):
        """Back to the keyframe; simulated time keeps going forward."""
        def apply(s):
            t = s.data.time
            if s.keyframe is not None:
                mujoco.mj_resetDataKeyframe(s.model, s.data, s.keyframe)
            else:
                mujoco.mj_resetData(s.model, s.data)
            s.data.time = t
            mujoco.mj_forward(s.model, s.data)
            s.setpoint = s.initial_setpoint()
            s.plans = []
            s._warn0 = s._bad_warnings()
            if on_reset:
                on_reset(s)
            s._rebase()
            s.snapshot = s._snap()
        self.post(apply, wait=True)

    def initial_setpoint(self):
        """Setpoints that hold the current pose: joint positions for servos, else ctrl."""
        sp = np.array(self.data.ctrl, dtype=float)
        if self.keyframe is None:
            for a, (drive, qadr) in enumerate(self._drives):
                if drive in ('position', 'motor_impedance') and qadr >= 0:
                    sp[a] = self.data.qpos[qadr]
        if self._impedance is not None:
            acts, _dofs, _kp, _kd, _gear, qadrs = self._impedance
            sp[acts] = self.data.qpos[qadrs]
        return sp

    def hold_now(self):
        """Freeze every setpoint where its path is now (stepper thread only)."""
        now = self.data.time
        for plan in self.plans:
            self.setpoint[plan.actuators] = plan.sample([now])[0]
        self.plans = []

    def add_plan(self, plan):
        """Take over the plan's actuators from older plans (stepper thread only)."""
        self.plans = [p for p in self.plans if p.release(plan.actuators)]
        self.plans.append(plan)

    # --- the loop -----------------------------------------------------------------------
    def _rebase(self):
        self._wall0 = time.monotonic()
        self._sim0 = self.data.time

    def _bad_warnings(self):
        return sum(int(self.data.warning[w].number) for w in BAD_WARNINGS)

    def _drain(self):
        with self._lock:
            mail, self._mail = self._mail, []
        for call in mail:
            call(self)

    def _run(self):
        dt = self.model.opt.timestep
        while not self._closed:
            self._wake.clear()
            self._drain()
            if self._closed:
                break
            if self._paused:
                self._wake.wait(0.05)
                continue
            if self._rtf <= 0:
                n = self._chunk_steps
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
                n = min(n, self._chunk_steps * 4)
            self._advance(n)
            self.snapshot = self._snap()
            if self._on_chunk is not None:
                self._on_chunk(self)

    def _advance(self, n):
        model, data = self.model, self.data
        dt = model.opt.timestep
        if self.plans:
            times = data.time + dt * np.arange(1, n + 1)
            rows = np.empty((n, model.nu))
            rows[:] = self.setpoint
            for plan in self.plans:
                rows[:, plan.actuators] = plan.sample(times)
            self.setpoint[:] = rows[-1]
            self.plans = [p for p in self.plans if p.t_end > data.time + n * dt]
        else:
            rows = None
        imp = self._impedance
        if imp is None:
            if rows is None:
                data.ctrl[:] = self.setpoint
                for _ in range(n):
                    mujoco.mj_step(model, data)
            else:
                for i in range(n):
                    data.ctrl[:] = rows[i]
                    mujoco.mj_step(model, data)
        else:
            acts, dofs, kp, kd, gear, qadrs = imp
            for i in range(n):
                target = rows[i] if rows is not None else self.setpoint
                data.ctrl[:] = target
                torque = (kp * (target[acts] - data.qpos[qadrs]) - kd * data.qvel[dofs]
                          + data.qfrc_bias[dofs])
                data.ctrl[acts] = torque / gear
                mujoco.mj_step(model, data)
        self.nstep += n
        self._rate_window.append((time.monotonic(), data.time))
        if len(self._rate_window) > 400:
            del self._rate_window[:200]
        if self._bad_warnings() != self._warn0 or not np.isfinite(data.qpos).all():
            self._unstable()

    def _unstable(self):
        """NaN or a divergence MuJoCo caught: back to the keyframe and hold there."""
        self.unstable_events += 1
        t = self.data.time
        if self.keyframe is not None:
            mujoco.mj_resetDataKeyframe(self.model, self.data, self.keyframe)
        else:
            mujoco.mj_resetData(self.model, self.data)
        self.data.time = t if np.isfinite(t) else 0.0
        mujoco.mj_forward(self.model, self.data)
        self.setpoint = self.initial_setpoint()
        self.plans = []
        self._warn0 = self._bad_warnings()
        self._rebase()
        if self._on_unstable is not None:
            self._on_unstable(self)

    def _snap(self):
        d = self.data
        return Snapshot(time=d.time, wall=time.time(), step=self.nstep, qpos=d.qpos.copy(),
                        qvel=d.qvel.copy(), qfrc_actuator=d.qfrc_actuator.copy(),
                        ctrl=d.ctrl.copy(), setpoint=self.setpoint.copy(),
                        xpos=d.xpos.copy(), xquat=d.xquat.copy(),
                        site_xpos=d.site_xpos.copy(), site_xmat=d.site_xmat.copy(),
                        sensordata=d.sensordata.copy(), mocap_pos=d.mocap_pos.copy(),
                        mocap_quat=d.mocap_quat.copy(), act=d.act.copy(),
                        paused=self._paused, moving=bool(self.plans))

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
                'unstable_events': self.unstable_events}

    # --- lifetime -------------------------------------------------------------------------
    def close(self):
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    @property
    def closed(self):
        return self._closed
