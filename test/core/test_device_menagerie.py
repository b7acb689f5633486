"""Real Menagerie arms: Panda (no site at all) and UR5e, zero-config and from device files.

move_to on a body, accuracy on random reachable targets (FK of random in-range joint
configurations that touch nothing), aim, unreachable with the closest miss, and servos that
hold their targets under gravity."""

import math

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.motion.move import action_for

TOL = 1e-3
AIM_TOL = math.radians(3)


def panda_doc():
    write = {f'j{i}_goal': {'unit': 'deg', 'max_change_per_s': 150,
                            'map': {'actuator': f'actuator{i}'}} for i in range(1, 8)}
    write['gripper_goal'] = {'unit': 'percent', 'map': {'actuator': 'actuator8'}}
    return {'device': 'Panda (simulated)', 'id': 'panda',
            'connect': {'mujoco': 'PANDA_XML', 'keyframe': 'home'},
            'read': {f'joint{i}': {'unit': 'deg'} for i in range(1, 8)},
            'write': write,
            'actions': {'move_to': {
                'args': {a: {'unit': 'mm', 'min': -1200, 'max': 1200} for a in 'xyz'},
                'map': {'command': 'move_to', 'body': 'hand'},
                'effects': [f'j{i}_goal' for i in range(1, 8)]}}}


def ur5e_doc():
    joints = ['shoulder_pan', 'shoulder_lift', 'elbow', 'wrist_1', 'wrist_2', 'wrist_3']
    return {'connect': {'mujoco': 'UR5E_XML', 'keyframe': 'home'},
            'write': {f'{j}_goal': {'unit': 'deg', 'max_change_per_s': 120} for j in joints},
            'actions': {'reach': {
                'args': {a: {'unit': 'm', 'min': -1.5, 'max': 1.5} for a in 'xyz'},
                'map': {'command': 'move_to', 'body': 'wrist_3_link'},
                'effects': [f'{j}_goal' for j in joints]}}}


@pytest.fixture(scope='module')
def paths():
    from mujoco_hal_ros import menagerie
    out = {'panda': menagerie.model_path('panda'), 'ur5e': menagerie.model_path('ur5e')}
    if None in out.values():
        pytest.skip('Menagerie models are not installed')
    return out


def random_targets(dev, body, rng, count, joints):
    """(point, body z axis) of random configurations inside the joint ranges with no
    contact at all and the body above the floor."""
    m = dev.model
    data = mujoco.MjData(m)
    bid = m.body(body).id
    out = []
    while len(out) < count:
        data.qpos[:] = dev.snapshot.qpos
        for j in joints:
            jid = m.joint(j).id
            lo, hi = m.jnt_range[jid]
            data.qpos[m.jnt_qposadr[jid]] = rng.uniform(lo + 0.1 * (hi - lo),
                                                        hi - 0.1 * (hi - lo))
        mujoco.mj_forward(m, data)
        if data.ncon or data.xpos[bid, 2] < 0.15:
            continue
        out.append((data.xpos[bid].copy(), data.xmat[bid].reshape(3, 3)[:, 2].copy()))
    return out


def test_panda_zero_config(open_device, paths):
    dev = open_device(model=paths['panda'], keyframe='home', start_paused=True)
    desc = dev.describe()
    chans = {c['name']: c for c in desc['channels']}
    assert [n for n, c in chans.items() if c['direction'] == 'read'] == \
        [f'joint{i}' for i in range(1, 8)] + ['finger_joint1', 'finger_joint2']
    assert chans['finger_joint1']['unit'] == 'm'
    goals = [n for n, c in chans.items() if c['direction'] == 'write']
    assert goals == [f'actuator{i}_goal' for i in range(1, 9)]
    assert [a['drive'] for a in desc['actuators']] == ['position'] * 7 + ['direct']
    assert chans['actuator8_goal']['min'] == 0 and chans['actuator8_goal']['max'] == 255
    assert chans['actuator4_goal']['max'] == pytest.approx(-0.0698)
    # Faithful by default (issue 14): no body is made weightless; the servos' ctrl carries
    # the holding torque, so effort shows it.
    assert desc['keyframe'] == 'home' and desc['gravity_compensated'] == []
    assert dev.goals()['actuator4_goal'] == pytest.approx(-1.57079)
    # Servos hold the keyframe pose under gravity.
    q0 = dev.snapshot.qpos[:7].copy()
    dev.step(1000)
    assert np.abs(dev.snapshot.qpos[:7] - q0).max() < 2e-3


