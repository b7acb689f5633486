"""Declarative ROS parameters: one table per node, declared, checked and read in one place.

In the spirit of generate_parameter_library: each parameter is a ``Param`` record (type,
default, description, range or choices, dynamic or read-only, an optional check), and a
``ParameterTable`` declares them all with full descriptors, so ``ros2 param describe``
shows what the code enforces, refuses a bad value at start with one line naming it, and
checks a run-time change by the same rules. Nodes keep no parameter logic of their own.

Values are taken as users type them: an integer for a double (``rate:=100``), a
comma-separated string for a string array (``depth:=a,b``), a number or a bool for a
string (``camera_background:=false``).
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, make_dataclass
import functools
import math
from typing import Any, TypedDict

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from ..errors import ConfigError, DeviceError

T = Parameter.Type
# kind -> (rclpy type, Python type of the value read)
KINDS = {'bool': (T.BOOL, bool), 'integer': (T.INTEGER, int), 'double': (T.DOUBLE, float),
         'string': (T.STRING, str), 'bool_array': (T.BOOL_ARRAY, list),
         'integer_array': (T.INTEGER_ARRAY, list), 'double_array': (T.DOUBLE_ARRAY, list),
         'string_array': (T.STRING_ARRAY, list)}
# rclpy declares these on every node itself; they are never unknown.
ALWAYS_DECLARED = frozenset({'use_sim_time', 'start_type_description_service'})


def given(node: Node) -> dict[str, Parameter]:
    """{name: Parameter} the node was started with: ``-p``, ``--params-file`` and the
    constructor's ``parameter_overrides``; a copy, never written.

    The one read of rclpy's private ``Node._parameter_overrides``. rclpy has no public way
    to list them: ``automatically_declare_parameters_from_overrides`` would expose them as
    declared parameters, but only on a node constructed with it, and the real-arm parts
    attach to nodes they did not construct. Listing them is what refuses a mistyped name
    and finds the real controller's extra ``<controller>.*`` entries.
    """
    return dict(getattr(node, '_parameter_overrides', {}))


def kind_of(value: Any) -> str | None:
    """The table kind of a plain Python value (e.g. one read from a YAML file)."""
    try:
        t = T.from_parameter_value(value)
    except TypeError:
        return None
    if t == T.BYTE_ARRAY:                 # an empty list: any array
        return 'string_array'
    return next((k for k, (rt, _) in KINDS.items() if rt == t), None)


class Bounds(TypedDict):
    """A ``Param``'s ``range`` and ``rule``, given to several at once (``**NOT_NEGATIVE``)."""

    range: tuple[float, float]
    rule: str


@dataclass(frozen=True)
class Param:
    """One parameter. ``range`` is (min, max), inclusive unless ``min_open``; ``choices``
    the only values allowed; ``rule`` says either in words, for the refusal and for
    ``ros2 param describe``; ``check(value) -> value`` normalises or raises ValueError
    with the reason. ``dynamic``: may change at run time; every other one is read-only."""

    name: str
    type: str
    default: Any
    description: str
    range: tuple | None = None
    choices: tuple | None = None
    rule: str = ''
    min_open: bool = False
    dynamic: bool = False
    check: Callable[[Any], Any] | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.type not in KINDS:
            raise ValueError(f'parameter {self.name}: type {self.type!r} is not one of '
                             f'{", ".join(KINDS)}')
        if not self.description:
            raise ValueError(f'parameter {self.name}: give it a description')

    def allowed(self) -> str:
        """The constraint in words ('' for none)."""
        if self.rule:
            return self.rule
        if self.choices is not None:
            return 'one of ' + ', '.join(str(c) for c in self.choices)
        if self.range is not None:
            lo, hi = self.range
            return f'{"above " if self.min_open else ""}{lo:g}..{hi:g}'
        return ''

    def descriptor(self, full_name: str) -> ParameterDescriptor:
        desc = ParameterDescriptor(name=full_name, type=KINDS[self.type][0].value,
                                   description=self.description, read_only=not self.dynamic,
                                   additional_constraints=self.allowed())
        if self.range is not None and self.type == 'double':
            desc.floating_point_range = [FloatingPointRange(
                from_value=float(self.range[0]), to_value=float(self.range[1]), step=0.0)]
        elif self.range is not None and self.type == 'integer':
            desc.integer_range = [IntegerRange(
                from_value=int(self.range[0]), to_value=int(self.range[1]), step=1)]
        return desc


