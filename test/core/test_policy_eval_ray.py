"""Policy evaluation on RayPool, unchanged: the same per-episode results as on EnvPool.

A separate file so the Ray start-up (seconds of CPU) is paid only where Ray is installed and
only once; ``tasks.evaluate`` takes any pool with EnvPool's API.
"""

import os

import pytest

from mujoco_hal_ros.pool import RayPool
from mujoco_hal_ros.tasks import evaluate, load_task

os.environ.setdefault('RAY_USAGE_STATS_ENABLED', '0')
ray = pytest.importorskip('ray', reason='ray is not installed; pip install "ray[default]"')


@pytest.fixture(scope='module')
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_raypool_gives_the_envpool_episodes(local_ray):
    task = load_task('reach')
    with RayPool(task.model, 4, nshard=2) as pool:
        on_ray = evaluate(task, 'random', 8, pool=pool, seed=2)
    local = evaluate(task, 'random', 8, 3, seed=2)
    assert [e.to_dict() for e in on_ray.episodes] == [e.to_dict() for e in local.episodes]
    assert on_ray.envs == 4 and len(on_ray.episodes) == 8
