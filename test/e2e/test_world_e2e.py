"""The world at run time over real DDS: a generic simulation_interfaces client drives a
whole episode, and sim_node's own world services answer from another process."""

import json

import pytest

rclpy = pytest.importorskip('rclpy')
pytest.importorskip('simulation_interfaces.srv')

from helpers import START_S  # noqa: E402
from simulation_interfaces import srv as si  # noqa: E402
from simulation_interfaces.msg import Result, SimulationState  # noqa: E402

from mujoco_hal_ros import srv as own  # noqa: E402

OK = Result.RESULT_OK


def _pos(client, entity):
    r = client.call(si.GetEntityState, '/get_entity_state', entity=entity)
    assert r.result.result == OK, r.result.error_message
    p = r.state.pose.position
    return (p.x, p.y, p.z)


def test_generic_client_episode_and_world_services(start_sim, spawn, client):
    proc = start_sim('real_time_factor:=0.0')
    client.wait_graph(['/get_simulator_features', '/get_entities', '/save_state'], START_S,
                      proc, spawn)
    # --- only simulation_interfaces types --------------------------------------------
    feats = client.call(si.GetSimulatorFeatures, '/get_simulator_features').features
    assert feats.features
    state = SimulationState(state=SimulationState.STATE_PAUSED)
    assert client.call(si.SetSimulationState, '/set_simulation_state',
                       state=state).result.result == OK
    assert client.call(si.ResetSimulation, '/reset_simulation').result.result == OK
    assert client.call(si.StepSimulation, '/step_simulation', steps=200).result.result == OK
    ents = client.call(si.GetEntities, '/get_entities').entities
    assert 'block' in ents
    req = si.SetEntityState.Request(entity='block', set_pose=True)
    req.state.pose.position.x, req.state.pose.position.y = 0.2, -0.05
    req.state.pose.position.z = 0.015
    req.state.pose.orientation.w = 1.0
    cli = client.node.create_client(si.SetEntityState, '/set_entity_state')
    assert cli.wait_for_service(timeout_sec=10.0)
    assert client.wait(cli.call_async(req), 30.0).result.result == OK
    client.node.destroy_client(cli)
    x, y, z = _pos(client, 'block')
    assert abs(x - 0.2) < 1e-6 and abs(y + 0.05) < 1e-6
    assert client.call(si.StepSimulation, '/step_simulation', steps=500).result.result == OK
    x, y, z = _pos(client, 'block')
    assert abs(z - 0.015) < 3e-3                     # rests on the table
    got = client.call(si.GetSimulationState, '/get_simulation_state')
    assert got.state.state == SimulationState.STATE_PAUSED
    # --- snapshots restore bit-identically -------------------------------------------
    assert client.call(own.SaveState, '/save_state', name='s').success
    before = _pos(client, 'block')
    req = si.SetEntityState.Request(entity='block', set_pose=True)
    req.state.pose.position.x, req.state.pose.position.z = 0.1, 0.2
    req.state.pose.orientation.w = 1.0
    cli = client.node.create_client(si.SetEntityState, '/set_entity_state')
    assert cli.wait_for_service(timeout_sec=10.0)
    client.wait(cli.call_async(req), 30.0)
    client.node.destroy_client(cli)
    client.call(si.StepSimulation, '/step_simulation', steps=100)
    assert client.call(own.SaveState, '/load_state', name='s').success
    assert _pos(client, 'block') == before
    # --- randomization: seeded, undone by reset --------------------------------------
    spec = json.dumps({'body_mass': {'scale': [0.5, 1.5]}})
    a = client.call(own.Randomize, '/randomize', fields_json=spec, seeded=True, seed=5)
    assert a.success, a.message
    assert client.call(si.ResetSimulation, '/reset_simulation').result.result == OK
    # --- pixel to world: the overhead camera's centre pixel lies on the table ----------
    r = client.call(own.PixelToWorld, '/pixel_to_world', camera='overhead', width=320,
                    height=240, u=[159.5], v=[119.5])
    assert r.success, r.message
    assert abs(r.median.point.z) < 2e-3


BOX = ('<mujoco><worldbody><body name="box"><freejoint/>'
       '<geom type="box" size="0.02 0.02 0.02" mass="0.1"/></body></worldbody></mujoco>')


def test_spawned_box_falls_rests_and_is_deleted(start_sim, spawn, client):
    proc = start_sim('real_time_factor:=0.0', 'start_paused:=true')
    client.wait_graph(['/spawn_entity', '/delete_entity', '/get_entity_state'], START_S,
                      proc, spawn)
    req = si.SpawnEntity.Request(name='crate')
    req.entity_resource.resource_string = BOX
    p = req.initial_pose.pose
    p.position.x, p.position.y, p.position.z = 0.25, -0.15, 0.15
    p.orientation.w = 1.0
    cli = client.node.create_client(si.SpawnEntity, '/spawn_entity')
    assert cli.wait_for_service(timeout_sec=10.0)
    r = client.wait(cli.call_async(req), 60.0)
    client.node.destroy_client(cli)
    assert r.result.result == OK, r.result.error_message
    assert r.entity_name == 'crate'
    assert abs(_pos(client, 'crate')[2] - 0.15) < 1e-6
    assert 'crate/box' in client.call(si.GetEntities, '/get_entities').entities
    assert client.call(si.StepSimulation, '/step_simulation', steps=100).result.result == OK
    assert _pos(client, 'crate')[2] < 0.15 - 1e-3           # falling
    assert client.call(si.StepSimulation, '/step_simulation', steps=1400).result.result == OK
    x, y, z = _pos(client, 'crate/box')
    assert abs(z - 0.02) < 3e-3 and abs(x - 0.25) < 0.01    # rests on the table
    r = client.call(si.DeleteEntity, '/delete_entity', entity='crate')
    assert r.result.result == OK, r.result.error_message
    ents = client.call(si.GetEntities, '/get_entities').entities
    assert 'crate/box' not in ents and 'block' in ents
    r = client.call(si.GetEntityState, '/get_entity_state', entity='crate')
    assert r.result.result == Result.RESULT_NOT_FOUND


def test_load_world_panda_and_back(start_sim, spawn, client):
    from mujoco_hal_ros.menagerie import model_path
    panda = model_path('panda')
    if not panda:
        pytest.skip("Menagerie's Panda is not installed")
    proc = start_sim('real_time_factor:=0.0', 'start_paused:=true')
    client.wait_graph(['/load_world', '/unload_world', '/get_current_world'], START_S,
                      proc, spawn)
    req = si.LoadWorld.Request()
    req.world_resource.uri = f'file://{panda}'
    cli = client.node.create_client(si.LoadWorld, '/load_world')
    assert cli.wait_for_service(timeout_sec=10.0)
    r = client.wait(cli.call_async(req), 120.0)
    client.node.destroy_client(cli)
    assert r.result.result == OK, r.result.error_message
    ents = client.call(si.GetEntities, '/get_entities').entities
    assert 'link7' in ents and 'block' not in ents
    assert client.call(si.StepSimulation, '/step_simulation', steps=100).result.result == OK
    assert client.call(si.UnloadWorld, '/unload_world').result.result == OK
    ents = client.call(si.GetEntities, '/get_entities').entities
    assert 'block' in ents and 'link7' not in ents
    w = client.call(si.GetCurrentWorld, '/get_current_world').world
    assert w.world_resource.uri.endswith('bench_arm.xml')
