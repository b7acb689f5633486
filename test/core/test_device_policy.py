"""A task and a policy on the real-time device (``tasks.device_runner``, sim_node's run_policy).

The lockstep episode must be the pool's episode of the same task, policy, seed and episode,
state for state: every control step's FULLPHYSICS row equal to ``reference.run_episode``'s
bit for bit (the time column excepted: the device's clock runs on from where it was), and
the result equal to ``evaluate``'s. Refused requests change nothing on the device; a stop
ends the run between control steps and leaves the device holding.
"""

import threading

import mujoco
import numpy as np
import pytest
import yaml

from mujoco_hal_ros import errors
from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.sim.device import Device
from mujoco_hal_ros.tasks import BUILTIN_DIR, evaluate, Task
from mujoco_hal_ros.tasks.device_runner import DevicePolicyRunner, run_on_device
from mujoco_hal_ros.tasks.reference import run_episode


def _task(name, **changes):
    with open(f'{BUILTIN_DIR}/{name}.yaml') as f:
        data = yaml.safe_load(f)
    data.update(changes)
    return Task.from_dict(data, f'{name}.yaml', BUILTIN_DIR)


def _cols(task, prefix):
    return next(slice(off, off + size) for label, off, size in task.observation_layout
                if label.startswith(prefix))


def pd_policy(task):
    """A PD law on the tip error (as test_policy_eval's): reach episodes end in success."""
    m = task.model
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, 'rest'))
    mujoco.mj_forward(m, d)
    jac = np.zeros((3, m.nv))
    mujoco.mj_jacSite(m, d, jac, None, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, 'tip'))
    gain = 0.3 * np.linalg.pinv(jac[:, :4]) / task.spec.action.scale
    w = np.zeros((task.obs_size, task.act_size))
    w[_cols(task, 'site_pos')] = -gain.T
    w[_cols(task, 'command')] = gain.T
    w[_cols(task, 'joint_vel')] = -0.02 * np.eye(4)
    return lambda obs: np.clip(obs @ w, -1.0, 1.0)


@pytest.fixture(scope='module')
def reach():
    return _task('reach', horizon=60)


@pytest.fixture
def dev():
    device = Device(real_time_factor=2.0)
    try:
        yield device
    finally:
        device.close()


def _state(device):
    """What a refused request must leave as it was (the device paused, so nothing moves)."""
    snap = device.snapshot
    return (device.generation, device.model, snap.qpos.copy(), snap.setpoint.copy(),
            snap.time, device.paused, len(device.audit()))


@pytest.mark.parametrize('policy', ['random', 'pd'])
def test_lockstep_episode_equals_the_pools_state_for_state(dev, reach, policy):
    pol = pd_policy(reach) if policy == 'pd' else policy
    report = evaluate(reach, pol, 3, 2, seed=4)
    results = set()
    for e in (0, 2):
        ref, rows = run_episode(reach, pol, 4, e, record=True)
        run = run_on_device(dev, reach, pol, seed=4, episode=e, record=True)
        assert run.completed and run.lockstep
        assert run.result.to_dict() == ref.to_dict() == report.episodes[e].to_dict()
        assert run.states.shape == rows.shape == (ref.steps + 1, rows.shape[1])
        # Bit for bit, qpos, qvel, act and the rest of FULLPHYSICS; time runs on.
        assert np.array_equal(run.states[:, 1:], rows[:, 1:])
        assert np.allclose(run.states[:, 0] - run.start_time, rows[:, 0], atol=1e-9)
        assert run.end_time == run.states[-1, 0]
        # Played again afterwards (it was playing), holding.
        assert dev.paused is False and not dev.snapshot.moving
        assert dev.audit('hold'), 'the run ends with the device holding'
        results.add((ref.success, ref.failure))
    if policy == 'pd':
        assert (True, None) in results, 'the PD law reaches: a success ends an episode'


def test_lockstep_leaves_the_final_state_on_a_paused_device(dev, reach):
    dev.pause(True)
    run = run_on_device(dev, reach, 'random', seed=1, episode=5, record=True)
    _, rows = run_episode(reach, 'random', 1, 5, record=True)
    snap = dev.snapshot
    assert dev.paused and snap.time == run.end_time
    nq = reach.model.nq
    assert np.array_equal(snap.qpos, rows[-1, 1:1 + nq])
    assert np.array_equal(snap.qvel, rows[-1, 1 + nq:1 + nq + reach.model.nv])
    # Holding: the last setpoints stay (no path runs) and the arm settles at them.
    dev.step(1000)
    held = dev.snapshot
    assert np.array_equal(held.setpoint, snap.setpoint) and not held.moving
    assert np.abs(held.qvel[:4]).max() < 0.05


