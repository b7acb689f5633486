"""The examples that need no ROS run as a user runs them, and do what they say.

The ones that talk to a running sim_node run in ``test/e2e/test_examples_e2e.py``; together
the two files run every script in ``examples/``.
"""

import os
import re

from doc_snippets import ROOT, run_python

EXAMPLES = os.path.join(ROOT, 'examples')
PURE = ('core_move_to.py', 'pool_evaluate.py', 'generate_pick_place.py')
OVER_ROS = ('follow_joint_trajectory.py', 'spawn_and_snapshot.py', 'record_and_read.py',
            'pool_node_evaluate.py')


def _run(name, *args):
    path = os.path.join(EXAMPLES, name)
    code, out = run_python(f'import sys; sys.argv = {[path, *args]!r}; '
                           f'exec(compile(open({path!r}).read(), {path!r}, "exec"))')
    assert code == 0, f'examples/{name} failed:\n{out[-3000:]}'
    return out


def test_every_example_is_run_by_a_test():
    scripts = sorted(n for n in os.listdir(EXAMPLES) if n.endswith('.py'))
    assert scripts == sorted(PURE + OVER_ROS), (
        'an example no test runs: add it to PURE here or to OVER_ROS and '
        'test/e2e/test_examples_e2e.py')


def test_core_move_to_reaches_both_targets_and_refuses_the_third():
    out = _run('core_move_to.py')
    tips = re.findall(r"^DONE tip at \{'tip_x': ([-\d.]+), 'tip_y': ([-\d.]+), "
                      r"'tip_z': ([-\d.]+)\} mm$", out, re.M)
    wanted = [(170, -30, 60), (190, 40, 80)]
    assert len(tips) == 2, out
    for got, want in zip(tips, wanted, strict=True):
        assert all(abs(float(g) - w) <= 1.0 for g, w in zip(got, want, strict=True)), (got, want)
    assert re.search(r'^refused: LIMIT_EXCEEDED move_to\.z', out, re.M), out


def test_pool_evaluate_ranks_the_rollouts():
    out = _run('pool_evaluate.py', '--nbatch', '16', '--steps', '50')
    m = re.search(r'^16 rollouts of 50 steps on \w+; best #(\d+): cost ([\d.]+) '
                  r'\(median ([\d.]+)\)$', out, re.M)
    assert m, out
    assert 0 <= int(m.group(1)) < 16 and float(m.group(2)) <= float(m.group(3))


def test_generate_pick_place_writes_a_checked_dataset_of_successes(tmp_path):
    import pytest

    from mujoco_hal_ros.render import gl
    problem = gl.probe()
    if problem is not None:
        pytest.skip(f'no headless GL: {problem}')
    from mujoco_hal_ros import menagerie
    if menagerie.model_path('panda') is None:
        pytest.skip('the Menagerie Panda is not installed (test extras)')
    from mujoco_hal_ros.dataset import check_dataset, DatasetReader
    out = _run('generate_pick_place.py', '--out', str(tmp_path / 'demos'), '--episodes', '2')
    assert re.search(r'^2 episodes, \d+ frames in', out, re.M), out
    assert check_dataset(str(tmp_path / 'demos')) == []
    reader = DatasetReader(str(tmp_path / 'demos'))
    assert [bool(e['success']) for e in reader.episodes] == [True, True]
    assert sorted(reader.camera_keys) == ['observation.images.front', 'observation.images.wrist']
