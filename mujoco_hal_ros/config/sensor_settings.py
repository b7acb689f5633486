"""The device file's ``sensors:``, ``lidars:`` and ``cameras:`` sections (with each sensor's
``noise:`` entry), checked strictly: the device-file schema is all in ``config/``.

Like the rest of the device file, an unknown or misspelt key is an error naming its path
(``sensors.imu.noize``): a noise model that is silently ignored would make a robustness
test pass for the wrong reason. Names are resolved against the model later (catalog).
"""

from collections.abc import Callable
from dataclasses import dataclass
import math
from typing import Any

from ..errors import ConfigError
from .units import parse_quantity

NOISE_KEYS = ('bias', 'std', 'delay', 'dropout')


@dataclass(frozen=True)
class NoiseSpec:
    """bias and std in the sensor's units (per component), delay in simulated seconds,
    dropout as the probability that a reading is lost."""

    bias: float = 0.0
    std: float = 0.0
    delay: float = 0.0
    dropout: float = 0.0

    @property
    def off(self) -> bool:
        return not (self.bias or self.std or self.delay or self.dropout)


def noise_spec(entry: Any, where: str, number: Callable[[Any, str], float]) -> NoiseSpec:
    """A NoiseSpec from a device-file mapping (``number`` checks a finite number)."""
    if entry is None:
        return NoiseSpec()
    if not isinstance(entry, dict):
        raise ConfigError(f'expected a mapping, got {type(entry).__name__}', where=where)
    for key in entry:
        if key not in NOISE_KEYS:
            raise ConfigError(f'unknown key {key!r}', where=where, allowed=', '.join(NOISE_KEYS))
    vals = {k: number(v, f'{where}.{k}') for k, v in entry.items()}
    for key in ('std', 'delay'):
        if vals.get(key, 0.0) < 0:
            raise ConfigError('must be 0 or above', where=f'{where}.{key}')
    if not 0.0 <= vals.get('dropout', 0.0) < 1.0:
        raise ConfigError('a probability from 0 up to (not including) 1',
                          where=f'{where}.dropout')
    return NoiseSpec(**vals)


SENSOR_KEYS = {'rate', 'frame', 'enabled', 'noise', 'topic'}
SECTION_KEYS = {'seed', 'rate'}
LIDAR_KEYS = {'site', 'rate', 'rays', 'fov', 'vertical_rays', 'vertical_fov', 'range_min',
              'range_max', 'exclude_robot', 'geomgroup', 'frame', 'angle_min', 'angle_max',
              'vertical_angle_min', 'vertical_angle_max', 'noise', 'topic', 'output',
              'body', 'pos', 'rpy', 'radiation'}
CAMERA_KEYS = {'body', 'pos', 'rpy', 'width', 'height', 'horizontal_fov', 'rate', 'depth',
               'frame'}
MAX_SIDE = 2048
MAX_CAMERA_RATE = 240.0
OUTPUTS = ('auto', 'scan', 'points', 'range')
RADIATIONS = ('infrared', 'ultrasound')
MAX_TOPIC = 256
MAX_RATE = 10000.0
MAX_RAYS = 1 << 20


def _number(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f'expected a finite number, got {value!r}', where=where)
    if not math.isfinite(float(value)):
        raise ConfigError(f'expected a finite number, got {value!r}', where=where)
    return float(value)


def _mapping(value, where):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f'expected a mapping, got {type(value).__name__}', where=where)
    return value


def _rate(value, where):
    rate = _number(value, where)
    if not 0 < rate <= MAX_RATE:
        raise ConfigError(f'a rate above 0 and at most {MAX_RATE:g} Hz, got {value!r}',
                          where=where)
    return rate


def _int(value, where, lo, hi):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f'expected a whole number {lo}..{hi}, got {value!r}', where=where)
    return value


def _frame(value, where):
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise ConfigError(f'expected a frame name without spaces, got {value!r}',
                          where=where)
    return value


def _topic(value, where):
    """A ROS topic name (relative, or absolute with a leading /): letters, digits, _ and
    / only, as ROS names are."""
    body = value[1:] if isinstance(value, str) and value.startswith('/') else value
    ok = isinstance(value, str) and 0 < len(value) <= MAX_TOPIC and value.isascii() and \
        all(t and (t[0].isalpha() or t[0] == '_') and all(c.isalnum() or c == '_' for c in t)
            for t in body.split('/'))
    if not ok:
        raise ConfigError(f'expected a ROS topic name (letters, digits, _ and /), got '
                          f'{value!r}'[:200], where=where)
    return value


