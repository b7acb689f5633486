"""The device on the built-in bench arm: describe, reads, goals (min-jerk timing and peak
rate measured from the stepped trajectory), partial takeover, hold, reset, pause/step,
real-time factor, audit, health, bad input (all-or-nothing) and closing."""

import math
import threading
import time

import numpy as np
import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.config import limits
from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.motion.trajectory import PEAK
from mujoco_hal_ros.sim.device import Device

DT = 0.002
REST = {'pan': 0.0, 'lift': 0.2, 'elbow': 0.9, 'wrist': 0.9}


def refuse(code, fn, *args, **kw):
    with pytest.raises(DeviceError) as err:
        fn(*args, **kw)
    assert err.value.code == code, err.value
    return err.value


def test_describe_bench_arm(bench):
    desc = bench.describe()
    assert desc['device'] == 'Bench arm (simulated)' and desc['id'] == 'bench-arm'
    assert desc['keyframe'] == 'rest' and desc['hazard'] == 'medium'
    chans = {c['name']: c for c in desc['channels']}
    assert {n for n, c in chans.items() if c['direction'] == 'read'} == {
        'pan', 'lift', 'elbow', 'wrist', 'tip_x', 'tip_y', 'tip_z', 'block_x'}
    assert chans['tip_x']['kind'] == 'site' and chans['tip_x']['unit'] == 'mm'
    assert chans['block_x']['kind'] == 'body' and chans['block_x']['axis'] == 'x'
    assert chans['pan']['every'] == pytest.approx(0.5)
    assert chans['overhead'] == dict(chans['overhead'], direction='image', width=640,
                                     height=480, target='overhead')
    pan = chans['pan_goal']
    assert (pan['direction'], pan['unit'], pan['min'], pan['max'], pan['max_change_per_s'],
            pan['drive']) == ('write', 'deg', -90, 90, 60, 'position')
    assert [a['drive'] for a in desc['actuators']] == ['position'] * 4
    acts = {a['name']: a for a in desc['actions']}
    assert acts['hold']['command'] == 'hold'
    assert acts['move_to']['site'] == 'tip'
    assert acts['move_to']['joints'] == ['pan', 'lift', 'elbow', 'wrist']
    assert acts['move_to']['args']['x'] == {'unit': 'mm', 'min': 140, 'max': 200,
                                            'kind': 'length'}


def test_zero_config_describe(open_device, h):
    dev = open_device(model=h.BENCH_XML, start_paused=True)
    desc = dev.describe()
    chans = {c['name']: c for c in desc['channels']}
    reads = [n for n, c in chans.items() if c['direction'] == 'read']
    assert reads == ['pan', 'lift', 'elbow', 'wrist']       # the free joint is no scalar
    assert all(chans[n]['unit'] == 'rad' for n in reads)
    goals = [n for n, c in chans.items() if c['direction'] == 'write']
    assert goals == ['pan_goal', 'lift_goal', 'elbow_goal', 'wrist_goal']
    assert chans['pan_goal']['min'] == pytest.approx(-math.pi / 2)
    assert chans['pan_goal']['max_change_per_s'] is None
    assert [n for n, c in chans.items() if c['direction'] == 'image'] == ['overhead']
    assert [a['name'] for a in desc['actions']] == ['hold']
    # Zero-config starts where the model's author posed it: its first keyframe (issue 14).
    assert desc['zero_config'] is True and desc['keyframe'] == 'rest'
    assert desc['id'] == 'bench_arm' and desc['device'] == 'bench_arm (simulated)'
    assert desc['safe_state'] == {'action': 'hold'}
    assert dev.run_action('hold')['code'] == errors.DONE
    # No rate: a goal jumps in one step.
    dev.set_goals({'pan_goal': 0.5})
    dev.step(1)
    assert dev.goals()['pan_goal'] == pytest.approx(0.5)


def test_connect_resets_to_keyframe(bench):
    read = bench.read()
    for joint, value in REST.items():
        assert math.radians(read[joint]) == pytest.approx(value, abs=1e-9)
    assert bench.goals() == {f'{j}_goal': pytest.approx(math.degrees(v))
                             for j, v in REST.items()}
    assert read['block_x'] == pytest.approx(170.0)
    assert bench.read(['tip_z', 'pan']).keys() == {'tip_z', 'pan'}
    assert bench.read('pan') == {'pan': pytest.approx(0.0)}
    assert bench.snapshot.time == 0.0 and bench.snapshot.paused
    assert bench.audit()[0]['kind'] == 'connect'


