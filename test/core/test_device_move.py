"""move_to on the bench arm: accuracy on random reachable targets (FK of random in-range
joint configurations), aim, unreachable with the closest miss, joints arriving together
within their rates, STARTED after action_wait, `then`, named actions, Cartesian paths and
speed limits."""

import math

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.motion.trajectory import PEAK

DT = 0.002
TOL = 1e-3
AIM_TOL = math.radians(3)


def fk(dev, qpos, site='tip'):
    data = mujoco.MjData(dev.model)
    data.qpos[:] = qpos
    mujoco.mj_kinematics(dev.model, data)
    sid = dev.layout.sites.index(site)
    return data.site_xpos[sid].copy(), data.site_xmat[sid].reshape(3, 3).copy()


def random_config_targets(dev, rng, count):
    """(point, tip x axis) from random joint configurations inside the joint ranges, kept
    only when the arm touches nothing there (the table and the block are real obstacles)."""
    m = dev.model
    lo, hi = m.jnt_range[:4, 0], m.jnt_range[:4, 1]
    data = mujoco.MjData(m)
    out = []
    while len(out) < count:
        q = dev.snapshot.qpos.copy()
        q[:4] = rng.uniform(lo + 0.1 * (hi - lo), hi - 0.1 * (hi - lo))
        data.qpos[:] = q
        mujoco.mj_forward(m, data)
        block = m.geom('block_geom').id
        touching = [c for c in data.contact[:data.ncon] if block not in (c.geom1, c.geom2)]
        if touching or data.site_xpos[0, 2] < 0.04:
            continue
        pos, mat = fk(dev, q)
        out.append((pos, mat[:, 0]))
    return out


def test_random_reachable_targets(open_device, h):
    dev = open_device(model=h.BENCH_XML)
    rng = np.random.default_rng(7)
    for point, _axis in random_config_targets(dev, rng, 10):
        result = dev.move_to(point=point, site='tip')
        assert result['code'] == errors.DONE and result['success'], result
        assert result['miss'] <= TOL
        assert np.linalg.norm(dev.snapshot.site_xpos[0] - point) <= TOL * 1.5


def test_random_reachable_targets_with_aim(open_device, h):
    dev = open_device(model=h.BENCH_XML)
    rng = np.random.default_rng(11)
    for point, axis in random_config_targets(dev, rng, 8):
        result = dev.move_to(point=point, site='tip', aim=([1, 0, 0], axis))
        assert result['code'] == errors.DONE and result['success'], result
        assert result['miss'] <= TOL and result['aim_error'] <= AIM_TOL


@pytest.mark.parametrize('xyz', [(170, 0, 60), (150, -40, 40), (190, 50, 80),
                                 (140, -60, 30), (200, 0, 30)])
def test_device_file_move_with_aim(open_device, h, xyz):
    dev = open_device(h.BENCH_YAML)
    result = dev.move_to(dict(zip('xyz', xyz, strict=True)))
    assert result['success'] and result['code'] == errors.DONE, result
    assert result['miss'] <= TOL and result['aim_error'] <= AIM_TOL
    # The tip's x axis points down, as the device file's aim says.
    x_axis = dev.snapshot.site_xmat[0].reshape(3, 3)[:, 0]
    assert np.degrees(np.arccos(-x_axis[2])) <= 3.0
    assert dev.read(['tip_x'])['tip_x'] == pytest.approx(xyz[0], abs=1.0)
    assert dev.distance_to_go() <= TOL


def test_unreachable_reports_the_closest_miss(open_device, h):
    dev = open_device(model=h.BENCH_XML, start_paused=True)
    before = (dev.goals(), len(dev.audit()))
    with pytest.raises(DeviceError) as err:
        dev.move_to(point=[0.5, 0.0, 0.3], site='tip')
    e = err.value
    assert e.code == errors.UNREACHABLE
    reach = 0.11 + 0.12 + 0.05                      # upper arm + forearm + hand to tip
    shoulder = np.array([0, 0, 0.09])
    expected = np.linalg.norm(np.array([0.5, 0, 0.3]) - shoulder) - reach
    assert e.details['miss'] == pytest.approx(expected, abs=2e-3)
    reached = np.array(e.details['reached'])
    assert np.linalg.norm(reached - shoulder) == pytest.approx(reach, abs=2e-3)
    assert f'closest miss {e.details["miss"] * 1000:.1f} mm' in str(e)
    assert (dev.goals(), len(dev.audit())) == before and dev.move is None