def parse_sensors(section: Any, where: str = 'sensors') -> dict[str, Any]:
    """``{'seed': int, 'rate': Hz or None, 'entries': {name: {...}}}``."""
    section = _mapping(section, where)
    entries: dict[str, dict[str, Any]] = {}
    out: dict[str, Any] = {'seed': 0, 'rate': None, 'entries': entries}
    for key, entry in section.items():
        here = f'{where}.{key}'
        if key == 'seed':
            out['seed'] = _int(entry, here, 0, 2 ** 32 - 1)
            continue
        if key == 'rate':
            out['rate'] = _rate(entry, here)
            continue
        entry = _named_entry(key, entry, where, here, 'sensor', SENSOR_KEYS)
        parsed: dict[str, Any] = {}
        if 'rate' in entry:
            parsed['rate'] = _rate(entry['rate'], f'{here}.rate')
        if 'frame' in entry:
            parsed['frame'] = _frame(entry['frame'], f'{here}.frame')
        if 'enabled' in entry:
            if not isinstance(entry['enabled'], bool):
                raise ConfigError(f'expected true or false, got {entry["enabled"]!r}',
                                  where=f'{here}.enabled')
            parsed['enabled'] = entry['enabled']
        if 'topic' in entry:
            parsed['topic'] = _topic(entry['topic'], f'{here}.topic')
        parsed['noise'] = noise_spec(entry.get('noise'), f'{here}.noise', _number)
        entries[key] = parsed
    return out


def _named_entry(name, entry, where, here, kind, keys):
    """One named entry of a section: a non-empty name and a mapping of known keys only,
    so a typo in a key is refused instead of silently ignored."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f'expected a {kind} name, got {name!r}', where=where)
    entry = _mapping(entry, here)
    for k in entry:
        if k not in keys:
            raise ConfigError(f'unknown key {k!r}', where=here,
                              allowed=', '.join(sorted(keys)))
    return entry


def parse_lidars(section: Any, where: str = 'lidars') -> dict[str, dict[str, Any]]:
    """``{name: {...}}`` with every key filled in (defaults: a planar 360-ray scanner)."""
    out = {}
    for name, entry in _mapping(section, where).items():
        here = f'{where}.{name}'
        entry = _named_entry(name, entry, where, here, 'lidar', LIDAR_KEYS)
        out[name] = lidar_entry(name, entry, here)
    return out


def lidar_entry(name: str, entry: Any, where: str) -> dict[str, Any]:
    """One lidar's checked settings (also what a parameter entry becomes)."""
    get = entry.get
    mount = [k for k in ('site', 'body') if k in entry]
    if len(mount) != 1 or not isinstance(entry[mount[0]], str) or not entry[mount[0]]:
        raise ConfigError('a lidar sits on a site, or on a body (with pos and rpy in it): '
                          'give one of the two', where=f'{where}.site')
    if mount == ['site'] and ('pos' in entry or 'rpy' in entry):
        raise ConfigError('pos and rpy place a lidar on a body; a site has its own pose',
                          where=f'{where}.pos' if 'pos' in entry else f'{where}.rpy')
    parsed = {
        'name': name, 'site': get('site'), 'body': get('body'),
        'pos': _triple(get('pos'), f'{where}.pos', 'length'),
        'rpy': _triple(get('rpy'), f'{where}.rpy', 'angle'),
        'rate': _rate(get('rate', 10.0), f'{where}.rate'),
        'rays': _int(get('rays', 360), f'{where}.rays', 1, MAX_RAYS),
        'fov': parse_quantity(get('fov', 2 * math.pi), 'angle', f'{where}.fov'),
        'vertical_rays': _int(get('vertical_rays', 1), f'{where}.vertical_rays', 1, MAX_RAYS),
        'vertical_fov': parse_quantity(get('vertical_fov', 0.0), 'angle',
                                       f'{where}.vertical_fov'),
        'range_min': parse_quantity(get('range_min', 0.05), 'length', f'{where}.range_min'),
        'range_max': parse_quantity(get('range_max', 30.0), 'length', f'{where}.range_max'),
        'exclude_robot': get('exclude_robot', True),
        'geomgroup': get('geomgroup'),
        'frame': _frame(get('frame'), f'{where}.frame') if get('frame') else None,
        'topic': _topic(get('topic'), f'{where}.topic') if get('topic') else None,
        'output': get('output', 'auto'),
        'radiation': get('radiation', 'infrared'),
        'noise': noise_spec(get('noise'), f'{where}.noise', _number),
    }
    _angles(parsed, entry, where, '', math.pi, 2 * math.pi, 'fov')
    _angles(parsed, entry, where, 'vertical_', math.pi / 2, math.pi, 'vertical_fov')
    if parsed['output'] not in OUTPUTS:
        raise ConfigError(f'expected one of {", ".join(OUTPUTS)}, got {parsed["output"]!r}',
                          where=f'{where}.output')
    if parsed['radiation'] not in RADIATIONS:
        raise ConfigError(f'expected one of {", ".join(RADIATIONS)}, got '
                          f'{parsed["radiation"]!r}'[:200], where=f'{where}.radiation')
    if parsed['output'] == 'scan' and parsed['vertical_rays'] > 1:
        raise ConfigError('a LaserScan holds one row: output points (PointCloud2) for '
                          'vertical_rays above 1', where=f'{where}.output')
    if not 0 < parsed['fov'] <= 2 * math.pi + 1e-9:
        raise ConfigError('a field of view above 0 and at most 360 degrees',
                          where=f'{where}.fov')
    if not 0 <= parsed['vertical_fov'] <= math.pi + 1e-9:
        raise ConfigError('a vertical field of view from 0 to 180 degrees',
                          where=f'{where}.vertical_fov')
    if not 0 <= parsed['range_min'] < parsed['range_max']:
        raise ConfigError('range_min from 0 up to range_max', where=f'{where}.range_min')
    if not isinstance(parsed['exclude_robot'], bool):
        raise ConfigError('expected true or false', where=f'{where}.exclude_robot')
    group = parsed['geomgroup']
    if group is not None:
        if not isinstance(group, list) or len(group) != 6 or \
                not all(isinstance(g, bool) for g in group):
            raise ConfigError('expected 6 true/false values, one per geom group',
                              where=f'{where}.geomgroup')
    return parsed


