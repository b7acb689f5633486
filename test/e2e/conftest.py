"""The end-to-end tests' shared fixtures: sim_node started as a process, and a client node
in this process (``test_sim_e2e.Client``) spun on a thread of its own."""

import functools

import pytest


@pytest.fixture
def start_sim(start_node):
    """``start_sim(*params, namespace=None, name='sim_node')``: see conftest's start_node."""
    return functools.partial(start_node, 'sim_node')


@pytest.fixture
def client():
    from test_sim_e2e import Client  # imports rclpy: only where a test asks for a client
    c = Client()
    yield c
    c.close()
