"""sim_node's dataset services: recording the device to LeRobot datasets, and replay.

``start_dataset`` (``StartDataset``), ``save_episode``, ``discard_episode``,
``stop_dataset`` and ``dataset_status`` (``DatasetEpisode``) translate to one
``dataset.recorder.DatasetRecorder`` a robot (the whole device is the robot ''), and
``replay_episode`` (``ReplayEpisode``) to ``dataset.replay.replay_episode``. Several robots
of one world record side by side, one dataset each, or together in one dataset with
prefixed names (``robots``).

Why workers of their own: saving an episode waits for its frames to be rendered and encoded,
and a replay lasts its episode; the bridge's one worker carries every other request's
device call, which must not queue behind them. The dataset calls go to one worker (they are
short and must keep their order), the replays to another; the coroutines await them.

Folders are a peer's request to write (or read) on this machine: they resolve under the
node's ``dataset_root`` (default: ``record_folder``, else the working directory), and one
that leads outside it is refused FORBIDDEN before anything is touched.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import os
import threading
from typing import TYPE_CHECKING

from rclpy.callback_groups import ReentrantCallbackGroup

from ...dataset.recorder import DatasetRecorder
from ...errors import BUSY, CLOSED, DeviceError, DONE, FORBIDDEN, INVALID_ARGUMENT
from ...srv import DatasetEpisode, ReplayEpisode, StartDataset
from .. import conversions as cv
from ..qos import REQUEST_QOS

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.node import Node

    from ...sim.device import Device
    from ..bridge import CompletionBridge
    from .params import SimParams


def dataset_root(p: SimParams) -> str:
    """The folder datasets go under: ``dataset_root``, else ``record_folder``, else the
    working directory (absolute, links resolved)."""
    root = getattr(p, 'dataset_root', '') or getattr(p, 'record_folder', '') or os.getcwd()
    return os.path.realpath(os.path.expanduser(root))


def resolve_folder(root: str, folder: object, where: str = 'folder') -> str:
    """``folder`` under ``root``; FORBIDDEN when it leads outside (``..``, an absolute path
    elsewhere, a link out), INVALID_ARGUMENT when empty."""
    if not isinstance(folder, str) or not folder.strip():
        raise DeviceError(INVALID_ARGUMENT, 'name the dataset folder', where=where)
    path = os.path.realpath(os.path.join(root, os.path.expanduser(folder)))
    if path != root and not path.startswith(root + os.sep):
        raise DeviceError(FORBIDDEN, f'{folder!r} is outside this node\'s dataset_root '
                          f'{root}; nothing was changed', where=where,
                          allowed=f'a folder under {root}')
    return path


class DatasetServices:
    """The dataset services over one Device."""

    def __init__(self, node: Node, device: Device, bridge: CompletionBridge,
                 p: SimParams) -> None:
        # p: the node's checked parameters (dataset_root, record_folder)
        self.node, self.device, self.bridge = node, device, bridge
        self.root = dataset_root(p)
        self._lock = threading.Lock()
        self._datasets: dict[str, DatasetRecorder] = {}   # robot key -> DatasetRecorder
        self._starting: set[str] = set()   # keys being started (a second start is BUSY)
        self._replaying = False
        self._closed = False
        self._calls = ThreadPoolExecutor(1, thread_name_prefix='sim_node-dataset')
        self._replays = ThreadPoolExecutor(1, thread_name_prefix='sim_node-replay')
        group = ReentrantCallbackGroup()
        table = ((StartDataset, 'start_dataset', self._start),
                 (DatasetEpisode, 'save_episode', self._save),
                 (DatasetEpisode, 'discard_episode', self._discard),
                 (DatasetEpisode, 'stop_dataset', self._stop),
                 (DatasetEpisode, 'dataset_status', self._status),
                 (ReplayEpisode, 'replay_episode', self._replay))
        self._services = [node.create_service(t, n, cb, callback_group=group,
                                              qos_profile=REQUEST_QOS)
                          for t, n, cb in table]

    @staticmethod
    def describe() -> list[str]:
        return ['start_dataset', 'save_episode', 'discard_episode', 'stop_dataset',
                'dataset_status', 'replay_episode']

    async def _on(self, pool, resp, fn, fill):
        try:
            value = await self.bridge.wrap(pool.submit(fn))
        except Exception as exc:  # noqa: BLE001 - every refusal goes back in the response
            return cv.refuse(resp, exc)
        if value is None:                # the node shut down meanwhile
            return cv.refuse(resp, DeviceError(CLOSED, 'sim_node is shutting down'))
        resp.success, resp.code = True, DONE
        fill(resp, value)
        return resp

    # --- start ----------------------------------------------------------------------------
    @staticmethod
    def _key(robot, robots):
        return ','.join(robots) if robots else robot

    async def _start(self, req, resp):
        robots = [r for r in req.robots]
        robot = req.robot
        if robot and robots:
            return cv.refuse(resp, DeviceError(INVALID_ARGUMENT, 'name one robot, or several '
                                               'in robots, not both', where='robot'))
        key = self._key(robot, robots)
        try:
            folder = resolve_folder(self.root, req.folder)
        except DeviceError as exc:
            return cv.refuse(resp, exc)
        with self._lock:
            if self._closed:
                return cv.refuse(resp, DeviceError(CLOSED, 'sim_node is shutting down'))
            taken = key in self._datasets or key in self._starting
            if not taken:
                self._starting.add(key)
        if taken:
            return cv.refuse(resp, DeviceError(
                BUSY, f'a dataset is already recording {key or "the device"} '
                f'({self._datasets[key].root if key in self._datasets else "starting"}); '
                'nothing was changed: stop_dataset first', where='start_dataset'))
        size = (int(req.width), int(req.height)) if req.width or req.height else None
        repo_id = req.repo_id or f'local/{os.path.basename(folder)}'

        def start():
            return DatasetRecorder(self.device, folder, repo_id=repo_id, fps=req.fps,
                                   task=req.task, cameras=list(req.cameras), image_size=size,
                                   robot=robots or robot or None,
                                   velocities=bool(req.velocities))
        try:
            rec = await self.bridge.wrap(self._calls.submit(start))
        except Exception as exc:  # noqa: BLE001 - the refusal goes back in the response
            return cv.refuse(resp, exc)
        finally:
            with self._lock:
                self._starting.discard(key)
        with self._lock:
            closed = self._closed
            if not closed:
                self._datasets[key] = rec
        if closed:
            self._calls.submit(rec.close)
            return cv.refuse(resp, DeviceError(CLOSED, 'sim_node is shutting down'))
        resp.success, resp.code, resp.folder = True, DONE, rec.root
        resp.message = (f'recording {key or "the device"} to {rec.root} at {rec.fps:g} fps: '
                        f'{len(rec.state_names)} state, {len(rec.action_names)} action columns'
                        + (f', cameras {", ".join(rec.cameras)}' if rec.cameras else ''))
        self.node.get_logger().info(resp.message)
        return resp

    # --- the running datasets -----------------------------------------------------------
    def _find(self, robot, what):
        with self._lock:
            if robot in self._datasets:
                return robot, self._datasets[robot]
            if not robot and len(self._datasets) == 1:
                return next(iter(self._datasets.items()))
            running = sorted(k or '(the device)' for k in self._datasets)
        raise DeviceError(INVALID_ARGUMENT, f'{what}: no dataset is recording '
                          f'{robot or "the device"}; nothing was changed'
                          + (f' (recording: {", ".join(running)})' if running
                             else ': start_dataset first'), where='robot')

    @staticmethod
    def _fill_status(resp, st):
        resp.folder = st['folder']
        resp.recording = bool(st['recording'])
        resp.episode = int(st['episode'])
        resp.frames = int(st['frames'])
        resp.episodes = int(st['episodes'])
        resp.dropped = int(st['dropped'])
        resp.skipped = int(st['skipped'])

    async def _save(self, req, resp):
        try:
            _key, rec = self._find(req.robot, 'save_episode')
        except DeviceError as exc:
            return cv.refuse(resp, exc)

        def fill(r, out):
            self._fill_status(r, rec.status())
            r.episode, r.frames = int(out['episode']), int(out['frames'])
            r.dropped, r.skipped = int(out['dropped']), int(out['skipped'])
            r.message = (f'episode {out["episode"]} saved: {out["frames"]} frames'
                         + (f', {out["dropped"]} dropped' if out['dropped'] else '')
                         + (f', {out["skipped"]} skipped' if out['skipped'] else ''))
        return await self._on(self._calls, resp,
                              lambda: rec.save_episode(req.task or None), fill)

    async def _discard(self, req, resp):
        try:
            _key, rec = self._find(req.robot, 'discard_episode')
        except DeviceError as exc:
            return cv.refuse(resp, exc)

        def fill(r, out):
            self._fill_status(r, rec.status())
            r.frames = int(out['frames'])
            r.message = f'episode discarded ({out["frames"]} frames); the next has started'
        return await self._on(self._calls, resp, rec.discard_episode, fill)

    async def _stop(self, req, resp):
        try:
            key, rec = self._find(req.robot, 'stop_dataset')
        except DeviceError as exc:
            return cv.refuse(resp, exc)
        with self._lock:
            if self._datasets.get(key) is not rec:
                return cv.refuse(resp, DeviceError(INVALID_ARGUMENT, 'stop_dataset: already '
                                                   'stopped', where='robot'))
            del self._datasets[key]           # a second stop finds none

        def fill(r, out):
            self._fill_status(r, rec.status())
            r.recording = False
            r.frames = int(out['discarded_frames'])
            r.message = (f'{out["folder"]} finalised: {out["episodes"]} episodes'
                         + (f'; the episode in progress ({out["discarded_frames"]} frames) was '
                            'discarded' if out['discarded_frames'] else ''))
        return await self._on(self._calls, resp, rec.stop, fill)

    async def _status(self, req, resp):
        try:
            _key, rec = self._find(req.robot, 'dataset_status')
        except DeviceError as exc:
            return cv.refuse(resp, exc)
        st = rec.status()
        resp.success, resp.code = True, DONE
        self._fill_status(resp, st)
        resp.message = (f'{st["folder"]}: episode {st["episode"]}, {st["frames"]} frames so '
                        f'far, {st["episodes"]} saved'
                        + (f'; error: {st["error"]}' if st['error'] else ''))
        return resp

    # --- replay ------------------------------------------------------------------------------
    async def _replay(self, req, resp):
        from ...dataset.replay import replay_episode
        try:
            folder = resolve_folder(self.root, req.folder)
        except DeviceError as exc:
            return cv.refuse(resp, exc)
        with self._lock:
            busy, self._replaying = self._replaying, True
        if busy:
            return cv.refuse(resp, DeviceError(BUSY, 'a replay is already running; nothing was '
                                               'changed', where='replay_episode'))
        robot = list(req.robots) or req.robot or None

        def run():
            try:
                return replay_episode(self.device, folder, int(req.episode),
                                      lockstep=bool(req.lockstep), robot=robot,
                                      progress=lambda _k, _n: not self._closed)
            finally:
                with self._lock:
                    self._replaying = False

        def fill(r, report):
            r.frames = int(report.frames)
            r.exact = bool(report.exact)
            r.max_divergence = float(report.max_divergence)
            r.worst_frame = int(report.worst_frame)
            r.divergence = [float(v) for v in report.divergence]
            r.message = (f'episode {report.episode}: {report.frames} frames replayed '
                         f'({"lockstep" if report.lockstep else "real time"}), '
                         + ('every state bit for bit' if report.exact else
                            f'largest divergence {report.max_divergence:.3g} at frame '
                            f'{report.worst_frame}'))
        return await self._on(self._replays, resp, run, fill)

    # --- lifetime ------------------------------------------------------------------------
    def close(self) -> None:
        """Shutdown: every dataset stops (its episode in progress discarded, finalised)."""
        with self._lock:
            self._closed = True
            datasets, self._datasets = list(self._datasets.values()), {}
        for rec in datasets:
            try:
                rec.close()
            except DeviceError as exc:
                self.node.get_logger().error(f'dataset {rec.root}: {exc}')
        self._calls.shutdown(wait=False)
        self._replays.shutdown(wait=False)

    def destroy(self) -> None:
        self.close()
        for srv in self._services:
            self.node.destroy_service(srv)
        self._services = []