def _coerce(kind, got, value):
    """``value`` of rclpy type ``got`` as ``kind``, taken the way a user typed it; None
    if it cannot be."""
    want = KINDS[kind][0]
    if got == want:
        return list(value) if kind.endswith('_array') else value
    if kind.endswith('_array') and isinstance(value, (list, tuple)) and not value:
        return []
    if kind == 'double' and got == T.INTEGER:
        return float(value)
    if kind == 'double_array' and got == T.INTEGER_ARRAY:
        return [float(v) for v in value]
    if kind == 'string' and got in (T.INTEGER, T.DOUBLE):
        return str(value)
    if kind == 'string' and got == T.BOOL:
        return str(value).lower()
    if kind == 'string_array' and got == T.STRING:
        return [s.strip() for s in value.split(',') if s.strip()]
    return None


def _type_error(param, got, value):
    words = param.type.replace('_', ' ')
    article = 'an' if words[0] in 'aeiou' else 'a'
    name = got.name.lower() if isinstance(got, T) else type(value).__name__
    return f'expected {article} {words}, got {name} {value!r}'


class Values(Mapping):
    """The values of one table, read-only; by key (``v['nbatch']``) or, for keys that are
    identifiers, as attributes (``v.nbatch``). Keys carry no prefix."""

    __slots__ = ('_values',)

    def __init__(self, values: Mapping[str, Any]):
        object.__setattr__(self, '_values', dict(values))

    def __getitem__(self, key):
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __getattr__(self, key):
        if key == '_values':                  # not set yet (a copy being made)
            raise AttributeError(key)
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key, value):
        raise AttributeError(f'parameter values are read-only (setting {key})')

    def __repr__(self):
        return f'Values({self._values!r})'

    def replace(self, **changes: Any) -> 'Values':
        """A copy with ``changes`` (e.g. a default resolved to what the node runs with)."""
        unknown = sorted(set(changes) - set(self._values))
        if unknown:
            raise KeyError(f'no parameter {", ".join(unknown)}')
        return Values({**self._values, **changes})


