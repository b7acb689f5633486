"""Structured input parsed with limits, and scene edits that cannot run refused before the
swap (``checks.json_value``, ``world.scene.trial_run``): nothing changes, the sim steps on."""

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.checks import json_value, MAX_JSON_DEPTH
from mujoco_hal_ros.sim.device import Device
from mujoco_hal_ros.world import scene as scene_edit

BOX = ('<mujoco><worldbody><body name="box"><freejoint/>'
       '<geom type="box" size="0.02 0.02 0.02" mass="0.1"/></body></worldbody></mujoco>')
# A floor and a small arena: a pile of boxes spawned at one pose overflows it in a few tens.
SMALL_ARENA = """
<mujoco>
  <size memory="1M"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <body name="arm"><joint name="hinge" axis="0 0 1"/>
      <geom type="capsule" size=".02" fromto="0 0 0 .2 0 0"/></body>
  </worldbody>
  <actuator><position name="turn" joint="hinge" kp="5"/></actuator>
</mujoco>
"""


@pytest.mark.parametrize('text', ['[' * 10_000, '{"a":' * 10_000, '[' * (MAX_JSON_DEPTH + 1)])
def test_deep_json_is_refused_without_recursing(text):
    with pytest.raises(errors.DeviceError) as err:
        json_value(text, 'fields_json')
    assert err.value.code == errors.INVALID_ARGUMENT and err.value.where == 'fields_json'
    assert f'{MAX_JSON_DEPTH}' in str(err.value)


def test_json_limits_and_what_they_keep():
    assert json_value('{"geom_rgba": {"scale": [0.5, 1]}}', 'f') == {
        'geom_rgba': {'scale': [0.5, 1]}}
    assert json_value('["[[[[", "]]]]"]', 'f', max_depth=1) == ['[[[[', ']]]]']  # in strings
    assert json_value('"\\"[[["', 'f', max_depth=0) == '"[[['
    for bad in ('NaN', '[Infinity]', '{"a": -Infinity}', '{', '', 'x', b'\xff[', 12, None,
                '1' * 5000):
        with pytest.raises(errors.DeviceError) as err:
            json_value(bad, 'f')
        assert err.value.code == errors.INVALID_ARGUMENT
    with pytest.raises(errors.DeviceError, match='over the limit of 10'):
        json_value('[' + '1,' * 10 + '1]', 'f', max_bytes=10)


@pytest.fixture()
def small(tmp_path):
    path = tmp_path / 'small.xml'
    path.write_text(SMALL_ARENA)
    dev = Device(model=str(path), real_time_factor=0, start_paused=True)
    yield dev
    dev.close()


def test_a_pile_that_overflows_the_arena_is_refused_and_nothing_changes(small):
    """The issue's repro, scaled down: boxes spawned at one pose until the scene's arena
    cannot hold their contacts. The one that would overflow is refused with MODEL_ERROR
    naming <size memory=...>; the running scene is the last good one and still steps."""
    refused = None
    for i in range(200):
        gen, nbody, t0 = small.generation, small.model.nbody, small.snapshot.time
        try:
            small.scene.spawn(BOX, f'b{i}', position=(0.3, 0.0, 0.3))
        except errors.DeviceError as exc:
            refused = exc
            break
        small.step(1)
    assert refused is not None, 'no spawn was refused: the arena never filled'
    assert refused.code == errors.MODEL_ERROR, refused
    assert '<size memory=' in str(refused) and 'nothing was changed' in str(refused)
    assert 'on its first step' in str(refused), 'refused by the swap, not the trial before it'
    assert small.generation == gen and small.model.nbody == nbody
    assert f'b{i}' not in small.scene.names()
    small.step(5)
    assert small.snapshot.time > t0 and small.health()['errors'] == 0
    assert np.isfinite(small.snapshot.qpos).all()


def test_trial_run_refuses_what_cannot_run():
    model = mujoco.MjModel.from_xml_string(SMALL_ARENA)
    data = mujoco.MjData(model)
    scene_edit.trial_run(model, data)             # a sane scene passes
    assert data.time > 0
    data = mujoco.MjData(model)
    data.qpos[0] = np.nan
    with pytest.raises(errors.DeviceError) as err:
        scene_edit.trial_run(model, data)
    assert err.value.code == errors.UNSTABLE and 'nothing was changed' in str(err.value)


@pytest.mark.parametrize('pattern', ['(a*)*$', '(a+)+', '(a|aa)*', '((ab)*)+', '(.*a){20}',
                                     r'(\w+\s?)+$', r'(a)\1', 'x' * 300, '.*.*.*x',
                                     'a+b+c+'])
def test_entity_filters_that_backtrack_without_bound_are_refused(pattern):
    """``(a*)*$`` against a 32-character spawned name holds the GIL for hours: refused."""
    from mujoco_hal_ros.world.catalog import safe_pattern
    with pytest.raises(errors.DeviceError) as err:
        safe_pattern(pattern)
    assert err.value.code == errors.INVALID_ARGUMENT and err.value.where == 'filter'


@pytest.mark.parametrize('pattern', ['^bl', 'a+b*', '(ab)+', 'crate/.*', r'^(box|crate)_\d+$',
                                     '[(*)]+', r'\(a*\)*', 'x{1,3}y'])
def test_ordinary_entity_filters_pass(pattern):
    from mujoco_hal_ros.world.catalog import safe_pattern
    assert safe_pattern(pattern).pattern == pattern
