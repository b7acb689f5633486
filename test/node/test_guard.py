"""No exception ends the node: every ROS entry point is guarded (``ros/guard.py``).

A failure is injected into each kind of entry point (service, plain and ``async``;
subscription; timer; guard condition; action goal, cancel, accepted and execute callbacks)
of a bare ``GuardedNode``, and into the entry points of a whole sim_node. Each request gets
an answer carrying INTERNAL_ERROR, and the node then answers the next request: an exception
that escaped would have ended the spinning thread (``helpers.SpinThread`` lets only handle
races through), and every later call would time out.
"""

import threading

from helpers import SpunNodes, wait_for
import pytest
import rclpy
from rclpy.action import ActionClient, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
import rclpy.timer
from std_msgs.msg import Float64
from std_srvs.srv import Trigger

from mujoco_hal_ros.action import Hold
from mujoco_hal_ros.errors import INTERNAL_ERROR
from mujoco_hal_ros.ros import guard
from mujoco_hal_ros.srv import Randomize

simulation_interfaces = pytest.importorskip(
    'simulation_interfaces.srv', reason='simulation_interfaces is not installed and its '
    'stand-in was not built (run scripts/setup.sh)')
from simulation_interfaces import srv as si  # noqa: E402
from simulation_interfaces.msg import Result  # noqa: E402

# rclpy hands a TimerInfo to a timer callback annotated for it from Kilted on; Jazzy has none
TimerInfo = getattr(rclpy.timer, 'TimerInfo', None)


def boom(*_args, **_kw):
    raise RuntimeError('injected failure')


async def async_boom(*_args):
    raise RuntimeError('injected failure')


class Victim(guard.GuardedNode):
    """Every kind of entry point, each failing until ``healed``."""

    def __init__(self, **kw):
        super().__init__('guard_victim', **kw)
        self.healed = False
        self.ran = {'timer': 0, 'sub': 0, 'gc': 0}
        group = ReentrantCallbackGroup()
        self.create_service(Trigger, 'plain', self._plain, callback_group=group)
        self.create_service(Randomize, 'coroutine', self._coroutine, callback_group=group)
        self.create_service(si.GetSimulationState, 'standard', boom, callback_group=group)
        self.create_subscription(Float64, 'topic', self._count('sub'), 10,
                                 callback_group=group)
        self.timer = self.create_timer(0.01, self._count('timer'), callback_group=group)
        self.gc = self.create_guard_condition(self._count('gc'), callback_group=group)
        if TimerInfo is not None:          # Kilted on; Jazzy's rclpy hands no TimerInfo
            self.create_timer(0.01, self._with_info, callback_group=group)
        self.goal_fails = guard.ActionServer(self, Hold, 'goal_fails', self._hold,
                                             goal_callback=boom, callback_group=group)
        self.execute_fails = guard.ActionServer(self, Hold, 'execute_fails', async_boom,
                                                cancel_callback=boom, callback_group=group)
        self.accept_fails = guard.ActionServer(self, Hold, 'accept_fails', self._hold,
                                               handle_accepted_callback=boom,
                                               callback_group=group)
        self.slow = guard.ActionServer(self, Hold, 'cancel_fails', self._slow_hold,
                                       goal_callback=lambda _g: GoalResponse.ACCEPT,
                                       cancel_callback=boom, callback_group=group)
        self.release = threading.Event()

    def _count(self, what):
        def cb(*_args):
            self.ran[what] += 1
            if not self.healed:
                raise ValueError(f'injected {what} failure')
        return cb

    def _with_info(self, info: TimerInfo):
        """rclpy hands a TimerInfo by name to a callback annotated for it: the guard
        forwards it."""
        self.ran['info'] = info

    def _plain(self, _req, resp):
        if not self.healed:
            raise KeyError('injected')
        resp.success, resp.message = True, 'fine'
        return resp

    async def _coroutine(self, _req, resp):
        if not self.healed:
            raise RecursionError('maximum recursion depth exceeded (injected)')
        resp.success, resp.code = True, 'DONE'
        return resp

    def _hold(self, handle):
        handle.succeed()
        return Hold.Result(success=True, code='DONE')

    def _slow_hold(self, handle):
        self.release.wait(20.0)
        handle.succeed()
        return Hold.Result(success=True, code='DONE')


