"""The battery's own rules, where they could hide a failure: the creep allowance of a
move_to applies only to a robot that stands free, not to a fixed arm beside free objects;
a hold that gives way with its motor at the effort limit is shown as such and still fails,
unless what it dropped comes to rest on something else (a joint limit), where the hold is
measured from there."""

from types import SimpleNamespace

import mujoco

from mujoco_hal_ros.conformance import battery, zoo

SCENE = '''
<mujoco>
  <worldbody>
    <body name="arm">
      <joint name="j" axis="0 0 1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      <site name="tip" pos="0.3 0 0"/>
    </body>
    <body name="kettle" pos="1 0 0">
      <freejoint/>
      <geom type="box" size="0.05 0.05 0.05"/>
    </body>
    <body name="base" pos="0 1 0.5">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1"/>
      <body name="limb">
        <joint name="k" axis="0 0 1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
        <site name="hand" pos="0.3 0 0"/>
      </body>
    </body>
  </worldbody>
</mujoco>
'''


def test_only_a_free_standing_robot_may_creep():
    model = mujoco.MjModel.from_xml_string(SCENE)
    fixed = SimpleNamespace(model=model, end=('site', 'tip'))
    standing = SimpleNamespace(model=model, end=('site', 'hand'))
    assert not battery._end_floats(fixed)           # a free kettle beside it changes nothing
    assert battery._end_floats(standing)
    assert battery._end_floats(SimpleNamespace(model=model, end=('body', 'limb')))


# One link held level by a motor that gives 2 N m against the 4.9 N m of its weight.
WEAK = '''
<mujoco>
  <compiler angle="radian"/>
  <worldbody>
    <body name="link" pos="0 0 1">
      <joint name="hinge" axis="0 -1 0" range="-3 3"/>
      <geom type="capsule" fromto="0 0 0 1 0 0" size="0.01" mass="1e-6"/>
      <geom type="sphere" pos="0.5 0 0" size="0.02" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" ctrlrange="-1 1" gear="2"/></actuator>
</mujoco>
'''


def test_a_saturated_hold_is_shown_and_still_fails(tmp_path):
    path = tmp_path / 'weak.xml'
    path.write_text(WEAK)
    zm = zoo.ZooModel('weak', str(path), 'other')
    dev = battery.open_device(zm)
    try:
        result = battery.check_hold(battery.Context(zm, dev))
    finally:
        dev.close()
    assert not result.passed
    assert 'at the effort limit pushing back the whole hold: hinge' in result.detail


def test_a_load_carried_by_a_joint_limit_is_held_from_there(tmp_path):
    """The same weak motor, the link free to droop only 0.3 rad onto its joint limit, slowly
    (joint damping: about 2 s): it gives way at the effort limit, the limit carries the load,
    and the hold is measured (and passes) from there, saying so."""
    path = tmp_path / 'weak_stop.xml'
    path.write_text(WEAK.replace('range="-3 3"', 'range="-0.3 0.3" damping="20"'))
    zm = zoo.ZooModel('weak_stop', str(path), 'other')
    dev = battery.open_device(zm)
    try:
        result = battery.check_hold(battery.Context(zm, dev))
        drooped = abs(float(dev.snapshot.qpos[0]))
    finally:
        dev.close()
    assert result.passed, result.detail
    assert 'giving way at the effort limit' in result.detail and 'hinge' in result.detail
    assert drooped > 0.29, f'the link did not reach its joint limit ({drooped:.3f} rad)'
