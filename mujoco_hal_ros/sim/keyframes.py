"""Which keyframe a device starts from and resets to, by name or index."""

import mujoco
import numpy as np

from ..errors import ConfigError


def names(model):
    return [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_KEY, i) for i in range(model.nkey)]


def keyframe_id(model, name):
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


def default_keyframe(model):
    """Zero-config starts where the model's author posed it: ``home``, else the first
    keyframe (a model at qpos0 may sit in its floor or at its joint limits)."""
    known = names(model)
    if 'home' in known:
        return 'home'
    if known and known[0]:
        return known[0]
    return 0 if known else None
