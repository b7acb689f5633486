"""WebViewer: MuJoCo Studio's web viewer following a Device's snapshots.

The browser renders the scene itself (MuJoCo compiled to WebAssembly), so all this side
does is stream state. A thread here reads ``device.snapshot`` (a lock-free read of the
latest published state) and writes the pose into a pipe to the viewer's own process
(``serve.py``), which poses its own MjData and serves the page: the stepper's MjData is
never touched, and a full pipe drops a frame rather than wait, so physics never waits for
the view. A paused device stops changing its snapshots; a reset moves them, so the view
shows it as it happens; a scene edit (a snapshot of a new ``generation``) sends the new
model to the view's process first, which switches to it in place.
"""

import errno
import os
import subprocess
import sys
import tempfile
import threading
from typing import Any, Protocol

import mujoco
import numpy as np

from ..errors import ClosedError, ConfigError
from . import serve

RATE_HZ = 30.0
START_TIMEOUT_S = 60.0


def _studio_missing():
    """The one-line reason this MuJoCo has no web viewer, or None."""
    try:
        from mujoco.studio import launch_thread, viewer_protocol, web_viewer  # noqa: F401
    except Exception as err:  # noqa: BLE001 - missing package or a broken native part
        return (f'this MuJoCo ({mujoco.__version__}) has no web viewer (mujoco.studio: '
                f'{type(err).__name__}: {err}); pip install "mujoco>=4" to get it')
    return None


def viewer_available() -> tuple[bool, str]:
    """(True, '') where mujoco.studio imports, else (False, the one-line reason)."""
    why = _studio_missing()
    return why is None, why or ''


class ViewerSource(Protocol):
    """What the viewer reads: a Device, or one environment of a pool (``PoolSource``)."""

    @property
    def model(self) -> mujoco.MjModel: ...

    @property
    def snapshot(self) -> Any: ...   # time, qpos, mocap_pos, mocap_quat, generation


