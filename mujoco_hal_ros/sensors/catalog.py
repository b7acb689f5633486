"""A model's ``<sensor>`` block, grouped into what a ROS user reads.

MuJoCo lists sensors one by one; ROS users expect messages: an accelerometer, a gyro and a
framequat on one site are one IMU, a force and a torque on one site one wrench. The
catalog does that grouping once per model, from the model alone (zero config), then lets
the device file's ``sensors:`` section (``settings.parse_sensors``) set each group's rate,
frame, noise, or turn it off. Readings come from a snapshot's ``sensordata`` copy, never
from MjData.
"""

from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from ..config.sensor_settings import NoiseSpec
from ..errors import ConfigError
from .noise import Noise

S = mujoco.mjtSensor
OBJ = mujoco.mjtObj
DEFAULT_RATE = 100.0
IMU_ROLES = {int(S.mjSENS_ACCELEROMETER): 'accel', int(S.mjSENS_GYRO): 'gyro'}
WRENCH_ROLES = {int(S.mjSENS_FORCE): 'force', int(S.mjSENS_TORQUE): 'torque'}
JOINT_ROLES = {int(S.mjSENS_JOINTPOS): 'position', int(S.mjSENS_JOINTVEL): 'velocity',
               int(S.mjSENS_JOINTACTFRC): 'effort'}
ACTUATOR_ROLES = {int(S.mjSENS_ACTUATORPOS): 'position', int(S.mjSENS_ACTUATORVEL): 'velocity',
                  int(S.mjSENS_ACTUATORFRC): 'effort'}
KINDS = ('imu', 'wrench', 'range', 'touch', 'pose', 'joints', 'actuators', 'generic')


@dataclass
class Part:
    """One MuJoCo sensor inside a group: its role there and where its values are."""

    sensor: str
    role: str
    adr: int
    dim: int
    target: str = ''          # joint or actuator name (joints/actuators groups)
    noise: Noise | None = None
    sign: float = 1.0         # -1: reported the other way round (a description's convention)


@dataclass
class Group:
    """One ROS message stream: ``sensors/<name>``."""

    name: str
    kind: str
    site: int = -1            # the site whose frame the readings are in (-1: world/none)
    frame_object: str = ''    # its name (site, or the object a pose is of)
    parts: list = field(default_factory=list)
    rate: float = DEFAULT_RATE
    frame: str = ''           # an explicit frame name from the device file ('' = the site's)
    topic: str = ''           # an explicit topic ('' = sensors/<name>)
    enabled: bool = True
    variances: dict = field(default_factory=dict)   # role -> per-component variance

    def part(self, role: str) -> 'Part | None':
        return next((p for p in self.parts if p.role == role), None)

    def read(self, sensordata: np.ndarray, t: float
             ) -> tuple[float, dict[Any, np.ndarray]] | None:
        """``(t_measured, {role: values})``, or None if the noise model dropped it (or a
        delay has nothing old enough yet). Values are fresh arrays."""
        out, stamp = {}, t
        for p in self.parts:
            values = sensordata[p.adr:p.adr + p.dim]
            if p.sign != 1.0:
                values = p.sign * values
            if p.noise is not None:
                got = p.noise.apply(t, values)
                if got is None:
                    return None
                stamp, values = got
            out[p.role if self.kind not in ('joints', 'actuators') else
                (p.role, p.target)] = np.array(values, dtype=float)
        return stamp, out

    @property
    def sensors(self) -> list[int]:
        return [p.sensor for p in self.parts]


def _name(model, objtype, i, fallback):
    return mujoco.mj_id2name(model, objtype, i) or f'{fallback}{i}'


