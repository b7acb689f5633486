"""The fenced code blocks of README.md (and other Markdown pages), for the tests that run them.

A block may carry a tag in an HTML comment on the line just above its fence, which GitHub
does not show: ``<!-- readme-test: sim_node -->`` says the block needs a running sim_node
(the e2e tier runs it beside one), ``<!-- readme-test: recording -->`` that it reads a bag
whose folder the test names as ``bag_folder``. Untagged ``python`` blocks run on their own.
"""

from dataclasses import dataclass
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
README = os.path.join(ROOT, 'README.md')

_FENCE = re.compile(r'(?:<!-- readme-test: (?P<tag>[\w-]+) -->\n)?^```(?P<lang>[\w-]*)\n'
                    r'(?P<body>.*?)^```\s*$', re.S | re.M)


@dataclass(frozen=True)
class Block:
    lang: str
    tag: str
    body: str
    line: int          # where the fence opens, 1-based

    def __str__(self):
        return f'README.md:{self.line} ({self.lang}{", " + self.tag if self.tag else ""})'


def blocks(path=README, lang=None, tag=None):
    """The fenced blocks of ``path``: of one language, and of one tag ('' = untagged)."""
    text = open(path, encoding='utf-8').read()
    out = []
    for m in _FENCE.finditer(text):
        b = Block(m.group('lang'), m.group('tag') or '', m.group('body'),
                  text.count('\n', 0, m.start('lang')) + 1)
        if (lang is None or b.lang == lang) and (tag is None or b.tag == tag):
            out.append(b)
    return out


def run_python(code, env=None, timeout=120.0, cwd=None):
    """Run ``code`` in a fresh interpreter; (exit code, stdout + stderr). It runs outside
    the source tree (default: the temp folder), whose ``mujoco_hal_ros`` lacks the generated
    interfaces, so it imports the installed package as a user's script does."""
    full = dict(os.environ)
    full.update(env or {})
    full.setdefault('MUJOCO_GL', 'egl')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         timeout=timeout, env=full, cwd=cwd or tempfile.gettempdir())
    return out.returncode, out.stdout + out.stderr


def ros2_calls(block):
    """``(verb, name, type, request text)`` of every ``ros2 action send_goal`` and
    ``ros2 service call`` line of a shell block."""
    calls = []
    for line in block.body.replace('\\\n', ' ').splitlines():     # a continued line: one
        words = shlex.split(line, comments=True)
        if words[:3] == ['ros2', 'action', 'send_goal'] or words[:3] == \
                ['ros2', 'service', 'call']:
            calls.append((words[1], words[3], words[4], words[5] if len(words) > 5 else ''))
    return calls


def fill(msg, values, where='request'):
    """Set ``values`` (a dict from YAML, as ``ros2`` takes it) on message ``msg``; raises
    AssertionError naming a field the message does not have."""
    for key, value in (values or {}).items():
        assert hasattr(msg, key), f'{where} has no field {key!r}'
        current = getattr(msg, key)
        if isinstance(value, dict):
            fill(current, value, f'{where}.{key}')
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            item_type = type(msg).SLOT_TYPES[list(msg.get_fields_and_field_types()).index(key)]
            cls = _class_of(item_type.value_type)
            items = []
            for i, v in enumerate(value):
                item = cls()
                fill(item, v, f'{where}.{key}[{i}]')
                items.append(item)
            setattr(msg, key, items)
        else:
            setattr(msg, key, value)


def _class_of(namespaced):
    import importlib
    pkg, name = '.'.join(namespaced.namespaces), namespaced.name
    return getattr(importlib.import_module(pkg), name)


def interface_class(type_name):
    """``pkg/action/Name`` or ``pkg/srv/Name`` -> the generated class."""
    import importlib
    pkg, kind, name = type_name.split('/')
    return getattr(importlib.import_module(f'{pkg}.{kind}'), name)
