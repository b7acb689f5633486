"""sim_node's ``run_policy`` action and ``stop_policy`` service under hostile goals.

One SimNode on the bench arm (its own rclpy Context, a client node beside it), paused while
a refusal is judged. Task names that are paths (``../../etc/passwd``, ``/dev/zero``, a
2 GiB sparse file, ``/proc/self/environ``, a YAML alias bomb, a non-UTF-8 or deeply nested
file), policies that are code the operator did not declare (``os:system``, ``sys:exit``,
``this:s``, a module with a side effect at import: refused FORBIDDEN and never imported),
declared policies that misbehave (a module that exits when imported, a class that cannot be
made, a policy that fails, exits, blocks forever or forks in the middle of an episode),
episode and seed out of range: each goal ends ABORTED with its code and a bounded message,
the device's model, state and clock are what they were (or, mid-episode, it holds), and
the node still runs an episode afterwards. ``stop_policy`` with nothing running, and
start/cancel loops, change nothing and grow nothing.
"""

import os
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from helpers import SpunNodes, wait_for  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from mujoco_hal_ros.action import RunPolicy  # noqa: E402

ANSWER_S = 60.0
MODULE = 'hostile_policies_adversarial'
POLICIES = '''
import os
import sys
import time
import numpy as np

PIDS = {pids!r}


def exits(obs):
    sys.exit(0)


class Broken:
    def __init__(self):
        raise RuntimeError('this policy cannot be made')


class Late:
    """Fine on the check batch and the first control steps, then it fails."""
    act_size = 4

    def __init__(self):
        self.calls = 0

    def __call__(self, obs):
        self.calls += 1
        if self.calls > 3:
            raise RuntimeError('late failure')
        return np.zeros((len(obs), 4))


class LateExit(Late):
    def __call__(self, obs):
        self.calls += 1
        if self.calls > 3:
            sys.exit(3)
        return np.zeros((len(obs), 4))


class Blocks(Late):
    """Fine at first, then a call that never returns."""

    def __call__(self, obs):
        self.calls += 1
        if self.calls > 3:
            time.sleep(1e9)
        return np.zeros((len(obs), 4))


def nan(obs):
    return np.full((len(obs), 4), np.nan)


def wrong_shape(obs):
    return np.zeros((len(obs), 7))


def hog(obs):
    return np.ones(10 ** 10)          # 80 GB: over policy_memory_mb


def exits_hard(obs):
    os._exit(1)


def kills_itself(obs):
    os.kill(os.getpid(), 9)


class BlocksAtStart:
    def __init__(self):
        time.sleep(1e9)


class Forks(Late):
    """Leaves a process of its own session behind (as pty:spawn would), then blocks."""

    def __call__(self, obs):
        self.calls += 1
        if self.calls > 3:
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    with open(PIDS, 'a') as handle:
                        handle.write(f'{os.getpid()}\\n')
                    time.sleep(1e9)
                os._exit(0)
            time.sleep(1e9)
        return np.zeros((len(obs), 4))
'''
POLICY_TIMEOUT_S = 3.0
DECLARED = [f'exits={MODULE}:exits', f'broken={MODULE}:Broken', f'late={MODULE}:Late',
            f'late_exit={MODULE}:LateExit', f'blocks={MODULE}:Blocks',
            f'blocks_at_start={MODULE}:BlocksAtStart', f'forks={MODULE}:Forks',
            'exits_on_import=exits_on_import_adversarial:f', f'nan={MODULE}:nan',
            f'wrong_shape={MODULE}:wrong_shape', f'hog={MODULE}:hog',
            f'exits_hard={MODULE}:exits_hard', f'kills_itself={MODULE}:kills_itself']


def _bomb_task(path):
    """reach.yaml with its name a billion laughs (nine lists of nine aliases)."""
    from mujoco_hal_ros.tasks import BUILTIN_DIR
    with open(f'{BUILTIN_DIR}/reach.yaml', encoding='utf-8') as handle:
        reach = handle.read()
    value = '&a0 [x, x, x, x, x, x, x, x, x]'
    for i in range(1, 9):
        value = f'&a{i} [{value}, ' + ', '.join([f'*a{i - 1}'] * 8) + ']'
    path.write_text(reach.replace('name: reach', f'name: {value}'))


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp('run_policy')
    (folder / f'{MODULE}.py').write_text(textwrap.dedent(POLICIES).replace(
        '{pids!r}', repr(str(folder / 'pids.txt'))))
    (folder / 'exits_on_import_adversarial.py').write_text('import sys\nsys.exit(5)\n')
    (folder / 'marks_on_import_adversarial.py').write_text(
        f'open({str(folder / "marker")!r}, "w").close()\n\ndef f(obs):\n    return obs\n')
    with open(folder / 'sparse.yaml', 'wb') as handle:
        handle.truncate(2 << 30)                      # 2 GiB, sparse: no disk used
    (folder / 'binary.yaml').write_bytes(b'name: \xff\xfe\n')
    (folder / 'deep.yaml').write_text('name: ' + '[' * 5000 + ']' * 5000 + '\n')
    _bomb_task(folder / 'bomb.yaml')
    (folder / 'not.onnx').write_text('this is no ONNX graph\n')
    sys.path.insert(0, str(folder))
    try:
        yield folder
    finally:
        sys.path.remove(str(folder))
        for name in (MODULE, 'exits_on_import_adversarial', 'marks_on_import_adversarial'):
            sys.modules.pop(name, None)


