"""The device file: strict schema, model lookup and load-time checks; every refusal names the
key that was wrong and what is allowed, and no device (no thread) is left behind."""

import math
import threading

import pytest

from mujoco_hal_ros.config import device_file
from mujoco_hal_ros.errors import CONFIG_ERROR, ConfigError, DeviceError, MODEL_ERROR
from mujoco_hal_ros.sim.device import Device


def refused(code, where, *args, **kw):
    """Device(...) must fail with ``code`` mentioning ``where``, starting no thread."""
    before = threading.active_count()
    with pytest.raises(DeviceError) as err:
        Device(*args, **kw)
    assert err.value.code == code, err.value
    assert where in str(err.value), err.value
    assert threading.active_count() == before
    return err.value


def test_bench_file_parses(h):
    spec = device_file.load(h.BENCH_YAML)
    assert spec['connect'] == {'mujoco': 'OPENHAL_BENCH_ARM', 'keyframe': 'rest'}
    assert set(spec['write']) == {'pan_goal', 'lift_goal', 'elbow_goal', 'wrist_goal'}
    assert spec['actions']['hold']['command'] == 'hold'
    assert spec['actions']['move_to']['command'] == 'move_to'
    assert spec['safe_state'] == {'action': 'hold'} and spec['hazard'] == 'medium'


def test_connect_parameters_and_defaults(open_device, h):
    dev = open_device(h.BENCH_YAML, start_paused=True)
    assert dev.params['action_wait'] == 8.0
    assert dev.params['tolerance'] == pytest.approx(1e-3)
    assert dev.params['aim_tolerance'] == pytest.approx(math.radians(3))
    assert dev.model.opt.timestep == pytest.approx(0.002)     # the model's own
    assert dev.describe()['keyframe'] == 'rest'
    doc = h.bench_doc(connect={'mujoco': 'OPENHAL_BENCH_ARM', 'keyframe': 'rest',
                               'timestep': '4 ms', 'action_wait': '2 s',
                               'tolerance': '2 mm', 'aim_tolerance': '5 deg'})
    dev = open_device(doc, environ=h.BENCH_ENV, start_paused=True)
    assert dev.model.opt.timestep == pytest.approx(0.004)
    assert dev.params == {'action_wait': 2.0, 'tolerance': pytest.approx(0.002),
                          'aim_tolerance': pytest.approx(math.radians(5))}
    dev.step(10)
    assert dev.snapshot.time == pytest.approx(0.04)


