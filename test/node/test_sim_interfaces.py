"""simulation_interfaces and the topic_based_ros2_control command topic, in one process.

simulation_interfaces is the real package on a ROS install and our stand-in here; the
tests use only the fields and codes of its 1.x release.
"""

import math
import os

import numpy as np
import pytest
from rclpy.action import ActionClient
from sensor_msgs.msg import JointState

simulation_interfaces = pytest.importorskip(
    'simulation_interfaces.srv', reason='simulation_interfaces is not installed and its '
    'stand-in was not built (run scripts/setup.sh)')
from simulation_interfaces.action import SimulateSteps  # noqa: E402
from simulation_interfaces.msg import Result, SimulationState, SimulatorFeatures  # noqa: E402
from simulation_interfaces.srv import (  # noqa: E402
    GetEntityState,
    GetSimulationState,
    GetSimulatorFeatures,
    ResetSimulation,
    SetEntityState,
    SetSimulationState,
    StepSimulation,
)
from swap_helpers import DEG, Harness  # noqa: E402

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.sim.device import Device  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..'))
BENCH_YAML = os.path.join(ROOT, 'config', 'bench_arm.yaml')
OK = Result.RESULT_OK


@pytest.fixture
def h():
    dev = Device(BENCH_YAML, environ={'OPENHAL_BENCH_ARM': menagerie.bench_arm_path()},
                 real_time_factor=2.0)
    harness = Harness(dev)
    c = harness.client
    harness.srv = {name: c.create_client(t, name) for name, t in (
        ('get_simulator_features', GetSimulatorFeatures), ('reset_simulation', ResetSimulation),
        ('get_simulation_state', GetSimulationState), ('set_simulation_state',
                                                       SetSimulationState),
        ('step_simulation', StepSimulation), ('get_entity_state', GetEntityState),
        ('set_entity_state', SetEntityState))}
    yield harness
    harness.close()
    dev.close()


def call(h, name, **fields):
    client = h.srv[name]
    req = client.srv_type.Request()
    for k, v in fields.items():
        setattr(req, k, v)
    return h.call(client, req)


def set_state(h, state):
    return call(h, 'set_simulation_state', state=SimulationState(state=state)).result


def test_features_say_what_is_served(h):
    f = call(h, 'get_simulator_features').features
    F = SimulatorFeatures
    assert {F.SIMULATION_RESET, F.SIMULATION_STATE_PAUSE, F.STEP_SIMULATION_ACTION,
            F.ENTITY_STATE_GETTING, F.ENTITY_STATE_SETTING} <= set(f.features)
    assert F.SPAWNING in f.features and F.SIMULATION_RESET_TIME not in f.features
    assert 'free' in f.custom_info


def test_pause_step_play_stop(h):
    S = SimulationState
    assert call(h, 'get_simulation_state').state.state == S.STATE_PLAYING
    # Stepping while playing is refused, as the standard says.
    r = call(h, 'step_simulation', steps=10).result
    assert r.result == Result.RESULT_OPERATION_FAILED and 'paused' in r.error_message
    assert set_state(h, S.STATE_PAUSED).result == OK
    assert set_state(h, S.STATE_PAUSED).result == \
        SetSimulationState.Response.ALREADY_IN_TARGET_STATE
    t0 = h.device.snapshot.time
    h.spin_for(0.2)
    assert h.device.snapshot.time == t0
    assert call(h, 'step_simulation', steps=50).result.result == OK
    assert h.device.snapshot.time == pytest.approx(t0 + 50 * 0.002)
    assert call(h, 'step_simulation', steps=0).result.result == Result.RESULT_OPERATION_FAILED
    # simulate_steps: progress feedback, then paused again.
    action = ActionClient(h.client, SimulateSteps, 'simulate_steps')
    fb = []
    gh, res = h.send(action, SimulateSteps.Goal(steps=200), feedback=fb)
    out = h.wait(res, 10.0)
    assert out.result.result.result == OK
    assert fb and fb[-1].completed_steps == 200 and fb[-1].remaining_steps == 0
    assert h.device.snapshot.time == pytest.approx(t0 + 250 * 0.002)
    assert h.device.stepper.paused
    # Stopped: paused and reset; playing again leaves it.
    h.device.set_goals({'pan_goal': 20.0})
    h.device.step(500)
    assert set_state(h, S.STATE_STOPPED).result == OK
    assert call(h, 'get_simulation_state').state.state == S.STATE_STOPPED
    assert h.device.snapshot.qpos[0] == pytest.approx(0.0, abs=1e-9)
    assert set_state(h, S.STATE_QUITTING).result == Result.RESULT_FEATURE_UNSUPPORTED
    assert set_state(h, S.STATE_PLAYING).result == OK
    assert not h.device.stepper.paused


