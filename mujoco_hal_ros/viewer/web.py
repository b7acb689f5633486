"""WebViewer: MuJoCo Studio's web viewer following a Device's snapshots.

The browser renders the scene itself (MuJoCo compiled to WebAssembly), so all this side
does is stream state. It keeps its own MjData, posed from ``device.snapshot`` (a lock-free
read of the latest published state) on its own thread: the stepper's MjData is never
touched and physics never waits for it. A paused device stops changing its snapshots, a
reset or a scene change moves them, so the view shows each as it happens.
"""

import threading

import mujoco

from ..errors import ConfigError, ClosedError

RATE_HZ = 30.0


def _studio():
    """The studio modules, or ConfigError saying how to get them."""
    try:
        from mujoco.studio import launch_thread, viewer_protocol, web_viewer
    except Exception as err:  # noqa: BLE001 - missing package or a broken native part
        raise ConfigError(f'this MuJoCo ({mujoco.__version__}) has no web viewer '
                          f'(mujoco.studio: {type(err).__name__}: {err}); '
                          'pip install "mujoco>=4" to get it', where='web_viewer') from None
    return launch_thread, viewer_protocol, web_viewer


def viewer_available():
    """(True, '') where mujoco.studio imports, else (False, the one-line reason)."""
    try:
        _studio()
    except ConfigError as err:
        return False, str(err)
    return True, ''


def _viewer_class(web_viewer):
    class _BoundViewer(web_viewer.WebViewer):
        """The studio viewer bound to the host it is given (MuJoCo 4.0 always binds '::')."""

        def __init__(self, config, endpoint, *, host, **kw):
            self._bind_host = host
            super().__init__(config, endpoint, **kw)
            self.bound_port = self._http_sock.getsockname()[1]

        @property
        def _host(self):
            return self._bind_host

        @_host.setter
        def _host(self, _ignored):
            pass
    return _BoundViewer


class WebViewer:
    """Serves a browser view of ``device`` on ``start(port, host)`` until ``close()``."""

    def __init__(self, device, *, rate=RATE_HZ, title=None):
        self.device = device
        self.rate = float(rate)
        self.title = title or 'mujoco_hal_ros'
        self._handle = None
        self._data = None
        self._thread = None
        self._stop = threading.Event()
        self._closed = False
        self._url = None
        self.error = None           # why the follower stopped, if it failed
        self.frames = 0             # states sent to the viewer

    @property
    def url(self):
        """http://host:port/ once started, else None."""
        return self._url

    @property
    def running(self):
        return self._thread is not None and self._thread.is_alive()

    def start(self, port, host='127.0.0.1'):
        """Bind ``host:port`` (0: the first free port from 8080) and start following."""
        if self._closed:
            raise ClosedError('the web viewer')
        if self._handle is not None:
            raise ConfigError(f'already serving {self._url}', where='web_viewer')
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ConfigError(f'expected a port 0..65535, got {port!r}', where='web_viewer')
        launch_thread, viewer_protocol, web_viewer = _studio()
        model = self.device.model
        viewer_cls = _viewer_class(web_viewer)
        bound = {}
        ready = threading.Event()

        def target(endpoint):
            vis = mujoco.MjvOption()
            vis.flags[mujoco.mjtVisFlag.mjVIS_CAMERA] = 1    # the cameras' frustums
            try:
                viewer = viewer_cls(viewer_protocol.ViewerConfig(
                    title=self.title, gfx='web', http_port=port), endpoint, host=host,
                    vis_options=vis)
            except BaseException as err:
                bound['error'] = err
                ready.set()
                raise
            bound['port'] = viewer.bound_port
            ready.set()
            viewer_protocol.run_viewer_loop(viewer)

        handle = launch_thread.launch_thread(target)
        ready.wait(30.0)
        if 'port' not in bound:
            err = bound.get('error')
            try:
                handle.close()
            except Exception:  # noqa: BLE001 - the bind error below is the one to report
                pass
            raise ConfigError(f'cannot serve on {host}:{port}: {err}; pick another port '
                              'or 0 for a free one', where='web_viewer')
        self._data = mujoco.MjData(model)
        self._pose(self.device.snapshot)
        handle.set_model(model, data=self._data)
        self._handle = handle
        shown = 'localhost' if host in ('127.0.0.1', '::1', 'localhost') else host
        if ':' in shown:
            shown = f'[{shown}]'
        self._url = f'http://{shown}:{bound["port"]}/'
        self._thread = threading.Thread(target=self._follow, name='web_viewer', daemon=True)
        self._thread.start()
        return self._url

    def _pose(self, snap):
        d, m = self._data, self.device.model
        d.qpos[:], d.qvel[:] = snap.qpos, snap.qvel
        d.mocap_pos[:], d.mocap_quat[:] = snap.mocap_pos, snap.mocap_quat
        d.act[:] = snap.act
        d.ctrl[:] = snap.ctrl
        d.time = snap.time
        mujoco.mj_kinematics(m, d)

    def _follow(self):
        period = 1.0 / self.rate
        last = None
        try:
            while not self._stop.wait(period):
                snap = self.device.snapshot
                if snap is not last:
                    self._pose(snap)
                    last = snap
                    self.frames += 1
                # sync also answers the browser's events (its reset and pause buttons
                # only touch this copy; the next snapshot overwrites them).
                self._handle.sync()
                if not self._handle.is_running():
                    break
        except Exception as err:  # noqa: BLE001 - the view stops, the simulation does not
            self.error = f'{type(err).__name__}: {err}'

    def close(self):
        """Stop following and serving; idempotent."""
        self._closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.close()
            except Exception:  # noqa: BLE001 - a viewer-side failure is over by now
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