def test_unreachable_inside_goal_limits(open_device, h):
    # Pan may only turn toward +y: a target at -y is out of reach of the goal limits,
    # though well inside the joint's range and the workspace box.
    doc = h.bench_doc(write__pan_goal={'unit': 'deg', 'min': 0, 'max': 90,
                                       'max_change_per_s': 60})
    dev = open_device(doc, environ=h.BENCH_ENV)
    with pytest.raises(DeviceError) as err:
        dev.move_to({'x': 150, 'y': -50, 'z': 50})
    assert err.value.code == errors.UNREACHABLE and err.value.details['miss'] > 0.01
    assert err.value.details['reached'][1] >= -1e-6
    result = dev.move_to({'x': 150, 'y': 50, 'z': 50})
    assert result['success'] and 0 <= dev.goals()['pan_goal'] <= 90


def test_unreachable_aim(open_device, h):
    dev = open_device(model=h.BENCH_XML, start_paused=True)
    # Tip pointing sideways along y is impossible: every hinge after pan turns about y.
    with pytest.raises(DeviceError) as err:
        dev.move_to(point=[0.17, 0.0, 0.06], site='tip', aim=([1, 0, 0], [0, 1, 0]))
    assert err.value.code == errors.UNREACHABLE
    assert err.value.details['aim_error'] > AIM_TOL


def test_joints_arrive_together_within_their_rates(bench, h):
    move = bench.move_to({'x': 190, 'y': 50, 'z': 80}, wait=False)
    start = bench.snapshot.setpoint.copy()
    n = int(move.duration / DT) + 300
    times, sp, q = h.trace(bench, n)
    rates = np.radians([60, 60, 60, 90])
    seen = np.abs(np.diff(np.vstack([start, sp]), axis=0)).max(axis=0) / DT
    assert np.all(seen <= rates * (1 + 1e-9))
    delta = np.abs(move.q_goal - start[:4])
    T = PEAK * (delta / rates).max()
    assert move.duration == pytest.approx(T)
    slowest = np.argmax(delta / rates)
    assert seen[slowest] == pytest.approx(rates[slowest], rel=2e-3)   # it peaks at its rate
    for j in range(4):
        if delta[j] > 1e-6:
            done = np.flatnonzero(np.isclose(sp[:, j], move.q_goal[j], rtol=0, atol=1e-12))
            assert abs(times[done[0]] - times[0] + DT - T) <= DT + 1e-9
    assert move.done() and move.result['success']


def test_started_after_action_wait(open_device, h):
    doc = h.bench_doc(connect={'mujoco': 'OPENHAL_BENCH_ARM', 'keyframe': 'rest',
                               'action_wait': '50 ms'})
    dev = open_device(doc, environ=h.BENCH_ENV, start_paused=True)
    result = dev.move_to({'x': 170, 'y': 0, 'z': 60})       # paused: cannot arrive
    assert result['code'] == errors.STARTED and result['success']
    assert 'still moving' in result['message'] and result['miss'] > TOL
    result = dev.move_to({'x': 160, 'y': 0, 'z': 60}, timeout=0.01)
    assert result['code'] == errors.STARTED
    move = dev.move
    dev.step(3000)
    assert move.done() and move.result['code'] == errors.DONE and move.result['success']


def test_newer_move_preempts(bench):
    first = bench.move_to({'x': 170, 'y': 0, 'z': 60}, wait=False)
    called = []
    first.add_done_callback(lambda m: called.append(('before', m.result['code'])))
    bench.step(10)
    assert not called
    second = bench.move_to({'x': 150, 'y': 30, 'z': 50}, wait=False)
    assert first.done() and first.result['code'] == errors.PREEMPTED
    assert called == [('before', errors.PREEMPTED)]            # once, when it finished
    first.add_done_callback(lambda m: called.append(('after', m.result['code'])))
    assert called[-1] == ('after', errors.PREEMPTED)          # already done: at once
    bench.step(3000)
    assert second.result['code'] == errors.DONE and second.result['success']
    assert len(called) == 2


