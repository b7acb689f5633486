"""Closed-loop policy evaluation on the pool (mujoco_hal_ros.tasks): tasks, policies, episodes.

What is asserted is behaviour a user relies on: an episode's outcome depends only on
(seed, episode), never on how many environments ran beside it; a hand-written PD controller
exported as ONNX reaches every target of the built-in ``reach`` task; a robot that does
nothing fails ``walk_forward`` and is told why; and a policy or task file that cannot work is
refused, naming the sizes or the key, before any environment is touched.
"""

import json
import os
import subprocess
import sys

import mujoco
import numpy as np
import pytest
import yaml

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.errors import DeviceError, InvalidArgument, UnknownName
from mujoco_hal_ros.tasks import (
    BUILTIN_DIR,
    evaluate,
    load_task,
    make_policy,
    Task,
    TaskError,
    wilson_interval,
)
from mujoco_hal_ros.tasks.cli import main as cli_main
from mujoco_hal_ros.tasks.task import Frame

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))


def _yaml(name):
    with open(os.path.join(BUILTIN_DIR, f'{name}.yaml'), encoding='utf-8') as f:
        return yaml.safe_load(f)


def _task(name, **changes):
    """A built-in task with top-level keys changed (a shorter horizon keeps tests quick)."""
    data = _yaml(name)
    data.update(changes)
    return Task.from_dict(data, f'{name}.yaml', BUILTIN_DIR)


def _need_go1():
    if menagerie.model_path('go1') is None:
        pytest.skip('Menagerie go1 not installed (pip install -r requirements-test.txt)')


def _results(report):
    return [e.to_dict() for e in report.episodes]


def _cols(task, prefix):
    for label, off, size in task.observation_layout:
        if label.startswith(prefix):
            return slice(off, off + size)
    raise KeyError(prefix)


def pd_weights(task):
    """A PD law on the tip error, linear in the observation: setpoint deltas through the
    Jacobian's pseudo-inverse at the rest pose, damped by the joint velocities."""
    m = task.model
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, 'rest'))
    mujoco.mj_forward(m, d)
    jac = np.zeros((3, m.nv))
    mujoco.mj_jacSite(m, d, jac, None, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, 'tip'))
    gain = 0.3 * np.linalg.pinv(jac[:, :4]) / task.spec.action.scale      # (4, 3)
    w = np.zeros((task.obs_size, task.act_size))
    w[_cols(task, 'site_pos')] = -gain.T
    w[_cols(task, 'command')] = gain.T
    w[_cols(task, 'joint_vel')] = -0.02 * np.eye(4)
    return w


@pytest.fixture(scope='module')
def reach():
    return _task('reach', horizon=40)


@pytest.fixture(scope='module')
def pd_onnx(tmp_path_factory, reach):
    pytest.importorskip('onnx', reason='the onnx package builds the test policy')
    pytest.importorskip('onnxruntime', reason='ONNX policies need onnxruntime')
    from mujoco_hal_ros.tasks import onnx_models
    path = str(tmp_path_factory.mktemp('policies') / 'pd.onnx')
    return onnx_models.linear(pd_weights(reach), path, clip=1.0)


# --------------------------------------------------------------------------- invariance
def test_batch_invariance_envs_1_8_64(reach):
    """64 episodes of different lengths, so environments are reset at different steps; a
    plain NumPy ``obs @ w`` policy (one BLAS call per control step) as users write them."""
    w = pd_weights(reach)
    policy = (lambda obs: np.clip(0.5 * obs @ w, -1, 1))
    runs = [_results(evaluate(reach, policy, 64, envs, seed=7)) for envs in (1, 8, 64)]
    assert runs[0] == runs[1] == runs[2]
    steps = {r['steps'] for r in runs[0]}
    assert len(steps) > 3, 'episodes should end at different steps (sparse resets)'
    assert [r['episode'] for r in runs[0]] == list(range(64))


