"""contacts, contact_markers, wrench_markers, and the apply_wrench/clear_wrenches services.

Streams of the sensor thread (``sensors.SensorPublisher``). Contacts cost the stepper an
``mj_contactForce`` per active contact, so the device computes them only while
``contacts`` or ``contact_markers`` has a subscriber (``Device.sensing.report_contacts``).
The message is our own ``mujoco_hal_ros/Contacts``: ROS 2 has no standard contact message
(Gazebo's is ``ros_gz_interfaces/Contacts``, which is not a core package), so this one
carries what MuJoCo gives: both bodies and geoms, position, normal, force and torque.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TYPE_CHECKING, TypeVar

from builtin_interfaces.msg import Time
import mujoco
import numpy as np
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import QoSProfile
from visualization_msgs.msg import Marker, MarkerArray

from ...errors import DeviceError
from ...msg import Contact, Contacts
from ...srv import ApplyWrench, ClearWrenches
from .. import conversions as cv

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.node import Node
    from rclpy.publisher import Publisher

    from ...sim.device import Device
    from ...sim.snapshot import Snapshot
    from ..bridge import CompletionBridge
    from .params import SimParams
    from .tf import FrameTree

_S = TypeVar('_S')     # the stream a maker makes (``sensors._Stream``)

QOS = QoSProfile(depth=10)
FORCE_SCALE = 0.01            # metres of arrow per newton
CONTACT_RGBA = (0.9, 0.1, 0.1, 1.0)
WRENCH_RGBA = (0.1, 0.4, 1.0, 1.0)


def _names(model, objtype, n, fallback):
    return [mujoco.mj_id2name(model, objtype, i) or f'{fallback}{i}' for i in range(n)]


class ContactStream:
    """The contact and push topics of one device."""

    def __init__(self, node: Node, device: Device, frames: FrameTree,
                 params: SimParams) -> None:
        self.device = device
        self.world = frames.world
        m = device.model
        self.bodies = _names(m, mujoco.mjtObj.mjOBJ_BODY, m.nbody, 'body')
        self.geoms = _names(m, mujoco.mjtObj.mjOBJ_GEOM, m.ngeom, 'geom')
        self.rate = params.contacts_rate
        self.contacts_pub = node.create_publisher(Contacts, 'contacts', QOS)
        self.markers_pub = (node.create_publisher(MarkerArray, 'contact_markers', QOS)
                            if params.contact_markers else None)
        self.wrench_pub = node.create_publisher(MarkerArray, 'wrench_markers', QOS)
        self._pubs = [self.contacts_pub, self.markers_pub]
        self._reporting = False
        self._markers_shown = 0

    def follow(self, model: mujoco.MjModel) -> None:
        """Name the bodies and geoms of a model a scene edit swapped in."""
        self.bodies = _names(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody, 'body')
        self.geoms = _names(model, mujoco.mjtObj.mjOBJ_GEOM, model.ngeom, 'geom')

    def streams(self, make: Callable[[Publisher, float, Callable[[Snapshot], Any]], _S]
                ) -> list[_S]:
        """Its streams, each ``make(publisher, period in simulated seconds, snapshot ->
        message or None)``."""
        out = [make(self.contacts_pub, 1.0 / self.rate, self._contacts),
               make(self.wrench_pub, 1.0 / self.rate, self._wrench_markers)]
        if self.markers_pub is not None:
            out.append(make(self.markers_pub, 1.0 / self.rate, self._contact_markers))
        return out

    def describe(self) -> list[str]:
        out = [f'contacts (@ {self.rate:g} Hz)', 'wrench_markers']
        return out + (['contact_markers'] if self.markers_pub is not None else [])

    def wanted_changed(self) -> None:
        """Ask the device for contacts exactly while someone listens."""
        want = any(p is not None and p.get_subscription_count() > 0 for p in self._pubs)
        if want != self._reporting:
            self._reporting = want
            self.device.sensing.report_contacts(want)

    def stop(self) -> None:
        if self._reporting:
            self._reporting = False
            try:
                self.device.sensing.report_contacts(False)
            except Exception:  # noqa: BLE001 - the device may be closed already
                pass

    def _contacts(self, snap):
        if snap.contacts is None:
            return None
        msg = Contacts()
        msg.header.stamp, msg.header.frame_id = cv.stamp(snap.time), self.world
        for c in snap.contacts:
            msg.contacts.append(Contact(
                body1=self.bodies[c['body1']], body2=self.bodies[c['body2']],
                geom1=self.geoms[c['geom1']], geom2=self.geoms[c['geom2']],
                position=cv.point(c['pos']), normal=cv.vector3(c['normal']),
                force=cv.vector3(c['force']), torque=cv.vector3(c['torque']),
                depth=float(c['dist'])))
        return msg

    def _contact_markers(self, snap):
        if snap.contacts is None:
            return None
        st = cv.stamp(snap.time)
        out = delete_all(self.world, st)
        for i, c in enumerate(snap.contacts):
            out.markers.append(arrow(self.world, 'contact_forces', i, c['pos'],
                                     c['pos'] + FORCE_SCALE * c['force'], CONTACT_RGBA, st))
        return out

    def _wrench_markers(self, snap):
        st = cv.stamp(snap.time)
        if not snap.wrenches and not self._markers_shown:
            return None
        out = delete_all(self.world, st)
        rot = np.empty(9)
        for i, w in enumerate(snap.wrenches):
            mujoco.mju_quat2Mat(rot, snap.xquat[w.body])
            r = rot.reshape(3, 3)
            at = snap.xpos[w.body] + r @ w.point
            force = w.force
            if w.frame >= 0:
                fr = np.empty(9)
                mujoco.mju_quat2Mat(fr, snap.xquat[w.frame])
                force = fr.reshape(3, 3) @ w.force
            out.markers.append(arrow(self.world, 'wrenches', i, at, at + FORCE_SCALE * force,
                                     WRENCH_RGBA, st, shaft=0.02))
        self._markers_shown = len(snap.wrenches)
        return out


class WrenchServices:
    """``apply_wrench`` and ``clear_wrenches``: requests to ``Device`` calls and back; a
    refused request answers with its code and changes nothing. Both Device calls wait for
    the stepper to take them, so the callbacks are coroutines that run them on the node's
    CompletionBridge worker (``ros/bridge.py``) rather than hold an executor thread."""

    def __init__(self, node: Node, device: Device, bridge: CompletionBridge) -> None:
        self.device = device
        self.bridge = bridge
        group = ReentrantCallbackGroup()
        self.services = [
            node.create_service(ApplyWrench, 'apply_wrench', self._apply, callback_group=group),
            node.create_service(ClearWrenches, 'clear_wrenches', self._clear,
                                callback_group=group)]

    @staticmethod
    def describe() -> list[str]:
        return ['apply_wrench', 'clear_wrenches']

    async def _apply(self, req, res):
        try:
            out = await self.bridge.call(
                self.device.sensing.apply_wrench, req.body, force=cv.vec(req.force),
                torque=cv.vec(req.torque), point=cv.vec(req.point),
                frame=req.reference_frame or 'world', duration=req.duration)
        except DeviceError as err:
            res.success, res.code, res.message = False, err.code, str(err)
            return res
        res.success, res.code, res.message = True, out['code'], out['message']
        res.end_time = float(out['end_time'])
        return res

    async def _clear(self, req, res):
        try:
            out = await self.bridge.call(self.device.sensing.clear_wrenches, list(req.bodies))
        except DeviceError as err:
            res.success, res.code, res.message = False, err.code, str(err)
            return res
        res.success, res.code, res.message = True, out['code'], out['message']
        res.cleared = out['cleared']
        return res


def arrow(frame: str, ns: str, mid: int, start: Iterable[float], end: Iterable[float],
          rgba: Sequence[float], stamp: Time, shaft: float = 0.01) -> Marker:
    m = Marker()
    m.header.frame_id, m.header.stamp = frame, stamp
    m.ns, m.id, m.type, m.action = ns, mid, Marker.ARROW, Marker.ADD
    m.points = [cv.point(start), cv.point(end)]
    m.scale.x, m.scale.y, m.scale.z = shaft, 2 * shaft, 3 * shaft
    m.color.r, m.color.g, m.color.b, m.color.a = (float(v) for v in rgba)
    m.pose.orientation.w = 1.0
    return m


def delete_all(frame: str, stamp: Time) -> MarkerArray:
    m = Marker(action=Marker.DELETEALL)
    m.header.frame_id, m.header.stamp = frame, stamp
    return MarkerArray(markers=[m])