@pytest.mark.parametrize('text,where', [
    ('device: x\nconnect: {mujoco: M}\nfoo: 1\n', 'foo'),
    ('connect: {mujoco: M, keyfrme: rest}\n', 'keyfrme'),
    ('connect: {mujoco: M}\nwrite: {pan_goal: {max_chnage_per_s: 3}}\n',
     'write.pan_goal'),
    ('connect: {mujoco: M}\nread: {tip_x: {map: {site: tip, axsi: x}}}\n', 'read.tip_x.map'),
    ('connect: {mujoco: M}\nactions: {go: {map: {command: move_to, site: tip, spede: 1}}}\n',
     'actions.go.map'),
    ('connect: {mujoco: M}\nactions: {go: {map: {command: jump}}}\n', 'actions.go.map.command'),
    ('connect: {mujoco: M}\nsafe_state: {action: dance}\n', 'safe_state.action'),
    ('connect: {mujoco: M}\nhazard: extreme\n', 'hazard'),
    ('connect: {mujoco: M}\nwrite: {pan_goal: {min: 5, max: 1}}\n', 'write.pan_goal'),
    ('connect: {mujoco: M}\nwrite: {pan_goal: {max: .nan}}\n', 'write.pan_goal.max'),
    ('connect: {mujoco: M}\nwrite: {pan_goal: {max: .inf}}\n', 'write.pan_goal.max'),
    ('connect: {mujoco: M}\nwrite: {pan_goal: {max: true}}\n', 'write.pan_goal.max'),
    ('connect: {mujoco: M}\nwrite: {pan_goal: {max: ten}}\n', 'write.pan_goal.max'),
    ('connect: {mujoco: M}\nwrite: {pan_goal: {max: 1' + '0' * 400 + '}}\n',
     'write.pan_goal.max'),
    ('connect: {mujoco: M}\nwrite: {pan_goal: {max_change_per_s: 0}}\n',
     'write.pan_goal.max_change_per_s'),
    ('connect: {mujoco: M}\nwrite: [pan_goal]\n', 'write'),
    ('connect: {mujoco: M}\nread: 3\n', 'read'),
    ('connect: {mujoco: M}\nactions: [move_to]\n', 'actions'),
    ('connect: {mujoco: M}\nactions: {go: {args: [x, y], map: {command: move_to}}}\n',
     'actions.go.args'),
    ('connect: [M]\n', 'connect'),
    ('connect: {mujoco: M, timestep: -4 ms}\n', 'connect.timestep'),
    ('connect: {mujoco: M, timestep: 4 lightyears}\n', 'connect.timestep'),
    ('connect: {mujoco: M, tolerance: 0}\n', 'connect.tolerance'),
    ('connect: {mujoco: M, action_wait: soon}\n', 'connect.action_wait'),
    ('connect: {mujoco: M, keyframe: 3}\n', 'connect.keyframe'),
    ('connect: {mujoco: M, real_time_factor: -1}\n', 'connect.real_time_factor'),
    ('connect: {mujoco: M}\nread: {tip_x: {map: {site: tip, axis: w}}}\n',
     'read.tip_x.map.axis'),
    ('connect: {mujoco: M}\nread: {cam: {type: video}}\n', 'read.cam.type'),
    ('connect: {mujoco: M}\nwrite: {pan_goal: {}}\nactions: {go: {map: {command: move_to, '
     'site: tip, then: {pan_goal: 3}}}}\n', 'actions.go.effects'),
    ('connect: {mujoco: M}\nwrite: {pan_goal: {}}\nactions: {go: {effects: [nope], '
     'map: {command: move_to, site: tip}}}\n', 'actions.go.effects'),
    ('connect: {mujoco: M}\nactions: {go: {args: {x: {}, v: {max: 1}}, map: {command: move_to,'
     ' site: tip, speed: v}}}\n', 'actions.go.args.v.min'),
    ('connect: {mujoco: M}\nactions: {go: {args: {x: {}, v: {min: 0, max: 1}}, map: {command: '
     'move_to, site: tip, speed: v}}}\n', 'actions.go.args.v.min'),
    ('connect: {mujoco: M}\nactions: {go: {args: {x: {}}, map: {command: move_to, site: tip, '
     'speed: w}}}\n', 'actions.go.map.speed'),
    ('connect: {mujoco: M}\nactions: {go: {map: {command: move_to, site: tip, path: curvy}}}\n',
     'actions.go.map.path'),
    ('connect: {mujoco: M}\nactions: {go: {map: {command: move_to, site: tip, '
     'aim: {axis: [0, 0, 0], toward: [0, 0, 1]}}}}\n', 'actions.go.map.aim.axis'),
    ('connect: {mujoco: M}\nactions: {go: {map: {command: move_to, site: tip, '
     'aim: {axis: [1, 0, 0]}}}}\n', 'actions.go.map.aim'),
])
def test_malformed_or_unknown_keys(write_yaml, text, where):
    err = refused(CONFIG_ERROR, where, write_yaml(text), environ={'M': '/nonexistent.xml'})
    assert err.where is not None


def test_unknown_key_lists_what_is_allowed(write_yaml):
    with pytest.raises(ConfigError) as err:
        device_file.load(write_yaml('connect: {mujoco: M}\nwrite: {a: {mx: 1}}\n'))
    assert err.value.where == 'write.a'
    assert 'max_change_per_s' in err.value.allowed and "'mx'" in str(err.value)


