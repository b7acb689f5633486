"""simulation_interfaces: the ROS 2 standard simulator API over the Device.

Test scripts and scenario tools written for Gazebo or Isaac Sim call these services and the
``simulate_steps`` action; serving the same ones here lets those tools drive this simulator
unchanged. All 22 services of the 2.x standard are served; ``get_simulator_features`` lists
only the parts that work, so a client can check instead of guessing. Scene edits (spawn an
MJCF entity, delete one, load another world, unload back to the start one) are
``scene_edits`` (over ``device.scene``), registered here. The entity catalogue
(categories, tags, bounds, filters, named poses and their bounds) is ``world.catalog``:
core functions called with plain values (a snapshot's body poses, a model), so nothing
here builds or borrows an MjData; sim_node's own world services (snapshots, teleport,
pixel-to-world, dynamics, randomization) are ``world_services``.

Callbacks never wait on physics: stepping is a stepper job (``Device.step(wait=False)``)
and the service or action coroutine awaits the node's CompletionBridge
(``ros/bridge.py``), on a callback group of its own so a waiting request never blocks the
rest of the node.
"""

from __future__ import annotations

from collections.abc import Callable
import os
from typing import Any, TYPE_CHECKING

from geometry_msgs.msg import Vector3
from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from simulation_interfaces.action import SimulateSteps
from simulation_interfaces.msg import (
    Bounds,
    EntityCategory,
    EntityState,
    NamedPose,
    Result,
    SimulationState,
    SimulatorFeatures,
    WorldResource,
)
from simulation_interfaces.srv import (
    GetAvailableWorlds,
    GetCurrentWorld,
    GetEntities,
    GetEntitiesStates,
    GetEntityBounds,
    GetEntityInfo,
    GetEntityState,
    GetNamedPoseBounds,
    GetNamedPoses,
    GetSimulationState,
    GetSimulatorFeatures,
    GetSpawnables,
    ResetSimulation,
    SetEntityInfo,
    SetEntityState,
    SetSimulationState,
    StepSimulation,
)

from ...config import limits
from ...errors import DeviceError, UNKNOWN_NAME
from ...sim.entities import Entities, INVALID_POSE
from ...world import catalog, frames
from .. import conversions as cv
from ..guard import ActionServer  # every callback guarded
from ..qos import action_queues, REQUEST_QOS
from .scene_edits import SceneEdits
from .world_services import WorldServices

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.node import Node

    from ...sim.device import Device
    from ..bridge import CompletionBridge

F = SimulatorFeatures
FEATURES = [F.ENTITY_STATE_GETTING, F.ENTITY_STATE_SETTING, F.SIMULATION_RESET,
            F.SIMULATION_RESET_STATE, F.SIMULATION_STATE_GETTING, F.SIMULATION_STATE_SETTING,
            F.SIMULATION_STATE_PAUSE, F.STEP_SIMULATION_SINGLE, F.STEP_SIMULATION_MULTIPLE,
            F.STEP_SIMULATION_ACTION, F.NAMED_POSES, F.POSE_BOUNDS, F.ENTITY_TAGS,
            F.ENTITY_BOUNDS, F.ENTITY_BOUNDS_BOX, F.ENTITY_CATEGORIES, F.ENTITY_INFO_GETTING,
            F.ENTITY_INFO_SETTING, F.WORLD_INFO_GETTING, F.AVAILABLE_WORLDS,
            F.SPAWNING, F.SPAWNING_RESOURCE_STRING, F.DELETING, F.WORLD_LOADING,
            F.WORLD_RESOURCE_STRING, F.WORLD_UNLOADING] + [
    getattr(F, n) for n in ('SPAWNING_ENTITIES',) if hasattr(F, n)]   # newer releases
EDIT_FEATURES = {F.SPAWNING, F.SPAWNING_RESOURCE_STRING, F.DELETING, F.WORLD_LOADING,
                 F.WORLD_RESOURCE_STRING, F.WORLD_UNLOADING} | {
    getattr(F, n) for n in ('SPAWNING_ENTITIES',) if hasattr(F, n)}
SPAWN_FORMATS = ['mjcf']
SCENE_EDITS = ('entities are spawned from MJCF (a file uri or a resource_string), placed '
               'in the world frame; the model has no spawnables of its own')
