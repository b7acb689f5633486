"""Randomized starts that hold: the servos start where the episode starts (``tasks.servos``).

A task with joint noise on a position-servo arm and ``delta`` actions must keep that noise
under zero actions: the setpoints start at the randomized joint positions, not at the
keyframe's ctrl, so nothing pulls the arm back home. Measured independently of the code
under test: joint positions straight from the recorded FULLPHYSICS rows, the hand's
position by forward kinematics on a plain MjData of the zoo's own model file. The pool,
the serial reference, the device's ``run_policy`` (lockstep) and the Gymnasium vector env
must run the same episodes.
"""

import os

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.conformance import zoo
from mujoco_hal_ros.pool.layout import FULLPHYSICS
from mujoco_hal_ros.tasks import evaluate, Task
from mujoco_hal_ros.tasks.servos import servo_kinds, ServoStart

# zoo arm -> (its arm joints, the body whose spread is measured, its arm actuators)
ARMS = {
    'panda': ([f'joint{i}' for i in range(1, 8)], 'hand',
              [f'actuator{i}' for i in range(1, 8)]),
    'ur5e': (['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint',
              'wrist_2_joint', 'wrist_3_joint'], 'wrist_3_link', 'all'),
}
NOISE = 0.1          # rad, uniform +-
EPISODES = 8


def _zoo(name):
    zm = zoo.by_name(name)
    if zm.path is None:
        pytest.skip(zm.missing)
    return zm


def _task(name, horizon=None):
    zm = _zoo(name)
    joints, _, acts = ARMS[name]
    m = mujoco.MjModel.from_xml_path(zm.path)
    steps = horizon or int(round(1.0 / (m.opt.timestep * 10)))     # one second
    return Task.from_dict({
        'name': f'hold_{name}', 'model': zm.path, 'start': {'keyframe': 'home'},
        'horizon': steps,
        'reset': {'joint_noise': {'joints': joints, 'qpos': NOISE}},
        'observation': [{'joint_pos': joints}, 'last_action'],
        'action': {'actuators': acts, 'mode': 'delta', 'units': 'channel', 'scale': 0.05,
                   'decimation': 10}}, f'hold_{name}.yaml')


def _fk(path, body, qpos_rows):
    """World positions of ``body`` at each qpos row, on a fresh MjData of the file."""
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, body)
    out = []
    for q in qpos_rows:
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        out.append(d.xpos[bid].copy())
    return np.array(out)


def _qpos(task, rows):
    return rows[..., 1:1 + task.model.nq]       # FULLPHYSICS: time, then qpos


def _check_spread_holds(task, name, first, last):
    """``first``/``last``: (episodes, nq) qpos at the start and after one second."""
    zm = _zoo(name)
    joints, body, _ = ARMS[name]
    cols = [task.model.jnt_qposadr[task.model.joint(j).id] for j in joints]
    spread0, spread1 = first[:, cols].std(axis=0), last[:, cols].std(axis=0)
    assert spread0.mean() > 0.3 * NOISE, 'the start is randomized'
    # The spread survives (it collapsed to ~1 % before the servos started at the start)
    assert np.all(spread1 > 0.8 * spread0), (spread0, spread1)
    assert np.abs(last[:, cols] - first[:, cols]).max() < 0.25 * NOISE
    hand0, hand1 = _fk(zm.path, body, first), _fk(zm.path, body, last)
    h0 = np.linalg.norm(hand0 - hand0.mean(axis=0), axis=1).mean()
    h1 = np.linalg.norm(hand1 - hand1.mean(axis=0), axis=1).mean()
    assert h0 > 0.02 and h1 > 0.8 * h0, (h0, h1)
    assert np.linalg.norm(hand1 - hand0, axis=1).max() < 0.3 * h0


@pytest.fixture(scope='module', params=sorted(ARMS))
def arm(request):
    task = _task(request.param)
    report = evaluate(task, 'zero', EPISODES, 4, seed=3, record=range(EPISODES), nthread=1)
    return request.param, task, report


