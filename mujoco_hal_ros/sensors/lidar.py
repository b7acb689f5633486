"""Simulated lidar: planar or 3D scan patterns cast with MuJoCo's ``mj_multiRay``.

Rays are cast on a private MjData posed from a snapshot (``qpos``, mocap), never on the
stepper's, so a scan never waits on physics or changes it. ``mj_multiRay`` casts every ray
of a scan from one point in C. Excluding the robot itself (``exclude_robot``) moves the
robot's geoms out of the way on that private copy: ``mj_multiRay`` can exclude only one
body, and a scanner on a trunk would otherwise see its own legs.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from ..checks import known_name
from ..errors import ConfigError
from .noise import Noise

FAR = 1e9          # where excluded geoms go on the private MjData


@dataclass(frozen=True)
class ScanPattern:
    """Directions of one scan in the site's frame: (n, 3) unit vectors, azimuth fastest."""

    azimuths: np.ndarray
    elevations: np.ndarray
    directions: np.ndarray

    @property
    def planar(self) -> bool:
        return len(self.elevations) == 1 and self.elevations[0] == 0.0


def pattern(rays: int, fov: float, vertical_rays: int = 1, vertical_fov: float = 0.0,
            angles: Sequence[float] | None = None,
            vertical_angles: Sequence[float] | None = None) -> ScanPattern:
    """Azimuths across ``fov`` centred on the site's x axis (a full turn has no duplicate
    end ray), elevations across ``vertical_fov`` centred on its xy plane. ``angles`` /
    ``vertical_angles`` ``(min, max)``: rays from one to the other, both ends included,
    as a Gazebo scan spreads its samples (a URDF's ``<min_angle>``/``<max_angle>``)."""
    if angles is not None:
        az = np.linspace(angles[0], angles[1], rays) if rays > 1 else np.array([angles[0]])
    elif fov >= 2 * np.pi - 1e-9:
        az = -np.pi + 2 * np.pi * np.arange(rays) / rays
    else:
        az = np.linspace(-fov / 2, fov / 2, rays) if rays > 1 else np.zeros(1)
    if vertical_angles is not None:
        el = np.linspace(vertical_angles[0], vertical_angles[1], vertical_rays) \
            if vertical_rays > 1 else np.array([vertical_angles[0]], dtype=float)
    elif vertical_rays > 1:
        el = np.linspace(-vertical_fov / 2, vertical_fov / 2, vertical_rays)
    else:
        el = np.zeros(1)
    e, a = np.meshgrid(el, az, indexing='ij')
    dirs = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], axis=-1)
    return ScanPattern(az, el, dirs.reshape(-1, 3))


def _mount(model, cfg):
    """(site id or -1, body id, position, w-first quaternion of the scanner in the body):
    from the settings' ``site``, or their ``body`` with ``pos`` and ``rpy``."""
    kind, objtype = ('site', mujoco.mjtObj.mjOBJ_SITE) if cfg.get('site') else \
        ('body', mujoco.mjtObj.mjOBJ_BODY)
    count = model.nsite if kind == 'site' else model.nbody
    names = [mujoco.mj_id2name(model, objtype, i) or '' for i in range(count)]
    try:
        known_name(cfg.get(kind) or '', [s for s in names if s], kind)
    except Exception as err:
        raise ConfigError(f'lidar {cfg["name"]!r}: {err}',
                          where=f'lidars.{cfg["name"]}.{kind}',
                          allowed=', '.join(s for s in names if s) or 'none') from None
    oid = names.index(cfg[kind])
    if kind == 'site':
        return oid, int(model.site_bodyid[oid]), np.array(model.site_pos[oid], float), \
            np.array(model.site_quat[oid], float)
    quat = np.zeros(4)
    mujoco.mju_euler2Quat(quat, np.asarray(cfg.get('rpy') or (0.0, 0.0, 0.0), float), 'XYZ')
    return -1, oid, np.asarray(cfg.get('pos') or (0.0, 0.0, 0.0), float), quat


def _pair(cfg, prefix):
    lo, hi = cfg.get(f'{prefix}angle_min'), cfg.get(f'{prefix}angle_max')
    return None if lo is None or hi is None else (lo, hi)