def _angles(parsed, entry, where, prefix, bound, span, fov_key):
    """``<prefix>angle_min`` and ``<prefix>angle_max`` (both or neither): rays from one to
    the other, both included, as a Gazebo scan spreads them; they set ``fov_key`` too.
    Neither: None, and the scan is centred on the site's axes."""
    lo_key, hi_key = f'{prefix}angle_min', f'{prefix}angle_max'
    given = [k for k in (lo_key, hi_key) if entry.get(k) is not None]
    parsed[lo_key] = parsed[hi_key] = None
    if not given:
        return
    if len(given) == 1:
        raise ConfigError(f'give both {lo_key} and {hi_key}, or neither',
                          where=f'{where}.{given[0]}')
    lo = parse_quantity(entry[lo_key], 'angle', f'{where}.{lo_key}')
    hi = parse_quantity(entry[hi_key], 'angle', f'{where}.{hi_key}')
    if not -2 * bound - 1e-9 <= lo <= hi <= 2 * bound + 1e-9 or hi - lo > span + 1e-6:
        raise ConfigError(f'{lo_key} up to {hi_key}, at most {math.degrees(span):g} degrees '
                          'apart', where=f'{where}.{lo_key}')
    parsed[lo_key], parsed[hi_key] = lo, hi
    parsed[fov_key] = hi - lo


def _triple(value, where, kind):
    """Three quantities (``[0.1, 0, 0.2]``, units allowed: ``[10 cm, 0, 0]``), or zeros."""
    if value is None:
        return (0.0, 0.0, 0.0)
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ConfigError(f'expected three values, got {value!r}'[:200], where=where)
    out = tuple(parse_quantity(v, kind, f'{where}[{i}]') for i, v in enumerate(value))
    if not all(math.isfinite(v) and abs(v) <= 1e3 for v in out):
        raise ConfigError('expected finite values within 1000', where=where)
    return out


def parse_cameras(section: Any, where: str = 'cameras') -> dict[str, dict[str, Any]]:
    """``{name: {...}}``: cameras a device file adds to a body of any model, as a URDF's
    camera tag puts one on a link (looking along the body's x at ``pos``/``rpy``); each
    publishes ``<name>/image_raw`` and ``camera_info`` (and depth) as a model's own."""
    out = {}
    for name, entry in _mapping(section, where).items():
        here = f'{where}.{name}'
        entry = _named_entry(name, entry, where, here, 'camera', CAMERA_KEYS)
        _topic(name, here)
        if not isinstance(entry.get('body'), str) or not entry['body']:
            raise ConfigError('a camera needs the body it sits on', where=f'{here}.body')
        fov = parse_quantity(entry.get('horizontal_fov', '60 deg'), 'angle',
                             f'{here}.horizontal_fov')
        if not 0.01 <= fov <= 3.0:
            raise ConfigError('a horizontal field of view from 0.01 to 3 rad (172 degrees)',
                              where=f'{here}.horizontal_fov')
        depth = entry.get('depth', False)
        if not isinstance(depth, bool):
            raise ConfigError(f'expected true or false, got {depth!r}', where=f'{here}.depth')
        rate = _rate(entry.get('rate', 10.0), f'{here}.rate')
        if rate > MAX_CAMERA_RATE:
            raise ConfigError(f'at most {MAX_CAMERA_RATE:g} Hz', where=f'{here}.rate')
        out[name] = {
            'name': name, 'body': entry['body'],
            'pos': _triple(entry.get('pos'), f'{here}.pos', 'length'),
            'rpy': _triple(entry.get('rpy'), f'{here}.rpy', 'angle'),
            'width': _int(entry.get('width', 640), f'{here}.width', 1, MAX_SIDE),
            'height': _int(entry.get('height', 480), f'{here}.height', 1, MAX_SIDE),
            'horizontal_fov': fov, 'rate': rate, 'depth': depth,
            'frame': _frame(entry['frame'], f'{here}.frame') if entry.get('frame') else None}
    return out
