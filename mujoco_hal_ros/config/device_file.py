"""The device file: YAML that names the model, its channels, limits and actions.

Parsing is strict on purpose: an unknown or misspelt key is an error naming its path
(``write.pan_goal.max_chnage_per_s``), since a silently ignored limit is a safety bug.
The result is plain dicts of checked values; resolving names against the model is
``channels.py``'s job.

A device file may come from anyone (a launch argument), so reading one is bounded: at most
``MAX_DEVICE_FILE_BYTES`` (checked before parsing), nesting at most ``MAX_DEPTH`` deep, and
no YAML aliases at all. An alias (``*name``) repeats an anchored node by reference, so ten
lines of nested aliases expand to billions of values the moment anything walks them (the
"billion laughs"); no device file needs one, so they are refused by name rather than
counted.
"""

from collections.abc import Mapping
import copy
import os
import re
from typing import Any

import yaml

from ..errors import ConfigError, shorten
from . import sensor_settings
from .units import finite_float, parse_quantity

MAX_DEVICE_FILE_BYTES = 1 << 20   # a large real device file is a few kB
MAX_DEPTH = 32                    # mappings and lists inside each other; real files use 5

TOP_KEYS = {'device', 'id', 'connect', 'read', 'write', 'actions', 'safe_state', 'hazard',
            'description', 'sensors', 'lidars', 'cameras'}
CONNECT_KEYS = {'mujoco', 'model', 'keyframe', 'timestep', 'action_wait', 'tolerance',
                'aim_tolerance', 'real_time_factor', 'gravity_compensation'}
READ_KEYS = {'unit', 'every', 'map', 'type', 'description', 'min', 'max'}
READ_MAP_KEYS = {'joint', 'site', 'body', 'axis', 'camera', 'width', 'height', 'depth',
                 'sensor', 'unit'}
WRITE_KEYS = {'unit', 'min', 'max', 'max_change_per_s', 'map', 'description'}
WRITE_MAP_KEYS = {'actuator', 'joint', 'unit'}
ACTION_KEYS = {'args', 'map', 'effects', 'description'}
ARG_KEYS = {'unit', 'min', 'max', 'description'}
ACTION_MAP_KEYS = {'command', 'site', 'body', 'axes', 'at', 'aim', 'joints', 'then', 'speed',
                   'path', 'path_tolerance'}
AIM_KEYS = {'axis', 'toward'}
COMMANDS = ('move_to', 'hold')
HAZARDS = ('none', 'low', 'medium', 'high')
AXES = ('x', 'y', 'z')


def _keys(section, allowed, where):
    if not isinstance(section, dict):
        raise ConfigError(f'expected a mapping, got {type(section).__name__}', where=where)
    for key in section:
        if key not in allowed:
            raise ConfigError(f'unknown key {shorten(key)}', where=where,
                              allowed=', '.join(sorted(allowed)))
    return section


