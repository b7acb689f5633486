"""The state after a chunk of steps, as readers on other threads see it.

The stepper copies it after each chunk (and after a request that changed the state) and
swaps it in by reference: readers never block the physics and never see a half-written
state. Imports nothing of the package: every layer may name the type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Snapshot:
    """State after a chunk of steps; arrays are private copies, never written again."""

    time: float
    wall: float
    step: int
    qpos: np.ndarray
    qvel: np.ndarray
    qfrc_actuator: np.ndarray
    ctrl: np.ndarray
    setpoint: np.ndarray      # where each actuator's path is now
    xpos: np.ndarray
    xquat: np.ndarray
    site_xpos: np.ndarray
    site_xmat: np.ndarray
    sensordata: np.ndarray
    mocap_pos: np.ndarray
    mocap_quat: np.ndarray
    act: np.ndarray
    paused: bool
    moving: bool
    target: Any = None         # where each actuator's path ends (the goal it was given)
    cam_xpos: Any = None       # cameras in the world: tracking cameras move with the state
    cam_xmat: Any = None
    plans: tuple = ()          # the plans still running at ``time``
    contacts: Any = None       # active contacts (sensors.contacts) while asked for
    wrenches: tuple = ()       # the latched pushes (sensors.wrench.Wrench) at ``time``
    generation: int = 0        # the scene generation of the model these arrays belong to
    # The setpoints as joint positions (what a plan toward a joint goal starts from): the
    # setpoint, except that a velocity servo taking speeds gives its joint's position.
    joint_setpoint: Any = None
    position_mode: Any = None  # per actuator: a velocity servo held to a position
