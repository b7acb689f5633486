"""web_viewer on sim_node and pool_node: served where asked, one line and running where not."""

import socket
import sys
import urllib.request

import pytest

rclpy = pytest.importorskip('rclpy')

from rclpy.parameter import Parameter  # noqa: E402

from mujoco_hal_ros.errors import ConfigError  # noqa: E402
from mujoco_hal_ros.ros.pool.pool_node import PoolNode  # noqa: E402
from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402  (sets headless GL first)
from mujoco_hal_ros.viewer import viewer_available  # noqa: E402

pytestmark = pytest.mark.skipif(not viewer_available()[0], reason=viewer_available()[1])


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def make(cls, ctx, **overrides):
    return cls(context=ctx, parameter_overrides=[Parameter(k, value=v)
                                                 for k, v in overrides.items()])


def page(url):
    with urllib.request.urlopen(url.replace('localhost', '127.0.0.1'), timeout=10) as r:
        return r.status


def test_sim_node_serves_the_page(ctx):
    port = free_port()
    node = make(SimNode, ctx, web_viewer=port)
    try:
        assert node.viewer.url == f'http://localhost:{port}/' and page(node.viewer.url) == 200
    finally:
        node.destroy_node()
    assert node.viewer is None
    with pytest.raises(OSError):              # closed with the node
        socket.create_connection(('127.0.0.1', port), timeout=2).close()


def test_sim_node_without_studio_says_so_and_runs(ctx, monkeypatch, capfd):
    monkeypatch.setitem(sys.modules, 'mujoco.studio', None)
    node = make(SimNode, ctx, web_viewer=free_port())
    try:
        assert node.viewer is None and node.device.snapshot is not None
    finally:
        node.destroy_node()
    lines = [ln for ln in capfd.readouterr().err.splitlines() if 'no web viewer' in ln]
    assert len(lines) == 1 and 'pip install' in lines[0]


def test_sim_node_refuses_a_bad_port(ctx):
    with pytest.raises(ConfigError, match='web_viewer'):
        make(SimNode, ctx, web_viewer=70000)


def test_pool_node_shows_one_environment(ctx):
    port = free_port()
    node = make(PoolNode, ctx, nbatch=4, nthread=1, web_viewer=port, web_viewer_env=3)
    try:
        assert page(node.viewer.url) == 200
    finally:
        node.destroy_node()
    with pytest.raises(ConfigError, match='0..3'):
        make(PoolNode, ctx, nbatch=4, nthread=1, web_viewer=free_port(), web_viewer_env=4)
