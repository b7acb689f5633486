"""What a device keeps about its world at run time: snapshots, randomization, queries.

One per device, owned by it (``Device.world``); the device posts the writes to its stepper,
this object holds the state that outlives a single request.
"""

import mujoco

from .dynamics import Dynamics
from .randomize import Randomizer
from .snapshots import Snapshots


class World:
    def __init__(self, model: mujoco.MjModel):
        self.snapshots = Snapshots()
        self.randomizer = Randomizer(model)
        self.dynamics = Dynamics(model)

    def follow(self, model: mujoco.MjModel) -> int:
        """A new model replaced the running one: queries and randomization are of it now,
        and every snapshot taken so far is stale. The new scene generation."""
        self.randomizer = Randomizer(model)
        self.dynamics = Dynamics(model)
        self.snapshots.scene_changed()
        return self.snapshots.generation
