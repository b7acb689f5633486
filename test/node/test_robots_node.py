"""Two URDF arms from a ``robots`` file in one sim_node, each a device under its namespace.

A UR5 (``left``) and a Panda (``right``) from example-robot-data in the empty world. What
each robot did is judged from its own published ``<ns>/joint_states`` (forward kinematics
on a separate MjData), never from the node's answers alone.
"""

import os
import threading
import time

import mujoco
import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')
si = pytest.importorskip('simulation_interfaces.srv', reason='simulation_interfaces is not '
                         'installed and its stand-in was not built (run scripts/setup.sh)')

from control_msgs.action import FollowJointTrajectory  # noqa: E402
from helpers import wait_for  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from simulation_interfaces.msg import Result  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from swap_helpers import trajectory  # noqa: E402

from mujoco_hal_ros.action import MoveTo as MoveToAction  # noqa: E402
from mujoco_hal_ros.conformance import urdf_zoo  # noqa: E402
from mujoco_hal_ros.srv import Describe, MoveTo as MoveToSrv, SetGoals  # noqa: E402

ARM = """<mujoco><compiler angle="radian"/><worldbody>
<body name="base"><geom type="cylinder" size="0.03 0.02"/>
<body name="link1" pos="0 0 0.04"><joint name="j1" axis="0 0 1" range="-2 2"/>
<geom type="capsule" fromto="0 0 0 0 0 0.2" size="0.015"/>
<body name="link2" pos="0 0 0.2"><joint name="j2" axis="0 1 0" range="-2 2"/>
<geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.012"/><site name="tip" pos="0.2 0 0"/>
</body></body></body></worldbody><actuator>
<position name="a1" joint="j1" kp="40" dampratio="1" ctrlrange="-2 2"/>
<position name="a2" joint="j2" kp="40" dampratio="1" ctrlrange="-2 2"/></actuator></mujoco>"""


def _urdf(name):
    found = [p for p in urdf_zoo.urdf_paths() if p.endswith(name)]
    if not found:
        pytest.skip(urdf_zoo.SHARE_MISSING)
    return found[0]


@pytest.fixture(scope='module')
def two(tmp_path_factory):
    from helpers import SpunNodes
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter

    from mujoco_hal_ros.ros.sim.sim_node import SimNode
    folder = tmp_path_factory.mktemp('robots')
    path = folder / 'robots.yaml'
    path.write_text(f"""robots:
  - namespace: left
    urdf: {_urdf('ur_description/urdf/ur5_robot.urdf')}
    position: [0.0, 0.45, 0.0]
  - namespace: right
    urdf: {_urdf('panda_description/urdf/panda.urdf')}
    position: [0.0, -0.45, 0.0]
""")
    old = os.environ.get('ROS_PACKAGE_PATH')
    os.environ['ROS_PACKAGE_PATH'] = urdf_zoo.share_dir()       # package:// of the meshes
    try:
        h = SpunNodes(lambda ctx: [
            SimNode(context=ctx, parameter_overrides=[Parameter('robots', value=str(path)),
                                                      Parameter('publish_rate', value=100.0)]),
            rclpy.create_node('robots_test_client', context=ctx)],
            lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
    finally:
        if old is None:
            os.environ.pop('ROS_PACKAGE_PATH', None)
        else:
            os.environ['ROS_PACKAGE_PATH'] = old
    h.spin(300.0)
    try:
        yield h
    finally:
        h.close()


def _latest(h, topic, after=None, timeout=10.0):
    """The first JointState on ``topic`` stamped after ``after`` (sim seconds)."""
    got, seen = [], threading.Event()

    def on_msg(msg):
        t = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        if not seen.is_set() and (after is None or t > after):
            got.append(msg)
            seen.set()
    node = h.nodes[-1]
    sub = node.create_subscription(JointState, topic, on_msg, 10)
    try:
        seen.wait(timeout)
    finally:
        node.destroy_subscription(sub)
    return got[0] if got else None


def _fk(h, js, body, ns):
    """Where ``body`` (the world model's name) is for the joint positions robot ``ns``
    published under its own joint names (a separate MjData)."""
    model = h.nodes[0].device.model
    data = mujoco.MjData(model)
    data.qpos[:] = h.nodes[0].device.snapshot.qpos     # joints of the other robot too
    for name, q in zip(js.name, js.position, strict=True):
        data.qpos[model.jnt_qposadr[model.joint(f'{ns}/{name}').id]] = q
    mujoco.mj_kinematics(model, data)
    return data.xpos[model.body(body).id].copy()


def test_each_robot_publishes_only_its_joints(two):
    left = _latest(two, 'left/joint_states')
    right = _latest(two, 'right/joint_states')
    assert left is not None and right is not None
    # each robot's own names, as its URDF has them (a real arm's driver publishes these)
    assert list(left.name) == ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint',
                               'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint']
    assert list(right.name)[:2] == ['panda_joint1', 'panda_joint2']
    assert not any('/' in n for n in list(left.name) + list(right.name))
    # the world has no joints of its own: the robots' joint_states carry them all
    assert _latest(two, 'joint_states', timeout=1.0) is None
    desc = two.call(Describe, 'right/describe', Describe.Request())
    assert 'right' in desc.device and desc.channels
    assert not any(c.name.startswith('right/') for c in desc.channels)


