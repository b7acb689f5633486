"""No thread per request and no watcher thread in the ROS layer.

Requests are answered through ``ros/bridge.py`` (a guard condition and one timer on the
executor, one worker for blocking pool work). This reads the source of
``mujoco_hal_ros/ros/`` and fails on a thread or thread pool started anywhere else than
where a long-lived one belongs, so a polling thread or a thread per request cannot come
back unnoticed.
"""

import ast
import pathlib

import mujoco_hal_ros

ROS = pathlib.Path(mujoco_hal_ros.__file__).parent / 'ros'

# file (relative to ros/) -> how many thread starts it may hold, and why
ALLOWED = {
    'sim/streams.py': (1, 'the state publisher thread (joint_states, /tf, /clock)'),
    'sim/cameras.py': (1, 'the camera thread (renders and publishes images)'),
    'sim/sim_node.py': (1, 'builds the scene markers once at start, off the start-up path'),
    'swap/trajectory_controller.py': (1, 'publishes controller_state while subscribed'),
    'sim/description.py': (1, 'generates the URDF once at start, off the start-up path'),
    'sim/sensors.py': (1, 'the sensor and lidar publisher (sampled in simulated time)'),
    'bridge.py': (1, "the bridge's one worker for blocking core work"),
    'sim/policy.py': (1, "run_policy's one worker: an episode lasts its horizon, one at a "
                      "time, and must not hold up the bridge's worker"),
    'run.py': (1, 'spins the executor while the main thread waits for a signal'),
    'sim/dataset.py': (2, 'dataset requests (a save waits for the render backlog) and '
                       'replays (one lasts its episode), one worker each: neither may hold '
                       "up the bridge's worker"),
}
THREAD_MAKERS = {'Thread', 'Timer', 'ThreadPoolExecutor', 'start_new_thread'}


def _thread_starts(tree):
    """(line, maker) of every call of threading.Thread, threading.Timer,
    ThreadPoolExecutor, ..., also when imported under another name."""
    makers = {name: name for name in THREAD_MAKERS}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in THREAD_MAKERS:
                    makers[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, 'id', None)
            if name in makers:
                yield node.lineno, makers[name]


def test_threads_start_only_where_they_belong():
    sources = sorted(ROS.rglob('*.py'))
    assert len(sources) > 10, f'the ROS sources were not found under {ROS}'
    found = {}
    for path in sources:
        rel = path.relative_to(ROS).as_posix()
        starts = list(_thread_starts(ast.parse(path.read_text(), str(path))))
        if starts:
            found[rel] = starts
    extra = {rel: starts for rel, starts in found.items()
             if len(starts) > ALLOWED.get(rel, (0, ''))[0]}
    assert not extra, (
        f'threads started in the ROS layer outside their owners: {extra}. Answer a request '
        'through the node\'s CompletionBridge (mujoco_hal_ros/ros/bridge.py: wrap, move, '
        'run, sleep, wait, every) instead of a thread or a polling loop.')


def test_the_check_sees_a_thread():
    tree = ast.parse('import threading\nthreading.Thread(target=print).start()\n'
                     'from concurrent.futures import ThreadPoolExecutor as P\nP(2)\n'
                     'from threading import Timer\nTimer(1, print)\n')
    assert sorted(name for _, name in _thread_starts(tree)) == \
        ['Thread', 'ThreadPoolExecutor', 'Timer']
