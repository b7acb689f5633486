"""sim_node parameters: one table, declared once each, read into a checked ``SimParams``.

The table is the single place that knows a parameter's type, default, meaning and allowed
values, so the node, its descriptors (``ros2 param describe``), ``launch_args`` and the
tests cannot drift apart. A refusal raises ``ConfigError`` with
``where='parameter <name>'``: ``main()`` prints that as one line and exits non-zero, which
is what a user who mistyped a value needs, rather than a traceback.
"""

from collections.abc import Mapping, Sequence
from dataclasses import replace
import math
import os
from typing import Any, TYPE_CHECKING

from ...errors import ConfigError
from ...tasks.peer import declared_policies
from ..parameters import Param, ParameterTable

MAX_PUBLISH_RATE = 10000.0
BACKGROUND_CHOICES = ('auto', 'true', 'false')
MAX_CAMERA_RATE = 240.0
MAX_PIXELS = 2048
COMPRESSION_CHOICES = ('none', 'zstd', 'lz4')
POLICY_TIMEOUT_S = 1.0      # a declared policy's call: 50 control periods at 50 Hz
POLICY_MEMORY_MB = 4096


def _rate(top):
    """An update rate in Hz: above 0, at most ``top``."""
    return {'range': (0.0, top), 'min_open': True, 'rule': f'above 0 and at most {top:g} Hz'}


def _existing_file(path):
    if path and not os.path.isfile(path):
        raise ValueError(f'file not found: {path}')
    return path


def _robot_description(value):
    text = value.strip()
    if text and text != 'topic' and not text.startswith('<') and not os.path.isfile(text):
        raise ValueError("expected URDF text, a .urdf file or 'topic', got a path that does "
                         f'not exist: {text[:200]}')
    return value


def _frame(value):
    if any(c.isspace() for c in value):
        raise ValueError(f'a frame name cannot contain spaces, got {value!r}')
    return value


def _not_empty(value):
    if not value.strip():
        raise ValueError('cannot be empty (127.0.0.1: this machine only)')
    return value.strip()


def existing_dirs(value: Sequence[str]) -> list[str]:
    roots = [r for r in value if r]
    missing = [r for r in roots if not os.path.isdir(r)]
    if missing:
        raise ValueError(f'not a directory: {", ".join(missing)[:200]}')
    return [os.path.realpath(r) for r in roots]


def _policies(value):
    declared_policies(value)            # ValueError naming the entry that is not one
    return [v.strip() for v in value if v.strip()]


def policy_params(action: str) -> list[Param]:
    """What a peer may run over ``action`` (doc/security.md): data it names, code only the
    operator declares. sim_node's and pool_node's tables share these three."""
    return [
        Param('policies', 'string_array', [], f'Policies a peer may run by name over {action}, '
              'as NAME=module:attr (the operator chooses the code; each run starts it in a '
              'worker process of its own). Besides these a peer may name only zero, random or '
              'a .onnx file (under resource_roots); anything else is refused FORBIDDEN before '
              'any import.', check=_policies),
        Param('policy_timeout_s', 'double', POLICY_TIMEOUT_S, 'Seconds one call of a declared '
              'policy may take (fifty control periods at 50 Hz); a later answer ends the run '
              'TIMEOUT with its worker killed.', range=(0.001, 3600.0), rule='0.001..3600 s'),
        Param('policy_memory_mb', 'integer', POLICY_MEMORY_MB, 'Address space (MiB) of a '
              "declared policy's worker process; 0 = no cap.", range=(0, 1 << 20),
              rule='0 (no cap) or up to 1048576 MiB'),
    ]


def _world_frame(value):
    if not value:
        raise ValueError('cannot be empty')
    return _frame(value)


def _gravity(value):
    if len(value) not in (0, 3):
        raise ValueError(f'give 3 numbers (x, y, z in m/s^2) or none, got {len(value)}')
    if not all(math.isfinite(v) for v in value):
        raise ValueError('every component must be a finite number')
    return [float(v) for v in value]


