"""The sensors a model carries from its robot description, as the package's own settings.

The URDF import (``description.sensor_mounts``) mounts each sensor a description declares
(Gazebo tags, ros2_control sensors) and writes the declarations into the model as one
custom text. This module reads them back from any compiled model and turns them into what
the existing machinery already takes, so there is one path, not two: a lidar becomes a
device file ``lidars:`` entry (``settings.lidar_entry``), an IMU, force-torque or contact
sensor a ``sensors:`` entry (rate, frame, topic, noise: ``catalog.configure``), a camera
the defaults of its image channel. A device file's own entries win over these, key by
key. A model without the text (every MJCF written by hand) declares nothing.
"""


from typing import Any

import mujoco

from ..config.sensor_settings import lidar_entry, NoiseSpec
from ..description.gazebo_sensors import from_json, SensorDeclaration, TEXT_NAME
from ..errors import ConfigError

CAMERA_KINDS = ('camera', 'depth', 'rgbd')
GROUP_TOPIC = {'imu': 'imu', 'force_torque': 'wrench', 'contact': 'contact'}


def declarations(model: mujoco.MjModel) -> list[SensorDeclaration]:
    """The declarations the model carries (``[]`` without any). A robot spawned into a
    world under a prefix (``ns/``: the robots file, ``spawn_entity``) carries its text
    under that prefix, as its sites, cameras and links: its sensors are named with it,
    and its relative topics go under the robot's namespace."""
    out = []
    for tid in range(model.ntext):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_TEXT, tid) or ''
        if not name.endswith(TEXT_NAME):
            continue
        prefix = name[:-len(TEXT_NAME)]
        adr, size = int(model.text_adr[tid]), int(model.text_size[tid])
        raw = bytes(model.text_data[adr:adr + size]).split(b'\0', 1)[0]
        for d in from_json(raw.decode('utf-8', errors='replace')):
            if prefix:
                d.name, d.link = prefix + d.name, prefix + d.link
                d.frame = prefix + d.frame if d.frame else ''
                d.topics = {k: t if t.startswith('/') else prefix + t
                            for k, t in d.topics.items()}
            out.append(d)
    return out


def _spec(noise: Any) -> NoiseSpec:
    return NoiseSpec(bias=float(noise.mean), std=float(noise.stddev))


def lidar_settings(model: mujoco.MjModel) -> dict[str, dict]:
    """name -> checked lidar settings (as a device file's ``lidars:`` entry) of each
    declared lidar, cast from the site of its name."""
    out = {}
    for d in declarations(model):
        if d.kind != 'lidar':
            continue
        output = next(o for o in ('scan', 'range', 'points') if o in d.topics)
        entry = {'site': d.name, 'rate': d.rate, 'rays': d.samples,
                 'vertical_rays': d.vertical_samples,
                 'angle_min': d.min_angle, 'angle_max': d.max_angle,
                 'range_min': d.range_min, 'range_max': d.range_max,
                 'frame': d.frame or d.link, 'topic': d.topics[output], 'output': output}
        if d.radiation:
            entry['radiation'] = d.radiation
        if d.vertical_samples > 1:
            entry.update(vertical_angle_min=d.vertical_min_angle,
                         vertical_angle_max=d.vertical_max_angle)
        out[d.name] = lidar_entry(d.name, entry, f'robot_description sensor {d.name}')
        if 'range' in d.noise:
            out[d.name]['noise'] = _spec(d.noise['range'])
    return out


def sensor_entries(model: mujoco.MjModel) -> dict[str, dict]:
    """``sensors:`` entries (group or sensor name -> rate, frame, topic, noise) of the
    declared IMUs, force-torque and contact sensors, named as ``catalog.discover`` names
    their groups: an IMU or force-torque group by its site, a touch group by its sensor."""
    out: dict[str, dict] = {}
    for d in declarations(model):
        if d.kind not in GROUP_TOPIC:
            continue
        group = f'{d.name}_touch' if d.kind == 'contact' else d.name
        out[group] = {'rate': d.rate, 'frame': d.frame or d.link,
                      'topic': d.topics.get(GROUP_TOPIC[d.kind], f'sensors/{group}')}
        for role, noise in d.noise.items():
            if not noise.off:
                out[f'{d.name}_{role}'] = {'noise': _spec(noise)}
        if d.kind == 'force_torque' and d.measure_direction == 'child_to_parent':
            # MuJoCo measures what the parent applies to the child; Gazebo's default is
            # the child's push on the parent: the same wrench with the other sign
            for role in ('force', 'torque'):
                out.setdefault(f'{d.name}_{role}', {})['sign'] = -1.0
    return out


def cameras(model: mujoco.MjModel) -> dict[str, SensorDeclaration]:
    """MuJoCo camera name -> the declaration of a declared camera (depth, RGB-D)."""
    return {d.name: d for d in declarations(model) if d.kind in CAMERA_KINDS}


def optical_frame(d: SensorDeclaration) -> str:
    """The frame a declared camera's images are stamped with: the tag's frame, else the
    link's optical frame (REP-103: z forward, x right, y down)."""
    return d.frame or f'{d.link}_optical_frame'


def merged(declared: dict[str, dict], given: dict[str, dict]) -> dict[str, dict]:
    """``declared`` entries with a device file's ``given`` ones laid over them, key by
    key: the user's file wins where it says something."""
    out = {name: dict(entry) for name, entry in declared.items()}
    for name, entry in given.items():
        # a device file entry always carries a noise model; one that is off says nothing
        said = {k: v for k, v in entry.items() if not (k == 'noise' and v.off)}
        out[name] = {**out.get(name, {}), **said}
    return out


def with_cameras(path: str, cameras: dict[str, dict], folder: str) -> str:
    """The model file ``path`` with a device file's ``cameras:`` (``settings.
    parse_cameras``) mounted on their bodies as a URDF camera tag's would be, written into
    ``folder``; ``path`` itself when there are none. A body the model lacks is a
    ConfigError listing the bodies."""
    if not cameras:
        return path
    from ..description.sensor_mounts import mount_on_file
    model = mujoco.MjModel.from_xml_path(path)
    bodies = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or ''
              for b in range(1, model.nbody)]
    decls = []
    for name, c in cameras.items():
        if c['body'] not in bodies:
            raise ConfigError(f'camera {name!r}: the model has no body {c["body"]!r}',
                              where=f'cameras.{name}.body',
                              allowed=', '.join(b for b in bodies if b)[:1000] or 'none')
        if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name) >= 0:
            raise ConfigError(f'the model has a camera {name!r} already; name this one '
                              'otherwise', where=f'cameras.{name}')
        decls.append(SensorDeclaration(
            name=name, kind='depth' if c['depth'] else 'camera', link=c['body'],
            source='device_file', pose=tuple(c['pos']) + tuple(c['rpy']),
            frame=c['frame'] or f'{name}_optical_frame', rate=c['rate'], width=c['width'],
            height=c['height'], horizontal_fov=c['horizontal_fov'], near=0.01, far=100.0))
    return mount_on_file(path, decls, folder)
