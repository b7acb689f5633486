"""Aim at anything: frames of the task's own, and contacts by geom, body or body subtree.

Menagerie's Panda has no sites and no named collision geoms but the floor; a task adds a
fingertip point (``frames``) and asks whether any geom of the hand's subtree touches the
floor (``contact: {subtree1: hand, geom2: floor}``). Checked against independent
measurements on a plain MjData of the zoo's own file: the point by forward kinematics of the
hand body, the contacts from MuJoCo's contact list, over random configurations.
"""

import os

import mujoco
import numpy as np
import pytest
import yaml

from mujoco_hal_ros.conformance import zoo
from mujoco_hal_ros.errors import UnknownName
from mujoco_hal_ros.tasks import cli, evaluate, load_task, parse, Task, TaskError
from mujoco_hal_ros.tasks.reference import run_episode
from mujoco_hal_ros.tasks.task import Frame

TIP = [0.0, 0.0, 0.1034]        # Panda: the fingertips' centre, in the hand body's frame


def _panda():
    zm = zoo.by_name('panda')
    if zm.path is None:
        pytest.skip(zm.missing)
    return zm.path


def _task(path, **keys):
    data = {'name': 'aim', 'model': path, 'start': {'keyframe': 'home'}, 'horizon': 10,
            'observation': ['last_action'], 'action': {'decimation': 10}}
    data.update(keys)
    return Task.from_dict(data, 'aim.yaml')


def _frame(task, d):
    return Frame(d.qpos[None].copy(), d.qvel[None].copy(), d.sensordata[None].copy(),
                 np.zeros((1, task.command_size)), np.zeros((1, task.act_size)),
                 np.zeros((1, task.act_size)))


def _configurations(m, n, seed=0):
    lo, hi = m.jnt_range[:, 0], m.jnt_range[:, 1]
    return np.random.default_rng(seed).uniform(lo, hi, (n, m.nq))


def test_a_frame_of_the_tasks_own_is_where_forward_kinematics_puts_it():
    path = _panda()
    task = _task(path, frames={'fingertip': {'body': 'hand', 'pos': TIP}},
                 observation=[{'site_pos': 'fingertip'}, {'site_pos': {'site': 'fingertip',
                                                                       'frame': 'base'}}],
                 base='link0')
    m, d = task.model, mujoco.MjData(task.model)
    m0 = mujoco.MjModel.from_xml_path(path)
    d0 = mujoco.MjData(m0)
    hand, base = m0.body('hand').id, m0.body('link0').id
    for q in _configurations(m0, 50):
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        obs = task.observe(_frame(task, d))[0]
        d0.qpos[:] = q
        mujoco.mj_kinematics(m0, d0)
        tip = d0.xpos[hand] + d0.xmat[hand].reshape(3, 3) @ TIP
        in_base = d0.xmat[base].reshape(3, 3).T @ (tip - d0.xpos[base])
        assert np.allclose(obs[:3], tip, atol=1e-12)
        assert np.allclose(obs[3:], in_base, atol=1e-12)


def test_frames_and_task_sensors_leave_the_physics_as_it_was():
    path = _panda()
    task = _task(path, frames={'fingertip': {'body': 'hand', 'pos': TIP}},
                 observation=[{'site_pos': 'fingertip'}],
                 failure={'touch': {'contact': {'subtree1': 'hand', 'geom2': 'floor'}}})
    m0 = mujoco.MjModel.from_xml_path(path)
    datas = [mujoco.MjData(task.model), mujoco.MjData(m0)]
    for m, d in zip((task.model, m0), datas, strict=True):
        mujoco.mj_resetDataKeyframe(m, d, 0)
        d.ctrl[:] = m0.key_ctrl[0] + 0.3
        mujoco.mj_step(m, d, 300)
    assert np.array_equal(datas[0].qpos, datas[1].qpos)
    assert np.array_equal(datas[0].qvel, datas[1].qvel)


