"""Untrusted models are read and compiled in the capped sandbox process, and every number a
request puts into the world is bounded (``world.sandbox``, ``world.bounds``). Each refusal
has a code and names its limit; the device's own memory does not grow and nothing changes.
"""

import os

import numpy as np
import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.world import bounds
from mujoco_hal_ros.world.sandbox import Limits, Sandbox

BOX = ('<mujoco><worldbody><body name="box"><freejoint/>'
       '<geom type="box" size="0.02 0.02 0.02" mass="0.1"/></body></worldbody></mujoco>')
# Three nested replicates of 100: a million geoms once MuJoCo expands them.
MILLION = ('<mujoco><worldbody>' + '<replicate count="100" offset="0.01 0 0">' * 3 +
           '<geom size=".001"/>' + '</replicate>' * 3 + '</worldbody></mujoco>')


def rss_mb():
    with open('/proc/self/status') as handle:
        for line in handle:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture(scope='module')
def sandbox():
    sb = Sandbox()
    yield sb
    sb.close()


def test_a_normal_entity_passes_and_a_world_comes_back_compiled(sandbox):
    out = sandbox.check(BOX)
    assert out['counts']['bodies'] == 1 and out['model'] is None
    world = sandbox.check(BOX, world=True)['model']
    assert world.nbody == 2 and world.ngeom == 1


def test_a_million_geoms_and_200k_bodies_are_refused_in_the_sandbox(sandbox, tmp_path):
    sandbox.check(BOX)                               # the worker is up: RSS is the node's
    before = rss_mb()
    with pytest.raises(errors.DeviceError) as err:
        sandbox.check(MILLION)
    assert err.value.code == errors.LIMIT_EXCEEDED
    assert 'world_max_geoms = 50000' in str(err.value)
    big = tmp_path / 'big.xml'
    big.write_text('<mujoco><worldbody>' + ''.join(
        f'<body pos="{i} 0 0"><geom size=".1"/></body>' for i in range(200_000)) +
        '</worldbody></mujoco>')
    with pytest.raises(errors.DeviceError) as err:
        sandbox.check(str(big), world=True)
    assert err.value.code == errors.LIMIT_EXCEEDED and 'world_max_bodies' in str(err.value)
    assert rss_mb() - before < 100, 'the node parsed the model itself'
    assert sandbox.check(BOX)['counts']['geoms'] == 1


def test_small_caps_are_named(tmp_path):
    with _closing(Sandbox(Limits(max_bodies=2, max_geoms=3))) as sb:
        with pytest.raises(errors.DeviceError, match='world_max_bodies = 2'):
            sb.check('<mujoco><worldbody>' + '<body><geom size="1"/></body>' * 3 +
                     '</worldbody></mujoco>')
        with pytest.raises(errors.DeviceError, match='world_max_geoms = 3'):
            sb.check('<mujoco><worldbody>' + '<geom size="1"/>' * 4 + '</worldbody></mujoco>')
        with pytest.raises(errors.DeviceError) as err:
            sb.check('<mujoco><worldbody><geom type="nonsense"/></worldbody></mujoco>')
        assert err.value.code == errors.MODEL_ERROR
        with pytest.raises(errors.DeviceError) as err:
            sb.check('<mujoco><worldbody>' + '<replicate count="1">' * 300)
        assert err.value.code == errors.INVALID_ARGUMENT and '200' in str(err.value)


class _closing:
    def __init__(self, sb):
        self.sb = sb

    def __enter__(self):
        return self.sb

    def __exit__(self, *exc):
        self.sb.close()


def test_files_outside_the_resource_roots_are_refused(tmp_path):
    inside = tmp_path / 'ok'
    inside.mkdir()
    (inside / 'box.xml').write_text(BOX)
    with _closing(Sandbox(roots=[str(inside)])) as sb:
        assert sb.check(str(inside / 'box.xml'))['counts']['bodies'] == 1
        outside = tmp_path / 'box.xml'
        outside.write_text(BOX)
        for resource in (str(outside), f'file://{outside}', str(inside / '..' / 'box.xml'),
                         '<mujoco><include file="/etc/passwd"/></mujoco>',
                         '<mujoco><asset><mesh file="/dev/zero"/></asset></mujoco>'):
            with pytest.raises(errors.DeviceError) as err:
                sb.check(resource)
            assert err.value.code == errors.INVALID_ARGUMENT, resource
            assert 'resource_roots' in str(err.value)


def test_a_worker_that_died_is_started_again(sandbox):
    sandbox.check(BOX)
    os.kill(sandbox.pid, 9)
    sandbox._proc.wait(10.0)                # dead while idle (the OOM killer, a stray kill)
    assert sandbox.check(BOX)['counts']['bodies'] == 1


def test_a_job_over_the_memory_limit_is_refused_and_the_worker_goes_on():
    texture = ('<mujoco><asset><texture name="t" type="2d" builtin="checker" width="20000" '
               'height="20000"/></asset><worldbody><geom size="1"/></worldbody></mujoco>')
    expand = ('<mujoco><worldbody>' + '<replicate count="60" offset="0.01 0 0">' * 3 +
              '<body><geom size=".001"/></body>' + '</replicate>' * 3 +
              '</worldbody></mujoco>')
    with _closing(Sandbox(Limits(memory_mb=400, max_bodies=10 ** 7,
                                 max_geoms=10 ** 7))) as sb:
        for xml in (texture, expand):
            with pytest.raises(errors.DeviceError) as err:
                sb.check(xml)
            assert err.value.code == errors.LIMIT_EXCEEDED, err.value
            assert 'sandbox_memory_mb = 400' in str(err.value)
            assert sb.check(BOX)['counts']['bodies'] == 1