@pytest.fixture()
def victim():
    h = SpunNodes(lambda ctx: [Victim(context=ctx),
                               rclpy.create_node('guard_client', context=ctx)],
                  lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
    h.spin(120.0)
    yield h
    h.nodes[0].release.set()
    h.close()


def _goal(h, name):
    client = ActionClient(h.nodes[-1], Hold, name)
    assert client.wait_for_server(timeout_sec=10.0)
    handle = h.wait(client.send_goal_async(Hold.Goal()))
    return client, handle


def test_each_kind_of_entry_point_answers_internal_error_and_the_node_runs_on(victim):
    h = victim
    node = h.nodes[0]
    r = h.call(Trigger, 'plain', Trigger.Request())
    assert not r.success and INTERNAL_ERROR in r.message and 'KeyError' in r.message
    r = h.call(Randomize, 'coroutine', Randomize.Request())
    assert (r.success, r.code) == (False, INTERNAL_ERROR) and 'RecursionError' in r.message
    r = h.call(si.GetSimulationState, 'standard', si.GetSimulationState.Request())
    assert r.result.result == Result.RESULT_OPERATION_FAILED
    assert INTERNAL_ERROR in r.result.error_message
    # subscription, timer, guard condition: they ran and failed, and the spin went on
    pub = h.nodes[-1].create_publisher(Float64, 'topic', 10)
    assert wait_for(lambda: pub.publish(Float64(data=1.0)) or node.ran['sub'] > 0, 10.0)
    node.gc.trigger()
    assert wait_for(lambda: node.ran['gc'] > 0 and node.ran['timer'] > 2, 10.0)
    if TimerInfo is not None:
        assert wait_for(lambda: isinstance(node.ran.get('info'), TimerInfo), 10.0)
    # actions: a failing goal callback rejects, a failing execute or accepted callback aborts
    # with INTERNAL_ERROR in the result, a failing cancel callback refuses the cancel
    _, handle = _goal(h, 'goal_fails')
    assert not handle.accepted
    for name in ('execute_fails', 'accept_fails'):
        _, handle = _goal(h, name)
        assert handle.accepted
        res = h.wait(handle.get_result_async())
        assert res.status == 6, name            # GoalStatus.STATUS_ABORTED
        assert (res.result.success, res.result.code) == (False, INTERNAL_ERROR), name
    _, handle = _goal(h, 'cancel_fails')
    cancel = h.wait(handle.cancel_goal_async())
    assert not cancel.goals_canceling          # refused, not crashed
    node.release.set()
    assert h.wait(handle.get_result_async()).result.success
    # the node still answers, and healed callbacks serve normally
    node.healed = True
    assert h.call(Trigger, 'plain', Trigger.Request()).success
    assert h.call(Randomize, 'coroutine', Randomize.Request()).success


def test_a_callback_is_wrapped_once_and_keeps_its_kind():
    assert guard._wrap(boom, 'x', None, lambda *_: CancelResponse.REJECT)() == \
        CancelResponse.REJECT
    import inspect
    assert inspect.iscoroutinefunction(guard.plain(async_boom, 'x', None))
    wrapped = guard.plain(boom, 'x', rclpy.logging.get_logger('guard_test'))
    assert getattr(wrapped, guard.GUARDED) and guard.plain(wrapped, 'x', None) is wrapped
    assert wrapped() is None


def test_fill_error_writes_every_kind_of_reply():
    from mujoco_hal_ros.srv import Describe, SetGoals
    r = guard.fill_error(SetGoals.Response(), 'text')
    assert r.codes == [INTERNAL_ERROR] and r.messages == ['text'] and not r.success
    assert INTERNAL_ERROR in guard.fill_error(Describe.Response(), 'text').json
    r = guard.fill_error(si.SpawnEntity.Response(), 'text')
    assert r.result.result == Result.RESULT_OPERATION_FAILED
    assert r.result.error_message.startswith(INTERNAL_ERROR)
    text = guard.short_message(RuntimeError('x' * 10_000), 'service s')
    assert len(text) < 700 and '10000 chars' in text


# --- a whole sim_node ------------------------------------------------------------------------
@pytest.fixture(scope='module')
def sim():
    from rclpy.parameter import Parameter

    from mujoco_hal_ros.ros.sim.sim_node import SimNode
    h = SpunNodes(lambda ctx: [
        SimNode(context=ctx, parameter_overrides=[Parameter('publish_rate', value=50.0)]),
        rclpy.create_node('guard_sim_client', context=ctx)],
        lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
    h.spin(240.0)
    try:
        yield h
    finally:
        h.close()


def test_every_entry_point_of_sim_node_is_guarded(sim):
    node = sim.nodes[0]
    entities = [('service', s.srv_name, s.callback) for s in node.services] + \
        [('subscription', s.topic_name, s.callback) for s in node.subscriptions] + \
        [('timer', str(t), t.callback) for t in node.timers] + \
        [('guard condition', str(g), g.callback) for g in node.guards]
    actions = [w for w in node.waitables if isinstance(w, guard.ActionServer)]
    for a in actions:
        for part in ('_goal_callback', '_cancel_callback', '_execute_callback',
                     '_handle_accepted_callback'):
            entities.append(('action', f'{a._guard_name} {part}', getattr(a, part)))
    bare = [f'{kind} {name}' for kind, name, cb in entities
            if not getattr(cb, guard.GUARDED, False)]
    assert not bare, f'not guarded: {bare}'
    names = {name for kind, name, _ in entities if kind == 'service'}
    assert {'spawn_entity', 'randomize', 'apply_wrench', 'load_world'} <= {
        n.rsplit('/', 1)[-1] for n in names}
    assert not [w for w in node.waitables if type(w).__name__ == 'ActionServer'
                and not isinstance(w, guard.ActionServer)]
    assert {a._guard_name for a in actions} >= {'move_to', 'hold', 'simulate_steps'}


def _injected(monkeypatch, obj, *names):
    for name in names:
        monkeypatch.setattr(obj, name, boom)


def test_sim_node_answers_failures_injected_into_its_entry_points(sim, monkeypatch):
    from mujoco_hal_ros import srv as own
    node = sim.nodes[0]
    dev = node.device
    _injected(monkeypatch, dev, 'describe', 'step', 'health')
    _injected(monkeypatch, dev.scene, 'spawn', 'load_world')
    _injected(monkeypatch, dev.physics, 'randomize', 'save_state')
    _injected(monkeypatch, dev.sensing, 'apply_wrench')
    r = sim.call(own.Randomize, 'randomize', own.Randomize.Request(fields_json='{}'))
    assert r.code == INTERNAL_ERROR and 'injected failure' in r.message
    r = sim.call(own.SaveState, 'save_state', own.SaveState.Request(name='a'))
    assert r.code == INTERNAL_ERROR
    r = sim.call(own.ApplyWrench, 'apply_wrench', own.ApplyWrench.Request(body='block'))
    assert r.code == INTERNAL_ERROR
    r = sim.call(own.Describe, 'describe', own.Describe.Request())
    assert INTERNAL_ERROR in r.json
    req = si.SpawnEntity.Request(name='crate')
    req.entity_resource.resource_string = '<mujoco/>'
    r = sim.call(si.SpawnEntity, 'spawn_entity', req)
    assert r.result.result != Result.RESULT_OK and INTERNAL_ERROR in r.result.error_message
    req = si.LoadWorld.Request()
    req.world_resource.resource_string = '<mujoco/>'
    r = sim.call(si.LoadWorld, 'load_world', req)
    assert r.result.result != Result.RESULT_OK and INTERNAL_ERROR in r.result.error_message
    # a subscription (goals/<channel>) and the diagnostics timer (health) fail meanwhile
    monkeypatch.setattr(node.control, '_on_goal_topic', boom)
    channel = next(iter(dev.layout.goals))
    pub = sim.nodes[-1].create_publisher(Float64, f'goals/{channel}', 10)
    for _ in range(5):
        pub.publish(Float64(data=0.0))
    monkeypatch.undo()
    # the node answers and steps on
    t0 = dev.snapshot.time
    r = sim.call(si.GetSimulationState, 'get_simulation_state',
                 si.GetSimulationState.Request())
    assert r.result.result == Result.RESULT_OK
    r = sim.call(own.SaveState, 'save_state', own.SaveState.Request(name='after'))
    assert r.success, r.message
    assert wait_for(lambda: dev.snapshot.time > t0, 10.0), 'physics stopped'


def test_every_entry_point_of_pool_node_is_guarded_and_a_bad_answer_is_answered(tmp_path):
    from rclpy.parameter import Parameter

    from mujoco_hal_ros.ros.pool.pool_node import PoolNode
    from mujoco_hal_ros.srv import PoolInfo, PoolReset
    path = tmp_path / 'free.xml'
    path.write_text('<mujoco><worldbody><body name="box"><freejoint/><geom size=".1"/>'
                    '</body></worldbody></mujoco>')
    h = SpunNodes(lambda ctx: [
        PoolNode(context=ctx, namespace='/pool', parameter_overrides=[
            Parameter('model', value=str(path)), Parameter('nbatch', value=2),
            Parameter('nthread', value=1)]),
        rclpy.create_node('guard_pool_client', context=ctx)],
        lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
    h.spin(120.0)
    try:
        node = h.nodes[0]
        callbacks = [s.callback for s in node.services] + [
            getattr(w, part) for w in node.waitables if isinstance(w, guard.ActionServer)
            for part in ('_goal_callback', '_cancel_callback', '_execute_callback',
                         '_handle_accepted_callback')]
        assert len(callbacks) > 4
        assert all(getattr(cb, guard.GUARDED, False) for cb in callbacks)
        node.info, info = None, node.info          # pool_info now returns no response
        r = h.call(PoolInfo, 'pool/pool_info', PoolInfo.Request())
        assert r.nbatch == 0                       # answered (empty), not a dead node
        node.info = info
        node.pool.reset, reset = boom, node.pool.reset
        r = h.call(PoolReset, 'pool/reset', PoolReset.Request())
        assert not r.success and r.code == INTERNAL_ERROR, r.message
        node.pool.reset = reset
        assert h.call(PoolInfo, 'pool/pool_info', PoolInfo.Request()).nbatch == 2
    finally:
        h.close()


def test_the_executor_backstop_spins_on_past_an_exception_from_a_task():
    """What reaches the executor some other way (a task, a future's done-callback) is
    logged by ``run.spin_guarded`` and the spin goes on; rclpy's ``spin`` would end."""
    from mujoco_hal_ros.ros.run import spin_guarded
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=[])
    node = Victim(context=ctx)
    node.healed = True
    client = rclpy.create_node('backstop_client', context=ctx)
    executor = MultiThreadedExecutor(num_threads=2, context=ctx)
    executor.add_node(node)
    executor.add_node(client)
    thread = threading.Thread(target=spin_guarded, args=(executor, node), daemon=True)
    thread.start()
    try:
        executor.create_task(boom)
        executor.create_task(async_boom)
        cli = client.create_client(Trigger, 'plain')
        assert cli.wait_for_service(timeout_sec=10.0)
        for _ in range(3):
            done = threading.Event()
            future = cli.call_async(Trigger.Request())
            future.add_done_callback(lambda _f, done=done: done.set())
            assert done.wait(20.0), 'the executor stopped spinning'
            assert future.result().success
        assert thread.is_alive()
    finally:
        executor.shutdown(timeout_sec=2.0)
        thread.join(10.0)
        node.release.set()
        node.destroy_node()
        client.destroy_node()
        rclpy.shutdown(context=ctx)
    assert not thread.is_alive()
