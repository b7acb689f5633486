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
from simulation_interfaces.msg import (Bounds, EntityCategory, Result,  # noqa: E402
                                       SimulatorFeatures)
from simulation_interfaces import srv as si  # noqa: E402
from geometry_msgs.msg import Vector3  # noqa: E402

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros import srv as own  # noqa: E402
from mujoco_hal_ros.sim.device import Device  # noqa: E402
from swap_helpers import Harness  # noqa: E402

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
    f = set(call(h, 'get_simulator_features').features.features)
    F = SimulatorFeatures
    assert {F.NAMED_POSES, F.ENTITY_BOUNDS, F.ENTITY_INFO_GETTING, F.WORLD_INFO_GETTING} <= f
    assert not {F.SPAWNING, F.DELETING, F.WORLD_LOADING, F.WORLD_UNLOADING} & f
    for name in ('spawn_entity', 'spawn_entities', 'delete_entity', 'load_world',
                 'unload_world'):
        assert call(h, name).result.result == Result.RESULT_FEATURE_UNSUPPORTED


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
        assert node.device.gravity == [0.0, 0.0, -1.62] and node.device.timestep == 0.001
        res = node.set_parameters([Parameter('gravity', value=[0.0, 0.0, -9.81])])
        assert res[0].successful and node.device.gravity == [0.0, 0.0, -9.81]
        res = node.set_parameters([Parameter('gravity', value=[0.0, 1.0])])
        assert not res[0].successful and node.device.gravity == [0.0, 0.0, -9.81]
        res = node.set_parameters([Parameter('gravity', value=[0.0, 0.0, float('nan')])])
        assert not res[0].successful
        res = node.set_parameters([Parameter('timestep', value=0.002)])
        assert res[0].successful and node.device.timestep == 0.002
        res = node.set_parameters([Parameter('timestep', value=0.5)])
        assert not res[0].successful and node.device.timestep == 0.002
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