def test_panda_move_to_body_random_targets(open_device, paths):
    dev = open_device(panda_doc(), environ={'PANDA_XML': paths['panda']})
    assert action_for(dev.layout, None).body == 'hand' and dev.layout.sites == []
    rng = np.random.default_rng(3)
    joints = [f'joint{i}' for i in range(1, 8)]
    for point, _ in random_targets(dev, 'hand', rng, 6, joints):
        result = dev.move_to(dict(zip('xyz', point * 1000, strict=True)))
        assert result['success'] and result['code'] == errors.DONE, result
        assert result['miss'] <= TOL
    # And with the hand's z axis aimed as it was in the sampled configuration.
    for point, z_axis in random_targets(dev, 'hand', rng, 4, joints):
        result = dev.move_to(point=point, aim=([0, 0, 1], z_axis))
        assert result['success'], result
        assert result['miss'] <= TOL and result['aim_error'] <= AIM_TOL


def test_panda_unreachable_and_units(open_device, paths):
    dev = open_device(panda_doc(), environ={'PANDA_XML': paths['panda']}, start_paused=True)
    before = dev.goals()
    with pytest.raises(DeviceError) as err:
        dev.move_to({'x': 1200, 'y': 1200, 'z': 1200})
    e = err.value
    assert e.code == errors.UNREACHABLE and e.details['miss'] > 0.3
    reached = np.array(e.details['reached'])
    assert np.linalg.norm(reached - np.array([1.2, 1.2, 1.2])) == pytest.approx(
        e.details['miss'])
    assert dev.goals() == before
    # Degrees on the joints; percent over the gripper's ctrlrange 0..255.
    assert dev.goals()['j4_goal'] == pytest.approx(math.degrees(-1.57079))
    assert dev.goals()['gripper_goal'] == pytest.approx(100.0)
    dev.set_goals({'gripper_goal': 50, 'j1_goal': 10})
    dev.step(500)
    assert dev.snapshot.ctrl[7] == pytest.approx(127.5)
    assert dev.read(['joint1'])['joint1'] == pytest.approx(10, abs=0.2)
    with pytest.raises(DeviceError) as err:
        dev.set_goals({'j4_goal': 0})          # joint4 stops at -4 deg
    assert err.value.code == errors.LIMIT_EXCEEDED and err.value.where == 'j4_goal'


def test_ur5e_move_to_body(open_device, paths):
    dev = open_device(ur5e_doc(), environ={'UR5E_XML': paths['ur5e']})
    assert dev.action('reach').body == 'wrist_3_link'
    rng = np.random.default_rng(5)
    joints = [dev.model.joint(j).name for j in range(6)]
    for point, _ in random_targets(dev, 'wrist_3_link', rng, 5, joints):
        result = dev.run_action('reach', dict(zip('xyz', point, strict=True)))
        assert result['success'] and result['miss'] <= TOL, result
    for point, z_axis in random_targets(dev, 'wrist_3_link', rng, 3, joints):
        result = dev.run_action('reach', dict(zip('xyz', point, strict=True)),
                                aim=([0, 0, 1], z_axis))
        assert result['success'] and result['aim_error'] <= AIM_TOL, result
    with pytest.raises(DeviceError) as err:
        dev.run_action('reach', {'x': 1.5, 'y': 1.5, 'z': 1.5})
    assert err.value.code == errors.UNREACHABLE and 'closest miss' in str(err.value)


def test_ur5e_zero_config_site_and_body(open_device, paths):
    dev = open_device(model=paths['ur5e'], keyframe='home')
    desc = dev.describe()
    assert [a['drive'] for a in desc['actuators']] == ['position'] * 6
    assert [a['name'] for a in desc['actions']] == ['hold']
    with pytest.raises(DeviceError) as err:
        dev.move_to(point=[0.3, 0.2, 0.4])           # no move_to action: name a point
    assert err.value.code == errors.INVALID_ARGUMENT and 'wrist_3_link' in err.value.allowed
    site = dev.layout.sites[0]
    for name in (site, 'wrist_3_link'):
        result = dev.move_to(point=[0.3, 0.25, 0.35], site=name)
        assert result['success'] and result['miss'] <= TOL, (name, result)
    with pytest.raises(DeviceError) as err:
        dev.move_to(point=[0.3, 0.25, 0.35], site='world')
    assert err.value.code == errors.UNKNOWN_NAME


def test_go1_legs_keep_their_weight(open_device):
    from mujoco_hal_ros import menagerie
    path = menagerie.model_path('go1')
    if path is None:
        pytest.skip('Go1 is not installed')
    dev = open_device(model=path, keyframe='home', start_paused=True)
    desc = dev.describe()
    # A free-floating trunk: servo gravity compensation would make the robot float.
    assert desc['gravity_compensated'] == []
    assert len([c for c in desc['channels'] if c['direction'] == 'read']) == 12
    z0 = dev.snapshot.qpos[2]
    dev.step(500)
    assert dev.snapshot.qpos[2] == pytest.approx(z0, abs=0.03)        # it stands
    assert dev.health()['unstable_events'] == 0
