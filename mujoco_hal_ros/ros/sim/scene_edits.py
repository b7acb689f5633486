"""simulation_interfaces' scene edits: spawn MJCF entities, delete them, load another world
and unload back to the start one.

Each swaps the running device's model (``device.scene.spawn``, ``load_world``...), which
compiles a scene: on the bridge's worker thread, never an executor thread, the coroutine
awaiting it. What a request names (its resource, a free entity name) is decided by
``world.catalog``'s ``spawn_resource`` and ``spawn_name``; this module translates the
messages and the refusals' codes. ``SimInterfaces`` registers these services beside its own.
"""

from collections.abc import Callable
from typing import Any

from simulation_interfaces.msg import Result, SpawnResult, WorldResource
from simulation_interfaces.srv import (
    DeleteEntity,
    LoadWorld,
    SpawnEntities,
    SpawnEntity,
    UnloadWorld,
)

from ...errors import DeviceError, UNKNOWN_NAME
from ...world import catalog

EDITS_OFF = ('scene edits are turned off on this node (world_edits:=false); ask its '
             'operator, or use a node that serves them')
MAX_SPAWN_BATCH = 100         # spawn_entities: requests in one call


def _ok(text: str = '') -> Result:
    return Result(result=Result.RESULT_OK, error_message=text)


def _fail(code: int, text: str) -> Result:
    return Result(result=code, error_message=text)


