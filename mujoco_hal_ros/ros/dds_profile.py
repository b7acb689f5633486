"""The Fast DDS profile sim_node runs with unless the user chose one: config/fastdds.xml.

Fast DDS's default shared-memory segment (512 KiB) is smaller than a 640x480 rgb8 frame,
so each frame goes out in fragments, and a best-effort reader (the sensor-data QoS of rviz
and most image consumers) that misses one of them loses the whole frame: one in nine
arrived (test/e2e/test_camera_qos_e2e.py). The profile gives the publishing participant an
8 MiB segment, which holds a whole frame, and keeps UDP for other hosts and discovery;
subscribers need no profile of their own. A profile, built-in transport choice or another
middleware the user set is left alone.

The variable depends on the Fast DDS underneath: 3.x (Kilted on) reads
``FASTDDS_DEFAULT_PROFILES_FILE`` and its rmw warns about the old name, 2.x (Jazzy,
Humble) reads only ``FASTRTPS_DEFAULT_PROFILES_FILE``. Which one is installed shows in its
library's name (``libfastdds.so.3`` or ``libfastrtps.so.2``) where the dynamic loader and
the ROS prefixes keep libraries; when neither is found, both variables are set.
"""

from collections.abc import Iterable, Mapping, MutableMapping
import glob
import os
import sys

NEW, OLD = 'FASTDDS_DEFAULT_PROFILES_FILE', 'FASTRTPS_DEFAULT_PROFILES_FILE'
USER_CHOICES = (NEW, OLD, 'FASTDDS_BUILTIN_TRANSPORTS')
_LIBRARIES = ((NEW, 'libfastdds.so.3*'), (OLD, 'libfastrtps.so.2*'))


def profile_path(share: str | None) -> str | None:
    """config/fastdds.xml under the package's share directory (or the source tree)."""
    path = os.path.join(share, 'config', 'fastdds.xml') if share else None
    return path if path and os.path.isfile(path) else None


def library_dirs(environ: Mapping[str, str]) -> list[str]:
    """Where a ROS install keeps Fast DDS: the loader's path, each ROS prefix's lib/ and
    this Python's prefix (the PyPI wheels)."""
    dirs = [d for d in environ.get('LD_LIBRARY_PATH', '').split(os.pathsep) if d]
    dirs += [os.path.join(p, 'lib')
             for p in environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    return dirs + [os.path.join(sys.prefix, 'lib')]


def profile_variables(dirs: Iterable[str]) -> tuple[str, ...]:
    """The profile variables the installed Fast DDS reads: one name, or both if unknown."""
    for variable, pattern in _LIBRARIES:
        if any(glob.glob(os.path.join(d, pattern)) for d in dirs):
            return (variable,)
    return (NEW, OLD)


def use_default_profile(share: str | None, environ: MutableMapping[str, str] | None = None,
                        dirs: Iterable[str] | None = None) -> str | None:
    """Point Fast DDS at the package's profile unless the user chose something; returns
    the path set, or None. Call before the ROS context is initialised."""
    env = os.environ if environ is None else environ
    rmw = env.get('RMW_IMPLEMENTATION', '')
    if any(env.get(k) for k in USER_CHOICES) or (rmw and 'fastrtps' not in rmw):
        return None
    path = profile_path(share)
    if path is not None:
        names = profile_variables(library_dirs(env) if dirs is None else dirs)
        env.update(dict.fromkeys(names, path))
    return path
