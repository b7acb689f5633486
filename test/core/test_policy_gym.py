"""Gymnasium environments over a task: Gymnasium's own checker, and the evaluator's numbers.

The vector environment and the evaluator step the same pool code, so an episode's summed
rewards under the same actions must be the evaluator's return for that episode exactly.
"""

import warnings

import numpy as np
import pytest

from mujoco_hal_ros.tasks import evaluate, load_task

gymnasium = pytest.importorskip('gymnasium', reason='pip install gymnasium')
from gymnasium.utils.env_checker import check_env  # noqa: E402

from mujoco_hal_ros.tasks.gym import TaskEnv, TaskVectorEnv  # noqa: E402


def test_task_env_passes_gymnasium_check_env():
    env = TaskEnv('reach')
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')     # unbounded observation Box: by design
            check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_task_env_reset_is_seeded_by_episode():
    env = TaskEnv('reach')
    try:
        a, info = env.reset(seed=5)
        b, _ = env.reset(seed=5)
        c, _ = env.reset()                   # the next episode under seed 5
        assert info['episode'] == 0 and np.array_equal(a, b) and not np.array_equal(a, c)
        obs, reward, term, trunc, info = env.step(np.zeros(4, dtype=np.float32))
        assert obs.dtype == np.float32 and obs.shape == (18,)
        assert not term and not trunc and info == {'success': False, 'failure': None}
    finally:
        env.close()


def test_vector_env_returns_equal_the_evaluator():
    task = load_task('reach')
    env = TaskVectorEnv(task, 3)
    try:
        obs, _ = env.reset(seed=9)
        assert obs.shape == (3, task.obs_size)
        total = np.zeros(3)
        for _ in range(task.horizon):
            obs, reward, term, trunc, info = env.step(np.zeros((3, task.act_size)))
            total += reward
        assert trunc.all() and not term.any()
        assert list(info['failure']) == [None] * 3
        obs, reward, term, trunc, _ = env.step(np.zeros((3, task.act_size)))   # autoreset
        assert (reward == 0).all() and not (term | trunc).any()
    finally:
        env.close()
    report = evaluate(task, 'zero', 3, 3, seed=9)
    assert np.array_equal(total, [e.ret for e in report.episodes])