def test_min_jerk_timing_and_peak_rate(bench, h):
    rate = math.radians(60)
    target = 30.0
    T = PEAK * math.radians(target) / rate
    bench.set_goals({'pan_goal': target})
    assert bench.goals()['pan_goal'] == pytest.approx(target)          # reads back the target
    assert bench.goals(setpoint=True)['pan_goal'] == pytest.approx(0)  # the path has not begun
    steps = int(T / DT) + 400
    times, sp, q = h.trace(bench, steps)
    pan_sp, pan_q = sp[:, 0], q[:, 0]
    # The setpoint path: arrives at T (to a step), peaks at the channel's rate.
    arrived = np.flatnonzero(np.isclose(pan_sp, math.radians(target), rtol=0, atol=1e-12))
    assert abs(times[arrived[0]] - T) <= DT + 1e-9
    assert np.all(np.isclose(pan_sp[arrived[0]:], math.radians(target), rtol=0, atol=1e-12))
    sp_rate = np.diff(pan_sp) / DT
    assert sp_rate.max() <= rate * (1 + 1e-9)
    assert sp_rate.max() >= rate * 0.999
    assert np.argmax(sp_rate) * DT == pytest.approx(T / 2, abs=2 * DT)
    assert np.all(sp_rate >= -1e-12)                       # monotonic: no overshoot
    # The joint follows: close to the peak rate, no faster than it by much, and arrives.
    q_rate = np.diff(pan_q) / DT
    assert 0.9 * rate <= q_rate.max() <= 1.1 * rate
    assert abs(pan_q[-1] - math.radians(target)) < math.radians(0.1)
    assert bench.goals()['pan_goal'] == pytest.approx(target)
    assert bench.read()['pan'] == pytest.approx(target, abs=0.1)
    # Other channels did not move.
    assert np.all(sp[:, 1:] == sp[0, 1:])
    assert not bench.snapshot.moving


def test_synchronised_goals_each_at_its_own_rate(bench, h):
    # Separate channels in one request each take their own time at their own peak rate.
    bench.set_goals({'pan_goal': 45, 'wrist_goal': 0})
    times, sp, _ = h.trace(bench, 800)
    rates = np.abs(np.diff(sp, axis=0)) / DT
    assert rates[:, 0].max() == pytest.approx(math.radians(60), rel=1e-3)
    assert rates[:, 3].max() == pytest.approx(math.radians(90), rel=1e-3)
    t_pan = PEAK * math.radians(45) / math.radians(60)
    t_wrist = PEAK * 0.9 / math.radians(90)
    done = np.isclose(sp[:, 0], math.radians(45), rtol=0, atol=1e-12)
    assert abs(times[np.flatnonzero(done)[0]] - t_pan) <= DT + 1e-9
    done = np.isclose(sp[:, 3], 0.0, rtol=0, atol=1e-12)
    assert abs(times[np.flatnonzero(done)[0]] - t_wrist) <= DT + 1e-9


def test_no_rate_jumps_in_one_step(open_device, h):
    doc = h.bench_doc(write__pan_goal={'unit': 'deg', 'min': -90, 'max': 90})
    dev = open_device(doc, environ=h.BENCH_ENV, start_paused=True)
    dev.set_goals({'pan_goal': 40})
    dev.step(1)
    assert dev.snapshot.setpoint[0] == pytest.approx(math.radians(40))
    assert dev.goals()['pan_goal'] == pytest.approx(40)