def _touching(m, d, side1, side2):
    """Whether a contact in MuJoCo's list joins a geom of ``side1`` and one of ``side2``
    (sets of geom ids; None: any geom)."""
    for c in d.contact[:d.ncon]:
        for a, b in ((c.geom1, c.geom2), (c.geom2, c.geom1)):
            if a in side1 and (side2 is None or b in side2):
                return True
    return False


def _geoms_of(m, bodies):
    return {g for g in range(m.ngeom) if m.geom_bodyid[g] in bodies}


def _subtree(m, top):
    return {b for b in range(m.nbody) if b == top or _below(m, b, top)}


def _below(m, b, top):
    while b > 0:
        b = m.body_parentid[b]
        if b == top:
            return True
    return False


@pytest.mark.parametrize('args', [
    {'subtree1': 'hand', 'geom2': 'floor'},         # any geom of the hand's subtree
    {'body1': 'left_finger', 'body2': 'world'},     # an unnamed finger geom, by its body
    {'subtree1': 'link5'},                          # the second side left out: anything
])
def test_contact_by_geom_body_or_subtree_matches_mujocos_contact_list(args):
    path = _panda()
    task = _task(path, failure={'touch': {'contact': args}})
    m0 = mujoco.MjModel.from_xml_path(path)
    d0 = mujoco.MjData(m0)

    def side(k):
        kind, name = next(((kind, args[kind + k]) for kind in ('geom', 'body', 'subtree')
                           if kind + k in args), (None, None))
        if kind is None:
            return None
        if kind == 'geom':
            return {m0.geom(name).id}
        bid = m0.body(name).id
        return _geoms_of(m0, _subtree(m0, bid) if kind == 'subtree' else {bid})

    side1, side2 = side('1'), side('2')
    d = mujoco.MjData(task.model)
    seen = set()
    for q in _configurations(m0, 300, seed=1):
        d.qpos[:] = q
        mujoco.mj_forward(task.model, d)
        _, fail = task.predicates(_frame(task, d))
        d0.qpos[:] = q
        mujoco.mj_forward(m0, d0)
        expected = _touching(m0, d0, side1, side2)
        assert (fail[0] == 0) == expected, q
        seen.add(expected)
    assert seen == {True, False}, 'the configurations include touching and free ones'


def test_a_fingertip_task_runs_on_the_pool_as_on_one_mjdata():
    path = _panda()
    task = _task(path, horizon=20,
                 frames={'fingertip': {'body': 'hand', 'pos': TIP}},
                 reset={'joint_noise': {'joints': [f'joint{i}' for i in range(1, 8)],
                                        'qpos': 0.1}},
                 observation=[{'joint_pos': 'all'}, {'site_pos': 'fingertip'}, 'last_action'],
                 action={'actuators': [f'actuator{i}' for i in range(1, 8)], 'mode': 'delta',
                         'units': 'channel', 'scale': 0.1, 'decimation': 10},
                 failure={'fingers_on_floor': {'contact': {'subtree1': 'hand',
                                                           'geom2': 'floor'}},
                          'tip_low': {'height_below': {'site': 'fingertip', 'z': 0.05}}})
    report = evaluate(task, 'random', 3, 2, seed=5, record=range(3))
    for e in range(3):
        ref, rows = run_episode(task, 'random', 5, e, record=True)
        assert ref.to_dict() == report.episode_results[e].to_dict()
        assert np.array_equal(rows, report.states[e])