TABLE = ParameterTable([
    Param('device_file', 'string', '', 'Device file (YAML). Empty with an empty model: the '
          'built-in bench arm with config/bench_arm.yaml.', check=_existing_file),
    Param('model', 'string', '', 'MJCF path. Overrides the model the device file names; with '
          'no device file the device is built zero-config from the model.',
          check=_existing_file),
    Param('robot_description', 'string', '', 'URDF to simulate instead of an MJCF model: the '
          "text the real arm's launch passes robot_state_publisher, a .urdf path, or 'topic' "
          'to take it from the latched robot_description topic. Actuators come from its '
          '<ros2_control> command interfaces.', check=_robot_description),
    Param('robots', 'string', '', 'YAML file of robots to put in the world at start, each a '
          'device of its own under <namespace>/ (joint_states, move_to, hold, '
          'arm_controller, gripper_controller, describe), named as its URDF or MJCF names '
          'its joints: namespace, urdf or model, position, quaternion, and optionally its '
          'own device_file, controllers_file and gripper_joint. With no model, device file '
          'or robot_description the world is empty (a floor); the model given is the world '
          'they join.',
          check=_existing_file),
    Param('scene', 'string', '', 'MJCF scene the URDF robot is attached to (empty: a floor, a '
          'light and an overview camera).', check=_existing_file),
    Param('base', 'string', 'auto', 'Whether a URDF robot\'s base is free to move: auto frees '
          'the base of a robot with drive wheels (joints a drive controller of '
          'controllers_file names, <ros2_control> velocity interfaces on continuous joints, '
          'or continuous joints whose own links touch the ground) unless its root link is '
          'world; fixed bolts it to the world; floating frees it.',
          choices=('auto', 'fixed', 'floating')),
    Param('keyframe', 'string', '', 'Keyframe to start from and reset to (empty: the device '
          "file's; zero-config: home, else the model's first keyframe)."),
    Param('gravity_compensation', 'bool', False, 'Make servo-driven links weightless inside '
          'MuJoCo as actuator force (effort shows it); false: the device file says (off unless '
          'it turns it on): the model as written.'),
    Param('move_tolerance', 'double', 0.0, 'move_to position tolerance in metres for goals '
          "without their own; 0: the device file's (1 mm by default).",
          range=(0.0, float('inf')), rule='0 (the device file\'s) or above, in metres'),
    Param('real_time_factor', 'double', 1.0, 'Simulated seconds per wall second; 0 runs as '
          'fast as possible.', range=(0.0, float('inf')),
          rule='0 (as fast as possible) or above', dynamic=True),
    Param('gravity', 'double_array', [], "World gravity in m/s^2 (x, y, z); empty: the "
          "model's. Changes at run time.", check=_gravity, rule='empty or 3 finite numbers',
          dynamic=True),
    Param('timestep', 'double', 0.0, "Integration timestep in seconds; 0: the device file's "
          "or the model's. Changes at run time.", range=(0.0, 0.1),
          rule="0 (the model's) or above 0 up to 0.1 s", dynamic=True),
    Param('start_paused', 'bool', False, 'Start with physics paused (use the pause/step '
          'services).'),
    Param('publish_rate', 'double', 100.0, 'joint_states and /clock rate in Hz (wall clock).',
          **_rate(MAX_PUBLISH_RATE)),
    Param('tf_rate', 'double', 100.0, '/tf rate in Hz (wall clock); at most publish_rate.',
          **_rate(MAX_PUBLISH_RATE)),
    Param('frame_prefix', 'string', 'auto', 'Prefix for every TF frame this node names except '
          'world_frame (e.g. "arm1/"). auto: "<namespace>/" in a namespace, so instances side '
          'by side never share a frame; none at the root. Empty: none.', check=_frame),
    Param('publish_tf', 'bool', True, 'Publish the body tree on /tf and /tf_static. False '
          "leaves the bodies' TF to a robot_state_publisher fed robot_description and "
          'joint_states (camera optical frames stay published).'),
    Param('publish_robot_description', 'bool', True, 'Publish robot_description (latched '
          'std_msgs/String): the URDF the model was loaded from, or one generated from '
          'the MJCF.'),
    Param('world_frame', 'string', 'world', 'The fixed frame every body is published against.',
          check=_world_frame),
    Param('odom_frame', 'string', 'odom', 'Odometry frame of a floating-base robot (a root '
          'body on a free joint with joints below it): world_frame -> odom (static identity) '
          '-> base body on /tf and nav_msgs/Odometry on odom, as REP-105 has it; with '
          'frame_prefix. Empty: no odom frame or topic, every body under world_frame.',
          check=_frame),
    Param('publish_clock', 'bool', True, 'Publish /clock from simulated time; with several '
          'instances set it true on exactly one.'),
    Param('camera_rate', 'double', 10.0, 'Image rate in Hz for every camera without its own '
          'cameras.<name>.rate.', **_rate(MAX_CAMERA_RATE)),
    Param('camera_width', 'integer', 0, "Image width for every camera; 0 keeps the device "
          "file's.", range=(0, MAX_PIXELS), rule=f"0 (the device file's size) or "
          f"1..{MAX_PIXELS}"),
    Param('camera_height', 'integer', 0, "Image height for every camera; 0 keeps the device "
          "file's.", range=(0, MAX_PIXELS), rule=f"0 (the device file's size) or "
          f"1..{MAX_PIXELS}"),
    Param('camera_background', 'string', 'auto', 'Render cameras on CPU time nothing else '
          'wants (Linux SCHED_IDLE software rasterisers), so frames never delay physics, '
          'joint_states or their subscribers: true always, false never (more frames on a '
          'busy machine), auto until a watched camera falls behind its rate, where the state '
          'publisher runs at SCHED_FIFO (thread_priority) and so needs no such protection.',
          choices=BACKGROUND_CHOICES, rule='auto, true or false',
          check=lambda v: v.strip().lower()),
    Param('thread_priority', 'integer', 50, 'SCHED_FIFO priority (1..99) for the thread that '
          'publishes joint_states, /tf and /clock, as ros2_control\'s controller_manager gives '
          'its update loop (50 there too); where the user may not (no rtprio limit or '
          'CAP_SYS_NICE) it keeps ordinary scheduling and says so. 0 = ordinary scheduling.',
          range=(0, 99), rule='0 (ordinary scheduling) or a SCHED_FIFO priority 1..99'),
    Param('fast_paths', 'bool', True, 'The speed measures of mujoco_hal_ros.fastpath. False: '
          'joint_states, /tf, /clock and camera images go out as rclpy message objects '
          'through Publisher.publish (same bytes on the wire), no thread asks for SCHED_FIFO '
          'or a short slice (thread_priority is not applied), rendering stays at normal '
          "priority (camera_background acts as false) and the process keeps CPython's GIL "
          "switch interval and glibc's allocator defaults. For checking that the fast paths "
          'change nothing.'),
    Param('depth', 'string_array', [], 'Cameras that also publish <camera>/depth/image_raw '
          '(32FC1, metres).', check=lambda v: [d for d in v if d]),
    Param('log_summary', 'bool', False, 'Log what is published and served at start and a '
          'one-line health summary every summary_period seconds.'),
    Param('summary_period', 'double', 10.0, 'Seconds between health summaries (with '
          'log_summary).', range=(0.0, float('inf')), min_open=True, rule='above 0 seconds'),
    Param('diagnostics_rate', 'double', 1.0, 'diagnostics rate in Hz.', **_rate(100.0)),
    Param('web_viewer', 'integer', 0, 'Serve a live view of the simulation on this port for a '
          'browser (MuJoCo Studio web viewer; the browser renders). 0 = off.',
          range=(0, 65535), rule='0 (off) or a port 1..65535'),
    Param('web_viewer_host', 'string', '127.0.0.1', 'Interface the web viewer binds; the '
          'default is reachable only from this machine (use an SSH tunnel).',
          check=_not_empty),
    Param('record', 'string', '', 'Record from start into this rosbag2 folder (MCAP); empty: '
          'only when start_recording is called (then rosbag2_<time>). An existing folder '
          'gets _2, _3...'),
    Param('record_folder', 'string', '', 'Folder a recording with a relative name (record, '
          'or start_recording\'s rosbag2_<time>) goes into, created if missing; empty: the '
          'node\'s working directory. make run gives <repository>/recordings.'),
    Param('dataset_root', 'string', '', 'Folder the LeRobot datasets of start_dataset, '
          'replay_episode and run_policy (dataset_folder) live under: a requested folder '
          'that leads outside it is refused FORBIDDEN; empty: record_folder, else the '
          'node\'s working directory.'),
    Param('record_topics', 'string_array', [], 'Topics to record; empty: every topic this '
          'node publishes.', check=lambda v: [t for t in v if t]),
    Param('record_max_bytes', 'integer', 0, 'Start a new MCAP file past this size; 0 = never.',
          range=(0, 2**62), rule='0 (never split) or above'),
    Param('record_max_seconds', 'double', 0.0, 'Start a new MCAP file past this duration; 0 = '
          'never.', range=(0.0, float('inf')), rule='0 (never split) or above'),
    Param('record_compression', 'string', 'none', 'MCAP chunk compression: none, zstd or lz4.',
          choices=COMPRESSION_CHOICES, rule='none, zstd or lz4',
          check=lambda v: v.strip().lower() or 'none'),
    Param('record_video', 'string_array', [], 'Cameras also recorded as MP4 (<camera>.mp4 in '
          'the recording folder) at their rates; all = every camera.',
          check=lambda v: [c for c in v if c]),
    Param('sensors', 'bool', True, "Publish the model's <sensor> block on sensors/<name> "
          '(Imu, WrenchStamped, Range, Touch, PoseStamped, JointState, SensorReading), each '
          'only while subscribed.'),
    Param('sensor_rate', 'double', 0.0, "Rate in Hz of every sensor stream without its own "
          "rate in the device file's sensors: section; 0 = the device file's sensors.rate, "
          'else 100 Hz.', range=(0.0, MAX_PUBLISH_RATE),
          rule=f'0 (the device file\'s) or above 0 and at most {MAX_PUBLISH_RATE:g} Hz'),
    Param('sensor_seed', 'integer', -1, 'Seed of every sensor noise model; -1 = the device '
          "file's sensors.seed (else 0). The same seed gives the same noisy readings.",
          range=(-1, 2 ** 31 - 1), rule='-1 (the device file\'s) or 0 and above'),
    Param('lidars', 'string_array', [], 'Extra lidars as NAME=SITE (or SITE): a planar '
          'scanner of lidar_rays rays over 360 degrees on that site (or, where no site has '
          "the name, at that body's origin), publishing <name>/scan (LaserScan); the device "
          "file's lidars: section sets any pattern and pose.",
          check=lambda v: [d for d in v if d]),
    Param('lidar_rays', 'integer', 360, 'Rays per scan of each lidars entry.',
          range=(1, 100000), rule='1..100000'),
    Param('lidar_rate', 'double', 10.0, 'Scan rate in Hz of each lidars entry.',
          **_rate(1000.0)),
    Param('lidar_range', 'double', 30.0, 'Largest range in metres of each lidars entry.',
          range=(0.0, 1e6), min_open=True, rule='above 0 metres'),
    Param('contacts_rate', 'double', 10.0, 'contacts (and contact_markers) rate in Hz, '
          'only while subscribed.', **_rate(1000.0)),
    Param('contact_markers', 'bool', False, 'Publish contact_markers (an arrow per active '
          'contact force, for rviz).'),
    Param('image_compression', 'string', 'jpeg', '<camera>/image_raw/compressed format, as '
          "image_transport's compressed plugin: jpeg or png.", choices=('jpeg', 'png'),
          rule='jpeg or png', check=lambda v: v.strip().lower()),
    Param('jpeg_quality', 'integer', 90, 'JPEG quality of image_raw/compressed (1..100).',
          range=(1, 100), rule='1..100'),
    # Who may edit the world, and what one edit may cost (README: Security).
    Param('world_edits', 'bool', True, 'Serve scene edits to any peer on the ROS domain, as '
          "Gazebo's services do: spawn_entity(ies), delete_entity, load_world, unload_world "
          'and randomize. False refuses them (FEATURE_UNSUPPORTED, or FORBIDDEN) and '
          'get_simulator_features stops listing them.'),
    Param('resource_roots', 'string_array', [], 'Directories that a file URI of spawn_entity '
          'or load_world, and every file an MJCF names (include, mesh, texture...), must lie '
          "under, as Gazebo's GZ_SIM_RESOURCE_PATH; empty: any file this process can read.",
          check=existing_dirs),
    *policy_params('run_policy'),
    Param('sandbox_memory_mb', 'integer', 2048, 'Address space (MiB) of the process that '
          'reads and compiles an untrusted model (scene edits, load_world) before the node '
          'takes it; a model that needs more is refused LIMIT_EXCEEDED.',
          range=(256, 1 << 20), rule='256 MiB and above'),
    Param('sandbox_cpu_s', 'double', 20.0, 'CPU seconds that process may spend on one model.',
          range=(1.0, 3600.0), rule='1..3600 s'),
    Param('world_max_bodies', 'integer', 10000, 'Bodies an edited or loaded world may have '
          '(<replicate> expanded); more is refused LIMIT_EXCEEDED.', range=(1, 10 ** 7),
          rule='1 and above'),
    Param('world_max_geoms', 'integer', 50000, 'Geoms an edited or loaded world may have.',
          range=(1, 10 ** 8), rule='1 and above'),
    Param('world_max_mesh_vertices', 'integer', 5000000, 'Mesh vertices an edited or loaded '
          'world may have.', range=(1, 10 ** 9), rule='1 and above'),
])