@pytest.mark.parametrize('kw, code, words', [
    ({'task': 'no_such_task'}, errors.CONFIG_ERROR, 'no built-in task'),
    ({'policy': 'sometimes'}, errors.INVALID_ARGUMENT, 'unknown policy'),
    ({'policy': lambda obs: np.zeros((len(obs), 3))}, errors.INVALID_ARGUMENT, 'takes 4'),
    ({'policy': lambda obs: np.full((len(obs), 4), np.nan)}, errors.INVALID_ARGUMENT, 'NaN'),
    ({'seed': float('nan')}, errors.INVALID_ARGUMENT, 'seed'),
    ({'episode': float('nan')}, errors.INVALID_ARGUMENT, 'episode'),
    ({'episode': -1}, errors.INVALID_ARGUMENT, 'episode'),
    ({'lockstep': 'yes'}, errors.INVALID_ARGUMENT, 'lockstep'),
])
def test_bad_requests_are_refused_and_change_nothing(dev, reach, kw, code, words):
    dev.pause(True)
    before = _state(dev)
    args = dict(task=reach, policy='zero', seed=0, episode=0, lockstep=True)
    args.update(kw)
    with pytest.raises(DeviceError) as exc:
        DevicePolicyRunner(dev, args.pop('task'), args.pop('policy'), **args)
    assert exc.value.code == code and words in str(exc.value)
    after = _state(dev)
    assert after[0] == before[0] and after[1] is before[1]
    assert np.array_equal(after[2], before[2]) and np.array_equal(after[3], before[3])
    assert after[4:] == before[4:]


def test_lockstep_refused_on_a_gravity_compensated_device(reach):
    with Device(gravity_compensation=True, start_paused=True) as device:
        before = _state(device)
        with pytest.raises(DeviceError, match='gravity') as exc:
            DevicePolicyRunner(device, reach, 'zero')
        assert exc.value.code == errors.INVALID_ARGUMENT
        assert _state(device)[0] == before[0]


def test_stop_ends_the_run_between_control_steps_and_the_device_holds(dev, reach):
    runner = DevicePolicyRunner(dev, reach, 'random', seed=2, episode=1, record=True)
    seen = []

    def progress(steps, ret, t):
        seen.append(steps)
        if steps == 7:
            runner.stop()
    run = runner.run(progress)
    assert not run.completed and run.result.steps == 7 == seen[-1]
    assert run.result.failure == 'stopped' and not run.result.success
    _, rows = run_episode(reach, 'random', 2, 1, record=True)
    assert np.array_equal(run.states[:, 1:], rows[:8, 1:])      # as far as it went
    assert not dev.paused and not dev.snapshot.moving and dev.audit('hold')
    with pytest.raises(DeviceError, match='already ran'):
        runner.run()


def test_stepping_during_a_lockstep_episode_ends_it_preempted(dev, reach):
    runner = DevicePolicyRunner(dev, reach, 'zero')
    with pytest.raises(DeviceError) as exc:
        runner.run(lambda steps, ret, t: dev.step(1) and None)
    assert exc.value.code == errors.PREEMPTED and 'lockstep' in str(exc.value)
    assert not dev.paused and dev.audit('hold')


def test_real_time_episode_commands_the_goal_channels(dev, reach):
    task = _task('reach', horizon=10)
    goals0 = len(dev.audit('goals'))
    run = run_on_device(dev, task, 'random', seed=3, episode=0, lockstep=False)
    assert run.completed and not run.lockstep and run.result.steps == 10
    assert run.result.failure == 'horizon'
    assert run.end_time - run.start_time >= 10 * task.control_dt - 1e-9
    sent = dev.audit('goals')[goals0:]
    assert len(sent) == 10
    assert set(sent[0]['request']) == {'pan_goal', 'lift_goal', 'elbow_goal', 'wrist_goal'}


def test_real_time_stop_from_another_thread(dev, reach):
    runner = DevicePolicyRunner(dev, reach, 'zero', lockstep=False)
    box = {}
    thread = threading.Thread(target=lambda: box.update(run=runner.run(
        lambda steps, ret, t: steps < 3)))
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert box['run'].result.failure == 'stopped' and box['run'].result.steps == 3
    assert not dev.snapshot.moving


def test_progress_hears_the_last_step(dev, reach):
    seen = []
    run = run_on_device(dev, reach, pd_policy(reach), seed=0, episode=1,
                        progress=lambda steps, ret, t: seen.append((steps, ret)))
    assert seen and seen[-1] == (run.result.steps, run.result.ret)
    assert [s for s, _ in seen] == list(range(1, run.result.steps + 1))


def test_a_runner_stopped_before_it_runs_leaves_the_device_as_it_was(dev, reach):
    dev.pause(True)
    runner = DevicePolicyRunner(dev, reach, 'zero')
    runner.stop()
    before = _state(dev)
    run = runner.run()
    assert not run.completed and run.result.failure == 'stopped' and run.result.steps == 0
    after = _state(dev)
    assert after[0] == before[0] and after[1] is before[1] and after[4:] == before[4:]