def test_then_and_named_actions(open_device, h):
    doc = h.bench_doc(actions__place={
        'args': {'x': {'unit': 'mm', 'min': 100, 'max': 250},
                 'y': {'unit': 'mm', 'min': -100, 'max': 100},
                 'z': {'unit': 'mm', 'min': 0, 'max': 200}},
        'map': {'command': 'move_to', 'body': 'hand', 'joints': ['pan', 'lift', 'elbow'],
                'then': {'wrist_goal': 20}},
        'effects': ['pan_goal', 'lift_goal', 'elbow_goal', 'wrist_goal']})
    dev = open_device(doc, environ=h.BENCH_ENV)
    result = dev.run_action('place', {'x': 120, 'y': 20, 'z': 120})
    assert result['success'], result
    hand = dev.layout.bodies.index('hand')
    assert np.linalg.norm(dev.snapshot.xpos[hand] - [0.12, 0.02, 0.12]) <= 1.5e-3
    assert dev.move.action.name == 'place'
    entry = dev.audit()[-1]
    assert entry['kind'] == 'then' and entry['native'] == {'wrist': pytest.approx(
        math.radians(20))}
    dev.pause(True)
    dev.step(1500)
    assert dev.goals()['wrist_goal'] == pytest.approx(20)
    assert dev.run_action('hold')['code'] == errors.DONE
    # The default move_to is the device file's first move_to action.
    result = dev.run_action('move_to', {'x': 170, 'y': 0, 'z': 60}, timeout=0.0)
    assert result['code'] == errors.STARTED and dev.move.action.name == 'move_to'


def line_deviation(points, a, b):
    d = (b - a) / np.linalg.norm(b - a)
    rel = points - a
    return np.linalg.norm(rel - np.outer(rel @ d, d), axis=1)


def test_cartesian_path_is_straight(open_device, h):
    doc = h.bench_doc(actions__move_to__map={
        'command': 'move_to', 'site': 'tip', 'path': 'cartesian',
        'aim': {'axis': [1, 0, 0], 'toward': [0, 0, -1]}})
    dev = open_device(doc, environ=h.BENCH_ENV)
    # From the rest pose the tip cannot keep a world-frame aim schedule while pan turns (a
    # four-joint arm aims only within its pan plane): that is refused, not bent.
    with pytest.raises(DeviceError) as err:
        dev.move_to({'x': 150, 'y': -40, 'z': 40})
    assert err.value.code == errors.UNREACHABLE and 'straight line' in str(err.value)
    assert dev.move_to({'x': 150, 'y': -40, 'z': 40}, path='joint')['success']
    dev.pause(True)
    a = dev.snapshot.site_xpos[0].copy()
    move = dev.move_to({'x': 190, 'y': 40, 'z': 80}, wait=False)
    n = int(move.duration / DT) + 200
    _, sp, q = h.trace(dev, n)
    b = np.array([0.19, 0.04, 0.08])
    planned = np.array([fk(dev, np.r_[s, q0[4:]])[0]
                        for s, q0 in zip(sp[::5], q[::5], strict=True)])
    assert line_deviation(planned, a, b).max() <= 1.2e-3      # the setpoints' own path
    actual = np.array([fk(dev, qq)[0] for qq in q[::5]])
    assert line_deviation(actual, a, b).max() <= 4e-3          # and the servos follow it
    assert move.done() and move.result['success']
    # The kwarg picks the same path on a joint-path action.
    dev2 = open_device(h.BENCH_YAML)
    assert dev2.move_to({'x': 150, 'y': -40, 'z': 40})['success']
    assert dev2.move_to({'x': 190, 'y': 40, 'z': 80}, path='cartesian')['success']
    assert dev2.move.path == 'cartesian'
    assert dev2.audit()[-1]['request']['path'] == 'cartesian'


def test_speed_limit_slows_the_move(open_device, h):
    doc = h.bench_doc(actions__move_to__args={
        'x': {'unit': 'mm', 'min': 140, 'max': 200}, 'y': {'unit': 'mm', 'min': -60, 'max': 60},
        'z': {'unit': 'mm', 'min': 30, 'max': 90}, 'v': {'unit': 'mm/s', 'min': 5, 'max': 100}},
        actions__move_to__map={'command': 'move_to', 'site': 'tip', 'speed': 'v',
                               'path': 'cartesian'})
    dev = open_device(doc, environ=h.BENCH_ENV)
    assert dev.move_to({'x': 150, 'y': 0, 'z': 60})['success']
    with pytest.raises(DeviceError) as err:
        dev.move_to({'x': 190, 'y': 0, 'z': 60, 'v': 150})
    assert err.value.code == errors.LIMIT_EXCEEDED and err.value.details['argument'] == 'v'
    dev.pause(True)
    move = dev.move_to({'x': 190, 'y': 0, 'z': 60, 'v': 20}, wait=False)
    assert move.duration >= PEAK * 0.04 / 0.02 - 1e-6
    _, sp, q = h.trace(dev, int(move.duration / DT) + 10)
    pts = np.array([fk(dev, np.r_[s, q0[4:]])[0] for s, q0 in zip(sp[::10], q[::10], strict=True)])
    speed = np.linalg.norm(np.diff(pts, axis=0), axis=1) / (10 * DT)
    assert speed.max() <= 0.02 * 1.02
    assert speed.max() >= 0.02 * 0.9
