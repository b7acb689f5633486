"""A zero-config device's name and id, from the model rather than its file name.

Menagerie ships nearly every robot as ``<robot>/scene.xml``, so the file name says
``scene`` for all of them; the MJCF ``<mujoco model="...">`` says ``panda scene``,
``go1 scene``. That name, without its trailing ``scene``, names the device; where it is
MuJoCo's default or as generic as the file name, the file's folder does
(``franka_emika_panda``), and the file name only when the folder says nothing either.
"""

import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:     # the hints only
    import mujoco

GENERIC = {'', 'scene', 'mujoco model', 'mujoco', 'model', 'robot', 'world', 'main'}
GENERIC_FOLDERS = {'', 'models', 'model', 'mjcf', 'xml', 'assets', 'scenes', 'urdf', 'tmp'}
_SCENE = re.compile(r'[\s_-]+scene$', re.IGNORECASE)


def model_attribute(model: 'mujoco.MjModel') -> str:
    """The MJCF ``<mujoco model=...>`` name (MuJoCo stores it first in ``names``)."""
    raw = bytes(model.names)
    return raw[:raw.find(b'\0')].decode('utf-8', 'replace').strip() if raw else ''


def _specific(name):
    name = name.strip()
    bare = _SCENE.sub('', name).strip(' _-') if name.lower() != 'scene' else ''
    return bare if bare.lower() not in GENERIC else ''


def device_name(model: 'mujoco.MjModel', path: str | None) -> str:
    """The name a zero-config device goes by: model name, else folder, else file stem."""
    stem = os.path.splitext(os.path.basename(path or ''))[0]
    name = _specific(model_attribute(model))
    if name and name.lower() != stem.lower():
        return name
    folder = os.path.basename(os.path.dirname(os.path.abspath(path))) if path else ''
    if _specific(stem):
        return name or stem
    if folder.lower() not in GENERIC_FOLDERS:
        return folder
    return name or stem or 'mujoco'


def device_id(name: str) -> str:
    """An identifier for ``hardware_id`` and ``describe``: the name with spaces as ``_``."""
    return re.sub(r'[^A-Za-z0-9_.-]+', '_', name).strip('_') or 'mujoco'
