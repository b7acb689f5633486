"""Servo gains from the inertia a joint moves (``description.servo_gains``), checked in
bare MuJoCo: the response to a setpoint step, the mimic coupling, the schedule that
follows the pose, and the old effort-only rule failing the same check."""

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.description import servo_gains, urdf_in

# A 7-DOF-like wrist: a heavy upper link, then a light distal link on a strong joint
# (300 N m effort, a few gram-metre squared), as in the arm that chattered.
URDF = """<robot name="wrist">
  <link name="base"/>
  <link name="upper"><inertial><origin xyz="0 0 0.2"/><mass value="5"/>
    <inertia ixx="0.05" iyy="0.05" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="hand"><inertial><origin xyz="0 0 0.3"/><mass value="0.05"/>
    <inertia ixx="2e-4" iyy="2e-4" izz="2e-4" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="finger_a"><inertial><mass value="0.01"/>
    <inertia ixx="1e-6" iyy="1e-6" izz="1e-6" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="finger_b"><inertial><mass value="0.01"/>
    <inertia ixx="1e-6" iyy="1e-6" izz="1e-6" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/>
    <axis xyz="0 0 1"/><limit lower="-2" upper="2" effort="300" velocity="2"/></joint>
  <joint name="wrist" type="revolute"><parent link="upper"/><child link="hand"/>
    <origin xyz="0 0 0.4"/><axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="300"
    velocity="2"/><dynamics damping="0.01"/></joint>
  <joint name="finger_a_joint" type="prismatic"><parent link="hand"/><child link="finger_a"/>
    <axis xyz="0 1 0"/><limit lower="0" upper="0.04" effort="20" velocity="0.2"/></joint>
  <joint name="finger_b_joint" type="prismatic"><parent link="hand"/><child link="finger_b"/>
    <axis xyz="0 -1 0"/><limit lower="0" upper="0.04" effort="20" velocity="0.2"/>
    <mimic joint="finger_a_joint" multiplier="1" offset="0"/></joint>
</robot>"""


@pytest.fixture
def model(tmp_path):
    path, notes = urdf_in.model_from_urdf(URDF, cache_dir=str(tmp_path))
    return mujoco.MjModel.from_xml_path(path), notes


def _step(m, actuator, size=0.04, seconds=0.6):
    """The joint's samples after its setpoint jumps by ``size`` from home (bare MuJoCo,
    the others held where they are)."""
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    adr = m.jnt_qposadr[m.actuator_trnid[actuator, 0]]
    q0 = d.qpos[adr]
    d.ctrl[actuator] += size
    out = []
    for _ in range(int(seconds / m.opt.timestep)):
        mujoco.mj_step(m, d)
        out.append(d.qpos[adr])
    return (np.array(out) - q0) / size


def test_a_light_link_on_a_strong_joint_is_critically_damped(model):
    m, _ = model
    a = m.actuator('wrist').id
    kp = m.actuator_gainprm[a, 0]
    assert kp < 300 / servo_gains.FULL_EFFORT_AT / 10     # far below the effort-only rule
    x = _step(m, a)
    assert x.max() < 1.02                                  # no overshoot to speak of
    assert np.abs(x[-50:] - 1).max() < 0.02               # settled
    assert np.abs(np.diff(x)).sum() < 1.1                 # no chatter


def test_the_effort_only_rule_chatters_on_the_same_link(model):
    """The check above fails on the gains the import used to build: full effort at 0.05
    rad (6000 N m/rad on this wrist), so it can tell the two apart."""
    m, _ = model
    a = m.actuator('wrist').id
    kp = 300 / 0.05
    m.actuator_gainprm[a, 0], m.actuator_biasprm[a, 1] = kp, -kp
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    x = _step(m, a)
    assert not (x.max() < 1.02 and np.abs(np.diff(x)).sum() < 1.1)


def test_a_mimic_follower_has_no_actuator_and_moves_with_its_leader(model):
    m, notes = model
    names = [m.actuator(i).name for i in range(m.nu)]
    assert 'finger_b_joint' not in names and 'finger_a_joint' in names
    assert any('finger_b_joint: mimics finger_a_joint' in n for n in notes)
    dofs = [m.jnt_dofadr[m.joint('finger_a_joint').id]]
    c = servo_gains.couplings(m, dofs)
    assert c[0, m.jnt_dofadr[m.joint('finger_b_joint').id]] == 1.0
    x = _step(m, m.actuator('finger_a_joint').id, size=0.01)
    assert abs(x[-1] - 1) < 0.02
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    d.ctrl[m.actuator('finger_a_joint').id] = 0.03
    mujoco.mj_step(m, d, 500)
    qa, qb = (d.qpos[m.jnt_qposadr[m.joint(n).id]]
              for n in ('finger_a_joint', 'finger_b_joint'))
    assert qa == pytest.approx(0.03, abs=1e-3) and qb == pytest.approx(qa, abs=1e-3)


def test_the_schedule_follows_the_pose(model):
    """The shoulder moves more inertia with the wrist stretched out than folded in: the
    schedule (read back from the saved MJCF) sizes its gains again, stiffer when it moves
    more, always critically damped."""
    m, _ = model
    sched = servo_gains.schedule_of(m)
    assert sched is not None and m.actuator('shoulder').id in sched.actuators
    d = mujoco.MjData(m)
    full = np.zeros((m.nv, m.nv))
    a = m.actuator('shoulder').id
    kps = []
    for wrist in (0.0, 1.5):
        mujoco.mj_resetDataKeyframe(m, d, 0)
        d.qpos[m.jnt_qposadr[m.joint('wrist').id]] = wrist
        mujoco.mj_forward(m, d)
        sched.apply(m, d, full)
        kp, kv = m.actuator_gainprm[a, 0], -m.actuator_biasprm[a, 2]
        dof = m.jnt_dofadr[m.joint('shoulder').id]
        inertia = full[dof, dof]
        assert kv == pytest.approx(2 * np.sqrt(kp * inertia))
        kps.append(kp)
    assert kps[1] > kps[0] * 1.01


def test_repairs_are_noted_with_before_and_after(tmp_path):
    text = URDF.replace('<link name="base"/>', '<link name="base"/><link name="bare"/>'
                        '<joint name="bare_joint" type="revolute"><parent link="hand"/>'
                        '<child link="bare"/><axis xyz="1 0 0"/><limit lower="-1" upper="1"'
                        ' effort="1" velocity="1"/></joint>')
    _path, notes = urdf_in.model_from_urdf(text, cache_dir=str(tmp_path))
    assert any(n.startswith('bare: mass missing kg ->') for n in notes), notes
    assert any('get armature up to it' in n and 'bare_joint' in n for n in notes), notes


def test_urdf_velocity_limits_bound_the_paths_the_device_plans(model):
    """<limit velocity="2"> is kept in the model; move_to's paths peak no faster."""
    from mujoco_hal_ros.description import joint_limits
    from mujoco_hal_ros.motion import move
    m, _ = model
    jid = m.joint('wrist').id
    assert joint_limits.speed_of(m, jid) == pytest.approx(2.0)
    assert joint_limits.speed_of(m, m.joint('finger_b_joint').id) == np.inf   # no actuator

    class Goal:
        actuator, joint, drive, native_rate = m.actuator('wrist').id, jid, 'position', None
    assert move.speed_limit(m, Goal) <= 2.0
    assert move.move_rate(m, Goal) <= 2.0
