"""A hand's move_to point: the tip of its longest finger driven joint by joint. A finger
with a joint no actuator drives (coupled, or curled by a tendon) is never chosen, and a
hand whose every finger is tendon-driven or has mimic joints says so instead of moving a
point on its palm."""

from types import SimpleNamespace

import mujoco

from mujoco_hal_ros.conformance import battery, zoo

HAND = '''
<mujoco>
  <worldbody>
    <body name="palm">
      <geom type="box" size="0.04 0.04 0.01"/>
      <body name="index" pos="0.03 0 0">
        <joint name="i1" axis="0 1 0" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.04" size="0.008"/>
        <body name="index_mid" pos="0 0 0.04">
          <joint name="i2" axis="0 1 0" range="0 1.5"/>
          <geom type="capsule" fromto="0 0 0 0 0 0.03" size="0.008"/>
          <body name="index_tip" pos="0 0 0.03">
            <joint name="i3" axis="0 1 0" range="0 1.5"/>
            <geom type="capsule" fromto="0 0 0 0 0 0.03" size="0.008"/>
            <site name="index_site" pos="0 0 0.03"/>
          </body>
        </body>
      </body>
      <body name="thumb" pos="-0.03 0 0">
        <joint name="t1" axis="1 0 0" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.04" size="0.008"/>
        <site name="thumb_base_site" pos="0 0 0.01"/>
        <body name="thumb_tip" pos="0 0 0.04">
          <joint name="t2" axis="0 1 0" range="0 1.5"/>
          <geom type="capsule" fromto="0 0 0 0 0 0.03" size="0.008"/>
          <site name="thumb_site" pos="0 0 0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
  {equality}
  <tendon>
    <fixed name="curl"><joint joint="i2" coef="1"/><joint joint="i3" coef="1"/></fixed>
  </tendon>
  <actuator>{actuators}</actuator>
</mujoco>
'''


def _hand(joints, tendon=False, mimic=()):
    acts = ''.join(f'<position joint="{j}" kp="5"/>' for j in joints)
    if tendon:
        acts += '<position tendon="curl" kp="5"/>'
    eq = ''.join(f'<joint joint1="{a}" joint2="{b}"/>' for a, b in mimic)
    return mujoco.MjModel.from_xml_string(
        HAND.format(actuators=acts, equality=f'<equality>{eq}</equality>' if eq else ''))


def _driven(model):
    return [int(model.actuator_trnid[a, 0]) for a in range(model.nu)
            if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT]


def test_the_longest_finger_driven_joint_by_joint_gives_its_tip():
    model = _hand(['i1', 'i2', 'i3', 't1', 't2'])
    assert zoo.fingertip(model, _driven(model)) == ('site', 'index_site')


def test_a_finger_with_a_joint_no_actuator_drives_is_not_chosen():
    model = _hand(['i1', 'i2', 't1', 't2'])      # i3 only follows (coupled, or a tendon)
    assert zoo.fingertip(model, _driven(model)) == ('site', 'thumb_site')


def test_a_tendon_driven_hand_says_so():
    model = _hand(['i1', 't1'], tendon=True)
    assert zoo.fingertip(model, _driven(model)) is None
    ctx = SimpleNamespace(model=model, zoo=SimpleNamespace(kind='hand'))
    reason = battery._no_end(ctx)
    assert '1 of 3 actuators drive tendons rather than joints' in reason


def test_a_hand_of_mimic_joints_says_so():
    model = _hand(['i1', 'i2', 't1'], mimic=[('i3', 'i2'), ('t2', 't1')])
    assert zoo.fingertip(model, _driven(model)) is None
    ctx = SimpleNamespace(model=model, zoo=SimpleNamespace(kind='hand'))
    assert '2 joint equalities couple finger joints (mimic joints)' in battery._no_end(ctx)
