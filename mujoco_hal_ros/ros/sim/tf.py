"""TF frames of a model: ``world_frame`` -> every body, and each camera's optical frame.

The tree is flat (every body straight under the world frame) because MuJoCo already gives
world poses (``xpos``/``xquat``) in every snapshot: no URDF, no robot_state_publisher,
no chance of a chain disagreeing with the physics. Bodies welded to the world go to
``/tf_static`` once; so do optical frames of fixed cameras, relative to their body.
Cameras that track a body (MuJoCo camera modes other than fixed) move with the state:
their optical frames go on ``/tf`` with the moving bodies, whether or not anyone watches
their images.

A floating-base robot (a root body on a free joint with joints below it: Go1, Spot) is
published as REP-105 and robot_state_publisher would have it: ``world -> odom`` static
identity, ``odom -> <base body>`` on ``/tf`` (the simulated odometry is exact, so odom
never drifts from the world), and every other body of that robot under the base, flat.
So rviz's fixed frame may be ``odom`` or the base, and nav2 finds the ``odom -> base``
it expects. ``odom_frame:=''`` keeps the flat tree. Anything else (free objects, other
robots, tracking cameras) stays under the world frame.
"""

from geometry_msgs.msg import TransformStamped
import mujoco
import numpy as np

from .. import conversions as cv

# Quaternion (w, x, y, z) of OPTICAL_FROM_MUJOCO = diag(1, -1, -1): 180 degrees about x.
Q_OPTICAL = np.array([0.0, 1.0, 0.0, 0.0])
OPTICAL_AXES = np.array([1.0, -1.0, -1.0])     # the same, on a rotation matrix's columns


def _name(model, objtype, i, fallback):
    return mujoco.mj_id2name(model, objtype, i) or f'{fallback}{i}'


def floating_base(model):
    """The first root body on a free joint that carries hinge or slide joints, or None.

    A free body without joints below it (a box, a block on a table) is an object, not a
    robot's base: it stays an ordinary moving body under the world frame.
    """
    free = int(mujoco.mjtJoint.mjJNT_FREE)
    kinds = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    for b in range(1, model.nbody):
        j = int(model.body_jntadr[b])
        if model.body_parentid[b] != 0 or j < 0 or int(model.jnt_type[j]) != free:
            continue
        if any(int(model.jnt_type[k]) in kinds and model.body_rootid[model.jnt_bodyid[k]] == b
               for k in range(model.njnt)):
            return b
    return None


def relative_poses(base_pos, base_quat, pos, quat):
    """Poses (n, 3) and (n, 4, w first) in the frame of the base pose, all in numpy."""
    w, v = base_quat[0], -np.asarray(base_quat[1:])          # the base's inverse rotation
    mat = np.empty(9)
    mujoco.mju_quat2Mat(mat, np.asarray(base_quat, dtype=np.float64))
    rel_pos = (pos - base_pos) @ mat.reshape(3, 3)
    qw, qv = quat[:, 0], quat[:, 1:]
    rel_quat = np.empty_like(quat)
    rel_quat[:, 0] = w * qw - qv @ v
    rel_quat[:, 1:] = w * qv + np.outer(qw, v) + np.cross(v, qv)
    return rel_pos, rel_quat