def test_batch_invariance_random_policy_on_go1():
    _need_go1()
    task = _task('walk_forward', horizon=60)
    runs = [_results(evaluate(task, 'random', 12, envs, seed=3)) for envs in (1, 5, 12)]
    assert runs[0] == runs[1] == runs[2]


def test_batch_invariance_onnx(reach, pd_onnx):
    runs = [_results(evaluate(reach, pd_onnx, 16, envs, seed=1)) for envs in (1, 16)]
    assert runs[0] == runs[1]


def test_reproducible_and_seed_dependent(reach):
    a = _results(evaluate(reach, 'random', 6, 3, seed=11))
    b = _results(evaluate(reach, 'random', 6, 3, seed=11))
    c = _results(evaluate(reach, 'random', 6, 3, seed=12))
    assert a == b
    assert [r['return'] for r in a] != [r['return'] for r in c]


def test_episode_draws_depend_only_on_seed_and_episode(reach):
    d1, d2 = reach.draw(5, 3), reach.draw(5, 3)
    assert np.array_equal(d1.state, d2.state) and np.array_equal(d1.command, d2.command)
    assert all(np.array_equal(d1.patch[k], d2.patch[k]) for k in d1.patch)
    other = reach.draw(5, 4)
    assert not np.array_equal(d1.command, other.command)
    low, high = np.array([0.14, -0.06, 0.03]), np.array([0.20, 0.06, 0.09])
    for e in range(50):
        cmd = reach.draw(0, e).command
        assert np.all(cmd >= low) and np.all(cmd <= high)


# --------------------------------------------------------------------------- outcomes
def test_pd_onnx_succeeds_on_every_reach_episode(pd_onnx):
    task = load_task('reach')
    report = evaluate(task, pd_onnx, 24, 8, seed=0)
    assert len(report.episodes) == 24
    assert all(e.success and e.failure is None and e.ended_by == 'at_target'
               for e in report.episodes), _results(report)
    assert report.success_rate == 1.0
    lo, hi = report.interval
    assert 0.85 < lo < 1.0 and hi == 1.0
    assert all(e.steps < task.horizon for e in report.episodes)


def test_zero_fails_walk_forward_every_episode_by_name():
    """Standing still never gets past 2 m: every episode fails at the horizon, said so."""
    _need_go1()
    task = load_task('walk_forward')
    report = evaluate(task, 'zero', 4, 4, seed=0)
    assert report.success_rate == 0.0
    for e in report.episodes:
        assert not e.success
        assert e.failure == 'horizon' and e.steps == task.horizon


def test_falling_is_reported_by_its_predicate():
    """A random policy knocks Go1 over: episodes end early, named tipped or fallen."""
    _need_go1()
    task = _task('walk_forward', horizon=300)
    report = evaluate(task, 'random', 4, 4, seed=0)
    for e in report.episodes:
        assert not e.success
        assert e.failure in task.failure_names and e.steps < task.horizon


def test_contact_predicate_names_the_table_hit(reach):
    """Tilting the lift joint forward drives the hand into the table: 'hit_table'."""
    down = np.array([0.0, 1.0, 0.0, 0.0])
    report = evaluate(reach, lambda obs: np.tile(down, (len(obs), 1)), 3, 3)
    for e in report.episodes:
        assert e.failure == 'hit_table' and e.ended_by == 'hit_table' and e.steps < 40


def test_task_without_success_predicates_succeeds_by_lasting(reach):
    data = _yaml('reach')
    data.pop('success')
    data['reward'].pop('reached')
    data['horizon'] = 5
    task = Task.from_dict(data, 'survive.yaml', BUILTIN_DIR)
    report = evaluate(task, 'zero', 3, 3)
    assert all(e.success and e.failure is None and e.steps == 5 for e in report.episodes)