def test_pool_keeps_the_start_spread_for_a_second(arm):
    name, task, report = arm
    assert all(e.steps == task.horizon for e in report.episodes)
    first = np.stack([_qpos(task, report.states[e][0]) for e in range(EPISODES)])
    last = np.stack([_qpos(task, report.states[e][-1]) for e in range(EPISODES)])
    _check_spread_holds(task, name, first, last)
    # the setpoints the episode starts from are the randomized joint positions
    joints, _, _ = ARMS[name]
    for e in range(EPISODES):
        draw = task.draw(3, e)
        for j in joints:
            jid = task.model.joint(j).id
            a = next(a for a in range(task.model.nu) if task.model.actuator_trnid[a, 0] == jid)
            assert draw.ctrl[a] == pytest.approx(_qpos(task, draw.state)[
                task.model.jnt_qposadr[jid]], abs=1e-12)


def test_run_policy_runs_the_pools_episodes_and_keeps_the_spread(arm):
    from mujoco_hal_ros.sim.device import Device
    name, task, report = arm
    device = Device(real_time_factor=100.0, start_paused=True)
    try:
        from mujoco_hal_ros.tasks.device_runner import run_on_device
        runs = [run_on_device(device, task, 'zero', seed=3, episode=e, record=True)
                for e in range(EPISODES)]
    finally:
        device.close()
    for e, run in enumerate(runs):
        assert run.result.to_dict() == report.episodes[e].to_dict()
        assert np.array_equal(run.states[:, 1:], report.states[e][:, 1:])
    first = np.stack([_qpos(task, r.states[0]) for r in runs])
    last = np.stack([_qpos(task, r.states[-1]) for r in runs])
    _check_spread_holds(task, name, first, last)


def test_gymnasium_vector_env_runs_the_same_episodes(arm):
    pytest.importorskip('gymnasium', reason='pip install gymnasium')
    from mujoco_hal_ros.tasks.gym import TaskVectorEnv
    name, task, report = arm
    env = TaskVectorEnv(task, 4)
    try:
        env.reset(seed=3)
        for _ in range(task.horizon):
            env.step(np.zeros((4, task.act_size)))
        rows = env._runner.pool.get_state()     # noqa: SLF001 - the pool under the env
    finally:
        env.close()
    for e in range(4):
        assert np.array_equal(rows[e, 1:], report.states[e][-1, 1:])


# --------------------------------------------------------------------------- the servo law
SERVOS = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="a"><joint name="pos" type="hinge" range="-2 2"/><geom size="0.1" mass="1"/>
      <body name="b" pos="0 0 0.3"><joint name="vel" type="hinge" axis="0 1 0"/>
        <geom size="0.1" mass="1"/>
        <body name="c" pos="0 0 0.3"><joint name="filt" type="slide"/><geom size="0.1" mass="1"/>
          <body name="d" pos="0 0 0.3"><joint name="intv" type="hinge"/><geom size="0.1" mass="1"/>
            <body name="e" pos="0 0 0.3"><joint name="ten" type="hinge"/>
              <geom size="0.1" mass="1"/>
              <body name="f" pos="0 0 0.3"><joint name="mot" type="hinge"/>
                <geom size="0.1" mass="1"/></body></body></body></body></body></body>
  </worldbody>
  <tendon><fixed name="t"><joint joint="ten" coef="2"/></fixed></tendon>
  <actuator>
    <position name="pos" joint="pos" kp="50" gear="2" ctrlrange="-5 5"/>
    <velocity name="vel" joint="vel" kv="5"/>
    <position name="filt" joint="filt" kp="50" timeconst="0.05"/>
    <intvelocity name="intv" joint="intv" kp="50" actrange="-3 3"/>
    <general name="ten" tendon="t" gainprm="0.5" biastype="affine" biasprm="0.1 -10 -1"/>
    <motor name="mot" joint="mot"/>
  </actuator>
  <keyframe><key name="k" qpos="0.1 0 0 0 0 0" ctrl="0.2 0 0 0 0 0.3" act="0 0.5"/></keyframe>