class FrameTree:
    """Frame names and which transforms are static, decided once per model."""

    def __init__(self, model, prefix='', world='world', odom='odom'):
        self.model = model
        self.prefix = prefix
        self.world = world
        self.body_frames = [world] + [
            prefix + _name(model, mujoco.mjtObj.mjOBJ_BODY, b, 'body')
            for b in range(1, model.nbody)]
        root_mocap = model.body_mocapid[model.body_rootid]
        static = (model.body_weldid == 0) & (root_mocap < 0)
        self.static_bodies = [b for b in range(1, model.nbody) if static[b]]
        self.dynamic_bodies = [b for b in range(1, model.nbody) if not static[b]]
        # REP-105 for a floating base: world -> odom (static) -> base -> its robot's bodies
        self.base = floating_base(model) if odom else None
        self.odom = prefix + odom if self.base is not None else None
        parents = [world] * len(self.dynamic_bodies)
        under_base = []
        for i, b in enumerate(self.dynamic_bodies):
            if self.base is None:
                break
            if b == self.base:
                parents[i] = self.odom
            elif model.body_rootid[b] == self.base:
                parents[i] = self.body_frames[self.base]
                under_base.append(i)
        self._under_base = np.asarray(under_base, dtype=np.intp)
        self.cameras = {}
        for c in range(model.ncam):
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, c)
            if not name:
                continue
            fixed = int(model.cam_mode[c]) == int(mujoco.mjtCamLight.mjCAMLIGHT_FIXED)
            self.cameras[name] = {'id': c, 'frame': f'{prefix}{name}_optical_frame',
                                  'fixed': fixed, 'body': int(model.cam_bodyid[c])}
        self.tracking_cameras = [cam['id'] for cam in self.cameras.values() if not cam['fixed']]
        self._bodies = np.asarray(self.dynamic_bodies, dtype=np.intp)
        self._cams = np.asarray(self.tracking_cameras, dtype=np.intp)
        # every frame /tf carries and its parent (the world frame unless a floating base)
        self.moving_frames = [self.body_frames[b] for b in self.dynamic_bodies] + [
            cam['frame'] for cam in self.cameras.values() if not cam['fixed']]
        self.moving_parents = parents + [world] * len(self.tracking_cameras)
        self._dynamic_msgs = [self._transform(p, f)
                              for p, f in zip(self.moving_parents, self.moving_frames)]
        self._cam_quat = np.empty((len(self._cams), 4))

    def optical_frame(self, camera):
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

    def static_transforms(self, snapshot, stamp):
        """Bodies welded to the world, fixed cameras' optical frames on their body, and
        world -> odom (identity) for a floating base."""
        out = []
        if self.odom is not None and self.odom != self.world:   # world_frame:=odom: one frame
            t = self._transform(self.world, self.odom)
            t.header.stamp = stamp
            out.append(self._pose(t, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)))
        for b in self.static_bodies:
            t = self._transform(self.world, self.body_frames[b])
            t.header.stamp = stamp
            out.append(self._pose(t, snapshot.xpos[b], snapshot.xquat[b]))
        m = self.model
        for cam in self.cameras.values():
            if not cam['fixed']:
                continue
            c = cam['id']
            t = self._transform(self.body_frames[cam['body']], cam['frame'])
            t.header.stamp = stamp
            out.append(self._pose(t, m.cam_pos[c], cv.quat_mul(m.cam_quat[c], Q_OPTICAL)))
        return out

    def moving_poses(self, snapshot):
        """Positions (n, 3) and quaternions (n, 4, w first) of ``moving_frames``, each in
        its parent of ``moving_parents``."""
        pos, quat = snapshot.xpos[self._bodies], snapshot.xquat[self._bodies]
        if len(self._under_base):
            b = self.base
            i = self._under_base
            pos[i], quat[i] = relative_poses(snapshot.xpos[b], snapshot.xquat[b], pos[i],
                                             quat[i])
        if not len(self._cams):
            return pos, quat
        for i, c in enumerate(self._cams):
            optical = snapshot.cam_xmat[c].reshape(3, 3) * OPTICAL_AXES
            mujoco.mju_mat2Quat(self._cam_quat[i], optical.ravel())
        return (np.concatenate([pos, snapshot.cam_xpos[self._cams]]),
                np.concatenate([quat, self._cam_quat]))

    def dynamic_transforms(self, snapshot, stamp):
        """Parent -> every moving frame; the message objects are reused between calls."""
        pos, quat = self.moving_poses(snapshot)
        for t, p, q in zip(self._dynamic_msgs, pos, quat):
            t.header.stamp = stamp
            self._pose(t, p, q)
        return self._dynamic_msgs