def test_returns_add_up_the_weighted_terms():
    """Zero actions on reach: reward per step = -tip distance after it (no effort, no bonus)."""
    dists = []

    def spy(obs):
        task = spy.task
        tip, target = obs[:, _cols(task, 'site_pos')], obs[:, _cols(task, 'command')]
        dists.append(float(np.linalg.norm(tip - target, axis=1)[0]))
        return np.zeros((len(obs), task.act_size))

    spy.task = _task('reach', horizon=3)
    evaluate(spy.task, spy, 1, 1)              # sees the distances at steps 0, 1 and 2
    seen = list(dists[-3:])
    two = evaluate(_task('reach', horizon=2), 'zero', 1, 1).episodes[0]
    assert two.steps == 2
    assert np.isclose(two.ret, -(seen[1] + seen[2]), rtol=0, atol=1e-12)


def test_wilson_interval():
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and abs(hi - 0.2775) < 1e-3
    lo, hi = wilson_interval(10, 10)
    assert abs(lo - 0.7225) < 1e-3 and hi == 1.0
    lo, hi = wilson_interval(50, 100)
    assert abs(lo - 0.4038) < 1e-3 and abs(hi - 0.5962) < 1e-3


# --------------------------------------------------------------------------- observations
def test_observation_layout_matches_mujoco(reach):
    """The tip position the policy sees is MuJoCo's site position at that state."""
    m = reach.model
    d = mujoco.MjData(m)
    draw = reach.draw(0, 0)
    mujoco.mj_setState(m, d, draw.state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    mujoco.mj_forward(m, d)
    frame = Frame(d.qpos[None].copy(), d.qvel[None].copy(), d.sensordata[None].copy(),
                  draw.command[None], np.zeros((1, 4)), np.zeros((1, 4)))
    obs = reach.observe(frame)[0]
    assert obs.shape == (reach.obs_size,) == (18,)
    tip = d.site('tip').xpos
    assert np.allclose(obs[_cols(reach, 'site_pos')], tip)
    assert np.allclose(obs[_cols(reach, 'command')], draw.command)
    jids = [m.joint(n).qposadr[0] for n in ('pan', 'lift', 'elbow', 'wrist')]
    assert np.allclose(obs[_cols(reach, 'joint_pos')], d.qpos[jids])
    assert [label for label, _, _ in reach.observation_layout] == [
        'joint_pos[pan,lift,elbow,wrist]', 'joint_vel[pan,lift,elbow,wrist]',
        'site_pos[tip,world]', 'command[target]', 'last_action']


def test_go1_observations_in_the_trunk_frame():
    _need_go1()
    task = load_task('walk_forward')
    m = task.model
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    d.qpos[3:7] = [np.cos(0.3), 0, 0, np.sin(0.3)]     # yawed 0.6 rad
    d.qvel[0:3] = [1.0, 0.0, 0.0]                      # moving along world x
    mujoco.mj_forward(m, d)
    frame = Frame(d.qpos[None].copy(), d.qvel[None].copy(), d.sensordata[None].copy(),
                  np.zeros((1, 2)), np.zeros((1, 12)), np.zeros((1, 12)))
    obs = task.observe(frame)[0]
    assert np.allclose(obs[_cols(task, 'gravity')], [0, 0, -1], atol=1e-9)
    assert np.allclose(obs[_cols(task, 'body_linvel')], [np.cos(0.6), -np.sin(0.6), 0],
                       atol=1e-6)
    assert np.allclose(obs[_cols(task, 'joint_pos')], 0.0)     # relative to home


# --------------------------------------------------------------------------- refusals
def _pool_untouched(task, fn):
    """Run ``fn(pool)``, which must raise; the pool's state must be exactly as before."""
    with task.make_pool(4) as pool:
        pool.step(3)
        before = pool.get_state(full=True).copy()
        with pytest.raises(DeviceError) as info:
            fn(pool)
        assert np.array_equal(pool.get_state(full=True), before)
    return info.value


def test_wrong_onnx_input_size_refused_naming_sizes(reach, tmp_path):
    pytest.importorskip('onnxruntime')
    pytest.importorskip('onnx', reason='the onnx package builds the test policy')
    from mujoco_hal_ros.tasks import onnx_models
    path = onnx_models.linear(np.zeros((17, 4)), str(tmp_path / 'small.onnx'))
    err = _pool_untouched(reach, lambda pool: evaluate(reach, path, 4, pool=pool))
    assert isinstance(err, InvalidArgument)
    assert '17' in str(err) and '18' in str(err) and err.where == 'policy'


def test_wrong_onnx_output_size_refused_naming_sizes(reach, tmp_path):
    pytest.importorskip('onnxruntime')
    pytest.importorskip('onnx', reason='the onnx package builds the test policy')
    from mujoco_hal_ros.tasks import onnx_models
    path = onnx_models.linear(np.zeros((18, 3)), str(tmp_path / 'narrow.onnx'))
    err = _pool_untouched(reach, lambda pool: evaluate(reach, path, 4, pool=pool))
    assert 'outputs 3 actions' in str(err) and 'takes 4' in str(err)


@pytest.mark.parametrize('fn, words', [
    (lambda obs: np.zeros((len(obs), 5)), ['5 actions', 'takes 4']),
    (lambda obs: np.zeros(4), ['shape (4,)']),
    (lambda obs: np.full((len(obs), 4), np.nan), ['NaN']),
    (lambda obs: np.zeros((len(obs), 4), dtype=bool), ['bool']),
    (lambda obs: obs[:, 99], ['raised', 'IndexError']),
])
def test_bad_callable_policies_refused_before_running(reach, fn, words):
    err = _pool_untouched(reach, lambda pool: evaluate(reach, fn, 4, pool=pool))
    for w in words:
        assert w in str(err)


@pytest.mark.parametrize('policy, words', [
    ('nosuch_module_xyz:f', ['cannot import']),
    ('os:no_such_attr', ['no attribute']),
    ('missing.onnx', ['no such file']),
    ('sometimes', ['unknown policy']),
])
def test_bad_policy_names_refused(reach, policy, words):
    if policy.endswith('.onnx'):
        pytest.importorskip('onnxruntime')
    with pytest.raises(InvalidArgument) as info:
        make_policy(policy, reach)
    for w in words:
        assert w in str(info.value)


def test_module_attr_policy_loads_from_the_current_directory(reach, tmp_path, monkeypatch):
    (tmp_path / 'my_policies_27.py').write_text(
        'import numpy as np\n'
        'def still(obs):\n    return np.zeros((len(obs), 4))\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    report = evaluate(_task('reach', horizon=3), 'my_policies_27:still', 2, 2)
    assert report.policy == 'my_policies_27:still' and len(report.episodes) == 2


@pytest.mark.parametrize('edit, where', [
    (lambda d: d.update(horizn=5), 'horizn'),
    (lambda d: d.update(horizon=True), 'horizon'),
    (lambda d: d.update(horizon=0), 'horizon'),
    (lambda d: d.pop('action'), 'action'),
    (lambda d: d['action'].update(decimation=2.5), 'action.decimation'),
    (lambda d: d['action'].update(mode='relative'), 'action.mode'),
    (lambda d: d['action'].update(scale=float('nan')), 'action.scale'),
    (lambda d: d['action'].update(actuators=['pan', 'shoulder']), 'action.actuators[1]'),
    (lambda d: d['observation'].append({'joint_pos': ['pan', 'knee']}),
     'observation[5].joint_pos.joints[1]'),
    (lambda d: d['observation'].append({'velocity': {}}), 'observation[5].velocity'),
    (lambda d: d['observation'].append({'site_pos': {'site': 'tip', 'frame': 'hand'}}),
     'observation[5].site_pos.frame'),
    (lambda d: d['command']['target']['uniform'].update(high=[0.2, 0.06]),
     'command.target.uniform.high'),
    (lambda d: d['command']['target']['uniform'].update(low=[0.3, 0, 0]),
     'command.target.uniform'),
    (lambda d: d['success']['at_target']['near_command'].update(distance=-1),
     'success.at_target.near_command.distance'),
    (lambda d: d['success']['at_target']['near_command'].update(command='goal'),
     'success.at_target.near_command.command'),
    (lambda d: d['failure'].update(horizon={'height_below': {'site': 'tip', 'z': 0}}),
     'horizon'),
    (lambda d: d['failure']['hit_table']['contact'].update(geom2='floor'),
     'failure.hit_table.contact.geom2'),
    (lambda d: d['reward']['distance'].update(weight='high'), 'reward.distance.weight'),
    (lambda d: d['reward']['reached']['predicate'].update(name='done'),
     'reward.reached.predicate.name'),
    (lambda d: d['reset']['fields'].update(body_color={'scale': [1, 2]}),
     'reset.fields.body_color'),
    (lambda d: d['reset']['joint_noise'].update(qpos=float('inf')), 'reset.joint_noise.qpos'),
    (lambda d: d['reset']['bodies'].update(base={'x': [0, 1]}), 'reset.bodies.base'),
    (lambda d: d.update(start={'keyframe': 'sitting'}), 'start.keyframe'),
    (lambda d: d.update(start={'qpos': [0, 0]}), 'start.qpos'),
    (lambda d: d.update(model='no_such_robot.xml'), 'model'),
    (lambda d: d.update(video={'camera': 'side'}), 'video.camera'),
    (lambda d: d.update(base='tabletop'), 'base'),
    (lambda d: d['observation'].append('last_actions'), 'observation[5].last_actions'),
    (lambda d: d['observation'].append({'body_pos': {'body': 'block', 'frame': 'base'},
                                        'site_pos': 'tip'}), 'observation[5]'),
])
def test_bad_task_files_refused_naming_the_key(tmp_path, edit, where):
    data = _yaml('reach')
    edit(data)
    path = tmp_path / 'bad.yaml'
    path.write_text(yaml.safe_dump(data))
    with pytest.raises((TaskError, UnknownName)) as info:
        Task.from_file(str(path))
    assert info.value.where.startswith('bad.yaml: '), info.value.where
    assert info.value.where.endswith(where), (info.value.where, str(info.value))


def test_task_file_that_is_not_yaml_refused(tmp_path):
    path = tmp_path / 'broken.yaml'
    path.write_text('name: [unclosed\n')
    with pytest.raises(TaskError) as info:
        load_task(str(path))
    assert 'broken.yaml' in str(info.value)
    with pytest.raises(TaskError):
        load_task('no_such_task')


def test_bad_evaluate_arguments_refused(reach):
    for kw in ({'episodes': 0}, {'episodes': True}, {'envs': 0}, {'seed': -1},
               {'seed': 1.5}):
        args = {'episodes': 2, 'envs': 2, 'seed': 0, **kw}
        with pytest.raises(InvalidArgument):
            evaluate(reach, 'zero', **args)


def test_pool_of_another_model_refused(reach):
    from mujoco_hal_ros.pool import EnvPool
    other = mujoco.MjModel.from_xml_path(menagerie.bench_arm_path())   # no task sensors
    with EnvPool(other, 2) as pool:
        with pytest.raises(InvalidArgument) as info:
            evaluate(reach, 'zero', 2, pool=pool)
    assert 'task.make_pool' in str(info.value)


# --------------------------------------------------------------------------- pools, cli, video
def test_given_pool_and_cancel_between_control_steps(reach):
    calls = []

    def progress(done, total):
        calls.append((done, total))
        return len(calls) < 5

    with reach.make_pool(4) as pool:
        report = evaluate(reach, 'zero', 8, pool=pool, progress=progress)
    assert not report.completed and len(calls) == 5
    assert report.env_steps == 5 * 4


def test_cli_json_is_all_of_stdout(capsys):
    """``--json | jq`` works: stdout is the one JSON object; the progress lines (one per
    episode and the summary) went to stderr."""
    code = cli_main(['--task', 'reach', '--policy', 'random', '--episodes', '3', '--envs', '2',
                     '--seed', '4', '--json'])
    assert code == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert 'episode 0:' in captured.err and 'episode 2:' in captured.err
    assert out['task'] == 'reach' and out['episodes'] == 3
    assert 0.0 <= out['success_rate'] <= 1.0 and out['env_steps_per_s'] > 0
    assert [r['episode'] for r in out['episode_results']] == [0, 1, 2]
    for r in out['episode_results']:
        assert set(r) >= {'episode', 'success', 'failure', 'return', 'steps'}


def test_cli_refusal_exits_2_with_json_error(capsys, tmp_path):
    bad = tmp_path / 'bad.yaml'
    data = _yaml('reach')
    data['action']['mode'] = 'sideways'
    bad.write_text(yaml.safe_dump(data))
    code = cli_main(['--task', str(bad), '--policy', 'zero', '--json'])
    captured = capsys.readouterr()
    assert code == 2
    err = json.loads(captured.out)['error']
    assert err['code'] == 'CONFIG_ERROR' and err['where'].endswith('action.mode')
    assert 'action.mode' in captured.err


def test_installed_executable_runs():
    """The script `ros2 run mujoco_hal_ros evaluate_policy` starts (source or install)."""
    script = os.path.join(ROOT, 'scripts', 'evaluate_policy')
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(filter(None, [ROOT, env.get('PYTHONPATH')]))
    out = subprocess.run([sys.executable, script, '--task', 'reach', '--policy', 'zero',
                          '--episodes', '2', '--json'], capture_output=True, text=True,
                         timeout=240, env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)['episodes'] == 2          # stdout: the JSON object alone


def test_video_of_a_chosen_episode(tmp_path):
    av = pytest.importorskip('av', reason='video needs PyAV')
    from mujoco_hal_ros.tasks.video import write_videos
    task = _task('reach', horizon=6)
    report = evaluate(task, 'random', 3, 2, seed=0, record=[2])
    try:
        paths = write_videos(task, report, str(tmp_path))
    except DeviceError as err:
        pytest.skip(f'no OpenGL here: {err}')
    assert list(paths) == [2]
    with av.open(paths[2]) as c:
        frames = [f.to_ndarray(format='rgb24') for f in c.decode(video=0)]
    assert len(frames) == report.episodes[2].steps + 1
    assert frames[0].std() > 5          # a scene, not a blank frame


def test_frame_rotations_match_mujoco():
    from mujoco_hal_ros.tasks.task import gravity_in_frame, quat_rotate_inv, tilt
    rng = np.random.default_rng(0)
    q = rng.standard_normal((20, 4))
    q /= np.linalg.norm(q, axis=1)[:, None]
    v = rng.standard_normal((20, 3))
    mats = []
    for qi in q:
        mat = np.zeros(9)
        mujoco.mju_quat2Mat(mat, qi)
        mats.append(mat.reshape(3, 3))
    assert np.allclose(quat_rotate_inv(q, v), [m.T @ x for m, x in zip(mats, v, strict=True)])
    assert np.allclose(gravity_in_frame(q), [m.T @ [0, 0, -1] for m in mats])
    assert np.allclose(tilt(q), [np.arccos(np.clip(m[2, 2], -1, 1)) for m in mats])


def test_every_frame_observation_matches_mujoco():
    """Poses and velocities in world and base frames against MjData, on a yawed, moving Go1."""
    _need_go1()
    data = _yaml('walk_forward')
    data['observation'] = [
        {'body_pos': {'body': 'FR_calf', 'frame': 'base'}},
        {'body_quat': {'body': 'FR_calf', 'frame': 'world'}},
        {'site_pos': {'site': 'head', 'frame': 'world'}},
        {'site_quat': {'site': 'head', 'frame': 'base'}},
        {'body_angvel': {'body': 'trunk', 'frame': 'world'}},
        {'body_linvel': {'body': 'FR_calf', 'frame': 'world'}},
        {'body_pos': 'trunk'}]
    task = Task.from_dict(data, 'frames.yaml', BUILTIN_DIR)
    m = task.model
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    d.qpos[:3] = [0.4, -0.2, 0.35]
    d.qpos[3:7] = [np.cos(0.4), 0.1, 0.05, np.sin(0.4)]
    d.qpos[3:7] /= np.linalg.norm(d.qpos[3:7])
    d.qvel[:] = np.random.default_rng(1).standard_normal(m.nv)
    mujoco.mj_forward(m, d)
    obs = task.observe(Frame(d.qpos[None].copy(), d.qvel[None].copy(),
                             d.sensordata[None].copy(), np.zeros((1, 2)),
                             np.zeros((1, 12)), np.zeros((1, 12))))[0]
    trunk, calf = m.body('trunk').id, m.body('FR_calf').id
    rot = d.xmat[trunk].reshape(3, 3)
    head = m.site('head').id
    vel = np.zeros(6)
    at = 0

    def take(size):
        nonlocal at
        at += size
        return obs[at - size:at]

    assert np.allclose(take(3), rot.T @ (d.xpos[calf] - d.xpos[trunk]))
    q = take(4)
    assert np.allclose(q, d.xquat[calf]) or np.allclose(q, -d.xquat[calf])
    assert np.allclose(take(3), d.site_xpos[head])
    rel = np.zeros(4)
    site_q = np.zeros(4)
    mujoco.mju_mat2Quat(site_q, d.site_xmat[head])
    neg = np.zeros(4)
    mujoco.mju_negQuat(neg, d.xquat[trunk])
    mujoco.mju_mulQuat(rel, neg, site_q)
    q = take(4)
    assert np.allclose(q, rel) or np.allclose(q, -rel)
    mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, trunk, vel, 0)
    assert np.allclose(take(3), vel[:3])
    mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, calf, vel, 0)
    assert np.allclose(take(3), vel[3:])
    assert np.allclose(take(3), d.xpos[trunk])
    assert at == task.obs_size


