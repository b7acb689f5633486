"""Scene edits at run time: spawn, delete, load and unload, each one model swap of a device.

An edit builds the new model off the physics thread (an untrusted resource read and
compiled in the sandbox first, when the device has one), then hands it to the device's
model swap (``sim.swap.ModelSwap.replace_model``, seen here as ``sim.ports.ModelSwapper``),
which trials it and swaps it in at a chunk boundary or refuses it with nothing changed.
This class owns what the edits share: the ``Scene`` (the editable spec the next edit
starts from) and the registry of spawned entities; an edit holds the swap's lock (one
change of model at a time) from start to end. Of the device it reads only what
``sim.ports.SceneHost`` lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TYPE_CHECKING

import mujoco

from .. import errors
from . import scene as scene_edit
from .scene import load_model, Scene

if TYPE_CHECKING:
    import numpy as np

    from ..sim.ports import ModelSwapper, SceneHost


class SceneEdits:
    """The scene edits of one device (``device.scene``)."""

    def __init__(self, device: SceneHost, swap: ModelSwapper, start_path: str) -> None:
        self._device = device
        self._swap = swap
        self._start_path = start_path   # the world unload_world goes back to
        self._spec: Scene | None = None  # the Scene edits start from, parsed on first edit
        self._spawned: dict[str, list[str]] = {}   # entity name -> its bodies
        # entity name -> its home (scene.entity_home)
        self._homes: dict[str, tuple[dict[str, float], dict[str, float]]] = {}
        self.lock = swap.lock           # one change of model at a time, an edit start to end

    # --- what the edits share -------------------------------------------------------------
    def spec(self) -> Scene:
        """The editable scene the next edit starts from (the model's file, parsed once)."""
        if self._spec is None:
            self._spec = Scene(self._device.model_path)
        return self._spec

    def adopt(self, scene_spec: Scene | mujoco.MjSpec) -> None:
        """The scene a swap put in place (a ``Scene`` or an ``MjSpec``) is the next start."""
        self._spec = scene_spec if isinstance(scene_spec, Scene) else Scene(spec=scene_spec)

    def names(self) -> list[str]:
        """The entities spawned so far (``spawn`` names, namespace included)."""
        return sorted(self._spawned)

    def homes(self) -> tuple[dict[str, float], dict[str, float]]:
        """``({joint: position}, {actuator: ctrl})`` of every spawned entity at its home
        (world names): where a reset puts them back, as the spawn did."""
        joints: dict[str, float] = {}
        ctrl: dict[str, float] = {}
        for j, c in list(self._homes.values()):
            joints.update(j)
            ctrl.update(c)
        return joints, ctrl

    def bodies(self, name: str) -> list[str]:
        """The bodies a spawned entity brought, top one first ([] for any other name)."""
        return list(self._spawned.get(name, ())) if isinstance(name, str) else []

    def _vet(self, resource: str, world: bool = False) -> mujoco.MjModel | None:
        """The sandbox's look at an untrusted resource (limits, roots), when there is one:
        its compiled model for a world, else None; refused with nothing changed."""
        sandbox = self._device.sandbox
        if sandbox is None:
            return None
        if not isinstance(resource, str) or not resource:
            raise errors.InvalidArgument('expected an MJCF string or file path',
                                         where='resource')
        return sandbox.check(resource, world=world)['model']

    # --- the edits ------------------------------------------------------------------------
    def spawn(self, resource: str, name: str,
              position: Sequence[float] | np.ndarray = (0.0, 0.0, 0.0),
              quaternion: Sequence[float] | np.ndarray = (1.0, 0.0, 0.0, 0.0),
              namespace: str = '') -> dict[str, Any]:
        """Attach an MJCF (a string, or a file: a body tree, an object, a whole robot) at a
        world pose, its names prefixed ``[<namespace>/]<name>/``; the device goes on with
        its goals and running move. The entity's joints start at its model's ``home``
        keyframe (else qpos0 clamped into their ranges), its servos holding there, as the
        robot alone would start. Refused with nothing changed when it does not compile.
        Returns the entity's full name and its bodies."""
        with self.lock:
            scene = self.spec()
            scene.check_pose(name, position, quaternion, namespace)   # cheap refusals first
            self._vet(resource)
            spec, model, home = scene.spawn_at_home(resource, name, position, quaternion,
                                                    namespace)
            sandbox = self._device.sandbox
            if sandbox is not None:
                sandbox.check_totals(model)
            full = f'{namespace.strip("/")}/{name}' if namespace else name
            bodies = scene_edit.entity_bodies(spec, full)
            if not bodies:
                # an entity is its bodies: one without any could never be placed or deleted
                raise errors.InvalidArgument(
                    'the MJCF has no body to spawn; nothing was changed', where='resource',
                    allowed='an MJCF with at least one <body> in its <worldbody>')
            self._spawned[full] = bodies      # known to whoever follows the swap event
            try:
                self._swap.replace_model(model, why=f'spawned {full}', home=home)
            except BaseException:
                self._spawned.pop(full, None)
                raise
            self.adopt(spec)
            self._homes[full] = home
            return {'success': True, 'code': errors.DONE, 'name': full, 'bodies': bodies}

    def delete(self, name: str) -> dict[str, Any]:
        """Remove a spawned entity (by its full name) or any body of the model and what
        hangs below it; refused when that takes an actuator or sensor of the device."""
        with self.lock:
            if not isinstance(name, str) or not name:
                raise errors.UnknownName('entity', name, self.names())
            scene = Scene(spec=self.spec().spec)
            model = None
            brought = name if name in self._spawned else None
            for body in self._spawned.get(name) or [name]:
                if model is None or mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY,
                                                      body) >= 0:
                    spec, model = scene.delete(body, brought)
                    scene.commit(spec)
            self._swap.replace_model(model, why=f'deleted {name}', entity=brought)
            self.adopt(scene)
            self._spawned.pop(name, None)
            self._homes.pop(name, None)
            return {'success': True, 'code': errors.DONE, 'name': name}

    def load_world(self, resource: str) -> dict[str, Any]:
        """Replace the whole model (an MJCF string or file path) while the device stays
        open: the device file's channels if they fit the new model, else zero-config;
        running moves end STOPPED, the state starts at the new model's keyframe."""
        with self.lock:
            vetted = self._vet(resource, world=True)
            spec, model = Scene(spec=self.spec().spec).load(resource, model=vetted)
            path = resource if not resource.lstrip().startswith('<') else '<string>'
            path = path[len('file://'):] if path.startswith('file://') else path
            device = self._device
            self._swap.replace_model(model, world=True,
                                     why=f'loaded world {errors.shorten(path)}',
                                     model_path=path)
            self.adopt(spec)
            self._spawned.clear()
            self._homes.clear()
            return {'success': True, 'code': errors.DONE, 'model': device.model_path,
                    'zero_config': device.layout.zero_config}

    def unload_world(self) -> dict[str, Any]:
        """Back to the world the device was opened with (the robot stays a device)."""
        with self.lock:
            model = load_model(self._start_path)
            self._swap.replace_model(model, world=True, why='world unloaded',
                                     model_path=self._start_path)
            self.adopt(Scene(self._start_path))
            self._spawned.clear()
            self._homes.clear()
        return {'success': True, 'code': errors.DONE, 'model': self._device.model_path}
