"""Launch arguments -> node descriptions, in plain Python so tests cover it without launch.

``launch/sim.launch.py`` and ``launch/bringup.launch.py`` only declare the arguments listed
here and turn the dicts returned below into ``launch_ros.actions.Node``: every decision
(types, defaults, which node, namespaced rviz topics) lives here, where a test can reach
it on a machine without ``launch``/``launch_ros``.
"""

from collections.abc import Mapping
import math
import os
import re
import tempfile
from typing import Any

from ..errors import ConfigError
from .sim.params import auto_prefix, TABLE

PACKAGE = 'mujoco_hal_ros'


def _node_default(name):
    """sim_node's default for ``name`` (its parameter table) as launch passes it, a string."""
    value = TABLE[name].default
    return str(value).lower() if isinstance(value, bool) else str(value)


# name: (default as launch passes it, a string; description). An argument that is a
# sim_node parameter takes the node's default from its table, except log_summary, which a
# launch turns on so that its output says what is served.
SIM_ARGS = {
    'device_file': (_node_default('device_file'), 'Device file (YAML); empty with an empty '
                    'model: the built-in bench arm.'),
    'model': (_node_default('model'), 'MJCF path; overrides the device file\'s model, or '
              'alone: zero-config.'),
    'namespace': ('', 'Namespace for every relative topic, service and action.'),
    'real_time_factor': (_node_default('real_time_factor'), 'Simulated seconds per wall '
                         'second; 0 = as fast as possible.'),
    'rviz': ('false', 'Also start rviz2 with config/sim.rviz.'),
    'rviz_image': ('auto', 'Image topic rviz shows (relative, e.g. wrist/image_raw); "auto": '
                   'overhead/image_raw on the built-in arm, none on other models; empty: '
                   'none.'),
    'frame_prefix': (_node_default('frame_prefix'), 'TF frame prefix; "auto": "<namespace>/" '
                     'when namespaced, else none.'),
    'publish_clock': (_node_default('publish_clock'), 'Publish /clock (true on exactly one '
                      'instance).'),
    'publish_rate': (_node_default('publish_rate'), 'joint_states rate in Hz.'),
    'log_summary': ('true', 'Log what is served and a periodic health line.'),
    'controllers_file': ('', 'ros2_control controller config (YAML) of the real robot; sim_node '
                         'serves its arm controllers and its drive controller the same way '
                         '(see config/arm_controller_swap.yaml).'),
    'base': (_node_default('base'), 'A URDF robot\'s base: auto (free when it has drive '
             'wheels), fixed or floating.'),
    'robot_description': ('', 'URDF to simulate instead of MJCF: a .urdf file, the URDF '
                          'text (e.g. xacro output), or "topic" (robot_state_publisher\'s).'),
    'scene': ('', 'MJCF scene the URDF robot is placed in; empty: floor, light, camera.'),
    'publish_tf': (_node_default('publish_tf'), 'Publish the body tree on /tf; false when '
                   'your robot_state_publisher does.'),
}

BRINGUP_ARGS = dict(SIM_ARGS, **{
    'use_sim': ('true', 'true: the simulated device (sim_node); false: the real driver.'),
    'driver_package': ('', 'Package of the real driver (use_sim:=false).'),
    'driver_executable': ('', 'Executable of the real driver (use_sim:=false).'),
    'driver_params': ('', 'Parameter file (YAML) for the real driver; optional.'),
})

_TRUE = {'true', '1', 'yes', 'on'}
_FALSE = {'false', '0', 'no', 'off'}
_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def as_bool(name: str, text: str) -> bool:
    value = str(text).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f'expected true or false, got {text!r}', where=f'launch argument {name}')


def as_float(name: str, text: str, minimum: float | None = None) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ConfigError(f'expected a number, got {text!r}',
                          where=f'launch argument {name}') from None
    if not math.isfinite(value) or (minimum is not None and value < minimum):
        raise ConfigError(f'expected a finite number of at least {minimum:g}, got {text!r}',
                          where=f'launch argument {name}')
    return value


def namespace(text: str) -> str:
    """'' or '/a/b': each part a ROS name (letters, digits, underscores; no leading digit)."""
    text = str(text).strip().strip('/')
    if not text:
        return ''
    for part in text.split('/'):
        if not _NAME.match(part):
            raise ConfigError(f'{part!r} is not a valid ROS name part',
                              where='launch argument namespace',
                              allowed='letters, digits and underscores, not starting with a '
                              'digit')
    return '/' + text


def _with_defaults(args, table=None):
    """Strings for every argument of ``table`` (default: all), refusing unknown names."""
    table = table or BRINGUP_ARGS
    unknown = sorted(set(args) - set(table))
    if unknown:
        raise ConfigError(f'unknown launch argument {", ".join(unknown)}',
                          where='launch arguments', allowed=', '.join(sorted(table)))
    return {k: str(args.get(k, default)) for k, (default, _text) in table.items()}


