"""Pushes on the world: the table of active wrenches the stepper applies every step.

A wrench is latched: it acts on its body at every step until its simulated end time, or
until it is cleared or the device resets. MuJoCo's ``xfrc_applied`` is a force and torque
at the body's centre of mass in world coordinates, so each step turns a request (force and
torque in a reference frame, applied at a point fixed in the body) into that, on the
stepper thread with the current poses: a force in a body's frame turns with the body.
The table is checked in the caller's thread and owned by the stepper (one per device).
"""

from collections.abc import Iterable
from dataclasses import dataclass
import math
from typing import Any

import mujoco
import numpy as np

from ..checks import finite_number, is_bool, known_name
from ..errors import InvalidArgument
from ..world import bounds

WORLD = 'world'


@dataclass(frozen=True)
class Wrench:
    """One latched push: vectors as given, ``frame`` -1 for the world else a body id."""

    body: int
    body_name: str
    force: np.ndarray
    torque: np.ndarray
    point: np.ndarray
    frame: int
    frame_name: str
    start: float
    end: float                # simulated time it stops (inf: until cleared)


def body_names(model: mujoco.MjModel) -> list[str]:
    return [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or '' for b in
            range(model.nbody)]


def check(model: mujoco.MjModel, body: Any, force: Any = (0.0, 0.0, 0.0),
          torque: Any = (0.0, 0.0, 0.0), point: Any = (0.0, 0.0, 0.0), frame: Any = WORLD,
          duration: float = 0.0) -> dict[str, Any]:
    """Checked arguments of ``apply_wrench`` (every one before anything changes): a dict
    for ``Wrench`` without the times. ``duration`` in simulated seconds; 0 = until cleared."""
    names = body_names(model)
    movable = [n for b, n in enumerate(names) if n and b > 0]
    known_name(body, movable, 'body')
    f = bounds.magnitude(force, 3, bounds.MAX_FORCE, 'force', 'N')
    t = bounds.magnitude(torque, 3, bounds.MAX_TORQUE, 'torque', 'N m')
    p = bounds.position(point, 'point')
    if is_bool(duration):
        raise InvalidArgument(f'expected seconds, got boolean {duration!r}', where='duration')
    dur = finite_number(duration, 'duration')
    if dur < 0:
        raise InvalidArgument(f'duration must be 0 (until cleared) or above, got {dur:g}',
                              where='duration', allowed='seconds of simulated time >= 0')
    dur = bounds.duration(dur, 'duration')
    if frame in (None, '', WORLD):
        fid, fname = -1, WORLD
    else:
        known_name(frame, [WORLD] + [n for n in names if n], 'reference frame')
        fid, fname = names.index(frame), frame
    return {'body': names.index(body), 'body_name': body, 'force': f, 'torque': t,
            'point': p, 'frame': fid, 'frame_name': fname, 'duration': dur}


class WrenchTable:
    """The active wrenches, body -> Wrench (a new one on a body replaces the old); stepper
    thread only, except ``active``, which is a tuple swapped in whole."""

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self._by_body: dict[int, Wrench] = {}
        self.active: tuple[Wrench, ...] = ()
        self._touched: set[int] = set()   # bodies whose xfrc_applied rows this table wrote

    def __bool__(self) -> bool:
        return bool(self._by_body)

    def add(self, checked: dict[str, Any], now: float) -> Wrench:
        dur = checked.pop('duration')
        w = Wrench(**checked, start=now, end=now + dur if dur > 0 else math.inf)
        self._by_body[w.body] = w
        self.active = tuple(self._by_body.values())
        return w

    def clear(self, bodies: Iterable[int] | None = None) -> list[int]:
        """Remove the wrenches on ``bodies`` (ids; None: all); the ids of those removed."""
        gone = [b for b in self._by_body if bodies is None or b in bodies]
        for b in gone:
            del self._by_body[b]
        self.active = tuple(self._by_body.values())
        return gone

    def apply(self, data: mujoco.MjData) -> None:
        """Write this step's ``xfrc_applied`` (stepper thread): the wrenches still running
        at ``data.time``, zero on bodies this table pushed before; ended ones drop out."""
        self.expire(data)
        xfrc = data.xfrc_applied
        for b in self._touched:
            xfrc[b] = 0.0
        self._touched = set(self._by_body)
        for w in self._by_body.values():
            if w.frame >= 0:
                rot = data.xmat[w.frame].reshape(3, 3)
                f, t = rot @ w.force, rot @ w.torque
            else:
                f, t = w.force, w.torque
            at = data.xpos[w.body] + data.xmat[w.body].reshape(3, 3) @ w.point
            arm = at - data.xipos[w.body]
            xfrc[w.body, :3] += f
            xfrc[w.body, 3:] += t + np.cross(arm, f)

    def expire(self, data: mujoco.MjData) -> None:
        """Drop the wrenches that ended by ``data.time`` and zero their rows (stepper
        thread: also after a chunk, so the snapshot no longer lists them)."""
        now = data.time
        ended = [b for b, w in self._by_body.items() if w.end <= now + 1e-12]
        if ended:
            self.clear(ended)
            for b in ended:
                data.xfrc_applied[b] = 0.0
                self._touched.discard(b)

    def release(self, data: mujoco.MjData) -> None:
        """Zero what this table wrote (after a clear or reset)."""
        for b in self._touched:
            data.xfrc_applied[b] = 0.0
        self._touched = set()