class ParameterTable:
    """A node's (or one part's) parameters, each declared under ``prefix`` (e.g.
    ``'arm_controller.'``, or none); entries are looked up by name without it."""

    def __init__(self, params: Iterable[Param], prefix: str = ''):
        self.params: dict[str, Param] = {}
        for p in params:
            if p.name in self.params:
                raise ValueError(f'parameter {p.name} is in the table twice')
            self.params[p.name] = p
        self.prefix = prefix

    def __getitem__(self, name):
        return self.params[name]

    def __iter__(self):
        return iter(self.params.values())

    def __contains__(self, name):
        return name in self.params

    def names(self) -> list[str]:
        """Full names, prefix included, in table order."""
        return [self.prefix + n for n in self.params]

    def record_type(self, type_name: str) -> type:
        """A frozen dataclass with one typed field per entry (names must be identifiers)."""
        fields = []
        for p in self.params.values():
            default = (field(default_factory=functools.partial(list, p.default))
                       if isinstance(p.default, list) else field(default=p.default))
            fields.append((p.name, KINDS[p.type][1], default))
        return make_dataclass(type_name, fields, frozen=True)

    # --- checking ---------------------------------------------------------------------
    def accept(self, name: str, value: Any, got: Any = None) -> Any:
        """``value`` (of rclpy type ``got``, else judged by its Python type) for the entry
        ``name`` (no prefix), coerced and checked; ConfigError naming it if refused."""
        p = self.params[name]
        where = f'parameter {self.prefix}{name}'
        if got is None:
            kind = kind_of(value)
            got = KINDS[kind][0] if kind else None
        taken = _coerce(p.type, got, value) if got is not None else None
        if taken is None:
            raise ConfigError(_type_error(p, got, value), where=where)
        value = taken
        try:
            if p.check is not None:
                value = p.check(value)
        except ValueError as err:
            raise ConfigError(str(err), where=where) from None
        if not self._allowed(p, value):
            raise ConfigError(f'must be {p.allowed()}, got {value!r}', where=where)
        return value

    @staticmethod
    def _allowed(p, value):
        if p.choices is not None and value not in p.choices:
            return False
        if p.range is None:
            return True
        if isinstance(value, float) and not math.isfinite(value):
            return False
        lo, hi = p.range
        return (lo < value if p.min_open else lo <= value) and value <= hi

    # --- declaring --------------------------------------------------------------------
    def declare(self, node: Node, defaults: Mapping[str, Any] | None = None) -> Values:
        """Declare every entry on ``node`` and return their ``Values``.

        A value comes from what the node was started with, else from ``defaults`` (e.g. a
        controllers file), else from the table; each is checked before it is declared, so
        a refusal (ConfigError naming the parameter) leaves that one undeclared. An entry
        already declared (by another part of the node, through this table or one sharing
        its Param) is read as it is.
        """
        defaults = defaults or {}
        overrides = given(node)
        values = {}
        for name, p in self.params.items():
            full = self.prefix + name
            if node.has_parameter(full):
                declared = node.get_parameter_or(full)     # None: an empty array, unset
                value = declared.value if declared is not None else None
                values[name] = [] if value is None and p.type.endswith('_array') else value
                continue
            override = overrides.get(full)
            if override is not None and override.type_ != T.NOT_SET:
                value = self.accept(name, override.value, override.type_)
            else:
                value = self.accept(name, defaults.get(name, p.default))
            # An empty array would be declared as a byte array: declare the type alone
            # (rclpy then holds it unset; ros2 param get says so, and it reads [] here).
            kind_or_value = KINDS[p.type][0] if isinstance(value, list) and not value else value
            node.declare_parameter(full, kind_or_value, p.descriptor(full), ignore_override=True)
            values[name] = value
        return Values(values)

    def watch(self, node: Node, apply: Callable[[str, Any], None]
              ) -> Callable[[list[Parameter]], SetParametersResult]:
        """Check every run-time change of a dynamic entry by the table, then hand it to
        ``apply(name, value)`` (name without prefix), which may refuse with a DeviceError;
        a refused change is not made. Read-only entries rclpy refuses by itself."""
        def on_set(changes):
            accepted = []
            try:
                for change in changes:
                    name = change.name[len(self.prefix):] \
                        if change.name.startswith(self.prefix) else None
                    p = self.params.get(name)
                    if p is not None and p.dynamic:
                        accepted.append((name, self.accept(name, change.value, change.type_)))
                for name, value in accepted:
                    apply(name, value)
            except DeviceError as err:
                return SetParametersResult(successful=False, reason=str(err))
            return SetParametersResult(successful=True)
        node.add_on_set_parameters_callback(on_set)
        return on_set


def refuse_unknown(node: Node, allowed: str) -> None:
    """ConfigError naming every parameter the node was started with that nothing declared
    (call it once every part has declared its own); ``allowed`` lists the known ones."""
    unknown = sorted(n for n in given(node)
                     if n not in ALWAYS_DECLARED and not node.has_parameter(n))
    if unknown:
        raise ConfigError(f'unknown parameter {", ".join(unknown)}', where='parameters',
                          allowed=allowed)


def given_under(node: Node, prefix: str) -> dict[str, Any]:
    """{key: value} of what the node was started with under ``prefix`` (removed)."""
    return {n[len(prefix):]: p.value for n, p in given(node).items() if n.startswith(prefix)}
