"""Task files parsed into plain records, every key checked before anything is built or run.

Why a hand-written checker instead of a schema library: the refusals must name the exact key
(``walk_forward.yaml: success.past_goal.past.value``), say what is allowed, and treat a YAML
``yes`` or ``.nan`` as the mistake it is, which generic schema errors do not. A task is data
(``TaskSpec``); ``task.Task`` resolves its names against the model.

The keys, at the top level of a task file (``builtin/reach.yaml`` shows them all)::

    name, model, start, base, frames, horizon, command, reset, observation, action,
    success, failure, reward, video

Why one module of this size: it is the task-file schema, one checker (``_Checker``) and
the records it fills; every key of a task file is checked here so a refusal names the
exact key, as ``config/`` does for the device file.
"""

from dataclasses import dataclass, field
import math
import numbers
import os
from typing import Any

from ..errors import ConfigError, shorten

AXES = {'x': (0, 1.0), 'y': (1, 1.0), 'z': (2, 1.0), '-x': (0, -1.0), '-y': (1, -1.0),
        '-z': (2, -1.0)}


class TaskError(ConfigError):
    """A task file (or dict) that cannot be used; ``where`` names the key, nothing was run."""


# --------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Term:
    """One observation, predicate or reward term: its kind and its checked arguments."""

    name: str
    kind: str
    args: dict[str, Any]
    weight: float = 1.0       # rewards only


@dataclass(frozen=True)
class CommandTerm:
    """A per-episode command drawn uniformly in ``[low, high]`` (a target, a velocity)."""

    name: str
    low: tuple[float, ...]
    high: tuple[float, ...]


@dataclass(frozen=True)
class FieldTerm:
    """A model field of the pool's randomization table, scaled and/or offset per episode."""

    field: str
    names: tuple[str, ...] | None
    scale: tuple[float, float] | None
    add: tuple[float, float] | None
    columns: tuple[int, ...] | None


@dataclass(frozen=True)
class FrameTerm:
    """A point of the task's own on a body (a fingertip), added to the model as a site:
    ``pos`` in the body's frame, ``quat`` (w, x, y, z) its orientation there."""

    body: str
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class ActionSpec:
    """How the policy's outputs become controls (see ``actions.ActionMap``)."""

    actuators: tuple[str, ...] | None     # None: every actuator, in model order
    mode: str = 'absolute'                   # 'absolute' setpoints or 'delta' on the last one
    units: str = 'normalized'                # 'normalized' [-1, 1] -> ctrlrange, or 'channel'
    scale: float = 1.0
    offset: str = 'zero'                     # channel absolute: 'zero' or 'start' (start ctrl)
    decimation: int = 1                      # physics steps per control step


@dataclass
class TaskSpec:
    """Everything a task file says, checked; names are resolved later against the model."""

    name: str
    model: str
    source_dir: str | None = None
    source: str = 'task'                     # the file name errors start with
    keyframe: str | None = None
    qpos: tuple[float, ...] | None = None
    qvel: tuple[float, ...] | None = None
    base: str | None = None
    horizon: int = 100
    commands: list[CommandTerm] = field(default_factory=list)
    joint_noise: dict[str, Any] | None = None
    bodies: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    fields: list[FieldTerm] = field(default_factory=list)
    observation: list[Term] = field(default_factory=list)
    action: ActionSpec = field(default_factory=lambda: ActionSpec(None))
    success: list[Term] = field(default_factory=list)
    failure: list[Term] = field(default_factory=list)
    reward: list[Term] = field(default_factory=list)
    video: dict[str, Any] = field(default_factory=dict)
    frames: dict[str, 'FrameTerm'] = field(default_factory=dict)


