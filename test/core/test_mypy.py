"""Type checks: mypy as configured in pyproject.toml ([tool.mypy]: the whole
``mujoco_hal_ros`` package, no half-annotated signature) finds nothing, and every public
function of every package says what it takes and returns, so mypy has hints to check (mypy
skips the body of a function without any)."""

import ast
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
PACKAGE = pathlib.Path(ROOT, 'mujoco_hal_ros')
# every sub-package, and the top-level modules ('.'): a new package is checked from its start
HINTED = ('.',) + tuple(sorted(p.name for p in PACKAGE.iterdir()
                               if (p / '__init__.py').is_file()))


def test_mypy_clean(tmp_path_factory):
    pytest.importorskip('mypy', reason='mypy is not installed (it is in requirements-test.txt)')
    cache = os.path.join(os.environ.get('MUJOCO_HAL_ROS_CACHE', os.path.expanduser(
        os.path.join('~', '.cache', 'mujoco_hal_ros'))), 'mypy')
    out = subprocess.run([sys.executable, '-m', 'mypy', '--config-file',
                          os.path.join(ROOT, 'pyproject.toml'), '--cache-dir', cache],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


def _public_functions(tree):
    """(name, node) of module functions and methods of public classes, not starting with _."""
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield top.name, top
        elif isinstance(top, ast.ClassDef) and not top.name.startswith('_'):
            for item in top.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f'{top.name}.{item.name}', item


def _missing_hints(fn):
    args = fn.args
    params = args.posonlyargs + args.args + args.kwonlyargs
    if params and params[0].arg in ('self', 'cls'):
        params = params[1:]
    missing = [p.arg for p in params if p.annotation is None]
    for star in (args.vararg, args.kwarg):
        if star is not None and star.annotation is None:
            missing.append(f'*{star.arg}')
    if fn.returns is None and fn.name != '__init__':
        missing.append('return')
    return missing


@pytest.mark.parametrize('package', HINTED)
def test_public_functions_carry_type_hints(package):
    bad = []
    for path in sorted(PACKAGE.glob('*.py') if package == '.'
                       else pathlib.Path(PACKAGE, package).rglob('*.py')):
        tree = ast.parse(path.read_text(encoding='utf-8'))
        for name, fn in _public_functions(tree):
            if name.split('.')[-1].startswith('_') and name.split('.')[-1] != '__init__':
                continue
            missing = _missing_hints(fn)
            if missing:
                bad.append(f'{path.relative_to(PACKAGE)}:{fn.lineno} {name}: '
                           f'{", ".join(missing)}')
    assert not bad, (f'{len(bad)} public functions of mujoco_hal_ros/{package} without type '
                     'hints (parameters, return):\n' + '\n'.join(bad))
