"""sim_node's own world services: snapshots, teleport, pixel-to-world, dynamics, randomize.

simulation_interfaces has no words for these, so they are mujoco_hal_ros services beside it.
Each translates its request to one Device call and the answer (or the structured refusal)
back; the device call blocks on the stepper, so it runs on the bridge's worker and the
coroutine awaits it without holding the executor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from geometry_msgs.msg import PointStamped
import numpy as np
from rclpy.callback_groups import ReentrantCallbackGroup

from ...checks import json_value
from ...errors import DeviceError, DONE, FORBIDDEN, INVALID_ARGUMENT
from ...srv import Dynamics, PixelToWorld, Randomize, SaveState, SetJointState
from .. import conversions as cv
from ..qos import REQUEST_QOS

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.node import Node

    from ...sim.device import Device
    from ..bridge import CompletionBridge


class WorldServices:
    """save_state, load_state, delete_state, set_joint_state, pixel_to_world, dynamics and
    randomize over one Device; ``world_frame()`` names the frame points are answered in."""

    def __init__(self, node: Node, device: Device, bridge: CompletionBridge,
                 world_frame: Callable[[], str]) -> None:
        self.node, self.device, self.bridge = node, device, bridge
        self.physics = device.physics        # the running world: states, teleports, queries
        self.world_frame = world_frame
        group = ReentrantCallbackGroup()
        table = (
            (SaveState, 'save_state', self._save), (SaveState, 'load_state', self._load),
            (SaveState, 'delete_state', self._delete),
            (SetJointState, 'set_joint_state', self._teleport),
            (PixelToWorld, 'pixel_to_world', self._pixels),
            (Dynamics, 'dynamics', self._dynamics), (Randomize, 'randomize', self._randomize))
        self._services = [node.create_service(t, n, cb, callback_group=group,
                                              qos_profile=REQUEST_QOS)
                          for t, n, cb in table]

    async def _call(self, resp, fn, fill=None):
        try:
            value = await self.bridge.run(fn)
        except Exception as exc:  # noqa: BLE001 - every refusal goes back in the response
            return cv.refuse(resp, exc)
        resp.success, resp.code = True, DONE
        if fill is not None:
            fill(resp, value)
        return resp

    def _names(self, resp, _value):
        resp.names = self.physics.state_names()

    async def _save(self, req, resp):
        return await self._call(resp, lambda: self.physics.save_state(req.name), self._names)

    async def _load(self, req, resp):
        return await self._call(resp, lambda: self.physics.load_state(req.name), self._names)

    async def _delete(self, req, resp):
        return await self._call(resp, lambda: self.physics.delete_state(req.name), self._names)

    async def _teleport(self, req, resp):
        vel = list(req.velocities) or None
        return await self._call(resp, lambda: self.physics.set_joint_state(
            list(req.names), list(req.positions), vel))

    async def _pixels(self, req, resp):
        if len(req.u) != len(req.v):
            resp.success, resp.code = False, INVALID_ARGUMENT
            resp.message = f'{len(req.u)} u but {len(req.v)} v values; give one v per u'
            return resp
        width, height = int(req.width) or None, int(req.height) or None

        def run():
            snap_time = self.device.snapshot.time
            pts = self.physics.pixel_to_world(req.camera, list(zip(req.u, req.v, strict=True)),
                                              width, height)
            return snap_time, pts

        def fill(r, value):
            t, pts = value
            stamp = cv.stamp(t)

            def point(p):
                msg = PointStamped()
                msg.header.frame_id, msg.header.stamp = self.world_frame(), stamp
                msg.point.x, msg.point.y, msg.point.z = (float(v) for v in p)
                return msg
            r.points = [point(p) for p in pts]
            r.median = point(np.median(pts, axis=0))
        return await self._call(resp, run, fill)

    async def _dynamics(self, req, resp):
        query = req.query

        def run():
            if query == 'mass_matrix':
                return self.physics.mass_matrix()
            if query == 'inverse_dynamics':
                return self.physics.inverse_dynamics(list(req.qacc))[None, :]
            if query == 'jacobian':
                jacp, jacr = self.physics.jacobian(req.name, req.kind or None)
                return np.vstack([jacp, jacr])
            raise DeviceError(INVALID_ARGUMENT, f'unknown query {query[:80]!r}',
                              where='query', allowed='mass_matrix, inverse_dynamics, jacobian')

        def fill(r, arr):
            r.rows, r.cols = int(arr.shape[0]), int(arr.shape[1])
            r.data = [float(v) for v in arr.reshape(-1)]
        return await self._call(resp, run, fill)

    async def _randomize(self, req, resp):
        if not getattr(getattr(self.node, 'p', None), 'world_edits', True):
            resp.success, resp.code = False, FORBIDDEN
            resp.message = ('randomize is a scene edit, turned off on this node '
                            '(world_edits:=false)')
            return resp
        try:
            fields = json_value(req.fields_json, 'fields_json')
        except DeviceError as exc:
            return cv.refuse(resp, exc)
        seed = int(req.seed) if req.seeded else None

        def fill(r, values):
            r.fields = sorted(values)
        return await self._call(resp, lambda: self.physics.randomize(fields, seed), fill)

    def destroy(self) -> None:
        for srv in self._services:
            self.node.destroy_service(srv)
        self._services = []