class WebViewer:
    """Serves a browser view of ``device`` on ``start(port, host)`` until ``close()``.

    ``device``: anything with ``model`` and a ``snapshot`` (time, qpos, qvel, act, mocap_pos,
    mocap_quat): a Device, or one environment of a pool (``PoolSource``)."""

    def __init__(self, device: ViewerSource, *, rate: float = RATE_HZ, title: str | None = None):
        self.device = device
        self.rate = float(rate)
        self.title = title or 'mujoco_hal_ros'
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._closed = False
        self._url: str | None = None
        self._tmp: str | None = None
        self.error: str | None = None    # why the view stopped, if it did
        self.frames = 0             # snapshots sent to the view
        self.dropped = 0            # frames not sent because the view was busy
        self.reloads = 0            # scene edits the view followed
        self.shown = None           # the Snapshot sent last

    @property
    def url(self) -> str | None:
        """http://host:port/ once started, else None."""
        return self._url

    @property
    def running(self) -> bool:
        return (self._thread is not None and self._thread.is_alive()
                and self._proc is not None and self._proc.poll() is None)

    def start(self, port: int, host: str = '127.0.0.1') -> str:
        """Bind ``host:port`` (0: the first free port from 8080) and start following."""
        if self._closed:
            raise ClosedError('the web viewer')
        if self._proc is not None:
            raise ConfigError(f'already serving {self._url}', where='web_viewer')
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ConfigError(f'expected a port 0..65535, got {port!r}', where='web_viewer')
        why = _studio_missing()
        if why is not None:
            raise ConfigError(why, where='web_viewer')
        self._tmp = tempfile.mkdtemp(prefix='mujoco_hal_ros_viewer_')
        mjb = os.path.join(self._tmp, 'model.mjb')
        self._generation = getattr(self.device.snapshot, 'generation', 0)
        self._model = self.device.model
        mujoco.mj_saveModel(self._model, mjb, None)
        self._frame_size = serve.frame_size(self._model)
        proc = subprocess.Popen([sys.executable, serve.__file__, mjb, host, str(port),
                                 self.title], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = _read_line(proc.stdout, START_TIMEOUT_S)
        if not line.startswith('PORT '):
            proc.kill()
            proc.wait()
            self._cleanup()
            why = line[6:] if line.startswith('ERROR ') else \
                f'the viewer process ended ({line or "no answer"})'
            raise ConfigError(f'cannot serve on {host}:{port}: {why}; pick another port or '
                              '0 for a free one', where='web_viewer')
        assert proc.stdout is not None and proc.stdin is not None   # PIPE both
        proc.stdout.close()
        os.set_blocking(proc.stdin.fileno(), False)
        self._proc = proc
        shown = 'localhost' if host in ('127.0.0.1', '::1', 'localhost') else host
        if ':' in shown:
            shown = f'[{shown}]'
        self._url = f'http://{shown}:{int(line.split()[1])}/'
        self._thread = threading.Thread(target=self._follow, name='web_viewer', daemon=True)
        self._thread.start()
        return self._url

    def _reload(self, snap):
        """A scene edit swapped the device's model: save the new one where the view's
        process finds it and the record that makes it switch (``serve.reload_record``)."""
        generation = snap.generation
        model = self.device.cameras.model_of(generation)
        if self._frame_size < 2:
            raise ConfigError('the view cannot switch from a model without any state; '
                              'restart the web viewer', where='web_viewer')
        path = os.path.join(self._tmp, f'model-{generation}.mjb')
        mujoco.mj_saveModel(model, path + '.part', None)
        os.replace(path + '.part', path)
        record = serve.reload_record(self._model, generation)
        self._model, self._generation = model, generation
        self._frame_size = serve.frame_size(model)
        self.reloads += 1
        return record

    def _frame(self, snap):
        frame = np.concatenate([[snap.time], snap.qpos, snap.qvel, snap.act,
                                np.ravel(snap.mocap_pos), np.ravel(snap.mocap_quat)]
                               ).astype(np.float64)
        if frame.size != self._frame_size:     # another model: the view would show nonsense
            raise ConfigError(f'the state no longer fits the model the view was started with '
                              f'({frame.size} numbers, not {self._frame_size}); restart the '
                              'web viewer', where='web_viewer')
        return frame.tobytes()

    def _follow(self) -> None:
        period = 1.0 / self.rate
        assert self._proc is not None and self._proc.stdin is not None   # started first
        fd = self._proc.stdin.fileno()
        last = None
        pending = b''
        # ``keep``: ``pending`` must go out whole (part of it is written, or it carries a
        # reload record); otherwise a newer pose may replace it.
        keep = False
        try:
            while not self._stop.wait(period):
                snap = self.device.snapshot
                if snap is not last and not keep:
                    if getattr(snap, 'generation', 0) != self._generation:
                        pending, last, keep = pending + self._reload(snap), None, True
                    else:
                        if pending:         # the view is behind: the newest pose wins
                            self.dropped += 1
                        pending, last = self._frame(snap), snap
                if not pending:
                    continue
                try:
                    sent = os.write(fd, pending)
                except BlockingIOError:
                    continue
                pending = pending[sent:]
                keep = bool(pending) and (keep or sent > 0)
                if not pending and last is not None:
                    self.shown = last
                    self.frames += 1
        except OSError as err:
            if not self._stop.is_set():
                self.error = (f'the web viewer process ended ({os.strerror(err.errno)})'
                              if err.errno == errno.EPIPE else f'{type(err).__name__}: {err}')
        except Exception as err:  # noqa: BLE001 - a closed source: the view stops, not the node
            if not self._stop.is_set():
                self.error = f'{type(err).__name__}: {err}'

    def _cleanup(self) -> None:
        if self._tmp is not None:
            for name in os.listdir(self._tmp):
                os.unlink(os.path.join(self._tmp, name))
            os.rmdir(self._tmp)
            self._tmp = None

    def close(self) -> None:
        """Stop following and serving; idempotent."""
        self._closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()         # the viewer exits at end of input
            except OSError:
                pass
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_line(stream, timeout):
    """One line from a child's stdout, or '' if none comes within ``timeout``."""
    got = []
    thread = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    thread.start()
    thread.join(timeout)
    return got[0].decode(errors='replace').strip() if got else ''