</mujoco>
"""


def _servo_start():
    m = mujoco.MjModel.from_xml_string(SERVOS)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    state = np.empty(mujoco.mj_stateSize(m, FULLPHYSICS))
    mujoco.mj_getState(m, d, state, FULLPHYSICS)
    qpos_at, qvel_at, act_at = 1, 1 + m.nq, 1 + m.nq + m.nv
    return m, state, d.ctrl.copy(), ServoStart(m, state, d.ctrl, qpos_at, qvel_at, act_at)


def test_servo_kinds_come_from_the_actuators_own_law():
    m = mujoco.MjModel.from_xml_string(SERVOS)
    assert servo_kinds(m) == {0: 'position', 1: 'velocity', 2: 'position', 3: 'position',
                              4: 'position'}        # the motor has no setpoint


def test_servo_start_shifts_each_setpoint_by_its_hold_points_move():
    m, state, ctrl, servos = _servo_start()
    same_ctrl, same_state = servos.shift(state)
    assert np.array_equal(same_ctrl, ctrl) and same_state is state     # nothing randomized
    moved = state.copy()
    q = moved[1:1 + m.nq]
    v = moved[1 + m.nq:1 + m.nq + m.nv]
    q[:] = [0.4, 0.0, 0.05, 0.2, 0.3, 0.7]
    v[:] = [0.0, 0.6, 0.0, 0.0, 0.0, 0.0]
    new_ctrl, new_state = servos.shift(moved)
    # position servo, gear 2: the keyframe's 0.2 moves with the length 2 q by 2 * 0.3
    assert new_ctrl[0] == pytest.approx(0.2 + 2 * 0.3)
    assert new_ctrl[1] == pytest.approx(0.6)                  # velocity servo: the new speed
    # filter dynamics: the ctrl and the activation (the filtered setpoint) both move
    assert new_ctrl[2] == pytest.approx(0.05)
    act = new_state[1 + m.nq + m.nv:1 + m.nq + m.nv + m.na]
    assert act[0] == pytest.approx(0.05)
    # intvelocity: the activation is the position setpoint; its ctrl (a speed) stays
    assert new_ctrl[3] == 0.0 and act[1] == pytest.approx(0.5 + 0.2)
    # tendon servo, length 2 q: hold = -(0.1 - 10 L) / 0.5 moves by 10 * 2 * 0.3 / 0.5
    assert new_ctrl[4] == pytest.approx(12.0)
    assert new_ctrl[5] == 0.3                                 # a motor keeps its ctrl
    assert np.array_equal(state, servos.shift(state)[1])      # the input row is not written


def test_servo_start_follows_a_patched_gain():
    m, state, ctrl, servos = _servo_start()
    gain = m.actuator_gainprm.copy()
    bias = m.actuator_biasprm.copy()
    gain[0, 0] *= 2.0          # a stiffer position servo: the same pose, half the ctrl...
    bias[0, 1] *= 2.0          # ...with its bias scaled alike, the hold point is unchanged
    new_ctrl, _ = servos.shift(state, {'actuator_gainprm': gain, 'actuator_biasprm': bias})
    assert new_ctrl[0] == pytest.approx(ctrl[0])
    gain[0, 0] = m.actuator_gainprm[0, 0] * 2.0
    bias[0, 1] = m.actuator_biasprm[0, 1]                     # gain only: the hold halves
    new_ctrl, _ = servos.shift(state, {'actuator_gainprm': gain})
    assert new_ctrl[0] == pytest.approx(ctrl[0] - 2 * 0.1 / 2)


def test_a_task_without_randomization_starts_from_the_keyframes_ctrl():
    zm = _zoo('panda')
    task = Task.from_dict({
        'name': 'still', 'model': zm.path, 'start': {'keyframe': 'home'}, 'horizon': 5,
        'observation': ['last_action'],
        'action': {'mode': 'delta', 'units': 'channel', 'decimation': 10}}, 'still.yaml',
        os.path.dirname(zm.path))
    draw = task.draw(0, 4)
    assert np.array_equal(draw.ctrl, task.start_ctrl)
    assert np.array_equal(draw.state, task.start_state)


def test_run_policy_in_real_time_commands_the_randomized_start(arm):
    """Through the goal channels and the device's drive laws (not bit for bit): zero delta
    actions keep each episode at its randomized start, not the keyframe."""
    from mujoco_hal_ros.sim.device import Device
    from mujoco_hal_ros.tasks.device_runner import run_on_device
    name, task, _ = arm
    joints, _, _ = ARMS[name]
    cols = [task.model.jnt_qposadr[task.model.joint(j).id] for j in joints]
    device = Device(real_time_factor=20.0)
    try:
        for e in range(3):
            run = run_on_device(device, task, 'zero', seed=3, episode=e, lockstep=False)
            assert run.completed and run.result.steps == task.horizon
            start = _qpos(task, task.draw(3, e).state)[cols]
            now = device.snapshot.qpos[cols]
            assert np.abs(start - task.start_qpos[cols]).max() > 0.3 * NOISE
            assert np.abs(now - start).max() < 0.1 * NOISE, (start, now)
    finally:
        device.close()
