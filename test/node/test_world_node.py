"""The whole simulation_interfaces 2.x surface and sim_node's own world services, in one
process: the catalogue (entities, info, bounds, named poses, worlds), refusals of what is not
served, and snapshots, teleport, pixel-to-world, dynamics and randomization over ROS."""

import json
import os

import numpy as np
import pytest

simulation_interfaces = pytest.importorskip(
    'simulation_interfaces.srv', reason='simulation_interfaces is not installed and its '
    'stand-in was not built (run scripts/setup.sh)')
from geometry_msgs.msg import Vector3  # noqa: E402
from simulation_interfaces import srv as si  # noqa: E402
from simulation_interfaces.msg import (  # noqa: E402
    Bounds,
    EntityCategory,
    Result,
    SimulatorFeatures,
)
from swap_helpers import Harness  # noqa: E402

from mujoco_hal_ros import menagerie, srv as own  # noqa: E402
from mujoco_hal_ros.sim.device import Device  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..'))
BENCH_YAML = os.path.join(ROOT, 'config', 'bench_arm.yaml')
OK = Result.RESULT_OK
SERVICES = {
    'get_simulator_features': si.GetSimulatorFeatures, 'get_entities': si.GetEntities,
    'get_entities_states': si.GetEntitiesStates, 'get_entity_info': si.GetEntityInfo,
    'set_entity_info': si.SetEntityInfo, 'get_entity_bounds': si.GetEntityBounds,
    'get_named_poses': si.GetNamedPoses, 'get_named_pose_bounds': si.GetNamedPoseBounds,
    'get_spawnables': si.GetSpawnables, 'get_current_world': si.GetCurrentWorld,
    'get_available_worlds': si.GetAvailableWorlds, 'spawn_entity': si.SpawnEntity,
    'spawn_entities': si.SpawnEntities, 'delete_entity': si.DeleteEntity,
    'load_world': si.LoadWorld, 'unload_world': si.UnloadWorld,
    'save_state': own.SaveState, 'load_state': own.SaveState,
    'set_joint_state': own.SetJointState, 'pixel_to_world': own.PixelToWorld,
    'dynamics': own.Dynamics, 'randomize': own.Randomize}


@pytest.fixture(scope='module')
def h():
    dev = Device(BENCH_YAML, environ={'OPENHAL_BENCH_ARM': menagerie.bench_arm_path()},
                 real_time_factor=2.0)
    harness = Harness(dev)
    harness.srv = {n: harness.client.create_client(t, n) for n, t in SERVICES.items()}
    yield harness
    harness.close()
    dev.close()


def call(h, service, **fields):
    client = h.srv[service]
    req = client.srv_type.Request()
    for k, v in fields.items():
        setattr(req, k, v)
    return h.call(client, req)


def test_features_are_truthful(h):
    got = call(h, 'get_simulator_features').features
    f = set(got.features)
    F = SimulatorFeatures
    assert {F.NAMED_POSES, F.ENTITY_BOUNDS, F.ENTITY_INFO_GETTING, F.WORLD_INFO_GETTING} <= f
    assert {F.SPAWNING, F.DELETING, F.WORLD_LOADING, F.WORLD_UNLOADING} <= f
    assert list(got.spawn_formats) == ['mjcf']
    # empty requests are refused with the standard's codes, changing nothing
    gen = h.device.generation
    assert call(h, 'spawn_entity').result.result == si.SpawnEntity.Response.NO_RESOURCE
    assert call(h, 'load_world').result.result == si.LoadWorld.Response.NO_RESOURCE
    assert call(h, 'delete_entity').result.result == Result.RESULT_NOT_FOUND
    assert call(h, 'spawn_entities').result.result == OK     # nothing asked, nothing failed
    assert h.device.generation == gen


