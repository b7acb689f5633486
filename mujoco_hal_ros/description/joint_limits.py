"""Joint speed limits MuJoCo has no field for: a URDF's ``<limit velocity>``.

The URDF import keeps each joint's velocity limit in the model as a custom numeric
(``mark_speed``), so it travels with the saved MJCF; paths the device plans itself
(move_to, goals, the conformance battery's trajectories, as a planner's) peak no faster
(``speed_of``), as a real driver's limits would hold them.
"""

import mujoco
import numpy as np

SPEED_PREFIX = 'mujoco_hal_ros/velocity/'


def mark_speed(spec: mujoco.MjSpec, joint: str, speed: float) -> None:
    """Keep ``joint``'s velocity limit (rad/s or m/s, above 0) in ``spec``."""
    numeric = spec.add_numeric()
    numeric.name = SPEED_PREFIX + joint
    numeric.data = [float(speed)]


def speed_of(model: mujoco.MjModel, joint: int) -> float:
    """The velocity limit kept for joint id ``joint``, or inf."""
    if not model.nnumeric:
        return np.inf
    i = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_NUMERIC,
                          SPEED_PREFIX + (model.joint(joint).name or ''))
    if i < 0:
        return np.inf
    value = float(model.numeric_data[model.numeric_adr[i]])
    return value if value > 0 else np.inf