def _mapping(section, where):
    """A section that may be left out (None) or must be a mapping."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ConfigError(f'expected a mapping, got {type(section).__name__}', where=where)
    return section


def _name(value, where):
    if not isinstance(value, str) or not value:
        raise ConfigError(f'expected a non-empty name, got {shorten(value)}', where=where)
    return value


_FLOAT = re.compile(r'^\s*[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+\s*$')


def number(value: Any, where: str) -> float:
    # YAML 1.1 reads 1e-3 (no dot) as a string; it is plainly a number, so take it.
    if isinstance(value, str) and _FLOAT.match(value):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f'expected a finite number, got {shorten(value)}', where=where)
    return finite_float(value, 'number', where)


def vector3(value: Any, where: str) -> list[float]:
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ConfigError(f'expected 3 numbers, got {shorten(value)}', where=where)
    out = [number(v, f'{where}[{i}]') for i, v in enumerate(value)]
    if not any(out):
        raise ConfigError('a direction cannot be all zeros', where=where)
    return out


def _limits(entry, where):
    """Check min/max and store them back as floats."""
    lo = number(entry['min'], f'{where}.min') if 'min' in entry else None
    hi = number(entry['max'], f'{where}.max') if 'max' in entry else None
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f'min {lo} is above max {hi}', where=where)
    for key, value in (('min', lo), ('max', hi)):
        if value is not None:
            entry[key] = value
    return lo, hi


def _channels(section, keys, map_keys, where):
    out = {}
    for name, entry in _mapping(section, where).items():
        here = f'{where}.{name}'
        _name(name, here)
        entry = _keys(entry if entry is not None else {}, keys, here)
        if 'map' in entry:
            _keys(entry['map'], map_keys, f'{here}.map')
        _limits(entry, here)
        if 'unit' in entry and not isinstance(entry['unit'], str):
            raise ConfigError(f'expected a unit name, got {shorten(entry["unit"])}', where=here)
        if 'max_change_per_s' in entry:
            rate = number(entry['max_change_per_s'], f'{here}.max_change_per_s')
            entry['max_change_per_s'] = rate
            if rate <= 0:
                raise ConfigError('must be above zero (leave it out to jump in one step)',
                                  where=f'{here}.max_change_per_s')
        axis = (entry.get('map') or {}).get('axis')
        if axis is not None and axis not in AXES:
            raise ConfigError(f'unknown axis {shorten(axis)}', where=f'{here}.map.axis',
                              allowed='x, y, z')
        if entry.get('type', 'scalar') not in ('scalar', 'image'):
            raise ConfigError(f'unknown channel type {shorten(entry["type"])}',
                              where=f'{here}.type',
                              allowed='scalar, image')
        out[name] = entry
    return out


def _action(name, entry, write, where):
    entry = _keys(entry if entry is not None else {}, ACTION_KEYS, where)
    amap = _keys(entry.get('map', {}) or {}, ACTION_MAP_KEYS, f'{where}.map')
    command = amap.get('command', name if name in COMMANDS else None)
    if not isinstance(command, str) or command not in COMMANDS:
        raise ConfigError(f'no known command for action {shorten(name)}',
                          where=f'{where}.map.command',
                          allowed=', '.join(COMMANDS))
    args = {}
    for arg, spec in _mapping(entry.get('args'), f'{where}.args').items():
        here = f'{where}.args.{arg}'
        _name(arg, here)
        spec = _keys(spec if spec is not None else {}, ARG_KEYS, here)
        _limits(spec, here)
        if 'unit' in spec and not isinstance(spec['unit'], str):
            raise ConfigError(f'expected a unit name, got {shorten(spec["unit"])}', where=here)
        args[arg] = spec
    if 'aim' in amap:
        aim = _keys(amap['aim'], AIM_KEYS, f'{where}.map.aim')
        for key in AIM_KEYS:
            if key not in aim:
                raise ConfigError(f'aim needs {shorten(key)}', where=f'{where}.map.aim')
            vector3(aim[key], f'{where}.map.aim.{key}')
    effects = entry.get('effects', [])
    if not isinstance(effects, list) or not all(isinstance(e, str) for e in effects):
        raise ConfigError('expected a list of goal channel names', where=f'{where}.effects')
    for effect in effects:
        if effect not in write:
            raise ConfigError(f'{shorten(effect)} is not a goal channel', where=f'{where}.effects',
                              allowed=', '.join(write) or 'none')
    then = amap.get('then', {}) or {}
    if not isinstance(then, dict):
        raise ConfigError('expected channel: value pairs', where=f'{where}.map.then')
    for key in ('site', 'body'):
        if key in amap:
            _name(amap[key], f'{where}.map.{key}')
    for channel, value in then.items():
        number(value, f'{where}.map.then.{channel}')
        if channel not in effects:
            raise ConfigError(f'action {shorten(name)} sets {shorten(channel)} in `then` but '
                              'does not list '
                              'it in effects; add it to effects', where=f'{where}.effects')
    if command == 'move_to':
        for key in ('axes', 'at'):
            if not isinstance(amap.get(key, {}), dict):
                raise ConfigError('expected a mapping', where=f'{where}.map.{key}')
        for arg, axis in amap.get('axes', {}).items():
            if arg not in args or axis not in AXES:
                raise ConfigError(f'axes maps argument {shorten(arg)} to {shorten(axis)}',
                                  where=f'{where}.map.axes',
                                  allowed=f'arguments {sorted(args)} to x, y or z')
        if amap.get('path', 'joint') not in ('joint', 'cartesian'):
            raise ConfigError(f'unknown path {shorten(amap["path"])}', where=f'{where}.map.path',
                              allowed='joint, cartesian')
        speed = amap.get('speed')
        if speed is not None:
            if not isinstance(speed, str) or speed not in args:
                raise ConfigError(f'speed names {shorten(speed)}, which is not an argument',
                                  where=f'{where}.map.speed', allowed=', '.join(args))
            lo = args[speed].get('min')
            if lo is None or lo <= 0:
                raise ConfigError('a speed argument needs a min above zero',
                                  where=f'{where}.args.{speed}.min')
    return {'name': name, 'command': command, 'args': args, 'map': amap, 'effects': effects}


def _connect(section):
    """connect: the model (an environment variable or a path), keyframe and parameters."""
    connect = _keys(_mapping(section, 'connect'), CONNECT_KEYS, 'connect')
    for key in ('mujoco', 'model', 'keyframe'):
        if key in connect and connect[key] is not None:
            _name(connect[key], f'connect.{key}')
    for key, kind in (('timestep', 'time'), ('action_wait', 'time'), ('tolerance', 'length'),
                      ('aim_tolerance', 'angle')):
        if key in connect:
            value = parse_quantity(connect[key], kind, f'connect.{key}')
            if not value > 0:
                raise ConfigError(f'must be above zero, got {shorten(connect[key])}',
                                  where=f'connect.{key}')
    if 'gravity_compensation' in connect and \
            not isinstance(connect['gravity_compensation'], bool):
        raise ConfigError('expected true or false, got '
                          f'{shorten(connect["gravity_compensation"])}',
                          where='connect.gravity_compensation')
    if 'real_time_factor' in connect:
        rtf = number(connect['real_time_factor'], 'connect.real_time_factor')
        if rtf < 0:
            raise ConfigError('must be 0 (as fast as possible) or above',
                              where='connect.real_time_factor')
    return connect


def parse(doc: dict | None, source: str = 'device file') -> dict:
    """Check a loaded device-file mapping; return it with channels and actions normalised."""
    if doc is None:
        doc = {}
    _keys(doc, TOP_KEYS, source)
    doc = copy.deepcopy(doc)         # the checks normalise values in place
    connect = _connect(doc.get('connect'))
    read = _channels(doc.get('read'), READ_KEYS, READ_MAP_KEYS, 'read')
    write = _channels(doc.get('write'), WRITE_KEYS, WRITE_MAP_KEYS, 'write')
    actions = {}
    for name, entry in _mapping(doc.get('actions'), 'actions').items():
        actions[_name(name, 'actions')] = _action(name, entry, write, f'actions.{name}')
    safe = doc.get('safe_state', {'action': 'hold'}) or {'action': 'hold'}
    _keys(safe, {'action'}, 'safe_state')
    safe = {'action': safe.get('action', 'hold')}
    if not isinstance(safe['action'], str) or \
            (safe['action'] != 'hold' and safe['action'] not in actions):
        raise ConfigError(f'safe_state names unknown action {shorten(safe["action"])}',
                          where='safe_state.action', allowed=', '.join(actions) or 'hold')
    hazard = doc.get('hazard', 'none')
    if not isinstance(hazard, str) or hazard not in HAZARDS:
        raise ConfigError(f'unknown hazard {shorten(hazard)}', where='hazard',
                          allowed=', '.join(HAZARDS))
    for key in ('device', 'id', 'description'):
        value = doc.get(key)
        if value is not None and (isinstance(value, bool) or
                                  not isinstance(value, (str, int, float))):
            raise ConfigError(f'expected a name, got {type(value).__name__} {shorten(value)}',
                              where=key, allowed='a string')
    return {'device': str(doc.get('device', '')), 'id': str(doc.get('id', '')),
            'connect': connect, 'read': read, 'write': write, 'actions': actions,
            'safe_state': safe, 'hazard': hazard,
            'sensors': sensor_settings.parse_sensors(doc.get('sensors')),
            'lidars': sensor_settings.parse_lidars(doc.get('lidars')),
            'cameras': sensor_settings.parse_cameras(doc.get('cameras'))}


class _RefusedInput(yaml.YAMLError):
    """Raised inside the loader; ``load`` turns it into a ConfigError at ``path``."""

    def __init__(self, message, path):
        super().__init__(message)
        self.message, self.path = message, path


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice (YAML would keep the last silently), any
    alias, and nesting beyond MAX_DEPTH, naming the key path where it met them."""

    what = 'device file'            # what the file is, in the refusals
    aliases = False                 # True: aliases are kept (by reference, as SafeLoader)

    def __init__(self, stream):
        super().__init__(stream)
        self._path = []

    def _where(self):
        return ''.join(self._path).lstrip('.') or 'top level'

    def compose_node(self, parent, index):
        if isinstance(index, yaml.ScalarNode):
            self._path.append(f'.{shorten(index.value, 40)[1:-1]}')
        elif isinstance(index, int):
            self._path.append(f'[{index}]')
        else:
            self._path.append('' if parent is None else '.<key>')
        try:
            if not self.aliases and self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise _RefusedInput(f'YAML alias *{shorten(event.anchor, 40)[1:-1]} (line '
                                    f'{event.start_mark.line + 1}): a {self.what} cannot use '
                                    'aliases; write the value out', self._where())
            if len(self._path) > MAX_DEPTH:
                raise _RefusedInput(f'nested more than {MAX_DEPTH} deep; a {self.what} is a '
                                    'few levels of mappings', self._where())
            return super().compose_node(parent, index)
        finally:
            self._path.pop()

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError, TypeError, RecursionError) as exc:
            # e.g. an integer of 5000 digits, beyond Python's int/str conversion limit
            raise yaml.constructor.ConstructorError(
                None, None, f'cannot read this value ({type(exc).__name__})',
                node.start_mark) from None


