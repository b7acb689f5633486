"""The robots a launch starts with (sim_node's ``robots``): a YAML list, each robot put
into the world under its namespace and made a device of its own (``sim.robots``).

::

    robots:
      - namespace: left                 # its interfaces under <node namespace>/left/
        urdf: /path/to/arm.urdf         # or model: /path/to/arm.xml (MJCF)
        position: [0.0, 0.35, 0.0]      # metres, in the world
        quaternion: [1, 0, 0, 0]        # w x y z (optional)

Each entry is checked key by key before anything is put in the world, so a typo in the
third robot starts nothing. The file is the launch's, trusted as the model parameter is:
its models are read in this process, not in the scene-edit sandbox.
"""

import os
from typing import Any, NamedTuple, Optional

import numpy as np
import yaml

from ..checks import finite_vector
from ..errors import ConfigError, DeviceError

KEYS = ('namespace', 'urdf', 'model', 'position', 'quaternion')
MAX_ROBOTS = 32


class RobotEntry(NamedTuple):
    namespace: str
    model: Optional[str]            # an MJCF file
    urdf: Optional[str]             # a URDF file
    position: tuple
    quaternion: tuple


def _namespace(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip('/'):
        raise ConfigError(f'expected a namespace such as left, got {value!r}', where=where)
    ns = value.strip('/')
    for part in ns.split('/'):
        if not part or not (part[0].isalpha() or part[0] == '_') or \
                not all(c.isalnum() or c == '_' for c in part):
            raise ConfigError(f'{ns!r} is not a ROS namespace (letters, digits and _, '
                              'parts joined by /, each starting with a letter)', where=where)
    return ns


def _vector(value: Any, length: int, where: str) -> np.ndarray:
    try:
        return finite_vector(value, length, where)
    except DeviceError as exc:
        raise ConfigError(str(exc.args[0]) if exc.args else str(exc), where=where) from None


def _file(value: Any, where: str, base: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f'expected a file path, got {value!r}', where=where)
    path = value if os.path.isabs(value) else os.path.join(base, value)
    if not os.path.isfile(path):
        raise ConfigError(f'file not found: {path}', where=where)
    return path


def parse(data: Any, base: str = '.') -> list[RobotEntry]:
    """The checked entries of a robots document (``{'robots': [...]}`` or the list)."""
    if isinstance(data, dict):
        unknown = sorted(set(data) - {'robots'})
        if unknown:
            raise ConfigError(f'unknown key {unknown[0]!r}', where='robots',
                              allowed='robots')
        data = data.get('robots')
    if not isinstance(data, list) or not data:
        raise ConfigError('expected a list of robots', where='robots')
    if len(data) > MAX_ROBOTS:
        raise ConfigError(f'{len(data)} robots; at most {MAX_ROBOTS}', where='robots')
    out, seen = [], set()
    for i, entry in enumerate(data):
        where = f'robots[{i}]'
        if not isinstance(entry, dict):
            raise ConfigError(f'expected a mapping, got {entry!r}'[:200], where=where)
        unknown = sorted(set(entry) - set(KEYS))
        if unknown:
            raise ConfigError(f'unknown key {unknown[0]!r}', where=where,
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
        pos = _vector(entry.get('position', [0.0, 0.0, 0.0]), 3, f'{where}.position')
        quat = _vector(entry.get('quaternion', [1.0, 0.0, 0.0, 0.0]), 4,
                       f'{where}.quaternion')
        norm = float(np.linalg.norm(quat))
        if not 0.99 < norm < 1.01:
            raise ConfigError(f'quaternion {list(quat)} is not of unit length', where=where)
        out.append(RobotEntry(ns, model, urdf, tuple(float(v) for v in pos),
                              tuple(float(v) / norm for v in quat)))
    return out


def load(path: str) -> list[RobotEntry]:
    """The robots file at ``path``, checked (paths in it are relative to its folder)."""
    if not os.path.isfile(path):
        raise ConfigError(f'file not found: {path}', where='robots')
    try:
        with open(path, encoding='utf-8') as handle:
            data = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f'cannot read {path}: {exc}', where='robots') from None
    return parse(data, os.path.dirname(os.path.abspath(path)))


def resource(entry: RobotEntry) -> str:
    """The MJCF file to spawn for an entry: its model, or its URDF imported as the
    ``robot_description`` parameter imports one (servos, limits, mimic joints), without
    a scene of its own."""
    if entry.model:
        return entry.model
    from ..description.urdf_in import model_from_urdf
    with open(entry.urdf, encoding='utf-8') as handle:
        text = handle.read()
    roots = [r for r in os.environ.get('ROS_PACKAGE_PATH', '').split(os.pathsep) if r]
    path, _notes = model_from_urdf(text, package_roots=roots,
                                   base_dir=os.path.dirname(entry.urdf), bare=True)
    return path


def home_pose(path: str) -> dict:
    """{joint: position} of the hinge and slide joints at the model's ``home`` keyframe
    (else its first; {} without one): where the robot starts, as it would alone. A spawn
    attaches the bodies, not the keyframes, so the robot is put there after it."""
    import mujoco
    model = mujoco.MjModel.from_xml_path(path)
    if not model.nkey:
        return {}
    key = max(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, 'home'), 0)
    moving = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return {model.joint(j).name: float(model.key_qpos[key, model.jnt_qposadr[j]])
            for j in range(model.njnt)
            if int(model.jnt_type[j]) in moving and model.joint(j).name}


def add_to(device, entries: list[RobotEntry]) -> dict:
    """Spawn each entry under its namespace at its home pose and make it a robot;
    {namespace: URDF text} of those that came from a URDF (``<ns>/robot_description``)."""
    urdfs = {}
    for e in entries:
        folder, _, name = e.namespace.rpartition('/')
        path = resource(e)
        device.scene.spawn(path, name, e.position, e.quaternion, namespace=folder)
        device.robots.add(e.namespace)
        home = home_pose(path)
        if home:
            device.physics.set_joint_state([f'{e.namespace}/{j}' for j in home],
                                           list(home.values()))
        if e.urdf:
            with open(e.urdf, encoding='utf-8') as handle:
                urdfs[e.namespace] = handle.read()
    return urdfs