@dataclass
class Scan:
    """One scan: ``ranges`` (n,) metres (inf: no return within range), hit points in the
    site's frame (n, 3; NaN without a return), and the snapshot time it shows."""

    time: float
    ranges: np.ndarray
    points: np.ndarray
    geoms: np.ndarray


class Lidar:
    """A scanner on a site; ``scan(snapshot)`` from any one thread at a time."""

    def __init__(self, model: mujoco.MjModel, cfg: dict[str, Any]):
        self.model = model
        self.cfg = cfg
        self.site, body, self.offset_pos, self.offset_quat = _mount(model, cfg)
        self.body = body
        self.pattern = pattern(cfg['rays'], cfg['fov'], cfg['vertical_rays'],
                               cfg['vertical_fov'], _pair(cfg, ''), _pair(cfg, 'vertical_'))
        spec = cfg.get('noise')
        self._noise = None if spec is None or spec.off else Noise(spec, cfg.get('seed', 0),
                                                                  f'lidar/{cfg["name"]}')
        self.data = mujoco.MjData(model)
        n = len(self.pattern.directions)
        self._geomid = np.zeros(n, dtype=np.int32)
        self._dist = np.zeros(n)
        self._bodyexclude = body if body > 0 else -1     # never the world's own geoms
        self._excluded = np.zeros(0, dtype=np.intp)
        if cfg.get('exclude_robot', True) and body > 0:
            root = int(model.body_rootid[body])
            self._excluded = np.flatnonzero(model.body_rootid[model.geom_bodyid] == root)
        group = cfg.get('geomgroup')
        self._group = None if group is None else np.array(group, dtype=np.uint8)
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, self.offset_quat)
        self._offset_rot = rot.reshape(3, 3)

    @property
    def planar(self) -> bool:
        return self.pattern.planar

    @property
    def output(self) -> str:
        """``scan`` (LaserScan), ``points`` (PointCloud2) or ``range`` (Range, the nearest
        return): as the settings say, else LaserScan for a planar pattern."""
        out = self.cfg.get('output', 'auto')
        return out if out != 'auto' else ('scan' if self.planar else 'points')

    def scan(self, snapshot: Any) -> Scan | None:
        m, d = self.model, self.data
        d.qpos[:] = snapshot.qpos
        if m.nmocap:
            d.mocap_pos[:] = snapshot.mocap_pos
            d.mocap_quat[:] = snapshot.mocap_quat
        mujoco.mj_kinematics(m, d)
        if len(self._excluded):
            d.geom_xpos[self._excluded] = FAR
        if self.site >= 0:
            origin = d.site_xpos[self.site].copy()
            rot = d.site_xmat[self.site].reshape(3, 3)
        else:                 # a body and a pose in it (a device file's body: entry)
            body_rot = d.xmat[self.body].reshape(3, 3)
            origin = d.xpos[self.body] + body_rot @ self.offset_pos
            rot = body_rot @ self._offset_rot
        world_dirs = self.pattern.directions @ rot.T
        mujoco.mj_multiRay(m, d, origin, world_dirs.ravel(), self._group, 1,
                           self._bodyexclude, self._geomid, self._dist, None,
                           len(world_dirs), self.cfg['range_max'])
        dist = self._dist.copy()
        hit = (self._geomid >= 0) & (dist >= self.cfg['range_min']) & \
            (dist <= self.cfg['range_max'])
        ranges = np.where(hit, dist, np.inf)
        if self._noise is not None:
            got = self._noise.apply(snapshot.time, ranges)
            if got is None:             # dropped (or delayed past what there is yet)
                return None
            stamp, noisy = got
            # Gaussian noise on each return, kept within the sensor's range as Gazebo's is
            # (no return stays +inf)
            ranges = np.where(np.isfinite(noisy), np.clip(noisy, self.cfg['range_min'],
                                                          self.cfg['range_max']), np.inf)
            hit = np.isfinite(ranges)
            points = self.pattern.directions * np.where(hit, ranges, np.nan)[:, None]
            return Scan(stamp, ranges, points, np.where(hit, self._geomid, -1))
        points = self.pattern.directions * np.where(hit, dist, np.nan)[:, None]
        return Scan(snapshot.time, ranges, points, np.where(hit, self._geomid, -1))
