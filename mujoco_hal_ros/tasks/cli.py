"""``evaluate_policy``: a policy on a task over the pool, from the command line (no ROS needed).

    evaluate_policy --task reach --policy pd.onnx --episodes 100 --envs 32 --seed 0 --json
    evaluate_policy --task reach --policy pd.onnx --episodes 50 --dataset rollouts/  # LeRobot
    ros2 run mujoco_hal_ros evaluate_policy --task walk_forward --policy zero --episodes 8

Human-readable lines go to stdout; with ``--json`` stdout is one JSON object and nothing
else (keys ``task``, ``episodes_done``, ``success_rate``, ``episode_results`` with
``episode``, ``success``, ``failure``, ``episode_return``, ``steps`` each,
``env_steps_per_s``, and more: doc/tasks.md lists them; ``episodes`` and ``return`` are
deprecated aliases), so ``evaluate_policy ... --json | jq .success_rate`` works; the
human-readable lines then go to stderr. A refused task or policy exits 2 before any
environment runs (with ``--json``: an ``{"error": {...}}`` object naming the key or the
sizes).
"""

import argparse
import json
import os
import sys

from ..errors import DeviceError

SHOW_EPISODES = 100      # one line per episode up to this many


def _parser():
    from . import builtin_tasks
    p = argparse.ArgumentParser(
        prog='evaluate_policy', description='Evaluate a policy on a task over many seeded, '
        'randomized episodes stepped in parallel (mujoco_hal_ros.tasks).')
    p.add_argument('--task', required=True,
                   help=f'a built-in task ({", ".join(builtin_tasks())}) or a task YAML '
                   'file')
    p.add_argument('--policy', required=True,
                   help='zero, random, FILE.onnx or module:attr (a callable on batches)')
    p.add_argument('--episodes', type=int, default=10, help='episodes to run (default 10)')
    p.add_argument('--envs', type=int, default=None,
                   help='environments stepped together (default min(episodes, 64))')
    p.add_argument('--seed', type=int, default=0, help='seeds every episode draw (default 0)')
    p.add_argument('--nthread', type=int, default=None,
                   help='pool threads (default: every core)')
    p.add_argument('--video', metavar='DIR', default=None,
                   help='write MP4s of the episodes --video-episodes names into DIR')
    p.add_argument('--video-episodes', default='0',
                   help='comma-separated episode indices to film (default 0)')
    p.add_argument('--dataset', metavar='DIR', default=None,
                   help='write every episode into DIR (new or empty) as a LeRobot v3 dataset, '
                   'with its success, failure and return in the episode metadata')
    p.add_argument('--cameras', default=None,
                   help='comma-separated cameras to record into --dataset (default: the '
                   'task\'s video camera; "" for none)')
    p.add_argument('--fps', type=float, default=None,
                   help='the dataset\'s fps; must be the task\'s control rate (the default)')
    p.add_argument('--repo-id', default=None, help='the dataset\'s repo_id (default '
                   'local/TASK)')
    p.add_argument('--json', action='store_true',
                   help='print the report as one JSON object, the only output on stdout '
                        '(the progress lines go to stderr)')
    p.add_argument('--describe', action='store_true',
                   help='print the task\'s observation and action layout first')
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from . import load_task
    from .evaluate import evaluate
    # with --json, stdout carries the JSON object alone (a pipe into jq); the rest is stderr
    human = sys.stderr if args.json else sys.stdout
    try:
        task = load_task(args.task)
        if args.describe:
            print(task.describe(), file=human, flush=True)
        record = []
        if args.video:
            try:
                record = sorted({int(x) for x in args.video_episodes.split(',') if x.strip()})
            except ValueError:
                return _refuse(args, DeviceError('INVALID_ARGUMENT', 'expected episode indices '
                                                 f'like 0,3,7, got {args.video_episodes!r}',
                                                 where='--video-episodes'))
            record = [e for e in record if 0 <= e < max(args.episodes, 0)]
        cameras = None if args.cameras is None else \
            [c.strip() for c in args.cameras.split(',') if c.strip()]
        if args.dataset is None and (args.cameras is not None or args.fps is not None):
            return _refuse(args, DeviceError('INVALID_ARGUMENT', '--cameras and --fps '
                                             'describe a dataset: add --dataset DIR',
                                             where='--dataset'))
        report = evaluate(task, args.policy, args.episodes, args.envs, args.seed,
                          nthread=args.nthread, record=record, dataset=args.dataset,
                          cameras=cameras, fps=args.fps, repo_id=args.repo_id)
        if report.dataset:
            print(f'dataset: {report.dataset}', file=human, flush=True)
        if args.video:
            from .video import write_videos
            for ep, path in write_videos(task, report, args.video).items():
                print(f'video of episode {ep}: {path}', file=human, flush=True)
    except DeviceError as err:
        return _refuse(args, err)
    shown = report.episode_results if report.episodes_done <= SHOW_EPISODES else []
    for e in shown:          # a long run says it in the summary (and the JSON) only
        state = 'success' if e.success else f'failure ({e.failure})'
        print(f'episode {e.episode}: {state} after {e.steps} steps, '
              f'return {e.episode_return:.3f}', file=human)
    print(report.summary(), file=human, flush=True)
    if args.json:
        print(json.dumps(report.to_dict()), flush=True)
    return 0


def _refuse(args: argparse.Namespace, err: DeviceError) -> int:
    print(f'evaluate_policy: {err}', file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({'error': err.to_dict()}), flush=True)
    return 2


if __name__ == '__main__':   # pragma: no cover - python -m mujoco_hal_ros.tasks.cli
    os.environ.setdefault('PYTHONUNBUFFERED', '1')
    sys.exit(main())
