"""sim_node's ``robots`` file under hostile YAML: always a ConfigError naming where, never
another exception, never a hang, and nothing put in the world (``robots_file``).

Huge lists, deep nesting, alias bombs, non-UTF-8 bytes, namespaces ROS cannot serve ('',
'/', '../x', unicode, 100 000 characters, two that differ by a slash), positions and
quaternions that are no pose (NaN, inf, 1e308, booleans, strings, zero norm), and URDFs
that are a folder, a device, huge or not text. Random documents go through ``parse``; the
accepted ones must be usable as they are (ASCII namespaces ROS takes, poses in the world).
"""

import math
import os
import re
import time

from hostile_helpers import HUGE, NON_FINITE
from hypothesis import given, settings, strategies as st
import pytest
import yaml

from mujoco_hal_ros.errors import CONFIG_ERROR, ConfigError
from mujoco_hal_ros.world import bounds, robots_file

ARM = ('<mujoco><worldbody><body name="base"><joint name="j1" axis="0 0 1"/>'
       '<geom size="0.02"/></body></worldbody>'
       '<actuator><position name="a1" joint="j1" kp="10"/></actuator></mujoco>')
URDF = '<robot name="a"><link name="b"/></robot>'
_TOKEN = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')


def bomb(levels=9, key='robots'):
    """A billion laughs: each line a list of nine aliases of the one before."""
    lines = ['l0: &l0 [x, x, x, x, x, x, x, x, x]']
    lines += [f'l{i}: &l{i} [' + ', '.join([f'*l{i - 1}'] * 9) + ']' for i in range(1, levels)]
    return '\n'.join(lines) + f'\n{key}: *l{levels - 1}\n'


@pytest.fixture
def folder(tmp_path):
    (tmp_path / 'arm.xml').write_text(ARM)
    (tmp_path / 'arm.urdf').write_text(URDF)
    return tmp_path


def refused(path, *words):
    """load(path) is a ConfigError saying ``words``, quickly; returns its text."""
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as info:
        robots_file.load(str(path))
    assert time.monotonic() - t0 < 5.0, 'a robots file took seconds to refuse'
    err = info.value
    assert err.code == CONFIG_ERROR and err.where, repr(err)
    text = str(err)
    assert len(text) < 5000, 'a refusal echoes its input in full'
    for word in words:
        assert word in text, text
    return text


def one(entry):
    return yaml.safe_dump({'robots': [entry]}, width=10 ** 7)


@pytest.mark.parametrize('text, words', [
    (b'robots:\n - namespace: \xff\xfe\n   model: arm.xml\n', ['UTF-8']),
    ('robots: ' + '[' * 5000 + ']' * 5000 + '\n', ['nested more than']),
    (bomb(), ['alias']),
    ('a: &a [0, 0, 0]\nrobots:\n - {namespace: x, model: arm.xml, position: *a}\n',
     ['alias']),
    ('robots:\n - namespace: a\n   namespace: b\n   model: arm.xml\n', ['given twice']),
    ('robots:\n' + ' - {namespace: a, model: arm.xml}\n' * 40_000, ['bytes', 'cap']),
    ('robots:\n' + ' - {namespace: a, model: arm.xml}\n' * 33, ['at most 32']),
    ('\x00robots: []\n', ['not valid YAML']),
    ('robots: [}\n', ['not valid YAML']),
    ('robots: 7\n', ['expected a list']),
    ('robots:\n - 7\n', ['expected a mapping']),
    ('robots:\n - {namespace: a, model: arm.xml, 9: x}\n', ['unknown key']),
    ('robots:\n - {namespace: a, model: arm.xml, urdf: arm.urdf}\n', ['one of them']),
    ('robots:\n - {namespace: a}\n', ['one of them']),
], ids=['not-utf8', 'deep', 'alias-bomb', 'alias', 'key-twice', 'huge-list', '33-robots',
        'nul', 'broken', 'not-a-list', 'not-a-mapping', 'odd-key', 'urdf-and-model',
        'no-model'])
def test_hostile_documents_are_refused(folder, text, words):
    path = folder / 'robots.yaml'
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    refused(path, *words)


NAMESPACES = ['', '/', '//', '../x', 'a/../b', 'ünï', 'a٣', 'a b', '9lives', 'a' * 100_000,
              'a' * (robots_file.MAX_NAMESPACE + 1), 'x\x00', 'a//b', '-a', '~/a', '{a}', 7,
              None, True, ['left'], {'a': 1}]