def test_model_sensors_by_name(tmp_path):
    """A model's own sensors keep their addresses; the task's come after them."""
    with open(menagerie.bench_arm_path(), encoding='utf-8') as f:
        xml = f.read()
    xml = xml.replace('</mujoco>', '<sensor><jointpos name="pan_angle" joint="pan"/>'
                      '<framepos name="tip_pos" objtype="site" objname="tip"/></sensor>'
                      '</mujoco>')
    (tmp_path / 'arm.xml').write_text(xml)
    data = _yaml('reach')
    data['model'] = 'arm.xml'
    data['observation'] = [{'sensor': ['tip_pos', 'pan_angle']}, {'site_pos': 'tip'}]
    (tmp_path / 'task.yaml').write_text(yaml.safe_dump(data))
    task = load_task(str(tmp_path / 'task.yaml'))
    assert task.model.sensor('pan_angle').adr[0] == 0
    m = task.model
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    d.qpos[0] = 0.3
    mujoco.mj_forward(m, d)
    obs = task.observe(Frame(d.qpos[None], d.qvel[None], d.sensordata[None],
                             np.zeros((1, 3)), np.zeros((1, 4)), np.zeros((1, 4))))[0]
    assert np.allclose(obs[:3], d.site('tip').xpos) and obs[3] == 0.3
    assert np.allclose(obs[4:7], d.site('tip').xpos)
    data['observation'] = [{'sensor': ['tip_position']}]
    (tmp_path / 'bad.yaml').write_text(yaml.safe_dump(data))
    with pytest.raises(UnknownName) as info:
        load_task(str(tmp_path / 'bad.yaml'))
    assert info.value.where == 'bad.yaml: observation[0].sensor.names[0]'