def _still(h, topic, speed=2e-3, timeout=30.0):
    """The first ``topic`` message with every joint slower than ``speed`` (rad/s): the
    arms spawn at their zero pose and settle onto their servos first."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        js = _latest(h, topic, after=h.nodes[0].device.snapshot.time)
        if js is not None and np.abs(np.array(js.velocity)).max() < speed:
            return js
    raise AssertionError(f'{topic} still moving after {timeout} s')


def test_a_trajectory_moves_one_arm_while_the_other_holds_still(two):
    before = _still(two, 'left/joint_states')
    right = _latest(two, 'right/joint_states')
    arm = [n for n in right.name if 'finger' not in n]
    start = np.array([right.position[list(right.name).index(n)] for n in arm])
    goal = start + np.array([0.3, -0.2, 0.2, -0.2, 0.2, 0.3, -0.3])[:len(arm)]
    client = ActionClient(two.nodes[-1], FollowJointTrajectory,
                          'right/arm_controller/follow_joint_trajectory')
    try:
        assert client.wait_for_server(timeout_sec=10.0)
        g = FollowJointTrajectory.Goal(trajectory=trajectory(arm, [(2.0, goal)]))
        handle = two.wait(client.send_goal_async(g), 10.0)
        assert handle.accepted
        result = two.wait(handle.get_result_async(), 30.0)
        assert result.result.error_code == 0, result.result.error_string
    finally:
        client.destroy()
    after = _latest(two, 'right/joint_states', after=two.nodes[0].device.snapshot.time)
    got = np.array([after.position[list(after.name).index(n)] for n in arm])
    assert np.abs(got - goal).max() < 0.02
    left = _latest(two, 'left/joint_states', after=two.nodes[0].device.snapshot.time)
    # the trajectory turned the Panda's joints 0.2-0.3 rad; the UR5 only settles on
    assert np.abs(np.array(left.position) - np.array(before.position)).max() < 5e-3


def test_move_to_on_one_arm_judged_from_its_joint_states(two):
    before = _still(two, 'right/joint_states')
    target = np.array([0.35, 0.45, 0.45])
    res = two.call(MoveToSrv, 'left/move_to', MoveToSrv.Request(
        target=_point(target), wait=True), timeout=40.0)
    assert res.success and res.code == 'DONE', res.message
    t = two.nodes[0].device.snapshot.time
    left = _latest(two, 'left/joint_states', after=t)
    tool = 'left/' + two.nodes[0].device.robots.get('left').tool()
    model = two.nodes[0].device.model
    if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, tool) >= 0:
        pytest.fail(f'expected a body tool on the UR5, got site {tool}')
    assert np.linalg.norm(_fk(two, left, tool, 'left') - target) < 2e-3
    right = _latest(two, 'right/joint_states', after=t)
    assert np.abs(np.array(right.position) - np.array(before.position)).max() < 5e-3
    # the action too, and a target for the other arm's tool is refused
    client = ActionClient(two.nodes[-1], MoveToAction, 'right/move_to')
    try:
        assert client.wait_for_server(timeout_sec=10.0)
        g = MoveToAction.Goal(target=_point((0.4, -0.45, 0.4)))
        handle = two.wait(client.send_goal_async(g), 10.0)
        result = two.wait(handle.get_result_async(), 40.0)
        assert result.result.code == 'DONE', result.result.message
        g.site = 'left/tool0'
        handle = two.wait(client.send_goal_async(g), 10.0)
        result = two.wait(handle.get_result_async(), 10.0)
        assert result.result.code == 'UNKNOWN_NAME'
    finally:
        client.destroy()


def test_goals_and_hold_stay_with_their_robot(two):
    bad = two.call(SetGoals, 'left/set_goals', SetGoals.Request(
        channels=['right/panda_joint1_goal'], values=[0.1]))
    assert not bad.success and list(bad.codes) == ['UNKNOWN_NAME']
    assert two.call(Trigger, 'left/hold', Trigger.Request()).success
    names = {n for n, _ in two.nodes[-1].get_service_names_and_types()}
    assert {'/left/hold', '/right/hold', '/hold', '/reset', '/step'} <= names
    assert '/left/reset' not in names and '/left/step' not in names    # the world's


def test_a_robot_spawned_under_a_namespace_becomes_a_device_and_goes_with_its_entity(two):
    req = si.SpawnEntity.Request(name='arm', entity_namespace='third')
    req.entity_resource.resource_string = ARM
    req.initial_pose.pose.position.x = 0.6
    req.initial_pose.pose.orientation.w = 1.0
    r = two.call(si.SpawnEntity, 'spawn_entity', req)
    assert r.result.result == Result.RESULT_OK, r.result.error_message
    js = _latest(two, 'third/joint_states')
    assert js is not None and list(js.name) == ['j1', 'j2']     # the MJCF's own names
    res = two.call(MoveToSrv, 'third/move_to', MoveToSrv.Request(
        target=_point((0.7760, 0.0544, 0.1621)), wait=True), timeout=40.0)
    assert res.code == 'DONE', res.message
    d = two.call(si.DeleteEntity, 'delete_entity', si.DeleteEntity.Request(entity='third/arm'))
    assert d.result.result == Result.RESULT_OK, d.result.error_message
    assert two.nodes[0].device.robots.names() == ['left', 'right']
    node = two.nodes[-1]
    assert wait_for(lambda: '/third/move_to' not in {
        n for n, _ in node.get_service_names_and_types()}, 10.0)
    assert wait_for(lambda: node.count_publishers('/third/joint_states') == 0, 10.0)
    assert _latest(two, 'left/joint_states', after=two.nodes[0].device.snapshot.time)


def _point(xyz):
    from geometry_msgs.msg import Point
    return Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))


def test_a_robots_launch_opens_an_empty_world():
    """No robots file and no model: the bench arm as before; robots alone: the empty
    world (a floor) that they join."""
    from mujoco_hal_ros.ros.sim import params as P
    defaults = {name: P.TABLE.params[name].default for name in P.TABLE.names()}
    assert P.device_arguments(P.sim_params(defaults))[1].endswith('bench_arm.xml')
    with_robots = P.sim_params(dict(defaults, robots='/x.yaml'))
    assert P.device_arguments(with_robots) == (None, P.device_arguments(with_robots)[1])
    assert P.device_arguments(with_robots)[1].endswith('world.xml')


HOBBY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'models',
                     'hobby_arm.urdf')
HOBBY_CONTROLLERS = os.path.join(os.path.dirname(HOBBY), 'hobby_arm_controllers.yaml')
HOBBY_ARM = ['shoulder_pan', 'shoulder_lift', 'elbow_flex', 'wrist_flex', 'wrist_roll']


@pytest.fixture(scope='module')
def twins(tmp_path_factory):
    """Two copies of one arm URDF, each with the real arm's own controllers file and
    gripper joint, under left/ and right/."""
    from helpers import SpunNodes
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter

    from mujoco_hal_ros.ros.sim.sim_node import SimNode
    path = tmp_path_factory.mktemp('twins') / 'cell.yaml'
    entry = f'    urdf: {HOBBY}\n    controllers_file: {HOBBY_CONTROLLERS}\n'
    # left: the gripper joint from the controllers file; right: gripper_joint (the same)
    path.write_text('robots:\n  - namespace: left\n' + entry + '    position: [0, 0.3, 0]\n'
                    '  - namespace: right\n' + entry + '    position: [0, -0.3, 0]\n'
                    '    gripper_joint: left_finger_joint\n')
    # under /cell: the module's other node serves left/ and right/ at the root; frame_prefix
    # empty, so the frames are the robots' own prefix only (left/base_link)
    h = SpunNodes(lambda ctx: [
        SimNode(context=ctx, namespace='cell',
                parameter_overrides=[Parameter('robots', value=str(path)),
                                     Parameter('publish_rate', value=100.0),
                                     Parameter('frame_prefix', value='')]),
        rclpy.create_node('twins_test_client', namespace='cell', context=ctx)],
        lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
    h.spin(300.0)
    try:
        yield h
    finally:
        h.close()


def _send(h, client, goal, timeout=30.0):
    assert client.wait_for_server(timeout_sec=10.0)
    handle = h.wait(client.send_goal_async(goal), 10.0)
    assert handle.accepted
    return h.wait(handle.get_result_async(), timeout).result


def _positions(js, names):
    return np.array([js.position[list(js.name).index(n)] for n in names])


def test_two_copies_of_one_arm_are_driven_by_its_own_controllers_file_and_names(twins):
    """The unchanged controllers file and joint names of the real arm drive each copy;
    judged from each robot's own joint_states."""
    node = twins.nodes[0]
    for ns in ('left', 'right'):
        js = _latest(twins, f'{ns}/joint_states')
        assert list(js.name) == HOBBY_ARM + ['gripper', 'left_finger_joint',
                                             'right_finger_joint']
        assert node.get_parameter(f'{ns}.arm_controller.joints').value == HOBBY_ARM
        assert node.get_parameter(f'{ns}.arm_controller.constraints.shoulder_pan.goal'
                                  ).value == pytest.approx(0.02)
        assert node.get_parameter(f'{ns}.gripper_controller.joint').value == \
            'left_finger_joint'
        assert node.get_parameter(f'{ns}.gripper_controller.goal_tolerance').value == \
            pytest.approx(0.003)                          # the file's gripper block
    before_right = _latest(twins, 'right/joint_states')
    goal = np.array([0.4, -0.3, 0.5, 0.3, -0.2])
    client = ActionClient(twins.nodes[-1], FollowJointTrajectory,
                          'left/arm_controller/follow_joint_trajectory')
    try:
        result = _send(twins, client, FollowJointTrajectory.Goal(
            trajectory=trajectory(HOBBY_ARM, [(1.5, goal)])))
        assert result.error_code == 0, result.error_string
        after = _latest(twins, 'left/joint_states', after=node.device.snapshot.time)
        assert np.abs(_positions(after, HOBBY_ARM) - goal).max() < 0.03
        right = _latest(twins, 'right/joint_states', after=node.device.snapshot.time)
        assert np.abs(_positions(right, HOBBY_ARM)
                      - _positions(before_right, HOBBY_ARM)).max() < 5e-3
        # the world model's prefixed names are not the robot's: refused, and why reaches
        # the client in the result (the log has it too)
        bad = _send(twins, client, FollowJointTrajectory.Goal(trajectory=trajectory(
            [f'left/{j}' for j in HOBBY_ARM], [(1.0, goal)])))
        assert bad.error_code == FollowJointTrajectory.Result.INVALID_JOINTS
        assert 'left/shoulder_pan' in bad.error_string and 'shoulder_pan' in bad.error_string
    finally:
        client.destroy()