def test_new_goal_takes_over_only_its_channels(bench, h):
    bench.set_goals({'pan_goal': 40, 'lift_goal': 30})
    t0 = bench.snapshot.time
    bench.step(150)
    lift_mid = bench.snapshot.setpoint[1]
    bench.set_goals({'lift_goal': -10})          # pan keeps its path
    times, sp, _ = h.trace(bench, 700)
    T_pan = PEAK * math.radians(40) / math.radians(60)
    arrived = np.flatnonzero(np.isclose(sp[:, 0], math.radians(40), rtol=0, atol=1e-12))[0]
    assert abs(times[arrived] - t0 - T_pan) <= DT + 1e-9
    # lift restarted from where its setpoint was, toward the new goal, at its rate.
    T_lift = PEAK * abs(math.radians(-10) - lift_mid) / math.radians(60)
    arrived = np.flatnonzero(np.isclose(sp[:, 1], math.radians(-10), rtol=0, atol=1e-12))[0]
    assert abs(times[arrived] - (t0 + 150 * DT) - T_lift) <= DT + 1e-9
    assert np.abs(np.diff(sp[:, 1])).max() / DT <= math.radians(60) * (1 + 1e-9)
    assert bench.goals()['pan_goal'] == pytest.approx(40)
    assert bench.goals()['lift_goal'] == pytest.approx(-10)


def test_goal_preempts_only_part_of_a_move(bench):
    move = bench.move_to({'x': 170, 'y': 30, 'z': 60}, wait=False)
    bench.step(50)
    bench.set_goals({'pan_goal': -20})
    assert move.done() and move.result['code'] == errors.PREEMPTED
    assert 'pan' in move.result['message']
    bench.step(2000)
    sp = bench.snapshot.setpoint
    assert sp[0] == pytest.approx(math.radians(-20))
    assert sp[1:] == pytest.approx(move.q_goal[1:], abs=1e-12)   # the move kept the rest


def test_hold_freezes_every_setpoint(bench):
    bench.set_goals({'pan_goal': 60, 'elbow_goal': 0})
    move = None
    bench.step(100)
    held = bench.hold()
    assert held['code'] == errors.DONE and held['success']
    sp = bench.snapshot.setpoint.copy()
    assert 0 < sp[0] < math.radians(60)
    bench.step(500)
    assert np.array_equal(bench.snapshot.setpoint, sp)
    assert not bench.snapshot.moving
    # A move in flight ends STOPPED.
    move = bench.move_to({'x': 170, 'y': 0, 'z': 60}, wait=False)
    bench.step(20)
    bench.hold()
    assert move.done() and move.result['code'] == errors.STOPPED
    assert not move.result['success']
    entry = bench.audit()[-1]
    assert entry['kind'] == 'hold' and set(entry['native']) == {'pan', 'lift', 'elbow',
                                                                'wrist'}
    assert bench.stop()['code'] == errors.DONE            # safe_state: hold


def test_reset_to_keyframe_time_runs_forward(bench):
    bench.set_goals({'pan_goal': 50, 'lift_goal': -40})
    bench.step(1500)
    t_before = bench.snapshot.time
    move = bench.move_to({'x': 160, 'y': 0, 'z': 50}, wait=False)
    bench.reset()
    snap = bench.snapshot
    assert snap.time == pytest.approx(t_before)
    assert move.done() and move.result['code'] == errors.STOPPED
    assert not snap.moving
    for i, joint in enumerate(REST):
        assert snap.qpos[i] == pytest.approx(REST[joint])
        assert snap.setpoint[i] == pytest.approx(REST[joint])
    assert snap.qpos[4:7] == pytest.approx([0.17, 0.05, 0.015])
    bench.step(10)
    assert bench.snapshot.time == pytest.approx(t_before + 10 * DT)
    entry = bench.audit()[-1]
    assert entry['kind'] == 'reset' and entry['native']['lift'] == pytest.approx(0.2)


def test_pause_step_and_real_time_factor(open_device, h):
    dev = open_device(h.BENCH_YAML, start_paused=True)
    assert dev.step(5) == pytest.approx(5 * DT)
    t = dev.snapshot.time
    time.sleep(0.05)
    assert dev.snapshot.time == t                            # paused: nothing moves
    dev.pause(False)
    refuse(errors.NOT_PAUSED, dev.step, 1)
    time.sleep(0.1)
    assert dev.snapshot.time > t + 0.1                       # rtf 0 runs ahead of the clock
    dev.pause(True)
    t = dev.snapshot.time
    assert dev.step(3) == pytest.approx(t + 3 * DT)
    dev.set_real_time_factor(1.0)
    dev.pause(False)
    w0, s0 = time.monotonic(), dev.snapshot.time
    time.sleep(0.4)
    rate = (dev.snapshot.time - s0) / (time.monotonic() - w0)
    assert 0.7 < rate < 1.1
    health = dev.health()
    assert health['target_rtf'] == 1.0 and health['lag_s'] < 0.1
    assert {'sim_time', 'lag_s', 'worst_lag_s', 'measured_rtf', 'overruns',
            'unstable_events', 'paused', 'moving'} <= set(health)
    dev.set_real_time_factor(0)
    assert dev.health()['lag_s'] == 0.0
    kinds = [e['kind'] for e in dev.audit()]
    assert kinds.count('pause') == 3 and kinds.count('real_time_factor') == 2


