"""start_recording / stop_recording: the node's own topics into a rosbag2 folder, and MP4s.

The node subscribes to the topics it publishes (raw, so messages stay the CDR bytes the
middleware carried; the QoS each publisher offers, so latched topics such as /tf_static
arrive too) and hands each message to a ``Recorder`` queue: writing runs on the
recorder's thread, never on physics, the state thread or an executor callback's time. A
camera's video takes the frames the camera thread has already rendered for its image
topic (``CameraPublisher.frame_hooks``), so a video costs no extra rendering. A full disk
stops the recording with an ERROR in ``diagnostics`` (``status()``, the second entry of
the node's array); the simulation runs on.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from typing import TYPE_CHECKING

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_srvs.srv import Trigger

from ...errors import ConfigError, DeviceError
from ...record import qos_dict, Recorder, VideoRecorder
from ...record.msgdef import message_definition
from ..qos import REQUEST_QOS

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.impl.rcutils_logger import RcutilsLogger
    from rclpy.node import Node
    from rclpy.subscription import Subscription

    from ...sim.device import Device
    from .cameras import CameraPublisher
    from .params import SimParams

SUBSCRIPTION_DEPTH = 1000
SKIPPED = {'/rosout', '/parameter_events'}
_RELIABILITY = {ReliabilityPolicy.RELIABLE: 'reliable',
                ReliabilityPolicy.BEST_EFFORT: 'best_effort'}
_DURABILITY = {DurabilityPolicy.TRANSIENT_LOCAL: 'transient_local',
               DurabilityPolicy.VOLATILE: 'volatile'}
_HISTORY = {HistoryPolicy.KEEP_LAST: 'keep_last', HistoryPolicy.KEEP_ALL: 'keep_all'}


def default_folder() -> str:
    """rosbag2_<date>-<time>, as ``ros2 bag record`` names its folder."""
    return time.strftime('rosbag2_%Y_%m_%d-%H_%M_%S')


def fresh_folder(base: str) -> str:
    """``base``, or ``base_2``, ``base_3``... the first that is absent or empty."""
    path, n = base, 1
    while os.path.exists(path) and os.listdir(path):
        n += 1
        path = f'{base}_{n}'
    return path


class Recording:
    """The node's recording services and diagnostics; one recording at a time."""

    def __init__(self, node: Node, device: Device, cameras: CameraPublisher, p: SimParams,
                 log: RcutilsLogger) -> None:
        self.node, self.device, self.cameras, self.p, self.log = node, device, cameras, p, log
        self.recorder: Recorder | None = None
        self.videos: dict[str, VideoRecorder] = {}     # camera channel -> VideoRecorder
        self.last_error: str | None = None
        self.last_path: str | None = None
        self._subs: list[Subscription] = []
        self._lock = threading.Lock()
        group = MutuallyExclusiveCallbackGroup()
        self._group = MutuallyExclusiveCallbackGroup()     # the subscriptions' own
        node.create_service(Trigger, 'start_recording', self._srv_start, callback_group=group,
                            qos_profile=REQUEST_QOS)
        node.create_service(Trigger, 'stop_recording', self._srv_stop, callback_group=group,
                            qos_profile=REQUEST_QOS)
        known = {s.cfg.channel for s in cameras.streams} | {s.cfg.camera for s in cameras.streams}
        unknown = sorted(set(p.record_video) - known - {'all'})
        if unknown:
            raise ConfigError(f'no camera {", ".join(unknown)}', where='parameter record_video',
                              allowed=', '.join(sorted(known | {'all'})))
        if p.record:
            self.start(p.record)

    def describe(self) -> list[str]:
        return ['start_recording', 'stop_recording']

    @property
    def recording(self) -> bool:
        return self.recorder is not None

    # --- topics -----------------------------------------------------------------------------
    def _own_topics(self):
        n = self.node
        topics = n.get_publisher_names_and_types_by_node(n.get_name(), n.get_namespace())
        return {name: types[0] for name, types in topics
                if name not in SKIPPED and '/_' not in name and types}

    def _chosen(self):
        own = self._own_topics()
        if not self.p.record_topics:
            return own
        chosen = {}
        for name in self.p.record_topics:
            full = self.node.resolve_topic_name(name)
            if full not in own:
                raise DeviceError('UNKNOWN_NAME', f'this node does not publish {full}',
                                  where='record_topics', allowed=', '.join(sorted(own)))
            chosen[full] = own[full]
        return chosen

    def _offered(self, topic):
        """Our publisher's QoS on ``topic``: (subscription QoS, rosbag2 profiles, hash)."""
        mine = [i for i in self.node.get_publishers_info_by_topic(topic)
                if i.node_name == self.node.get_name()
                and i.node_namespace == self.node.get_namespace()]
        if not mine:
            return QoSProfile(depth=SUBSCRIPTION_DEPTH), [qos_dict()], ''
        q = mine[0].qos_profile
        sub = QoSProfile(depth=SUBSCRIPTION_DEPTH, reliability=q.reliability,
                         durability=q.durability)
        profiles = [qos_dict(_HISTORY.get(i.qos_profile.history, 'unknown'),
                             i.qos_profile.depth,
                             _RELIABILITY.get(i.qos_profile.reliability, 'unknown'),
                             _DURABILITY.get(i.qos_profile.durability, 'unknown'))
                    for i in mine]
        return sub, profiles, str(mine[0].topic_type_hash or '')

    # --- start / stop -----------------------------------------------------------------------
    def start(self, folder: str | None = None) -> str:
        """Start recording into ``folder`` (default: record, else rosbag2_<time>), inside
        ``record_folder`` when the name is relative and that parameter is set."""
        with self._lock:
            if self.recorder is not None:
                return f'already recording to {self.recorder.path}'
            topics = self._chosen()
            name = folder or self.p.record or default_folder()
            if self.p.record_folder and not os.path.isabs(name):
                name = os.path.join(self.p.record_folder, name)     # make run: recordings/
            path = fresh_folder(name)
            rec = Recorder(path, max_bytes=self.p.record_max_bytes,
                           max_seconds=self.p.record_max_seconds,
                           compression=self.p.record_compression, on_error=self._on_error)
            for topic, type_name in sorted(topics.items()):
                try:
                    message_definition(type_name)
                except DeviceError as err:
                    self.log.warning(f'not recording {topic}: {err}')
                    continue
                sub_qos, profiles, type_hash = self._offered(topic)
                rec.add_topic(topic, type_name, profiles, type_hash)
                msg_type = _message_class(type_name)
                # no QoS event handlers: the executor's wait set does not survive a
                # handler destroyed under it (InvalidHandle) when stop_recording runs
                self._subs.append(self.node.create_subscription(
                    msg_type, topic, _offer_to(rec, topic), sub_qos, raw=True,
                    callback_group=self._group,
                    event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False)))
            self._start_videos(path)
            self.recorder, self.last_path, self.last_error = rec, rec.path, None
        self.log.info(f'recording {len(rec.bag.topics)} topics to {rec.path}'
                      + (f' and video of {", ".join(self.videos)}' if self.videos else ''))
        return f'recording to {rec.path}'

    def _start_videos(self, path):
        wanted = set(self.p.record_video)
        for s in self.cameras.streams:
            c = s.cfg
            if not ({'all', c.channel, c.camera} & wanted):
                continue
            video = VideoRecorder(os.path.join(path, f'{c.channel.replace("/", "_")}.mp4'),
                                  c.width, c.height, c.rate)
            self.videos[c.channel] = video
            self.cameras.frame_hooks[c.channel] = _video_hook(video)

    def stop(self) -> str | None:
        """Stop the recording, write metadata.yaml; returns the folder or None."""
        with self._lock:
            rec, self.recorder = self.recorder, None
            subs, self._subs = self._subs, []
            videos, self.videos = self.videos, {}
        if rec is None:
            return None
        for channel in videos:
            self.cameras.frame_hooks.pop(channel, None)
        for sub in subs:
            self.node.destroy_subscription(sub)
        rec.close()
        for video in videos.values():
            video.close()
            if video.error and not self.last_error:
                self.last_error = video.error
        if rec.error:
            self.last_error = rec.error
        self.log.info(f'recorded {sum(rec.counts().values())} messages to {rec.path}'
                      + (f' ({rec.dropped} dropped: the disk was slower than the topics)'
                         if rec.dropped else ''))
        return rec.path

    def _on_error(self, text):
        self.last_error = text
        self.log.error(text)

    def _srv_start(self, _req, res):
        try:
            res.message = self.start()
            res.success = res.message.startswith('recording to')
        except (DeviceError, OSError) as err:
            res.success, res.message = False, str(err)
        return res

    def _srv_stop(self, _req, res):
        path = self.stop()
        res.success = path is not None
        res.message = f'recorded to {path}' if path else 'not recording'
        return res

    # --- reporting --------------------------------------------------------------------------
    def status(self) -> DiagnosticStatus:
        """This recording's DiagnosticStatus, for the node's diagnostics array."""
        rec = self.recorder
        if rec is not None and rec.error:
            self.last_error = rec.error
        level, message = DiagnosticStatus.OK, 'not recording'
        values = {}
        if rec is not None:
            message = f'recording to {rec.path}'
            values = {'folder': rec.path, 'messages': sum(rec.counts().values()),
                      'dropped': rec.dropped}
            for channel, video in self.videos.items():
                values[f'video {channel} frames'] = video.frames_written
        elif self.last_path:
            values['last_folder'] = self.last_path
        if self.last_error:
            level, message = DiagnosticStatus.ERROR, self.last_error
        return DiagnosticStatus(level=level, name=f'{self.node.get_fully_qualified_name()}: '
                                'recording', message=message,
                                values=[KeyValue(key=k, value=str(v)) for k, v in values.items()])

    def close(self) -> None:
        self.stop()


def _offer_to(rec, topic):
    def offer(data):
        rec.offer(topic, data)
    return offer


def _video_hook(video):
    def hook(rows_up, _seconds):
        video.offer(rows_up, bottom_up=True)
    return hook


def _message_class(type_name):
    pkg, kind, name = type_name.split('/')
    return getattr(importlib.import_module(f'{pkg}.{kind}'), name)