@pytest.mark.parametrize('namespace', NAMESPACES, ids=lambda n: repr(n)[:20])
def test_namespaces_ros_cannot_serve_are_refused(folder, namespace):
    path = folder / 'robots.yaml'
    path.write_text(one({'namespace': namespace, 'model': 'arm.xml'}))
    refused(path, 'namespace')


@pytest.mark.parametrize('first, second', [('left', '/left'), ('left/', 'left'),
                                           ('/left/', 'left/'), ('a', 'a/b'), ('a/b', '/a')])
def test_two_robots_in_one_namespace_are_refused(folder, first, second):
    path = folder / 'robots.yaml'
    path.write_text(yaml.safe_dump({'robots': [{'namespace': first, 'model': 'arm.xml'},
                                               {'namespace': second, 'model': 'arm.xml'}]}))
    refused(path, 'given twice or inside another')


POSES = ([[v, 0.0, 0.0] for v in HUGE[:3] + NON_FINITE] +
         [[True, 0, 0], ['1', 0, 0], [0, 0], [0, 0, 0, 0], 'abc', 5, None, [[0, 0, 0]],
          [1e4 + 1, 0, 0]])


@pytest.mark.parametrize('position', POSES, ids=lambda p: repr(p)[:24])
def test_positions_that_are_no_place_are_refused(folder, position):
    path = folder / 'robots.yaml'
    path.write_text(one({'namespace': 'a', 'model': 'arm.xml', 'position': position}))
    refused(path, 'position')


@pytest.mark.parametrize('quaternion', [[0, 0, 0, 0], [2, 0, 0, 0], [math.nan, 0, 0, 1],
                                        [1e308, 1e308, 0, 0], [True, 0, 0, 0], [1, 0, 0],
                                        'w'], ids=lambda q: repr(q)[:24])
def test_quaternions_that_are_no_rotation_are_refused(folder, quaternion):
    path = folder / 'robots.yaml'
    path.write_text(one({'namespace': 'a', 'model': 'arm.xml', 'quaternion': quaternion}))
    refused(path, 'quaternion')


@pytest.mark.parametrize('model', ['/tmp', '/dev/zero', '/dev/null', 'missing.xml', '',
                                   'x\x00y', 'a' * 100_000, 7])
@pytest.mark.parametrize('key', ['model', 'urdf'])
def test_model_files_that_are_no_file_are_refused(folder, key, model):
    path = folder / 'robots.yaml'
    path.write_text(one({'namespace': 'a', key: model}))
    refused(path, key)


def test_a_huge_or_binary_urdf_is_refused_without_reading_it_all(folder):
    huge = folder / 'huge.urdf'
    with open(huge, 'wb') as handle:
        handle.truncate(2 << 30)                    # 2 GiB, sparse: no disk used
    (folder / 'binary.urdf').write_bytes(b'<robot name="\xff"/>')
    for name, words in (('huge.urdf', ['MAX_URDF_CHARS']), ('binary.urdf', ['UTF-8'])):
        path = folder / 'robots.yaml'
        path.write_text(one({'namespace': 'a', 'urdf': name}))
        entries = robots_file.load(str(path))       # a file: read when it is spawned
        t0 = time.process_time()
        with pytest.raises(ConfigError) as info:
            robots_file.resource(entries[0])
        assert time.process_time() - t0 < 2.0
        assert all(w in str(info.value) for w in words), str(info.value)


def test_a_robots_file_that_is_no_file_is_refused(folder):
    for path in ('/dev/zero', str(folder), str(folder / 'missing.yaml'), '/proc/self/mem'):
        refused(path)
    sparse = folder / 'sparse.yaml'
    with open(sparse, 'wb') as handle:
        handle.truncate(2 << 30)
    refused(sparse, 'bytes')


# --- random documents ------------------------------------------------------------------------
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 30, 10 ** 30),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                    st.sampled_from(['left', '/left/', 'a/b', 'arm.xml', 'arm.urdf',
                                     'ünï', '../x', '']))
KEYS = st.sampled_from(list(robots_file.KEYS) + ['robots', 'x'])


def trees():
    return st.recursive(SCALARS, lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(KEYS, kids, max_size=5)), max_leaves=25)