def test_hold_runs_inside_a_long_step(open_device, h):
    """hold always wins: it is taken between the chunks of step(n), not queued behind a
    million steps; the steps go on from the held setpoints."""
    # So slow that the path outlasts the million steps: still moving whenever it is read.
    slow = h.bench_doc(write__pan_goal={'unit': 'deg', 'min': -90, 'max': 90,
                                        'max_change_per_s': 0.01})
    dev = open_device(slow, environ=h.BENCH_ENV, start_paused=True)
    dev.set_goals({'pan_goal': 30})
    assert dev.stepper.plans[0].t_end > dev.snapshot.time + \
        limits.MAX_STEPS * dev.model.opt.timestep
    job = dev.step(limits.MAX_STEPS, wait=False)
    t0 = dev.snapshot.time
    deadline = time.monotonic() + 5.0
    while dev.snapshot.time < t0 + 0.05 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert dev.snapshot.moving
    assert dev.hold()['code'] == errors.DONE
    assert not job.done(), 'hold waited for the steps to end'
    held, t1 = dev.snapshot.setpoint.copy(), dev.snapshot.time
    assert not dev.snapshot.moving
    time.sleep(0.1)
    assert dev.snapshot.time > t1                           # still stepping, held
    np.testing.assert_array_equal(dev.snapshot.setpoint, held)
    refuse(errors.TIMEOUT, dev.stepper.post, lambda s: None, wait=True, timeout=0.2)
    dev.close()
    assert isinstance(job.exception(timeout=5.0), errors.ClosedError)


def test_step_without_waiting_reports_its_refusal(open_device, h):
    dev = open_device(h.BENCH_YAML)
    with pytest.raises(DeviceError) as err:
        dev.step(5, wait=False).result(timeout=5.0)
    assert err.value.code == errors.NOT_PAUSED
    refuse(errors.INVALID_ARGUMENT, dev.step, 0, wait=False)
    refuse(errors.INVALID_ARGUMENT, dev.step, True, wait=False)
    dev.pause(True)
    t = dev.snapshot.time
    assert dev.step(4, wait=False).result(timeout=5.0) == pytest.approx(t + 4 * DT)


def test_audit_records_native_targets(bench):
    bench.set_goals({'pan_goal': 10, 'wrist_goal': -45})
    entry = bench.audit()[-1]
    assert entry['kind'] == 'goals'
    assert entry['request'] == {'pan_goal': 10, 'wrist_goal': -45}
    assert entry['native'] == {'pan': pytest.approx(math.radians(10)),
                               'wrist': pytest.approx(math.radians(-45))}
    bench.move_to({'x': 170, 'y': 0, 'z': 60}, wait=False)
    entry = bench.audit()[-1]
    assert entry['kind'] == 'move_to' and set(entry['native']) == {'pan', 'lift', 'elbow',
                                                                   'wrist'}
    assert entry['request']['target_m'] == pytest.approx([0.17, 0.0, 0.06])
    assert all('native' in e and 'wall' in e and 'sim_time' in e for e in bench.audit())
    assert len(bench.audit(kind='goals')) == 1 and list(bench.audit)[-1] is bench.audit()[-1]


BAD_GOALS = [
    {'pan_goal': float('nan')}, {'pan_goal': float('inf')}, {'pan_goal': True},
    {'pan_goal': np.bool_(False)}, {'pan_goal': 'ten'}, {'pan_goal': None},
    {'pan_goal': [1.0]}, {'pan_goal': 91}, {'lift_goal': -86}, {'pam_goal': 1}, {},
    {'pan_goal': 10, 'elbow_goal': float('nan')}, {'pan_goal': 10, 'wrist_goal': 500},
    {'pan_goal': 10, 'nope': 1}]


