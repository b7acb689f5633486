"""The sensors ``check_robot`` finds on a model, each tried once without ROS.

What a description declares (``sensors.declared``: Gazebo tags, ros2_control sensors) and
what the model itself carries (MJCF ``<sensor>`` groups, cameras) are listed with the
topic, frame and rate sim_node publishes them on; each is asked for one reading at the
model's start pose (a scan, an IMU sample, a camera's intrinsics), so a sensor that would
publish nothing or NaN is a failure here, before a launch.
"""

from dataclasses import dataclass
import math
from types import SimpleNamespace
from typing import Any

import mujoco
import numpy as np

from ..sensors import catalog, declared


@dataclass
class SensorFound:
    name: str
    kind: str
    where: str          # link or site it sits on
    topics: str
    frame: str
    rate: float
    source: str         # gazebo_classic, gazebo_sim, ros2_control or model
    result: str         # pass or FAIL
    detail: str = ''

    def line(self) -> str:
        return (f'{self.result:4s} {self.name} ({self.kind} on {self.where}, {self.source}): '
                f'{self.topics} in {self.frame or "its own frame"} @ {self.rate:g} Hz'
                + (f'; {self.detail}' if self.detail else ''))


def _at_start(model):
    data = mujoco.MjData(model)
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, 'home')
    if key >= 0:
        mujoco.mj_resetDataKeyframe(model, data, key)
    mujoco.mj_forward(model, data)
    return data


def _try_lidar(model: mujoco.MjModel, data: mujoco.MjData,
               cfg: dict[str, Any]) -> tuple[str, str]:
    """(what is wrong or '', what the scan saw) of one scan at ``data``'s pose."""
    from ..sensors.lidar import Lidar
    snap = SimpleNamespace(qpos=data.qpos.copy(), time=float(data.time),
                           mocap_pos=data.mocap_pos.copy(), mocap_quat=data.mocap_quat.copy())
    scan = Lidar(model, cfg).scan(snap)
    if scan is None:
        return '', 'the first scan was dropped by its noise model'
    hits = int(np.isfinite(scan.ranges).sum())
    bad = 'NaN ranges' if np.isnan(scan.ranges).any() else ''
    return bad, f'{hits} of {len(scan.ranges)} rays return'


def find(model: mujoco.MjModel) -> list[SensorFound]:
    """Every sensor of ``model``, tried once at its start pose."""
    data = _at_start(model)
    out = []
    lidars = declared.lidar_settings(model)
    groups = {g.name: g for g in catalog.configure(model, {
        'seed': 0, 'rate': None, 'entries': declared.sensor_entries(model)})}
    used = set()
    for d in declared.declarations(model):
        row = SensorFound(d.name, d.kind, d.link, ', '.join(d.topics.values()),
                          d.frame or d.link, d.rate, d.source, 'pass')
        try:
            if d.kind == 'lidar':
                bad, row.detail = _try_lidar(model, data, lidars[d.name])
            elif d.kind in declared.CAMERA_KINDS:
                cid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, d.name)
                bad = '' if cid >= 0 else 'no camera in the model'
                row.frame = declared.optical_frame(d)
                row.detail = f'{d.width}x{d.height}, {math.degrees(d.horizontal_fov):.0f} ' \
                    'degrees wide'
            else:
                name = f'{d.name}_touch' if d.kind == 'contact' else d.name
                used.add(name)
                g = groups[name]
                got = g.read(data.sensordata, 0.0)
                assert got is not None      # no noise model here: every read gives values
                _t, values = got
                bad = '' if all(np.all(np.isfinite(v)) for v in values.values()) \
                    else 'non-finite reading'
        except Exception as err:  # noqa: BLE001 - the row says what failed
            bad = f'{type(err).__name__}: {err}'
        if bad:
            row.result, row.detail = 'FAIL', bad
        out.append(row)
    tagged = declared.cameras(model)
    for c in range(model.ncam):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, c) or ''
        if name and name not in tagged:
            out.append(SensorFound(name, 'camera', _body(model, int(model.cam_bodyid[c])),
                                   f'{name}/image_raw, {name}/camera_info',
                                   f'{name}_optical_frame', 10.0, 'model', 'pass'))
    for g in groups.values():
        if g.name in used:
            continue
        got = g.read(data.sensordata, 0.0)
        assert got is not None      # no noise model here: every read gives values
        _t, values = got
        ok = all(np.all(np.isfinite(v)) for v in values.values())
        where = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SITE, g.site) if g.site >= 0 \
            else 'world'
        out.append(SensorFound(g.name, g.kind, where or '?', f'sensors/{g.name}',
                               g.frame or where or '', g.rate, 'model',
                               'pass' if ok else 'FAIL', '' if ok else 'non-finite reading'))
    return out


def _body(model: mujoco.MjModel, b: int) -> str:
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or f'body{b}'
