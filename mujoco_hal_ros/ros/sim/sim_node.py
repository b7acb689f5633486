"""sim_node: a MuJoCo model as a ROS 2 device that a robot stack cannot tell from hardware.

The node translates only: Device (core) does physics, limits, IK and paths. Three kinds
of work run in three places so none waits on another: the state publisher thread
(joint_states, /clock, /tf, poses, channels), the camera thread (images on subscription),
and the executor (services, actions, goal topics, diagnostics). All of them read the
device's snapshots; only the Device's own stepper thread touches the live MjData.
"""

from __future__ import annotations

from ...render import gl

gl.ensure_headless_gl()     # before anything below imports mujoco: it reads MUJOCO_GL once

import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any, TYPE_CHECKING  # noqa: E402

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue  # noqa: E402
from geometry_msgs.msg import TransformStamped  # noqa: E402
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup  # noqa: E402
from rclpy.logging import LoggingSeverity  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

from ... import fastpath  # noqa: E402
from ...errors import ConfigError, DeviceError  # noqa: E402
from ...mobile import config as drive_config  # noqa: E402
from ...sensors import declared as declared_sensors  # noqa: E402
from ...sim.device import Device  # noqa: E402
from ...world import robots_file  # noqa: E402
from ...world.sandbox import Limits, Sandbox  # noqa: E402
from .. import conversions as cv, dds_profile  # noqa: E402
from ..bridge import CompletionBridge  # noqa: E402
from ..guard import GuardedNode  # noqa: E402
from ..parameters import (  # noqa: E402, F401 - tests read it
    ALWAYS_DECLARED,
    ParameterTable,  # noqa: E402
    refuse_unknown,
)
from ..run import run_node, start_or_destroy  # noqa: E402
from ..swap.trajectory_controller import CONTROLLERS_FILE  # noqa: E402
from . import markers, params as P  # noqa: E402
from .cameras import CameraConfig, CameraPublisher  # noqa: E402
from .contacts import WrenchServices  # noqa: E402
from .control import Control  # noqa: E402
from .dataset import DatasetServices  # noqa: E402
from .description import DescriptionPublisher, model_from_parameters  # noqa: E402
from .mobile import DriveControllers  # noqa: E402
from .policy import PolicyRuns  # noqa: E402
from .recording import Recording  # noqa: E402
from .robots import RobotsServed  # noqa: E402
from .sensors import SensorPublisher  # noqa: E402
from .streams import StatePublisher, TF_STATIC_QOS  # noqa: E402
from .tf import FrameTree  # noqa: E402
from .web_view import attach_web_viewer  # noqa: E402

if TYPE_CHECKING:                      # types only: no import at run time
    from ...viewer import WebViewer
    from ...world.robots_file import RobotEntry
    from ..swap.serve import SwapInterfaces

STALL_LOG_S = 10.0      # at most one stall line and one unstable line this often


