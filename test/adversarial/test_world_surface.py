"""The run-time world surface of a whole sim_node under hostile requests over ROS.

Hypothesis draws every field of every world service (spawn_entity, load_world,
delete_entity, set_entity_state, randomize, apply_wrench, set_joint_state, the snapshot
services): hostile floats (NaN, inf, 1e308), hostile names (``../../x``, megabytes, control
characters), hostile MJCF (a million geoms by nested ``<replicate>``, unparseable, deep,
device files, system files) and hostile JSON (deep, huge, NaN). Each request must be
answered (no timeout), with a result code; what is accepted must be physically sane; and
after each test the node still answers and its physics still steps. The node runs paused:
an accepted edit's state is then read before anything moves it.
"""

import math
import re

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')
pytest.importorskip('simulation_interfaces.srv', reason='simulation_interfaces is not '
                    'installed and its stand-in was not built (run scripts/setup.sh)')

from helpers import SpunNodes, wait_for  # noqa: E402
from hostile_helpers import HUGE, NON_FINITE  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from simulation_interfaces import srv as si  # noqa: E402
from simulation_interfaces.msg import Result  # noqa: E402

from mujoco_hal_ros import srv as own  # noqa: E402
from mujoco_hal_ros.world import bounds  # noqa: E402

OK = Result.RESULT_OK
_TOKEN = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
BOX = ('<mujoco><worldbody><body name="box"><freejoint/>'
       '<geom type="box" size="0.02 0.02 0.02" mass="0.1"/></body></worldbody></mujoco>')
MILLION = ('<mujoco><worldbody>' + '<replicate count="100" offset="0.01 0 0">' * 3 +
           '<geom size=".001"/>' + '</replicate>' * 3 + '</worldbody></mujoco>')
ANSWER_S = 60.0          # a generous bound on one answer: a hang fails, a slow host does not
CODES = {'DONE', 'INVALID_ARGUMENT', 'UNKNOWN_NAME', 'LIMIT_EXCEEDED', 'MODEL_ERROR',
         'UNSTABLE', 'STALE_SNAPSHOT', 'CLOSED', 'FORBIDDEN', 'INVALID_POSE', 'NOT_MOVABLE'}


