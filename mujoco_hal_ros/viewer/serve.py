"""The web viewer's own process: MuJoCo Studio's server, posed from states on stdin.

Run by ``WebViewer`` as ``python serve.py MODEL.mjb HOST PORT TITLE``; imports only MuJoCo
and NumPy so it needs no ROS environment. A process of its own because the studio's
headless UI cannot be created twice in one process (a second viewer crashes it), and so
the viewer's Python never competes with the simulation for the GIL. Its stdout is the
protocol, so the studio's own prints go to /dev/null. It prints ``PORT n``
(or ``ERROR text``) on stdout once bound, then reads fixed-size float64 frames (time, qpos,
qvel, act, mocap_pos, mocap_quat) from stdin, keeps the newest, and shows it, or switches
to a scene's next model on a reload record; it exits when stdin closes, i.e. when its
parent does.
"""

import os
import signal
import sys
import threading
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:     # the hints only: this process imports mujoco once it is asked to serve
    import mujoco
    import numpy as np

RATE_HZ = 30.0


def frame_size(m: 'mujoco.MjModel') -> int:
    return 1 + m.nq + m.nv + m.na + 7 * m.nmocap


def reload_record(m: 'mujoco.MjModel', generation: int) -> bytes:
    """The record that tells the view to load ``model-<generation>.mjb``, sized for ``m``,
    the model it shows now: a time of NaN, which no pose has."""
    import numpy as np
    record = np.zeros(frame_size(m))
    record[0], record[1] = np.nan, generation
    return record.tobytes()


def load(m: 'mujoco.MjModel', d: 'mujoco.MjData', frame: 'np.ndarray') -> None:
    import mujoco
    i = 1
    d.time = frame[0]
    for arr, n in ((d.qpos, m.nq), (d.qvel, m.nv), (d.act, m.na)):
        arr[:] = frame[i:i + n]
        i += n
    d.mocap_pos[:] = frame[i:i + 3 * m.nmocap].reshape(-1, 3)
    i += 3 * m.nmocap
    d.mocap_quat[:] = frame[i:i + 4 * m.nmocap].reshape(-1, 4)
    mujoco.mj_kinematics(m, d)


def framing_camera(m: 'mujoco.MjModel', d: 'mujoco.MjData') -> 'mujoco.MjvCamera':
    """A free camera on the model's bodies: MuJoCo's default frames the whole extent, and a
    large floor leaves a small robot a few pixels in the middle of it."""
    import mujoco
    import numpy as np
    cam = mujoco.MjvCamera()
    mujoco.mjv_defaultFreeCamera(m, cam)
    if m.nbody > 1:
        pos = d.xpos[1:]
        center = pos.mean(axis=0)
        radius = float(np.linalg.norm(pos - center, axis=1).max()) + float(m.stat.meansize)
        cam.lookat[:] = center
        cam.distance = min(float(cam.distance), max(4.0 * radius, 0.3))
    return cam


def first_free_port(host: str, start: int = 8080, count: int = 100) -> int:
    """The first port from ``start`` that ``host`` can bind, as the studio picks for 0 (here,
    so this side knows which one it took)."""
    import socket
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    for port in range(start, start + count):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    return 0


def bound_viewer_class(web_viewer: Any) -> type:
    class BoundViewer(web_viewer.WebViewer):
        """The studio viewer bound to the host it is given (MuJoCo 4.0 always binds '::')."""

        def __init__(self, config, endpoint, *, host, **kw):
            self._bind_host = host
            super().__init__(config, endpoint, **kw)

        @property
        def _host(self):
            return self._bind_host

        @_host.setter
        def _host(self, _ignored: object) -> None:
            pass
    return BoundViewer


def main(argv: list[str]) -> int:
    mjb_path, host, port, title = argv[1], argv[2], int(argv[3]), argv[4]
    port = port or first_free_port(host)
    # Ctrl-C reaches the whole process group; the parent ends this one by closing stdin
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = sys.stdout
    sys.stdout = open(os.devnull, 'w')         # the studio's prints are not our protocol
    import mujoco
    from mujoco.studio import launch_thread, viewer_protocol, web_viewer
    import numpy as np
    m = mujoco.MjModel.from_binary_path(mjb_path)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    viewer_cls = bound_viewer_class(web_viewer)
    bound = {}
    ready = threading.Event()

    def target(endpoint):
        vis = mujoco.MjvOption()
        vis.flags[mujoco.mjtVisFlag.mjVIS_CAMERA] = 1        # the cameras' frustums
        try:
            viewer = viewer_cls(viewer_protocol.ViewerConfig(title=title, gfx='web',
                                                             http_port=port),
                                endpoint, host=host, vis_options=vis,
                                camera=framing_camera(m, d))
        except BaseException as err:
            bound['error'] = f'{type(err).__name__}: {err}'
            ready.set()
            raise
        bound['port'] = port
        ready.set()
        viewer_protocol.run_viewer_loop(viewer)

    handle = launch_thread.launch_thread(target)
    ready.wait(60.0)
    if 'port' not in bound:
        out.write(f'ERROR {bound.get("error", "the viewer did not start")}\n')
        out.flush()
        return 1
    handle.set_model(m, data=d)
    out.write(f'PORT {bound["port"]}\n')
    out.flush()

    state: dict[str, Any] = {'size': 8 * frame_size(m), 'frame': None, 'model': None}
    done = threading.Event()

    def read() -> None:
        """Records in order: a pose (the newest wins), or a reload (``reload_record``):
        the parent saved the next scene's model beside the first; frames after it are of
        that model's size."""
        stdin = open(sys.stdin.fileno(), 'rb', buffering=0, closefd=False)
        buf = b''
        while True:
            chunk = stdin.read(65536)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= state['size']:
                record = np.frombuffer(buf[:state['size']], np.float64).copy()
                buf = buf[state['size']:]
                if np.isnan(record[0]):
                    path = os.path.join(os.path.dirname(mjb_path),
                                        f'model-{int(record[1])}.mjb')
                    new = mujoco.MjModel.from_binary_path(path)
                    state['size'] = 8 * frame_size(new)
                    state['model'], state['frame'] = new, None
                else:
                    state['frame'] = record
        done.set()

    threading.Thread(target=read, daemon=True).start()
    while not done.wait(1.0 / RATE_HZ):
        swapped, state['model'] = state['model'], None
        if swapped is not None:
            m, d = swapped, mujoco.MjData(swapped)
            mujoco.mj_forward(m, d)
            handle.set_model(m, data=d)
        frame, state['frame'] = state['frame'], None
        if frame is not None and frame.size == frame_size(m):
            load(m, d, frame)
        handle.sync()
        if not handle.is_running():
            break
    handle.close()
    return 0


if __name__ == '__main__':
    code = main(sys.argv)
    sys.stderr.flush()
    os._exit(code)      # the studio's daemon threads hold sockets open: do not wait on them