def discover(model: mujoco.MjModel) -> list[Group]:
    """The groups of a model's sensors, in model order, with their default settings."""
    m = model
    groups: dict[Any, Group] = {}
    order = []

    def group(key, name, kind, **kw):
        if key not in groups:
            unique, k = name, 2
            taken = {g.name for g in groups.values()}
            while unique in taken:
                unique, k = f'{name}_{k}', k + 1
            groups[key] = Group(unique, kind, **kw)
            order.append(key)
        return groups[key]

    for i in range(m.nsensor):
        t, obj, oid = int(m.sensor_type[i]), int(m.sensor_objtype[i]), int(m.sensor_objid[i])
        sname = _name(m, OBJ.mjOBJ_SENSOR, i, 'sensor')
        adr, dim = int(m.sensor_adr[i]), int(m.sensor_dim[i])
        on_site = obj == int(OBJ.mjOBJ_SITE)
        site_name = _name(m, OBJ.mjOBJ_SITE, oid, 'site') if on_site else ''
        unref = int(m.sensor_reftype[i]) == int(OBJ.mjOBJ_UNKNOWN) or m.sensor_refid[i] < 0
        if t in IMU_ROLES and on_site:
            g = group(('imu', oid), site_name, 'imu', site=oid, frame_object=site_name)
            role = IMU_ROLES[t]
        elif t in WRENCH_ROLES and on_site:
            g = group(('wrench', oid), site_name, 'wrench', site=oid, frame_object=site_name)
            role = WRENCH_ROLES[t]
        elif t == int(S.mjSENS_RANGEFINDER) and on_site and dim == 1:
            g = group(('range', i), sname, 'range', site=oid, frame_object=site_name)
            role = 'range'
        elif t == int(S.mjSENS_TOUCH) and on_site:
            g = group(('touch', i), sname, 'touch', site=oid, frame_object=site_name)
            role = 'force'
        elif t in (int(S.mjSENS_FRAMEPOS), int(S.mjSENS_FRAMEQUAT)) and unref:
            key: tuple[Any, ...] = ('frame', obj, oid)
            role = 'position' if t == int(S.mjSENS_FRAMEPOS) else 'orientation'
            imu = groups.get(('imu', oid)) if on_site else None
            if imu is not None and role == 'orientation' and imu.part('orientation') is None:
                g = imu
            else:
                existing = groups.get(key)
                if existing is not None and existing.part(role) is not None:
                    key = ('frame', obj, oid, i)
                objname = mujoco.mj_id2name(m, obj, oid) or sname
                g = group(key, objname, 'pose', site=oid if on_site else -1,
                          frame_object=objname)
        elif t in JOINT_ROLES:
            g = group(('joints',), 'joint_states', 'joints')
            role = JOINT_ROLES[t]
        elif t in ACTUATOR_ROLES:
            g = group(('actuators',), 'actuator_states', 'actuators')
            role = ACTUATOR_ROLES[t]
        else:      # on a site: a velocimeter, magnetometer... reads in the site's frame
            g = group(('generic', i), sname, 'generic', site=oid if on_site else -1,
                      frame_object=site_name)
            role = 'data'
        target = ''
        if g.kind == 'joints':
            target = _name(m, OBJ.mjOBJ_JOINT, oid, 'joint')
        elif g.kind == 'actuators':
            target = _name(m, OBJ.mjOBJ_ACTUATOR, oid, 'actuator')
        g.parts.append(Part(sname, role, adr, dim, target))
        if float(m.sensor_noise[i]) > 0:
            g.variances[role] = float(m.sensor_noise[i]) ** 2
    return [groups[k] for k in order]


def configure(model: mujoco.MjModel, settings: dict[str, Any] | None = None) -> list[Group]:
    """``discover`` plus the device file's ``sensors:`` settings (see settings.py): rates,
    frames, on/off, noise models seeded from ``settings['seed']``. A name that is neither a
    group nor a sensor is a ConfigError listing what there is."""
    groups = discover(model)
    settings = settings or {'seed': 0, 'rate': None, 'entries': {}}
    seed = settings.get('seed', 0)
    default_rate = settings.get('rate') or DEFAULT_RATE
    by_group = {g.name: g for g in groups}
    by_sensor = {p.sensor: (g, p) for g in groups for p in g.parts}
    for g in groups:
        g.rate = default_rate
    for name, entry in settings.get('entries', {}).items():
        where = f'sensors.{name}'
        if name in by_group:
            g, parts = by_group[name], by_group[name].parts
        elif name in by_sensor:
            g, part = by_sensor[name]
            parts = [part]
        else:
            known = sorted(set(by_group) | set(by_sensor))
            raise ConfigError(f'the model has no sensor or sensor group {name!r}', where=where,
                              allowed=', '.join(known) or 'none: the model has no sensors')
        if 'rate' in entry:
            g.rate = entry['rate']
        if 'frame' in entry:
            g.frame = entry['frame']
        if 'topic' in entry:
            g.topic = entry['topic']
        if 'sign' in entry:            # from a robot description only (sensors.declared)
            for p in parts:
                p.sign = float(entry['sign'])
        if 'enabled' in entry:
            g.enabled = entry['enabled']
        spec = entry.get('noise', NoiseSpec())
        if not spec.off:
            for p in parts:
                p.noise = Noise(spec, seed, p.sensor)
                if spec.std:
                    g.variances[p.role] = spec.std ** 2
    return groups
