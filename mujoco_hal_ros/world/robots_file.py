"""The robots a launch starts with (sim_node's ``robots``): a YAML list, each robot put
into the world under its namespace and made a device of its own (``sim.robots``).

::

    robots:
      - namespace: left                 # its interfaces under <node namespace>/left/
        urdf: /path/to/arm.urdf         # or model: /path/to/arm.xml (MJCF)
        position: [0.0, 0.35, 0.0]      # metres, in the world
        quaternion: [1, 0, 0, 0]        # w x y z (optional)
        device_file: arm.yaml           # the real arm's device file (optional)
        controllers_file: controllers.yaml   # its ros2_control controllers (optional): the
                                        # arm_controller and gripper_controller blocks
        gripper_joint: finger_joint1    # the joint its gripper_controller drives (optional)
        base: auto                      # auto, fixed or floating, as the base parameter

A robot speaks its own names (``sim.robots``): joints, channels, controllers and goals are
named as its URDF or MJCF names them, so the real arm's device file and controllers file
work unchanged for each robot, two copies of one description side by side.

Each entry is checked key by key before anything is put in the world, so a typo in the
third robot starts nothing. The file is the launch's, trusted as the model parameter is:
its models are read in this process, not in the scene-edit sandbox. It is still read
bounded, as a device file is (``device_file.read_yaml``: at most 1 MiB of UTF-8, nesting at
most 32 deep, no YAML aliases, no key twice), and a URDF at most ``MAX_URDF_CHARS``.
"""

from collections.abc import Callable
import os
import re
from typing import Any, NamedTuple, TYPE_CHECKING

import numpy as np

from ..config import device_file
from ..errors import ConfigError, DeviceError, shorten
from . import bounds

if TYPE_CHECKING:     # the hints only: the device spawns the robots
    from ..sim.ports import RobotsFileHost

KEYS = ('namespace', 'urdf', 'model', 'position', 'quaternion', 'device_file',
        'controllers_file', 'gripper_joint', 'base')
BASES = ('auto', 'fixed', 'floating')
MAX_ROBOTS = 32
# A robot's namespace starts every name it serves (``<ns>/arm_controller/
# follow_joint_trajectory/_action/cancel_goal``, ``<ns>/goals/<ns>/<joint>_goal``), and ROS
# refuses a name over 247 characters: this leaves room for the node's namespace too.
MAX_NAMESPACE = 64
MAX_URDF_CHARS = 10_000_000     # as a robot_description message (a big real URDF: ~1 MB)
_TOKEN = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')


class RobotEntry(NamedTuple):
    namespace: str
    model: str | None            # an MJCF file
    urdf: str | None             # a URDF file
    position: tuple
    quaternion: tuple
    device_file: str | None = None       # the robot's device file, in its own names
    controllers_file: str | None = None  # its ros2_control controllers YAML
    gripper_joint: str | None = None     # the joint its gripper_controller drives
    base: str = 'auto'                      # a URDF's base: auto, fixed or floating


