"""One naming of a model's bodies as frames, shared by the generated URDF and /tf.

rviz's RobotModel and MoveIt look links up in TF by name, so the URDF's link names and the
TF tree's frame names must come from the same function. Also: which bodies hang on their
parent by a fixed transform (no joint, not mocap), which is what goes on /tf_static.
"""

import mujoco
import numpy as np


def body_frame_names(model, prefix='', world='world'):
    """Frame name of every body: ``world`` for body 0, ``prefix + name`` (or ``body<i>``)."""
    return [world] + [prefix + (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)
                                or f'body{b}') for b in range(1, model.nbody)]


def fixed_to_parent(model):
    """Boolean per body: True where the body's pose in its parent's frame never changes."""
    fixed = (model.body_jntnum == 0) & (model.body_mocapid < 0)
    fixed[0] = False
    return np.asarray(fixed)


def relative_poses(xpos, xquat, parents):
    """Each body's pose in its parent's frame, from world poses (quaternions w first)."""
    ppos, pquat = xpos[parents], xquat[parents]
    rel = xpos - ppos
    # rotate by the parent's inverse: v' = v + 2 w (u x v) ... with u = -q.xyz
    w, u = pquat[:, :1], -pquat[:, 1:]
    t = 2.0 * np.cross(u, rel)
    pos = rel + w * t + np.cross(u, t)
    quat = quat_mul_many(np.concatenate([pquat[:, :1], -pquat[:, 1:]], axis=1), xquat)
    return pos, quat


def quat_mul_many(a, b):
    """Row-wise Hamilton product of (n, 4) quaternions, w first."""
    aw, ax, ay, az = a.T
    bw, bx, by, bz = b.T
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=1)
