"""Units: quantity parsing, channel conversions (deg, rad, mm, cm, m, percent, speeds), and
what each kind of actuator takes, checked on the layout alone (no stepping thread)."""

import math

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.config import device_file, units
from mujoco_hal_ros.config.channels import Layout
from mujoco_hal_ros.errors import CONFIG_ERROR, ConfigError


@pytest.mark.parametrize('text,kind,expected', [
    ('4 ms', 'time', 0.004), ('4ms', 'time', 0.004), (' 2 s ', 'time', 2.0),
    ('1 mm', 'length', 0.001), ('2.5 cm', 'length', 0.025), ('3 m', 'length', 3.0),
    ('3 deg', 'angle', math.radians(3)), ('0.5 rad', 'angle', 0.5), ('1e-3 m', 'length', 1e-3),
    (0.25, 'length', 0.25), (2, 'time', 2.0), ('-90 deg', 'angle', -math.pi / 2)])
def test_parse_quantity(text, kind, expected):
    assert units.parse_quantity(text, kind, 'x') == pytest.approx(expected)


@pytest.mark.parametrize('text,kind', [
    ('4 parsecs', 'length'), ('3 deg', 'length'), ('mm', 'length'), ('', 'time'),
    (True, 'time'), (float('nan'), 'time'), (float('inf'), 'length'), ([1], 'time'),
    ('1 mm', 'angle'), ('1..2 m', 'length'), (10 ** 400, 'time'), ('1e999 s', 'time')])
def test_parse_quantity_refuses(text, kind):
    with pytest.raises(ConfigError) as err:
        units.parse_quantity(text, kind, 'connect.tolerance')
    assert err.value.code == CONFIG_ERROR
    assert 'connect.tolerance' in str(err.value)


def test_linear_map_and_percent():
    assert units.linear_map('deg', 'angle', None, None, 'w') == (
        pytest.approx(math.pi / 180), 0.0)
    assert units.linear_map('mm', 'length', None, None, 'w') == (0.001, 0.0)
    assert units.linear_map('cm', 'length', None, None, 'w') == (0.01, 0.0)
    scale, offset = units.linear_map('percent', 'angle', -1.0, 3.0, 'w')
    assert (scale * 0 + offset, scale * 100 + offset, scale * 25 + offset) == (-1.0, 3.0, 0.0)
    with pytest.raises(ConfigError, match='percent needs a joint range'):
        units.linear_map('percent', 'angle', None, None, 'w')
    with pytest.raises(ConfigError, match='not a unit of length'):
        units.linear_map('deg', 'length', None, None, 'write.x.unit')


def test_conversion_and_rates():
    assert units.conversion('deg', 'rad', 'w') == pytest.approx(math.pi / 180)
    assert units.conversion('mm', 'm', 'w') == pytest.approx(1e-3)
    assert units.conversion('mm/s', 'm/s', 'w') == pytest.approx(1e-3)
    assert units.conversion('deg/s', 'rad/s', 'w') == pytest.approx(math.pi / 180)
    assert units.conversion('N', 'N', 'w') == 1.0
    for bad in (('deg', 'm'), ('mm/s', 'm'), ('N', 'm'), ('percent', 'm')):
        with pytest.raises(ConfigError):
            units.conversion(*bad, 'w')
    assert units.rate_scale('mm/s', 'length', 'w') == pytest.approx(1e-3)
    assert units.rate_scale('mm/ms', 'length', 'w') == pytest.approx(1.0)
    assert units.rate_scale('deg', 'angle', 'w') == pytest.approx(math.pi / 180)


def layout(path, doc):
    model = mujoco.MjModel.from_xml_path(path)
    return Layout(model, device_file.parse(doc) if doc is not None else None)


def test_bench_arm_channel_units(h):
    doc = h.bench_doc()
    lay = layout(h.BENCH_XML, doc)
    pan = lay.goals['pan_goal']
    assert pan.unit == 'deg' and pan.to_native(90) == pytest.approx(math.pi / 2)
    assert pan.native_rate == pytest.approx(math.radians(60))
    tip_x = next(r for r in lay.reads if r.name == 'tip_x')
    assert tip_x.to_unit(0.1234) == pytest.approx(123.4)
    lift = next(r for r in lay.reads if r.name == 'lift')
    assert lift.to_unit(math.pi / 4) == pytest.approx(45.0)


def test_percent_spans_joint_range_zero_at_low_end(h):
    doc = h.bench_doc(write__lift_goal={'unit': 'percent', 'max_change_per_s': 50},
                      read__lift={'unit': 'percent'})
    lay = layout(h.BENCH_XML, doc)
    g = lay.goals['lift_goal']
    lo, hi = math.radians(-85), math.radians(85)
    assert g.to_native(0) == pytest.approx(lo)
    assert g.to_native(100) == pytest.approx(hi)
    assert g.to_native(50) == pytest.approx(0.0, abs=1e-12)
    assert (g.min, g.max) == (pytest.approx(0.0), pytest.approx(100.0))
    assert g.native_rate == pytest.approx(0.5 * (hi - lo))
    r = next(r for r in lay.reads if r.name == 'lift')
    assert r.to_unit(lo) == pytest.approx(0.0) and r.to_unit(hi) == pytest.approx(100.0)


