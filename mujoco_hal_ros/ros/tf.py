"""TF frames of a model: ``world_frame`` -> every body, and each camera's optical frame.

The tree is flat (every body straight under the world frame) because MuJoCo already gives
world poses (``xpos``/``xquat``) in every snapshot: no URDF, no robot_state_publisher,
no chance of a chain disagreeing with the physics. Bodies welded to the world go to
``/tf_static`` once; so do optical frames of fixed cameras, relative to their body.
Cameras that track a body (MuJoCo camera modes other than fixed) are posed by the camera
thread from the state it renders, as those poses are not in the snapshot.
"""

from geometry_msgs.msg import TransformStamped
import mujoco
import numpy as np

from . import conversions as cv

# Quaternion (w, x, y, z) of OPTICAL_FROM_MUJOCO = diag(1, -1, -1): 180 degrees about x.
Q_OPTICAL = np.array([0.0, 1.0, 0.0, 0.0])


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
        self._dynamic_msgs = [self._transform(world, self.body_frames[b])
                              for b in self.dynamic_bodies]

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

    def dynamic_transforms(self, snapshot, stamp):
        """world -> every moving body; the message objects are reused between calls."""
        xpos, xquat = snapshot.xpos, snapshot.xquat
        for t, b in zip(self._dynamic_msgs, self.dynamic_bodies):
            t.header.stamp = stamp
            self._pose(t, xpos[b], xquat[b])
        return self._dynamic_msgs

    def camera_transform(self, camera, data, stamp):
        """world -> optical frame from posed MjData (for cameras that track a body)."""
        cam = self.cameras[camera]
        c = cam['id']
        rot = data.cam_xmat[c].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])
        t = self._transform(self.world, cam['frame'])
        t.header.stamp = stamp
        return self._pose(t, data.cam_xpos[c], cv.quat_from_mat(rot))
