"""Drives and failure modes: torque motors holding under gravity and taking joint goals,
velocity servos, raw-ctrl actuators, an unstable model caught and held, and a stepper that
survives an error in its own loop."""

import math

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.motion.trajectory import MinJerkPlan

DT = 0.002


def torque_doc():
    return {'connect': {'mujoco': 'ARM', 'keyframe': 'home'},
            'read': {'shoulder': {'unit': 'deg'}, 'elbow': {'unit': 'deg'},
                     'tip_z': {'unit': 'mm', 'map': {'site': 'tip', 'axis': 'z'}}},
            'write': {'pan_goal': {'unit': 'deg', 'max_change_per_s': 90},
                      'shoulder_goal': {'unit': 'deg', 'max_change_per_s': 60},
                      'elbow_goal': {'unit': 'deg', 'max_change_per_s': 60}},
            'actions': {'move_to': {'args': {a: {'unit': 'mm', 'min': -500, 'max': 500}
                                             for a in 'xyz'},
                                    'map': {'command': 'move_to', 'site': 'tip'},
                                    'effects': ['pan_goal', 'shoulder_goal', 'elbow_goal']}}}


@pytest.fixture
def torque_arm(open_device, h):
    return open_device(torque_doc(), environ={'ARM': h.model_file('torque_arm')},
                       start_paused=True)


def test_torque_arm_needs_the_loop(h):
    # Without the device's loop the arm falls: the test below means something.
    m = mujoco.MjModel.from_xml_path(h.model_file('torque_arm'))
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    for _ in range(500):
        mujoco.mj_step(m, d)
    assert abs(d.qpos[1] - (-0.3)) > 0.3


def test_torque_arm_holds_still_under_gravity(torque_arm):
    desc = torque_arm.describe()
    assert [a['drive'] for a in desc['actuators']] == ['motor_impedance'] * 3
    assert desc['gravity_compensated'] == []          # motors: the stepper's loop does it
    q0 = torque_arm.snapshot.qpos.copy()
    assert q0 == pytest.approx([0.0, -0.3, 0.6])
    torque_arm.step(2500)                             # 5 s
    assert np.abs(torque_arm.snapshot.qpos - q0).max() < 1e-4
    assert np.abs(torque_arm.snapshot.qvel).max() < 1e-4
    assert abs(torque_arm.snapshot.ctrl[1]) > 1e-3     # it is working against gravity


def test_torque_arm_takes_joint_goals(torque_arm, h):
    # Lift the arm and fold the elbow down (a path that stays clear of the floor).
    torque_arm.set_goals({'shoulder_goal': -60, 'elbow_goal': 90})
    times, sp, q = h.trace(torque_arm, 1500)
    assert np.abs(np.diff(sp[:, 1])).max() / DT <= math.radians(60) * (1 + 1e-9)
    # The loop feeds the path's speed and acceleration forward: it tracks, not lags.
    assert np.abs(q[:, 1:] - sp[:, 1:]).max() < math.radians(0.5)
    torque_arm.step(500)
    read = torque_arm.read()
    assert read['shoulder'] == pytest.approx(-60, abs=0.05)
    assert read['elbow'] == pytest.approx(90, abs=0.05)
    torque_arm.hold()
    q = torque_arm.snapshot.qpos.copy()
    torque_arm.step(1000)
    assert np.abs(torque_arm.snapshot.qpos - q).max() < 1e-4


def test_torque_arm_move_to(torque_arm):
    torque_arm.pause(False)
    for xyz in ((300, 100, 300), (200, -200, 250), (350, 0, 150)):
        result = torque_arm.move_to(dict(zip('xyz', xyz, strict=True)))
        assert result['success'] and result['miss'] <= 1e-3, result


