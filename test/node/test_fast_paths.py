"""The fast paths change nothing a subscriber can see: the same scenario byte for byte.

Two sim_nodes, each in its own Context, one after the other: ``fast_paths`` true (CDR bytes
packed from arrays, images through librcl without the GIL, scheduling and rasteriser
priority) and then false (rclpy message objects through ``Publisher.publish``). Each starts
paused, gets the same goals and the same ``step`` calls, with a camera subscribed. Every
message is taken serialized (``raw=True``) as it came off the wire; for each simulated time
a step call ended at, joint_states, /tf, /clock, the image and camera_info must be the
same in both runs, every field bit for bit (``canonical``: the CDR alignment padding,
which Jazzy's serializer leaves uninitialised, is the one thing not compared). Frames are
compared whole: llvmpipe draws the same scene to the same pixels.
"""

import array
import threading

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from helpers import SpunNodes, wait_for  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from mujoco_hal_ros import fastpath  # noqa: E402
from mujoco_hal_ros.fastpath.unlocked_publish import BytesPublisher  # noqa: E402
from mujoco_hal_ros.render import gl  # noqa: E402
from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402  (sets headless GL first)
from mujoco_hal_ros.srv import SetGoals, Step  # noqa: E402

STEP_CALLS = 6
STEPS_PER_CALL = 4
WAIT_S = 20.0

# topic -> (message type, the stamp of a deserialized message)
TOPICS = {
    'joint_states': (JointState, lambda m: m.header.stamp),
    '/tf': (TFMessage, lambda m: m.transforms[0].header.stamp),
    '/clock': (Clock, lambda m: m.clock),
    'overhead/image_raw': (Image, lambda m: m.header.stamp),
    'overhead/camera_info': (CameraInfo, lambda m: m.header.stamp),
}
PARAMS = {'start_paused': True, 'publish_rate': 200.0, 'tf_rate': 200.0,
          'camera_rate': 30.0, 'camera_width': 64, 'camera_height': 48,
          'trajectory_controller': '', 'simulation_interfaces': False}


def canonical(value):
    """Every field of a message, arrays as their raw bytes: exact, and blind to padding."""
    if hasattr(value, 'get_fields_and_field_types'):
        return tuple((f, canonical(getattr(value, f)))
                     for f in value.get_fields_and_field_types())
    if isinstance(value, (np.ndarray, array.array, bytes, bytearray)):
        arr = np.asarray(value)
        return (arr.dtype.str, arr.shape, arr.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    return value


def _ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class Recorder:
    """Serialized messages per topic, grouped by their stamp (simulated nanoseconds)."""

    def __init__(self, node):
        self.lock = threading.Lock()
        self.by_stamp = {topic: {} for topic in TOPICS}
        self.subs = [node.create_subscription(msg_type, topic, self._on(topic, msg_type, st),
                                              10, raw=True)
                     for topic, (msg_type, st) in TOPICS.items()]

    def _on(self, topic, msg_type, stamp_of):
        def on_bytes(data):
            msg = deserialize_message(data, msg_type)
            ns = _ns(stamp_of(msg))
            with self.lock:
                self.by_stamp[topic].setdefault(ns, {})[canonical(msg)] = msg
        return on_bytes

    def has_all(self, ns, skip=None):
        with self.lock:
            return all(ns in seen for topic, seen in self.by_stamp.items() if topic != skip)


def run_scenario(fast):
    """{topic: {stamp: set of payloads}} at the times the scenario stopped at."""
    spun = SpunNodes(lambda ctx: [
        SimNode(context=ctx, parameter_overrides=[
            Parameter(k, value=v) for k, v in dict(PARAMS, fast_paths=fast).items()]),
        rclpy.create_node('fast_paths_probe', context=ctx)],
        lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
    try:
        sim, probe = spun.nodes
        assert fastpath.enabled() is fast
        assert sim.state.raw is fast and sim.cameras.raw is fast
        out = sim.cameras.streams[0].image_out
        assert isinstance(out, BytesPublisher) is fast and (not fast or out.unlocked)
        if not fast:      # no scheduling asked for, rendering at normal priority
            assert sim.state.scheduling == 'ordinary' and sim.cameras.background is False
        recorder = Recorder(probe)
        spun.spin(120.0)
        start = _ns_of(sim.device.snapshot.time)
        # /clock went out once at start, before the probe listened: the steps send it again
        assert wait_for(lambda: recorder.has_all(start, skip='/clock'), WAIT_S), \
            f'not every topic published the paused state (fast_paths {fast})'
        stops = []
        res = spun.call(SetGoals, 'set_goals', SetGoals.Request(
            channels=['pan_goal', 'lift_goal'], values=[25.0, 30.0]))
        assert res.success, res.codes
        for _ in range(STEP_CALLS):
            res = spun.call(Step, 'step', Step.Request(steps=STEPS_PER_CALL))
            assert res.success, res.message
            stops.append(_ns_of(res.sim_time))
            assert wait_for(lambda: recorder.has_all(stops[-1]), WAIT_S), \
                f'not every topic published t={res.sim_time} (fast_paths {fast})'
        with recorder.lock:
            return {topic: {ns: seen[ns] for ns in stops}
                    for topic, seen in recorder.by_stamp.items()}, stops
    finally:
        spun.close()
        fastpath.configure(True)


def _ns_of(seconds):
    return max(0, int(round(seconds * 1e9)))       # as the stamps are written


@pytest.fixture(scope='module')
def both_ways():
    if gl.probe() is not None:
        pytest.skip(f'no OpenGL here: {gl.probe()}')
    fast, fast_stops = run_scenario(True)
    plain, plain_stops = run_scenario(False)
    assert fast_stops == plain_stops
    return fast, plain, fast_stops


@pytest.mark.parametrize('topic', list(TOPICS))
def test_fast_paths_send_the_same_bytes(both_ways, topic):
    fast, plain, stops = both_ways
    assert len(set(stops)) == len(stops), 'every step call moved simulated time on'
    for ns in stops:
        # within a run, every message of one simulated time is the same
        assert len(fast[topic][ns]) == 1 and len(plain[topic][ns]) == 1, (topic, ns)
        assert set(fast[topic][ns]) == set(plain[topic][ns]), \
            f'{topic} at t={ns * 1e-9:.3f} s differs between fast_paths true and false'
    if topic == 'joint_states':
        first = next(iter(fast[topic][stops[0]].values()))
        last = next(iter(fast[topic][stops[-1]].values()))
        assert list(first.position) != list(last.position), 'the goals moved the arm'