def _finger_gap(h, ns):
    """The distance between robot ``ns``'s finger links, by forward kinematics from its
    published joint_states (a separate MjData)."""
    js = _latest(h, f'{ns}/joint_states', after=h.nodes[0].device.snapshot.time)
    model = h.nodes[0].device.model
    data = mujoco.MjData(model)
    data.qpos[:] = h.nodes[0].device.snapshot.qpos
    for name, q in zip(js.name, js.position, strict=True):
        data.qpos[model.jnt_qposadr[model.joint(f'{ns}/{name}').id]] = q
    mujoco.mj_kinematics(model, data)
    return float(np.linalg.norm(data.xpos[model.body(f'{ns}/left_finger').id]
                                - data.xpos[model.body(f'{ns}/right_finger').id]))


@pytest.mark.parametrize('ns, other', [('right', 'left'), ('left', 'right')])
def test_each_copy_s_gripper_moves_its_own_fingers(twins, ns, other):
    from control_msgs.action import GripperCommand
    client = ActionClient(twins.nodes[-1], GripperCommand,
                          f'{ns}/gripper_controller/gripper_cmd')
    try:
        other_before = _finger_gap(twins, other)
        closed = _send(twins, client, GripperCommand.Goal(
            command=GripperCommand.Goal().command.__class__(position=0.0, max_effort=5.0)))
        gap_closed = _finger_gap(twins, ns)
        opened = _send(twins, client, GripperCommand.Goal(
            command=GripperCommand.Goal().command.__class__(position=0.03, max_effort=5.0)))
        gap_open = _finger_gap(twins, ns)
    finally:
        client.destroy()
    assert closed.reached_goal and opened.reached_goal
    assert gap_open - gap_closed == pytest.approx(0.06, abs=0.005)     # both fingers, 30 mm
    assert _finger_gap(twins, other) == pytest.approx(other_before, abs=1e-3)