def test_entities_filters_and_info(h):
    r = call(h, 'get_entities')
    assert r.result.result == OK and 'block' in r.entities and 'hand' in r.entities
    req = si.GetEntities.Request()
    req.filters.filter = '^bl'
    assert h.call(h.srv['get_entities'], req).entities == ['block']
    req = si.GetEntities.Request()
    req.filters.categories = [EntityCategory(category=EntityCategory.CATEGORY_DYNAMIC_OBJECT)]
    assert h.call(h.srv['get_entities'], req).entities == ['block']
    req = si.GetEntities.Request()
    req.filters.filter = '('
    assert h.call(h.srv['get_entities'], req).result.result != OK
    info = call(h, 'get_entity_info', entity='hand').info
    assert info.category.category == EntityCategory.CATEGORY_ROBOT
    req = si.SetEntityInfo.Request(entity='block')
    req.info.category.category = EntityCategory.CATEGORY_DYNAMIC_OBJECT
    req.info.tags = ['graspable']
    assert h.call(h.srv['set_entity_info'], req).result.result == OK
    req = si.GetEntities.Request()
    req.filters.tags.tags = ['graspable']
    assert h.call(h.srv['get_entities'], req).entities == ['block']
    assert call(h, 'get_entity_info', entity='nope').result.result == Result.RESULT_NOT_FOUND


def test_bounds_and_overlap(h):
    r = call(h, 'get_entity_bounds', entity='block')
    assert r.result.result == OK and r.bounds.type == Bounds.TYPE_BOX
    low, high = (np.array([p.x, p.y, p.z]) for p in r.bounds.points)
    assert ((high - low) > 0.01).all() and low[2] > -0.01
    centre = (low + high) / 2
    req = si.GetEntitiesStates.Request()
    req.filters.bounds.type = Bounds.TYPE_SPHERE
    req.filters.bounds.points = [Vector3(x=centre[0], y=centre[1], z=centre[2]),
                                 Vector3(x=0.001)]
    got = h.call(h.srv['get_entities_states'], req)
    assert 'block' in got.entities and len(got.states) == len(got.entities)
    i = got.entities.index('block')
    assert abs(got.states[i].pose.position.x - centre[0]) < 0.02


def test_named_poses_and_worlds(h):
    r = call(h, 'get_named_poses')
    assert r.result.result == OK and 'rest' in [p.name for p in r.poses]
    b = call(h, 'get_named_pose_bounds', name='rest')
    assert b.result.result == OK and b.bounds.type == Bounds.TYPE_BOX
    assert call(h, 'get_named_pose_bounds', name='x').result.result == Result.RESULT_NOT_FOUND
    w = call(h, 'get_current_world')
    assert w.result.result == OK and w.world.world_resource.uri.startswith('file://')
    assert len(call(h, 'get_available_worlds').worlds) == 1
    assert call(h, 'get_spawnables').result.result == OK


def test_snapshot_and_teleport_over_ros(h):
    assert call(h, 'save_state', name='a').success
    r = call(h, 'set_joint_state', names=['pan'], positions=[0.2])
    assert r.success, r.message
    r = call(h, 'set_joint_state', names=['pan', 'lift'], positions=[0.2, float('nan')])
    assert not r.success and r.code == 'INVALID_ARGUMENT'
    r = call(h, 'load_state', name='a')
    assert r.success and r.names == ['a']
    assert call(h, 'load_state', name='b').code == 'UNKNOWN_NAME'


def test_dynamics_pixels_randomize_over_ros(h):
    nv = h.device.model.nv
    r = call(h, 'dynamics', query='mass_matrix')
    assert r.success and (r.rows, r.cols) == (nv, nv) and len(r.data) == nv * nv
    r = call(h, 'dynamics', query='jacobian', name='hand', kind='body')
    assert r.success and (r.rows, r.cols) == (6, nv)
    r = call(h, 'dynamics', query='inverse_dynamics', qacc=[0.0] * nv)
    assert r.success and r.cols == nv
    assert call(h, 'dynamics', query='nope').code == 'INVALID_ARGUMENT'
    r = call(h, 'pixel_to_world', camera='overhead', width=64, height=48, u=[31.5], v=[23.5])
    assert r.success, r.message
    assert abs(r.median.point.z) < 0.05 and len(r.points) == 1
    assert not call(h, 'pixel_to_world', camera='overhead', u=[1.0], v=[]).success
    spec = json.dumps({'geom_friction': {'scale': [0.5, 1.5]}})
    r = call(h, 'randomize', fields_json=spec, seeded=True, seed=3)
    assert r.success and r.fields == ['geom_friction']
    assert not call(h, 'randomize', fields_json='{', seeded=False).success
    h.device.reset()