def test_velocity_and_raw_ctrl_drives(open_device, h):
    doc = {'connect': {'mujoco': 'RIG', 'keyframe': 'start'},
           'read': {'rail': {'unit': 'mm'}, 'spin': {'unit': 'deg'}},
           'write': {'rail_goal': {'unit': 'mm', 'max_change_per_s': 100},
                     'spin_goal': {'unit': 'deg/s', 'max_change_per_s': 360},
                     'flap_goal': {'unit': 'percent'}}}
    dev = open_device(doc, environ={'RIG': h.model_file('units_rig')}, start_paused=True)
    drives = {c['name']: c['drive'] for c in dev.describe()['channels']
              if c['direction'] == 'write'}
    assert drives == {'rail_goal': 'position', 'spin_goal': 'velocity',
                      'flap_goal': 'direct'}
    assert dev.goals() == {'rail_goal': pytest.approx(50), 'spin_goal': 0,
                           'flap_goal': 0}
    dev.set_goals({'rail_goal': 150, 'spin_goal': 180, 'flap_goal': 40})
    dev.step(1500)
    snap = dev.snapshot
    assert dev.read()['rail'] == pytest.approx(150, abs=0.5)
    assert snap.qvel[1] == pytest.approx(math.pi, rel=0.02)        # 180 deg/s
    assert snap.ctrl[2] == pytest.approx(0.4 * 255)
    # Hold stops a velocity servo (its goal reads 0: it holds still), freezes the others.
    dev.hold()
    assert dev.goals() == {'rail_goal': pytest.approx(150), 'spin_goal': 0,
                           'flap_goal': pytest.approx(40)}
    dev.step(1000)
    assert abs(dev.snapshot.qvel[1]) < 0.05
    assert dev.audit()[-1]['native']['spin'] == 0.0


def test_unstable_model_is_caught(open_device, h):
    dev = open_device(model=h.model_file('unstable'), keyframe='zero', start_paused=True)
    dev.step(10)
    t0 = dev.snapshot.time
    move = dev.move_to(point=[0.5, 0, 0], site='dot', wait=False)
    dev.set_goals({'s_goal': 0.5})
    dev.step(5)
    snap = dev.snapshot
    assert dev.health()['unstable_events'] >= 1
    assert snap.time == pytest.approx(t0 + 5 * 0.01)                 # never backwards
    assert np.isfinite(snap.qpos).all() and snap.qpos[0] == 0.0
    assert snap.setpoint[0] == 0.0 and not snap.moving                # held at the keyframe
    event = dev.events()[-1]
    assert event['code'] == errors.UNSTABLE and 'unstable' in event['message']
    assert dev.audit()[-1]['kind'] == 'unstable'
    assert move.done()
    assert move.result['code'] in (errors.PREEMPTED, errors.UNSTABLE)
    # The device carries on.
    dev.step(10)
    assert dev.snapshot.time == pytest.approx(t0 + 15 * 0.01)
    assert dev.health()['errors'] == 0


def test_nan_in_the_state_is_caught(bench):
    bench.set_goals({'pan_goal': 40})
    move = bench.move_to({'x': 170, 'y': 0, 'z': 60}, wait=False)
    t0 = bench.snapshot.time

    def poison(s):
        s.data.qvel[1] = float('nan')
    bench.stepper.post(poison, wait=True)
    bench.step(2)
    snap = bench.snapshot
    assert np.isfinite(snap.qpos).all() and np.isfinite(snap.qvel).all()
    assert snap.time >= t0 + 2 * DT - 1e-12
    assert snap.qpos[:4] == pytest.approx([0.0, 0.2, 0.9, 0.9])
    assert move.result['code'] == errors.UNSTABLE and not move.result['success']
    assert bench.events()[-1]['code'] == errors.UNSTABLE
    assert bench.health()['unstable_events'] == 1


def test_stepper_survives_an_error_in_its_loop(bench):
    class Broken(MinJerkPlan):
        def sample(self, times):
            raise RuntimeError('broken plan')
    bench.set_goals({'lift_goal': 30})
    bench.stepper.post(lambda s: s.take_over(Broken([0], [0.0], [1.0], s.data.time, 1.0)),
                       wait=True)
    bench.pause(False)
    bench.pause(True)
    health = bench.health()
    assert health['errors'] >= 1 and 'broken plan' in health['last_error']
    assert health['alive']
    assert bench.events()[-1]['code'] == errors.INTERNAL_ERROR
    assert not bench.snapshot.moving                  # it held everything
    bench.set_goals({'pan_goal': 10})                 # and still takes requests
    bench.step(500)
    assert bench.goals()['pan_goal'] == pytest.approx(10)


