"""doc/reference/sim_node.md and pool_node.md follow the nodes themselves.

``scripts/gen_docs.py`` starts each node in-process on the bench arm and writes what it
declared (parameters with their descriptors) and created (actions, services, publishers,
subscriptions). ``--check`` must find the committed pages equal; and a page that lost a
parameter (what a parameter added without regenerating looks like) must fail the check,
naming it.
"""

import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip('rclpy')

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
GEN = os.path.join(ROOT, 'scripts', 'gen_docs.py')


def _check(*args):
    out = subprocess.run([sys.executable, GEN, '--check', *args], capture_output=True,
                         text=True, timeout=240, cwd=ROOT)
    return out.returncode, out.stdout + out.stderr


def test_node_pages_match_the_nodes():
    code, out = _check('sim_node', 'pool_node')
    assert code == 0, out


def test_a_parameter_missing_from_the_page_fails_the_check(tmp_path):
    page = os.path.join(ROOT, 'doc', 'reference', 'pool_node.md')
    shutil.copy(page, tmp_path / 'pool_node.md')
    lines = (tmp_path / 'pool_node.md').read_text().splitlines(True)
    row = next(i for i, line in enumerate(lines) if line.startswith('| `chunk_steps` |'))
    (tmp_path / 'pool_node.md').write_text(''.join(lines[:row] + lines[row + 1:]))
    code, out = _check('--out', str(tmp_path), 'pool_node')
    assert code == 1, out
    assert '+| `chunk_steps` |' in out and 'run `python scripts/gen_docs.py`' in out, out