def test_appended_sensors_do_not_change_the_episodes():
    """walk_forward reads its trunk from qpos/qvel and steps without sensors; adding a
    sensor-backed observation makes the pool compute sensors, and nothing else changes."""
    _need_go1()
    plain = _task('walk_forward', horizon=30)
    data = _yaml('walk_forward')
    data['horizon'] = 30
    data['observation'] = data['observation'] + [{'site_pos': 'imu'}]
    sensed = Task.from_dict(data, 'sensed.yaml', BUILTIN_DIR)
    assert not plain.uses_sensordata and sensed.uses_sensordata
    assert sensed.model.nsensordata == 3 and plain.model.nsensordata == 0
    a = _results(evaluate(plain, 'zero', 3, 3, seed=2))
    b = _results(evaluate(sensed, 'zero', 3, 3, seed=2))
    assert a == b


def test_task_from_python_records_equals_the_file():
    """The reach task written as TaskSpec records runs the same episodes as reach.yaml."""
    from mujoco_hal_ros.tasks import TaskSpec
    from mujoco_hal_ros.tasks.spec import ActionSpec, CommandTerm, FieldTerm, Term
    joints = ('pan', 'lift', 'elbow', 'wrist')
    spec = TaskSpec(
        name='reach', model='bench_arm', keyframe='rest', base='base', horizon=40,
        commands=[CommandTerm('target', (0.14, -0.06, 0.03), (0.20, 0.06, 0.09))],
        joint_noise={'joints': joints, 'qpos': 0.05, 'qvel': 0.0},
        bodies={'block': {'x': (0.12, 0.22), 'y': (0.10, 0.16), 'yaw': (-3.14159, 3.14159)}},
        fields=[FieldTerm('dof_damping', joints, (0.8, 1.2), None, None)],
        observation=[Term('joint_pos', 'joint_pos', {'joints': joints}),
                     Term('joint_vel', 'joint_vel', {'joints': joints}),
                     Term('site_pos', 'site_pos', {'site': 'tip'}),
                     Term('command', 'command', {'names': ['target']}),
                     Term('last_action', 'last_action', {})],
        action=ActionSpec(joints, mode='delta', units='channel', scale=0.05, decimation=10),
        success=[Term('at_target', 'near_command',
                      {'site': 'tip', 'command': 'target', 'distance': 0.01})],
        failure=[Term('hit_table', 'contact', {'geom1': 'hand_geom', 'geom2': 'table'})],
        reward=[Term('distance', 'distance_to_command', {'site': 'tip', 'command': 'target'},
                     -1.0),
                Term('reached', 'predicate', {'name': 'at_target'}, 10.0),
                Term('effort', 'action_l2', {}, -0.01)])
    task = Task(spec)
    assert task.observation_layout == _task('reach', horizon=40).observation_layout
    a = _results(evaluate(task, 'random', 4, 2, seed=5))
    b = _results(evaluate(_task('reach', horizon=40), 'random', 4, 2, seed=5))
    assert a == b
    bad = TaskSpec(name='x', model='bench_arm', horizon=5,
                   observation=[Term('j', 'joint_pos', {'joints': ['pan'], 'rel': True})],
                   action=ActionSpec(None, decimation=1), source='my_task')
    with pytest.raises(TaskError) as info:
        Task(bad)
    assert info.value.where == 'my_task: observation[0].joint_pos.rel'


@pytest.mark.parametrize('name, policy, horizon', [
    ('reach', 'random', 30), ('walk_forward', 'random', 120)])
def test_pool_episodes_equal_a_plain_mujoco_loop_state_for_state(name, policy, horizon):
    """The serial reference (one MjData, the model patched per episode, mj_step) gives the
    same results and the same physics rows at every control step as the pool."""
    if name == 'walk_forward':
        _need_go1()
    from mujoco_hal_ros.tasks.reference import run_episode
    task = _task(name, horizon=horizon)
    report = evaluate(task, policy, 4, 3, seed=6, record=[0, 1, 2, 3])
    for e in range(4):
        ref, rows = run_episode(task, policy, 6, e, record=True)
        assert ref.to_dict() == report.episodes[e].to_dict()
        assert np.array_equal(rows, report.states[e])
