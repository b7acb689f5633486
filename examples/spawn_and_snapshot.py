#!/usr/bin/env python3
"""Spawn a box into a running sim_node, keep a snapshot, let it fall, go back to it.

    make run                                  # in one shell
    python examples/spawn_and_snapshot.py     # in another

Spawning is simulation_interfaces' SpawnEntity, as Gazebo serves it: the MJCF of a body tree
in ``resource_string``. Snapshots are sim_node's save_state / load_state (the whole physics
state, restored bit for bit). The simulation is paused throughout, stepped by ``step``.
"""

import sys

import rclpy
from simulation_interfaces.msg import Result
from simulation_interfaces.srv import DeleteEntity, GetEntities, GetEntityState, SpawnEntity
from std_srvs.srv import SetBool

from mujoco_hal_ros.srv import SaveState, Step

BOX = ('<mujoco><worldbody><body name="box"><freejoint/>'
       '<geom type="box" size="0.02 0.02 0.02" mass="0.1" rgba="0.9 0.5 0.1 1"/>'
       '</body></worldbody></mujoco>')


def call(node, srv_type, name, request):
    client = node.create_client(srv_type, name)
    try:
        if not client.wait_for_service(timeout_sec=30.0):
            sys.exit(f'no {name} service: is sim_node running (make run)?')
        future = client.call_async(request)
        rclpy.spin_until_future_complete(node, future, timeout_sec=60.0)
        if future.result() is None:
            sys.exit(f'{name}: no answer')
        return future.result()
    finally:
        node.destroy_client(client)


def box_height(node, entity):
    state = call(node, GetEntityState, 'get_entity_state', GetEntityState.Request(entity=entity))
    return state.state.pose.position.z


def main():
    rclpy.init()
    node = rclpy.create_node('spawn_example')
    try:
        call(node, SetBool, 'pause', SetBool.Request(data=True))
        req = SpawnEntity.Request(name='box1', allow_renaming=True)
        req.entity_resource.resource_string = BOX
        req.initial_pose.pose.position.x = 0.25
        req.initial_pose.pose.position.y = -0.15
        req.initial_pose.pose.position.z = 0.30
        req.initial_pose.pose.orientation.w = 1.0
        spawned = call(node, SpawnEntity, 'spawn_entity', req)
        if spawned.result.result != Result.RESULT_OK:
            sys.exit(f'spawn refused: {spawned.result.error_message}')
        name = spawned.entity_name
        entities = call(node, GetEntities, 'get_entities', GetEntities.Request()).entities
        print('spawned', name, '- its bodies:', [e for e in entities if e.startswith(name)])
        saved = call(node, SaveState, 'save_state', SaveState.Request(name='in_the_air'))
        z0 = box_height(node, name)
        call(node, Step, 'step', Step.Request(steps=500))             # it falls
        z1 = box_height(node, name)
        loaded = call(node, SaveState, 'load_state', SaveState.Request(name='in_the_air'))
        z2 = box_height(node, name)
        print(f'saved ({saved.code}) at z={z0:.4f} m; after 500 steps z={z1:.4f} m; '
              f'restored ({loaded.code}) z={z2:.4f} m')
        call(node, DeleteEntity, 'delete_entity', DeleteEntity.Request(entity=name))
        call(node, SetBool, 'pause', SetBool.Request(data=False))
        return 0 if saved.success and loaded.success and z2 == z0 and z1 < z0 else 1
    finally:
        node.destroy_node()
        rclpy.shutdown()


if __name__ == '__main__':
    sys.exit(main())