@pytest.fixture(scope='module')
def node():
    from mujoco_hal_ros.ros.sim.sim_node import SimNode
    h = SpunNodes(lambda ctx: [
        SimNode(context=ctx, parameter_overrides=[
            Parameter('publish_rate', value=20.0), Parameter('camera_rate', value=1.0),
            Parameter('start_paused', value=True), Parameter('real_time_factor', value=0.0),
            Parameter('world_max_geoms', value=2000)]),
        rclpy.create_node('world_surface_client', context=ctx)],
        lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
    h.spin(1800.0)
    h.clients = {}
    try:
        yield h
    finally:
        h.close()


def call(h, srv_type, name, req):
    cli = h.clients.get(name)
    if cli is None:
        cli = h.clients[name] = h.nodes[-1].create_client(srv_type, name)
        assert cli.wait_for_service(timeout_sec=20.0), f'{name} not offered'
    return h.wait(cli.call_async(req), ANSWER_S)


def alive_and_stepping(h):
    """The node answers and its physics advances (paused: a step request)."""
    dev = h.nodes[0].device
    t0 = dev.snapshot.time
    r = call(h, si.StepSimulation, 'step_simulation', si.StepSimulation.Request(steps=5))
    assert r.result.result == OK, r.result.error_message
    assert wait_for(lambda: dev.snapshot.time > t0, 10.0), 'physics stopped'
    assert dev.health()['alive'] and dev.health()['errors'] == 0


def clean_up(h):
    dev = h.nodes[0].device
    for name in dev.scene.names():
        dev.scene.delete(name)
    dev.sensing.clear_wrenches()
    dev.reset()


# --- strategies ------------------------------------------------------------------------------
def floats():
    return st.one_of(st.floats(-2.0, 2.0), st.sampled_from(HUGE + NON_FINITE + [0.0, 2e4]),
                     st.floats(allow_nan=True, allow_infinity=True))


def ros_names():
    return st.one_of(st.sampled_from(['crate', 'box_1', '../../x', 'a b', '9lives', '/x',
                                      'x/', 'a//b', '\x00', '', 'ünï', 'block', 'hand']),
                     st.text(max_size=12), st.builds(lambda: 'n' * 300_000))


def mjcf():
    return st.one_of(
        st.just(BOX), st.just(MILLION), st.just('<mujoco>'), st.just('<'), st.just(''),
        st.just('<mujoco>' + '<worldbody>' * 5000), st.just('not xml at all'),
        st.just('<mujoco><include file="/etc/passwd"/></mujoco>'),
        st.just('<mujoco><asset><mesh file="/dev/zero"/></asset></mujoco>'),
        st.just('<mujoco><worldbody><replicate count="-5"><geom size="1"/></replicate>'
                '</worldbody></mujoco>'),
        st.just('<mujoco><worldbody><replicate count="99999999999999999999">'
                '<geom size="1"/></replicate></worldbody></mujoco>'),
        st.text(max_size=40).map(lambda t: f'<mujoco>{t}</mujoco>'))


def uris():
    return st.sampled_from(['', '/dev/zero', '/etc/passwd', '/', 'http://example.com/x.xml',
                            'file:///proc/self/mem', 'model.urdf', 'x' * 5000, '\x00'])


def json_texts():
    scalars = st.one_of(st.floats(allow_nan=False), st.integers(-10 ** 30, 10 ** 30),
                        st.text(max_size=5), st.none(), st.booleans())
    nested = st.recursive(scalars, lambda c: st.lists(c, max_size=4) |
                          st.dictionaries(st.text(max_size=12), c, max_size=4), max_leaves=12)
    fields = st.sampled_from(['body_mass', 'geom_friction', 'dof_damping', 'geom_rgba',
                              'object_positions', 'actuator_gainprm', 'nope'])
    scale = st.lists(floats(), min_size=0, max_size=3).map(lambda v: {'scale': v})
    import json
    return st.one_of(
        st.dictionaries(fields, scale | nested, max_size=3).map(
            lambda d: json.dumps(d, allow_nan=True)),
        st.sampled_from(['[' * 10_000, '{"a":' * 10_000, 'NaN', '', '{', '[]', '{}',
                         '{"body_mass": {"scale": [1, 1e308]}}',
                         '{"geom_friction": {"scale": [0.5, 1e308]}}', '1' * 5000]),
        nested.map(lambda v: json.dumps(v)))


def vec3(msg, values):
    msg.x, msg.y, msg.z = (float(v) for v in values)


def sane(values, top):
    return all(math.isfinite(v) and abs(v) <= top for v in values)


# --- the services ----------------------------------------------------------------------------
SPAWN_FIELDS = ['none', 'name', 'namespace', 'resource', 'uri', 'position', 'orientation',
                'all']


@settings(max_examples=80, deadline=None)
@given(data=st.data(), hostile=st.sampled_from(SPAWN_FIELDS))
def test_spawn_entity_fields(node, data, hostile):
    """A sane request with one field (or every field) drawn hostile."""
    dev = node.nodes[0].device
    draw = data.draw
    pick = (lambda field, strategy, sane: draw(strategy, label=field)
            if hostile in (field, 'all') else sane)
    name = pick('name', ros_names(), 'crate')
    namespace = pick('namespace', st.sampled_from(['', 'props', '../up', '/a/b/', 'x y']),
                     '')
    resource = pick('resource', mjcf(), BOX)
    uri = pick('uri', uris(), '')
    position = pick('position', st.lists(floats(), min_size=3, max_size=3), [0.2, 0.0, 0.3])
    orientation = pick('orientation', st.lists(floats(), min_size=4, max_size=4),
                       [1.0, 0.0, 0.0, 0.0])
    gen = dev.generation
    req = si.SpawnEntity.Request(name=name, allow_renaming=draw(st.booleans()),
                                 entity_namespace=namespace)
    if uri:
        req.entity_resource.uri = uri
    else:
        req.entity_resource.resource_string = resource
    vec3(req.initial_pose.pose.position, position)
    o = req.initial_pose.pose.orientation
    o.w, o.x, o.y, o.z = (float(v) for v in orientation)
    r = call(node, si.SpawnEntity, 'spawn_entity', req)
    assert len(r.result.error_message) < 5000
    if hostile == 'none':
        assert r.result.result == OK, r.result.error_message
    if r.result.result != OK:
        assert dev.generation == gen, 'a refused spawn changed the scene'
        return
    assert sane(position, bounds.MAX_POSITION), 'a spawn outside the world box was accepted'
    norm = math.sqrt(sum(v * v for v in orientation))
    assert abs(norm - 1) < bounds.UNIT_TOLERANCE, 'a spawn with no rotation was accepted'
    full = r.entity_name
    assert full in dev.scene.names()
    assert all(_TOKEN.fullmatch(t) for t in full.split('/')), f'{full!r} is no ROS name'
    dev.scene.delete(full)


@settings(max_examples=25, deadline=None)
@given(resource=mjcf(), uri=uris(), use_uri=st.booleans())
def test_load_world_fields(node, resource, uri, use_uri):
    dev = node.nodes[0].device
    gen, path = dev.generation, dev.model_path
    req = si.LoadWorld.Request()
    if use_uri:
        req.world_resource.uri = uri
    else:
        req.world_resource.resource_string = resource
    r = call(node, si.LoadWorld, 'load_world', req)
    if r.result.result != OK:
        assert dev.generation == gen and dev.model_path == path
        return
    assert dev.model.ngeom <= 2000
    u = call(node, si.UnloadWorld, 'unload_world', si.UnloadWorld.Request())
    assert u.result.result == OK, u.result.error_message


@settings(max_examples=60, deadline=None)
@given(fields=json_texts(), seeded=st.booleans(), seed=st.integers(0, 2 ** 64 - 1))
def test_randomize_fields(node, fields, seeded, seed):
    dev = node.nodes[0].device
    mass = np.array(dev.model.body_mass)
    r = call(node, own.Randomize, 'randomize',
             own.Randomize.Request(fields_json=fields, seeded=seeded, seed=seed))
    assert r.code in CODES, r.code
    assert len(r.message) < 5000
    if not r.success:
        assert np.array_equal(dev.model.body_mass, mass), 'a refused randomize wrote'
        return
    for key in ('body_mass', 'geom_friction', 'dof_damping', 'actuator_gainprm'):
        values = np.asarray(getattr(dev.model, key))
        assert np.isfinite(values).all() and np.abs(values).max() <= bounds.MAX_VALUE
    dev.reset()


WRENCH_FIELDS = ['none', 'body', 'force', 'torque', 'point', 'frame', 'duration', 'all']


@settings(max_examples=80, deadline=None)
@given(data=st.data(), hostile=st.sampled_from(WRENCH_FIELDS))
def test_apply_wrench_fields(node, data, hostile):
    dev = node.nodes[0].device
    draw = data.draw
    pick = (lambda field, strategy, sane: draw(strategy, label=field)
            if hostile in (field, 'all') else sane)
    vector = st.lists(floats(), min_size=3, max_size=3)
    body = pick('body', ros_names(), 'block')
    force = pick('force', vector, [0.0, 0.0, 1.0])
    torque = pick('torque', vector, [0.0, 0.0, 0.0])
    point = pick('point', vector, [0.0, 0.0, 0.0])
    frame = pick('frame', st.sampled_from(['', 'world', 'block', 'nope', '../x']), '')
    duration = pick('duration', floats(), 0.0)
    req = own.ApplyWrench.Request(body=body, reference_frame=frame, duration=float(duration))
    vec3(req.force, force)
    vec3(req.torque, torque)
    vec3(req.point, point)
    r = call(node, own.ApplyWrench, 'apply_wrench', req)
    assert r.code in CODES, r.code
    if hostile == 'none':
        assert r.success, r.message
    if r.success:
        assert sane(force, bounds.MAX_FORCE) and sane(torque, bounds.MAX_TORQUE)
        assert sane(point, bounds.MAX_POSITION) and 0 <= duration <= bounds.MAX_DURATION
        dev.sensing.clear_wrenches()
    else:
        assert not dev.sensing.wrenches()


@settings(max_examples=50, deadline=None)
@given(entity=ros_names(), frame=st.sampled_from(['', 'world', 'block', 'nope']),
       position=st.lists(floats(), min_size=3, max_size=3),
       orientation=st.lists(floats(), min_size=4, max_size=4),
       linear=st.lists(floats(), min_size=3, max_size=3), set_pose=st.booleans(),
       set_twist=st.booleans())
def test_set_entity_state_fields(node, entity, frame, position, orientation, linear,
                                 set_pose, set_twist):
    dev = node.nodes[0].device
    req = si.SetEntityState.Request(entity=entity, set_pose=set_pose, set_twist=set_twist)
    req.state.header.frame_id = frame
    vec3(req.state.pose.position, position)
    o = req.state.pose.orientation
    o.w, o.x, o.y, o.z = (float(v) for v in orientation)
    vec3(req.state.twist.linear, linear)
    r = call(node, si.SetEntityState, 'set_entity_state', req)
    assert len(r.result.error_message) < 5000
    assert np.isfinite(dev.snapshot.qpos).all()


@settings(max_examples=40, deadline=None)
@given(names=st.lists(ros_names() | st.sampled_from(['pan', 'lift', 'elbow', 'wrist']),
                      max_size=4),
       positions=st.lists(floats(), max_size=5), velocities=st.lists(floats(), max_size=5),
       snapshot=ros_names())
def test_teleport_and_snapshot_fields(node, names, positions, velocities, snapshot):
    dev = node.nodes[0].device
    r = call(node, own.SetJointState, 'set_joint_state', own.SetJointState.Request(
        names=names, positions=[float(p) for p in positions],
        velocities=[float(v) for v in velocities]))
    assert r.code in CODES, r.code
    if r.success:
        assert all(abs(v) <= bounds.MAX_ANGULAR for v in velocities)
    assert np.isfinite(dev.snapshot.qpos).all()
    for service in ('save_state', 'load_state', 'delete_state'):
        r = call(node, own.SaveState, service, own.SaveState.Request(name=snapshot))
        assert r.code in CODES, r.code


@settings(max_examples=15, deadline=None)
@given(count=st.sampled_from([0, 1, 3, 101, 5000]), hostile=st.booleans())
def test_spawn_entities_batches(node, count, hostile):
    from simulation_interfaces.msg import SpawnEntity as SpawnRequest
    dev = node.nodes[0].device
    gen = dev.generation
    one = SpawnRequest(name='../x' if hostile else 'twin', allow_renaming=True)
    one.entity_resource.resource_string = BOX
    one.initial_pose.pose.position.z = 0.3
    r = call(node, si.SpawnEntities, 'spawn_entities',
             si.SpawnEntities.Request(spawn_requests=[one] * count))
    if count > 100:
        assert r.result.result != OK and 'at most 100' in r.result.error_message
        assert dev.generation == gen
    elif hostile and count:
        assert r.result.result != OK and dev.generation == gen
        assert all(x.result.result == si.SpawnEntity.Response.NAME_INVALID
                   for x in r.results)
    else:
        assert r.result.result == OK
        assert len(r.results) == count
    clean_up(node)


@settings(max_examples=30, deadline=None)
@given(entity=ros_names().filter(lambda n: n != 'block'))
def test_delete_entity_fields(node, entity):
    """Any name: refused (NOT_FOUND, or OPERATION_FAILED for a body the device needs) with
    the scene unchanged, or a spawned entity deleted."""
    dev = node.nodes[0].device
    gen = dev.generation
    r = call(node, si.DeleteEntity, 'delete_entity', si.DeleteEntity.Request(entity=entity))
    assert len(r.result.error_message) < 5000
    if r.result.result != OK:
        assert dev.generation == gen
    assert dev.model.nu == 4, 'a delete took an actuator of the device'


@settings(max_examples=40, deadline=None)
@given(pattern=st.one_of(st.text(alphabet='a()*+?|.{}[]^$\\1,2', max_size=24),
                         st.sampled_from(['(a*)*$', '(.*a){20}', '.*.*.*.*x', '(a|aa)*',
                                          '^bl', 'x' * 1000])))
def test_get_entities_filters(node, pattern):
    """An entity named by 40 a's is there: a filter that backtracks without bound over it
    would freeze the node (the GIL held), so such filters are refused."""
    dev = node.nodes[0].device
    if 'a' * 40 not in dev.scene.names():
        dev.scene.spawn(BOX, 'a' * 40, position=(0.5, 0.5, 0.3))
    req = si.GetEntities.Request()
    req.filters.filter = pattern
    r = call(node, si.GetEntities, 'get_entities', req)
    assert len(r.result.error_message) < 5000


def test_the_cases_of_issue_26_get_the_standard_codes(node):
    """Each case the issue found accepted, refused with the code simulation_interfaces (or
    mujoco_hal_ros) gives it, the scene unchanged."""
    R = si.SpawnEntity.Response
    dev = node.nodes[0].device
    gen = dev.generation

    def spawn(name='crate', position=(0.2, 0.0, 0.3), orientation=(1.0, 0.0, 0.0, 0.0),
              resource=BOX, renaming=False):
        req = si.SpawnEntity.Request(name=name, allow_renaming=renaming)
        req.entity_resource.resource_string = resource
        vec3(req.initial_pose.pose.position, position)
        o = req.initial_pose.pose.orientation
        o.w, o.x, o.y, o.z = orientation
        return call(node, si.SpawnEntity, 'spawn_entity', req).result
    assert spawn(position=(1e308, 0.0, 0.0)).result == R.INVALID_POSE
    assert spawn(orientation=(0.0, 0.0, 0.0, 0.0)).result == R.INVALID_POSE
    assert spawn(name='../../x').result == R.NAME_INVALID
    assert spawn(name='../../x', renaming=True).result == R.NAME_INVALID
    r = spawn(resource=MILLION)
    assert r.result == R.RESOURCE_PARSE_ERROR and 'world_max_geoms' in r.error_message
    req = own.ApplyWrench.Request(body='block')
    req.force.x = 1e308
    r = call(node, own.ApplyWrench, 'apply_wrench', req)
    assert (r.success, r.code) == (False, 'INVALID_ARGUMENT') and 'force' in r.message
    r = call(node, own.Randomize, 'randomize', own.Randomize.Request(
        fields_json='{"geom_friction": {"scale": [1, 1e308]}}'))
    assert (r.success, r.code) == (False, 'INVALID_ARGUMENT')
    r = call(node, own.Randomize, 'randomize', own.Randomize.Request(fields_json='[' * 10_000))
    assert (r.success, r.code) == (False, 'INVALID_ARGUMENT') and '32' in r.message
    assert dev.generation == gen and not dev.sensing.wrenches()
    alive_and_stepping(node)


def test_the_node_answers_and_steps_after_all_of_it(node):
    clean_up(node)
    alive_and_stepping(node)
    dev = node.nodes[0].device
    req = si.SpawnEntity.Request(name='last_crate')
    req.entity_resource.resource_string = BOX
    req.initial_pose.pose.position.z = 0.3
    r = call(node, si.SpawnEntity, 'spawn_entity', req)
    assert r.result.result == OK, r.result.error_message
    alive_and_stepping(node)
    dev.scene.delete('last_crate')


def test_world_edits_off_refuses_every_edit():
    """In a namespace of its own: the module's node (edits on) serves the same names."""
    from mujoco_hal_ros.ros.sim.sim_node import SimNode
    h = SpunNodes(lambda ctx: [
        SimNode(context=ctx, namespace='/locked', parameter_overrides=[
            Parameter('world_edits', value=False), Parameter('publish_rate', value=20.0)]),
        rclpy.create_node('world_edits_client', context=ctx)],
        lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
    h.spin(120.0)
    h.clients = {}
    try:
        dev = h.nodes[0].device
        gen = dev.generation
        req = si.SpawnEntity.Request(name='crate')
        req.entity_resource.resource_string = BOX
        r = call(h, si.SpawnEntity, 'locked/spawn_entity', req)
        assert r.result.result == Result.RESULT_FEATURE_UNSUPPORTED
        assert 'world_edits' in r.result.error_message
        req = si.LoadWorld.Request()
        req.world_resource.resource_string = BOX
        assert call(h, si.LoadWorld, 'locked/load_world', req).result.result == \
            Result.RESULT_FEATURE_UNSUPPORTED
        r = call(h, own.Randomize, 'locked/randomize', own.Randomize.Request(
            fields_json='{"body_mass": {"scale": [0.5, 2]}}'))
        assert (r.success, r.code) == (False, 'FORBIDDEN')
        features = call(h, si.GetSimulatorFeatures, 'locked/get_simulator_features',
                        si.GetSimulatorFeatures.Request()).features.features
        from simulation_interfaces.msg import SimulatorFeatures as F
        assert F.SPAWNING not in features and F.WORLD_LOADING not in features
        assert F.ENTITY_STATE_GETTING in features
        assert dev.generation == gen
    finally:
        h.close()
