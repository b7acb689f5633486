"""sim_node with a wheeled robot's own URDF and controllers file: the drive controller's
topics, types and frames as ros2_controllers serves them, judged against ground truth."""

import contextlib
import math
import os
import subprocess
import sys
import time

import mujoco
import pytest

rclpy = pytest.importorskip('rclpy')
pybullet_data = pytest.importorskip('pybullet_data')

from geometry_msgs.msg import Twist  # noqa: E402
from helpers import SpinThread, wait_for  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from mujoco_hal_ros.ros.sim import sim_node  # noqa: E402,F401  (sets headless GL first)
from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONTROLLERS = os.path.join(HERE, '..', 'models', 'mobile', 'husky_controllers.yaml')
NAME = 'husky_velocity_controller'


@pytest.fixture(scope='module')
def husky_urdf(tmp_path_factory):
    """The Husky's URDF as its launch file hands it over: xacro's output."""
    src = os.path.join(pybullet_data.getDataPath(), 'husky', 'husky.urdf')
    text = subprocess.run([sys.executable, '-c', 'import xacro; xacro.main()', src],
                          capture_output=True, text=True, check=True).stdout
    # the meshes are relative to the description's folder
    text = text.replace('filename="meshes/', f'filename="{os.path.dirname(src)}/meshes/')
    path = tmp_path_factory.mktemp('husky') / 'husky.urdf'
    path.write_text(text)
    return str(path)


@contextlib.contextmanager
def served(ctx, client_name, **params):
    """sim_node with ``params`` and a client node, spun by one executor thread; both
    destroyed after."""
    node = SimNode(context=ctx, parameter_overrides=[
        Parameter(k, value=v) for k, v in dict(params, web_viewer=0).items()])
    client = rclpy.create_node(client_name, context=ctx)
    ex = rclpy.executors.MultiThreadedExecutor(num_threads=3, context=ctx)
    ex.add_node(node)
    ex.add_node(client)
    spinner = SpinThread(ex, 180.0)
    try:
        yield node, client
    finally:
        spinner.stop(5.0)
        ex.shutdown(timeout_sec=2.0)
        client.destroy_node()
        node.destroy_node()


def drive(node, pub, msg, seconds):
    """Publish ``msg`` at 20 Hz for ``seconds`` of simulated time, then wait until the
    timeout and the limits brought the base to rest."""
    dev = node.device
    t_end = dev.snapshot.time + seconds
    while dev.snapshot.time < t_end:
        pub.publish(msg)
        time.sleep(0.05)
    assert wait_for(lambda: dev.snapshot.time > t_end + 1.5, 20.0)


def twist(x=0.0, turn=0.0):
    msg = Twist()
    msg.linear.x, msg.angular.z = x, turn
    return msg


def test_cmd_vel_drives_it_odom_and_tf_follow(ctx, husky_urdf):
    with served(ctx, 'mobile_client', robot_description=husky_urdf,
                controllers_file=CONTROLLERS) as (node, client):
        odoms, tfs = [], []
        client.create_subscription(Odometry, f'{NAME}/odom', odoms.append, 10)
        client.create_subscription(TFMessage, '/tf', lambda m: tfs.extend(
            (t.header.frame_id, t.child_frame_id) for t in m.transforms), 100)
        pub = client.create_publisher(Twist, f'{NAME}/cmd_vel', 10)   # use_stamped_vel false
        dev = node.device
        body = mujoco.mj_name2id(dev.model, mujoco.mjtObj.mjOBJ_BODY, 'base_footprint')
        assert wait_for(lambda: pub.get_subscription_count() > 0, 20.0)
        p0 = dev.snapshot.xpos[body].copy()
        drive(node, pub, twist(0.4), 4.0)
        assert wait_for(lambda: len(odoms) > 5, 10.0)
        last = odoms[-1]
        assert last.header.frame_id == 'odom' and last.child_frame_id == 'base_footprint'
        assert last.pose.covariance[35] == pytest.approx(0.01)
        # ground truth from simulation_interfaces, as a test harness would read it
        from simulation_interfaces.srv import GetEntityState
        srv = client.create_client(GetEntityState, 'get_entity_state')
        assert srv.wait_for_service(timeout_sec=10.0)
        future = srv.call_async(GetEntityState.Request(entity='base_footprint'))
        assert wait_for(future.done, 10.0)
        truth = future.result().state.pose.position
        odom = odoms[-1].pose.pose.position
        assert math.hypot(truth.x - p0[0], truth.y - p0[1]) > 0.8
        assert math.hypot(odom.x - (truth.x - p0[0]), odom.y - (truth.y - p0[1])) < 0.1
        # the ground truth's own odom -> base is off /tf: one parent per frame
        parents = {child: parent for parent, child in tfs}
        assert parents['base_footprint'] == 'odom'
        # hostile commands: refused, counted, the node runs on
        for bad in (float('nan'), float('inf'), 1e308):
            pub.publish(twist(turn=bad))
        assert wait_for(lambda: node.mobile.parts[0].refused >= 3, 10.0)
        assert dev.stepper.health()['alive']