def sim_parameters(args: Mapping[str, str]) -> dict[str, Any]:
    """Launch arguments (strings) -> typed sim_node parameters."""
    a = _with_defaults(args)
    ns = namespace(a['namespace'])
    prefix = a['frame_prefix'].strip()
    if prefix == 'auto':
        prefix = auto_prefix(ns)
    params = {'real_time_factor': as_float('real_time_factor', a['real_time_factor'], 0.0),
              'publish_rate': as_float('publish_rate', a['publish_rate'], 0.0),
              'publish_clock': as_bool('publish_clock', a['publish_clock']),
              'log_summary': as_bool('log_summary', a['log_summary']),
              'frame_prefix': prefix}
    if not as_bool('publish_tf', a['publish_tf']):
        params['publish_tf'] = False
    base = a['base'].strip()
    if base not in ('auto', 'fixed', 'floating'):
        raise ConfigError(f'expected auto, fixed or floating, got {base!r}',
                          where='launch argument base')
    if base != 'auto':
        params['base'] = base
    if params['publish_rate'] <= 0:
        raise ConfigError('must be above 0', where='launch argument publish_rate')
    for key in ('device_file', 'model', 'controllers_file', 'scene'):
        if a[key].strip():
            params[key] = os.path.expanduser(a[key].strip())
    description = a['robot_description'].strip()
    if description:
        is_text = description.startswith('<') or description == 'topic'
        params['robot_description'] = description if is_text else os.path.expanduser(
            description)
    return params


def sim_node(args: Mapping[str, str]) -> dict[str, Any]:
    """Keyword arguments of launch_ros.actions.Node for sim_node."""
    a = _with_defaults(args)
    return {'package': PACKAGE, 'executable': 'sim_node', 'name': 'sim_node',
            'namespace': namespace(a['namespace']), 'output': 'screen',
            'parameters': [sim_parameters(args)]}


def driver_node(args: Mapping[str, str]) -> dict[str, Any]:
    """Keyword arguments of launch_ros.actions.Node for the real driver (use_sim:=false)."""
    a = _with_defaults(args)
    for key in ('driver_package', 'driver_executable'):
        if not a[key].strip():
            raise ConfigError('needed with use_sim:=false', where=f'launch argument {key}')
    params = []
    if a['driver_params'].strip():
        path = os.path.expanduser(a['driver_params'].strip())
        if not os.path.isfile(path):
            raise ConfigError(f'file not found: {path}', where='launch argument driver_params')
        params.append(path)
    if a['controllers_file'].strip():   # the same controller names as in simulation
        params.append(os.path.expanduser(a['controllers_file'].strip()))
    return {'package': a['driver_package'].strip(),
            'executable': a['driver_executable'].strip(),
            'namespace': namespace(a['namespace']), 'output': 'screen', 'parameters': params}


BUILTIN_IMAGE = 'overhead/image_raw'      # the built-in arm's camera, as config/sim.rviz has it


def rviz_image(args: Mapping[str, str]) -> str:
    """The image topic rviz shows, relative, or '' for none (see SIM_ARGS)."""
    a = _with_defaults(args)
    topic = a['rviz_image'].strip()
    if topic != 'auto':
        return topic.strip('/')
    builtin = not a['model'].strip() and not a['device_file'].strip()
    return BUILTIN_IMAGE if builtin else ''


def rviz_config(ns: str, share_dir: str, out_dir: str | None = None,
                image: str = BUILTIN_IMAGE) -> str:
    """config/sim.rviz, with its topics moved under ``ns`` when namespaced and its Image
    display showing ``image`` (none when empty): a temp copy where either differs."""
    base = os.path.join(share_dir, 'config', 'sim.rviz')
    if not ns and image == BUILTIN_IMAGE:
        return base
    with open(base, encoding='utf-8') as f:
        text = f.read()
    if image != BUILTIN_IMAGE:                # another model's camera, or no Image display
        display = re.compile(r'    - Class: rviz_default_plugins/Image\n(      .*\n)+')
        text = (display.sub('', text) if not image else
                text.replace(f'Value: /{BUILTIN_IMAGE}', f'Value: /{image}'))
    text = re.sub(r'(Value|Topic): /(?!tf\b|tf_static\b|clock\b)([A-Za-z_])',
                  lambda m: f'{m.group(1)}: {ns}/{m.group(2)}', text) if ns else text
    out_dir = out_dir or tempfile.mkdtemp(prefix='mujoco_hal_ros_rviz_')
    name = (ns or '_root').replace('/', '_') + ('_' + image.replace('/', '_') if image else '')
    path = os.path.join(out_dir, f'sim{name}.rviz')
    with open(path, 'w', encoding='utf-8') as f:
        f.write(text)
    return path


def rviz_node(args: Mapping[str, str], share_dir: str, use_sim_time: bool = True
              ) -> dict[str, Any] | None:
    """rviz2 on the simulated clock when the simulation runs: /tf and images are stamped
    with simulated time, and rviz on wall time would drop them as too old."""
    a = _with_defaults(args)
    if not as_bool('rviz', a['rviz']):
        return None
    ns = namespace(a['namespace'])
    return {'package': 'rviz2', 'executable': 'rviz2', 'name': 'rviz2', 'output': 'screen',
            'parameters': [{'use_sim_time': bool(use_sim_time)}],
            'arguments': ['-d', rviz_config(ns, share_dir, image=rviz_image(args))]}


def sim_launch(args: Mapping[str, str], share_dir: str) -> list[dict[str, Any]]:
    """Everything sim.launch.py starts, as Node keyword-argument dicts."""
    nodes = [sim_node(args)]
    rviz = rviz_node(args, share_dir)
    return nodes + ([rviz] if rviz else [])


def bringup_launch(args: Mapping[str, str], share_dir: str) -> list[dict[str, Any]]:
    """Everything bringup.launch.py starts: the simulated or the real device, same names."""
    a = _with_defaults(args)
    use_sim = as_bool('use_sim', a['use_sim'])
    device = sim_node(args) if use_sim else driver_node(args)
    rviz = rviz_node(args, share_dir, use_sim_time=use_sim)
    return [device] + ([rviz] if rviz else [])
