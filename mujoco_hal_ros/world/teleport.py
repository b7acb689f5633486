"""Teleport joints: positions and velocities written straight into the state.

Checked as a whole before anything is written, so a request with one bad joint changes
nothing. Only one-dof joints (hinge, slide) are teleported by name: a free or ball joint's
pose is an entity's pose (``set_entity_state``). Positions must lie in the joint's range
when the model limits it, because the solver would otherwise fling the joint back.
"""

import mujoco
import numpy as np

from . import bounds
from ..checks import finite_vector, unique_names
from ..errors import InvalidArgument, LimitExceeded, UnknownName

ONE_DOF = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


def check(model, joint_names, names, positions, velocities):
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
    for n, j, value in zip(names, ids, q):
        if model.jnt_limited[j]:
            lo, hi = model.jnt_range[j]
            if not lo <= value <= hi:
                raise LimitExceeded(f'{value:g} is outside the joint range', where=n,
                                    allowed=f'{lo:g}..{hi:g}')
    ids = np.array(ids)
    return model.jnt_qposadr[ids], model.jnt_dofadr[ids], q, v


def apply(model, data, qadr, dadr, q, v):
    """Write the checked values and recompute everything derived from them."""
    data.qpos[qadr] = q
    if v is not None:
        data.qvel[dadr] = v
    mujoco.mj_forward(model, data)