def test_a_job_over_the_cpu_limit_ends_the_worker_and_is_refused():
    """343,000 geoms (caps lifted): MuJoCo takes seconds of CPU to read them, and
    RLIMIT_CPU's SIGXCPU ends the worker after one; the next job gets a new worker."""
    many = ('<mujoco><worldbody>' + '<replicate count="70" offset="0.01 0 0">' * 3 +
            '<geom size=".001"/>' + '</replicate>' * 3 + '</worldbody></mujoco>')
    with _closing(Sandbox(Limits(cpu_s=1.0, max_bodies=10 ** 7, max_geoms=10 ** 7))) as sb:
        with pytest.raises(errors.DeviceError) as err:
            sb.check(many)
        assert err.value.code == errors.LIMIT_EXCEEDED
        assert 'sandbox_cpu_s = 1' in str(err.value)
        assert sb.check(BOX)['counts']['bodies'] == 1


# --- the device with a sandbox: scene edits from outside --------------------------------
@pytest.fixture()
def guarded(bench):
    bench.sandbox = Sandbox()
    yield bench
    bench.sandbox.close()
    bench.sandbox = None
    for name in bench.scene.names():
        bench.scene.delete(name)


def test_spawn_and_load_world_go_through_the_sandbox(guarded, tmp_path):
    gen = guarded.generation
    guarded.scene.spawn(BOX, 'crate', position=(0.25, -0.15, 0.15))
    assert guarded.generation == gen + 1
    with pytest.raises(errors.DeviceError) as err:
        guarded.scene.spawn(MILLION, 'pile')
    assert err.value.code == errors.LIMIT_EXCEEDED and guarded.generation == gen + 1
    with pytest.raises(errors.DeviceError) as err:
        guarded.scene.load_world(MILLION)
    assert err.value.code == errors.LIMIT_EXCEEDED and guarded.generation == gen + 1
    guarded.scene.delete('crate')


def test_the_scene_total_is_capped_too(bench):
    """Each spawn is within the limits; their sum is checked as well."""
    bench.sandbox = Sandbox(Limits(max_bodies=bench.model.nbody))   # room for one more
    try:
        bench.scene.spawn(BOX, 'first', position=(0.2, 0, 0.2))
        gen = bench.generation
        with pytest.raises(errors.DeviceError) as err:
            bench.scene.spawn(BOX, 'second', position=(0.3, 0, 0.2))
        assert err.value.code == errors.LIMIT_EXCEEDED and 'world_max_bodies' in str(err.value)
        assert bench.generation == gen and bench.scene.names() == ['first']
    finally:
        bench.sandbox.close()
        bench.sandbox = None


@pytest.mark.parametrize('kw, where', [
    ({'name': '../../x'}, 'name'), ({'name': 'a b'}, 'name'), ({'name': '9lives'}, 'name'),
    ({'name': 'x', 'namespace': '../up'}, 'namespace'),
    ({'position': (1e308, 0, 0)}, 'position'), ({'position': (0, 0, 2e4)}, 'position'),
    ({'quaternion': (0, 0, 0, 0)}, 'quaternion'), ({'quaternion': (2, 0, 0, 0)}, 'quaternion')])
def test_spawn_bounds_and_names(guarded, kw, where):
    args = {'name': 'crate', 'position': (0.2, 0, 0.2), 'quaternion': (1, 0, 0, 0)}
    args.update(kw)
    gen = guarded.generation
    with pytest.raises(errors.DeviceError) as err:
        guarded.scene.spawn(BOX, **args)
    assert err.value.where == where and guarded.generation == gen
    if where == 'quaternion':
        assert err.value.code == bounds.INVALID_POSE


def test_a_near_unit_quaternion_is_normalized(guarded):
    guarded.scene.spawn(BOX, 'tilted', position=(0.2, 0, 0.2), quaternion=(1.005, 0, 0, 0))
    guarded.scene.delete('tilted')


def test_wrench_randomize_teleport_gravity_bounds(bench):
    before = bench.snapshot.generation
    for kw in ({'force': (1e308, 0, 0)}, {'torque': (0, 0, 1e7)}, {'point': (1e5, 0, 0)},
               {'duration': 1e308}):
        with pytest.raises(errors.DeviceError) as err:
            bench.sensing.apply_wrench('block', **kw)
        assert err.value.code == errors.INVALID_ARGUMENT and err.value.where in kw
    assert not bench.sensing.wrenches()
    for fields in ({'geom_friction': {'scale': [1, 1e308]}},
                   {'body_mass': {'scale': [0.5, 2e3]}},
                   {'object_positions': [1e308, 0, 0]}):
        with pytest.raises(errors.DeviceError) as err:
            bench.physics.randomize(fields, seed=1)
        assert err.value.code == errors.INVALID_ARGUMENT
    nominal = np.array(bench.model.body_mass)
    with pytest.raises(errors.DeviceError):
        bench.physics.randomize({'body_mass': (nominal * 1e300).tolist()})
    assert np.array_equal(bench.model.body_mass, nominal)
    with pytest.raises(errors.DeviceError) as err:
        bench.physics.set_joint_state(['pan'], [0.0], [1e308])
    assert err.value.where == 'velocities'
    with pytest.raises(errors.DeviceError):
        bench.physics.set_gravity([0, 0, -1e308])
    assert bench.snapshot.generation == before
