"""Style gate, the ruff way: the rules of pyproject.toml ([tool.ruff]), which are the ones
ament_flake8 applies (99 columns, pycodestyle, pyflakes), over the whole tree."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


def test_ruff_clean():
    pytest.importorskip('ruff', reason='ruff is not installed (it is in requirements-test.txt)')
    out = subprocess.run([sys.executable, '-m', 'ruff', 'check', '--no-cache', '--config',
                          os.path.join(ROOT, 'pyproject.toml'), ROOT, os.path.join(
                              ROOT, 'scripts', 'sim_node'), os.path.join(
                              ROOT, 'scripts', 'pool_node')],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
