"""One naming of a model's bodies as frames, shared by the generated URDF and /tf.

rviz's RobotModel and MoveIt look links up in TF by name, so the URDF's link names and the
TF tree's frame names must come from the same function. Also: which bodies hang on their
parent by a fixed transform (no joint, not mocap), which is what goes on /tf_static.
"""

import mujoco
import numpy as np


def body_frame_names(model: mujoco.MjModel, prefix: str = '', world: str = 'world'
                     ) -> list[str]:
    """Frame name of every body: ``world`` for body 0, ``prefix + name`` (or ``body<i>``)."""
    return [world] + [prefix + (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)
                                or f'body{b}') for b in range(1, model.nbody)]


def fixed_to_parent(model: mujoco.MjModel) -> np.ndarray:
    """Boolean per body: True where the body's pose in its parent's frame never changes."""
    fixed = (model.body_jntnum == 0) & (model.body_mocapid < 0)
    fixed[0] = False
    return np.asarray(fixed)


def relative_poses(xpos: np.ndarray, xquat: np.ndarray, bodies: np.ndarray,
                   parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Poses of ``bodies`` in their ``parents``' frames, from world poses (w-first quats)."""
    ppos, pquat = xpos[parents], xquat[parents]
    conj = pquat * np.array([1.0, -1.0, -1.0, -1.0])
    rel = xpos[bodies] - ppos
    # rotate rel by conj: v + 2w (u x v) + 2 u x (u x v), with u = conj's vector part
    w, u = conj[:, :1], conj[:, 1:]
    t = 2.0 * np.cross(u, rel)
    return rel + w * t + np.cross(u, t), quat_mul_many(conj, xquat[bodies])


def quat_mul_many(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Hamilton product of (n, 4) quaternions, w first."""
    aw, ax, ay, az = a.T
    bw, bx, by, bz = b.T
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=1)
