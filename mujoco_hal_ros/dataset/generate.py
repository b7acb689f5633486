"""Generated demonstrations: an expert over N randomized episodes on the pool, as a dataset.

    generate_dataset --example pick_place --episodes 50 --out demos/ --nthread 2
    python -m mujoco_hal_ros.dataset.generate --task my_task.yaml --script steps.yaml \\
        --gripper actuator8 --episodes 100 --out demos/

Why this is ``tasks.evaluate`` with an expert for a policy: the pool already runs seeded,
randomized episodes (``Task.draw``) in parallel with sparse resets, judges each one by the
task's success and failure predicates, and records its episodes into a LeRobot dataset
(``generate_record``) with images rendered on the pool's own threads while it steps
(``EnvPool.render_async``).
A generated dataset and a policy-rollout dataset are therefore the same format with the same
per-episode metadata (success, failure, return, start state, randomization), and both replay
from their stored start state and actions. How much faster than real time: ``bench/
bench_dataset_generate.py`` (pool vs one loop) and ``doc/datasets.md``.

The expert is a script (``generate_expert.ScriptedExpert``: ``move_to`` / ``gripper`` /
``wait`` steps, from Python or a YAML list) or any policy ``evaluate`` takes (a callable
``f(obs) -> actions``, a ``Policy``).
"""

import argparse
from collections.abc import Callable, Sequence
import json
import os
import sys
from typing import Any

from ..errors import DeviceError, InvalidArgument

EXAMPLES = ('pick_place',)


def make_expert(task: Any, expert: Any, *, site: str = 'tcp', gripper: str | None = None,
                arm_joints: Sequence[str] | None = None) -> Any:
    """A list of steps becomes a ScriptedExpert; anything else goes to ``make_policy``."""
    from .generate_expert import ScriptedExpert
    if isinstance(expert, (list, tuple)):
        return ScriptedExpert(task, list(expert), site=site, gripper=gripper,
                              arm_joints=arm_joints)
    return expert


def generate(task: Any, expert: Any, episodes: int, folder: str | os.PathLike, *,
             envs: int | None = None, nthread: int | None = None, seed: int = 0,
             cameras: Sequence[str] | None = None, image_size: tuple[int, int] | None = None,
             repo_id: str | None = None, task_text: str | None = None, site: str = 'tcp',
             gripper: str | None = None, arm_joints: Sequence[str] | None = None,
             pool: Any = None, progress: Callable[[int, int], Any] | None = None) -> Any:
    """Run ``expert`` over ``episodes`` randomized episodes of ``task`` on the pool and write
    them into ``folder`` (a new or empty folder) as a LeRobot dataset; returns the
    ``EvaluationReport`` (``report.dataset`` is the folder).

    ``envs`` defaults to ``nthread`` (every worker renders one environment at a time and
    each running episode's frames wait in memory until it is written). Everything else is
    ``tasks.evaluate``'s.
    """
    from ..tasks.evaluate import evaluate
    from ..tasks.task import Task
    if not isinstance(task, Task):
        from ..tasks import load_task
        task = load_task(task)
    nthread = nthread or min(os.cpu_count() or 1, 8)
    if envs is None:
        envs = pool.nbatch if pool is not None else nthread
    policy = make_expert(task, expert, site=site, gripper=gripper, arm_joints=arm_joints)
    return evaluate(task, policy, episodes, envs, seed, pool=pool, nthread=nthread,
                    progress=progress, dataset=folder, cameras=cameras, repo_id=repo_id,
                    task_text=task_text, image_size=image_size)


def example(name: str) -> tuple[Any, list, dict]:
    """``(task, script, expert options)`` of a shipped example."""
    if name != 'pick_place':
        raise InvalidArgument(f'no example {name!r}', where='--example',
                              allowed=', '.join(EXAMPLES))
    from .generate_pick_place import pick_place_task, SCRIPT
    return pick_place_task(), SCRIPT, {'gripper': 'actuator8', 'site': 'tcp'}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog='generate_dataset', description='Generate demonstrations with a scripted expert '
        'over randomized episodes on the pool, written as a LeRobot v3 dataset.')
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument('--example', choices=EXAMPLES,
                     help='a shipped example (pick_place: Menagerie Panda, a cube, a goal)')
    src.add_argument('--task', help='a built-in task or a task YAML file (with --script)')
    p.add_argument('--script', help='a YAML file: a list of move_to / gripper / wait steps, '
                   'or module:attr naming a policy')
    p.add_argument('--site', default='tcp', help='the tool site move_to places (tcp)')
    p.add_argument('--gripper', default=None, help='the gripper actuator\'s name')
    p.add_argument('--out', required=True, metavar='DIR', help='the dataset folder (new)')
    p.add_argument('--episodes', type=int, default=10)
    p.add_argument('--envs', type=int, default=None, help='default: --nthread')
    p.add_argument('--nthread', type=int, default=None, help='pool threads (default: cores)')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--cameras', default=None,
                   help='comma-separated cameras (default: the task\'s video camera)')
    p.add_argument('--width', type=int, default=None)
    p.add_argument('--height', type=int, default=None)
    p.add_argument('--repo-id', default=None)
    p.add_argument('--json', action='store_true', help='print the report as JSON')
    return p


def _load_script(path: str) -> Any:
    if ':' in path and not os.path.exists(path):
        return path                       # module:attr, make_policy loads it
    import yaml
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as err:
        raise InvalidArgument(f'cannot read the script {path!r}: {err}', where='--script',
                              allowed='a YAML list of steps') from None
    if isinstance(data, dict) and 'script' in data:
        data = data['script']
    return data


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.example:
            task, script, opts = example(args.example)
        else:
            from ..tasks import load_task
            if not args.script:
                raise InvalidArgument('--task needs --script', where='--script',
                                      allowed='a YAML list of steps or module:attr')
            task, script = load_task(args.task), _load_script(args.script)
            opts = {'gripper': args.gripper, 'site': args.site}
        cameras = None if args.cameras is None else \
            [c.strip() for c in args.cameras.split(',') if c.strip()]
        size = None
        if args.width is not None or args.height is not None:
            video = task.spec.video
            size = (args.width or video.get('width', 480),
                    args.height or video.get('height', 360))

        shown = [-1]

        def progress(done, total):
            if done != shown[0]:           # once an episode, not every control step
                shown[0] = done
                print(f'\r{done}/{total} episodes', end='', file=sys.stderr, flush=True)

        report = generate(task, script, args.episodes, args.out, envs=args.envs,
                          nthread=args.nthread, seed=args.seed, cameras=cameras,
                          image_size=size, repo_id=args.repo_id, progress=progress, **opts)
    except DeviceError as err:
        print(f'generate_dataset: {err}', file=sys.stderr, flush=True)
        if args.json:
            print(json.dumps({'error': err.to_dict()}), flush=True)
        return 2
    print(file=sys.stderr)
    frames = report.env_steps
    print(f'{report.summary()}\n{frames} frames in {report.wall_s:.1f} s '
          f'({frames / report.wall_s:.0f} frames/s, '
          f'{frames * task.control_dt / report.wall_s:.0f}x real time) -> {report.dataset}',
          file=sys.stderr if args.json else sys.stdout, flush=True)
    if args.json:
        print(json.dumps(report.to_dict()), flush=True)
    return 0


if __name__ == '__main__':   # pragma: no cover
    sys.exit(main())