def test_reset_scopes(h):
    R = ResetSimulation.Request
    h.device.set_goals({'pan_goal': 30.0})
    h.spin_until(lambda: h.device.snapshot.qpos[0] > 25 * DEG, 5.0)
    t = h.device.snapshot.time
    r = call(h, 'reset_simulation', scope=R.SCOPE_DEFAULT).result
    assert r.result == OK and 'forward' in r.error_message
    assert abs(h.device.snapshot.qpos[0]) < 1e-6 and h.device.snapshot.time >= t
    assert call(h, 'reset_simulation', scope=R.SCOPE_STATE).result.result == OK
    for scope in (R.SCOPE_TIME, R.SCOPE_SPAWNED):
        assert call(h, 'reset_simulation', scope=scope).result.result == \
            Result.RESULT_FEATURE_UNSUPPORTED


def test_entity_state_get_and_set(h):
    got = call(h, 'get_entity_state', entity='block')
    assert got.result.result == OK and got.state.header.frame_id == 'world'
    p = got.state.pose.position
    assert (p.x, p.y) == pytest.approx((0.17, 0.05), abs=2e-3)
    # Place the free block (ROS quaternion x, y, z, w) and give it a spin.
    req = SetEntityState.Request(entity='block', set_pose=True, set_twist=True)
    req.state.pose.position.x, req.state.pose.position.y, req.state.pose.position.z = \
        0.2, -0.05, 0.2
    s = math.sqrt(0.5)
    req.state.pose.orientation.z, req.state.pose.orientation.w = s, s
    req.state.twist.angular.z = 2.0
    assert h.call(h.srv['set_entity_state'], req).result.result == OK
    got = call(h, 'get_entity_state', entity='block').state
    assert got.pose.position.x == pytest.approx(0.2, abs=1e-3)
    assert got.pose.position.z > 0.15                          # falling, not yet landed
    assert got.twist.angular.z == pytest.approx(2.0, abs=0.05)
    assert abs(got.pose.orientation.w) == pytest.approx(s, abs=0.05)
    # Links held by joints, unknown names, bad quaternions, other frames.
    req = SetEntityState.Request(entity='forearm', set_pose=True)
    r = h.call(h.srv['set_entity_state'], req).result
    assert r.result == Result.RESULT_OPERATION_FAILED and 'block' in r.error_message
    assert call(h, 'get_entity_state', entity='nope').result.result == Result.RESULT_NOT_FOUND
    req = SetEntityState.Request(entity='block', set_pose=True)
    req.state.pose.orientation.w = 0.0
    assert h.call(h.srv['set_entity_state'], req).result.result == \
        SetEntityState.Response.INVALID_POSE
    req = SetEntityState.Request(entity='block', set_pose=True)
    req.state.header.frame_id = 'tool0'
    assert h.call(h.srv['set_entity_state'], req).result.result == \
        Result.RESULT_OPERATION_FAILED
    # A link's state can be read (ground truth), with a twist while it moves.
    h.device.set_goals({'pan_goal': 40.0})
    h.spin_for(0.15)
    got = call(h, 'get_entity_state', entity='turret').state
    assert got.twist.angular.z > 0.1


def test_joint_commands_go_through_the_limits_kernel(h):
    dev = h.device
    pub = h.client.create_publisher(JointState, 'joint_commands', 10)
    h.spin_until(lambda: pub.get_subscription_count() > 0, 5.0)
    before = dev.snapshot.setpoint.copy()
    topic = h.parts.topic
    # Out of the device file's limits: the whole message is refused.
    pub.publish(JointState(name=['elbow', 'pan'], position=[0.5, 100 * DEG]))
    h.spin_until(lambda: topic.refused == 1, 5.0)
    assert 'pan_goal' in topic.last_error and '-90..90 deg' in topic.last_error
    pub.publish(JointState(name=['hand'], position=[0.1]))
    pub.publish(JointState(name=['pan'], velocity=[0.1]))
    h.spin_until(lambda: topic.refused == 3, 5.0)
    h.spin_for(0.1)
    assert np.array_equal(dev.snapshot.setpoint, before)
    # In limits, in radians: the channel (degrees) gets the same angle.
    pub.publish(JointState(name=['elbow', 'pan'], position=[0.5, 10 * DEG]))
    h.spin_until(lambda: topic.applied == 1, 5.0)
    h.spin_until(lambda: np.allclose(dev.snapshot.setpoint[[2, 0]], [0.5, 10 * DEG]), 5.0)
