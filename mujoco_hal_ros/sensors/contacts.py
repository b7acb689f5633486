"""The active contacts of a state as one record array, for a ``contacts`` topic.

Computed on the stepper thread right after a chunk, only while someone asks for it (a
flag), so stepping pays nothing otherwise: ``mj_contactForce`` per active contact (those
with constraint rows), rotated from the contact frame to the world.
"""

import mujoco
import numpy as np

DTYPE = np.dtype([('geom1', np.int32), ('geom2', np.int32), ('body1', np.int32),
                  ('body2', np.int32), ('pos', np.float64, 3), ('normal', np.float64, 3),
                  ('force', np.float64, 3), ('torque', np.float64, 3), ('dist', np.float64)])
EMPTY = np.zeros(0, dtype=DTYPE)


def active_contacts(model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    """Record array (``DTYPE``) of the contacts in force, in the world frame: position,
    normal (from geom1 towards geom2), and the force and torque geom1 exerts on geom2
    (``mj_contactForce`` rotated out of the contact frame)."""
    n = int(data.ncon)
    if n == 0:
        return EMPTY
    con = data.contact
    active = np.flatnonzero((con.efc_address[:n] >= 0) & (con.exclude[:n] == 0))
    out = np.zeros(len(active), dtype=DTYPE)
    if not len(active):
        return out
    frames = con.frame[active].reshape(-1, 3, 3)
    ft = np.empty(6)
    forces = np.empty((len(active), 6))
    for k, i in enumerate(active):
        mujoco.mj_contactForce(model, data, int(i), ft)
        forces[k] = ft
    g1, g2 = con.geom1[active], con.geom2[active]
    out['geom1'], out['geom2'] = g1, g2
    out['body1'], out['body2'] = model.geom_bodyid[g1], model.geom_bodyid[g2]
    out['pos'] = con.pos[active]
    out['normal'] = frames[:, 0]
    # contact frame rows are its axes in world coordinates: world = frame.T @ local
    out['force'] = np.einsum('nji,nj->ni', frames, forces[:, :3])
    out['torque'] = np.einsum('nji,nj->ni', frames, forces[:, 3:])
    out['dist'] = con.dist[active]
    return out