def test_tf_frames_carry_the_robot_prefix_and_no_empty_segment(twins):
    from tf2_msgs.msg import TFMessage
    frames, seen = set(), threading.Event()

    def on_tf(msg):
        for t in msg.transforms:
            frames.update((t.header.frame_id, t.child_frame_id))
        if {'left/base_link', 'right/base_link', 'left/left_finger'} <= frames:
            seen.set()
    node = twins.nodes[-1]
    sub = node.create_subscription(TFMessage, '/tf', on_tf, 10)
    try:
        seen.wait(10.0)
    finally:
        node.destroy_subscription(sub)
    assert {'left/base_link', 'right/base_link', 'left/left_finger',
            'right/right_finger'} <= frames, sorted(frames)
    assert not [f for f in frames if '//' in f or f.startswith('/') or f.endswith('/')]


def test_a_panda_spawned_under_a_namespace_starts_at_its_home_keyframe(two):
    """simulation_interfaces' spawn with an entity_namespace: the robot starts at its
    model's home keyframe (read here from the file), every joint within its range, as
    robots-file robots do; at qpos0 Panda's joint4 was outside its range."""
    from mujoco_hal_ros import menagerie
    try:
        path = menagerie.model_path('panda')
    except Exception as exc:  # noqa: BLE001 - the test extra is not installed
        pytest.skip(f'no Menagerie Panda: {exc}')
    if path is None:
        pytest.skip('no Menagerie Panda')
    alone = mujoco.MjModel.from_xml_path(path)
    key = alone.key('home').id
    home = {alone.joint(j).name: float(alone.key_qpos[key, alone.jnt_qposadr[j]])
            for j in range(alone.njnt)}
    req = si.SpawnEntity.Request(name='panda', entity_namespace='second')
    req.entity_resource.uri = path
    req.initial_pose.pose.position.x = 1.5
    req.initial_pose.pose.orientation.w = 1.0
    r = two.call(si.SpawnEntity, 'spawn_entity', req, timeout=60.0)
    assert r.result.result == Result.RESULT_OK, r.result.error_message
    try:
        js = _latest(two, 'second/joint_states', timeout=20.0)
        assert js is not None
        got = dict(zip(js.name, js.position, strict=True))
        assert set(got) == set(home)
        for name, q in home.items():
            assert got[name] == pytest.approx(q, abs=2e-3), name
            j = alone.joint(name).id
            lo, hi = alone.jnt_range[j]
            assert lo - 1e-6 <= got[name] <= hi + 1e-6, name
    finally:
        d = two.call(si.DeleteEntity, 'delete_entity',
                     si.DeleteEntity.Request(entity='second/panda'))
        assert d.result.result == Result.RESULT_OK, d.result.error_message