def test_rollout_chunks_match_python_steps(open_device, h, monkeypatch):
    from mujoco_hal_ros.sim import roller
    monkeypatch.setattr(roller, 'ROLLOUT_MIN', 2)      # every chunk rolls out, short or not
    devs = [open_device(h.BENCH_YAML, start_paused=True) for _ in range(2)]
    calls = []
    roll = devs[0].stepper.roller.roll
    devs[0].stepper.roller.roll = lambda rows: (calls.append(len(rows)), roll(rows))
    devs[1].stepper.roller.enabled = False    # the plain `ctrl[:] = row; mj_step` loop
    for dev in devs:
        dev.set_goals({'pan_goal': 40, 'lift_goal': -30})
        dev.step(401)
        dev.move_to({'x': 170, 'y': 0, 'z': 60}, wait=False)
        dev.step(999)
    a, b = devs[0].snapshot, devs[1].snapshot
    assert calls and a.time == b.time and np.array_equal(a.qpos, b.qpos)
    assert np.array_equal(a.qvel, b.qvel) and np.array_equal(a.setpoint, b.setpoint)


MOCAP_XML = """
<mujoco>
  <option gravity="0 0 0"/>
  <worldbody>
    <body name="target" mocap="true" pos="0 0 1"><geom type="sphere" size="0.02"
        contype="0" conaffinity="0"/></body>
    <body name="cart"><joint name="x" type="slide" axis="1 0 0" range="-1 1"/>
      <geom size="0.05" mass="1"/></body>
  </worldbody>
  <actuator><position name="x" joint="x" kp="100" dampratio="1"/></actuator>
  <keyframe><key name="k" qpos="0.1" mpos="0.3 0.2 0.5" ctrl="0.1"/></keyframe>
</mujoco>
"""


def test_mocap_bodies_keep_their_keyframe_pose(open_device, tmp_path):
    path = tmp_path / 'mocap.xml'
    path.write_text(MOCAP_XML)
    dev = open_device(model=str(path), keyframe='k', start_paused=True)
    dev.set_goals({'x_goal': 0.5})
    dev.step(600)
    snap = dev.snapshot
    assert snap.mocap_pos[0] == pytest.approx([0.3, 0.2, 0.5])
    assert snap.qpos[0] == pytest.approx(0.5, abs=1e-3)


def test_request_that_times_out_is_withdrawn(bench):
    import threading

    from mujoco_hal_ros.errors import DeviceError
    runner = threading.Thread(target=bench.step, args=(30000,))
    runner.start()
    ran = []
    while bench.stepper._busy is None and runner.is_alive():
        pass
    with pytest.raises(DeviceError) as err:
        bench.stepper.post(lambda s: ran.append(1), wait=True, timeout=0.001)
    assert err.value.code == errors.TIMEOUT and 'nothing was changed' in str(err.value)
    runner.join(60)
    bench.step(2)
    assert ran == []                         # it never ran, even after the stepper was free
    assert bench.snapshot.time == pytest.approx(30002 * DT)


def test_applied_forces_survive_fast_chunks(open_device, h):
    dev = open_device(model=h.model_file('units_rig'), keyframe='start')   # rtf 0, running
    dev.pause(True)

    def push(s):
        s.data.xfrc_applied[dev.model.body('spinner').id, 5] = 1e-3   # a torque about z
    dev.stepper.post(push, wait=True)
    dev.set_goals({'rail_goal': 0.1})
    dev.pause(False)
    import time
    time.sleep(0.3)
    dev.pause(True)
    assert dev.stepper.data.xfrc_applied[dev.model.body('spinner').id, 5] == 1e-3
    # The torque kept pushing against the velocity servo (kv 0.5): 1e-3 / 0.502 rad/s.
    assert dev.snapshot.qvel[1] == pytest.approx(1e-3 / 0.502, rel=0.05)


def test_unstable_then_the_safe_state_move(open_device, h):
    doc = {'connect': {'mujoco': 'M', 'keyframe': 'zero'},
           'write': {'s_goal': {'unit': 'mm'}},
           'actions': {'park': {'map': {'command': 'move_to', 'site': 'dot',
                                        'at': {'x': 0.0, 'y': 0.0, 'z': 0.0}},
                                'effects': ['s_goal']}},
           'safe_state': {'action': 'park'}}
    dev = open_device(doc, environ={'M': h.model_file('unstable')}, start_paused=True)
    dev.set_goals({'s_goal': 500})
    dev.step(3)
    assert dev.health()['unstable_events'] == 1
    import time
    end = time.monotonic() + 5
    while (dev.move is None or dev.move.action.name != 'park') and time.monotonic() < end:
        time.sleep(0.01)
    assert dev.move.action.name == 'park'
    dev.step(10)
    assert dev.move.done() and dev.move.result['success']