class SimNode(GuardedNode):
    """The simulated device node; see the package README for topics and services."""

    def __init__(self, node_name: str = 'sim_node', **kwargs: Any) -> None:
        # kwargs: rclpy Node's (context, parameter_overrides, ...)
        super().__init__(node_name, **kwargs)
        # the parts, built by _start (None until then, and once stopped)
        self.device: Device | None = None
        self.swap: SwapInterfaces | None = None
        self.state: StatePublisher | None = None
        self.cameras: CameraPublisher | None = None
        self.control: Control | None = None
        self.recording: Recording | None = None
        self.viewer: WebViewer | None = None
        self.bridge: CompletionBridge | None = None
        self.sensors: SensorPublisher | None = None
        self.robots: RobotsServed | None = None
        self.policy: PolicyRuns | None = None
        self.datasets: DatasetServices | None = None
        self.description: DescriptionPublisher | None = None
        self.urdf_text: str | None = None
        self.mobile: DriveControllers | None = None
        self.controllers: drive_config.ControllersFile | None = None
        self.drives: list[drive_config.DriveConfig] = []
        self._robot_odom_static: list[TransformStamped] = []
        self._robot_urdfs: dict[str, str] = {}
        # the robots file's entries (their own settings)
        self._robot_entries: list[RobotEntry] = []
        start_or_destroy(self, self._start)

    def _start(self):
        self.p = self._declare_all()
        fastpath.configure(self.p.fast_paths)     # before the device starts its threads
        p = self.p
        sandbox = Sandbox(Limits(
            memory_mb=p.sandbox_memory_mb, cpu_s=p.sandbox_cpu_s, max_bodies=p.world_max_bodies,
            max_geoms=p.world_max_geoms, max_mesh_vertices=p.world_max_mesh_vertices),
            roots=p.resource_roots or None)
        try:     # the sandbox reads a robot_description from the topic, then scene edits
            # the robot's own controllers file: its drive controllers decide which joints
            # are wheels (velocity servos) and steering before the URDF becomes a model
            path = ParameterTable([CONTROLLERS_FILE]).declare(self).controllers_file
            self.controllers = drive_config.read(path) if path else None
            self.urdf_text, urdf_model, self.republish, self.drives = model_from_parameters(
                self, p, sandbox, drives=self.controllers.drives if self.controllers else ())
            device_file, model = P.device_arguments(self.p, urdf_model)
            self.device = Device(device_file, model=model, keyframe=self.p.keyframe or None,
                                 real_time_factor=self.p.real_time_factor,
                                 start_paused=self.p.start_paused,
                                 gravity_compensation=self.p.gravity_compensation or None,
                                 move_tolerance=self.p.move_tolerance or None)
            if p.robots:         # the launch's own robots: read here, not in the sandbox
                notes = []
                self._robot_entries = robots_file.load(p.robots)
                self._robot_urdfs = robots_file.add_to(self.device, self._robot_entries, notes)
                for note in notes:        # each robot's import, as robot_description's
                    self.get_logger().info(f'robots: {note}')
        except BaseException:
            if self.device is not None:
                self.device.close()
            sandbox.close()
            raise
        self.device.sandbox = sandbox       # closed with the device
        if p.world_edits:
            self.device.sandbox.warm()     # imports MuJoCo while the node starts
        for name in ('gravity', 'timestep'):
            self._on_set_parameter(name, getattr(self.p, name))
        self._build()

    # --- parameters -------------------------------------------------------------------------
    def _declare_all(self):
        return P.sim_params(P.TABLE.declare(self), self.get_namespace())

    def _declare_cameras(self):
        """cameras.<channel>.rate/width/height, defaults from the globals and the device file."""
        configs = []
        depth_wanted = set(self.p.depth)
        # cameras the robot description (or the device file's cameras:) declares: their
        # rate, size, depth and topics are the tag's (the cameras.<name>.* parameters still
        # win), served even where a device file's channels leave them out
        tagged = declared_sensors.cameras(self.device.model)
        known = {i.name for i in self.device.layout.images} | \
            {i.camera for i in self.device.layout.images} | set(tagged)
        unknown = sorted(depth_wanted - known)
        if unknown:
            raise ConfigError(f'no camera {", ".join(unknown)}', where='parameter depth',
                              allowed=', '.join(sorted(known)) or 'none: this device has no '
                              'cameras')
        images = [(i.name, i.camera, i.width, i.height, i.depth)
                  for i in self.device.layout.images]
        served = {camera for _n, camera, *_rest in images}
        images += [(name, name, d.width, d.height, False) for name, d in tagged.items()
                   if name not in served]
        for name, camera, width, height, depth in images:
            tag = tagged.get(camera)
            got = P.camera_table(name, {'rate': tag.rate if tag else self.p.camera_rate,
                                        'width': self.p.camera_width or width,
                                        'height': self.p.camera_height or height}
                                 ).declare(self)
            depth = depth or name in depth_wanted or camera in depth_wanted or (
                tag is not None and tag.kind != 'camera')
            configs.append(CameraConfig(name, camera, got.width, got.height, got.rate,
                                        depth, topics=dict(tag.topics) if tag else {}))
        return configs

    def _check_unknown_overrides(self):
        refuse_unknown(self, ', '.join(sorted(P.TABLE.names())) +
                       ', cameras.<name>.rate|width|height')

    def _on_set_parameter(self, name, value):
        """A run-time change TABLE accepted (real_time_factor, gravity, timestep)."""
        if name == 'real_time_factor':
            self.device.set_real_time_factor(value)
        elif name == 'gravity' and value:
            self.device.physics.set_gravity(value)
        elif name == 'timestep' and value:
            self.device.physics.set_timestep(value)

    # --- assembly ---------------------------------------------------------------------------
    def _build(self):
        device, p = self.device, self.p
        drives = self.drives
        odom_tf = [d for d in drives if d.enable_odom_tf and d.type == drive_config.DIFF_DRIVE]
        # a drive controller's wheel odometry owns odom -> base on /tf, as on the robot
        robot_odom = self._robot_odometry()
        self.frames = FrameTree(device.model, p.frame_prefix, p.world_frame,
                                odom_tf[0].odom_frame_id if odom_tf else p.odom_frame,
                                bodies=p.publish_tf, base_tf=not odom_tf,
                                external=[p.frame_prefix + base for base, _t in robot_odom])
        self._robot_odom_static = [t for _base, t in robot_odom]
        camera_configs = self._declare_cameras()
        log = self.get_logger()
        # a drive controller's wheel odometry may take 'odom' (a Gazebo plugin's /odom):
        # the ground truth then moves beside it
        self.state = StatePublisher(self, device, self.frames, p, log,
                                    odom_topic='odom/ground_truth' if drives else 'odom')
        self.cameras = CameraPublisher(self, device, self.frames, camera_configs,
                                       log, p.camera_background,
                                       compression=(p.image_compression, p.jpeg_quality))
        self.sensors = SensorPublisher(self, device, self.frames, p, log)
        self.static_pub = self.create_publisher(TFMessage, '/tf_static', TF_STATIC_QOS)
        self.markers_pub = self.create_publisher(MarkerArray, 'scene_markers', TF_STATIC_QOS)
        self.collision_pub = self.create_publisher(MarkerArray, 'collision_markers',
                                                   TF_STATIC_QOS)
        self.diag_pub = self.create_publisher(DiagnosticArray, 'diagnostics', 10)
        self.bridge = CompletionBridge(self)    # every request's answer, when core work ends
        self.control = Control(self, device, self.bridge)
        self.wrench_services = WrenchServices(self, device, self.bridge)
        self.robots = RobotsServed(self, device, self.bridge, self.state, self._robot_urdfs,
                                   {e.namespace: e for e in self._robot_entries})
        self.policy = PolicyRuns(self, device, self.bridge, p)    # run_policy, stop_policy
        self.datasets = DatasetServices(self, device, self.bridge, p)   # LeRobot datasets
        self.description = (DescriptionPublisher(self, device.model, self.frames,
                                                 self.urdf_text)
                            if p.publish_robot_description and self.republish else None)
        # Parts log as they come up; a typo found by the check below must still be the one
        # line the user sees, so their start-up info waits for the check to pass.
        level = log.get_effective_level()
        log.set_level(max(level, LoggingSeverity.WARN))
        try:
            self._attach_swap(log)
            self._check_unknown_overrides()     # after every part declared its parameters
        finally:
            log.set_level(level)
        for why in self.swap.not_served if self.swap is not None else ():
            log.info(why)
        if drives:
            self.mobile = DriveControllers(self, device, drives,
                                           self.create_publisher(TFMessage, '/tf', 100))
        snap = device.snapshot
        self.static_pub.publish(TFMessage(transforms=self._statics(snap, cv.stamp(snap.time))))
        self.markers_ready = threading.Event()
        self._markers_stop = threading.Event()
        self._scene_swapped = threading.Event()     # set by the device's model-swapped event
        self._unsubscribe_scene = device.swaps.subscribe(
            lambda _event: self._scene_swapped.set())
        self._markers_lock = threading.Lock()      # destroy_node waits for a publish
        self._slow = MutuallyExclusiveCallbackGroup()
        self.create_timer(1.0 / p.diagnostics_rate, self._publish_diagnostics,
                          callback_group=self._slow)
        if p.log_summary:
            self.create_timer(p.summary_period, self._log_health, callback_group=self._slow)
        P.TABLE.watch(self, self._on_set_parameter)
        self._last_unstable = 0
        self._last_stalls, self._last_dropped = 0, 0.0
        self._clock_warned = False
        self._hardware_id = str(device.describe()['id'])
        # Meshes can hold 10^5 triangles: build the markers off the start-up path.
        self._markers_thread = threading.Thread(target=self._publish_markers,
                                                name='sim_node-markers', daemon=True)
        self._markers_thread.start()
        self.state.start()
        self.sensors.start()
        self.cameras.may_raise = lambda: self.state.realtime
        self.cameras.start()
        self.recording = Recording(self, device, self.cameras, p, log)
        self.viewer = attach_web_viewer(device, p, log)
        if p.log_summary:
            self._log_start()

    def _robot_odometry(self):
        """[(base frame, world -> odom transform)] of the robots-file robots whose drive
        controller publishes odom -> base: their odometry starts where they were put."""
        out = []
        for e in self._robot_entries:
            if not e.controllers_file:
                continue
            for d in drive_config.read(e.controllers_file).drives:
                if not (d.enable_odom_tf and d.type == drive_config.DIFF_DRIVE):
                    continue
                t = TransformStamped()
                t.header.frame_id = self.p.world_frame
                t.child_frame_id = f'{self.p.frame_prefix}{e.namespace}/{d.odom_frame_id}'
                tr, rot = t.transform.translation, t.transform.rotation
                tr.x, tr.y, tr.z = e.position
                rot.w, rot.x, rot.y, rot.z = e.quaternion
                out.append((f'{e.namespace}/{d.base_frame_id}', t))
        return out

    def _statics(self, snap, stamp):
        """Everything /tf_static carries: the frame tree's, the sensors', and the robots'
        odometry origins."""
        for t in self._robot_odom_static:
            t.header.stamp = stamp
        return (self.frames.static_transforms(snap, stamp)
                + self.sensors.static_transforms(stamp) + list(self._robot_odom_static))

    def _attach_swap(self, log):
        """The real arm's controller interfaces (trajectory controller, ...), where present."""
        try:
            from ..swap.serve import attach_swap_interfaces
        except ImportError as err:
            log.warning(f'real-arm controller interfaces not served: {err}')
            return
        self.swap = attach_swap_interfaces(self, self.device, self.p, bridge=self.bridge)

    def _publish_markers(self):
        """The scene thread: markers at start, then whatever hangs on the model and is
        published once (markers, /tf_static, a generated robot_description) again after
        each scene edit, woken by the device's model-swapped event."""
        generation = self.device.snapshot.generation
        self._publish_scene(self.device.model)
        self.markers_ready.set()
        while True:
            self._scene_swapped.wait()
            if self._markers_stop.is_set():
                return
            self._scene_swapped.clear()
            snap = self.device.snapshot
            if snap.generation == generation:
                continue
            generation = snap.generation
            try:
                model = self.device.cameras.model_of(generation)
            except DeviceError:
                continue                      # replaced again meanwhile: the next look
            self.frames = self.frames.for_model(model)
            with self._markers_lock:
                if self._markers_stop.is_set():
                    return
                stamp = cv.stamp(snap.time)
                self.static_pub.publish(TFMessage(
                    transforms=self._statics(snap, stamp)))
            if self.description is not None:
                self.description.follow(model)
            self._publish_scene(model)

    def _publish_scene(self, model):
        try:
            for pub, collision in ((self.markers_pub, False), (self.collision_pub, True)):
                array = markers.scene_markers(model, self.frames,
                                              cancelled=self._markers_stop.is_set,
                                              collision=collision)
                with self._markers_lock:
                    if array is not None and not self._markers_stop.is_set():
                        pub.publish(array)
        except Exception as err:  # noqa: BLE001 - rviz loses the scene, the device works
            if not self._markers_stop.is_set():
                self.get_logger().error(f'scene_markers: {type(err).__name__}: {err}')

    # --- reporting --------------------------------------------------------------------------
    def _log_start(self):
        d = self.device.describe()
        log = self.get_logger()
        ns = self.get_namespace()
        log.info(f'{d["device"]} ({d["id"]}): {d["model"]}, timestep {d["timestep"]:g} s, '
                 f'real_time_factor {self.p.real_time_factor:g}'
                 f'{", paused" if self.p.start_paused else ""}, namespace {ns}')
        published = self.state.describe() + (
            self.description.describe() if self.description else []) + [
            '/tf_static', 'scene_markers', 'collision_markers', 'diagnostics'] + \
            self.sensors.describe()
        log.info('publishing: ' + ', '.join(published + self.cameras.describe()))
        log.info('serving: ' + ', '.join(self.control.describe() + WrenchServices.describe() + (
            self.swap.describe() if self.swap is not None else []) + (
            self.mobile.describe() if self.mobile is not None else [])
            + self.recording.describe() + self.datasets.describe()
            + self.robots.describe()))
        gripper = getattr(self.swap, 'gripper', None) if self.swap is not None else None
        g = gripper.gripper if gripper is not None else None
        log.info('gripper: ' + ('none found (no finger joint driven to a position, no finger '
                                'tendon; gripper_controller.joint names one)' if g is None else
                                f'{g.joint} [{g.lo:g}, {g.hi:g}] on goal channel {g.channel}'))

    def health_line(self) -> str:
        device, cameras, publisher = self.device, self.cameras, self.state
        if device is None or cameras is None or publisher is None:
            return 'sim: shutting down'      # the parts it reports are gone
        h = device.health()
        rtf = h['measured_rtf']
        cams = ' | '.join(f'{n} {r:.1f} fps' for n, r in cameras.rates().items())
        state = 'paused' if h['paused'] else ('moving' if h['moving'] else 'idle')
        return (f'sim {h["sim_time"]:.3f} s | rtf {rtf if rtf is not None else 0:.2f} '
                f'(target {h["target_rtf"]:g}) | lag {h["lag_s"] * 1e3:.1f} ms | overruns '
                f'{h["overruns"]} | joint_states {publisher.joint_meter.rate():.0f} Hz'
                + (f' | {cams}' if cams else '') + f' | {state}')

    def _log_health(self):
        if self.state is not None and self.cameras is not None:
            self.get_logger().info(self.health_line())

    def _publish_diagnostics(self):
        # the parts as they are now: a shutdown on another thread sets them to None
        state, cameras, recording = self.state, self.cameras, self.recording
        if state is None or cameras is None:
            return                          # shutting down: the parts it reports are gone
        h = self.device.health()
        rtf = h['measured_rtf']
        level, message = DiagnosticStatus.OK, 'running'
        if h['paused']:
            message = 'paused'
        elif h['target_rtf'] > 0 and rtf is not None and rtf < 0.9 * h['target_rtf']:
            level, message = DiagnosticStatus.WARN, (f'slower than asked: real time factor '
                                                     f'{rtf:.2f} of {h["target_rtf"]:g}')
        slow = cameras.lagging()
        if slow and level == DiagnosticStatus.OK:
            name, fps, rate = slow[0]
            why = ('background rendering only gets CPU time nothing else wants; '
                   'camera_background:=false renders at normal priority'
                   if cameras.background else
                   'rendering cannot keep up; lower the rate or the image size')
            level, message = DiagnosticStatus.WARN, (f'camera {name} at {fps:.1f} fps of '
                                                     f'{rate:g} asked: {why}')
        # Two simulators both on /clock make every use_sim_time node's time jump between them.
        clocks = self.count_publishers('/clock') if state.clock_pub is not None else 0
        if clocks > 1:
            why = (f'{clocks} publishers on /clock: with several simulators set '
                   'publish_clock:=false on all but one')
            if not self._clock_warned:
                self._clock_warned = True
                self.get_logger().warning(why)
            if level == DiagnosticStatus.OK:
                level, message = DiagnosticStatus.WARN, why
        if h['stalls'] > self._last_stalls:
            dropped = h['dropped_s'] - self._last_dropped
            self._last_stalls, self._last_dropped = h['stalls'], h['dropped_s']
            why = (f'stalled: {dropped:.3f} s of simulated time dropped rather than run off '
                   f'at full speed ({h["stalls"]} stalls, {h["dropped_s"]:.3f} s in all)')
            self.get_logger().warning(why, throttle_duration_sec=STALL_LOG_S)
            if level == DiagnosticStatus.OK:
                level, message = DiagnosticStatus.WARN, why
        if h['unstable_events'] > self._last_unstable:
            self._last_unstable = h['unstable_events']
            level, message = DiagnosticStatus.ERROR, 'simulation went unstable; reset and held'
            self.get_logger().warning(
                f'simulation went unstable ({h["unstable_events"]} times so far): reset to the '
                'keyframe and held; lower the timestep or check the model\'s masses and gains',
                throttle_duration_sec=STALL_LOG_S)
        values = {'sim_time': h['sim_time'], 'measured_rtf': rtf if rtf is not None else 0.0,
                  'target_rtf': h['target_rtf'], 'lag_s': h['lag_s'],
                  'worst_lag_s': h['worst_lag_s'], 'overruns': h['overruns'],
                  'steps': h['steps'], 'paused': h['paused'], 'moving': h['moving'],
                  'unstable_events': h['unstable_events'], 'stalls': h['stalls'],
                  'dropped_s': h['dropped_s'],
                  'joint_states_hz': state.joint_meter.rate(),
                  'tf_hz': state.tf_meter.rate(),
                  'state_thread_scheduling': state.scheduling,
                  'cameras_in_background': cameras.background,
                  'clock_publishers': clocks}
        for name, fps in cameras.rates().items():
            values[f'camera {name} fps'] = fps
        status = DiagnosticStatus(level=level, name=f'{self.get_fully_qualified_name()}: '
                                  'simulation', message=message,
                                  hardware_id=self._hardware_id,
                                  values=[KeyValue(key=k, value=_text(v))
                                          for k, v in values.items()])
        msg = DiagnosticArray(status=[status] + ([recording.status()]
                                                 if recording is not None else []))
        msg.header.stamp = cv.stamp(self.device.snapshot.time)
        try:
            self.diag_pub.publish(msg)
        except Exception:  # noqa: BLE001 - Ctrl-C shuts the context down before the timer
            if self.context.ok():
                raise

    # --- lifetime ---------------------------------------------------------------------------
    def answer_waiting(self, timeout: float) -> None:
        """Shutdown, while the executor still spins: every waiting request and goal gets
        its answer (CLOSED where its work did not finish); returns once the goals' results
        are out or after ``timeout`` s (``run_node`` calls it before the context goes)."""
        if self.bridge is None:
            return
        self.bridge.stop()
        if self.policy is not None:
            self.policy.stop()  # a policy computing in its worker: the worker is killed
        self._stop_threads()
        if self.device is not None:     # it is: the bridge comes after it
            self.device.close()     # requests queued for the physics thread are refused: CLOSED
        deadline = time.monotonic() + timeout
        control, robots = self.control, self.robots

        def running():
            return ((control.goals_running if control is not None else 0)
                    + (robots.goals_running() if robots is not None else 0))
        while running() and time.monotonic() < deadline:
            time.sleep(0.01)

    def destroy_node(self) -> None:
        """Stop every thread that publishes before the publishers go away."""
        self._stop_parts()
        return super().destroy_node()

    def _stop_threads(self):
        """The threads that publish and render stop (joined) before anything they use."""
        if self.datasets is not None:        # datasets finalise while the device still runs
            self.datasets.destroy()
            self.datasets = None
        for extra in (self.viewer, self.recording):     # recording first writes what it has
            if extra is not None:
                extra.close()
        self.viewer = self.recording = None
        thread = getattr(self, '_markers_thread', None)
        if thread is not None:
            self._unsubscribe_scene()
            self._markers_stop.set()
            self._scene_swapped.set()
            with self._markers_lock:
                pass                        # a publish in progress has finished
            thread.join(5.0)
        for part in (self.state, self.sensors, self.cameras, self.description):
            if part is not None:
                part.stop()
        self.state = self.cameras = self.sensors = None

    def _stop_parts(self):
        """Stop whatever parts exist, built fully or only up to a refused parameter."""
        self._stop_threads()
        if self.bridge is not None:
            self.bridge.close()            # every waiting coroutine gets its answer
        if self.robots is not None:
            self.robots.destroy()
        if self.control is not None:
            self.control.destroy()
        self.control = self.robots = None
        if self.policy is not None:
            self.policy.destroy()
            self.policy = None
        if self.swap is not None:
            self.swap.destroy()
            self.swap = None
        if self.mobile is not None:
            self.mobile.destroy()
            self.mobile = None
        if self.device is not None:
            self.device.close()


def _text(v):
    if isinstance(v, float):
        return f'{v:.6g}'
    return str(v).lower() if isinstance(v, bool) else str(v)


def main(argv: list[str] | None = None) -> int:
    """Run until Ctrl-C; a bad parameter or file ends it at start with one line, exit 2."""
    dds_profile.use_default_profile(P.share_dir())    # before the context reads it
    return run_node('sim_node', SimNode, argv, threads=4)


if __name__ == '__main__':
    sys.exit(main())
