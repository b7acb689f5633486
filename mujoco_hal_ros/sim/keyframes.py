"""Which keyframe a device starts from and resets to, by name or index."""

import mujoco
import numpy as np

from ..errors import ConfigError
from ..joint_view import ONE_DOF


def names(model: mujoco.MjModel) -> list[str]:
    return [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_KEY, i) for i in range(model.nkey)]


def keyframe_id(model: mujoco.MjModel, name: str | int | None) -> int | None:
    """The id of keyframe ``name`` (or an index of an unnamed one); None for none asked;
    ConfigError naming the model's keyframes when it has no such one."""
    if name is None or name == '':
        return None
    if isinstance(name, (int, np.integer)) and not isinstance(name, bool) \
            and 0 <= name < model.nkey:
        return int(name)     # an unnamed first keyframe
    known = names(model)
    if name not in known:
        raise ConfigError(f'the model has no keyframe {name!r}', where='connect.keyframe',
                          allowed=', '.join(n for n in known if n) or 'none')
    return known.index(name)


def default_keyframe(model: mujoco.MjModel) -> str | int | None:
    """Zero-config starts where the model's author posed it: ``home``, else the first
    keyframe (a model at qpos0 may sit in its floor or at its joint limits)."""
    known = names(model)
    if 'home' in known:
        return 'home'
    if known and known[0]:
        return known[0]
    return 0 if known else None


def home_state(model: mujoco.MjModel) -> tuple[dict[str, float], dict[str, float]]:
    """``({joint: position}, {actuator: ctrl})`` of a robot at home: its ``home`` keyframe
    (else its first, as ``default_keyframe``), or without one ``qpos0`` clamped into every
    limited joint's range (a model at qpos0 may sit outside a joint's range, as Panda's
    joint4 does). Hinge and slide joints only: a free joint's keyframe pose is in the
    model's own world, not where a spawn puts it. Names are the model's own."""
    key = keyframe_id(model, default_keyframe(model))
    qpos = model.key_qpos[key] if key is not None else model.qpos0
    joints = {}
    for j in range(model.njnt):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
        if not name or int(model.jnt_type[j]) not in ONE_DOF:
            continue
        q = float(qpos[model.jnt_qposadr[j]])
        if model.jnt_limited[j]:
            lo, hi = (float(v) for v in model.jnt_range[j])
            q = min(max(q, lo), hi)
        joints[name] = q
    ctrl = {}
    if key is not None:
        for a in range(model.nu):
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a)
            if name:
                ctrl[name] = float(model.key_ctrl[key, a])
    return joints, ctrl