class Harness(SpunNodes):
    def __init__(self):
        from mujoco_hal_ros.ros.sim.sim_node import SimNode
        super().__init__(lambda ctx: [
            SimNode(context=ctx, parameter_overrides=[
                Parameter('real_time_factor', value=1.0), Parameter('publish_rate', value=20.0),
                Parameter('web_viewer', value=0), Parameter('policies', value=DECLARED),
                Parameter('policy_timeout_s', value=POLICY_TIMEOUT_S)]),
            rclpy.create_node('run_policy_adversary', context=ctx)],
            lambda ctx: MultiThreadedExecutor(num_threads=4, context=ctx))
        self.node, self.client = self.nodes
        self.device = self.node.device
        self.action = ActionClient(self.client, RunPolicy, 'run_policy')
        self.spin(1800.0)
        assert self.action.wait_for_server(timeout_sec=20.0)

    def close(self):
        self.spinner.stop(self.join_s)
        self.action.destroy()
        super().close()

    def run(self, timeout=ANSWER_S, **goal):
        handle = self.wait(self.action.send_goal_async(RunPolicy.Goal(**goal)), 20.0)
        assert handle.accepted
        res = self.wait(handle.get_result_async(), timeout)
        return res.status, res.result


@pytest.fixture(scope='module')
def h():
    harness = Harness()
    try:
        yield harness
    finally:
        harness.close()


def _state(device):
    snap = device.snapshot
    return device.generation, snap.qpos.copy(), snap.time, device.paused, len(device.audit())


def refused_and_unchanged(h, code, words=(), **goal):
    """The goal ends ABORTED with ``code`` and nothing of the paused device changed."""
    h.device.pause(True)
    try:
        before = _state(h.device)
        status, r = h.run(**goal)
        assert status == GoalStatus.STATUS_ABORTED, (status, r.code, r.message)
        assert not r.success and r.code == code, (r.code, r.message)
        assert len(r.message) < 5000, 'a refusal echoes its input in full'
        for word in words:
            assert word in r.message, r.message
        after = _state(h.device)
        assert after[0] == before[0], 'a refused run swapped the model'
        assert np.array_equal(after[1], before[1]) and after[2:] == before[2:]
    finally:
        h.device.pause(False)
    assert h.spinner._thread.is_alive(), 'the node stopped spinning'
    return r


TASKS = [('../../../../../../etc/passwd', ['expected a mapping']),
         ('/etc/passwd', ['expected a mapping']),
         ('/dev/zero', ['no built-in task']), ('/tmp', ['no built-in task']),
         ('/proc/self/environ', ['not valid YAML']), ('/proc/self/mem', ['cannot read']),
         ('a' * 100_000, ['no built-in task', '100000 chars']), ('\x00x', []),
         ('{sparse.yaml}', ['bytes', 'cap']), ('{binary.yaml}', ['UTF-8']),
         ('{deep.yaml}', ['nested more than']), ('{bomb.yaml}', ['expected a name'])]


@pytest.mark.parametrize('task, words', TASKS, ids=lambda v: repr(v)[:24])
def test_task_names_that_are_paths_or_bombs_are_refused(h, files, task, words):
    if task.startswith('{'):
        task = str(files / task[1:-1])
    t0 = time.monotonic()
    refused_and_unchanged(h, 'CONFIG_ERROR', words, task=task, policy='zero', lockstep=True)
    assert time.monotonic() - t0 < 20.0, 'a hostile task file took seconds to refuse'


