"""sim_node parameters: one table, declared once each, read into a checked ``SimParams``.

The table is the single place that knows a parameter's type, default and meaning, so the
node, ``launch_args`` and the tests cannot drift apart. Validation raises ``ConfigError``
with ``where='parameter <name>'``: ``main()`` prints that as one line and exits non-zero,
which is what a user who mistyped a value needs, rather than a traceback.
"""

from dataclasses import dataclass, field
import math
import os

from ...errors import ConfigError

# name: (type, default, description). Types are the ROS parameter types by name.
TABLE = {
    'device_file': ('string', '', 'Device file (YAML). Empty with an empty model: the built-in '
                    'bench arm with config/bench_arm.yaml.'),
    'model': ('string', '', 'MJCF path. Overrides the model the device file names; with no '
              'device file the device is built zero-config from the model.'),
    'keyframe': ('string', '', 'Keyframe to start from and reset to (empty: the device '
                 "file's, else none)."),
    'real_time_factor': ('double', 1.0, 'Simulated seconds per wall second; 0 runs as fast as '
                         'possible.'),
    'start_paused': ('bool', False, 'Start with physics paused (use the pause/step services).'),
    'publish_rate': ('double', 100.0, 'joint_states and /clock rate in Hz (wall clock).'),
    'tf_rate': ('double', 100.0, '/tf rate in Hz (wall clock); at most publish_rate.'),
    'frame_prefix': ('string', 'auto', 'Prefix for every TF frame this node names except '
                     'world_frame (e.g. "arm1/"). auto: "<namespace>/" in a namespace, so '
                     'instances side by side never share a frame; none at the root. Empty: '
                     'none.'),
    'world_frame': ('string', 'world', 'The fixed frame every body is published against.'),
    'publish_clock': ('bool', True, 'Publish /clock from simulated time; with several '
                      'instances set it true on exactly one.'),
    'camera_rate': ('double', 10.0, 'Image rate in Hz for every camera without its own '
                    'cameras.<name>.rate.'),
    'camera_width': ('integer', 0, "Image width for every camera; 0 keeps the device file's."),
    'camera_height': ('integer', 0, "Image height for every camera; 0 keeps the device "
                      "file's."),
    'camera_background': ('string', 'auto', 'Render cameras on CPU time nothing else wants '
                          '(Linux SCHED_IDLE software rasterisers), so frames never delay '
                          'physics, joint_states or their subscribers: true always, false '
                          'never (more frames on a busy machine), auto until a watched camera '
                          'falls behind its rate, where the state publisher runs at '
                          'SCHED_FIFO (thread_priority) and so needs no such protection.'),
    'thread_priority': ('integer', 50, 'SCHED_FIFO priority (1..99) for the thread that '
                        'publishes joint_states, /tf and /clock, as ros2_control\'s '
                        'controller_manager gives its update loop (50 there too); where the '
                        'user may not (no rtprio limit or CAP_SYS_NICE) it keeps ordinary '
                        'scheduling and says so. 0 = ordinary scheduling.'),
    'depth': ('string_array', [], 'Cameras that also publish <camera>/depth/image_raw '
              '(32FC1, metres).'),
    'log_summary': ('bool', False, 'Log what is published and served at start and a one-line '
                    'health summary every summary_period seconds.'),
    'summary_period': ('double', 10.0, 'Seconds between health summaries (with log_summary).'),
    'diagnostics_rate': ('double', 1.0, 'diagnostics rate in Hz.'),
    'web_viewer': ('integer', 0, 'Serve a live view of the simulation on this port for a '
                   'browser (MuJoCo Studio web viewer; the browser renders). 0 = off.'),
    'web_viewer_host': ('string', '127.0.0.1', 'Interface the web viewer binds; the default '
                        'is reachable only from this machine (use an SSH tunnel).'),
    'record': ('string', '', 'Record from start into this rosbag2 folder (MCAP); empty: only '
               'when start_recording is called (then rosbag2_<time>). An existing folder '
               'gets _2, _3...'),
    'record_topics': ('string_array', [], 'Topics to record; empty: every topic this node '
                      'publishes.'),
    'record_max_bytes': ('integer', 0, 'Start a new MCAP file past this size; 0 = never.'),
    'record_max_seconds': ('double', 0.0, 'Start a new MCAP file past this duration; 0 = '
                           'never.'),
    'record_compression': ('string', 'none', 'MCAP chunk compression: none, zstd or lz4.'),
    'record_video': ('string_array', [], 'Cameras also recorded as MP4 (<camera>.mp4 in the '
                     'recording folder) at their rates; all = every camera.'),
}

