"""The Fast DDS profile sim_node runs with unless the user chose one: config/fastdds.xml.

Fast DDS's default shared-memory segment (512 KiB) is smaller than a 640x480 rgb8 frame,
so each frame goes out in fragments, and a best-effort reader (the sensor-data QoS of rviz
and most image consumers) that misses one of them loses the whole frame: one in nine
arrived (test/e2e/test_camera_qos_e2e.py). The profile gives the publishing participant an
8 MiB segment, which holds a whole frame, and keeps UDP for other hosts and discovery;
subscribers need no profile of their own. A profile, built-in transport choice or another
middleware the user set is left alone.

Fast DDS 3 (Kilted) reads ``FASTDDS_DEFAULT_PROFILES_FILE``; Fast DDS 2 (Jazzy's 2.14)
reads only the older ``FASTRTPS_DEFAULT_PROFILES_FILE``. Each version reads one of the two,
so both point at the profile: with only the new name, Jazzy ran Fast DDS's defaults.
"""

import os

PROFILE_VARIABLES = ('FASTDDS_DEFAULT_PROFILES_FILE', 'FASTRTPS_DEFAULT_PROFILES_FILE')
USER_CHOICES = PROFILE_VARIABLES + ('FASTDDS_BUILTIN_TRANSPORTS',)


def profile_path(share):
    """config/fastdds.xml under the package's share directory (or the source tree)."""
    path = os.path.join(share, 'config', 'fastdds.xml') if share else None
    return path if path and os.path.isfile(path) else None


def use_default_profile(share, environ=None):
    """Point Fast DDS at the package's profile unless the user chose something; returns
    the path set, or None. Call before the ROS context is initialised."""
    env = os.environ if environ is None else environ
    rmw = env.get('RMW_IMPLEMENTATION', '')
    if any(env.get(k) for k in USER_CHOICES) or (rmw and 'fastrtps' not in rmw):
        return None
    path = profile_path(share)
    if path is not None:
        env.update(dict.fromkeys(PROFILE_VARIABLES, path))
    return path