# The checked values sim_node runs with: one typed, frozen field per TABLE entry. The class
# is made at run time from TABLE, so a type checker cannot see its fields: to it the name
# stands for any object (its attributes are TABLE's names, each of its Param's type).
if TYPE_CHECKING:
    SimParams = Any
else:
    SimParams = TABLE.record_type('SimParams')


def camera_table(name: str, defaults: Mapping[str, float]) -> ParameterTable:
    """cameras.<name>.rate/width/height, declared once the model is loaded: their defaults
    come from the global camera parameters and the device file, so each camera gets a
    table of its own."""
    return ParameterTable([
        Param('rate', 'double', float(defaults['rate']), 'Image rate in Hz for this camera '
              '(default: camera_rate).', **_rate(MAX_CAMERA_RATE)),
        Param('width', 'integer', int(defaults['width']), 'Image width in pixels (default: '
              'camera_width or the device file).', range=(1, MAX_PIXELS),
              rule=f'1..{MAX_PIXELS} pixels'),
        Param('height', 'integer', int(defaults['height']), 'Image height in pixels (default: '
              'camera_height or the device file).', range=(1, MAX_PIXELS),
              rule=f'1..{MAX_PIXELS} pixels'),
    ], prefix=f'cameras.{name}.')


def auto_prefix(namespace: str | None) -> str:
    """frame_prefix "auto": "arm1/" in /arm1, "a/b/" in /a/b, nothing at the root."""
    ns = (namespace or '').strip('/')
    return f'{ns}/' if ns else ''


