"""Device files under hostile YAML: always a ConfigError naming where, never another
exception, never a hang (aliases, deep nesting, huge scalars, wrong types, random text)."""

import os
import time

from hostile_helpers import BENCH_YAML
from hypothesis import given, settings, strategies as st
import pytest
import yaml

from mujoco_hal_ros.config import device_file
from mujoco_hal_ros.errors import CONFIG_ERROR, ConfigError

KEYS = sorted(device_file.TOP_KEYS | device_file.CONNECT_KEYS | device_file.WRITE_KEYS |
              device_file.READ_KEYS | device_file.ACTION_KEYS | device_file.ACTION_MAP_KEYS |
              {'pan', 'pan_goal', 'move_to', 'hold', 'x'})
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 30, 10 ** 30),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=10),
                    st.sampled_from(['1e-3', '4 ms', 'deg', 'move_to', 'hold', 'joint',
                                     'cartesian', 'x', '-inf', '.nan', 'OPENHAL_BENCH_ARM']))


def trees():
    return st.recursive(
        SCALARS,
        lambda kids: st.one_of(st.lists(kids, max_size=4),
                               st.dictionaries(st.sampled_from(KEYS), kids, max_size=5)),
        max_leaves=30)


def documents():
    """Mostly device-file shaped: the real top-level keys with random subtrees."""
    return st.one_of(st.dictionaries(st.sampled_from(sorted(device_file.TOP_KEYS)), trees(),
                                     max_size=6), trees())


def loads_config_error_or_spec(text):
    t0 = time.monotonic()
    try:
        spec = device_file.loads(text)
    except ConfigError as err:
        assert err.code == CONFIG_ERROR and err.where, repr(err)
        assert len(str(err)) < 5000
        spec = None
    assert time.monotonic() - t0 < 5.0, 'a device file took seconds to refuse'
    return spec


@settings(max_examples=200, deadline=None)
@given(doc=documents())
def test_random_documents_are_a_config_error_or_a_spec(doc):
    text = yaml.safe_dump(doc, default_flow_style=True, width=10 ** 6)
    spec = loads_config_error_or_spec(text)
    if spec is not None:
        assert isinstance(spec['write'], dict) and isinstance(spec['actions'], dict)
    try:
        device_file.parse(doc)
    except ConfigError:
        pass


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list('{}[]:,-&*!?|>\'"#%@` \n\tab01.e')),
                    max_size=200))
def test_random_yaml_text_is_a_config_error_or_a_spec(text):
    loads_config_error_or_spec(text)


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(['device', 'id', 'read', 'write', 'actions', 'connect',
                            'hazard', 'safe_state']),
       depth=st.integers(1, 9), width=st.integers(2, 9))
def test_alias_bombs_are_refused_at_once_naming_the_key(key, depth, width):
    lines = ['a0: &a0 [' + ', '.join(['"lol"'] * width) + ']']
    for i in range(1, depth + 1):
        lines.append(f'a{i}: &a{i} [' + ', '.join([f'*a{i - 1}'] * width) + ']')
    text = f'{key}: &top [1]\n' + '\n'.join(lines) + f'\nhazard2: *a{depth}\n'
    with pytest.raises(ConfigError) as info:
        loads_config_error_or_spec(text) or device_file.loads(text)
    assert info.value.where.startswith('a1') and 'alias' in str(info.value)


def nested(kind, depth):
    """A well-formed YAML document with ``depth`` lists or mappings inside each other under
    ``description``: only the depth limit can refuse it for its depth (a malformed one is
    refused by the YAML parser whatever the limit)."""
    if kind == 'flow list':
        return 'description: ' + '[' * depth + ']' * depth + '\n'
    if kind == 'flow map':
        return 'description: ' + '{a: ' * depth + '1' + '}' * depth + '\n'
    if kind == 'block list':
        return 'description:\n' + ''.join('  ' * (i + 1) + '-\n' for i in range(depth))
    return 'description:\n' + ''.join('  ' * (i + 1) + 'a:\n' for i in range(depth))


DEEP = f'nested more than {device_file.MAX_DEPTH} deep'
KINDS = ['flow list', 'flow map', 'block list', 'block map']


@settings(max_examples=40, deadline=None)
@given(depth=st.integers(device_file.MAX_DEPTH + 1, 5000), kind=st.sampled_from(KINDS))
def test_deep_nesting_is_a_config_error(depth, kind):
    if kind.startswith('block'):
        depth = min(depth, 300)          # indentation grows as depth squared: 300 is 90 kB
    with pytest.raises(ConfigError) as info:
        device_file.loads(nested(kind, depth))
    assert DEEP in str(info.value), str(info.value)[:300]
    assert info.value.where.startswith('description'), info.value.where[:100]


@pytest.mark.parametrize('kind', KINDS)
def test_nesting_within_the_limit_is_read(kind):
    """Refused for what it holds (a description must be a name), not for its depth."""
    with pytest.raises(ConfigError) as info:
        device_file.loads(nested(kind, device_file.MAX_DEPTH - 4))
    assert DEEP not in str(info.value) and 'expected a name' in str(info.value)


@settings(max_examples=40, deadline=None)
@given(where=st.sampled_from(['device', 'id', 'write.pan_goal.max', 'connect.timestep',
                              'hazard', 'read.pan.unit']),
       value=st.one_of(st.just('9' * 5000), st.just('a' * 500_000), st.just('1e99999'),
                       st.just('-.inf'), st.just('!!binary aGk='), st.just('[' * 10),
                       st.just('{pan: 1}'), st.just('2001-01-01'), st.just('0x1F'),
                       st.just('~')))
def test_huge_and_odd_scalars_are_a_config_error_or_a_spec(where, value):
    parts = where.split('.')
    text = ''.join(f'{"  " * i}{p}:\n' for i, p in enumerate(parts[:-1]))
    text += f'{"  " * (len(parts) - 1)}{parts[-1]}: {value}\n'
    loads_config_error_or_spec(text)


NOT_DEVICE_FILES = {'arm_controller_swap.yaml', 'moveit_controllers.yaml'}   # ros2_control, MoveIt


def test_the_shipped_device_files_use_no_aliases_and_load():
    root = os.path.dirname(BENCH_YAML)
    loaded = 0
    for name in sorted(os.listdir(root)):
        if name.endswith('.yaml') and name not in NOT_DEVICE_FILES:
            device_file.load(os.path.join(root, name))
            loaded += 1
    assert loaded >= 1


def test_a_file_over_the_cap_is_refused_without_reading_it_all(tmp_path):
    path = tmp_path / 'big.yaml'
    with open(path, 'wb') as handle:
        handle.truncate(50 * device_file.MAX_DEVICE_FILE_BYTES)   # sparse: no disk used
    t0 = time.process_time()
    with pytest.raises(ConfigError, match='bytes'):
        device_file.load(str(path))
    assert time.process_time() - t0 < 1.0
