"""EnvPool step/reset/evaluate under hostile inputs: refused with a code, rows unchanged."""

from hostile_helpers import FREE_BODY, hostile_scalars, HUGE, names, NON_FINITE, refused
from hypothesis import given, settings, strategies as st
import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.pool import EnvPool

N = 3


@pytest.fixture(scope='module')
def pool():
    with EnvPool(mujoco.MjModel.from_xml_string(FREE_BODY), N) as p:
        p.reset(keyframe='start')
        p.step(5, ctrl=np.full((N, 1), 0.2))
        yield p


def arrays():
    """Control/state-like arrays: wrong shapes, dtypes, non-finite, booleans, ragged."""
    return st.one_of(
        st.sampled_from([np.zeros((N, 1)), np.zeros((N, 4, 1)), np.zeros(1), np.zeros((4, 1)),
                         np.zeros((N, 2)), np.zeros((1, N, 1)), np.zeros((0, 1)),
                         np.full((N, 1), np.nan), np.full((4, 1), np.inf),
                         np.ones((N, 1), dtype=bool), np.array([['a']] * N),
                         np.zeros((N, 1), dtype=complex), np.zeros((N, 10 ** 6 + 1, 0))]),
        st.lists(st.lists(st.one_of(st.floats(-1, 1), hostile_scalars()), min_size=1,
                          max_size=2), min_size=0, max_size=N + 1),
        st.lists(st.sampled_from(HUGE + NON_FINITE), min_size=1, max_size=3),
        hostile_scalars())


def ids():
    return st.one_of(st.none(), st.just([0, 2]), st.just([1, 1]), st.just([N]),
                     st.just([-1]), st.just([True]), st.just(np.array([0.5])),
                     st.lists(st.integers(-2, N + 1), max_size=4), hostile_scalars())


def snapshot(pool):
    return pool.get_state(full=True).copy(), pool.field_values('body_mass').copy()


def assert_unchanged(pool, before):
    state, mass = snapshot(pool)
    assert np.array_equal(state, before[0]), 'a refused pool call changed a state row'
    assert np.array_equal(mass, before[1]), 'a refused pool call changed model values'


@settings(max_examples=150, deadline=None)
@given(nstep=st.one_of(st.integers(-2, 5), hostile_scalars()), ctrl=st.one_of(st.none(),
       arrays()), env_ids=ids(), sensors=st.one_of(st.booleans(), hostile_scalars()))
def test_step(pool, nstep, ctrl, env_ids, sensors):
    before = snapshot(pool)
    err = refused(lambda: pool.step(nstep, ctrl, env_ids, sensors=sensors))
    if err is not None:
        assert_unchanged(pool, before)


@settings(max_examples=150, deadline=None)
@given(env_ids=ids(), keyframe=st.one_of(st.none(), names(['start']), st.integers(-1, 2)),
       states=st.one_of(st.none(), arrays()),
       randomization=st.one_of(
           st.none(), hostile_scalars(),
           st.dictionaries(names(['body_mass', 'geom_friction', 'opt.gravity'],
                                 hashable=True), st.one_of(arrays(), st.floats(-1, 10)),
                           max_size=2)))
def test_reset(pool, env_ids, keyframe, states, randomization):
    before = snapshot(pool)
    err = refused(lambda: pool.reset(env_ids, keyframe=keyframe, states=states,
                                     randomization=randomization))
    if err is not None:
        assert_unchanged(pool, before)
    else:
        pool.reset(keyframe='start')          # back to the same start for the next one
        pool.step(5, ctrl=np.full((N, 1), 0.2))


def bad_costs():
    return st.sampled_from([
        lambda q, v: np.zeros(N - 1), lambda q, v: np.zeros((N, 2)), lambda q, v: 'x',
        lambda q, v: None, lambda q, v: [object()] * N, lambda q, v: 1 / 0,
        lambda q, v: q.undefined, lambda q, v: np.zeros(N), 3, None])


def bad_progress():
    return st.sampled_from([lambda f: [][0], lambda f: None, lambda f: f < 0.5,
                            lambda f: (_ for _ in ()).throw(KeyError('boom')), 'x', None])


@settings(max_examples=120, deadline=None)
@given(ctrl=st.one_of(arrays(), st.just(np.zeros((6, 1)))),
       nstep=st.one_of(st.none(), st.integers(0, 7), hostile_scalars()),
       env_ids=ids(), cost=bad_costs(), progress=bad_progress(),
       chunk=st.one_of(st.integers(0, 3), hostile_scalars()),
       keyframe=st.one_of(st.none(), names(['start'])))
def test_evaluate_is_all_or_nothing(pool, ctrl, nstep, env_ids, cost, progress, chunk,
                                    keyframe):
    before = snapshot(pool)
    err = refused(lambda: pool.evaluate(ctrl, nstep, keyframe=keyframe, env_ids=env_ids,
                                        cost=cost, progress=progress, chunk_steps=chunk))
    if err is not None:
        assert_unchanged(pool, before)
    else:
        pool.reset(keyframe='start')
        pool.step(5, ctrl=np.full((N, 1), 0.2))


@settings(max_examples=80, deadline=None)
@given(sites=st.one_of(st.lists(names(['corner']), max_size=3), names(['corner']),
                       hostile_scalars()), env_ids=ids())
def test_site_jacobians(pool, sites, env_ids):
    before = snapshot(pool)
    if refused(lambda: pool.site_jacobians(sites, env_ids)) is not None:
        assert_unchanged(pool, before)


@settings(max_examples=80, deadline=None)
@given(cost=bad_costs(), progress=bad_progress(), chunk=st.integers(1, 4),
       keyframe=st.one_of(st.none(), st.just('start')),
       env_ids=st.sampled_from([None, [0, 2], [1]]),
       randomization=st.one_of(st.none(), st.just({'body_mass': np.full(4, 2.0)})))
def test_evaluate_callbacks_that_fail_leave_the_pool_as_it_was(pool, cost, progress, chunk,
                                                               keyframe, env_ids,
                                                               randomization):
    """Good controls, so the rollout runs: only the callbacks or the cost's shape fail."""
    before = snapshot(pool)
    err = refused(lambda: pool.evaluate(np.full((6, 1), 0.5), keyframe=keyframe,
                                        env_ids=env_ids, cost=cost, progress=progress,
                                        chunk_steps=chunk, randomization=randomization))
    if err is not None:
        assert err.where in ('cost', 'progress'), str(err)
        assert_unchanged(pool, before)
    else:
        pool.reset(keyframe='start')
        pool.step(5, ctrl=np.full((N, 1), 0.2))
