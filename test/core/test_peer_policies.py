"""What a peer may name (``tasks.peer``) and the worker a declared policy runs in
(``tasks.policy_process``), without ROS.

A peer names data (built-ins, an ONNX file and a task file under the roots), the operator
names code (``policies``: NAME=module:attr); anything else is FORBIDDEN before any import.
A declared policy in its worker gives the episodes the same callable gives in-process,
every call under its deadline, and ``cancel`` ends a call that never returns.
"""

import os
import shutil
import sys
import textwrap
import threading

import numpy as np
import pytest

from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.tasks import BUILTIN_DIR, evaluate, load_task
from mujoco_hal_ros.tasks.peer import declared_policies, PeerPolicies
from mujoco_hal_ros.tasks.policy_process import descendants, ProcessPolicy

MODULE = 'peer_policies_core'
SOURCE = '''
import time
import numpy as np


class Seeded:
    """Actions that depend on the episode (reset) and the observation."""
    act_size = 4

    def __init__(self):
        self.episodes = {}

    def reset(self, slots, episodes):
        for s, e in zip(slots.tolist(), episodes.tolist()):
            self.episodes[s] = e

    def __call__(self, obs):
        scale = np.array([0.1 * (1 + self.episodes.get(i, 0) % 3) for i in range(len(obs))])
        return np.tanh(obs[:, :4] * scale[:, None])


def blocks(obs):
    time.sleep(1e9)


def floats_as_text(obs):
    return [['a'] * 4] * len(obs)
'''


@pytest.fixture(scope='module')
def module(tmp_path_factory):
    folder = tmp_path_factory.mktemp('peer')
    (folder / f'{MODULE}.py').write_text(textwrap.dedent(SOURCE))
    sys.path.insert(0, str(folder))
    try:
        yield folder
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(MODULE, None)


@pytest.mark.parametrize('entries, words', [
    (['x'], 'NAME=module:attr'), (['zero=os:getcwd'], 'built-in'),
    (['a=os'], 'not module:attr'), (['a=os:get cwd'], 'not module:attr'),
    (['a=os:getcwd', 'a=os:getpid'], 'declared twice'), (['a b=os:getcwd'], 'NAME'),
    (['a=x.onnx'], 'not module:attr'),
])
def test_declared_policies_are_checked_without_importing(entries, words):
    with pytest.raises(ValueError) as info:
        declared_policies(entries)
    assert words in str(info.value)


def test_a_declared_list_reads_and_imports_nothing():
    table = declared_policies([' walk = my_pkg.policies:Walker ', '', 'z=mod:f'])
    assert table == {'walk': 'my_pkg.policies:Walker', 'z': 'mod:f'}
    assert 'my_pkg' not in sys.modules


@pytest.mark.parametrize('name', ['os:getcwd', 'this:s', 'walk.py', 'Zero', '', 'zero\0',
                                  'x' * 10000, 'a.onnx\0.onnx'])
def test_anything_not_data_or_declared_is_forbidden(name):
    rules = PeerPolicies.from_parameters(['walk=my_pkg:Walker'], [], 1.0, 0)
    loaded = set(sys.modules)
    with pytest.raises(DeviceError) as info:
        rules.policy(name)
    assert info.value.code == 'FORBIDDEN' and 'walk' in str(info.value)
    assert len(str(info.value)) < 2000
    assert set(sys.modules) == loaded


def test_files_a_peer_names_obey_the_roots(tmp_path):
    inside = tmp_path / 'inside'
    inside.mkdir()
    rules = PeerPolicies.from_parameters([], [str(inside)], 1.0, 0)
    outside_onnx = tmp_path / 'p.onnx'
    outside_onnx.write_bytes(b'')
    os.symlink(outside_onnx, inside / 'link.onnx')
    for name in (str(outside_onnx), str(inside / 'link.onnx'), str(inside / '..' / 'p.onnx')):
        with pytest.raises(DeviceError) as info:
            rules.policy(name)
        assert info.value.code == 'FORBIDDEN', name
    assert rules.policy(str(inside / 'q.onnx')) == str(inside / 'q.onnx')
    # a task file outside; one inside naming a model outside; one inside with its model
    shutil.copy(os.path.join(BUILTIN_DIR, 'reach.yaml'), tmp_path / 'reach.yaml')
    with pytest.raises(DeviceError) as info:
        rules.task(str(tmp_path / 'reach.yaml'))
    assert info.value.code == 'FORBIDDEN'
    text = (tmp_path / 'reach.yaml').read_text()
    model = load_task('reach').model_path
    (inside / 'far.yaml').write_text(text.replace('model: bench_arm', f'model: {model}'))
    assert 'model: bench_arm' in text
    with pytest.raises(DeviceError) as info:
        rules.task(str(inside / 'far.yaml'))
    assert info.value.code == 'FORBIDDEN' and 'model' in str(info.value)
    shutil.copy(model, inside / 'arm.xml')
    (inside / 'near.yaml').write_text(text.replace('model: bench_arm', 'model: arm.xml'))
    assert rules.task(str(inside / 'near.yaml')).obs_size == load_task('reach').obs_size
    assert rules.task('reach').name == 'reach'


