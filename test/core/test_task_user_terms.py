"""Rewards and predicates of the user's own (``{python: {function: module:attr}}``).

A user term computed on the batch must give what the same quantity measured independently
gives: a reward equal, to the bit, to the built-in term that computes the same sum, and a
failure predicate that ends each episode exactly at the first recorded state where its
condition holds (read from the FULLPHYSICS rows). Bad callables are refused before any
environment runs, naming the term's key.
"""

import itertools
import textwrap

import numpy as np
import pytest
import yaml

from mujoco_hal_ros.errors import InvalidArgument
from mujoco_hal_ros.tasks import BUILTIN_DIR, evaluate, Task, TaskError
from mujoco_hal_ros.tasks.reference import run_episode

_COUNT = itertools.count()

TERMS = '''
import numpy as np


class ArmSpeed:
    """sum of the arm joints' squared speeds (the built-in joint_vel_l2 on them)"""

    def __init__(self, task):
        m = task.model
        self.cols = [int(m.jnt_dofadr[m.joint(j).id]) for j in ('pan', 'lift', 'elbow', 'wrist')]

    def __call__(self, frame):
        return (frame.qvel[:, self.cols] ** 2).sum(axis=1)


def lift_low(frame):
    return frame.qpos[:, 1] < LIMIT


LIMIT = {limit}


def wrong_shape(frame):
    return np.zeros((len(frame.qpos), 2))


def nan(frame):
    return np.full(len(frame.qpos), np.nan)


def flags(frame):
    return np.ones(len(frame.qpos), dtype=bool)


def raises(frame):
    raise RuntimeError('no reward today')
'''


@pytest.fixture
def terms(tmp_path, monkeypatch):
    """A module of user terms in the current directory, under a fresh name."""
    def write(limit=-10.0):
        name = f'user_terms_{next(_COUNT)}'
        (tmp_path / f'{name}.py').write_text(textwrap.dedent(TERMS.format(limit=limit)))
        return name
    monkeypatch.chdir(tmp_path)
    return write


def _reach(**changes):
    with open(f'{BUILTIN_DIR}/reach.yaml') as f:
        data = yaml.safe_load(f)
    data.update(changes)
    return Task.from_dict(data, 'reach.yaml', BUILTIN_DIR)


def test_a_user_reward_equals_the_builtin_term_that_computes_the_same(terms):
    mod = terms()
    mine = _reach(horizon=30, reward={'speed': {'weight': -0.5,
                                                'python': {'function': f'{mod}:ArmSpeed'}}})
    builtin = _reach(horizon=30, reward={'speed': {'weight': -0.5, 'joint_vel_l2': {
        'joints': ['pan', 'lift', 'elbow', 'wrist']}}})
    a = evaluate(mine, 'random', 4, 2, seed=7)
    b = evaluate(builtin, 'random', 4, 2, seed=7)
    assert [e.to_dict() for e in a.episode_results] == [e.to_dict() for e in b.episode_results]
    assert all(e.episode_return < 0 for e in a.episode_results)


def test_a_user_failure_ends_each_episode_where_its_condition_first_holds(terms):
    mod = terms(limit=0.1)
    task = _reach(horizon=40, success=None, reward=None,
                  failure={'lift_low': {'python': {'function': f'{mod}:lift_low'}}})
    report = evaluate(task, 'random', 6, 3, seed=2, record=range(6))
    lift = 1 + task.model.joint('lift').qposadr[0]          # FULLPHYSICS: time, qpos...
    ended = 0
    for e in report.episode_results:
        rows = report.states[e.episode]
        below = rows[1:, lift] < 0.1                       # after each control step
        if e.failure == 'lift_low':
            ended += 1
            assert below[e.steps - 1] and not below[:e.steps - 1].any()
        else:
            assert e.failure is None and not below.any() and e.steps == task.horizon
        ref, _ = run_episode(task, 'random', 2, e.episode)
        assert ref.to_dict() == e.to_dict()
    assert 0 < ended < 6, 'some episodes end by the predicate, some run to the horizon'


def test_a_user_term_may_be_a_python_callable():
    task = _reach(horizon=5, reward={'r': {'weight': 2.0, 'python': {
        'function': lambda f: np.ones(len(f.qpos))}}})
    assert evaluate(task, 'zero', 2, 2).episode_results[0].episode_return == 10.0


@pytest.mark.parametrize('attr, role, words', [
    ('wrong_shape', 'reward', 'shape (2, 2) for 2 environments'),
    ('nan', 'reward', 'NaN'),
    ('flags', 'reward', 'bool values'),
    ('raises', 'reward', 'no reward today'),
    ('raises', 'failure', 'RuntimeError'),
    ('missing', 'reward', 'has no attribute'),
])
def test_bad_user_terms_are_refused_before_anything_runs(terms, attr, role, words):
    mod = terms()
    term = {'python': {'function': f'{mod}:{attr}'}}
    if role == 'reward':
        term['weight'] = 1.0
    with pytest.raises(InvalidArgument) as exc:
        _reach(**{role: {'mine': term}})
    assert exc.value.where == f'reach.yaml: {role}.mine.python' and words in str(exc.value)


def test_a_user_term_must_be_named_module_colon_attr():
    with pytest.raises(TaskError) as exc:
        _reach(reward={'mine': {'weight': 1.0, 'python': {'function': 'just_a_name'}}})
    assert exc.value.where == 'reach.yaml: reward.mine.python.function'
    with pytest.raises(InvalidArgument, match='cannot import'):
        _reach(reward={'mine': {'weight': 1.0, 'python': {'function': 'no_such_mod_9:f'}}})