@pytest.mark.parametrize('policy, words', [
    ('os:system', []), ('sys:exit', []), ('this:s', []), (f'{MODULE}:exits', []),
    ('subprocess:Popen', []), ('exits_on_import_adversarial:f', []),
    ('marks_on_import_adversarial:f', []), ('os:', []), ('builtins:eval', []),
    ('x' * 100_000, ['100000 chars']), ('late.py', []), ('/etc/passwd', []),
    ('zero ', []), ('ZERO', []),
])
def test_code_the_operator_did_not_declare_is_refused_before_any_import(h, files, policy,
                                                                        words):
    """FORBIDDEN, naming what a peer may ask for; the module was never imported (not in
    sys.modules, no Zen of Python, the marker file a module writes at import absent)."""
    module = policy.partition(':')[0]
    loaded = module in sys.modules
    r = refused_and_unchanged(h, 'FORBIDDEN', words + ['nothing was opened or imported',
                                                       'policies'],
                              task='reach', policy=policy, lockstep=True)
    assert 'exits, ' in r.message or 'blocks' in r.message, r.message   # the declared names
    assert (module in sys.modules) == loaded, f'{module} was imported'
    assert not (files / 'marker').exists(), 'a module a peer named ran its top-level code'


@pytest.mark.parametrize('policy, words', [
    ('exits', ['exit']), ('broken', ['cannot be made', 'RuntimeError']),
    ('exits_on_import', ['cannot be made', 'exit']), ('nan', ['NaN']),
    ('wrong_shape', ['outputs 7 actions']), ('hog', ['MemoryError']),
    ('exits_hard', ['ended (exit code 1)']), ('kills_itself', ['killed by signal SIGKILL']),
    ('/dev/zero.onnx', ['no such file']), ('../../../etc/passwd.onnx', ['no such file']),
    ('{not.onnx}', ['cannot load']),
])
def test_declared_policies_that_cannot_work_are_refused_and_the_node_lives(h, files, policy,
                                                                           words):
    if policy.startswith('{'):
        policy = str(files / policy[1:-1])
    refused_and_unchanged(h, 'INVALID_ARGUMENT', words, task='reach', policy=policy,
                          lockstep=True)


def _alive(pid):
    """Whether process ``pid`` runs (a zombie waiting for init to reap it does not)."""
    try:
        with open(f'/proc/{pid}/stat', encoding='utf-8') as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(')') + 2] != 'Z'


def _no_worker_left(h):
    """No process below the node's (the test's) process runs a policy worker."""
    from mujoco_hal_ros.tasks.policy_process import descendants
    for pid in descendants(os.getpid()):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as handle:
                if b'policy_worker' in handle.read():
                    return False
        except OSError:
            pass
    return True


@pytest.mark.parametrize('policy', ['blocks', 'forks'])
def test_a_policy_that_never_answers_ends_timeout_and_the_next_run_starts(h, files, policy):
    """The call past policy_timeout_s ends the run TIMEOUT with the device holding; the
    worker and every process it started (one in a session of its own) are gone; the next
    goal is accepted and runs."""
    status, r = h.run(task='reach', policy=policy, lockstep=True)
    assert status == GoalStatus.STATUS_ABORTED
    assert r.code == 'TIMEOUT' and 'after 2 control steps' in r.message, r.message
    assert 'the device holds' in r.message and not h.device.snapshot.moving
    assert h.device.audit('hold')
    assert wait_for(lambda: _no_worker_left(h), 10.0), 'a policy worker outlived its run'
    if policy == 'forks':
        pids = [int(p) for p in (files / 'pids.txt').read_text().split()]
        assert pids and wait_for(lambda: not any(_alive(p) for p in pids), 10.0), \
            'a process the policy forked outlived its run'
    status, r = h.run(task='reach', policy='zero', lockstep=True)
    assert status == GoalStatus.STATUS_SUCCEEDED and r.code == 'DONE', r.message


@pytest.mark.parametrize('how', ['stop_policy', 'cancel'])
def test_stop_frees_the_device_from_a_policy_that_never_starts(h, files, how):
    """A policy whose making blocks for good (the worker's start has a minute): stop_policy
    or a cancel ends the run STOPPED at once, the device untouched, and the next runs."""
    generation = h.device.generation
    handle = h.wait(h.action.send_goal_async(RunPolicy.Goal(
        task='reach', policy='blocks_at_start', lockstep=False)), 20.0)
    assert handle.accepted
    assert wait_for(lambda: not _no_worker_left(h), 20.0), 'no worker started'
    if how == 'stop_policy':
        stopped = h.call(Trigger, 'stop_policy', Trigger.Request())
        assert stopped.success, stopped.message
    else:
        h.wait(handle.cancel_goal_async(), 20.0)
    res = h.wait(handle.get_result_async(), ANSWER_S)
    assert res.status == (GoalStatus.STATUS_ABORTED if how == 'stop_policy'
                          else GoalStatus.STATUS_CANCELED), res.result.message
    assert res.result.code == 'STOPPED', res.result.message
    assert h.device.generation == generation and not h.device.snapshot.moving
    assert wait_for(lambda: _no_worker_left(h), 10.0), 'a policy worker outlived its run'
    status, r = h.run(task='reach', policy='random', lockstep=True)
    assert status == GoalStatus.STATUS_SUCCEEDED and r.code == 'DONE', r.message