def entries():
    vector = st.one_of(st.lists(st.one_of(st.floats(-2, 2), SCALARS), min_size=0, max_size=5),
                       SCALARS)
    return st.fixed_dictionaries(
        {'namespace': st.one_of(st.sampled_from(['left', '/right/', 'a/b', 'ünï', '', '/',
                                                'x' * 70]), SCALARS)},
        optional={'model': st.sampled_from(['arm.xml', '/dev/zero', 'missing.xml']),
                  'urdf': st.sampled_from(['arm.urdf', '/tmp']),
                  'position': vector, 'quaternion': vector, 'x': trees()})


@settings(max_examples=150, deadline=None)
@given(doc=st.one_of(st.fixed_dictionaries({'robots': st.lists(entries(), max_size=4)}),
                     st.lists(entries(), max_size=4), trees()))
def test_random_documents_are_a_config_error_or_usable_robots(folder, doc):
    t0 = time.monotonic()
    try:
        out = robots_file.parse(doc, str(folder))
    except ConfigError as err:
        assert err.code == CONFIG_ERROR and err.where and len(str(err)) < 5000, repr(err)
        return
    finally:
        assert time.monotonic() - t0 < 5.0
    for entry in out:
        assert len(entry.namespace) <= robots_file.MAX_NAMESPACE
        assert all(_TOKEN.fullmatch(p) for p in entry.namespace.split('/')), entry.namespace
        assert all(math.isfinite(v) and abs(v) <= bounds.MAX_POSITION for v in entry.position)
        assert abs(math.sqrt(sum(v * v for v in entry.quaternion)) - 1.0) < 1e-9
        assert os.path.isfile(entry.model or entry.urdf)


def test_a_good_file_still_loads(folder):
    path = folder / 'robots.yaml'
    path.write_text('robots:\n - {namespace: /left/, model: arm.xml, position: [0, 0.4, 0]}\n'
                    ' - {namespace: right, urdf: arm.urdf, quaternion: [0, 0, 0, 1]}\n')
    left, right = robots_file.load(str(path))
    assert (left.namespace, left.position) == ('left', (0.0, 0.4, 0.0))
    assert (right.namespace, right.quaternion) == ('right', (0.0, 0.0, 0.0, 1.0))


@pytest.mark.parametrize('value', ['/tmp', '/dev/zero', 'missing.yaml', '', 'x\x00y',
                                   'a' * 100_000, 7, ['a.yaml'], None])
@pytest.mark.parametrize('key', ['device_file', 'controllers_file'])
def test_a_robot_s_own_files_that_are_no_file_are_refused(folder, key, value):
    path = folder / 'robots.yaml'
    path.write_text(one({'namespace': 'a', 'model': 'arm.xml', key: value}))
    refused(path, key)


@pytest.mark.parametrize('value', ['', 7, ['j1'], {'joint': 'j1'}, True, 'j' * 300])
def test_a_gripper_joint_that_is_no_name_is_refused(folder, value):
    path = folder / 'robots.yaml'
    path.write_text(one({'namespace': 'a', 'model': 'arm.xml', 'gripper_joint': value}))
    refused(path, 'gripper_joint')


def test_a_device_file_that_does_not_fit_its_robot_is_refused_naming_it(folder):
    """The robot's device file names its channels by the robot's own names: one naming a
    joint the robot does not have is a ConfigError saying which robot."""
    from mujoco_hal_ros import menagerie
    from mujoco_hal_ros.sim.device import Device
    (folder / 'arm_device.yaml').write_text(
        'write:\n  j1_goal: {map: {joint: j1}}\n')
    (folder / 'bad_device.yaml').write_text(
        'write:\n  elbow_goal: {map: {joint: elbow}}\n')
    path = folder / 'robots.yaml'
    path.write_text('robots:\n - {namespace: good, model: arm.xml, device_file: arm_device.yaml}\n'
                    ' - {namespace: bad, model: arm.xml, device_file: bad_device.yaml,'
                    ' position: [0, 0.5, 0]}\n')
    entries = robots_file.load(str(path))
    with Device(model=menagerie.empty_world_path(), real_time_factor=0,
                start_paused=True) as dev:
        with pytest.raises(ConfigError) as err:
            robots_file.add_to(dev, entries)
        assert 'robot bad' in str(err.value) and "'elbow'" in str(err.value)
        assert list(dev.robots.get('good').layout.goals) == ['j1_goal']     # its own names
        assert dev.robots.get('bad') is None
