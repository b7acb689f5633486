"""The package's import graph: no cycle, and no import from a lower layer to a higher one.

An AST scan over ``mujoco_hal_ros/`` builds the graph of its modules and their imports,
imports inside functions and under ``TYPE_CHECKING`` included (an import that only moved
into a function is still a dependency). Every module belongs to a layer (``LAYERS``, low to
high; the longest matching prefix wins) and may import only from its own layer or lower
ones. The same table is in doc/architecture.md ("Layers"), and a test here keeps the two
the same. A new package fails ``test_every_module_has_a_layer`` until it is given one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = 'mujoco_hal_ros'

# Low to high: (layer, the modules in it as prefixes under mujoco_hal_ros; '' is the
# package's own __init__). A module may import its own layer and the ones before it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ('base', ('', 'errors', 'checks', 'menagerie', 'fastpath', 'joint_view')),
    ('config', ('config',)),
    ('description', ('description',)),
    ('parts', ('sim', 'motion', 'mobile', 'sensors', 'world', 'render', 'pool')),
    ('device', ('sim.device', 'sim.swap', 'sim.robots', 'sim.entities')),
    ('applications', ('tasks', 'conformance', 'record', 'viewer', 'dataset')),
    ('ros', ('ros',)),
    ('testing', ('testing',)),
]


# --- the graph ------------------------------------------------------------------------------
def modules(package_dir: pathlib.Path = ROOT / PACKAGE) -> dict[str, pathlib.Path]:
    """Dotted module name -> its file, for every .py file of the package."""
    out = {}
    for path in sorted(package_dir.rglob('*.py')):
        parts = list(path.relative_to(package_dir.parent).with_suffix('').parts)
        if parts[-1] == '__init__':
            parts = parts[:-1]
        out['.'.join(parts)] = path
    return out


def imports_of(name: str, path: pathlib.Path, known: Iterable[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file."""
    known = set(known)
    package = name.split('.') if path.name == '__init__.py' else name.split('.')[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                module = '.'.join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ''
            # ``from pkg import mod`` imports the module; ``from mod import name`` the module
            targets = [f'{module}.{a.name}' if f'{module}.{a.name}' in known else module
                       for a in node.names]
        for target in targets:
            named = target
            while target and target not in known:      # ``import a.b.c`` -> a.b.c's module
                target = target.rpartition('.')[0]
            if target == PACKAGE and named != PACKAGE:
                continue            # the generated interfaces (mujoco_hal_ros.msg): not here
            if target and target != name:
                out.add(target)
    return out


def import_graph(package_dir: pathlib.Path = ROOT / PACKAGE) -> dict[str, set[str]]:
    mods = modules(package_dir)
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``, or None when there is none."""
    state: dict[str, int] = {}           # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def layer_of(module: str, layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> int | None:
    """The index in ``layers`` of a dotted module name (longest prefix wins), or None."""
    rel = module[len(PACKAGE) + 1:] if module.startswith(PACKAGE + '.') else ''
    best: tuple[int, int] | None = None          # (prefix length, layer)
    for index, (_name, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if rel == prefix or (prefix and rel.startswith(prefix + '.')) or \
                    (prefix == '' and rel == ''):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    return None if best is None else best[1]


def upward(graph: Mapping[str, Iterable[str]],
           layers: list[tuple[str, tuple[str, ...]]] = LAYERS) -> list[str]:
    """Every import from a lower layer to a higher one, as 'a (layer) -> b (layer)'."""
    bad = []
    for a, targets in sorted(graph.items()):
        la = layer_of(a, layers)
        for b in sorted(targets):
            lb = layer_of(b, layers)
            if la is not None and lb is not None and lb > la:
                bad.append(f'{a} ({layers[la][0]}) -> {b} ({layers[lb][0]})')
    return bad


# --- the package ------------------------------------------------------------------------------
def test_the_graph_is_the_package():
    graph = import_graph()
    # an independent count: every .py file is one module, and a known import is an edge
    assert len(graph) == sum(1 for _ in (ROOT / PACKAGE).rglob('*.py'))
    assert 'mujoco_hal_ros.sim.stepper' in graph['mujoco_hal_ros.sim.device']
    assert 'mujoco_hal_ros.errors' in graph['mujoco_hal_ros.checks']


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, 'import cycle: ' + ' -> '.join(cycle or [])


def test_every_module_has_a_layer():
    missing = [m for m in import_graph() if layer_of(m) is None]
    assert not missing, f'give these a layer in LAYERS and doc/architecture.md: {missing}'


def test_no_import_goes_up_a_layer():
    bad = upward(import_graph())
    assert not bad, 'imports from a lower layer to a higher one:\n' + '\n'.join(bad)


def test_the_layers_are_the_documented_ones():
    """doc/architecture.md's "Layers" table lists the same layers, in the same order."""
    text = (ROOT / 'doc' / 'architecture.md').read_text()
    section = text.split('## Layers', 1)[1].split('\n## ', 1)[0]
    rows = re.findall(r'^\| *(\d+) *\| *([a-z]+) *\| *(.+?) *\|', section, re.M)
    documented = [(name, tuple(sorted(m for m in re.findall(r'`([a-z_.]*)`', mods)
                                      if m != '__init__')))
                  for _n, name, mods in rows]
    declared = [(name, tuple(sorted(p for p in prefixes if p))) for name, prefixes in LAYERS]
    assert documented == declared


# --- the checks themselves fail where they must ---------------------------------------------
def test_a_planted_cycle_is_found():
    graph = {'p.a': {'p.b'}, 'p.b': {'p.c'}, 'p.c': {'p.a'}, 'p.d': {'p.a'}}
    assert find_cycle(graph) == ['p.a', 'p.b', 'p.c', 'p.a']
    graph['p.c'] = set()
    assert find_cycle(graph) is None
    # and in the real package, one planted edge closes a cycle
    real = import_graph()
    real['mujoco_hal_ros.errors'] = set(real['mujoco_hal_ros.errors']) | {
        'mujoco_hal_ros.sim.device'}
    assert find_cycle(real) is not None


def test_a_planted_upward_import_is_found():
    real = import_graph()
    assert not upward(real)
    real['mujoco_hal_ros.world.edits'] = set(real['mujoco_hal_ros.world.edits']) | {
        'mujoco_hal_ros.sim.device'}
    assert upward(real) == ['mujoco_hal_ros.world.edits (parts) -> '
                            'mujoco_hal_ros.sim.device (device)']


def test_imports_inside_functions_count(tmp_path):
    pkg = tmp_path / PACKAGE
    (pkg / 'sub').mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'sub' / '__init__.py').write_text('')
    (pkg / 'low.py').write_text('def f():\n    from .sub import high\n    return high\n')
    (pkg / 'sub' / 'high.py').write_text(
        'from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import low\n')
    graph = import_graph(pkg)
    assert graph['mujoco_hal_ros.low'] == {'mujoco_hal_ros.sub.high'}
    assert graph['mujoco_hal_ros.sub.high'] == {'mujoco_hal_ros.low'}
    assert find_cycle(graph) is not None
    layers = [('low', ('low',)), ('high', ('sub',))]
    assert upward(graph, layers) == ['mujoco_hal_ros.low (low) -> '
                                     'mujoco_hal_ros.sub.high (high)']