def test_gravity_and_timestep_parameters(ctx):
    from rclpy.parameter import Parameter

    from mujoco_hal_ros.ros.sim.sim_node import SimNode
    node = SimNode(context=ctx, parameter_overrides=[
        Parameter('gravity', value=[0.0, 0.0, -1.62]), Parameter('timestep', value=0.001)])
    try:
        assert node.device.physics.gravity == [0.0, 0.0, -1.62]
        assert node.device.physics.timestep == 0.001
        res = node.set_parameters([Parameter('gravity', value=[0.0, 0.0, -9.81])])
        assert res[0].successful and node.device.physics.gravity == [0.0, 0.0, -9.81]
        res = node.set_parameters([Parameter('gravity', value=[0.0, 1.0])])
        assert not res[0].successful and node.device.physics.gravity == [0.0, 0.0, -9.81]
        res = node.set_parameters([Parameter('gravity', value=[0.0, 0.0, float('nan')])])
        assert not res[0].successful
        res = node.set_parameters([Parameter('timestep', value=0.002)])
        assert res[0].successful and node.device.physics.timestep == 0.002
        res = node.set_parameters([Parameter('timestep', value=0.5)])
        assert not res[0].successful and node.device.physics.timestep == 0.002
    finally:
        node.destroy_node()


def test_set_entity_state_relative_to_another_entity(h):
    from simulation_interfaces.srv import GetEntityState, SetEntityState
    set_cli = h.client.create_client(SetEntityState, 'set_entity_state')
    get_cli = h.client.create_client(GetEntityState, 'get_entity_state')
    base = h.call(get_cli, GetEntityState.Request(entity='base')).state.pose.position
    req = SetEntityState.Request(entity='block', set_pose=True)
    req.state.header.frame_id = 'base'
    req.state.pose.position.x, req.state.pose.position.z = 0.15, 0.1
    req.state.pose.orientation.w = 1.0
    assert h.call(set_cli, req).result.result == OK
    got = h.call(get_cli, GetEntityState.Request(entity='block')).state.pose.position
    assert abs(got.x - (base.x + 0.15)) < 1e-3 and abs(got.z - (base.z + 0.1)) < 2e-2
    req.state.header.frame_id = 'nowhere'
    assert h.call(set_cli, req).result.result == Result.RESULT_OPERATION_FAILED
    h.device.reset()


# --- live scene edits on a whole sim_node --------------------------------------------------
CRATE = ('<mujoco><worldbody><body name="box"><freejoint/>'
         '<geom type="box" size="0.02 0.02 0.02" mass="0.1"/></body></worldbody></mujoco>')
TORQUE_ARM = os.path.join(ROOT, 'test', 'models', 'torque_arm.xml')