def _namespace(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip('/'):
        raise ConfigError(f'expected a namespace such as left, got {shorten(value)}',
                          where=where)
    ns = value.strip('/')
    if len(ns) > MAX_NAMESPACE or not all(_TOKEN.fullmatch(p) for p in ns.split('/')):
        raise ConfigError(f'{shorten(ns)} is not a robot namespace', where=where,
                          allowed='ASCII letters, digits and _, parts joined by /, each '
                          f'starting with a letter or _; at most {MAX_NAMESPACE} characters')
    return ns


def _checked(check: Callable[[Any, str], np.ndarray], value: Any,
             where: str) -> np.ndarray:
    """``check(value, where)`` (a ``bounds`` check) with its refusal a ConfigError."""
    try:
        return check(value, where)
    except DeviceError as exc:
        text, at = str(exc), exc.where or where      # text: '<where>: <what> (allowed: ..)'
        raise ConfigError(text[len(at) + 2:] if text.startswith(f'{at}: ') else text,
                          where=at) from None


def _file(value: Any, where: str, base: str) -> str:
    if not isinstance(value, str) or not value or '\x00' in value:
        raise ConfigError(f'expected a file path, got {shorten(value)}', where=where)
    path = value if os.path.isabs(value) else os.path.join(base, value)
    if not os.path.isfile(path):
        raise ConfigError(f'file not found: {shorten(path, 300)[1:-1]}', where=where,
                          allowed='an existing file (a path relative to the robots file\'s '
                          'folder, or absolute)')
    return path


def parse(data: Any, base: str = '.') -> list[RobotEntry]:
    """The checked entries of a robots document (``{'robots': [...]}`` or the list)."""
    if isinstance(data, dict):
        unknown = sorted(map(str, set(data) - {'robots'}))
        if unknown:
            raise ConfigError(f'unknown key {shorten(unknown[0])}', where='robots',
                              allowed='robots')
        data = data.get('robots')
    if not isinstance(data, list) or not data:
        raise ConfigError('expected a list of robots', where='robots')
    if len(data) > MAX_ROBOTS:
        raise ConfigError(f'{len(data)} robots; at most {MAX_ROBOTS}', where='robots')
    out: list[RobotEntry] = []
    seen: set[str] = set()
    for i, entry in enumerate(data):
        where = f'robots[{i}]'
        if not isinstance(entry, dict):
            raise ConfigError(f'expected a mapping, got {shorten(entry)}', where=where)
        unknown = sorted(map(str, set(entry) - set(KEYS)))
        if unknown:
            raise ConfigError(f'unknown key {shorten(unknown[0])}', where=where,
                              allowed=', '.join(KEYS))
        ns = _namespace(entry.get('namespace'), f'{where}.namespace')
        if ns in seen or any(ns.startswith(f'{s}/') or s.startswith(f'{ns}/')
                             for s in seen):
            raise ConfigError(f'namespace {ns!r} is given twice or inside another',
                              where=f'{where}.namespace')
        seen.add(ns)
        if ('urdf' in entry) == ('model' in entry):
            raise ConfigError('give urdf (a .urdf file) or model (an MJCF file), one of them',
                              where=where)
        urdf = _file(entry['urdf'], f'{where}.urdf', base) if 'urdf' in entry else None
        model = _file(entry['model'], f'{where}.model', base) if 'model' in entry else None
        pos = _checked(bounds.position, entry.get('position', [0.0, 0.0, 0.0]),
                       f'{where}.position')
        quat = _checked(bounds.quaternion, entry.get('quaternion', [1.0, 0.0, 0.0, 0.0]),
                        f'{where}.quaternion')
        files = {k: _file(entry[k], f'{where}.{k}', base) if k in entry else None
                 for k in ('device_file', 'controllers_file')}
        gripper = entry.get('gripper_joint')
        if gripper is not None and (not isinstance(gripper, str) or not gripper
                                    or len(gripper) > 256):
            raise ConfigError(f'expected a joint name, got {shorten(gripper)}',
                              where=f'{where}.gripper_joint',
                              allowed='a joint of this robot, by its own name')
        base_mode = entry.get('base', 'auto')
        if base_mode not in BASES:
            raise ConfigError(f'expected auto, fixed or floating, got {shorten(base_mode)}',
                              where=f'{where}.base', allowed=', '.join(BASES))
        out.append(RobotEntry(ns, model, urdf, tuple(float(v) for v in pos),
                              tuple(float(v) for v in quat), files['device_file'],
                              files['controllers_file'], gripper, base_mode))
    return out


def load(path: str) -> list[RobotEntry]:
    """The robots file at ``path``, checked (paths in it are relative to its folder)."""
    if not isinstance(path, str) or '\x00' in path or not os.path.isfile(path):
        raise ConfigError(f'file not found: {shorten(path, 300)}', where='robots',
                          allowed='a YAML file: robots: [{namespace: left, urdf: ...}]')
    data = device_file.read_yaml(path, 'robots file')
    return parse(data, os.path.dirname(os.path.abspath(path)))


def read_urdf(path: str) -> str:
    """The text of a URDF file of the robots file: at most ``MAX_URDF_CHARS``, UTF-8."""
    try:
        with open(path, 'rb') as handle:
            raw = handle.read(MAX_URDF_CHARS + 1)
        if len(raw) > MAX_URDF_CHARS:
            raise ConfigError(f'the URDF is over {MAX_URDF_CHARS} bytes (MAX_URDF_CHARS): '
                              'check it is the right file', where=shorten(path, 300)[1:-1])
        return raw.decode('utf-8')
    except OSError as exc:
        raise ConfigError(f'cannot read the URDF: {exc.strerror}',
                          where=shorten(path, 300)[1:-1]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f'the URDF is not UTF-8 text (byte {exc.start})',
                          where=shorten(path, 300)[1:-1]) from None


def resource(entry: RobotEntry, notes: list | None = None) -> str:
    """The MJCF file to spawn for an entry: its model, or its URDF imported as the
    ``robot_description`` parameter imports one (servos, limits, mimic joints, the sensors
    its tags declare), without a scene of its own; what the import changed or could not
    follow is appended to ``notes``."""
    if entry.model:
        return entry.model
    from ..description.urdf_in import model_from_urdf
    urdf = entry.urdf
    if urdf is None:        # parse() refuses an entry with neither
        raise ConfigError(f'robot {entry.namespace!r} gives neither a model nor a urdf',
                          where='robots', allowed='model: <MJCF file> or urdf: <URDF file>')
    text = read_urdf(urdf)
    roots = [r for r in os.environ.get('ROS_PACKAGE_PATH', '').split(os.pathsep) if r]
    drives = {}
    if entry.controllers_file:      # its drive controller's wheels and steering
        from ..mobile import config as controllers
        drives = controllers.drive_joints(controllers.read(entry.controllers_file))
    path, said = model_from_urdf(text, package_roots=roots,
                                 base_dir=os.path.dirname(urdf), bare=True,
                                 base=entry.base, drives=drives)
    if notes is not None:
        notes.extend(f'{entry.namespace}: {n}' for n in said)
    return path


def home_pose(path: str) -> dict:
    """{joint: position} of the hinge and slide joints at the model's ``home`` keyframe
    (else its first; without one qpos0 clamped into the joints' ranges): where the robot
    starts, as it would alone (``keyframes.home_state``; a spawn puts it there)."""
    import mujoco

    from ..sim.keyframes import home_state
    return home_state(mujoco.MjModel.from_xml_path(path))[0]


def add_to(device: 'RobotsFileHost', entries: list[RobotEntry], notes: list | None = None) -> dict:
    """Spawn each entry under its namespace (it starts at its home pose, as every spawned
    entity does) and make it a robot, on its device file when it names one; {namespace:
    URDF text} of those that came from a URDF (``<ns>/robot_description``). A device file
    that does not fit its robot is refused (ConfigError naming the robot). ``notes``: what
    each URDF's import changed or could not follow, to log."""
    urdfs = {}
    for e in entries:
        spec = None
        if e.device_file:
            try:
                spec = device_file.load(e.device_file)
            except DeviceError as exc:
                raise ConfigError(f'robot {e.namespace}: {exc}', where='robots') from None
        folder, _, name = e.namespace.rpartition('/')
        path = resource(e, notes)
        device.scene.spawn(path, name, e.position, e.quaternion, namespace=folder)
        try:
            device.robots.add(e.namespace, spec=spec)
        except DeviceError as exc:
            raise ConfigError(f'robot {e.namespace}: {exc}', where='robots') from None
        if e.urdf:
            urdfs[e.namespace] = read_urdf(e.urdf)
    return urdfs
