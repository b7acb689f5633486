"""ParameterTable on a plain node: descriptors, refusals naming the parameter, and dynamic
changes checked by the same rules; plus the rule that nodes declare only through it."""

import math
import os
import re

import pytest

rclpy = pytest.importorskip('rclpy')

from rcl_interfaces.msg import ParameterType  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from mujoco_hal_ros.errors import ConfigError  # noqa: E402
from mujoco_hal_ros.ros import launch_args  # noqa: E402
from mujoco_hal_ros.ros.parameters import (  # noqa: E402
    Param,
    ParameterTable,
    refuse_unknown,
    Values,
)
from mujoco_hal_ros.ros.pool.params import TABLE as POOL_TABLE  # noqa: E402
from mujoco_hal_ros.ros.sim.params import SimParams, TABLE as SIM_TABLE  # noqa: E402

PACKAGE = os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..',
                                        'mujoco_hal_ros'))

TABLE = ParameterTable([
    Param('rate', 'double', 10.0, 'Rate in Hz.', range=(0.0, 100.0), min_open=True,
          rule='above 0 and at most 100 Hz', dynamic=True),
    Param('count', 'integer', 3, 'How many.', range=(1, 9)),
    Param('mode', 'string', 'auto', 'How.', choices=('auto', 'on', 'off'),
          check=lambda v: v.strip().lower()),
    Param('names', 'string_array', [], 'Which.'),
    Param('loud', 'bool', False, 'Whether.'),
], prefix='part.')


def node(ctx, **overrides):
    return Node('table_test', context=ctx, parameter_overrides=[
        Parameter(k, value=v) for k, v in overrides.items()])


def test_declares_every_entry_with_its_descriptor(ctx):
    n = node(ctx)
    try:
        values = TABLE.declare(n)
        assert dict(values) == {'rate': 10.0, 'count': 3, 'mode': 'auto', 'names': [],
                                'loud': False}
        rate = n.describe_parameter('part.rate')
        assert rate.type == ParameterType.PARAMETER_DOUBLE and rate.description == 'Rate in Hz.'
        assert not rate.read_only
        assert (rate.floating_point_range[0].from_value,
                rate.floating_point_range[0].to_value) == (0.0, 100.0)
        assert rate.additional_constraints == 'above 0 and at most 100 Hz'
        count = n.describe_parameter('part.count')
        assert count.type == ParameterType.PARAMETER_INTEGER and count.read_only
        assert (count.integer_range[0].from_value, count.integer_range[0].to_value) == (1, 9)
        mode = n.describe_parameter('part.mode')
        assert mode.read_only and mode.additional_constraints == 'one of auto, on, off'
        assert n.describe_parameter('part.names').type == \
            ParameterType.PARAMETER_STRING_ARRAY
        assert n.describe_parameter('part.loud').type == ParameterType.PARAMETER_BOOL
        # a second declaration (another part sharing the entry) reads it as it is
        assert dict(TABLE.declare(n)) == dict(values)
    finally:
        n.destroy_node()


def test_values_are_a_frozen_record():
    v = Values({'count': 3, 'mode': 'auto'})
    assert v.count == 3 and v['mode'] == 'auto'
    with pytest.raises(AttributeError):
        v.count = 4
    with pytest.raises(TypeError):
        v['count'] = 4
    assert v.replace(count=5).count == 5 and v.count == 3
    with pytest.raises(KeyError):
        v.replace(nope=1)


def test_values_are_taken_as_users_type_them(ctx):
    n = node(ctx, **{'part.rate': 50, 'part.mode': ' ON ', 'part.names': 'a, b,,c'})
    try:
        v = TABLE.declare(n)
        assert v.rate == 50.0 and isinstance(v.rate, float)
        assert v.mode == 'on' and v.names == ['a', 'b', 'c']
        assert n.get_parameter('part.rate').value == 50.0
        assert n.get_parameter('part.names').value == ['a', 'b', 'c']
    finally:
        n.destroy_node()


def test_defaults_from_a_file_are_checked_like_overrides(ctx):
    n = node(ctx)
    try:
        assert TABLE.declare(n, defaults={'count': 7, 'rate': 2}).count == 7
        assert n.get_parameter('part.rate').value == 2.0
    finally:
        n.destroy_node()
    n = node(ctx)
    try:
        with pytest.raises(ConfigError, match=r'parameter part\.count: must be 1\.\.9, got 12'):
            TABLE.declare(n, defaults={'count': 12})
    finally:
        n.destroy_node()


@pytest.mark.parametrize('overrides, expected', [
    ({'part.rate': 0.0}, 'parameter part.rate: must be above 0 and at most 100 Hz, got 0.0'),
    ({'part.rate': math.inf}, 'parameter part.rate: must be above 0 and at most 100 Hz'),
    ({'part.rate': math.nan}, 'parameter part.rate: must be above 0'),
    ({'part.count': 10}, 'parameter part.count: must be 1..9, got 10'),
    ({'part.count': 2.5}, 'parameter part.count: expected an integer, got double 2.5'),
    ({'part.loud': 'yes'}, "parameter part.loud: expected a bool, got string 'yes'"),
    ({'part.mode': 'sometimes'}, "parameter part.mode: must be one of auto, on, off, got "
     "'sometimes'"),
], ids=['open-min', 'inf', 'nan', 'above-max', 'wrong-type', 'bool-from-string', 'choice'])
def test_a_bad_override_is_refused_naming_it(ctx, overrides, expected):
    n = node(ctx, **overrides)
    try:
        with pytest.raises(ConfigError) as info:
            TABLE.declare(n)
        assert expected in str(info.value) and '\n' not in str(info.value)
        bad = next(iter(overrides))
        assert not n.has_parameter(bad)           # refused: never declared
    finally:
        n.destroy_node()