def test_slide_in_mm_and_cm(h):
    doc = {'write': {'rail_goal': {'unit': 'mm', 'max_change_per_s': 100},
                     'rail_cm': {'unit': 'cm', 'map': {'joint': 'rail'}}}}
    with pytest.raises(ConfigError, match='already driven'):
        layout(h.model_file('units_rig'), doc)
    probe_z = {'unit': 'mm', 'map': {'site': 'probe', 'axis': 'z'}}
    doc = {'read': {'rail': {'unit': 'cm'}, 'probe_z': probe_z,
                    'rail_pos': {'map': {'sensor': 'rail_pos'}}},
           'write': {'rail_goal': {'unit': 'mm', 'max_change_per_s': 100}}}
    lay = layout(h.model_file('units_rig'), doc)
    g = lay.goals['rail_goal']
    assert g.to_native(150) == pytest.approx(0.15)
    assert (g.min, g.max) == (pytest.approx(0.0), pytest.approx(200.0))   # ctrlrange, in mm
    assert g.native_rate == pytest.approx(0.1)
    rail = next(r for r in lay.reads if r.name == 'rail')
    assert rail.to_unit(0.05) == pytest.approx(5.0)


def test_write_map_joint_finds_the_actuator(h):
    lay = layout(h.model_file('units_rig'), {'write': {'carriage': {'map': {'joint': 'rail'}}}})
    assert lay.goals['carriage'].actuator_name == 'rail'
    with pytest.raises(ConfigError, match='no actuator drives joint'):
        layout(h.model_file('units_rig'), {'write': {'x': {'map': {'joint': 'flap'}}}})


def test_velocity_servo_takes_speeds(h):
    lay = layout(h.model_file('units_rig'), {'write': {'spin_goal': {'unit': 'deg/s'}}})
    g = lay.goals['spin_goal']
    assert g.drive == 'velocity'
    assert g.to_native(180) == pytest.approx(math.pi)
    assert g.max == pytest.approx(math.degrees(10))    # ctrlrange 10 rad/s, in deg/s
    lay = layout(h.model_file('units_rig'), None)
    assert lay.goals['spin_goal'].unit == 'rad/s'


def test_actuator_without_joint_takes_map_unit(h):
    # The tendon actuator's ctrl is a raw 0..255: no unit unless the map says one.
    lay = layout(h.model_file('units_rig'), {'write': {'flap_goal': {}}})
    g = lay.goals['flap_goal']
    assert g.drive == 'direct' and g.unit == '' and g.to_native(12) == 12
    lay = layout(h.model_file('units_rig'), {'write': {'flap_goal': {'unit': 'percent'}}})
    g = lay.goals['flap_goal']
    assert g.to_native(0) == 0 and g.to_native(100) == pytest.approx(255)
    # A site motor whose ctrl the map says is in newtons; the channel is in newtons too.
    lay = layout(h.model_file('units_rig'), {'write': {'push_goal': {'map': {'unit': 'N'}}}})
    assert lay.goals['push_goal'].unit == 'N' and lay.goals['push_goal'].to_native(2) == 2
    # A jointless actuator in m with a channel in mm converts.
    lay = layout(h.model_file('units_rig'),
                 {'write': {'push_goal': {'unit': 'mm', 'min': -5000, 'max': 5000,
                                          'map': {'unit': 'm'}}}})
    assert lay.goals['push_goal'].to_native(1500) == pytest.approx(1.5)
    # A physical unit with nothing to convert it to is refused, not passed through.
    with pytest.raises(ConfigError, match='map.unit'):
        layout(h.model_file('units_rig'), {'write': {'push_goal': {'unit': 'deg'}}})
    with pytest.raises(ConfigError, match='cannot convert'):
        layout(h.model_file('units_rig'),
               {'write': {'push_goal': {'unit': 'deg', 'map': {'unit': 'm'}}}})


def test_wrong_unit_kind_is_refused(h):
    with pytest.raises(ConfigError) as err:
        layout(h.BENCH_XML, h.bench_doc(write__pan_goal={'unit': 'mm'}))
    assert 'write.pan_goal.unit' in str(err.value) and 'deg' in str(err.value)
    with pytest.raises(ConfigError, match='read.tip_x.unit'):
        tip_x = {'unit': 'deg', 'map': {'site': 'tip', 'axis': 'x'}}
        layout(h.BENCH_XML, h.bench_doc(read__tip_x=tip_x))
    with pytest.raises(ConfigError, match='read.pan.unit'):
        layout(h.BENCH_XML, h.bench_doc(read__pan={'unit': 'furlong'}))


def test_limits_outside_the_actuator_are_refused(h):
    with pytest.raises(ConfigError) as err:
        pan_goal = {'unit': 'deg', 'min': -100, 'max': 90}
        layout(h.BENCH_XML, h.bench_doc(write__pan_goal=pan_goal))
    assert 'write.pan_goal.min' in str(err.value)
    # One side given: the other is the joint range, in the channel's unit.
    lay = layout(h.BENCH_XML, h.bench_doc(write__pan_goal={'unit': 'deg', 'min': -30}))
    g = lay.goals['pan_goal']
    assert g.min == -30 and g.max == pytest.approx(90.0)
    assert np.isclose(g.to_native(g.max), math.pi / 2)
