"""One convention and one name for each thing, in the code, in doc/tasks.md and in the actions.

doc/tasks.md is the page a researcher writes a task from: its units must be the ones the
code applies, every short form the built-in files use must be on it, its table of built-in
tasks must be the package's, its Python examples must run, and a result's fields must carry
the same names in Python, in JSON and in the ROS actions' results.
"""

import json
import os
import re

from doc_snippets import blocks, ROOT, run_python
import pytest

from mujoco_hal_ros.tasks import (
    BUILTIN_DIR,
    builtin_tasks,
    EpisodeResult,
    evaluate,
    load_task,
    parse,
    TaskError,
)
from mujoco_hal_ros.tasks.spec import _SHORTHAND  # noqa: PLC2701 - the table under test

DOC = os.path.join(ROOT, 'doc', 'tasks.md')


def _doc():
    return open(DOC, encoding='utf-8').read()


def test_the_builtin_table_is_the_packages_list():
    section = _doc().split('Built-in tasks', 1)[1].split('\n## ', 1)[0]
    rows = re.findall(r'^\| `(\w+)` \|', section, re.M)
    assert rows == builtin_tasks()


def test_angles_are_radians_on_the_page_and_in_the_builtin_files():
    text = _doc()
    assert 'angles in degrees' not in text and '**angles in radians**' in text
    for name in builtin_tasks():
        body = open(os.path.join(BUILTIN_DIR, f'{name}.yaml'), encoding='utf-8').read()
        assert 'angles in degrees' not in body
    # what the code does: joint noise of 0.05 moves a hinge by at most 0.05 rad
    task = load_task('reach')
    draw = task.draw(0, 0)
    q0, q1 = task.start_state[1:5], draw.state[1:5]
    assert 0 < abs(q1 - q0).max() <= 0.05


def test_every_short_form_is_on_the_page():
    table = _doc().split('Short forms', 1)[1].split('\n\n', 2)[1]
    for kind in _SHORTHAND:
        assert f'`{kind}`' in table or f'- {kind}:' in table, kind
    assert '- last_action' in table and '- command: [target]' in table
    # and each short form means its long form
    base = {'name': 't', 'model': 'bench_arm', 'horizon': 1,
            'action': {'decimation': 1, 'units': 'channel'}}
    short = parse(dict(base, observation=[{'joint_pos': ['pan', 'lift']},
                                          {'command': ['x']}, 'last_action']))
    long = parse(dict(base, observation=[{'joint_pos': {'joints': ['pan', 'lift']}},
                                         {'command': {'names': ['x']}},
                                         {'last_action': {}}]))
    assert short.observation == long.observation


def test_result_names_are_the_same_in_python_json_and_the_actions():
    report = evaluate(load_task('reach'), 'zero', 2, 2, seed=1)
    out = json.loads(json.dumps(report.to_dict()))
    assert out['episodes_done'] == report.episodes_done == 2
    assert len(out['episode_results']) == len(report.episode_results)
    e = report.episode_results[0]
    assert out['episode_results'][0]['episode_return'] == e.episode_return
    for name in ('episode', 'success', 'failure', 'steps', 'ended_by'):
        assert out['episode_results'][0][name] == getattr(e, name)
    # deprecated aliases, kept for scripts
    assert report.episodes is report.episode_results and e.ret == e.episode_return
    assert out['episodes'] == 2 and out['episode_results'][0]['return'] == e.episode_return
    for action, fields in (('EvaluatePolicy', ('episodes_done', 'episode_return',
                                               'mean_return', 'success_rate')),
                           ('RunPolicy', ('episode_return', 'ended_by', 'steps'))):
        text = open(os.path.join(ROOT, 'action', f'{action}.action')).read()
        for f in fields:
            assert re.search(rf'^\S+ {f}$', text, re.M), (action, f)
    assert EpisodeResult(0, True, None, 1.5, 3, 'x').to_dict()['episode_return'] == 1.5


@pytest.mark.parametrize('low, high, wrong', [
    ([0.1, 0.2], [0.3, 0.4, 0.5], 'low'),          # a shortened low is low's fault
    ([0.1, 0.2, 0.3], [0.3, 0.4], 'high'),
])
def test_a_command_bound_of_the_wrong_length_names_its_key(low, high, wrong):
    data = {'name': 't', 'model': 'bench_arm', 'horizon': 1, 'observation': ['last_action'],
            'action': {'decimation': 1},
            'command': {'target': {'uniform': {'low': low, 'high': high}}}}
    with pytest.raises(TaskError) as exc:
        parse(data, 'my.yaml')
    assert exc.value.where == f'my.yaml: command.target.uniform.{wrong}'
    assert f'has {min(len(low), len(high))} numbers' in str(exc.value)


def test_the_pages_python_examples_run(tmp_path):
    """Every python block of doc/tasks.md, in a fresh interpreter, with a ``pd.onnx`` of the
    reader's own (here a still arm) in the folder it runs in."""
    pytest.importorskip('onnx', reason='the examples write and read ONNX policies')
    pytest.importorskip('onnxruntime', reason='the examples write and read ONNX policies')
    import numpy as np

    from mujoco_hal_ros.tasks.onnx_models import linear
    task = load_task('reach')
    linear(np.zeros((task.obs_size, task.act_size)), str(tmp_path / 'pd.onnx'))
    found = blocks(DOC, lang='python')
    assert len(found) >= 3
    for block in found:
        code, out = run_python(block.body, cwd=str(tmp_path), timeout=300)
        assert code == 0, f'doc/tasks.md:{block.line} failed:\n{out[-3000:]}'