def test_unknown_controller_type_stops_the_start_in_one_line(ctx, husky_urdf, tmp_path):
    bad = tmp_path / 'controllers.yaml'
    with open(CONTROLLERS, encoding='utf-8') as src:
        bad.write_text(src.read().replace('joint_state_broadcaster/JointStateBroadcaster',
                                          'my_pkg/Teleporter'))
    from mujoco_hal_ros.errors import DeviceError
    with pytest.raises(DeviceError) as err:
        SimNode(context=ctx, parameter_overrides=[
            Parameter('robot_description', value=husky_urdf),
            Parameter('controllers_file', value=str(bad)),
            Parameter('web_viewer', value=0)])
    assert 'my_pkg/Teleporter' in str(err.value)
    assert 'diff_drive_controller/DiffDriveController' in str(err.value)


def test_turtlebot_drives_from_its_gazebo_plugin_alone(ctx):
    """No controllers file: the URDF's libgazebo_ros_diff_drive.so tags give /cmd_vel (Twist)
    and /odom as Gazebo's plugin serves them; the ground truth moves to odom/ground_truth so
    /odom has one publisher."""
    urdf = os.path.join(HERE, '..', 'models', 'mobile', 'turtlebot3_burger.urdf')
    with served(ctx, 'turtle_client', robot_description=urdf) as (node, client):
        odoms, truths = [], []
        client.create_subscription(Odometry, '/odom', odoms.append, 10)
        client.create_subscription(Odometry, '/odom/ground_truth', truths.append, 10)
        pub = client.create_publisher(Twist, '/cmd_vel', 10)
        assert wait_for(lambda: pub.get_subscription_count() > 0, 20.0)
        drive(node, pub, twist(0.2), 3.0)
        assert wait_for(lambda: len(odoms) > 5 and len(truths) > 5, 10.0)
        assert client.count_publishers('/odom') == 1
        odom, truth = odoms[-1].pose.pose.position, truths[-1].pose.pose.position
        assert odoms[-1].child_frame_id == 'base_footprint'
        assert truth.x > 0.4, 'the base drove'
        assert math.hypot(odom.x - truth.x, odom.y - truth.y) < 0.05


