"""EnvPool.render: images rendered on the pool's worker threads, each environment at its own
state, matched pixel for pixel against an independent
``mujoco.Renderer`` on a plain MjData at the same state; bad input refused."""


from dataset_frames import fast_render
import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.errors import ClosedError, DeviceError
from mujoco_hal_ros.pool import EnvPool
from mujoco_hal_ros.render import gl

GL_PROBLEM = gl.probe()
needs_gl = pytest.mark.skipif(GL_PROBLEM is not None, reason=f'no headless GL: {GL_PROBLEM}')
W, H = 96, 72


@pytest.fixture(scope='module')
def model():
    return mujoco.MjModel.from_xml_path(menagerie.bench_arm_path())


def independent(model, row, cam):
    """A plain mujoco.Renderer at ``row`` with the pool's fast settings."""
    return fast_render(model, cam, W, H, row=row)


@needs_gl
def test_each_environment_rendered_at_its_own_state_matches_an_independent_render(model):
    with EnvPool(model, 4, nthread=2) as pool:
        rng = np.random.default_rng(3)
        ctrl = rng.uniform(model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1],
                           (4, model.nu))
        pool.step(400, ctrl=ctrl)
        images = pool.render(['overhead'], width=W, height=H)
        rows = pool.get_state(full=True)
        assert images.shape == (1, 4, H, W, 3) and images.dtype == np.uint8
        for env in range(4):
            want = independent(model, rows[env], 'overhead')
            assert np.array_equal(images[0, env], want), f'env {env} differs'
        assert not np.array_equal(images[0, 0], images[0, 1]), 'two poses look the same'
        again = pool.render(['overhead'], [2, 0], width=W, height=H)   # order of env_ids kept
        assert np.array_equal(again[0, 0], images[0, 2])
        assert np.array_equal(again[0, 1], images[0, 0])


@needs_gl
def test_bad_cameras_and_sizes_are_refused_and_close_frees_the_contexts(model):
    pool = EnvPool(model, 2, nthread=2)
    for cameras in ([], 'overhead', ['nope'], [99], [True]):
        with pytest.raises(DeviceError):
            pool.render(cameras)
    for size in ({'width': 0}, {'height': -1}, {'width': 1.5}, {'width': 5000}):
        with pytest.raises(DeviceError):
            pool.render(['overhead'], **size)
    with pytest.raises(DeviceError):
        pool.render(['overhead'], [5])
    pool.render(['overhead'], width=W, height=H)
    renderer = pool._renderer
    assert renderer.contexts >= 1
    pool.close()
    assert renderer.contexts == 0, 'a GL context was left after close'
    assert not any(t.is_alive() for t in renderer._threads), 'a rendering thread was left'
    with pytest.raises(ClosedError):
        pool.render(['overhead'])


@needs_gl
def test_a_render_job_shows_the_states_it_was_given_while_the_pool_steps_and_resets(model):
    """``render_async`` takes the states at the call; stepping, a randomized reset and a
    second job made meanwhile do not reach its images (each matched against an independent
    render of the state it was given)."""
    with EnvPool(model, 3, nthread=2) as pool:
        rng = np.random.default_rng(5)
        ctrl = rng.uniform(model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1],
                           (3, model.nu))
        pool.step(300, ctrl=ctrl)
        before = pool.get_state(full=True)
        first = pool.render_async(['overhead'], width=W, height=H)
        pool.step(300, ctrl=-ctrl)
        middle = pool.get_state(full=True)
        second = pool.render_async(['overhead'], [1], width=W, height=H)
        pool.reset([1], randomization={'body_mass': model.body_mass * 1.5})
        pool.step(200, ctrl=ctrl)
        assert not np.array_equal(before[1], middle[1]), 'the arm did not move'
        images = first.result(timeout=120)
        for env in range(3):
            assert np.array_equal(images[0, env], independent(model, before[env], 'overhead'))
        assert np.array_equal(second.result(timeout=120)[0, 0],
                              independent(model, middle[1], 'overhead'))
        assert not np.array_equal(images[0, 1], second.result()[0, 0])