@pytest.mark.parametrize('goals', BAD_GOALS)
def test_bad_goals_change_nothing(bench, goals):
    before = (bench.goals(), len(bench.audit()))
    with pytest.raises(DeviceError) as err:
        bench.set_goals(goals)
    assert err.value.code in (errors.INVALID_ARGUMENT, errors.LIMIT_EXCEEDED,
                              errors.UNKNOWN_NAME)
    assert err.value.to_dict()['code'] == err.value.code
    bench.step(50)
    assert (bench.goals(), len(bench.audit())) == before
    assert not bench.snapshot.moving


def test_bad_calls_change_nothing(bench):
    before = (bench.goals(), len(bench.audit()), bench.snapshot.time)
    refuse(errors.INVALID_ARGUMENT, bench.pause, 'yes')
    refuse(errors.INVALID_ARGUMENT, bench.pause, 1)
    for n in (0, -1, 2.5, True, np.bool_(True), '10', None):
        refuse(errors.INVALID_ARGUMENT, bench.step, n)
    for rtf in (float('nan'), -1, True, np.bool_(True), None, 'fast', float('inf')):
        refuse(errors.INVALID_ARGUMENT, bench.set_real_time_factor, rtf)
    refuse(errors.UNKNOWN_NAME, bench.read, ['pan', 'nope'])
    refuse(errors.INVALID_ARGUMENT, bench.read, 5)
    refuse(errors.UNKNOWN_NAME, bench.run_action, 'dance')
    refuse(errors.UNKNOWN_NAME, bench.run_action, None)
    refuse(errors.INVALID_ARGUMENT, bench.run_action, 'hold', {'x': 1})
    refuse(errors.UNKNOWN_NAME, bench.move_to, point=[0.17, 0, 0.05], site='nowhere')
    refuse(errors.INVALID_ARGUMENT, bench.move_to, point=[0.17, 0, 0.05], site=3)
    refuse(errors.INVALID_ARGUMENT, bench.move_to, {'x': 170, 'y': 0, 'z': 60}, path='curvy')
    refuse(errors.INVALID_ARGUMENT, bench.move_to, {'x': 170, 'y': 0, 'z': 60}, wait='no')
    refuse(errors.INVALID_ARGUMENT, bench.move_to, {'x': 170, 'y': 0, 'z': 60},
           timeout=float('nan'))
    refuse(errors.INVALID_ARGUMENT, bench.move_to, {'x': 170, 'y': 0, 'z': 60},
           aim=([0, 0, 0], [0, 0, 1]))
    refuse(errors.INVALID_ARGUMENT, bench.move_to, {'x': 170, 'y': 0, 'z': True})
    refuse(errors.INVALID_ARGUMENT, bench.move_to, {'x': 170, 'y': 0, 'z': np.bool_(True)})
    refuse(errors.INVALID_ARGUMENT, bench.move_to, {'x': 170, 'y': 0, 'z': float('inf')})
    refuse(errors.LIMIT_EXCEEDED, bench.move_to, {'x': 170, 'y': 0, 'z': 95})
    refuse(errors.INVALID_ARGUMENT, bench.move_to, point=[0.17, 0.0])
    refuse(errors.INVALID_ARGUMENT, bench.move_to, point=[0.17, 0.0, 0.05, 0.0])
    refuse(errors.INVALID_ARGUMENT, bench.move_to, point=[0.17, float('nan'), 0.05])
    refuse(errors.INVALID_ARGUMENT, bench.move_to, point=[0.17, False, 0.05])
    assert (bench.goals(), len(bench.audit()), bench.snapshot.time) == before
    assert bench.move is None


def test_close_is_final(open_device, h):
    dev = open_device(h.BENCH_YAML)
    thread = dev.stepper._thread
    assert thread.is_alive()
    dev.close()
    dev.close()
    assert dev.closed and not thread.is_alive()
    refuse(errors.CLOSED, dev.set_goals, {'pan_goal': 1})
    refuse(errors.CLOSED, dev.hold)
    refuse(errors.CLOSED, dev.pause, True)
    assert dev.read()['pan'] == pytest.approx(dev.read()['pan'])   # last snapshot still reads
    with Device(h.BENCH_YAML, environ=h.BENCH_ENV, real_time_factor=0) as dev2:
        assert dev2.read()
    assert dev2.closed


