"""The full text of a ROS 2 message definition, as ``ros2 bag record`` stores it.

An MCAP reader (Foxglove, ``ros2 bag play`` on another machine, ``rosbags``) decodes CDR
with the schema alone, so each schema carries its type's .msg text followed by every type
it uses, each after a line of 80 '=' and ``MSG: pkg/Type``. The .msg files come from the
packages' share directories (rosidl installs them there), found on AMENT_PREFIX_PATH.
"""

import functools
import os
import re
import sys

from ..errors import ConfigError

SEPARATOR = '=' * 80
PRIMITIVES = {'bool', 'byte', 'char', 'float32', 'float64', 'int8', 'uint8', 'int16',
              'uint16', 'int32', 'uint32', 'int64', 'uint64', 'string', 'wstring'}
_FIELD = re.compile(r'^\s*([A-Za-z][\w/]*)(?:<=\d+)?(?:\[[^\]]*\])?\s+[A-Za-z_]\w*')


def _prefixes():
    paths = [p for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    return paths + [sys.prefix]


@functools.cache
def _msg_text(pkg, name):
    for prefix in _prefixes():
        path = os.path.join(prefix, 'share', pkg, 'msg', f'{name}.msg')
        if os.path.isfile(path):
            with open(path, encoding='utf-8') as f:
                return f.read()
    raise ConfigError(f'no definition for {pkg}/msg/{name} (looked for share/{pkg}/msg/'
                      f'{name}.msg on AMENT_PREFIX_PATH); source the install that has it',
                      where='record')


def _dependencies(pkg, text):
    out = []
    for line in text.splitlines():
        line = line.split('#', 1)[0]
        m = _FIELD.match(line)
        if m is None:
            continue
        kind = m.group(1)
        if kind in PRIMITIVES:
            continue
        if kind == 'Header':
            out.append(('std_msgs', 'Header'))
        elif '/' in kind:
            parts = kind.split('/')
            out.append((parts[0], parts[-1]))
        else:
            out.append((pkg, kind))
    return out


def _split(type_name):
    parts = type_name.split('/')
    if len(parts) == 3 and parts[1] == 'msg':
        return parts[0], parts[2]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ConfigError(f'expected a type like sensor_msgs/msg/Image, got {type_name!r}',
                      where='record')


@functools.cache
def message_definition(type_name: str) -> str:
    """'sensor_msgs/msg/Image' -> its .msg text and those of every type it uses."""
    pkg, name = _split(type_name)
    top = _msg_text(pkg, name)
    seen, order = {(pkg, name)}, []
    todo = list(_dependencies(pkg, top))
    while todo:
        dep = todo.pop(0)
        if dep in seen:
            continue
        seen.add(dep)
        order.append(dep)
        todo.extend(_dependencies(dep[0], _msg_text(*dep)))
    parts = [top.rstrip('\n')]
    for dep_pkg, dep_name in order:
        parts.append(f'{SEPARATOR}\nMSG: {dep_pkg}/{dep_name}\n'
                     f'{_msg_text(dep_pkg, dep_name).rstrip(chr(10))}')
    return '\n'.join(parts) + '\n'
