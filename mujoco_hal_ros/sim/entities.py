"""Ground-truth entity state: any body's pose and twist, and teleporting free bodies.

Scenario tests ("put the block here, then run the pick") need what a simulator offers and a
real robot cannot, through the standard simulation_interfaces. Entities are the model's
named bodies. Reading uses a private MjData posed from a snapshot, so it never touches the
stepper's state; writing is posted to the stepper like every other command, and only
bodies that are free to move (a free joint, or a mocap body) can be placed: moving a link
of the arm would break its joints. Of the device it sees only ``sim.ports.EntitiesHost``.
"""

from __future__ import annotations

import threading
from typing import Any, TYPE_CHECKING

import mujoco
import numpy as np

from ..checks import finite_vector
from ..errors import DeviceError, InvalidArgument, shorten, UnknownName
from ..render.state import pose_at
from ..world.bounds import INVALID_POSE, MAX_ANGULAR, MAX_LINEAR, MAX_POSITION  # noqa: F401
from .physics import Physics

if TYPE_CHECKING:
    from .ports import EntitiesHost

if TYPE_CHECKING:     # the hints only: the device owns its Entities
    pass

NOT_MOVABLE = 'NOT_MOVABLE'
STALE_SCENE = 'STALE_SNAPSHOT'     # the request was made against a model since replaced


class Entities:
    """Bodies of one device's model as entities."""

    def __init__(self, device: EntitiesHost) -> None:
        self.device = device
        self._lock = threading.RLock()
        self.generation: int | None = None
        self.follow()

    def follow(self, generation: int | None = None) -> None:
        """Read and place the bodies of the model of ``generation`` (by default the latest
        snapshot's): after a scene edit the names and ids are the new model's."""
        if generation is None:
            generation = self.device.snapshot.generation
        if generation == self.generation:
            return
        model = self.device.cameras.model_of(generation)
        bodies = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)
                  for b in range(model.nbody)]
        with self._lock:
            self._bodies = bodies
            self.names = [n for n in bodies if n and n != 'world']
            self.model = model
            self._data = mujoco.MjData(model)
            self.generation = generation

    def body_id(self, name: str) -> int:
        """The model's body id of an entity (UnknownName, listing them, if it is none)."""
        self.follow()
        return self._id(name)

    def _id(self, name):
        if not isinstance(name, str) or name not in self.names:
            raise UnknownName('entity', name, self.names)
        return self._bodies.index(name)

    def _free_joint(self, bid):
        m = self.model
        if m.body_jntnum[bid] == 1:
            j = m.body_jntadr[bid]
            if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
                return int(j)
        return None

    def movable(self, name: str) -> bool:
        bid = self.body_id(name)
        return self._free_joint(bid) is not None or self.model.body_mocapid[bid] >= 0

    def state(self, name: str, snapshot: Any = None) -> dict[str, Any]:
        """{'position', 'quaternion' (w, x, y, z), 'linear', 'angular', 'time'} in the world
        frame; velocities are those of the body frame's origin."""
        snap = snapshot or self.device.snapshot
        with self._lock:
            self.follow(snap.generation)
            bid = self._id(name)
            d = self._data
            pose_at(self.model, d, snap)
            vel = np.zeros(6)
            mujoco.mj_objectVelocity(self.model, d, mujoco.mjtObj.mjOBJ_XBODY, bid, vel, 0)
            return {'position': d.xpos[bid].copy(), 'quaternion': d.xquat[bid].copy(),
                    'linear': vel[3:].copy(), 'angular': vel[:3].copy(),
                    'time': float(snap.time)}

    def set_state(self, name: str, position: Any = None, quaternion: Any = None,
                  linear: Any = None, angular: Any = None) -> None:
        """Place a free or mocap body (world frame); None leaves that part as it is."""
        bid = self.body_id(name)
        jid = self._free_joint(bid)
        mocap = int(self.model.body_mocapid[bid])
        if jid is None and mocap < 0:
            raise DeviceError(NOT_MOVABLE, f'{shorten(name)} is held by joints of the model; only '
                              'free bodies (a freejoint) and mocap bodies can be placed',
                              where='entity', allowed=', '.join(
                                  n for n in self.names if self.movable(n)) or 'none')
        pos = None if position is None else finite_vector(position, 3, 'position')
        if pos is not None and not np.abs(pos).max() <= MAX_POSITION:
            raise InvalidArgument(f'position {np.abs(pos).max():.4g} m from the origin is '
                                  'beyond any scene', where='position',
                                  allowed=f'|x|, |y|, |z| <= {MAX_POSITION:g} m')
        quat = None
        if quaternion is not None:
            quat = finite_vector(quaternion, 4, 'orientation')
            with np.errstate(over='ignore'):
                norm = float(np.linalg.norm(quat))
            if not 0.99 < norm < 1.01:
                raise DeviceError(INVALID_POSE, f'orientation is not a unit quaternion '
                                  f'(norm {norm:.4g})', where='orientation')
            quat = quat / norm
        lin = None if linear is None else finite_vector(linear, 3, 'linear velocity')
        ang = None if angular is None else finite_vector(angular, 3, 'angular velocity')
        for part, v, top, unit in (('linear velocity', lin, MAX_LINEAR, 'm/s'),
                                   ('angular velocity', ang, MAX_ANGULAR, 'rad/s')):
            if v is None:
                continue
            with np.errstate(over='ignore'):
                speed = float(np.linalg.norm(v))
            if not speed <= top:
                raise InvalidArgument(f'{part} of {speed:.4g} {unit} is beyond what the '
                                      'simulation can integrate', where=part,
                                      allowed=f'up to {top:g} {unit}')
        if jid is None and ((lin is not None and lin.any()) or (ang is not None and ang.any())):
            raise InvalidArgument(f'{shorten(name)} is a mocap body: it has a pose, not a '
                                  'velocity',
                                  where='twist', allowed='zero twist')
        m, generation = self.model, self.generation

        def apply(s: Physics) -> None:
            if s.generation != generation:
                raise DeviceError(STALE_SCENE, f'the scene changed before {shorten(name)} was '
                                  'placed; nothing was changed: send it again', where='entity')
            d = s.data
            if jid is not None:
                qa, da = int(m.jnt_qposadr[jid]), int(m.jnt_dofadr[jid])
                if pos is not None:
                    d.qpos[qa:qa + 3] = pos
                if quat is not None:
                    d.qpos[qa + 3:qa + 7] = quat
                if lin is not None:
                    d.qvel[da:da + 3] = lin
                if ang is not None:
                    # A free joint's angular velocity is in the body frame; ours is world.
                    rot = np.zeros(9)
                    mujoco.mju_quat2Mat(rot, d.qpos[qa + 3:qa + 7])
                    d.qvel[da + 3:da + 6] = rot.reshape(3, 3).T @ ang
            else:
                if pos is not None:
                    d.mocap_pos[mocap] = pos
                if quat is not None:
                    d.mocap_quat[mocap] = quat
            mujoco.mj_forward(m, d)
            s.publish_snapshot()
        self.device.on_physics(apply, wait=True)
        self.device.record('set_entity_state', {'entity': name}, {})