def test_requests_from_many_threads(open_device, h):
    dev = open_device(h.BENCH_YAML)
    failures = []

    def worker(k):
        try:
            for i in range(20):
                dev.set_goals({'pan_goal': (-1) ** i * 10 * k})
                dev.read()
                dev.health()
        except Exception as exc:  # noqa: BLE001
            failures.append(exc)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures
    assert len(dev.audit(kind='goals')) == 80
    assert dev.health()['errors'] == 0


def test_stop_runs_the_safe_state_action(open_device, h):
    doc = h.bench_doc(actions__park={'map': {'command': 'move_to', 'site': 'tip',
                                             'at': {'x': '160 mm', 'y': 0, 'z': '70 mm'}},
                                     'effects': ['pan_goal', 'lift_goal', 'elbow_goal',
                                                 'wrist_goal']},
                      safe_state={'action': 'park'})
    dev = open_device(doc, environ=h.BENCH_ENV, start_paused=True)
    assert dev.describe()['safe_state'] == {'action': 'park'}
    dev.set_goals({'pan_goal': 30})
    result = dev.stop()
    assert result['code'] == errors.STARTED and 'park' in result['message']
    kinds = [e['kind'] for e in dev.audit()][-2:]
    assert kinds == ['hold', 'move_to']
    dev.step(3000)
    assert dev.move.done() and dev.move.result['success']
    assert dev.snapshot.site_xpos[0] == pytest.approx([0.16, 0.0, 0.07], abs=1e-3)
    # A safe-state move that cannot start leaves the device held, and says why.
    doc['actions']['park']['map']['at'] = {'x': 1.0, 'y': 0.0, 'z': 1.0}
    dev = open_device(doc, environ=h.BENCH_ENV, start_paused=True)
    result = dev.stop()
    assert result['code'] == errors.DONE and 'could not start' in result['message']


def test_render_camera_and_image_channel(bench):
    try:
        img = bench.cameras.render('overhead', 64, 48)
    except DeviceError as exc:                      # no GL on this machine
        pytest.skip(f'no offscreen GL: {exc}')
    assert img.shape == (48, 64, 3) and img.dtype == np.uint8 and img.any()
    png = bench.cameras.render('overhead', 32, 24, png=True)
    assert png[:8] == b'\x89PNG\r\n\x1a\n'
    assert bench.cameras.renderer('overhead') is bench.cameras.renderer('overhead', 640, 480)
    refuse(errors.UNKNOWN_NAME, bench.cameras.render, 'ceiling')
    refuse(errors.INVALID_ARGUMENT, bench.cameras.render, 'overhead', 4096, 48)
    refuse(errors.INVALID_ARGUMENT, bench.cameras.render, 'overhead', True, 48)


def test_everything_reported_is_plain_json(open_device, h):
    import json
    dev = open_device(h.BENCH_YAML)
    dev.set_goals({'pan_goal': np.float32(10)})
    result = dev.move_to({'x': 170, 'y': 0, 'z': 60})
    with pytest.raises(DeviceError) as err:
        dev.move_to({'x': 170, 'y': 0, 'z': 600})
    for item in (dev.describe(), result, dev.audit(), dev.health(), dev.events(), dev.read(),
                 dev.goals(), err.value.to_dict()):
        json.loads(json.dumps(item))


def test_constructor_arguments_are_checked(h):
    for kw in ({'start_paused': 'yes'}, {'start_paused': 1}, {'environ': ['A=1']},
               {'real_time_factor': float('nan')}, {'real_time_factor': -1},
               {'real_time_factor': True}):
        before = threading.active_count()
        with pytest.raises(DeviceError) as err:
            Device(h.BENCH_YAML, **dict({'environ': h.BENCH_ENV}, **kw))
        assert err.value.code == errors.INVALID_ARGUMENT, kw
        assert threading.active_count() == before
    with pytest.raises(DeviceError) as err:
        Device(h.BENCH_YAML, environ=h.BENCH_ENV, keyframe='nap')
    assert err.value.code == errors.CONFIG_ERROR and 'rest' in err.value.allowed
