"""TF frames of a model: ``world_frame`` -> every body, and each camera's optical frame.

The tree is flat (every body straight under the world frame) because MuJoCo already gives
world poses (``xpos``/``xquat``) in every snapshot: no URDF, no robot_state_publisher,
no chance of a chain disagreeing with the physics. Bodies welded to the world go to
``/tf_static`` once; so do optical frames of fixed cameras, relative to their body.
Cameras that track a body (MuJoCo camera modes other than fixed) move with the state:
their optical frames go on ``/tf`` with the moving bodies, whether or not anyone watches
their images.
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


class FrameTree:
    """Frame names and which transforms are static, decided once per model."""

    def __init__(self, model, prefix='', world='world'):
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
        # every frame /tf carries, all straight under the world frame
        self.moving_frames = [self.body_frames[b] for b in self.dynamic_bodies] + [
            cam['frame'] for cam in self.cameras.values() if not cam['fixed']]
        self._dynamic_msgs = [self._transform(world, f) for f in self.moving_frames]
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
        """Bodies welded to the world, and fixed cameras' optical frames on their body."""
        out = []
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
        """World positions (n, 3) and quaternions (n, 4, w first) of ``moving_frames``."""
        pos, quat = snapshot.xpos[self._bodies], snapshot.xquat[self._bodies]
        if not len(self._cams):
            return pos, quat
        for i, c in enumerate(self._cams):
            optical = snapshot.cam_xmat[c].reshape(3, 3) * OPTICAL_AXES
            mujoco.mju_mat2Quat(self._cam_quat[i], optical.ravel())
        return (np.concatenate([pos, snapshot.cam_xpos[self._cams]]),
                np.concatenate([quat, self._cam_quat]))

    def dynamic_transforms(self, snapshot, stamp):
        """world -> every moving frame; the message objects are reused between calls."""
        pos, quat = self.moving_poses(snapshot)
        for t, p, q in zip(self._dynamic_msgs, pos, quat):
            t.header.stamp = stamp
            self._pose(t, p, q)
        return self._dynamic_msgs