@pytest.mark.parametrize('goal, words', [
    (dict(episode=2 ** 32 - 1), ['episode', 'out of range']),
    (dict(seed=2 ** 64 - 1), ['seed', 'out of range']),
    (dict(seed=2 ** 63), ['seed', 'out of range']),
])
def test_episodes_and_seeds_out_of_range_are_refused(h, goal, words):
    refused_and_unchanged(h, 'INVALID_ARGUMENT', words, task='reach', policy='zero',
                          lockstep=True, **goal)


def test_a_negative_seed_never_reaches_the_node_and_the_runner_refuses_it(h):
    """uint64 and uint32 on the wire: a negative one fails to serialize in the client. The
    runner behind the action refuses one from Python all the same, the device unchanged."""
    from rclpy.serialization import serialize_message

    from mujoco_hal_ros.errors import DeviceError
    from mujoco_hal_ros.tasks.device_runner import DevicePolicyRunner
    for goal in (RunPolicy.Goal(seed=-1), RunPolicy.Goal(episode=-1)):
        # the C converter's OverflowError, surfacing as the SystemError of a conversion that
        # returned with an exception set where the generated code does not check for one
        with pytest.raises((OverflowError, SystemError, ValueError)):
            serialize_message(goal)
    h.device.pause(True)
    try:
        before = _state(h.device)
        for kw in (dict(seed=-1), dict(episode=-1), dict(seed=True), dict(episode=1e308),
                   dict(seed=float('nan'))):
            with pytest.raises(DeviceError) as info:
                DevicePolicyRunner(h.device, 'reach', 'zero', **kw)
            assert info.value.code == 'INVALID_ARGUMENT', str(info.value)
        after = _state(h.device)
        assert after[0] == before[0] and np.array_equal(after[1], before[1])
    finally:
        h.device.pause(False)


@pytest.mark.parametrize('policy', ['late', 'late_exit'])
def test_a_policy_that_fails_mid_episode_is_its_failure_and_the_device_holds(
        h, files, policy):
    """Not INTERNAL_ERROR (a node bug), and an exit in it does not end the node."""
    status, r = h.run(task='reach', policy=policy, lockstep=True)
    assert status == GoalStatus.STATUS_ABORTED
    assert r.code == 'INVALID_ARGUMENT' and 'after 2 control steps' in r.message, r.message
    assert ('raised at control step 3: RuntimeError: \'late failure\'' if policy == 'late'
            else 'exit') in r.message
    assert 'the device holds' in r.message
    assert not h.device.snapshot.moving and h.device.audit('hold')
    assert h.spinner._thread.is_alive(), 'the node stopped spinning'


def test_stop_policy_with_nothing_running_changes_nothing(h):
    h.device.pause(True)
    try:
        before = _state(h.device)
        for _ in range(20):
            r = h.call(Trigger, 'stop_policy', Trigger.Request())
            assert not r.success and 'no policy is running' in r.message
        after = _state(h.device)
        assert after[0] == before[0] and np.array_equal(after[1], before[1])
        assert after[2:] == before[2:]
    finally:
        h.device.pause(False)


def _counts(h):
    node = h.node
    return (threading.active_count(), len(list(node.services)),
            len(list(node.subscriptions)), len(list(node.publishers)),
            len(list(node.waitables)), len(h.device.swaps))


def test_start_and_cancel_in_a_loop_grows_nothing(h):
    # the first run makes the run worker (one thread, kept): counted from after it
    assert h.run(task='reach', policy='zero', lockstep=True)[0] == GoalStatus.STATUS_SUCCEEDED
    before = _counts(h)
    for i in range(6):
        got = []
        handle = h.wait(h.action.send_goal_async(
            RunPolicy.Goal(task='reach', policy='random', seed=i, lockstep=False),
            feedback_callback=lambda m, got=got: got.append(m.feedback.steps)), 20.0)
        assert handle.accepted
        if i % 2:
            assert wait_for(lambda got=got: got, 30.0)
            h.wait(handle.cancel_goal_async(), 20.0)
        else:
            stopped = h.call(Trigger, 'stop_policy', Trigger.Request())
            assert stopped.success, stopped.message
        res = h.wait(handle.get_result_async(), ANSWER_S)
        assert res.status in (GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED)
        assert res.result.code == 'STOPPED', res.result.message
        assert not h.device.snapshot.moving
    assert wait_for(lambda: _counts(h) == before, 10.0), (before, _counts(h))


def test_the_node_still_runs_an_episode_after_all_of_it(h):
    status, r = h.run(task='reach', policy='random', seed=5, episode=1, lockstep=True)
    assert status == GoalStatus.STATUS_SUCCEEDED and r.code == 'DONE', r.message
    assert r.steps > 0 and h.spinner._thread.is_alive()
