"""The world at run time: saved states, teleports, gravity and timestep, dynamics queries
of the live state, pixels to world points and domain randomization, on a running device.

Each request is checked in the caller's thread, then runs on the physics thread through the
device's one door (``device.on_physics``) and is recorded in the device's audit. A request
that rewrites the state under a running move ends the move STOPPED and holds the new pose
(the device's ``stop_move``, passed in: the move is the device's to end). It is given
the world's queries (``World``) and the cameras (``RenderRegistry``) it draws depth from;
of the device it sees only ``sim.ports.DeviceReads``, the door and the audit
(``RunTimeHost``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TYPE_CHECKING

import mujoco  # noqa: F401 - the types these calls take and return

from .. import errors
from ..checks import finite_number, finite_vector
from . import bounds, pixels as world_pixels, snapshots as world_snapshots, teleport

if TYPE_CHECKING:
    import numpy as np

    from ..render.camera import CameraRenderer
    from ..render.registry import RenderRegistry
    from ..sim.physics import Physics
    from ..sim.ports import Audit, DeviceReads, PhysicsDoor
    from ..sim.snapshot import Snapshot
    from .world import World

    class RunTimeHost(DeviceReads, PhysicsDoor, Audit, Protocol):
        """What the world at run time reads and calls of its device."""


class RunTimeWorld:
    """``device.physics``: what a simulation interface may do to the running world."""

    def __init__(self, device: RunTimeHost, world: World, cameras: RenderRegistry,
                 stop_move: Callable[[Physics, str], np.ndarray],
                 native: Callable[[np.ndarray], dict[str, float]]) -> None:
        self._device = device
        self._world = world
        self._cameras = cameras
        self._stop_move = stop_move     # (physics, why) -> setpoint: end the move, hold
        self._native = native           # setpoint -> the audit's actuator: value form

    def save_state(self, name: str) -> dict[str, Any]:
        """Keep the full physics state under ``name`` (overwriting one of that name)."""
        name = world_snapshots.snapshot_name(name)
        state = self._device.on_physics(
            lambda p: p.get_state(world_snapshots.SPEC), wait=True)
        self._world.snapshots.put(name, state)
        self._device.record('save_state', {'name': name}, {})
        return {'success': True, 'code': errors.DONE, 'name': name}

    def load_state(self, name: str) -> dict[str, Any]:
        """Restore a snapshot bit for bit (time keeps going forward) and hold there; a
        running move ends STOPPED. STALE_SNAPSHOT after a scene change, nothing changed."""
        name = world_snapshots.snapshot_name(name)
        state = self._world.snapshots.get(name)

        def apply(p: Physics) -> np.ndarray:
            p.set_state(state, world_snapshots.SPEC)       # and forward
            sp = self._stop_move(p, f'state {name!r} loaded')
            p.publish_snapshot()
            return sp
        sp = self._device.on_physics(apply, wait=True)
        self._device.record('load_state', {'name': name}, self._native(sp))
        return {'success': True, 'code': errors.DONE, 'name': name}

    def delete_state(self, name: str) -> None:
        self._world.snapshots.delete(world_snapshots.snapshot_name(name))

    def state_names(self) -> list[str]:
        return self._world.snapshots.names()

    def set_joint_state(self, names: Sequence[str], positions: Sequence[float] | np.ndarray,
                        velocities: Sequence[float] | np.ndarray | None = None,
                        ) -> dict[str, Any]:
        """Teleport hinge/slide joints (all-or-nothing, range-checked), forward kinematics
        after; the servos then hold the new pose and a running move ends STOPPED."""
        device = self._device
        qadr, dadr, q, v = teleport.check(device.model, device.layout.joints, names,
                                          positions, velocities)
        request = {'names': list(names), 'positions': q.tolist(),
                   'velocities': None if v is None else v.tolist()}

        def apply(p: Physics) -> np.ndarray:
            p.set_joints(qadr, q, dadr, v)                 # and forward
            sp = self._stop_move(p, 'joints teleported')
            p.publish_snapshot()
            return sp
        sp = self._device.on_physics(apply, wait=True)
        self._device.record('set_joint_state', request, self._native(sp))
        return {'success': True, 'code': errors.DONE}

    def set_gravity(self, gravity: Sequence[float] | np.ndarray) -> list[float]:
        """World gravity (m/s^2, 3 finite numbers) from the next step on."""
        g = bounds.magnitude(gravity, 3, bounds.MAX_GRAVITY, 'gravity', 'm/s^2')

        self._device.on_physics(lambda p: p.set_gravity(g), wait=True)
        self._device.record('gravity', {'gravity': g.tolist()}, {})
        return g.tolist()

    def set_timestep(self, timestep: float) -> float:
        """Integration timestep in seconds (0 < dt <= 0.1) from the next step on."""
        dt = finite_number(timestep, 'timestep')
        if not 0 < dt <= 0.1:
            raise errors.InvalidArgument(f'{dt:g} s is not a usable timestep',
                                         where='timestep', allowed='0 < timestep <= 0.1 s')

        # the stepper's chunk size and the drive laws follow the new timestep
        self._device.on_physics(lambda p: p.set_timestep(dt), wait=True)
        self._device.record('timestep', {'timestep': dt}, {})
        return dt

    @property
    def gravity(self) -> list[float]:
        return [float(x) for x in self._device.model.opt.gravity]

    @property
    def timestep(self) -> float:
        return float(self._device.model.opt.timestep)

    def _live_state(self) -> np.ndarray:
        dyn = self._world.dynamics
        return self._device.on_physics(lambda p: dyn.capture(p.data), wait=True)

    def mass_matrix(self) -> np.ndarray:
        """(nv, nv) joint-space inertia of the live state."""
        return self._world.dynamics.mass_matrix(self._live_state())

    def inverse_dynamics(self, qacc: Sequence[float] | np.ndarray) -> np.ndarray:
        """(nv,) generalized forces giving ``qacc`` (nv finite numbers) at the live state."""
        qacc = finite_vector(qacc, self._device.model.nv, 'qacc')
        return self._world.dynamics.inverse_dynamics(self._live_state(), qacc)

    def jacobian(self, name: str, kind: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(jacp, jacr), each (3, nv), of a site or body (``kind`` 'site'/'body'; by default
        a site of that name, else a body) at the live state."""
        if kind is None:
            kind = 'site' if name in self._device.layout.sites else 'body'
        layout = self._device.layout
        return self._world.dynamics.jacobian(self._live_state(), kind, name,
                                             layout.sites, layout.bodies)

    def pixel_to_world(self, camera: str | int, pixels: Sequence[Sequence[float]] | np.ndarray,
                       width: int | None = None, height: int | None = None) -> np.ndarray:
        """World points (n, 3) of camera pixels ``[(u, v), ...]`` through the depth render
        at the latest snapshot; background (far-plane) and invalid depths are refused."""
        snap = self._device.snapshot
        if width is None and height is None:
            return self._pixel_to_world(self._cameras.renderer(
                camera, depth=True, generation=snap.generation), pixels, snap)
        # A size of the caller's own gets a renderer of its own, closed after: caching one
        # per size asked would let requests pile up GL contexts without bound.
        from ..render.camera import CameraRenderer
        camera, width, height = self._cameras.image_size(camera, width, height)
        with CameraRenderer(self._cameras.model_of(snap.generation), camera, width, height,
                            depth=True) as r:
            return self._pixel_to_world(r, pixels, snap)

    def _pixel_to_world(self, r: CameraRenderer, pixels: Sequence[Sequence[float]] | np.ndarray,
                        snap: Snapshot) -> np.ndarray:
        px = world_pixels.check_pixels(pixels, r.width, r.height)
        intr = r.intrinsics()
        with self._cameras.render_state(snap) as d:
            depth = r.render_depth(d)
            pos, rot = r.optical_pose(d)
        return world_pixels.to_world(depth, intr, pos, rot, px,
                                     world_pixels.far_plane(
                                         self._cameras.model_of(snap.generation)))

    def randomize(self, fields: Mapping[str, Any],
                  seed: int | None = None) -> dict[str, list[Any]]:
        """Randomize model fields of the running sim (``world.randomize``); ``reset`` undoes
        it. Checked as a whole first: a bad field changes nothing."""
        rnd = self._world.randomizer
        values = self._device.on_physics(lambda p: rnd.check(fields, seed), wait=True)

        def apply(p: Physics) -> None:
            rnd.apply(values, p.data)    # the randomizer owns the fields it writes
            p.publish_snapshot()
        self._device.on_physics(apply, wait=True)
        self._device.record('randomize', {'fields': sorted(values), 'seed': seed}, {})
        return {k: v.tolist() for k, v in values.items()}
