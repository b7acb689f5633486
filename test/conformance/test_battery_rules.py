"""The battery's own rules, where they could hide a failure: the creep allowance of a
move_to applies only to a robot that stands free, not to a fixed arm beside free objects."""

from types import SimpleNamespace

import mujoco

from mujoco_hal_ros.conformance import battery

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