def test_an_unknown_name_is_refused_in_one_line(ctx):
    n = node(ctx, **{'part.rate': 5.0, 'part.rat': 5.0, 'other': 1})
    try:
        TABLE.declare(n)
        with pytest.raises(ConfigError) as info:
            refuse_unknown(n, ', '.join(TABLE.names()))
        text = str(info.value)
        assert text.startswith('parameters: unknown parameter other, part.rat')
        assert 'part.rate' in text and '\n' not in text      # the allowed list
    finally:
        n.destroy_node()
    n = node(ctx, use_sim_time=False)
    try:
        TABLE.declare(n)
        refuse_unknown(n, '')                        # rclpy's own ones are never unknown
    finally:
        n.destroy_node()


def test_a_dynamic_change_is_checked_by_the_table_and_a_refused_one_changes_nothing(ctx):
    n = node(ctx)
    applied = []

    def apply(name, value):
        if value == 42.0:
            raise ConfigError('the device refuses 42', where=name)
        applied.append((name, value))
    try:
        TABLE.declare(n)
        TABLE.watch(n, apply)
        assert n.set_parameters([Parameter('part.rate', value=20.0)])[0].successful
        assert applied == [('rate', 20.0)] and n.get_parameter('part.rate').value == 20.0
        for bad in (0.0, 500.0, math.nan, 42.0):
            res = n.set_parameters([Parameter('part.rate', value=bad)])[0]
            assert not res.successful and res.reason
            assert n.get_parameter('part.rate').value == 20.0
        assert applied == [('rate', 20.0)]
        res = n.set_parameters([Parameter('part.count', value=4)])[0]
        assert not res.successful and n.get_parameter('part.count').value == 3   # read-only
        res = n.set_parameters([Parameter('part.rate', value='fast')])[0]
        assert not res.successful and n.get_parameter('part.rate').value == 20.0
    finally:
        n.destroy_node()


def test_a_table_entry_needs_a_known_type_a_description_and_a_unique_name():
    with pytest.raises(ValueError, match='description'):
        Param('x', 'double', 1.0, '')
    with pytest.raises(ValueError, match='type'):
        Param('x', 'float', 1.0, 'X.')
    with pytest.raises(ValueError, match='twice'):
        ParameterTable([Param('x', 'bool', True, 'X.'), Param('x', 'bool', True, 'X.')])


def test_node_tables_describe_every_entry_and_their_defaults_pass_their_own_checks():
    for table in (SIM_TABLE, POOL_TABLE):
        for p in table:
            assert p.description
            assert table.accept(p.name, p.default) == p.default or p.type == 'string_array'
    assert [p.name for p in SIM_TABLE if p.dynamic] == ['real_time_factor', 'gravity',
                                                        'timestep']
    assert set(SimParams.__dataclass_fields__) == {p.name for p in SIM_TABLE}


def test_launch_arguments_that_are_node_parameters_match_the_table():
    """launch_args turns its strings into what the table declares, with its defaults."""
    typed = launch_args.sim_parameters({})
    for name, (default, text) in launch_args.SIM_ARGS.items():
        if name not in SIM_TABLE:
            continue
        p = SIM_TABLE[name]
        assert text
        if name in typed:
            assert SIM_TABLE.accept(name, typed[name]) == typed[name] or name == 'frame_prefix'
        if name != 'log_summary':          # on in a launch, so its output says what is served
            want = str(p.default).lower() if isinstance(p.default, bool) else str(p.default)
            assert default == want, name


def test_only_the_table_declares_parameters_or_reads_rclpy_overrides():
    """One way to declare: a node that calls rclpy's declare_parameter itself, or reads
    its private overrides, fails here."""
    offenders = []
    for folder, _dirs, files in os.walk(PACKAGE):
        for f in files:
            path = os.path.join(folder, f)
            if not f.endswith('.py') or path == os.path.join(PACKAGE, 'ros', 'parameters.py'):
                continue
            with open(path, encoding='utf-8') as handle:
                for i, line in enumerate(handle, 1):
                    if re.search(r'_parameter_overrides|declare_parameters?\(', line):
                        offenders.append(f'{os.path.relpath(path, PACKAGE)}:{i}: '
                                         f'{line.strip()}')
    assert not offenders, offenders


def test_every_sim_node_parameter_describes_itself(ctx):
    """What ``ros2 param describe`` shows: a type and a description for each, read-only but
    real_time_factor, gravity and timestep, and the ranges the node enforces."""
    from mujoco_hal_ros.ros.parameters import ALWAYS_DECLARED
    from mujoco_hal_ros.ros.sim.sim_node import SimNode
    n = SimNode(context=ctx)
    try:
        names = [name for name in n.list_parameters([], 0).names if name not in ALWAYS_DECLARED]
        assert {'real_time_factor', 'cameras.overhead.rate', 'arm_controller.joints',
                'arm_controller.constraints.pan.goal', 'joint_commands_topic',
                'controllers_file', 'simulation_interfaces'} <= set(names)
        for name, desc in zip(names, n.describe_parameters(names), strict=True):
            assert desc.description and desc.type != ParameterType.PARAMETER_NOT_SET, name
            assert desc.read_only == (name not in ('real_time_factor', 'gravity',
                                                   'timestep')), name
        width = n.describe_parameter('cameras.overhead.width').integer_range[0]
        assert (width.from_value, width.to_value) == (1, 2048)
        prio = n.describe_parameter('thread_priority').integer_range[0]
        assert (prio.from_value, prio.to_value) == (0, 99)
        assert 'auto, true or false' in \
            n.describe_parameter('camera_background').additional_constraints
    finally:
        n.destroy_node()