INFO = ('mujoco_hal_ros sim_node. Entities are the named bodies of the MuJoCo model; only '
        'free (freejoint) and mocap bodies can be placed. Reset restores the keyframe state '
        'but simulation time keeps running forward, so ROS clocks never jump back. '
        'Stepping requires the paused state.')
FEEDBACK_CHUNKS = 50          # simulate_steps reports progress about this many times


def _ok(text=''):
    return Result(result=Result.RESULT_OK, error_message=text)


def _fail(code, text):
    return Result(result=code, error_message=text)


class SimInterfaces:
    """The simulation_interfaces services and action on ``node`` for ``device``."""

    def __init__(self, node: Node, device: Device, bridge: CompletionBridge) -> None:
        self.node = node
        self.device = device
        self.bridge = bridge
        self.entities = Entities(device)
        self.stopped = False                  # STATE_STOPPED: paused and reset, until played
        group = ReentrantCallbackGroup()
        # (type, name, callback) of each service
        services: tuple[tuple[Any, str, Callable[..., Any]], ...] = (
            (GetSimulatorFeatures, 'get_simulator_features', self._features),
            (ResetSimulation, 'reset_simulation', self._reset),
            (GetSimulationState, 'get_simulation_state', self._get_state),
            (SetSimulationState, 'set_simulation_state', self._set_state),
            (StepSimulation, 'step_simulation', self._step),
            (GetEntityState, 'get_entity_state', self._get_entity),
            (SetEntityState, 'set_entity_state', self._set_entity),
            (GetEntities, 'get_entities', self._get_entities),
            (GetEntitiesStates, 'get_entities_states', self._get_entities_states),
            (GetEntityInfo, 'get_entity_info', self._get_info),
            (SetEntityInfo, 'set_entity_info', self._set_info),
            (GetEntityBounds, 'get_entity_bounds', self._get_bounds),
            (GetNamedPoses, 'get_named_poses', self._named_poses),
            (GetNamedPoseBounds, 'get_named_pose_bounds', self._named_pose_bounds),
            (GetSpawnables, 'get_spawnables', self._spawnables),
            (GetCurrentWorld, 'get_current_world', self._current_world),
            (GetAvailableWorlds, 'get_available_worlds', self._available_worlds))
        self.catalog = catalog.Catalog(device.model, device.layout.bodies)
        self._catalog_generation = device.snapshot.generation
        self.world = WorldServices(node, device, bridge, self._world_frame)
        self.scene = SceneEdits(device, bridge, lambda: self.edits,
                                self._entity_bodies,
                                self._world_frame, self._world_resource)
        services += self.scene.services()
        self._services = [node.create_service(srv_type, name, callback, callback_group=group,
                                              qos_profile=REQUEST_QOS)
                          for srv_type, name, callback in services]
        self._action = ActionServer(node, SimulateSteps, 'simulate_steps',
                                    execute_callback=self._simulate, callback_group=group,
                                    goal_callback=lambda _g: GoalResponse.ACCEPT,
                                    cancel_callback=lambda _h: CancelResponse.ACCEPT,
                                    **action_queues())

    # --- stepping without blocking the executor -----------------------------------------
    async def _run_steps(self, n):
        """(True, sim time) once ``n`` steps ran, or (False, the error that stopped them)."""
        try:
            sim_time = await self.bridge.wrap(self.device.step(n, wait=False))
        except Exception as exc:  # noqa: BLE001 - handed back to the caller
            return False, exc
        if sim_time is None:
            return False, 'sim_node stopped before the steps ended'
        return True, sim_time

    # --- simulation state -----------------------------------------------------------------
    def state(self) -> int:
        """simulation_interfaces' SimulationState: playing, paused or stopped."""
        if not self.device.paused:
            self.stopped = False          # played meanwhile (e.g. through sim_node's pause)
            return SimulationState.STATE_PLAYING
        return SimulationState.STATE_STOPPED if self.stopped else SimulationState.STATE_PAUSED

    @property
    def edits(self) -> bool:
        """Whether scene edits are served (the node's world_edits parameter; on without)."""
        return bool(getattr(getattr(self.node, 'p', None), 'world_edits', True))

    def _features(self, _req, resp):
        features = [f for f in FEATURES if self.edits or f not in EDIT_FEATURES]
        resp.features = SimulatorFeatures(features=features,
                                          spawn_formats=list(SPAWN_FORMATS),
                                          custom_info=INFO)
        return resp

    def _get_state(self, _req, resp):
        resp.state = SimulationState(state=self.state())
        resp.result = _ok()
        return resp

    def _set_state(self, req, resp):
        target, now = req.state.state, self.state()
        S = SimulationState
        try:
            if target == now:
                resp.result = _fail(SetSimulationState.Response.ALREADY_IN_TARGET_STATE,
                                    'already in that state')
            elif target == S.STATE_PLAYING:
                self.device.pause(False)
                self.stopped = False
                resp.result = _ok()
            elif target == S.STATE_PAUSED:
                self.device.pause(True)
                self.stopped = False
                resp.result = _ok()
            elif target == S.STATE_STOPPED:
                self.device.pause(True)
                self.device.reset()
                self.stopped = True
                resp.result = _ok('paused and reset to the start state')
            elif target == S.STATE_QUITTING:
                resp.result = _fail(Result.RESULT_FEATURE_UNSUPPORTED,
                                    'quitting is not served; end sim_node with SIGINT '
                                    '(Ctrl-C) or by stopping its launch')
            else:
                resp.result = _fail(SetSimulationState.Response.INCORRECT_TRANSITION,
                                    f'state {target} cannot be set; use STATE_PLAYING (1), '
                                    'STATE_PAUSED (2) or STATE_STOPPED (0)')
        except DeviceError as exc:
            resp.result = _fail(SetSimulationState.Response.STATE_TRANSITION_ERROR, str(exc))
        return resp

    def _reset(self, req, resp):
        scope = int(req.scope)
        R = ResetSimulation.Request
        if scope not in (R.SCOPE_DEFAULT, R.SCOPE_ALL) and not scope & R.SCOPE_STATE:
            resp.result = _fail(Result.RESULT_FEATURE_UNSUPPORTED,
                                'only the state can be reset (SCOPE_STATE, SCOPE_DEFAULT or '
                                'SCOPE_ALL): simulation time keeps running forward and this '
                                'simulator spawns nothing')
            return resp
        try:
            self.device.reset()
        except DeviceError as exc:
            resp.result = _fail(Result.RESULT_OPERATION_FAILED, str(exc))
            return resp
        note = '' if scope == R.SCOPE_STATE else 'state reset; simulation time keeps ' \
            'running forward so ROS clocks never jump back'
        resp.result = _ok(note)
        return resp

    # --- stepping -------------------------------------------------------------------------
    def _check_steps(self, steps):
        if not self.device.paused:
            return _fail(Result.RESULT_OPERATION_FAILED,
                         'stepping needs the paused state: set_simulation_state to '
                         'STATE_PAUSED (2) first')
        if not 1 <= steps <= limits.MAX_STEPS:
            return _fail(Result.RESULT_OPERATION_FAILED,
                         f'{steps} steps; ask for 1..{limits.MAX_STEPS}')
        return None

    async def _step(self, req, resp):
        steps = int(req.steps)
        refusal = self._check_steps(steps)
        if refusal is not None:
            resp.result = refusal
            return resp
        ok, value = await self._run_steps(steps)
        resp.result = _ok() if ok else _fail(Result.RESULT_OPERATION_FAILED, str(value))
        return resp

    async def _simulate(self, handle):
        steps = int(handle.request.steps)
        result = SimulateSteps.Result()
        refusal = self._check_steps(steps)
        if refusal is not None:
            result.result = refusal
            handle.abort()
            return result
        chunk = max(1, -(-steps // FEEDBACK_CHUNKS))
        done = 0
        while done < steps:
            if handle.is_cancel_requested:
                result.result = _ok(f'canceled after {done} of {steps} steps')
                handle.canceled()
                return result
            n = min(chunk, steps - done)
            ok, value = await self._run_steps(n)
            if not ok:
                result.result = _fail(Result.RESULT_OPERATION_FAILED,
                                      f'stopped after {done} of {steps} steps: {value}')
                handle.abort()
                return result
            done += n
            handle.publish_feedback(SimulateSteps.Feedback(completed_steps=done,
                                                           remaining_steps=steps - done))
        result.result = _ok()
        handle.succeed()
        return result

    # --- entities -------------------------------------------------------------------------
    def _world_frame(self):
        if self.node.has_parameter('world_frame'):
            return self.node.get_parameter('world_frame').value or 'world'
        return 'world'

    def _body(self, entity):
        """A spawned entity's name stands for its top body; any other name is a body's."""
        bodies = self.device.scene.bodies(entity)
        return bodies[0] if bodies else entity

    def _get_entity(self, req, resp):
        try:
            s = self.entities.state(self._body(req.entity))
        except DeviceError as exc:
            code = Result.RESULT_NOT_FOUND if exc.code == UNKNOWN_NAME else \
                Result.RESULT_OPERATION_FAILED
            resp.result = _fail(code, str(exc))
            return resp
        self._fill_state(resp.state, s)
        resp.result = _ok()
        return resp

    def _fill_state(self, st, s):
        st.header.frame_id = self._world_frame()
        st.header.stamp = cv.stamp(s['time'])
        p, q = s['position'], s['quaternion']
        st.pose.position.x, st.pose.position.y, st.pose.position.z = (float(v) for v in p)
        st.pose.orientation.w, st.pose.orientation.x, st.pose.orientation.y, \
            st.pose.orientation.z = (float(v) for v in q)
        st.twist.linear.x, st.twist.linear.y, st.twist.linear.z = \
            (float(v) for v in s['linear'])
        st.twist.angular.x, st.twist.angular.y, st.twist.angular.z = \
            (float(v) for v in s['angular'])

    def _set_entity(self, req, resp):
        frame = req.state.header.frame_id
        relative = frame not in ('', self._world_frame())
        if relative and frame not in self.entities.names:
            resp.result = _fail(Result.RESULT_OPERATION_FAILED,
                                f'frame {frame[:80]!r}: states are set in the world frame '
                                f'({self._world_frame()!r} or empty) or relative to an '
                                'entity (get_entities lists them)')
            return resp
        st = req.state
        o, t = st.pose.orientation, st.twist
        kw = {}
        if req.set_pose:
            kw['position'] = (st.pose.position.x, st.pose.position.y, st.pose.position.z)
            kw['quaternion'] = (o.w, o.x, o.y, o.z)
        if req.set_twist:
            kw['linear'] = (t.linear.x, t.linear.y, t.linear.z)
            kw['angular'] = (t.angular.x, t.angular.y, t.angular.z)
        try:
            if kw and relative:
                kw = frames.to_world(self.entities.state(frame), **kw)
            if kw:
                self.entities.set_state(self._body(req.entity), **kw)
            else:
                self.entities.body_id(self._body(req.entity))   # say when the name is wrong
        except DeviceError as exc:
            code = {UNKNOWN_NAME: Result.RESULT_NOT_FOUND,
                    INVALID_POSE: SetEntityState.Response.INVALID_POSE}.get(
                        exc.code, Result.RESULT_OPERATION_FAILED)
            resp.result = _fail(code, str(exc))
            return resp
        resp.result = _ok('acceleration is not set: MuJoCo computes it'
                          if req.set_acceleration else '')
        return resp

    # --- entity catalogue -------------------------------------------------------------------
    def _filtered(self, filters):
        """Names matching an EntityFilters message; raises DeviceError on a bad filter."""
        b = filters.bounds
        region = catalog.region(int(b.type), [(p.x, p.y, p.z) for p in b.points])
        snap = self._follow()
        return self.catalog.filter(snap.xpos, snap.xquat, filters.filter,
                                   [int(c.category) for c in filters.categories],
                                   list(filters.tags.tags), int(filters.tags.filter_mode) == 1,
                                   region)

    def _get_entities(self, req, resp):
        try:
            resp.entities = self._filtered(req.filters)
        except DeviceError as exc:
            resp.result = _fail(Result.RESULT_OPERATION_FAILED, str(exc))
            return resp
        resp.result = _ok()
        return resp

    def _get_entities_states(self, req, resp):
        try:
            names = self._filtered(req.filters)
            snap = self.device.snapshot
            states = []
            for n in names:
                st = EntityState()
                self._fill_state(st, self.entities.state(n, snap))
                states.append(st)
        except DeviceError as exc:
            resp.result = _fail(Result.RESULT_OPERATION_FAILED, str(exc))
            return resp
        resp.entities, resp.states = names, states
        resp.result = _ok()
        return resp

    def _follow(self):
        """The latest snapshot, with the catalogue of its model (after a scene edit)."""
        snap = self.device.snapshot
        if snap.generation != self._catalog_generation:
            model = self.device.cameras.model_of(snap.generation)
            self.catalog.follow(model, catalog.body_names(model))
            self._catalog_generation = snap.generation
        return snap

    def _entity_bodies(self):
        """The current model's entity names (after a scene edit, the new model's)."""
        self._follow()
        return list(self.catalog.names)

    def _known(self, name, resp):
        self._follow()
        if name not in self.catalog.names:
            resp.result = _fail(Result.RESULT_NOT_FOUND,
                                f'no entity {name[:80]!r}; get_entities lists them')
            return False
        return True

    def _get_info(self, req, resp):
        if not self._known(req.entity, resp):
            return resp
        category, description, tags = self.catalog.info(req.entity)
        resp.info.category = EntityCategory(category=category)
        resp.info.description, resp.info.tags = description, tags
        resp.result = _ok()
        return resp

    def _set_info(self, req, resp):
        if not self._known(req.entity, resp):
            return resp
        try:
            self.catalog.set_info(req.entity, int(req.info.category.category),
                                  req.info.description, list(req.info.tags))
        except DeviceError as exc:
            resp.result = _fail(Result.RESULT_OPERATION_FAILED, str(exc))
            return resp
        resp.result = _ok()
        return resp

    @staticmethod
    def _box(bounds, box):
        if box is None:
            bounds.type = Bounds.TYPE_EMPTY
            return
        bounds.type = Bounds.TYPE_BOX
        bounds.points = [Vector3(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in box]

    def _get_bounds(self, req, resp):
        if not self._known(req.entity, resp):
            return resp
        snap = self._follow()
        try:
            box = self.catalog.bounds(req.entity, snap.xpos, snap.xquat)
        except DeviceError as exc:
            resp.result = _fail(Result.RESULT_OPERATION_FAILED, str(exc))
            return resp
        self._box(resp.bounds, box)
        resp.result = _ok('' if box is not None else 'the entity has no geometry')
        return resp

    def _named_poses(self, req, resp):
        wanted = list(req.tags.tags)
        mode_all = int(req.tags.filter_mode) == 1
        tags = ['keyframe']
        if wanted and not (all(t in tags for t in wanted) if mode_all
                           else any(t in tags for t in wanted)):
            resp.poses, resp.result = [], _ok()
            return resp
        poses = []
        for name in catalog.named_poses(self.device.model):
            p = NamedPose(name=name, description='a keyframe of the model: a whole joint '
                          'configuration (reset_simulation returns to the start one); the '
                          'pose is the world origin', tags=tags)
            p.pose.orientation.w = 1.0
            poses.append(p)
        resp.poses, resp.result = poses, _ok()
        return resp

    def _named_pose_bounds(self, req, resp):
        try:
            box = catalog.named_pose_bounds(self.device.model, req.name)
        except DeviceError:
            resp.result = _fail(Result.RESULT_NOT_FOUND, f'no named pose {req.name[:80]!r}; '
                                'get_named_poses lists them')
            return resp
        self._box(resp.bounds, box)
        resp.result = _ok()
        return resp

    def _spawnables(self, _req, resp):
        resp.spawnables = []
        resp.result = _ok(SCENE_EDITS)
        return resp

    def _world_resource(self):
        path = self.device.model_path
        w = WorldResource(name=os.path.splitext(os.path.basename(path))[0],
                          description='the MJCF sim_node runs')
        w.world_resource.uri = f'file://{os.path.abspath(path)}' if path != '<string>' \
            else ''
        return w

    def _current_world(self, _req, resp):
        resp.world = self._world_resource()
        resp.result = _ok()
        return resp

    def _available_worlds(self, _req, resp):
        resp.worlds = [self._world_resource()]
        resp.result = _ok('the running world; load_world takes any MJCF file or string')
        return resp

    # --- lifetime -------------------------------------------------------------------------
    def destroy(self) -> None:
        self.world.destroy()
        for srv in self._services:
            self.node.destroy_service(srv)
        self._services = []
        self._action.destroy()