def sim_params(values: Mapping[str, Any], namespace: str = '/') -> SimParams:
    """TABLE's checked values -> SimParams, with the rules that join two of them."""
    p = SimParams(**values)
    prefix = auto_prefix(namespace) if p.frame_prefix.strip() == 'auto' else p.frame_prefix
    return replace(p, frame_prefix=prefix, tf_rate=min(p.tf_rate, p.publish_rate))


def share_dir() -> str | None:
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


def builtin_device_file() -> str:
    """config/bench_arm.yaml of the built-in bench arm, or ConfigError saying where we looked."""
    share = share_dir()
    path = os.path.join(share, 'config', 'bench_arm.yaml') if share else None
    if path is None or not os.path.isfile(path):
        raise ConfigError('the built-in bench arm device file (config/bench_arm.yaml) was not '
                          'found in the source tree or the mujoco_hal_ros share directory; '
                          'source install/setup.bash or pass device_file', where='device_file')
    return path


def device_arguments(p: SimParams, urdf_model: str | None = None
                     ) -> tuple[str | None, str | None]:
    """SimParams -> (device_file, model) for ``Device`` following the documented rules;
    ``urdf_model`` is the MJCF built from ``robot_description``."""
    if urdf_model:
        if p.model:
            raise ConfigError('give model (MJCF) or robot_description (URDF), not both',
                              where='parameter robot_description')
        return (p.device_file or None), urdf_model
    if p.scene:
        raise ConfigError('scene places a robot_description (URDF); for an MJCF model '
                          'include the scene in the model file', where='parameter scene')
    if not p.device_file and not p.model and p.robots:
        from ...menagerie import empty_world_path
        return None, empty_world_path()
    if not p.device_file and not p.model:
        from ...menagerie import bench_arm_path
        return builtin_device_file(), bench_arm_path()
    return (p.device_file or None), (p.model or None)