class SceneEdits:
    """spawn_entity, spawn_entities, delete_entity, load_world and unload_world over one
    Device (``Any``: the Device or a test's stand-in of its scene calls; ROS messages are
    untyped). ``edits`` says whether they are served (world_edits), ``bodies`` the current
    model's body names, ``world_frame`` and ``world_resource`` what the node answers."""

    def __init__(self, device: Any, bridge: Any, edits: Callable[[], bool],
                 bodies: Callable[[], list[str]], world_frame: Callable[[], str],
                 world_resource: Callable[[], WorldResource]) -> None:
        self.device, self.bridge = device, bridge
        self.edits, self.bodies = edits, bodies
        self.world_frame, self.world_resource = world_frame, world_resource

    def services(self) -> tuple[tuple[Any, str, Callable[..., Any]], ...]:
        """(type, name, callback) of each service, for the node to create."""
        return ((SpawnEntity, 'spawn_entity', self._spawn),
                (SpawnEntities, 'spawn_entities', self._spawn_many),
                (DeleteEntity, 'delete_entity', self._delete),
                (LoadWorld, 'load_world', self._load_world),
                (UnloadWorld, 'unload_world', self._unload_world))

    def _spawn_args(self, req: Any) -> tuple[dict[str, Any] | None, Result | None]:
        """(kwargs for device.scene.spawn, None) or (None, Result) for one request."""
        R = SpawnEntity.Response
        resource, bad = catalog.spawn_resource(req.entity_resource.uri,
                                               req.entity_resource.resource_string)
        if bad is not None:
            code = R.UNSUPPORTED_FORMAT if bad[0] == 'format' else R.NO_RESOURCE
            return None, _fail(code, bad[1])
        frame, world = req.initial_pose.header.frame_id, self.world_frame()
        if frame not in ('', world):
            return None, _fail(R.INVALID_POSE, f'initial_pose in {frame[:80]!r}: entities are '
                               f'placed in the world frame ({world!r} or empty)')
        p, o = req.initial_pose.pose.position, req.initial_pose.pose.orientation
        quat = (o.w, o.x, o.y, o.z)   # unset is (1, 0, 0, 0); all-zero is INVALID_POSE
        bodies, entities = self.bodies(), self.device.scene.names()
        try:
            name, ns = catalog.spawn_name(req.name, req.entity_namespace,
                                          req.allow_renaming,
                                          lambda full: catalog.name_taken(full, entities,
                                                                          bodies))
        except DeviceError as exc:
            return None, _fail(R.NAME_NOT_UNIQUE, str(exc))
        return {'resource': resource, 'name': name, 'position': (p.x, p.y, p.z),
                'quaternion': quat, 'namespace': ns}, None

    @staticmethod
    def _spawn_failure(exc: DeviceError) -> Result:
        R = SpawnEntity.Response
        where = exc.where or ''
        if where == 'name':
            code = R.NAME_NOT_UNIQUE if 'exists' in str(exc) else R.NAME_INVALID
        elif where == 'namespace':
            code = R.NAMESPACE_INVALID
        elif where in ('position', 'quaternion'):
            code = R.INVALID_POSE
        elif where == 'resource' or where == 'scene':
            code = R.RESOURCE_PARSE_ERROR
        else:
            code = Result.RESULT_OPERATION_FAILED
        return _fail(code, str(exc))

    async def _spawn_one(self, req: Any) -> tuple[Result, str]:
        """(Result, entity name) of one spawn request."""
        kwargs, refusal = self._spawn_args(req)
        if kwargs is None:
            return refusal or _fail(Result.RESULT_OPERATION_FAILED, 'refused'), ''
        try:
            out = await self.bridge.run(self.device.scene.spawn, **kwargs)
        except DeviceError as exc:
            return self._spawn_failure(exc), ''
        if out is None:
            return _fail(Result.RESULT_OPERATION_FAILED, 'sim_node is stopping'), ''
        return _ok(f'bodies: {", ".join(out["bodies"])[:400]}'), out['name']

    async def _spawn(self, req: Any, resp: Any) -> Any:
        if not self.edits():
            resp.result = _fail(Result.RESULT_FEATURE_UNSUPPORTED, EDITS_OFF)
            return resp
        resp.result, resp.entity_name = await self._spawn_one(req)
        return resp

    async def _spawn_many(self, req: Any, resp: Any) -> Any:
        if not self.edits():
            resp.result = _fail(Result.RESULT_FEATURE_UNSUPPORTED, EDITS_OFF)
            return resp
        if len(req.spawn_requests) > MAX_SPAWN_BATCH:
            resp.result = _fail(Result.RESULT_OPERATION_FAILED,
                                f'{len(req.spawn_requests)} spawn requests in one call; send at '
                                f'most {MAX_SPAWN_BATCH} (each one recompiles the scene)')
            return resp
        results = []
        for one in req.spawn_requests:
            result, name = await self._spawn_one(one)
            results.append(SpawnResult(result=result, entity_name=name))
        resp.results = results
        failed = sum(r.result.result != Result.RESULT_OK for r in results)
        resp.result = _ok() if not failed else _fail(
            SpawnEntities.Response.ENTITIES_SPAWN_FAILED,
            f'{failed} of {len(results)} spawn requests failed; see results')
        return resp

    async def _delete(self, req: Any, resp: Any) -> Any:
        if not self.edits():
            resp.result = _fail(Result.RESULT_FEATURE_UNSUPPORTED, EDITS_OFF)
            return resp
        try:
            out = await self.bridge.run(self.device.scene.delete, req.entity)
        except DeviceError as exc:
            code = Result.RESULT_NOT_FOUND if exc.code == UNKNOWN_NAME else \
                Result.RESULT_OPERATION_FAILED
            resp.result = _fail(code, str(exc))
            return resp
        resp.result = _ok() if out is not None else _fail(Result.RESULT_OPERATION_FAILED,
                                                          'sim_node is stopping')
        return resp

    async def _load_world(self, req: Any, resp: Any) -> Any:
        if not self.edits():
            resp.result = _fail(Result.RESULT_FEATURE_UNSUPPORTED, EDITS_OFF)
            return resp
        R = LoadWorld.Response
        resource, bad = catalog.spawn_resource(req.world_resource.uri,
                                               req.world_resource.resource_string)
        if bad is not None:
            resp.result = _fail(R.UNSUPPORTED_FORMAT if bad[0] == 'format' else R.NO_RESOURCE,
                                bad[1])
            return resp
        try:
            out = await self.bridge.run(self.device.scene.load_world, resource)
        except DeviceError as exc:
            resp.result = _fail(R.RESOURCE_PARSE_ERROR, str(exc))
            return resp
        if out is None:
            resp.result = _fail(Result.RESULT_OPERATION_FAILED, 'sim_node is stopping')
            return resp
        resp.world = self.world_resource()
        resp.result = _ok('a zero-config device on this world' if out['zero_config']
                          else '')
        return resp

    async def _unload_world(self, _req: Any, resp: Any) -> Any:
        if not self.edits():
            resp.result = _fail(Result.RESULT_FEATURE_UNSUPPORTED, EDITS_OFF)
            return resp
        try:
            out = await self.bridge.run(self.device.scene.unload_world)
        except DeviceError as exc:
            resp.result = _fail(Result.RESULT_OPERATION_FAILED, str(exc))
            return resp
        resp.result = _ok('back to the world sim_node started with: the robot is the '
                          'device, so there is always a world') if out is not None else \
            _fail(Result.RESULT_OPERATION_FAILED, 'sim_node is stopping')
        return resp
