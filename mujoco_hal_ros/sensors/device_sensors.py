"""A device's sensing and pushing: the sensor streams its device file configures, its
lidars, the contacts its snapshots carry, and the wrenches it applies to bodies.

Every request is checked here in the caller's thread (an unknown body, a non-finite force:
refused with nothing changed); what is accepted goes to the physics thread through the
device's one door (``device.on_physics``) and into its audit. Of the device it sees only
``sim.ports.SensingHost``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TYPE_CHECKING

import mujoco

from .. import errors
from ..checks import known_name
from ..config import sensor_settings
from . import catalog, declared, wrench

if TYPE_CHECKING:
    from ..sim.ports import SensingHost

if TYPE_CHECKING:     # the hints only: the device builds its Sensing
    from .lidar import Lidar


def lidar_settings_of(model: mujoco.MjModel, spec: dict[str, Any] | None
                      ) -> dict[str, dict[str, Any]]:
    """The lidars the model's robot description declares (``declared``) and the device
    file's (name -> settings; the file's win by name), each site checked on ``model``."""
    from .lidar import Lidar
    lidars = {**declared.lidar_settings(model), **((spec or {}).get('lidars') or {})}
    for cfg in lidars.values():
        Lidar(model, cfg)                 # the site must exist: ConfigError otherwise
    return lidars


class Sensing:
    """``device.sensing``: sensors, lidars, contacts and wrenches of one device."""

    def __init__(self, device: SensingHost) -> None:
        self._device = device
        self.sensor_groups()              # a device file naming no such sensor stops here
        self._lidars = lidar_settings_of(device.model, device.spec)

    def adopt(self, lidars: dict) -> None:
        """A swapped model's lidars (checked with ``lidar_settings_of`` before the swap)."""
        self._lidars = lidars

    def sensor_groups(self, seed: int | None = None, rate: float | None = None
                      ) -> list[catalog.Group]:
        """The model's sensors grouped into ROS streams (``sensors.catalog.Group``), with
        the device file's ``sensors:`` settings; ``seed`` and ``rate`` (Hz, for groups
        without their own) replace the file's when given. A fresh list (with fresh, seeded
        noise models) each call, for the one reader that owns it."""
        device = self._device
        spec = dict((device.spec or {}).get('sensors') or {'seed': 0, 'rate': None,
                                                           'entries': {}})
        # what the robot description declares, under what the device file says
        spec['entries'] = declared.merged(declared.sensor_entries(device.model),
                                          spec.get('entries') or {})
        if seed is not None:
            spec['seed'] = int(seed)
        if rate is not None:
            spec['rate'] = float(rate)
        return catalog.configure(device.model, spec)

    def lidar_settings(self, extra: dict[str, dict[str, Any]] | None = None
                       ) -> dict[str, dict[str, Any]]:
        """The device file's lidars (name -> settings), plus ``extra`` entries
        ``{name: {'site': ..., ...}}`` checked as a device file's would be."""
        out = dict(self._lidars)
        for name, entry in (extra or {}).items():
            out[name] = sensor_settings.lidar_entry(name, entry, f'lidars.{name}')
        return out

    def lidar(self, cfg: dict[str, Any]) -> Lidar:
        """A ``sensors.lidar.Lidar`` for checked settings, casting on its own MjData."""
        from .lidar import Lidar
        return Lidar(self._device.model, cfg)

    def report_contacts(self, on: bool = True) -> None:
        """Snapshots carry the active contacts (``snapshot.contacts``) while on: for a
        contacts topic with a subscriber; off, stepping pays nothing for them."""
        self._device.on_physics(lambda p: p.report_contacts(on), wait=False)

    def apply_wrench(self, body: str, force: Sequence[float] = (0.0, 0.0, 0.0),
                     torque: Sequence[float] = (0.0, 0.0, 0.0),
                     point: Sequence[float] = (0.0, 0.0, 0.0), frame: str = wrench.WORLD,
                     duration: float = 0.0) -> dict[str, Any]:
        """Push ``body``: ``force`` (N) and ``torque`` (N m) in ``frame`` (``world`` or a
        body, whose frame they turn with), at ``point`` (m, in the body's frame), every step
        for ``duration`` simulated seconds (0: until ``clear_wrenches`` or ``reset``). A new
        wrench on a body replaces its old one; wrenches on different bodies add up. All
        arguments are checked first (INVALID_ARGUMENT, UNKNOWN_NAME: nothing changes)."""
        device = self._device
        checked = wrench.check(device.model, body, force, torque, point, frame, duration)
        w = device.on_physics(lambda p: p.push(checked), wait=True)
        device.record('apply_wrench', {'body': body, 'force': list(w.force),
                                       'torque': list(w.torque), 'point': list(w.point),
                                       'frame': w.frame_name, 'duration': float(duration)},
                      {}, sim_time=w.start)
        until = 'until cleared' if w.end == float('inf') else f'until t={w.end:.6g} s'
        return {'success': True, 'code': errors.DONE, 'start_time': w.start,
                'end_time': w.end, 'message': f'pushing {body} {until}'}

    def clear_wrenches(self, bodies: Iterable[str] | None = None) -> dict[str, Any]:
        """End the wrenches on ``bodies`` (names; None or empty: all); every name is
        checked first (UNKNOWN_NAME lists the bodies)."""
        device = self._device
        names = wrench.body_names(device.model)
        ids = None
        if bodies:
            if isinstance(bodies, str):
                raise errors.InvalidArgument('expected a list of body names, got a string',
                                             where='bodies')
            ids = [names.index(known_name(b, [n for n in names[1:] if n], 'body'))
                   for b in bodies]
        gone = device.on_physics(lambda p: p.clear_pushes(ids), wait=True)
        device.record('clear_wrenches', {'bodies': list(bodies or [])}, {})
        return {'success': True, 'code': errors.DONE,
                'message': f'cleared {len(gone)} wrench(es)', 'cleared': [names[b] for b in gone]}

    def wrenches(self) -> tuple[wrench.Wrench, ...]:
        """The latched wrenches at the latest snapshot (``sensors.wrench.Wrench``)."""
        return self._device.snapshot.wrenches
