"""Teleport joints: positions and velocities written straight into the state.

Checked as a whole before anything is written, so a request with one bad joint changes
nothing; the physics thread writes the checked values (``Physics.set_joints``). Only
one-dof joints (hinge, slide) are teleported by name: a free or ball joint's pose is an
entity's pose (``set_entity_state``). Positions must lie in the joint's range when the
model limits it, because the solver would otherwise fling the joint back.
"""

from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from ..checks import finite_vector, unique_names
from ..errors import InvalidArgument, LimitExceeded, UnknownName
from ..joint_view import ONE_DOF
from . import bounds


def check(model: mujoco.MjModel, joint_names: Sequence[str], names: Any, positions: Any,
          velocities: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(qpos addresses, dof addresses, positions, velocities or None), all checked."""
    names = unique_names(names, 'names', 'joint')
    if not names:
        raise InvalidArgument('name at least one joint', where='names')
    known = {n: j for j, n in enumerate(joint_names) if n}
    ids = []
    for n in names:
        if n not in known:
            raise UnknownName('joint', n, list(known), where='names')
        j = known[n]
        if int(model.jnt_type[j]) not in ONE_DOF:
            raise InvalidArgument(f'joint {n!r} is not a hinge or slide', where='names',
                                  allowed='set a free body through set_entity_state')
        ids.append(j)
    q = finite_vector(positions, len(names), 'positions')
    v = None if velocities is None or (hasattr(velocities, '__len__') and
                                       len(velocities) == 0) \
        else finite_vector(velocities, len(names), 'velocities')
    if v is not None and not np.abs(v).max() <= bounds.MAX_ANGULAR:
        raise InvalidArgument(f'a joint speed of {np.abs(v).max():.4g} is beyond what the '
                              'simulation can integrate', where='velocities',
                              allowed=f'|v| <= {bounds.MAX_ANGULAR:g} rad/s or m/s')
    for n, j, value in zip(names, ids, q, strict=True):
        if model.jnt_limited[j]:
            lo, hi = model.jnt_range[j]
            if not lo <= value <= hi:
                raise LimitExceeded(f'{value:g} is outside the joint range', where=n,
                                    allowed=f'{lo:g}..{hi:g}')
    at = np.array(ids)
    return model.jnt_qposadr[at], model.jnt_dofadr[at], q, v