@pytest.mark.parametrize('keys, where, words', [
    ({'frames': {'tip': {'body': 'palm'}}}, 'aim.yaml: frames.tip.body', 'unknown body'),
    ({'frames': {'tip': {'body': 'hand', 'pos': [0, 0]}}}, 'aim.yaml: frames.tip.pos',
     'has 2 numbers'),
    ({'frames': {'tip': {'body': 'hand', 'quat': [0, 0, 0, 0]}}}, 'aim.yaml: frames.tip.quat',
     'all zeros'),
    ({'frames': {'tip': {'pos': [0, 0, 0.1]}}}, 'aim.yaml: frames.tip.body', 'required'),
    ({'failure': {'t': {'contact': {'geom1': 'floor', 'subtree1': 'hand'}}}},
     'aim.yaml: failure.t.contact', 'exactly one of geom1, body1, subtree1'),
    ({'failure': {'t': {'contact': {'geom2': 'floor'}}}}, 'aim.yaml: failure.t.contact',
     'exactly one of'),
    ({'failure': {'t': {'contact': {'subtree1': 'hnd'}}}}, 'aim.yaml: failure.t.contact.subtree1',
     'unknown body'),
])
def test_bad_frames_and_contacts_are_refused_naming_the_key(keys, where, words):
    path = _panda()
    with pytest.raises((TaskError, UnknownName)) as exc:
        _task(path, **keys)
    assert exc.value.where == where and words in str(exc.value), str(exc.value)


def test_a_frame_may_not_take_a_sites_name():
    zm = zoo.by_name('ur5e')
    if zm.path is None:
        pytest.skip(zm.missing)
    with pytest.raises(TaskError, match='already has a site') as exc:
        _task(zm.path, frames={'attachment_site': {'body': 'wrist_3_link'}})
    assert exc.value.where == 'aim.yaml: frames.attachment_site'


def test_frames_in_a_python_spec_are_checked_as_in_a_file():
    from dataclasses import replace

    from mujoco_hal_ros.tasks import FrameTerm
    path = _panda()
    spec = parse({'name': 'aim', 'model': path, 'horizon': 1, 'observation': [
        {'site_pos': 'tip'}], 'action': {'decimation': 1}}, 'aim.py')
    task = Task(replace(spec, frames={'tip': FrameTerm('hand', (0.0, 0.0, 0.1))}))
    assert task.obs_size == 3
    with pytest.raises(TaskError) as exc:
        Task(replace(spec, frames={'tip': FrameTerm('hand', (0.0, 0.1))}))
    assert exc.value.where == 'aim.py: frames.tip.pos'


EXAMPLE = os.path.join(os.path.dirname(__file__), '..', '..', 'examples', 'tasks',
                       'panda_reach.yaml')


def _pd(task):
    """A linear law on the fingertip error (the fingertip Jacobian at the home pose)."""
    m = task.model
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    jac = np.zeros((3, m.nv))
    mujoco.mj_jacSite(m, d, jac, None, m.site('fingertip').id)
    gain = 0.3 * np.linalg.pinv(jac[:, :7]) / task.spec.action.scale
    cols = {label.split('[')[0]: slice(off, off + size)
            for label, off, size in task.observation_layout}
    w = np.zeros((task.obs_size, task.act_size))
    w[cols['site_pos']] = -gain.T
    w[cols['command']] = gain.T
    w[cols['joint_vel']] = -0.05 * np.eye(7)
    return lambda obs: np.clip(obs @ w, -1.0, 1.0)


def test_the_panda_example_task_file_reaches_with_its_own_frame_contact_and_reward(
        tmp_path, monkeypatch):
    _panda()
    monkeypatch.chdir(tmp_path)         # its terms module is found beside the task file
    task = load_task(EXAMPLE)
    assert task.model.site('fingertip') is not None and task.act_size == 7
    report = evaluate(task, _pd(task), 8, 4, seed=0)
    assert report.successes >= 6, report.summary()
    assert 'fingers_down' not in report.failures()
    # the reward of its own counts: the same task without it returns more
    data = yaml.safe_load(open(EXAMPLE))
    del data['reward']['quiet']
    plain = Task.from_dict(data, 'panda_reach.yaml', os.path.dirname(EXAMPLE))
    other = evaluate(plain, _pd(plain), 8, 4, seed=0)
    for a, b in zip(report.episode_results, other.episode_results, strict=True):
        assert a.steps == b.steps and a.episode_return < b.episode_return
    assert cli.main(['--task', EXAMPLE, '--policy', 'zero', '--episodes', '2', '--json']) == 0