def test_a_declared_policy_in_its_worker_gives_the_in_process_episodes(module):
    task = load_task('reach')
    rules = PeerPolicies.from_parameters([f'seeded={MODULE}:Seeded'], [], 30.0, 2048)
    policy = rules.make('seeded', task)
    try:
        assert policy.alive and policy.act_size == 4
        got = evaluate(task, policy, 5, 3, seed=2)
    finally:
        policy.close()
    assert not policy.alive
    want = evaluate(task, f'{MODULE}:Seeded', 5, 3, seed=2)
    assert [e.to_dict() for e in got.episodes] == [e.to_dict() for e in want.episodes]


def test_a_call_past_its_deadline_ends_timeout_and_cancel_ends_one_at_once(module):
    task = load_task('reach')
    obs = np.zeros((2, task.obs_size))
    late = ProcessPolicy(f'{MODULE}:blocks', 0.5)
    with pytest.raises(DeviceError) as info:
        late.act(obs, None)
    assert info.value.code == 'TIMEOUT' and 'policy_timeout_s' in str(info.value)
    assert not late.alive
    stuck = ProcessPolicy(f'{MODULE}:blocks', 3600.0)
    _ = stuck.act_size                   # started: the next call blocks for good
    timer = threading.Timer(0.5, stuck.cancel)
    timer.start()
    with pytest.raises(DeviceError) as info:
        stuck.act(obs, None)
    timer.join()
    assert info.value.code == 'STOPPED' and not stuck.alive
    assert not [p for p in descendants(os.getpid()) if p in (late.pid, stuck.pid)]


def test_what_a_worker_answers_is_checked_as_in_process(module):
    task = load_task('reach')
    rules = PeerPolicies.from_parameters([f'text={MODULE}:floats_as_text',
                                          'missing=no_such_module_peer:f'], [], 5.0, 0)
    for name, words in (('text', 'returned <U1 actions'), ('missing', 'cannot be made')):
        with pytest.raises(DeviceError) as info:
            rules.make(name, task)
        assert info.value.code == 'INVALID_ARGUMENT' and words in str(info.value), \
            str(info.value)


def test_the_worker_dies_with_a_node_killed_while_its_policy_computes(module, tmp_path):
    """SIGKILL leaves no cleanup to run: the worker's PR_SET_PDEATHSIG ends it anyway."""
    import signal
    import subprocess
    import time
    script = textwrap.dedent(f'''
        import sys
        import numpy as np
        sys.path.insert(0, {str(module)!r})
        from mujoco_hal_ros.tasks.policy_process import ProcessPolicy
        p = ProcessPolicy('{MODULE}:blocks', 3600.0)
        p.act_size
        print(p.pid, flush=True)
        p.act(np.zeros((2, 3)), None)
        ''')
    node = subprocess.Popen([sys.executable, '-c', script], stdout=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    try:
        worker = int(node.stdout.readline())
        assert _alive(worker)
        node.send_signal(signal.SIGKILL)
        node.wait(10)
        end = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _alive(worker), 'the worker outlived its node'
    finally:
        node.kill()
        node.wait(10)


def _alive(pid):
    try:
        with open(f'/proc/{pid}/stat', encoding='utf-8') as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(')') + 2] != 'Z'


def test_a_peers_task_file_with_python_terms_is_forbidden_before_any_import(tmp_path):
    """A task file is data a peer may name; a term of the user's own Python in it is code:
    FORBIDDEN, and its module never imported (its marker file never written)."""
    marker = tmp_path / 'imported'
    (tmp_path / 'peer_terms_marker.py').write_text(
        f'open({str(marker)!r}, "w").write("ran")\n'
        'def reward(frame):\n    return frame.qpos[:, 0]\n')
    task = tmp_path / 'task.yaml'
    with open(os.path.join(BUILTIN_DIR, 'reach.yaml'), encoding='utf-8') as src:
        text = src.read()
    term = "  mine: {weight: 1.0, python: {function: 'peer_terms_marker:reward'}}"
    task.write_text(text.replace('\nreward:', '\nreward:\n' + term, 1))
    for roots in ((), (str(tmp_path),)):
        with pytest.raises(DeviceError) as err:
            PeerPolicies(roots=roots or None).task(str(task))
        assert err.value.code == 'FORBIDDEN' and 'reward.mine' in str(err.value)
    assert not marker.exists() and 'peer_terms_marker' not in sys.modules