def test_not_yaml_duplicates_and_unreadable(write_yaml, tmp_path):
    refused(CONFIG_ERROR, 'not valid YAML', write_yaml('connect: {mujoco: M\n'))
    refused(CONFIG_ERROR, 'given twice',
            write_yaml('connect: {mujoco: M}\nwrite:\n  a: {max: 1}\n  a: {max: 2}\n'))
    refused(CONFIG_ERROR, 'cannot read device file', str(tmp_path / 'missing.yaml'))
    refused(CONFIG_ERROR, 'cannot read device file', str(tmp_path))      # a directory
    binary = tmp_path / 'binary.yaml'
    binary.write_bytes(b'\xff\xfe\x00\x01garbage')
    refused(CONFIG_ERROR, str(binary), str(binary))
    refused(CONFIG_ERROR, 'expected a mapping', write_yaml('- just\n- a list\n'))
    refused(CONFIG_ERROR, 'device_file', 42)


def test_model_lookup_errors(write_yaml, tmp_path, h):
    path = write_yaml('connect: {mujoco: MY_ARM}\n')
    err = refused(CONFIG_ERROR, 'MY_ARM', path, environ={})
    assert 'not set' in str(err) and err.where == 'connect.mujoco'
    refused(CONFIG_ERROR, 'MY_ARM', path, environ={'MY_ARM': ''})
    refused(MODEL_ERROR, 'model file not found', path,
            environ={'MY_ARM': str(tmp_path / 'nope.xml')})
    bad = tmp_path / 'bad.xml'
    bad.write_text('<mujoco><worldbody><body><joint type="hinge"/></body></mujoco>')
    refused(MODEL_ERROR, 'MuJoCo could not load', path, environ={'MY_ARM': str(bad)})
    refused(CONFIG_ERROR, 'connect', write_yaml('device: x\n'), environ={})
    # neither a device file nor a model: the built-in bench arm, as sim_node opens it
    with Device(None, real_time_factor=0, start_paused=True) as arm:
        assert arm.describe()['id'] == 'bench-arm' and arm.model_path.endswith('bench_arm.xml')
    refused(MODEL_ERROR, 'model', model=12)
    refused(MODEL_ERROR, 'not found', model=str(tmp_path / 'none.xml'))
    # An explicit model path wins over the environment variable.
    dev = Device(path, model=h.BENCH_XML, environ={}, real_time_factor=0, start_paused=True)
    dev.close()


@pytest.mark.parametrize('change,where', [
    ({'connect': {'mujoco': 'OPENHAL_BENCH_ARM', 'keyframe': 'nap'}}, 'connect.keyframe'),
    ({'read__pan': {'map': {'joint': 'pann'}}}, 'read.pan.map.joint'),
    ({'read__tip_x': {'map': {'site': 'tipp', 'axis': 'x'}}}, 'read.tip_x.map.site'),
    ({'read__tip_x': {'map': {'site': 'tip'}}}, 'read.tip_x.map'),
    ({'read__block_x': {'map': {'body': 'blok', 'axis': 'x'}}}, 'read.block_x.map.body'),
    ({'read__overhead': {'type': 'image', 'map': {'camera': 'ceiling'}}},
     'read.overhead.map.camera'),
    ({'read__overhead': {'type': 'image', 'map': {'camera': 'overhead', 'width': 4096}}},
     'read.overhead.map.width'),
    ({'read__overhead': {'type': 'image', 'map': {'camera': 'overhead', 'height': 0}}},
     'read.overhead.map.height'),
    ({'read__overhead': {'type': 'image', 'map': {'camera': 'overhead', 'width': 64.5}}},
     'read.overhead.map.width'),
    ({'read__block_free': {}}, 'read.block_free'),
    ({'write__pan_goal': {'map': {'actuator': 'pann'}}}, 'write.pan_goal.map.actuator'),
    ({'write__spin_goal': {}}, 'write.spin_goal.map.actuator'),
    ({'actions__move_to__map': {'command': 'move_to', 'site': 'tipp'}},
     'actions.move_to.map.site'),
    ({'actions__move_to__map': {'command': 'move_to', 'site': 'tip', 'joints': ['knee']}},
     'actions.move_to.map.joints'),
    ({'actions__move_to__map': {'command': 'move_to', 'site': 'tip', 'joints': 'pan'}},
     'actions.move_to.map.joints'),
    ({'actions__move_to__map': {'command': 'move_to'}}, 'actions.move_to.map'),
    ({'actions__move_to__map': {'command': 'move_to', 'site': 'tip',
                                'then': {'pan_goal': 500}},
      'actions__move_to__effects': ['pan_goal', 'lift_goal', 'elbow_goal', 'wrist_goal']},
     'actions.move_to.map.then.pan_goal'),
])
def test_names_checked_against_the_model(open_device, h, change, where):
    doc = h.bench_doc(**change)
    refused(CONFIG_ERROR, where, doc, environ=h.BENCH_ENV)


