"""``SimRobot``: one simulated robot for a user's test, up and down in one object.

In-process (the default) it runs ``SimNode`` in a private rclpy context on its own ROS
domain, spun by one executor thread, beside a client node of its own (``node``) for the
test's publishers, subscribers and action clients. As a process (``process=True``) it starts
the installed ``sim_node`` executable in a process group of its own, on the same private
domain, and ends the whole group on close (SIGINT, then SIGKILL after a grace period).

Determinism (``deterministic=True``, the default, in-process): the node starts paused at
real-time factor 0; ``step`` advances a fixed number of physics steps; messages and goals
sent meanwhile are taken at the same simulated instant on every run. The checks judge what
the robot did independently of its controllers: ``joint_positions`` reads ``joint_states``
as any subscriber would, ``link_position`` is forward kinematics of those positions on a
private copy of the model, ``body_position`` the simulation's ground truth.
"""

from collections.abc import Callable, Sequence
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any, TYPE_CHECKING

import numpy as np

from ..joint_view import is_one_dof

if TYPE_CHECKING:     # the hints only: the device lives in the sim node
    from ..sim.device import Device

QUANTUM_S = 0.01                # deterministic stepping goes in slices of this much
DOMAIN_RANGE = (120, 229)       # private ROS domains, clear of 0 and the common low ones
READY_S = 60.0
_domains = itertools.count()


def free_domain_id() -> int:
    """A ROS domain for one robot: distinct per process and per call, so parallel tests
    (pytest-xdist workers, several CI jobs on one host) do not hear each other."""
    lo, hi = DOMAIN_RANGE
    return lo + (os.getpid() * 7 + next(_domains)) % (hi - lo)