def test_tiago_base_and_both_arms_from_its_controllers_file(ctx, monkeypatch):
    """A mobile manipulator's own file: the base drives on cmd_vel while the left arm follows
    a trajectory; each arm's joint_trajectory_controller of the file is served."""
    from mujoco_hal_ros.conformance import urdf_zoo
    share = urdf_zoo.share_dir()
    if share is None:
        pytest.skip(urdf_zoo.SHARE_MISSING)
    from control_msgs.action import FollowJointTrajectory
    from geometry_msgs.msg import TwistStamped
    from rclpy.action import ActionClient
    from trajectory_msgs.msg import JointTrajectoryPoint
    monkeypatch.setenv('ROS_PACKAGE_PATH', share)
    urdf = os.path.join(share, 'example-robot-data', 'robots', 'tiago_description', 'robots',
                        'tiago_dual.urdf')
    controllers = os.path.join(HERE, '..', 'models', 'mobile', 'tiago_controllers.yaml')
    with served(ctx, 'tiago_client', robot_description=urdf,
                controllers_file=controllers) as (node, client):
        served_arms = [t.name for t in node.swap.trajectories]
        assert served_arms == ['arm_left_controller', 'arm_right_controller']
        pub = client.create_publisher(TwistStamped, 'mobile_base_controller/cmd_vel', 10)
        arm = ActionClient(client, FollowJointTrajectory,
                           'arm_left_controller/follow_joint_trajectory')
        dev, m = node.device, node.device.model
        body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'base_footprint')
        assert arm.wait_for_server(timeout_sec=20.0)
        goal = FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = [f'arm_left_{i}_joint' for i in range(1, 8)]
        point = JointTrajectoryPoint(positions=[0.5, 0.3, 0.0, 1.0, 0.0, 0.0, 0.0])
        point.time_from_start.sec = 3
        goal.trajectory.points = [point]
        sent = arm.send_goal_async(goal)
        p0 = dev.snapshot.xpos[body].copy()
        stamped = TwistStamped()
        stamped.twist.linear.x = 0.3
        drive(node, pub, stamped, 3.0)
        assert wait_for(sent.done, 10.0) and sent.result().accepted
        result = sent.result().get_result_async()
        assert wait_for(result.done, 60.0)
        assert result.result().result.error_code == 0
        q = [dev.snapshot.qpos[m.jnt_qposadr[m.joint(j).id]] for j in goal.trajectory.joint_names]
        assert max(abs(a - b) for a, b in zip(q, point.positions, strict=True)) < 0.01, \
            'the arm by qpos'
        assert dev.snapshot.xpos[body][0] - p0[0] > 0.4, 'the base drove meanwhile'
        arm.destroy()


def test_a_robots_file_rover_drives_under_its_namespace(ctx, husky_urdf, tmp_path):
    """A robots-file robot's own controllers file: its drive under <ns>/, frames with the
    namespace as prefix, its odometry's origin (world -> rover/odom) where it was put."""
    from rclpy.qos import DurabilityPolicy, QoSProfile
    robots = tmp_path / 'robots.yaml'
    robots.write_text(f'robots:\n  - namespace: rover\n    urdf: {husky_urdf}\n'
                      f'    position: [1.0, 2.0, 0.05]\n    controllers_file: {CONTROLLERS}\n')
    with served(ctx, 'rover_client', robots=str(robots)) as (node, client):
        odoms, statics, tfs = [], [], []
        client.create_subscription(Odometry, f'rover/{NAME}/odom', odoms.append, 10)
        client.create_subscription(TFMessage, '/tf_static', lambda m: statics.extend(
            m.transforms), QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        client.create_subscription(TFMessage, '/tf', lambda m: tfs.extend(
            (t.header.frame_id, t.child_frame_id) for t in m.transforms), 100)
        pub = client.create_publisher(Twist, f'rover/{NAME}/cmd_vel', 10)
        dev = node.device
        body = mujoco.mj_name2id(dev.model, mujoco.mjtObj.mjOBJ_BODY, 'rover/base_footprint')
        assert body >= 0
        assert wait_for(lambda: pub.get_subscription_count() > 0, 20.0)
        p0 = dev.snapshot.xpos[body].copy()
        drive(node, pub, twist(0.4), 3.0)
        p1 = dev.snapshot.xpos[body]
        assert p1[0] - p0[0] > 0.6, 'the rover drove along its x'
        assert wait_for(lambda: len(odoms) > 3, 10.0)
        o = odoms[-1]
        assert (o.header.frame_id, o.child_frame_id) == ('rover/odom', 'rover/base_footprint')
        assert abs(o.pose.pose.position.x - (p1[0] - p0[0])) < 0.1
        origin = [t for t in statics if t.child_frame_id == 'rover/odom']
        assert origin and origin[0].header.frame_id == 'world'
        assert origin[0].transform.translation.x == pytest.approx(1.0)
        parents = {child: parent for parent, child in tfs}
        assert parents.get('rover/base_footprint') == 'rover/odom'
