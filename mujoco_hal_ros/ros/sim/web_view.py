"""web_viewer:=<port>: the simulation in a browser, or one line saying why not.

sim_node shows its Device; pool_node one environment of its pool (``web_viewer_env``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TYPE_CHECKING

from ...errors import ConfigError, DeviceError
from ...viewer import PoolSource, WebViewer

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.impl.rcutils_logger import RcutilsLogger

    from ...pool.pool import EnvPool
    from ...pool.ray_pool import RayPool
    from ...viewer.web import ViewerSource
    from .params import SimParams


def _start(source, port, host, log, title):
    viewer = WebViewer(source, title=title)
    try:
        url = viewer.start(port, host=host)
    except DeviceError as err:
        viewer.close()
        log.warning(f'no web viewer: {err}')
        return None
    tunnel = '' if host not in ('127.0.0.1', 'localhost', '::1') else (
        f' (from another machine: ssh -L {port}:localhost:{port} <this host>,'
        f' then open http://localhost:{port}/)')
    log.info(f'web viewer: {url}{tunnel}')
    return viewer


def attach_web_viewer(device: ViewerSource, p: SimParams, log: RcutilsLogger,
                      title: str = 'sim_node') -> WebViewer | None:
    """A started WebViewer, or None (off, or unavailable here: logged, the node runs on)."""
    if not p.web_viewer:
        return None
    return _start(device, p.web_viewer, p.web_viewer_host, log, title)


def attach_pool_viewer(pool: EnvPool | RayPool, params: Mapping[str, Any], log: RcutilsLogger,
                       title: str = 'pool_node') -> WebViewer | None:
    """pool_node's: ``params`` is its {name: value}; a bad environment stops the node."""
    if not params['web_viewer']:
        return None
    if not 0 <= params['web_viewer'] <= 65535:
        raise ConfigError(f'must be 0 (off) or a port 1..65535, got {params["web_viewer"]}',
                          where='parameter web_viewer')
    source = PoolSource(pool, params['web_viewer_env'])
    return _start(source, params['web_viewer'], params['web_viewer_host'], log,
                  f'{title}: environment {source.env}')
