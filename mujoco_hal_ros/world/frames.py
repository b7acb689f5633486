"""States given relative to another entity, expressed in the world frame.

simulation_interfaces stamps a state with a frame; besides the world frame, a request may
name an entity, whose pose at the latest snapshot then places the given pose. Twists given
in that frame are rotated into the world (the reference entity's own motion is not added:
a state set "relative to the table" means where the table is now).
"""

from typing import Any

import mujoco
import numpy as np


def _rotate(quat, vec):
    out = np.zeros(3)
    mujoco.mju_rotVecQuat(out, np.asarray(vec, dtype=np.float64),
                          np.asarray(quat, dtype=np.float64))
    return out


def to_world(ref: Any, position: Any = None, quaternion: Any = None, linear: Any = None,
             angular: Any = None) -> dict[str, Any]:
    """The keyword arguments of ``Entities.set_state`` in the world frame; ``ref`` is
    ``Entities.state`` of the reference entity. ``None`` parts stay ``None``."""
    q_ref = np.asarray(ref['quaternion'], dtype=np.float64)
    out = {}
    if position is not None:
        out['position'] = _rotate(q_ref, position) + np.asarray(ref['position'])
    if quaternion is not None:
        q = np.zeros(4)
        mujoco.mju_mulQuat(q, q_ref, np.asarray(quaternion, dtype=np.float64))
        out['quaternion'] = q
    if linear is not None:
        out['linear'] = _rotate(q_ref, linear)
    if angular is not None:
        out['angular'] = _rotate(q_ref, angular)
    return out