@pytest.fixture(scope='module')
def live():
    from helpers import SpunNodes
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter

    from mujoco_hal_ros.ros.sim.sim_node import SimNode
    h = SpunNodes(lambda ctx: [
        SimNode(context=ctx, parameter_overrides=[Parameter('publish_rate', value=50.0)]),
        rclpy.create_node('scene_test_client', context=ctx)],
        lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
    h.spin(240.0)
    try:
        yield h
    finally:
        h.close()


def _latest(h, msg_type, topic, pick, timeout=20.0, qos=10):
    """The first message on ``topic`` for which ``pick(msg)`` is truthy (polled), or None."""
    import threading
    got, seen = [], threading.Event()

    def on_msg(msg):
        if not seen.is_set() and pick(msg):
            got.append(msg)
            seen.set()
    node = h.nodes[-1]
    sub = node.create_subscription(msg_type, topic, on_msg, qos)
    try:
        seen.wait(timeout)
    finally:
        node.destroy_subscription(sub)
    return got[0] if got else None


def _wait_for(check, timeout=10.0):
    import time
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def _spawn_request(name, x, y, z, resource=CRATE):
    req = si.SpawnEntity.Request(name=name)
    req.entity_resource.resource_string = resource
    p = req.initial_pose.pose
    p.position.x, p.position.y, p.position.z = x, y, z
    p.orientation.w = 1.0
    return req


def test_spawn_and_delete_follow_through_sim_node(live):
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage

    from mujoco_hal_ros.ros.sim.streams import moving_joints
    dev = live.nodes[0].device
    names = moving_joints(dev.model)[0]
    r = live.call(si.SpawnEntity, 'spawn_entity', _spawn_request('crate', 0.25, -0.15, 0.15))
    assert r.result.result == OK, r.result.error_message
    assert r.entity_name == 'crate'
    ents = live.call(si.GetEntities, 'get_entities', si.GetEntities.Request()).entities
    assert 'crate/box' in ents
    gen = dev.generation
    js = _latest(live, JointState, 'joint_states',
                 lambda m: m.header.stamp.sec + m.header.stamp.nanosec * 1e-9
                 > dev.snapshot.time - 1e-9 and dev.snapshot.generation == gen)
    assert js is not None and list(js.name) == names
    frame = live.nodes[0].frames.for_model(dev.model).body_frames[
        dev.layout.bodies.index('crate/box')]
    tf = _latest(live, TFMessage, '/tf',
                 lambda m: any(t.child_frame_id == frame for t in m.transforms))
    assert tf is not None, f'no {frame} on /tf'
    st = live.call(si.GetEntityState, 'get_entity_state',
                   si.GetEntityState.Request(entity='crate'))
    assert st.result.result == OK
    again = live.call(si.SpawnEntity, 'spawn_entity', _spawn_request('crate', 0.3, 0.3, 0.1))
    assert again.result.result == si.SpawnEntity.Response.NAME_NOT_UNIQUE
    bad = live.call(si.SpawnEntity, 'spawn_entity',
                    _spawn_request('broken', 0.3, 0.3, 0.1, '<mujoco><worldbody><body'))
    assert bad.result.result == si.SpawnEntity.Response.RESOURCE_PARSE_ERROR
    assert dev.generation == gen
    r = live.call(si.DeleteEntity, 'delete_entity', si.DeleteEntity.Request(entity='crate'))
    assert r.result.result == OK, r.result.error_message
    ents = live.call(si.GetEntities, 'get_entities', si.GetEntities.Request()).entities
    assert 'crate/box' not in ents and 'block' in ents
    js = _latest(live, JointState, 'joint_states', lambda m: True)
    assert js is not None and list(js.name) == names


def test_load_world_and_back_through_sim_node(live):
    from control_msgs.msg import JointTrajectoryControllerState
    import mujoco
    from sensor_msgs.msg import JointState

    from mujoco_hal_ros.ros.sim.streams import moving_joints
    dev = live.nodes[0].device
    names = moving_joints(dev.model)[0]
    other = moving_joints(mujoco.MjModel.from_xml_path(TORQUE_ARM))[0]
    assert other != names
    req = si.LoadWorld.Request()
    req.world_resource.uri = f'file://{TORQUE_ARM}'
    r = live.call(si.LoadWorld, 'load_world', req)
    assert r.result.result == OK, r.result.error_message
    assert r.world.name == 'torque_arm'
    js = _latest(live, JointState, 'joint_states', lambda m: list(m.name) == other)
    assert js is not None, 'joint_states did not follow the loaded world'
    w = live.call(si.GetCurrentWorld, 'get_current_world', si.GetCurrentWorld.Request())
    assert w.world.name == 'torque_arm'
    # The bench arm's trajectory controller has no joints in this world: it says nothing.
    state = _latest(live, JointTrajectoryControllerState, 'arm_controller/controller_state',
                    lambda m: True, timeout=1.5)
    assert state is None, f'controller_state for {list(state.joint_names)} in torque_arm'
    # No address of the bench arm left behind: the joints hold watches are torque_arm's,
    # and the goal topics are its channels' (the model-swapped event, not a poll).
    from mujoco_hal_ros import joint_view
    node = live.nodes[0]
    assert list(node.control._joint_dofs) == [
        int(dev.model.joint(n).dofadr[0]) for n in joint_view.view(dev.model).moving().names]
    assert sorted(node.control.goal_subs) == sorted(dev.layout.goals)
    client = live.nodes[-1]
    for name in dev.layout.goals:
        assert _wait_for(lambda name=name: client.count_subscribers(
            f'{node.get_namespace().rstrip("/")}/goals/{name}') == 1), name
    r = live.call(si.UnloadWorld, 'unload_world', si.UnloadWorld.Request())
    assert r.result.result == OK, r.result.error_message
    js = _latest(live, JointState, 'joint_states', lambda m: list(m.name) == names)
    assert js is not None, 'joint_states did not come back to the bench arm'
    state = _latest(live, JointTrajectoryControllerState, 'arm_controller/controller_state',
                    lambda m: True)
    assert state is not None, 'controller_state did not come back with the bench arm'
    by_name = dict(zip(js.name, js.position, strict=True))
    for joint, actual in zip(state.joint_names, state.feedback.positions, strict=True):
        assert actual == pytest.approx(by_name[joint], abs=0.05), joint


def test_camera_images_keep_coming_through_scene_edits(live):
    from sensor_msgs.msg import Image
    dev = live.nodes[0].device
    for i in range(3):
        r = live.call(si.SpawnEntity, 'spawn_entity', _spawn_request(f'cam{i}', 0.1 * i, 0.2, 0.1))
        assert r.result.result == OK, r.result.error_message
    t = dev.snapshot.time
    img = _latest(live, Image, 'overhead/image_raw',
                  lambda m: m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 >= t)
    assert img is not None and (img.width, img.height) == (640, 480)
    for i in range(3):
        r = live.call(si.DeleteEntity, 'delete_entity', si.DeleteEntity.Request(entity=f'cam{i}'))
        assert r.result.result == OK, r.result.error_message
    t = dev.snapshot.time
    assert _latest(live, Image, 'overhead/image_raw',
                   lambda m: m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 >= t)


def test_spawn_entities_renames_and_namespaces(live):
    from simulation_interfaces.msg import SpawnEntity as SpawnRequest

    def one(x, y, **fields):
        r = _spawn_request('twin', x, y, 0.1)
        return SpawnRequest(name=r.name, entity_resource=r.entity_resource,
                            initial_pose=r.initial_pose, **fields)
    first, second = one(0.3, 0.3), one(0.35, 0.3, allow_renaming=True)
    third = one(0.3, 0.35, entity_namespace='/props')
    req = si.SpawnEntities.Request(spawn_requests=[first, second, third])
    r = live.call(si.SpawnEntities, 'spawn_entities', req)
    assert r.result.result == OK, [x.result.error_message for x in r.results]
    assert [x.entity_name for x in r.results] == ['twin', 'twin_1', 'props/twin']
    ents = live.call(si.GetEntities, 'get_entities', si.GetEntities.Request()).entities
    assert {'twin/box', 'twin_1/box', 'props/twin/box'} <= set(ents)
    for name in ('twin', 'twin_1', 'props/twin'):
        d = live.call(si.DeleteEntity, 'delete_entity', si.DeleteEntity.Request(entity=name))
        assert d.result.result == OK, d.result.error_message


def test_trajectory_controller_follows_renumbered_joints(live, tmp_path):
    """The bench arm again, behind a free crate that comes first in the tree: every joint's
    qpos address moves by 7, and controller_state reads the arm at its new addresses."""
    from control_msgs.msg import JointTrajectoryControllerState
    from sensor_msgs.msg import JointState
    bench = os.path.join(ROOT, 'models', 'bench_arm.xml')
    with open(bench) as f:
        text = f.read().replace('<worldbody>', '<worldbody><body name="first_crate" '
                                'pos="0.6 0.6 0.3"><freejoint/><geom type="box" '
                                'size="0.02 0.02 0.02"/></body>', 1)
    moved = tmp_path / 'bench_behind_a_crate.xml'
    moved.write_text(text)
    dev = live.nodes[0].device
    req = si.LoadWorld.Request()
    req.world_resource.uri = f'file://{moved}'
    r = live.call(si.LoadWorld, 'load_world', req)
    assert r.result.result == OK, r.result.error_message
    try:
        gen = dev.generation
        js = _latest(live, JointState, 'joint_states',
                     lambda m: dev.snapshot.generation == gen and 'pan' in m.name)
        assert js is not None
        state = _latest(live, JointTrajectoryControllerState,
                        'arm_controller/controller_state',
                        lambda m: dev.snapshot.generation == gen)
        assert state is not None, 'no controller_state in the renumbered world'
        by_name = dict(zip(js.name, js.position, strict=True))
        for joint, actual in zip(state.joint_names, state.feedback.positions, strict=True):
            assert actual == pytest.approx(by_name[joint], abs=0.05), joint
    finally:
        r = live.call(si.UnloadWorld, 'unload_world', si.UnloadWorld.Request())
        assert r.result.result == OK, r.result.error_message