def _no_duplicates(loader, node, deep=False):
    seen = set()
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:
            duplicate = False
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f'key {shorten(key)} is given twice', key_node.start_mark)
        try:
            seen.add(key)
        except TypeError:
            pass
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def load(path: str | os.PathLike) -> dict:
    """Read and check a device file; errors name the file and the key."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise ConfigError(f'expected a device file path, got {shorten(path)}', where='device_file')
    spec = loads(read_text(path, 'device file'), source=str(path))
    spec['path'] = os.path.abspath(path)
    return spec


def read_text(path: str | os.PathLike, what: str, error: type = ConfigError) -> str:
    """The UTF-8 text of the file at ``path``, at most ``MAX_DEVICE_FILE_BYTES`` of it
    read: anything else (unreadable, bigger, not UTF-8) is ``error`` naming the file;
    ``what`` says what the file is (``device file``) in the messages."""
    try:
        with open(path, 'rb') as handle:
            raw = handle.read(MAX_DEVICE_FILE_BYTES + 1)
        if len(raw) > MAX_DEVICE_FILE_BYTES:
            size = os.path.getsize(path)
            raise error(f'the {what} is {size} bytes, over the cap of '
                        f'{MAX_DEVICE_FILE_BYTES} bytes (MAX_DEVICE_FILE_BYTES); a {what} is '
                        'a few kB: check it is the right file',
                        where=shorten(str(path), 200)[1:-1])
        return raw.decode('utf-8')
    except OSError as exc:
        raise error(f'cannot read {what}: {exc.strerror}',
                    where=shorten(str(path), 200)[1:-1]) from None
    except UnicodeDecodeError as exc:
        raise error(f'not a text (UTF-8) file: byte {exc.start} is no UTF-8; a {what} is '
                    'YAML text', where=shorten(str(path), 200)[1:-1]) from None


def read_yaml(path: str | os.PathLike, what: str, *, aliases: bool = False,
              error: type = ConfigError) -> Any:
    """The YAML document in the file at ``path``, read as a device file is (``read_text``;
    nesting at most ``MAX_DEPTH``; no key twice; no alias unless ``aliases``): a refusal
    is ``error`` naming the file and the key path."""
    return parse_yaml(read_text(path, what, error), shorten(str(path), 200)[1:-1],
                      what, aliases=aliases, error=error)


def parse_yaml(text: str, source: str, what: str, *, aliases: bool = False,
               error: type = ConfigError) -> Any:
    """``read_yaml`` for text already read (``source`` names it in the refusals)."""
    loader = None
    try:
        loader = _StrictLoader(text)         # its reader refuses control characters here
        loader.what, loader.aliases = what, aliases
        return loader.get_single_data()
    except _RefusedInput as exc:
        raise error(exc.message, where=f'{source}: {exc.path}') from None
    except yaml.YAMLError as exc:
        raise error(f'not valid YAML: {exc}', where=source) from None
    except RecursionError:
        raise error(f'nested too deep to read (at most {MAX_DEPTH} levels)',
                    where=source) from None
    finally:
        if loader is not None:
            loader.dispose()


def loads(text: str | bytes, source: str = 'device file') -> dict:
    """Read and check device-file YAML text, bounded as ``load`` is; errors name the key."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', errors='replace')
    if len(text.encode('utf-8', errors='replace')) > MAX_DEVICE_FILE_BYTES:
        raise ConfigError(f'the device file is over the cap of {MAX_DEVICE_FILE_BYTES} '
                          'bytes (MAX_DEVICE_FILE_BYTES)', where=source)
    try:
        doc = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader
    except _RefusedInput as exc:
        raise ConfigError(exc.message, where=exc.path) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f'not valid YAML: {exc}', where=source) from None
    except RecursionError:
        raise ConfigError(f'nested too deep to read (at most {MAX_DEPTH} levels)',
                          where=source) from None
    return parse(doc, source=source)


def model_path(spec: dict, override: str | None = None,
               environ: Mapping[str, str] = os.environ) -> str:
    """The MJCF path: an explicit override, else the variable named by connect.mujoco."""
    if override:
        return override
    connect = spec['connect']
    if 'model' in connect:
        path = connect['model']
        base = os.path.dirname(spec.get('path', '.'))
        return path if os.path.isabs(path) else os.path.join(base, path)
    var = connect.get('mujoco')
    if not var:
        raise ConfigError('no model: set connect.mujoco to an environment variable that '
                          'holds the MJCF path, or pass a model path', where='connect')
    value = environ.get(var)
    if not value:
        raise ConfigError(f'environment variable {var} is not set; export {var}=/path/to/'
                          'model.xml or pass the model path explicitly',
                          where='connect.mujoco')
    return value