def test_every_goal_a_move_changes_must_be_in_effects(h):
    doc = h.bench_doc(actions__move_to__effects=['pan_goal', 'lift_goal', 'elbow_goal'])
    err = refused(CONFIG_ERROR, "action 'move_to'", doc, environ=h.BENCH_ENV)
    assert 'wrist_goal' in str(err) and err.where == 'actions.move_to.effects'
    # `then` counts too, and is refused before the model is even looked at.
    doc = h.bench_doc(actions__move_to__map={'command': 'move_to', 'site': 'tip',
                                             'then': {'wrist_goal': 10}},
                      actions__move_to__effects=['pan_goal', 'lift_goal', 'elbow_goal'])
    err = refused(CONFIG_ERROR, "action 'move_to'", doc, environ={})
    assert 'wrist_goal' in str(err)
    # Restricting the joints a move may turn keeps the other goals out of it.
    doc = h.bench_doc(actions__move_to__map={'command': 'move_to', 'site': 'tip',
                                             'joints': ['pan', 'lift', 'elbow']},
                      actions__move_to__effects=['pan_goal', 'lift_goal', 'elbow_goal'])
    dev = Device(doc, environ=h.BENCH_ENV, real_time_factor=0, start_paused=True)
    assert dev.action('move_to').joints == ['pan', 'lift', 'elbow']
    dev.close()


def test_quantities_and_parse_round_trip(write_yaml, h):
    text = open(h.BENCH_YAML, encoding='utf-8').read()
    spec = device_file.load(write_yaml(text))
    assert spec['read']['pan']['every'] == '500 ms'
    dev = Device(spec['path'], environ=h.BENCH_ENV, real_time_factor=0, start_paused=True)
    try:
        pan = next(c for c in dev.describe()['channels'] if c['name'] == 'pan')
        assert pan['every'] == pytest.approx(0.5)
    finally:
        dev.close()


def test_exponent_without_a_dot_is_a_number(write_yaml):
    spec = device_file.load(write_yaml('connect: {mujoco: M}\nwrite: {a: {min: -1e-3, '
                                       'max: 2e+1, max_change_per_s: 5e0}}\n'))
    assert spec['write']['a'] == {'min': -0.001, 'max': 20.0, 'max_change_per_s': 5.0}
    spec = device_file.parse({'actions': {'go': {
        'args': {'x': {}, 'v': {'unit': 'mm/s', 'min': '1e-1', 'max': '1e2'}},
        'map': {'command': 'move_to', 'site': 's', 'speed': 'v'}}}})
    assert spec['actions']['go']['args']['v'] == {'unit': 'mm/s', 'min': 0.1, 'max': 100.0}
