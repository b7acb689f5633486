"""Sizes a newcomer can read: modules and classes stay small, or say why they are one piece.

An AST scan over ``mujoco_hal_ros/``: a module over ``MAX_LINES`` lines says in its
docstring why it is one module ("Why one module"), or it is split by concept; no class has
more than ``MAX_METHODS`` public methods (properties are attributes, not counted): a class
past that has grown a second job, which belongs in a part of its own (``device.scene``,
``device.swap``...). ``sim/device.py``, the facade everybody reads first, is held under the
limit without the exception. ``PENDING`` lists what another branch of the same issue splits
(issue 41); the lead empties it at the merge.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / 'mujoco_hal_ros'
MAX_LINES = 600
MAX_METHODS = 20
MARKER = 'Why one module'
# path under mujoco_hal_ros/ -> the branch that splits it (issue 41); emptied at the merge
PENDING = {'sim/stepper.py': 'stepper', 'ros/sim/sim_interfaces.py': 'views'}
PENDING_CLASSES = {('sim/stepper.py', 'Stepper'): 'stepper'}


def _modules():
    for path in sorted(PACKAGE.rglob('*.py')):
        yield path.relative_to(PACKAGE).as_posix(), path


def public_methods(cls: ast.ClassDef) -> list[str]:
    """The public methods a class defines in its body (not properties, not dunders)."""
    out = []
    for item in cls.body:
        if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if item.name.startswith('_'):
            continue
        decorators = {d.id if isinstance(d, ast.Name) else getattr(d, 'attr', '')
                      for d in item.decorator_list}
        if decorators & {'property', 'setter', 'getter', 'deleter', 'cached_property'}:
            continue
        out.append(item.name)
    return out


def too_big_classes(tree: ast.AST) -> list[tuple[str, int]]:
    return [(node.name, len(public_methods(node))) for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and len(public_methods(node)) > MAX_METHODS]


def test_the_device_facade_is_under_the_limit():
    lines = (PACKAGE / 'sim' / 'device.py').read_text().count('\n')
    assert lines < MAX_LINES, f'sim/device.py has {lines} lines'


def test_big_modules_say_why_they_are_one_piece():
    bad = []
    for rel, path in _modules():
        text = path.read_text()
        if text.count('\n') <= MAX_LINES or rel in PENDING:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ''
        if MARKER not in doc:
            bad.append(f'{rel} ({text.count(chr(10))} lines)')
    assert not bad, (f'split these by concept, or say in the module docstring '
                     f'"{MARKER} ...": {bad}')


def test_no_class_has_more_than_twenty_public_methods():
    bad = []
    for rel, path in _modules():
        for name, count in too_big_classes(ast.parse(path.read_text())):
            if (rel, name) not in PENDING_CLASSES:
                bad.append(f'{rel}: {name} has {count}')
    assert not bad, bad


def test_the_counts_are_counted():
    """The scan sees what it must: methods yes, properties and private names no."""
    tree = ast.parse('class A:\n' + ''.join(f'    def m{i}(self): pass\n' for i in range(21))
                     + '    @property\n    def p(self): pass\n    def _q(self): pass\n')
    assert too_big_classes(tree) == [('A', 21)]
    assert len(public_methods(tree.body[0])) == 21
    tree = ast.parse('class B:\n' + ''.join(f'    def m{i}(self): pass\n' for i in range(20)))
    assert too_big_classes(tree) == []
    # and the device: its public methods are counted, its ModelState reads are not
    device = ast.parse((PACKAGE / 'sim' / 'device.py').read_text())
    cls = next(n for n in device.body if isinstance(n, ast.ClassDef) and n.name == 'Device')
    methods = public_methods(cls)
    assert 'move_to' in methods and 'snapshot' not in methods and len(methods) <= MAX_METHODS
