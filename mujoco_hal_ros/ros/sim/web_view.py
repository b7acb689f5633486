"""web_viewer:=<port>: the simulation in a browser, or one line saying why not."""

from ...errors import DeviceError
from ...viewer import WebViewer


def attach_web_viewer(device, p, log, title='sim_node'):
    """A started WebViewer, or None (off, or unavailable here: logged, the node runs on)."""
    if not p.web_viewer:
        return None
    viewer = WebViewer(device, title=title)
    try:
        url = viewer.start(p.web_viewer, host=p.web_viewer_host)
    except DeviceError as err:
        viewer.close()
        log.warning(f'no web viewer: {err}')
        return None
    tunnel = '' if p.web_viewer_host not in ('127.0.0.1', 'localhost', '::1') else (
        f' (from another machine: ssh -L {p.web_viewer}:localhost:{p.web_viewer} <this host>,'
        f' then open http://localhost:{p.web_viewer}/)')
    log.info(f'web viewer: {url}{tunnel}')
    return viewer