# Per-camera parameters, declared after the model is loaded: cameras.<name>.<key>.
CAMERA_TABLE = {
    'rate': ('double', 'Image rate in Hz for this camera (default: camera_rate).'),
    'width': ('integer', 'Image width in pixels (default: camera_width or the device file).'),
    'height': ('integer', 'Image height in pixels (default: camera_height or the device '
               'file).'),
}

MAX_PUBLISH_RATE = 10000.0
BACKGROUND_CHOICES = ('auto', 'true', 'false')
MAX_CAMERA_RATE = 240.0
MAX_PIXELS = 2048
COMPRESSION_CHOICES = ('none', 'zstd', 'lz4')


@dataclass
class SimParams:
    device_file: str = ''
    model: str = ''
    keyframe: str = ''
    real_time_factor: float = 1.0
    start_paused: bool = False
    publish_rate: float = 100.0
    tf_rate: float = 100.0
    frame_prefix: str = ''
    world_frame: str = 'world'
    publish_clock: bool = True
    camera_rate: float = 10.0
    camera_width: int = 0
    camera_height: int = 0
    camera_background: str = 'auto'
    thread_priority: int = 50
    depth: list = field(default_factory=list)
    log_summary: bool = False
    summary_period: float = 10.0
    diagnostics_rate: float = 1.0
    web_viewer: int = 0
    web_viewer_host: str = '127.0.0.1'
    record: str = ''
    record_topics: list = field(default_factory=list)
    record_max_bytes: int = 0
    record_max_seconds: float = 0.0
    record_compression: str = 'none'
    record_video: list = field(default_factory=list)


def _where(name):
    return f'parameter {name}'


def _positive_rate(name, value, top):
    if not math.isfinite(value) or not 0 < value <= top:
        raise ConfigError(f'must be above 0 and at most {top:g} Hz, got {value!r}',
                          where=_where(name))
    return value


def _frame(name, value):
    if any(c.isspace() for c in value):
        raise ConfigError(f'a frame name cannot contain spaces, got {value!r}',
                          where=_where(name))
    return value


def auto_prefix(namespace):
    """frame_prefix "auto": "arm1/" in /arm1, "a/b/" in /a/b, nothing at the root."""
    ns = (namespace or '').strip('/')
    return f'{ns}/' if ns else ''


def check(values, namespace='/'):
    """{name: value} (as ROS handed them over) -> SimParams, or ConfigError naming one."""
    p = SimParams(**{k: v for k, v in values.items() if k in SimParams.__dataclass_fields__})
    if p.frame_prefix.strip() == 'auto':
        p.frame_prefix = auto_prefix(namespace)
    if p.device_file and not os.path.isfile(p.device_file):
        raise ConfigError(f'file not found: {p.device_file}', where=_where('device_file'))
    if p.model and not os.path.isfile(p.model):
        raise ConfigError(f'file not found: {p.model}', where=_where('model'))
    if not math.isfinite(p.real_time_factor) or p.real_time_factor < 0:
        raise ConfigError(f'must be 0 (as fast as possible) or above, got '
                          f'{p.real_time_factor!r}', where=_where('real_time_factor'))
    _positive_rate('publish_rate', p.publish_rate, MAX_PUBLISH_RATE)
    _positive_rate('tf_rate', p.tf_rate, MAX_PUBLISH_RATE)
    p.tf_rate = min(p.tf_rate, p.publish_rate)
    _positive_rate('camera_rate', p.camera_rate, MAX_CAMERA_RATE)
    _positive_rate('diagnostics_rate', p.diagnostics_rate, 100.0)
    if not math.isfinite(p.summary_period) or p.summary_period <= 0:
        raise ConfigError(f'must be above 0 seconds, got {p.summary_period!r}',
                          where=_where('summary_period'))
    for name in ('camera_width', 'camera_height'):
        value = getattr(p, name)
        if not 0 <= value <= MAX_PIXELS:
            raise ConfigError(f'must be 0 (the device file\'s size) or 1..{MAX_PIXELS}, got '
                              f'{value}', where=_where(name))
    p.camera_background = str(p.camera_background).strip().lower()
    if p.camera_background not in BACKGROUND_CHOICES:
        raise ConfigError(f'must be auto, true or false, got {p.camera_background!r}',
                          where=_where('camera_background'))
    if not 0 <= p.thread_priority <= 99:
        raise ConfigError(f'must be 0 (ordinary scheduling) or a SCHED_FIFO priority 1..99, '
                          f'got {p.thread_priority}', where=_where('thread_priority'))
    _frame('frame_prefix', p.frame_prefix)
    _frame('world_frame', p.world_frame)
    if not p.world_frame:
        raise ConfigError('cannot be empty', where=_where('world_frame'))
    p.depth = [d for d in p.depth if d]
    _check_recording(p)
    return p


