"""WebViewer: serves the page on the asked host, follows snapshots, never holds physics."""

import socket
import sys
import time
import urllib.request

from conftest import BENCH_YAML
import pytest

from mujoco_hal_ros.errors import ClosedError, ConfigError
from mujoco_hal_ros.viewer import viewer_available, WebViewer

pytestmark = pytest.mark.skipif(not viewer_available()[0], reason=viewer_available()[1])


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def non_loopback_address():
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(('10.255.255.255', 1))     # no packet is sent: it only picks a route
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith('127.') else addr


def test_serves_the_page_on_localhost_and_follows_snapshots(open_device):
    dev = open_device(BENCH_YAML, start_paused=True)
    port = free_port()
    with WebViewer(dev) as viewer:
        url = viewer.start(port)
        assert url == viewer.url == f'http://localhost:{port}/'
        with urllib.request.urlopen(f'http://127.0.0.1:{port}/', timeout=10) as page:
            assert page.status == 200 and b'<html' in page.read().lower()
        addr = non_loopback_address()
        if addr is not None:             # bound to loopback only unless told otherwise
            with pytest.raises(OSError):
                socket.create_connection((addr, port), timeout=2).close()
        paused = dev.snapshot
        # the first frame goes out once the view's process is up, later on a loaded machine
        assert wait_for(lambda: viewer.shown is paused), 'the view never showed the device'
        time.sleep(0.3)
        assert viewer.shown is paused       # a paused device: the view stays where it is
        dev.step(50)
        assert wait_for(lambda: viewer.shown is dev.snapshot and viewer.shown is not paused)
        dev.reset()
        assert wait_for(lambda: viewer.shown is dev.snapshot)
        assert viewer.running and viewer.error is None


def test_view_follows_a_scene_edit(open_device):
    """A spawned box: the view's process switches to the new model (more qpos per frame)
    and keeps taking poses, rather than stopping on a frame of the wrong size."""
    dev = open_device(BENCH_YAML, start_paused=True)
    with WebViewer(dev) as viewer:
        viewer.start(free_port())
        assert wait_for(lambda: viewer.shown is dev.snapshot)
        before = dev.model.nq
        dev.scene.spawn('<mujoco><worldbody><body name="box" pos="0 0 0.5"><freejoint/>'
                        '<geom type="box" size="0.02 0.02 0.02"/></body></worldbody>'
                        '</mujoco>', 'crate', position=(0.3, 0.0, 0.3))
        assert dev.model.nq == before + 7
        dev.step(20)
        assert wait_for(lambda: viewer.shown is dev.snapshot), viewer.error
        assert viewer.shown.generation == dev.generation and viewer.reloads == 1
        dev.step(20)
        assert wait_for(lambda: viewer.shown is dev.snapshot), viewer.error
        time.sleep(0.3)                   # the process has read the new-size frames
        assert viewer.running and viewer.error is None


def test_physics_never_waits_for_the_view(open_device):
    dev = open_device(BENCH_YAML, start_paused=True)
    with WebViewer(dev, rate=200) as viewer:
        viewer.start(free_port())
        start = time.perf_counter()
        dev.step(2000)
        with_viewer = time.perf_counter() - start
        assert viewer.frames >= 1
    start = time.perf_counter()
    dev.step(2000)
    alone = time.perf_counter() - start
    assert with_viewer < 3 * alone + 0.5


def test_closed_viewer_refuses_to_start_and_port_is_released(open_device):
    dev = open_device(BENCH_YAML, start_paused=True)
    port = free_port()
    viewer = WebViewer(dev)
    viewer.start(port)
    viewer.close()
    viewer.close()                      # idempotent
    assert not viewer.running
    with pytest.raises(ClosedError):
        viewer.start(port)
    with WebViewer(dev) as again:       # the port is free again
        assert again.start(port).endswith(f':{port}/')


def test_taken_port_and_bad_port_say_what_to_do(open_device):
    dev = open_device(BENCH_YAML, start_paused=True)
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = taken.getsockname()[1]
        with WebViewer(dev) as viewer:
            with pytest.raises(ConfigError, match='pick another port'):
                viewer.start(port, host='127.0.0.1')
    with WebViewer(dev) as viewer:
        with pytest.raises(ConfigError, match='0..65535'):
            viewer.start(70000)


def test_without_mujoco_studio_start_raises_one_line(open_device, monkeypatch):
    dev = open_device(BENCH_YAML, start_paused=True)
    monkeypatch.setitem(sys.modules, 'mujoco.studio', None)
    ok, why = viewer_available()
    assert not ok and 'no web viewer' in why and '\n' not in why
    with WebViewer(dev) as viewer:
        with pytest.raises(ConfigError, match='no web viewer'):
            viewer.start(free_port())


def test_pool_environment_view_follows_that_environment_only():
    import mujoco
    import numpy as np

    from mujoco_hal_ros import menagerie
    from mujoco_hal_ros.pool import EnvPool
    from mujoco_hal_ros.viewer import PoolSource
    model = mujoco.MjModel.from_xml_path(menagerie.bench_arm_path())
    with EnvPool(model, 4, nthread=1) as pool:
        with pytest.raises(ConfigError, match='0..3'):
            PoolSource(pool, 4)
        source = PoolSource(pool, 2)
        first = source.snapshot
        assert source.snapshot is first         # nothing stepped: the same snapshot
        with WebViewer(source) as viewer:
            viewer.start(free_port())
            pool.step(200, env_ids=[0])          # another environment: the view stays
            time.sleep(0.2)
            assert viewer.shown is first
            pool.step(200, env_ids=[2])
            assert wait_for(lambda: viewer.shown is not first)
            row = pool.get_state([2])[0]
            assert viewer.shown.time == pytest.approx(first.time + 200 * model.opt.timestep)
            assert np.isfinite(row).all() and viewer.error is None
