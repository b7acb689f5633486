"""pool_node as users run it: installed executables in their own processes, over real DDS.

Scale-out beyond one pool is Ray's (``RayPool``; ``test_pool_ray_e2e`` runs pool_node over
it); what is left here is how the executable starts and refuses bad parameters.
"""

import functools

import pytest

rclpy = pytest.importorskip('rclpy')

from helpers import exit_lines  # noqa: E402


@pytest.fixture
def start_pool(start_node):
    """``start_pool(*params, namespace=None, name='pool_node')``: see conftest's start_node."""
    return functools.partial(start_node, 'pool_node')


@pytest.mark.parametrize('param, words', [
    ('nbatch:=0', 'parameter nbatch: must be 1..65536'),
    ('model:=/no/such/scene.xml', 'parameter model: file not found'),
    ('nbach:=4', 'unknown parameter nbach'),
], ids=['nbatch', 'model', 'typo'])
def test_bad_parameter_exits_with_one_clear_line(start_pool, spawn, param, words):
    proc = start_pool(param, name='bad')
    code, lines = exit_lines(spawn, proc, f'pool_node with {param}')
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith('pool_node: ') and words in lines[0]