def _check_recording(p):
    if not 0 <= p.web_viewer <= 65535:
        raise ConfigError(f'must be 0 (off) or a port 1..65535, got {p.web_viewer}',
                          where=_where('web_viewer'))
    if not p.web_viewer_host.strip():
        raise ConfigError('cannot be empty (127.0.0.1: this machine only)',
                          where=_where('web_viewer_host'))
    if p.record_max_bytes < 0:
        raise ConfigError(f'must be 0 (never split) or above, got {p.record_max_bytes}',
                          where=_where('record_max_bytes'))
    if not math.isfinite(p.record_max_seconds) or p.record_max_seconds < 0:
        raise ConfigError(f'must be 0 (never split) or above, got {p.record_max_seconds!r}',
                          where=_where('record_max_seconds'))
    p.record_compression = p.record_compression.strip().lower() or 'none'
    if p.record_compression not in COMPRESSION_CHOICES:
        raise ConfigError(f'must be none, zstd or lz4, got {p.record_compression!r}',
                          where=_where('record_compression'))
    p.record_topics = [t for t in p.record_topics if t]
    p.record_video = [v for v in p.record_video if v]


def check_camera(name, key, value):
    """One cameras.<name>.<key> value, checked like its global counterpart."""
    where = f'cameras.{name}.{key}'
    if key == 'rate':
        _positive_rate(where, value, MAX_CAMERA_RATE)
    elif not 1 <= value <= MAX_PIXELS:
        raise ConfigError(f'must be 1..{MAX_PIXELS} pixels, got {value}', where=_where(where))
    return value


def share_dir():
    """The package's share directory: the source tree when run from it, else the install."""
    here = os.path.dirname(os.path.abspath(__file__))
    source = os.path.normpath(os.path.join(here, '..', '..'))
    if os.path.isfile(os.path.join(source, 'config', 'bench_arm.yaml')):
        return source
    try:
        from ament_index_python.packages import get_package_share_directory
        return get_package_share_directory('mujoco_hal_ros')
    except Exception:  # noqa: BLE001 - PackageNotFoundError, or no ament index at all
        return None


def builtin_device_file():
    """config/bench_arm.yaml of the built-in bench arm, or ConfigError saying where we looked."""
    share = share_dir()
    path = os.path.join(share, 'config', 'bench_arm.yaml') if share else None
    if path is None or not os.path.isfile(path):
        raise ConfigError('the built-in bench arm device file (config/bench_arm.yaml) was not '
                          'found in the source tree or the mujoco_hal_ros share directory; '
                          'source install/setup.bash or pass device_file', where='device_file')
    return path


def device_arguments(p):
    """SimParams -> (device_file, model) for ``Device`` following the documented rules."""
    if not p.device_file and not p.model:
        from ...menagerie import bench_arm_path
        return builtin_device_file(), bench_arm_path()
    return (p.device_file or None), (p.model or None)
