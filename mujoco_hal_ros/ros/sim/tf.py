"""TF frames of a model: the body tree (parent -> child), and each camera's optical frame.

The tree follows MuJoCo's body tree under the frame names the generated URDF uses
(``description.frames``), so rviz's RobotModel and MoveIt find every link, and a real
arm's robot_state_publisher publishes the same edges. The poses still come from the
physics: each is the body's pose in its parent's, computed from the snapshot's world
poses, so no chain can disagree with MuJoCo. A body with no joint (welded to its parent,
a URDF fixed joint) goes to ``/tf_static`` once, relative to its parent. A floating base
(free joint) hangs from its parent, the world frame. With ``bodies=False``
(``publish_tf:=false``) no body is published: a robot_state_publisher fed the
robot_description owns those; the cameras' optical frames stay ours. Cameras that track a
body (MuJoCo camera modes other than fixed) move with the state: their optical frames go
on ``/tf`` under the world frame, whether or not anyone watches their images; fixed
cameras' go on ``/tf_static``, relative to their body.

A floating-base robot (a root body on a free joint with joints below it: Go1, Spot) is
published as REP-105 has it: ``world -> odom`` static identity and ``odom -> <base body>``
on ``/tf`` (the simulated odometry is exact, so odom never drifts from the world); the
rest of that robot hangs from the base as its body tree says. So rviz's fixed frame may be
``odom`` or the base, and nav2 finds the ``odom -> base`` it expects. ``odom_frame:=''``
hangs the base from the world frame. Free objects stay under the world frame.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TYPE_CHECKING

from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
import mujoco
import numpy as np

from ... import joint_view
from ...description import frames as df
from ...sensors import declared
from .. import conversions as cv

if TYPE_CHECKING:                      # types only: no import at run time
    from ...sim.snapshot import Snapshot

# Quaternion (w, x, y, z) of OPTICAL_FROM_MUJOCO = diag(1, -1, -1): 180 degrees about x.
Q_OPTICAL = np.array([0.0, 1.0, 0.0, 0.0])
OPTICAL_AXES = np.array([1.0, -1.0, -1.0])     # the same, on a rotation matrix's columns


class FrameTree:
    """Frame names, each frame's parent and which transforms are static, decided once."""

    def __init__(self, model: mujoco.MjModel, prefix: str = '', world: str = 'world',
                 odom: str = 'odom', bodies: bool = True, base_tf: bool = True,
                 external: Iterable[str] = ()) -> None:
        # external: frames whose transform another part publishes (a robots-file robot's
        # drive controller: its base from its wheel odometry)
        self.model = model
        self._settings = (prefix, world, odom, bodies, base_tf, tuple(external))
        self.prefix = prefix
        self.world = world
        self.body_frames = df.body_frame_names(model, prefix, world)
        static = df.fixed_to_parent(model)
        every = range(1, model.nbody) if bodies else ()
        self.static_bodies = [b for b in every if static[b]]
        self.dynamic_bodies = [b for b in every if not static[b]]
        # REP-105 for a floating base: world -> odom (static) -> base -> its body tree
        self.base = joint_view.view(model).floating_base if odom and bodies else None
        self.odom = prefix + odom if self.base is not None else None
        if not base_tf and self.base is not None and self.base in self.dynamic_bodies:
            # a drive controller's wheel odometry publishes odom -> base (mobile.base)
            self.dynamic_bodies.remove(self.base)
        if external:
            self.dynamic_bodies = [b for b in self.dynamic_bodies
                                   if self.body_frames[b] not in set(external)]
        self.cameras: dict[str, dict[str, Any]] = {}
        declared_cameras = declared.cameras(model)
        for c in range(model.ncam):
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, c)
            if not name:
                continue
            fixed = int(model.cam_mode[c]) == int(mujoco.mjtCamLight.mjCAMLIGHT_FIXED)
            frame = f'{prefix}{name}_optical_frame'
            if name in declared_cameras:      # the frame the description's tag names
                frame = prefix + declared.optical_frame(declared_cameras[name])
            self.cameras[name] = {'id': c, 'frame': frame, 'fixed': fixed,
                                  'body': int(model.cam_bodyid[c]),
                                  # a URDF link of that name is on /tf already
                                  'is_body': frame in self.body_frames}
        self.tracking_cameras = [cam['id'] for cam in self.cameras.values() if not cam['fixed']]
        self._bodies = np.asarray(self.dynamic_bodies, dtype=np.intp)
        self._parents = np.asarray(model.body_parentid[self._bodies], dtype=np.intp)
        self._cams = np.asarray(self.tracking_cameras, dtype=np.intp)
        # every frame /tf carries, and the frame each is published against
        self.moving_frames = [self.body_frames[b] for b in self.dynamic_bodies] + [
            cam['frame'] for cam in self.cameras.values() if not cam['fixed']]
        base_parent = self.odom if self.odom is not None else world   # set with self.base
        self.moving_parents = [
            base_parent if b == self.base else self.body_frames[p]
            for b, p in zip(self.dynamic_bodies, self._parents, strict=True)] + [
            world for cam in self.cameras.values() if not cam['fixed']]
        self._dynamic_msgs = [self._transform(parent, f)
                              for parent, f in zip(self.moving_parents, self.moving_frames,
                                                   strict=True)]
        self._cam_quat = np.empty((len(self._cams), 4))

    def for_model(self, model: mujoco.MjModel) -> FrameTree:
        """The frame tree of another model (a scene edit swapped it in), named the same
        way."""
        return FrameTree(model, *self._settings)

    def optical_frame(self, camera: str) -> str:
        return self.cameras[camera]['frame']

    @staticmethod
    def _transform(parent, child):
        t = TransformStamped()
        t.header.frame_id = parent
        t.child_frame_id = child
        return t

    @staticmethod
    def _pose(t, pos, wxyz):
        tr, rot = t.transform.translation, t.transform.rotation
        tr.x, tr.y, tr.z = (float(v) for v in pos)
        rot.w, rot.x, rot.y, rot.z = (float(v) for v in wxyz)
        return t

    def static_transforms(self, snapshot: Snapshot, stamp: Time) -> list[TransformStamped]:
        """Bodies fixed to their parent, fixed cameras' optical frames on their body, and
        world -> odom (identity) for a floating base."""
        out = []
        if self.odom is not None and self.odom != self.world:   # world_frame:=odom: one frame
            t = self._transform(self.world, self.odom)
            t.header.stamp = stamp
            out.append(self._pose(t, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)))
        m = self.model
        for b in self.static_bodies:
            t = self._transform(self.body_frames[m.body_parentid[b]], self.body_frames[b])
            t.header.stamp = stamp
            out.append(self._pose(t, m.body_pos[b], m.body_quat[b]))
        for cam in self.cameras.values():
            if not cam['fixed'] or cam['is_body']:
                continue
            c = cam['id']
            t = self._transform(self.body_frames[cam['body']], cam['frame'])
            t.header.stamp = stamp
            out.append(self._pose(t, m.cam_pos[c], cv.quat_mul(m.cam_quat[c], Q_OPTICAL)))
        return out

    def moving_poses(self, snapshot: Snapshot) -> tuple[np.ndarray, np.ndarray]:
        """Positions (n, 3) and quaternions (n, 4, w first) of ``moving_frames``, each in
        its ``moving_parents`` frame."""
        pos, quat = df.relative_poses(snapshot.xpos, snapshot.xquat, self._bodies,
                                      self._parents)
        if not len(self._cams):
            return pos, quat
        for i, c in enumerate(self._cams):
            optical = snapshot.cam_xmat[c].reshape(3, 3) * OPTICAL_AXES
            mujoco.mju_mat2Quat(self._cam_quat[i], optical.ravel())
        return (np.concatenate([pos, snapshot.cam_xpos[self._cams]]),
                np.concatenate([quat, self._cam_quat]))

    def dynamic_transforms(self, snapshot: Snapshot, stamp: Time
                           ) -> list[TransformStamped]:
        """parent -> every moving frame; the message objects are reused between calls."""
        pos, quat = self.moving_poses(snapshot)
        for t, p, q in zip(self._dynamic_msgs, pos, quat, strict=True):
            t.header.stamp = stamp
            self._pose(t, p, q)
        return self._dynamic_msgs
