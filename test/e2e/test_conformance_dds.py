"""The over-DDS slice of the conformance battery: zoo models under sim_node as a process.

Everything is judged from what crosses the wire, never from the device's own numbers: the
test loads the MJCF itself, puts the received ``joint_states`` positions on its joints by
name and runs ``mj_kinematics``, so a wrong joint order, unit or stale message fails here
even when the device believes it arrived. Targets are reachable by construction: forward
kinematics of a random joint configuration within 70 % of each joint's range.
"""

import threading
import time

import mujoco
import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from helpers import SpunNodes, START_S, wait_for  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.action import MoveTo as MoveToAction  # noqa: E402

TOLERANCE_M = 2e-3        # the device's move_to tolerance (1 mm) plus a 100 Hz sample's lag
HOLD_RAD = 1e-3
RANGE_FRACTION = 0.7
ARMS = [('panda', 'hand'), ('ur5e', 'wrist_3_link')]


class Client(SpunNodes):
    join_s = 5.0

    def __init__(self):
        super().__init__(lambda ctx: [rclpy.create_node('conformance_client', context=ctx)],
                         lambda ctx: SingleThreadedExecutor(context=ctx))
        self.node = self.nodes[0]
        self.latest = {}
        self.lock = threading.Lock()
        self.states = []
        self._recording = None
        self.node.create_subscription(JointState, '/joint_states', self._on_state, 50)
        self.spin(240.0)

    def _on_state(self, msg):
        with self.lock:
            self.states.append(msg)
            del self.states[:-500]
            if self._recording is not None:
                self._recording.append(msg)

    def state(self, timeout=START_S):
        assert wait_for(lambda: self.states, timeout), 'no joint_states'
        with self.lock:
            return self.states[-1]

    def states_for(self, seconds):
        with self.lock:
            self._recording = []
        time.sleep(seconds)
        with self.lock:
            got, self._recording = self._recording, None
        return got


@pytest.fixture
def client():
    c = Client()
    yield c
    c.close()


class Kinematics:
    """The test's own copy of the model: joint_states -> body positions."""

    def __init__(self, path):
        self.model = mujoco.MjModel.from_xml_path(path)
        self.data = mujoco.MjData(self.model)

    def joint(self, name):
        return mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, name)

    def body_position(self, names, positions, body):
        m, d = self.model, self.data
        d.qpos[:] = m.qpos0
        for name, q in zip(names, positions, strict=True):
            d.qpos[m.jnt_qposadr[self.joint(name)]] = q
        mujoco.mj_kinematics(m, d)
        return d.xpos[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, body)].copy()

    def reachable_target(self, names, body, rng):
        """FK of a random configuration within RANGE_FRACTION of every limited hinge."""
        m = self.model
        qs = []
        for name in names:
            j = self.joint(name)
            lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-np.pi, np.pi)
            mid, half = (lo + hi) / 2, (hi - lo) / 2
            qs.append(mid + RANGE_FRACTION * half * rng.uniform(-1, 1))
        return self.body_position(names, qs, body)


def _move(client, body, target, timeout=60.0):
    mover = ActionClient(client.node, MoveToAction, '/move_to')
    try:
        assert mover.wait_for_server(timeout_sec=START_S), '/move_to not served'
        goal = MoveToAction.Goal(site=body)
        goal.target.x, goal.target.y, goal.target.z = (float(v) for v in target)
        handle = client.wait(mover.send_goal_async(goal), 30.0)
        assert handle.accepted
        return client.wait(handle.get_result_async(), timeout)
    finally:
        mover.destroy()


def _arm_joints(kin, state):
    """The hinge joints of joint_states (fingers on slides do not move the body)."""
    hinge = int(mujoco.mjtJoint.mjJNT_HINGE)
    return [n for n in state.name if int(kin.model.jnt_type[kin.joint(n)]) == hinge]


@pytest.mark.parametrize('name, body', ARMS)
def test_arm_move_to_and_hold_judged_from_joint_states(start_sim, spawn, client, name, body):
    path = menagerie.model_path(name)
    if path is None:
        pytest.skip(f'{name} not installed')
    proc = start_sim(f'model:={path}')
    try:
        first = client.state()
    except AssertionError:
        pytest.fail(f'no joint_states; sim_node said:\n{spawn.output(proc)[-3000:]}')
    kin = Kinematics(path)
    assert set(first.name) <= {mujoco.mj_id2name(kin.model, mujoco.mjtObj.mjOBJ_JOINT, j)
                               for j in range(kin.model.njnt)}
    rng = np.random.default_rng(14)
    joints = _arm_joints(kin, first)
    for _ in range(2):
        target = kin.reachable_target(joints, body, rng)
        res = _move(client, body, target)
        assert res.status == GoalStatus.STATUS_SUCCEEDED, (res.result.code, res.result.message)
        assert res.result.code == 'DONE'
        time.sleep(0.1)                   # the joint_states sample after DONE
        s = client.state()
        miss = np.linalg.norm(kin.body_position(s.name, s.position, body) - target)
        assert miss < TOLERANCE_M, f'{body} {miss * 1e3:.2f} mm from {target} at DONE'
        time.sleep(2.0)
        s = client.state()
        miss = np.linalg.norm(kin.body_position(s.name, s.position, body) - target)
        assert miss < TOLERANCE_M, f'{body} drifted to {miss * 1e3:.2f} mm 2 s after DONE'
    holder = client.node.create_client(Trigger, '/hold')
    assert holder.wait_for_service(10.0)
    assert client.wait(holder.call_async(Trigger.Request()), 10.0).success
    time.sleep(0.2)
    held = client.states_for(1.0)
    assert len(held) > 20
    q = np.array([m.position for m in held])
    worst = np.abs(q - q[0]).max(axis=0)
    assert worst.max() < HOLD_RAD, dict(zip(held[0].name, worst.round(6), strict=True))


@pytest.mark.parametrize('keyframe', [None, 'home'])
def test_go1_stands_for_five_seconds(start_sim, spawn, client, keyframe):
    from nav_msgs.msg import Odometry
    path = menagerie.model_path('go1')
    if path is None:
        pytest.skip('go1 not installed')
    heights = []
    client.node.create_subscription(Odometry, '/odom',
                                    lambda m: heights.append(m.pose.pose.position.z), 50)
    proc = start_sim(f'model:={path}', *([f'keyframe:={keyframe}'] if keyframe else []))
    try:
        state = client.state()
    except AssertionError:
        pytest.fail(f'no joint_states; sim_node said:\n{spawn.output(proc)[-3000:]}')
    assert len(state.name) == 12                  # the free joint is not a joint_states entry
    assert wait_for(lambda: heights, START_S), 'no odom'
    time.sleep(2.0)                               # settle onto its feet
    start = len(heights)
    time.sleep(5.0)
    window = np.array(heights[start:])
    assert len(window) > 100
    assert window.min() > 0.2, f'base down to {window.min():.3f} m'
    assert np.ptp(window) < 0.02, f'base height wandered {np.ptp(window):.3f} m'