class SimRobot:
    """A simulated robot for a test; see the module docstring.

    ``model`` (MJCF), ``robot_description`` (URDF path or text), ``controllers_file``,
    ``robots`` (robots file) and ``params`` (any other sim_node parameter) choose the robot,
    as sim_node's parameters do."""

    def __init__(self, *, model: str | None = None, robot_description: str | None = None,
                 controllers_file: str | None = None, robots: str | None = None,
                 params: dict[str, Any] | None = None, deterministic: bool = True,
                 process: bool = False, domain_id: int | None = None,
                 record: str | None = None, ready_s: float = READY_S) -> None:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor
        self.domain_id = free_domain_id() if domain_id is None else int(domain_id)
        self.deterministic = deterministic and not process
        self.process = process
        p: dict[str, Any] = {'web_viewer': 0, 'log_summary': False}
        for key, value in (('model', model), ('robot_description', robot_description),
                           ('controllers_file', controllers_file), ('robots', robots),
                           ('record', record)):
            if value:
                p[key] = value
        if self.deterministic:
            p.update(real_time_factor=0.0, start_paused=True)
        p.update(params or {})
        self.params = p
        self.sim = None               # the SimNode (in-process)
        self.proc: subprocess.Popen | None = None
        self._closed = False
        self._joints: dict[str, float] = {}
        self._joint_stamp = -1.0
        self._lock = threading.Lock()
        self.context = rclpy.Context()
        rclpy.init(context=self.context, args=[], domain_id=self.domain_id)
        try:
            self.executor = MultiThreadedExecutor(num_threads=3, context=self.context)
            if process:
                self._start_process(p)
            else:
                from rclpy.parameter import Parameter

                from ..ros.sim.sim_node import SimNode
                self.sim = SimNode(context=self.context, parameter_overrides=[
                    Parameter(k, value=v) for k, v in p.items()])
                self.executor.add_node(self.sim)
            self.node = rclpy.create_node(f'sim_robot_test_{os.getpid()}',
                                          context=self.context)
            self.executor.add_node(self.node)
            from sensor_msgs.msg import JointState
            self.node.create_subscription(JointState, 'joint_states', self._on_joints, 10)
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._spin, daemon=True,
                                            name='sim_robot-spin')
            self._thread.start()
            self._wait_ready(ready_s)
        except BaseException:
            self.close()
            raise

    # --- lifetime --------------------------------------------------------------------------
    def _start_process(self, p: dict[str, Any]) -> None:
        from ..ros.launch_args import sim_parameters  # noqa: F401 - the package is installed
        exe = shutil.which('sim_node') or _installed_sim_node()
        args = [exe, '--ros-args']
        for key, value in p.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            args += ['-p', f'{key}:={text}']
        env = dict(os.environ, ROS_DOMAIN_ID=str(self.domain_id), PYTHONUNBUFFERED='1')
        self._log = tempfile.NamedTemporaryFile('w+', prefix='sim_node_', suffix='.log',
                                                delete=False)
        self.proc = subprocess.Popen(args, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def _spin(self) -> None:
        while not self._stop.is_set() and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # noqa: BLE001 - an entity destroyed under the wait set
                pass

    def _wait_ready(self, budget):
        """Until this client hears joint_states (a real process) or sees the publisher (a
        paused simulation publishes when stepped): nothing steps meanwhile, so every run
        starts at the same simulated instant."""
        end = time.monotonic() + budget
        while time.monotonic() < end:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f'sim_node ended at start (rc {self.proc.returncode}): '
                                   + self.log_tail())
            if self._joint_stamp >= 0 or (self.deterministic and
                                          self.node.count_publishers('joint_states') > 0):
                return
            time.sleep(0.05)
        raise TimeoutError(f'the simulated robot did not publish joint_states within '
                           f'{budget:g} s' + (': ' + self.log_tail() if self.proc else ''))

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the node process's log (process mode)."""
        if self.proc is None:
            return ''
        self._log.flush()
        with open(self._log.name, encoding='utf-8', errors='replace') as handle:
            return handle.read()[-chars:]

    def close(self) -> None:
        """Stop everything this robot started: the spin thread, the nodes, the process
        group, the context. Safe to call twice and after a failed start."""
        if self._closed:
            return
        self._closed = True
        stop = getattr(self, '_stop', None)
        if stop is not None:
            stop.set()
            self._thread.join(10.0)
        executor = getattr(self, 'executor', None)
        if executor is not None:
            executor.shutdown(timeout_sec=2.0)
        for node in (getattr(self, 'node', None), self.sim):
            if node is not None:
                node.destroy_node()
        if self.proc is not None:
            _end_group(self.proc)
            self._log.close()
        if self.context.ok():
            import rclpy
            rclpy.shutdown(context=self.context)

    def __enter__(self) -> 'SimRobot':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- time ------------------------------------------------------------------------------
    @property
    def device(self) -> 'Device':
        """The simulated device (in-process only): ground truth and the model."""
        if self.sim is None:
            raise RuntimeError('the device is in another process (process=True): read its '
                               'topics and services instead')
        device = self.sim.device
        if device is None:
            raise RuntimeError('the simulated device is closed (the node has stopped)')
        return device

    @property
    def time(self) -> float:
        """Simulated seconds."""
        return float(self.device.snapshot.time)

    def step(self, seconds: float, *, settle: bool = True) -> float:
        """Advance the paused simulation by ``seconds`` of simulated time (deterministic
        mode), in slices of ``QUANTUM_S``: however a test groups its steps, the physics runs
        the same slices, so the same commands at the same simulated times give bit-identical
        states. Returns the simulated time. Messages sent before act from the first slice."""
        if not self.deterministic:
            raise RuntimeError('step() needs deterministic=True (a paused simulation)')
        dt = self.device.model.opt.timestep
        per = max(1, int(round(QUANTUM_S / dt)))
        if settle:
            self._settle()
        now = self.time
        for _ in range(max(1, int(round(seconds / (per * dt))))):
            now = self.device.step(per)
        return now

    def step_to(self, t: float) -> float:
        """Step until simulated time ``t`` (a fixed instant, whatever came before)."""
        left = t - self.time
        return self.step(left) if left > 1e-9 else self.time

    def _settle(self) -> None:
        """Let the executor take what the test sent before physics moves on (a message
        in flight over the loopback arrives within milliseconds)."""
        time.sleep(0.02)

    def run_until(self, predicate: Callable[[], bool], timeout: float, *,
                  every: float = QUANTUM_S, what: str = 'the condition') -> float:
        """Step (or, in real time, wait) until ``predicate()`` holds; the simulated time it
        took. Raises AssertionError naming ``what`` after ``timeout`` simulated seconds."""
        start = self.time if self.sim is not None else time.monotonic()
        if self.deterministic:
            self._settle()          # what the test sent before; then the slices run on
        while True:
            if predicate():
                now = self.time if self.sim is not None else time.monotonic()
                return now - start
            now = self.time if self.sim is not None else time.monotonic()
            if now - start > timeout:
                raise AssertionError(f'{what} did not hold within {timeout:g} s of '
                                     'simulated time')
            if self.deterministic:
                self.step(every, settle=False)
            else:
                time.sleep(every)

    # --- independent readings -------------------------------------------------------------
    def _on_joints(self, msg: Any) -> None:   # a sensor_msgs/JointState
        with self._lock:
            self._joints.update(zip(msg.name, msg.position, strict=False))
            self._joint_stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec

    def joint_positions(self, names: Sequence[str] | None = None) -> dict[str, float]:
        """The latest ``joint_states`` positions (all joints, or ``names``)."""
        with self._lock:
            got = dict(self._joints)
        if names is None:
            return got
        missing = [n for n in names if n not in got]
        if missing:
            raise AssertionError(f'joint_states has no {missing}; it has {sorted(got)}')
        return {n: got[n] for n in names}

    def link_position(self, link: str) -> np.ndarray:
        """Where ``link`` (a body) is by forward kinematics of the latest joint_states on a
        private copy of the model: what a test that trusts only the published joints sees."""
        import mujoco
        model = self.device.model
        data = mujoco.MjData(model)
        data.qpos[:] = self.device.snapshot.qpos     # free bodies where they are
        joints = self.joint_positions()
        for j in range(model.njnt):
            name = model.joint(j).name
            if name in joints and is_one_dof(model, j):
                data.qpos[model.jnt_qposadr[j]] = joints[name]
        mujoco.mj_kinematics(model, data)
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, link)
        if body < 0:
            raise AssertionError(f'no link {link!r} in the model')
        return data.xpos[body].copy()

    def body_position(self, name: str) -> np.ndarray:
        """Ground truth: where the body ``name`` is in the simulation now."""
        import mujoco
        body = mujoco.mj_name2id(self.device.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if body < 0:
            raise AssertionError(f'no body {name!r} in the world')
        return self.device.snapshot.xpos[body].copy()

    # --- common requests -------------------------------------------------------------------
    def follow_trajectory(self, joints: list[str], points: list[Sequence[float]],
                          durations: list[float], controller: str = 'arm_controller',
                          timeout: float = 30.0) -> Any:
        """Send a FollowJointTrajectory goal (positions at each duration) and step until its
        result; returns the result message."""
        from builtin_interfaces.msg import Duration
        from control_msgs.action import FollowJointTrajectory
        from rclpy.action import ActionClient
        from trajectory_msgs.msg import JointTrajectoryPoint

        from ..ros import conversions as cv
        client: ActionClient = ActionClient(self.node, FollowJointTrajectory,
                                            f'{controller}/follow_joint_trajectory')
        try:
            if not client.wait_for_server(timeout_sec=20.0):
                raise AssertionError(f'{controller}/follow_joint_trajectory is not served')
            goal = FollowJointTrajectory.Goal()
            goal.trajectory.joint_names = list(joints)
            for q, t in zip(points, durations, strict=True):
                goal.trajectory.points.append(JointTrajectoryPoint(
                    positions=[float(v) for v in q], time_from_start=cv.stamp(t, Duration)))
            sent = client.send_goal_async(goal)
            self._wait_wall(sent.done, 10.0, 'the goal response')
            handle = sent.result()
            if handle is None or not handle.accepted:
                raise AssertionError('the trajectory goal was rejected')
            result = handle.get_result_async()
            self.run_until(result.done, timeout, what='the trajectory result')
            answer = result.result()
            if answer is None:
                raise AssertionError('the trajectory action gave no result')
            return answer.result
        finally:
            client.destroy()

    def _wait_wall(self, predicate, seconds, what):
        end = time.monotonic() + seconds
        while not predicate():
            if time.monotonic() > end:
                raise AssertionError(f'{what} did not come within {seconds:g} s')
            time.sleep(0.01)

    def stop_recording(self) -> str | None:
        """End the recording started with ``record=`` (in-process); its folder."""
        recording = self.sim.recording if self.sim is not None else None
        return recording.stop() if recording is not None else None


def _installed_sim_node() -> str:
    from ament_index_python.packages import get_package_prefix
    return os.path.join(get_package_prefix('mujoco_hal_ros'), 'lib', 'mujoco_hal_ros',
                        'sim_node')


def _end_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGINT the process group (rclpy shuts down on it), then SIGKILL what is left."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(5.0)
