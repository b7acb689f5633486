"""One model of the conformance zoos (``zoo``: MJCF files; ``urdf_zoo``: URDFs): what it
is, where its file is, and how the battery drives it. Its own module so both zoos build
them without importing each other (``zoo`` lists ``urdf_zoo``'s models too).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ZooModel:
    name: str
    path: str | None          # None when its package is not installed
    kind: str
    end: str | None = None    # site or body a move_to drives; None: found from the model
    variants: tuple[str, ...] = ()
    missing: str | None = None   # why path is None
    # MjSpec edit (variants), None for the file as is
    build: Callable[[Any], Any] | None = None
    base: str | None = None   # the model a variant was made from
    notes: list[str] = field(default_factory=list)
    urdf: bool = False        # path is a URDF, loaded as robot_description (urdf_zoo)
    ros2_control: bool = False   # ... with a driver's <ros2_control> block written in
    span: float | None = None  # rad: sample joints at most this far from mid-range (None: all)
    # the gripper's joint as a user binds it (None: zero-config's)
    gripper_joint: str | None = None
