"""The README's ROS snippets and the ROS examples, run as a user runs them: a sim_node (or a
pool_node) started from the installed executable, then each script in a process of its own.

One sim_node serves the whole module (each script leaves it as it found it: the box is
deleted, the simulation unpaused). It records only joint_states, /tf and contacts, which
keeps the bags small and includes a type of this package's own (``Contacts``) that the
reader must register from the bag.
"""

import glob
import os
import re
import subprocess

import pytest

pytest.importorskip('rclpy')

from doc_snippets import blocks, ROOT, run_python  # noqa: E402
from helpers import child_env, node_command, ros_args, START_S, stop_process  # noqa: E402

EXAMPLES = os.path.join(ROOT, 'examples')


def _node(folder, executable, params):
    """The installed node in its own process group, in ``folder``; stop it with
    ``stop_process``."""
    log = open(folder / f'{executable}.log', 'wb')
    env = dict(os.environ)
    env.update(child_env())
    proc = subprocess.Popen(node_command(executable) + ros_args(params), stdout=log,
                            stderr=subprocess.STDOUT, env=env, cwd=folder,
                            start_new_session=True)
    proc.log = log
    return proc


@pytest.fixture(scope='module')
def sim_node(tmp_path_factory):
    folder = tmp_path_factory.mktemp('sim_node')
    proc = _node(folder, 'sim_node',
                 ['record_topics:=[/joint_states,/tf,/contacts]', 'thread_priority:=0',
                  f'record_folder:={folder / "recordings"}'])      # as make run sets it
    try:
        yield folder
    finally:
        stop_process(proc)
        proc.log.close()


def _env():
    env = child_env()
    env['ROS_DOMAIN_ID'] = os.environ['ROS_DOMAIN_ID']
    return env


def _example(name, folder):
    path = os.path.join(EXAMPLES, name)
    code, out = run_python(f'import sys; sys.argv = [{path!r}]; '
                           f'exec(compile(open({path!r}).read(), {path!r}, "exec"))',
                           env=_env(), timeout=START_S + 60, cwd=folder)
    assert code == 0, f'examples/{name} failed:\n{out[-3000:]}'
    return out


def test_readme_action_call_moves_the_arm(sim_node):
    (block,) = blocks(lang='python', tag='sim_node')
    code, out = run_python(block.body, env=_env(), timeout=START_S + 60, cwd=sim_node)
    assert code == 0, f'{block} failed:\n{out[-3000:]}'
    assert out.strip().splitlines()[-1] == 'DONE', out


def test_follow_joint_trajectory_example_ends_at_the_last_point(sim_node):
    out = _example('follow_joint_trajectory.py', sim_node)
    assert re.search(r"^error_code 0 ", out, re.M), out
    joints = dict(re.findall(r"'(\w+)': ([-\d.]+)", out.splitlines()[-1]))
    for name, want in zip(('pan', 'lift', 'elbow', 'wrist'), (-0.3, 0.3, 1.0, 0.7), strict=True):
        assert abs(float(joints[name]) - want) < 0.05, (name, joints)


def test_spawn_and_snapshot_example_restores_the_box(sim_node):
    out = _example('spawn_and_snapshot.py', sim_node)
    assert "spawned box1 - its bodies: ['box1/box']" in out, out
    m = re.search(r'saved \(DONE\) at z=([\d.]+) m; after 500 steps z=([\d.]+) m; '
                  r'restored \(DONE\) z=([\d.]+) m', out)
    assert m, out
    z0, z1, z2 = (float(v) for v in m.groups())
    assert z1 < z0 and z2 == z0


def test_record_example_and_the_readme_reader_read_the_bag(sim_node):
    out = _example('record_and_read.py', sim_node)
    counts = dict((topic, int(n)) for n, topic in re.findall(r'^\s+(\d+) (/\S+)$', out, re.M))
    assert set(counts) == {'/joint_states', '/tf', '/contacts'}, out
    assert all(n > 0 for n in counts.values()), out
    assert sorted(glob.glob(str(sim_node / 'recordings' / 'rosbag2_*')))   # record_folder
    assert not glob.glob(str(sim_node / 'rosbag2_*'))       # not the working directory
    (block,) = blocks(lang='python', tag='recording')
    # the README's reader finds the newest recordings/rosbag2_* from where make run ran
    code, text = run_python(block.body, env=_env(), cwd=sim_node)
    assert code == 0, f'{block} failed:\n{text[-3000:]}'
    assert "['pan', 'lift', 'elbow', 'wrist']" in text, text


def test_pool_node_evaluate_example_ranks_the_rollouts(tmp_path):
    proc = _node(tmp_path, 'pool_node', ['nbatch:=16', 'nthread:=2', 'keyframe:=rest'])
    try:
        out = _example('pool_node_evaluate.py', tmp_path)
    finally:
        stop_process(proc)
        proc.log.close()
    m = re.search(r'^16 rollouts of 100 steps \([\d.]+ s simulated\); best #(\d+): '
                  r'cost ([\d.]+) \(median ([\d.]+)\)$', out, re.M)
    assert m, out
    assert 0 <= int(m.group(1)) < 16 and float(m.group(2)) <= float(m.group(3))
