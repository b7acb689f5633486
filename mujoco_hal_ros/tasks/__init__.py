"""Tasks and closed-loop policy evaluation on the pool (no ROS here).

A task (YAML, or a dict) names a model and its start, what is randomized per episode, what a
policy observes and commands, when an episode succeeds or fails, and what it is rewarded::

    from mujoco_hal_ros.tasks import load_task, make_policy, evaluate
    task = load_task('reach')                      # built in, or a path to a YAML file
    policy = make_policy('pd.onnx', task)          # zero, random, FILE.onnx, module:attr
    report = evaluate(task, policy, episodes=100, envs=32, seed=0)
    report.success_rate, report.interval, report.episode_results[0].failure

Module map: ``spec`` (the task file's keys, checked), ``task`` (resolved against the model:
observations, predicates, rewards, per-episode draws), ``actions`` (policy outputs to
controls), ``policies`` (ONNX, callables, zero, random), ``evaluate`` (episodes over the
pool with sparse resets), ``reference`` (one episode on one MjData, the serial reference),
``video`` (MP4s of chosen episodes), ``gym`` (Gymnasium Env and VectorEnv), ``onnx_models``
(small ONNX policies), ``cli`` (``evaluate_policy``). Task files: ``doc/tasks.md``.
"""

import os

from ..errors import shorten
from .spec import (
    ActionSpec,
    CommandTerm,
    FieldTerm,
    FrameTerm,
    load_file,
    parse,
    TaskError,
    TaskSpec,
    Term,
)
from .task import Task

BUILTIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'builtin')


def builtin_tasks() -> list[str]:
    """Names of the built-in tasks (YAML files in ``tasks/builtin/``, ready to copy)."""
    return sorted(f[:-5] for f in os.listdir(BUILTIN_DIR) if f.endswith('.yaml'))


def load_task(name_or_path: str) -> Task:
    """A built-in task by name (``builtin_tasks()``, the table in doc/tasks.md) or a task
    file by path."""
    if not isinstance(name_or_path, str) or not name_or_path:
        raise TaskError(f'expected a task name or file, got {shorten(name_or_path)}',
                        where='task', allowed=', '.join(builtin_tasks()) + ' or a YAML path')
    if name_or_path in builtin_tasks():
        return Task.from_file(os.path.join(BUILTIN_DIR, name_or_path + '.yaml'))
    if not os.path.isfile(name_or_path):
        raise TaskError(f'no built-in task and no file named {shorten(name_or_path)}',
                        where='task', allowed=', '.join(builtin_tasks()) + ' or a YAML path')
    return Task.from_file(name_or_path)


from .evaluate import EpisodeResult, evaluate, EvaluationReport, wilson_interval  # noqa: E402
from .policies import make_policy, Policy  # noqa: E402

__all__ = ['Task', 'TaskSpec', 'Term', 'CommandTerm', 'FieldTerm', 'FrameTerm', 'ActionSpec',
           'TaskError',
           'load_task', 'load_file', 'parse',
           'builtin_tasks', 'Policy', 'make_policy', 'evaluate', 'EvaluationReport',
           'EpisodeResult', 'wilson_interval']