# --------------------------------------------------------------------------- value checks
class _Checker:
    """Value checks whose errors all carry the file name and the full key path."""

    def __init__(self, source):
        self.source = source

    def error(self, key, message, allowed=None):
        where = f'{self.source}: {key}' if key else self.source
        return TaskError(message, where=where, allowed=allowed)

    def mapping(self, value, key, allowed, required=()):
        if not isinstance(value, dict):
            raise self.error(key, f'expected a mapping, got {type(value).__name__} '
                             f'{shorten(value)}', allowed='keys ' + ', '.join(allowed))
        for k in value:
            if not isinstance(k, str) or k not in allowed:
                raise self.error(f'{key}.{k}' if key else str(k), 'unknown key',
                                 allowed=', '.join(allowed))
        for k in required:
            if k not in value:
                raise self.error(f'{key}.{k}' if key else k, 'is required')
        return value

    def number(self, value: Any, key: str, low: float | None = None, high: float | None = None,
               positive: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise self.error(key, f'expected a number, got {type(value).__name__} '
                             f'{shorten(value)}', allowed='a finite number')
        out = float(value)
        if not math.isfinite(out):
            raise self.error(key, f'expected a finite number, got {out!r}',
                             allowed='a finite number')
        if positive and out <= 0:
            raise self.error(key, f'{out!r} must be positive', allowed='a number > 0')
        if low is not None and out < low or high is not None and out > high:
            raise self.error(key, f'{out!r} is out of range', allowed=f'{low}..{high}')
        return out

    def integer(self, value, key, low, high):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise self.error(key, f'expected an integer, got {type(value).__name__} '
                             f'{shorten(value)}', allowed=f'integer {low}..{high}')
        if not low <= int(value) <= high:
            raise self.error(key, f'{int(value)} is out of range',
                             allowed=f'integer {low}..{high}')
        return int(value)

    def vector(self, value, key, size=None):
        if not isinstance(value, (list, tuple)) or not value:
            raise self.error(key, f'expected a list of numbers, got {shorten(value)}',
                             allowed='a non-empty list of finite numbers')
        out = tuple(self.number(v, f'{key}[{i}]') for i, v in enumerate(value))
        if size is not None and len(out) != size:
            raise self.error(key, f'has {len(out)} numbers, expected {size}')
        return out

    def interval(self, value, key, low=None):
        lo, hi = self.vector(value, key, 2)
        if lo > hi:
            raise self.error(key, f'low {lo} is above high {hi}', allowed='[low, high]')
        if low is not None and lo < low:
            raise self.error(key, f'{lo} is below {low}', allowed=f'values >= {low}')
        return lo, hi

    def name(self, value, key):
        if not isinstance(value, str) or not value:
            raise self.error(key, f'expected a name, got {shorten(value)}',
                             allowed='a non-empty string')
        return value

    def names(self, value: Any, key: str, allow_all: bool = False) -> tuple[str, ...] | None:
        if allow_all and value == 'all':
            return None
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value:
            raise self.error(key, f'expected a list of names, got {shorten(value)}',
                             allowed="a non-empty list of names" +
                             (" or 'all'" if allow_all else ''))
        out = tuple(self.name(v, f'{key}[{i}]') for i, v in enumerate(value))
        if len(set(out)) != len(out):
            raise self.error(key, 'lists a name twice')
        return out

    def choice(self, value, key, choices):
        if not isinstance(value, str) or value not in choices:
            raise self.error(key, f'{shorten(value)} is not one of them',
                             allowed=', '.join(choices))
        return value

    def function(self, value, key):
        """``module:attr`` text, or (a spec built in Python) the callable itself."""
        if callable(value) and not isinstance(value, str):
            return value
        if not isinstance(value, str) or value.count(':') != 1 or \
                not all(value.split(':')):
            raise self.error(key, f'expected module:attr, got {shorten(value)}',
                             allowed='module:attr naming a function f(frame) or a class '
                             'made with the task, cls(task)')
        return value

    def flag(self, value, key):
        if not isinstance(value, bool):
            raise self.error(key, f'expected true or false, got {shorten(value)}')
        return value


# --------------------------------------------------------------------------- term kinds
# kind -> {arg: (checker name, required, default)}; 'object' means exactly one of body/site.
_FRAME = ('choice:world,base', False, 'world')
OBSERVATIONS = {
    'joint_pos': {'joints': ('names_all', False, None), 'relative': ('flag', False, False)},
    'joint_vel': {'joints': ('names_all', False, None)},
    'sensor': {'names': ('names', True, None)},
    'body_pos': {'body': ('name', True, None), 'frame': _FRAME},
    'site_pos': {'site': ('name', True, None), 'frame': _FRAME},
    'body_quat': {'body': ('name', True, None), 'frame': _FRAME},
    'site_quat': {'site': ('name', True, None), 'frame': _FRAME},
    'body_linvel': {'body': ('name', True, None), 'frame': _FRAME},
    'body_angvel': {'body': ('name', True, None), 'frame': _FRAME},
    'gravity': {'body': ('name', False, None)},
    'command': {'names': ('names_all', False, None)},
    'last_action': {},
}
# shorthand: `- joint_pos: [a, b]` means joints: [a, b]
_SHORTHAND = {'joint_pos': 'joints', 'joint_vel': 'joints', 'sensor': 'names',
              'command': 'names', 'body_pos': 'body', 'site_pos': 'site', 'body_quat': 'body',
              'site_quat': 'site', 'body_linvel': 'body', 'body_angvel': 'body',
              'gravity': 'body'}
_OBJECT = {'body': ('name', False, None), 'site': ('name', False, None)}
PREDICATES = {
    'height_below': {**_OBJECT, 'z': ('number', True, None)},
    'height_above': {**_OBJECT, 'z': ('number', True, None)},
    'tilt_above': {'body': ('name', False, None), 'degrees': ('angle', True, None)},
    'past': {**_OBJECT, 'axis': ('choice:' + ','.join(AXES), False, 'x'),
             'value': ('number', True, None)},
    'near_command': {**_OBJECT, 'command': ('name', True, None),
                     'distance': ('positive', True, None)},
    # one side: a geom by name, every geom of a body (unnamed ones too) or of its subtree;
    # the second side left out: anything
    'contact': {'geom1': ('name', False, None), 'body1': ('name', False, None),
                'subtree1': ('name', False, None), 'geom2': ('name', False, None),
                'body2': ('name', False, None), 'subtree2': ('name', False, None)},
    # the user's own: ``module:attr`` (or, from Python, the callable itself) on the batch
    'python': {'function': ('function', True, None)},
}
REWARDS = {
    'track_velocity': {'body': ('name', False, None), 'command': ('name', True, None),
                       'sigma': ('positive', False, 0.25), 'frame': ('choice:world,base',
                                                                     False, 'base')},
    'distance_to_command': {**_OBJECT, 'command': ('name', True, None)},
    'velocity': {'body': ('name', False, None), 'axis': ('choice:' + ','.join(AXES), False,
                                                         'x')},
    'action_l2': {},
    'action_rate_l2': {},
    'joint_vel_l2': {'joints': ('names_all', False, None)},
    'alive': {},
    'predicate': {'name': ('name', True, None)},
    'python': {'function': ('function', True, None)},
}
CONTACT_SIDES = ('geom', 'body', 'subtree')
_OBJECT_KINDS = {'height_below', 'height_above', 'past', 'near_command', 'distance_to_command'}


def _check_args(c, kind, args, table, key):
    schema = table[kind]
    if args is None:
        args = {}
    if not isinstance(args, dict):
        short = _SHORTHAND.get(kind)
        if short is None:
            raise c.error(key, f'expected a mapping of arguments, got {shorten(args)}',
                          allowed='keys ' + (', '.join(schema) or 'none ({})'))
        args = {short: args}
    c.mapping(args, key, list(schema))
    out = {}
    for arg, (check, required, default) in schema.items():
        k = f'{key}.{arg}'
        if arg not in args:
            if required:
                raise c.error(k, 'is required')
            out[arg] = default
            continue
        v = args[arg]
        if check == 'name':
            out[arg] = c.name(v, k)
        elif check == 'names':
            out[arg] = c.names(v, k)
        elif check == 'names_all':
            out[arg] = c.names(v, k, allow_all=True)
        elif check == 'flag':
            out[arg] = c.flag(v, k)
        elif check == 'number':
            out[arg] = c.number(v, k)
        elif check == 'positive':
            out[arg] = c.number(v, k, positive=True)
        elif check == 'angle':
            out[arg] = c.number(v, k, low=0.0, high=180.0)
        elif check.startswith('choice:'):
            out[arg] = c.choice(v, k, check[7:].split(','))
        elif check == 'function':
            out[arg] = c.function(v, k)
        else:  # pragma: no cover - a typo in the tables above
            raise AssertionError(check)
    if kind in _OBJECT_KINDS and (out['body'] is None) == (out['site'] is None):
        raise c.error(key, 'needs exactly one of body or site')
    if kind == 'contact':
        for side, need in (('1', True), ('2', False)):
            given = [k + side for k in CONTACT_SIDES if out[k + side] is not None]
            if len(given) > 1 or (need and not given):
                raise c.error(key, f'needs {"exactly" if need else "at most"} one of '
                              + ', '.join(k + side for k in CONTACT_SIDES)
                              + (f', got {", ".join(given)}' if given else ''),
                              allowed='geom1: NAME, body1: BODY (its geoms) or subtree1: BODY '
                              '(the geoms of it and every body below it); the same for side 2, '
                              'or none: anything')
    return out


def _single(c, entry, key, table):
    """``{kind: args}`` with exactly one key: the form every term takes in a task file."""
    if not isinstance(entry, dict) or len(entry) != 1:
        raise c.error(key, f'expected one mapping {{kind: arguments}}, got {shorten(entry)}',
                      allowed=', '.join(table))
    (kind, args), = entry.items()
    if kind not in table:
        raise c.error(f'{key}.{kind}', 'unknown kind', allowed=', '.join(table))
    return kind, _check_args(c, kind, args, table, f'{key}.{kind}')


def _predicates(c, value, key):
    out = []
    if value is None:
        return out
    if not isinstance(value, dict):
        raise c.error(key, f'expected a mapping of name -> {{kind: arguments}}, '
                      f'got {shorten(value)}', allowed=', '.join(PREDICATES))
    for name, entry in value.items():
        c.name(name, f'{key}.{name}')
        kind, args = _single(c, entry, f'{key}.{name}', PREDICATES)
        out.append(Term(name, kind, args))
    return out


def _rewards(c, value, key):
    out = []
    if value is None:
        return out
    if not isinstance(value, dict):
        raise c.error(key, f'expected a mapping of name -> {{weight, kind: arguments}}, '
                      f'got {shorten(value)}')
    for name, entry in value.items():
        k = f'{key}.{name}'
        c.name(name, k)
        if not isinstance(entry, dict) or 'weight' not in entry:
            raise c.error(f'{k}.weight', 'is required',
                          allowed='{weight: number, <kind>: arguments}')
        weight = c.number(entry['weight'], f'{k}.weight')
        rest = {a: b for a, b in entry.items() if a != 'weight'}
        kind, args = _single(c, rest, k, REWARDS)
        out.append(Term(name, kind, args, weight))
    return out


def _observation(c, value, key):
    if not isinstance(value, list) or not value:
        raise c.error(key, f'expected a non-empty list of {{kind: arguments}}, '
                      f'got {shorten(value)}', allowed=', '.join(OBSERVATIONS))
    out = []
    for i, entry in enumerate(value):
        if isinstance(entry, str):      # `- last_action`: a kind without arguments
            entry = {entry: None}
        kind, args = _single(c, entry, f'{key}[{i}]', OBSERVATIONS)
        out.append(Term(kind, kind, args))
    return out


def _action(c, value, key):
    allowed = ['actuators', 'mode', 'units', 'scale', 'offset', 'decimation']
    c.mapping(value, key, allowed, required=['decimation'])
    acts = c.names(value.get('actuators', 'all'), f'{key}.actuators', allow_all=True)
    mode = c.choice(value.get('mode', 'absolute'), f'{key}.mode', ['absolute', 'delta'])
    units = c.choice(value.get('units', 'normalized'), f'{key}.units',
                     ['normalized', 'channel'])
    scale = c.number(value.get('scale', 1.0), f'{key}.scale', positive=True)
    offset = c.choice(value.get('offset', 'zero'), f'{key}.offset', ['zero', 'start'])
    if 'offset' in value and (units != 'channel' or mode != 'absolute'):
        raise c.error(f'{key}.offset', 'only applies to absolute actions in channel units '
                      '(normalized actions are centred on ctrlrange, delta actions on the '
                      'last setpoint)')
    decimation = c.integer(value['decimation'], f'{key}.decimation', 1, 10000)
    return ActionSpec(acts, mode, units, scale, offset, decimation)


def _reset(c, value, key, spec):
    c.mapping(value, key, ['joint_noise', 'bodies', 'fields'])
    if 'joint_noise' in value:
        k = f'{key}.joint_noise'
        jn = c.mapping(value['joint_noise'], k, ['joints', 'qpos', 'qvel'])
        spec.joint_noise = {
            'joints': c.names(jn.get('joints', 'all'), f'{k}.joints', allow_all=True),
            'qpos': c.number(jn.get('qpos', 0.0), f'{k}.qpos', low=0.0),
            'qvel': c.number(jn.get('qvel', 0.0), f'{k}.qvel', low=0.0)}
    if 'bodies' in value:
        k = f'{key}.bodies'
        bodies = value['bodies']
        if not isinstance(bodies, dict) or not bodies:
            raise c.error(k, f'expected a mapping of body -> pose ranges, got '
                          f'{shorten(bodies)}', allowed='{body: {x: [lo, hi], y, z, yaw}}')
        for body, ranges in bodies.items():
            kb = f'{k}.{c.name(body, k)}'
            c.mapping(ranges, kb, ['x', 'y', 'z', 'yaw'])
            spec.bodies[body] = {a: c.interval(r, f'{kb}.{a}') for a, r in ranges.items()}
    if 'fields' in value:
        from ..pool.randomization import FIELDS
        k = f'{key}.fields'
        fields = value['fields']
        if not isinstance(fields, dict) or not fields:
            raise c.error(k, f'expected a mapping of field -> {{scale, add, names, columns}}, '
                          f'got {shorten(fields)}', allowed=', '.join(FIELDS))
        for fname, term in fields.items():
            kf = f'{k}.{fname}'
            if fname not in FIELDS:
                raise c.error(kf, 'is not a randomizable field', allowed=', '.join(FIELDS))
            c.mapping(term, kf, ['names', 'scale', 'add', 'columns'])
            if 'scale' not in term and 'add' not in term:
                raise c.error(kf, 'needs scale: [low, high] or add: [low, high]')
            names = c.names(term['names'], f'{kf}.names') if 'names' in term else None
            if names is not None and fname.startswith('opt.'):
                raise c.error(f'{kf}.names', 'an option field has no names')
            scale = c.interval(term['scale'], f'{kf}.scale', low=0.0) if 'scale' in term \
                else None
            add = c.interval(term['add'], f'{kf}.add') if 'add' in term else None
            cols = None
            if 'columns' in term:
                cv = term['columns']
                if not isinstance(cv, list) or not cv:
                    raise c.error(f'{kf}.columns', 'expected a list of column indices')
                cols = tuple(c.integer(x, f'{kf}.columns[{i}]', 0, 63)
                             for i, x in enumerate(cv))
            spec.fields.append(FieldTerm(fname, names, scale, add, cols))


TOP_KEYS = ['name', 'model', 'start', 'base', 'frames', 'horizon', 'command', 'reset',
            'observation', 'action', 'success', 'failure', 'reward', 'video']


def _frames(c, value, key):
    """``{NAME: {body: BODY, pos: [x, y, z], quat: [w, x, y, z]}}``: points of the task's own."""
    if not isinstance(value, dict) or not value:
        raise c.error(key, f'expected a mapping of name -> {{body, pos, quat}}, got '
                      f'{shorten(value)}', allowed='{fingertip: {body: hand, pos: [0, 0, 0.1]}}')
    out = {}
    for name, term in value.items():
        k = f'{key}.{c.name(name, key)}'
        if isinstance(term, FrameTerm):
            term = {'body': term.body, 'pos': list(term.pos), 'quat': list(term.quat)}
        c.mapping(term, k, ['body', 'pos', 'quat'], required=['body'])
        pos = c.vector(term.get('pos', [0.0, 0.0, 0.0]), f'{k}.pos', 3)
        quat = c.vector(term.get('quat', [1.0, 0.0, 0.0, 0.0]), f'{k}.quat', 4)
        if math.sqrt(sum(q * q for q in quat)) < 1e-9:
            raise c.error(f'{k}.quat', 'is all zeros', allowed='a rotation (w, x, y, z), '
                          'normalized for you')
        out[name] = FrameTerm(c.name(term['body'], f'{k}.body'), pos, quat)
    return out


def parse(data: dict[str, Any], source: str = 'task', source_dir: str | None = None
          ) -> TaskSpec:
    """A TaskSpec from a task file's mapping; TaskError naming the key on the first mistake."""
    c = _Checker(source)
    c.mapping(data, '', TOP_KEYS, required=['name', 'model', 'horizon', 'observation',
                                            'action'])
    spec = TaskSpec(name=c.name(data['name'], 'name'), model=c.name(data['model'], 'model'),
                    source_dir=source_dir, source=source)
    if 'start' in data:
        st = c.mapping(data['start'], 'start', ['keyframe', 'qpos', 'qvel'])
        if 'keyframe' in st:
            if 'qpos' in st or 'qvel' in st:
                raise c.error('start', 'give a keyframe or qpos/qvel, not both')
            spec.keyframe = c.name(st['keyframe'], 'start.keyframe')
        if 'qpos' in st:
            spec.qpos = c.vector(st['qpos'], 'start.qpos')
        if 'qvel' in st:
            spec.qvel = c.vector(st['qvel'], 'start.qvel')
    if 'base' in data:
        spec.base = c.name(data['base'], 'base')
    if 'frames' in data and data['frames'] is not None:
        spec.frames = _frames(c, data['frames'], 'frames')
    spec.horizon = c.integer(data['horizon'], 'horizon', 1, 10_000_000)
    if 'command' in data and data['command'] is not None:
        cmd = data['command']
        if not isinstance(cmd, dict):
            raise c.error('command', f'expected a mapping of name -> {{uniform: {{low, high}}}}'
                          f', got {shorten(cmd)}')
        for name, term in cmd.items():
            k = f'command.{c.name(name, "command")}'
            c.mapping(term, k, ['uniform'], required=['uniform'])
            u = c.mapping(term['uniform'], f'{k}.uniform', ['low', 'high'],
                          required=['low', 'high'])
            low = c.vector(u['low'], f'{k}.uniform.low')
            high = c.vector(u['high'], f'{k}.uniform.high')
            if len(low) != len(high):
                # name the shorter one: a number left out is the likelier slip
                short, other = ('low', 'high') if len(low) < len(high) else ('high', 'low')
                sizes = {'low': len(low), 'high': len(high)}
                raise c.error(f'{k}.uniform.{short}', f'has {sizes[short]} numbers and '
                              f'{other} has {sizes[other]}; low and high give one bound per '
                              f'number of the command {name!r}',
                              allowed=f'{short} with {sizes[other]} numbers, or {other} '
                              f'with {sizes[short]}')
            for i, (lo, hi) in enumerate(zip(low, high, strict=True)):
                if lo > hi:
                    raise c.error(f'{k}.uniform', f'low[{i}] = {lo} is above high[{i}] = {hi}')
            spec.commands.append(CommandTerm(name, low, high))
    if 'reset' in data and data['reset'] is not None:
        _reset(c, data['reset'], 'reset', spec)
    spec.observation = _observation(c, data['observation'], 'observation')
    spec.action = _action(c, data['action'], 'action')
    spec.success = _predicates(c, data.get('success'), 'success')
    spec.failure = _predicates(c, data.get('failure'), 'failure')
    names = [t.name for t in spec.success + spec.failure]
    for reserved in ('horizon', 'unstable'):
        if reserved in names:
            raise c.error(reserved, f'{reserved!r} is reserved for the episode end the '
                          'evaluator reports itself; pick another predicate name')
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise c.error('failure', f'predicate name {sorted(dup)[0]!r} is used in both success '
                      'and failure; names must be unique')
    spec.reward = _rewards(c, data.get('reward'), 'reward')
    if 'video' in data:
        v = c.mapping(data['video'], 'video', ['camera', 'width', 'height', 'track'])
        spec.video = {'camera': c.name(v['camera'], 'video.camera') if 'camera' in v else None,
                      'width': c.integer(v.get('width', 480), 'video.width', 16, 4096),
                      'height': c.integer(v.get('height', 360), 'video.height', 16, 4096),
                      'track': c.name(v['track'], 'video.track') if 'track' in v else None}
    return spec


def load_file(path: str) -> TaskSpec:
    """Parse a YAML task file; the file name leads every error message."""
    from ..config.device_file import read_yaml
    source = os.path.basename(path)
    # bounded as a device file is read (1 MiB of UTF-8, 32 deep, no key twice); aliases
    # are kept: a term written once and used twice is a task file's habit, and nothing here
    # walks a value whole (``shorten`` cuts nested ones lazily)
    data = read_yaml(path, 'task file', aliases=True, error=TaskError)
    if not isinstance(data, dict):
        raise TaskError(f'expected a mapping at the top, got {type(data).__name__}',
                        where=source, allowed='keys ' + ', '.join(TOP_KEYS))
    return parse(data, source, os.path.dirname(os.path.abspath(path)))


def check(spec: TaskSpec) -> TaskSpec:
    """A TaskSpec built in Python (records, not a file) checked as a file would be.

    Terms get their defaults filled in; a wrong kind, key or value raises the same TaskError
    a task file would, with ``spec.source`` in place of the file name.
    """
    from dataclasses import asdict, replace
    c = _Checker(spec.source)
    if not isinstance(spec, TaskSpec):
        raise c.error('', f'expected a TaskSpec, got {type(spec).__name__}')
    c.name(spec.name, 'name')
    c.name(spec.model, 'model')
    c.integer(spec.horizon, 'horizon', 1, 10_000_000)
    out = replace(spec)
    act = asdict(spec.action) if isinstance(spec.action, ActionSpec) else spec.action
    act = {k: v for k, v in act.items() if v is not None}
    if act.get('offset') == 'zero':      # the default: only channel absolute actions use it
        act.pop('offset')
    if spec.action.actuators is None:
        act['actuators'] = 'all'
    out.action = _action(c, act, 'action')
    if spec.frames:
        out.frames = _frames(c, spec.frames, 'frames')

    def terms(items, table, key, named):
        checked = []
        for i, t in enumerate(items):
            if not isinstance(t, Term):
                raise c.error(f'{key}[{i}]', f'expected a Term, got {type(t).__name__}')
            if t.kind not in table:
                raise c.error(f'{key}[{i}].{t.kind}', 'unknown kind', allowed=', '.join(table))
            where = f'{key}.{t.name}.{t.kind}' if named else f'{key}[{i}].{t.kind}'
            given = {k: v for k, v in (t.args or {}).items() if v is not None}   # defaults
            args = _check_args(c, t.kind, given, table, where)
            weight = c.number(t.weight, f'{key}.{t.name}.weight') if table is REWARDS else 1.0
            checked.append(Term(t.name, t.kind, args, weight))
        return checked

    if not spec.observation:
        raise c.error('observation', 'is required', allowed=', '.join(OBSERVATIONS))
    out.observation = terms(spec.observation, OBSERVATIONS, 'observation', False)
    out.success = terms(spec.success, PREDICATES, 'success', True)
    out.failure = terms(spec.failure, PREDICATES, 'failure', True)
    out.reward = terms(spec.reward, REWARDS, 'reward', True)
    return out
