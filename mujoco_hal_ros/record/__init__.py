"""Keeping a run: rosbag2 folders (MCAP storage) and per-camera MP4 files."""

from .bag import BagWriter, qos_dict
from .msgdef import message_definition
from .recorder import Recorder
from .video import VideoRecorder

__all__ = ['BagWriter', 'Recorder', 'VideoRecorder', 'message_definition', 'qos_dict']
