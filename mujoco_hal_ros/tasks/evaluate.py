"""N episodes of a task over M pool environments, closed loop, with sparse resets.

Why results do not depend on M: each episode's start, command and model patch are drawn from
``(seed, episode)`` (``Task.draw``), the pool steps every environment bit-identically to a
serial ``mj_step`` loop whatever else is in the batch, policies see one row per environment
(and seeded ones are reset per episode), and an environment whose episode ends is reset with
the next episode at once while the others continue. So episode ``k`` yields the same success,
failure, return and step count on 1, 8 or 64 environments and on every run; only which slot
ran it changes. (An ONNX network whose matrix kernels round differently by batch size could
break this in the last bits; the tests check the networks built here.)

Per control step: one batched policy call for the running environments, the actions mapped to
controls (``actions``), one ``pool.step(decimation, ctrl, env_ids, sensors=...)`` (every
term the task reads is in qpos/qvel or a sensor the step computes, ``task``), then
predicates and rewards in NumPy. ``reference.run_episode`` is the same episode on one plain
MjData, and the tests hold the two equal state for state.
Any pool with EnvPool's API works: ``EnvPool`` or ``RayPool`` built on ``task.model``.

An episode ends at the first of: MuJoCo's instability auto-reset (failure ``unstable``), a
failure predicate (reported by name; failures are checked before success, so a robot that
falls over the line has failed), a success predicate, or the horizon (failure ``horizon``
when the task has success predicates; a task without any succeeds by lasting).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
import math
import os
import time
from typing import Any, TYPE_CHECKING

import numpy as np

from ..errors import InvalidArgument
from ..pool.validate import integer
from .policies import check_actions, make_policy, Policy
from .task import Frame, Task

if TYPE_CHECKING:
    from ..dataset.generate_record import RolloutRecorder
    from ..pool.pool import EnvPool
    from ..pool.ray_pool import RayPool

MAX_EPISODES = 10_000_000


class _PadSlots(dict):
    def __missing__(self, slot):
        return np.array([slot, -1])


# PAD: a batch of one environment reaches the policy as two rows, the second all zeros with
# slot -1. NumPy's ``obs @ w`` runs a different BLAS kernel (gemv) for one row than for many
# (gemm), whose sums round differently in the last bit, and the tail of an evaluation, or a
# run on one environment, would then differ from the same episodes run in a batch.
PAD_SLOTS = _PadSlots()


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a success rate: sound at 0 % and 100 %, unlike p +- 2se."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class EpisodeResult:
    """One episode's outcome. The same names in Python, in JSON (``to_dict``) and, prefixed
    ``episode_`` where a ROS result holds one array per field, in the actions' results:
    ``episode_return`` is ``EvaluatePolicy`` / ``RunPolicy``'s ``episode_return``."""

    episode: int
    success: bool
    failure: str | None      # the failure predicate, 'horizon' or 'unstable'; None on success
    episode_return: float       # undiscounted sum of rewards
    steps: int                  # control steps
    ended_by: str               # the predicate (success or failure) that ended it, or 'horizon'

    @property
    def ret(self) -> float:
        """Deprecated alias of ``episode_return`` (its earlier name)."""
        return self.episode_return

    def to_dict(self) -> dict:
        """JSON: ``return`` is a deprecated alias of ``episode_return``, kept for scripts."""
        return {'episode': self.episode, 'success': self.success, 'failure': self.failure,
                'episode_return': self.episode_return, 'return': self.episode_return,
                'steps': self.steps, 'ended_by': self.ended_by}


@dataclass
class EvaluationReport:
    """An evaluation's outcome. ``episode_results`` lists the finished episodes (JSON
    ``episode_results``), ``episodes_done`` counts them (JSON and the action's result
    ``episodes_done``), ``requested`` is how many were asked for (the action goal's
    ``episodes``). ``episodes`` is a deprecated alias of ``episode_results`` (and in JSON of
    ``episodes_done``), kept because scripts read it."""

    task: str
    policy: str
    seed: int
    envs: int
    episode_results: list[EpisodeResult]
    requested: int
    completed: bool             # False when progress() stopped it early
    wall_s: float
    env_steps: int              # control steps summed over environments
    physics_steps: int
    videos: dict[int, str] = field(default_factory=dict)
    states: dict[int, np.ndarray] = field(default_factory=dict)   # recorded episodes' rows
    dataset: str | None = None      # the LeRobot dataset folder the episodes went to

    @property
    def episodes(self) -> list[EpisodeResult]:
        """Deprecated alias of ``episode_results``."""
        return self.episode_results

    @property
    def episodes_done(self) -> int:
        return len(self.episode_results)

    @property
    def successes(self) -> int:
        return sum(e.success for e in self.episode_results)

    @property
    def success_rate(self) -> float:
        return self.successes / len(self.episode_results) if self.episode_results else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.successes, len(self.episode_results))

    @property
    def mean_return(self) -> float:
        results = self.episode_results
        return float(np.mean([e.episode_return for e in results])) if results else 0.0

    @property
    def env_steps_per_s(self) -> float:
        return self.env_steps / self.wall_s if self.wall_s > 0 else 0.0

    def failures(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.episode_results:
            if e.failure is not None:
                out[e.failure] = out.get(e.failure, 0) + 1
        return out

    def to_dict(self) -> dict:
        lo, hi = self.interval
        return {'task': self.task, 'policy': self.policy, 'seed': self.seed, 'envs': self.envs,
                'episodes_done': self.episodes_done, 'requested': self.requested,
                'episodes': self.episodes_done,          # deprecated alias of episodes_done
                'completed': self.completed, 'success_rate': self.success_rate,
                'success_interval_95': [lo, hi], 'mean_return': self.mean_return,
                'failures': self.failures(),
                'episode_results': [e.to_dict() for e in self.episode_results],
                'env_steps': self.env_steps, 'env_steps_per_s': self.env_steps_per_s,
                'physics_steps_per_s': self.physics_steps / self.wall_s if self.wall_s else 0.0,
                'wall_s': self.wall_s, 'videos': {str(k): v for k, v in self.videos.items()},
                'dataset': self.dataset}

    def summary(self) -> str:
        lo, hi = self.interval
        fails = ', '.join(f'{k} {v}' for k, v in sorted(self.failures().items())) or 'none'
        return (f'{self.task} / {self.policy}: {self.successes}/{self.episodes_done} succeeded '
                f'({100 * self.success_rate:.1f} %, 95 % CI {100 * lo:.1f}-{100 * hi:.1f} %), '
                f'mean return {self.mean_return:.3f}, failures: {fails}; '
                f'{self.env_steps_per_s:.0f} env-steps/s on {self.envs} envs')


def _check_pool(pool, task, envs):
    m, t = pool.model, task.model
    if (m.nq, m.nv, m.nu, m.nsensordata) != (t.nq, t.nv, t.nu, t.nsensordata):
        raise InvalidArgument('the pool does not run this task\'s model (sizes nq, nv, nu, '
                              f'nsensordata {(m.nq, m.nv, m.nu, m.nsensordata)} vs '
                              f'{(t.nq, t.nv, t.nu, t.nsensordata)})', where='pool',
                              allowed='a pool built on task.model, e.g. task.make_pool(n)')
    if envs > pool.nbatch:
        raise InvalidArgument(f'{envs} environments asked, the pool has {pool.nbatch}',
                              where='envs', allowed=f'1..{pool.nbatch}')


def evaluate(task: Task, policy: Policy | Callable[..., Any] | str, episodes: int,
             envs: int | None = None, seed: int = 0, *,
             pool: 'EnvPool | RayPool | None' = None, nthread: int | None = None,
             record: Sequence[int] = (),
             progress: Callable[[int, int], bool | None] | None = None,
             dataset: str | os.PathLike | None = None, cameras: Sequence[str] | None = None,
             fps: float | None = None, repo_id: str | None = None,
             task_text: str | None = None, image_size: tuple[int, int] | None = None
             ) -> EvaluationReport:
    """Run ``episodes`` episodes of ``task`` under ``policy`` over ``envs`` environments.

    Args:
      policy: a Policy, a callable, or 'zero' / 'random' / 'FILE.onnx' / 'module:attr'
        (``make_policy``); refused before any environment runs when its sizes do not fit.
      envs: environments stepped together (default: ``min(episodes, 64)``, or the pool's).
      seed: with the episode index, seeds every draw (and the random policy).
      pool: an EnvPool or RayPool on ``task.model`` to run on (its first ``envs``
        environments are reset); by default a fresh EnvPool, closed afterwards.
      record: episode indices whose physics rows are kept (``report.states``, for video).
      progress: ``progress(episodes_done, episodes)`` after each control step; returning
        False stops between control steps (``report.completed`` is then False).
      dataset: a new or empty folder (or a dataset to append to): every episode is
        written there as a LeRobot dataset
        (``dataset.generate_record``), in episode order, with its success, failure, return
        and start state in the episode's metadata; ``report.dataset`` is the folder. Images
        are rendered on the pool's threads (an EnvPool). The controls are then rounded to
        float32 before they are applied, so the stored actions replay exactly.
      cameras: camera names to record (default: the task's ``video.camera``, if any).
      fps: must be the task's control rate (one frame a control step); default that.
      repo_id, task_text: the dataset's ``repo_id`` and task sentence (defaults from the
        task's name). image_size: ``(width, height)``, default the task's video size.
    """
    if not isinstance(task, Task):
        raise InvalidArgument(f'expected a Task, got {type(task).__name__}', where='task',
                              allowed='load_task(name) or Task.from_file(path)')
    n_ep = integer(episodes, 'episodes', 1, MAX_EPISODES)
    seed = integer(seed, 'seed', 0, 2 ** 63 - 1)
    if envs is None:
        envs = pool.nbatch if pool is not None else min(n_ep, 64)
    envs = integer(envs, 'envs', 1, 65536)
    videos = {integer(e, 'record', 0, n_ep - 1) for e in record}
    policy = make_policy(policy, task, seed)
    if pool is not None:
        _check_pool(pool, task, envs)
        wanted = task.spec.video.get('camera') if cameras is None else cameras
        if dataset is not None and wanted and not hasattr(pool, 'render'):
            raise InvalidArgument(f'{type(pool).__name__} cannot render dataset images',
                                  where='pool', allowed='an EnvPool, or cameras=[]')
    else:
        nthread = integer(nthread or os.cpu_count() or 1, 'nthread', 1, 1024)
    sink = None
    if dataset is None and any(v is not None for v in (cameras, fps, repo_id, task_text,
                                                       image_size)):
        raise InvalidArgument('cameras, fps, repo_id, task_text and image_size describe a '
                              'dataset, and no dataset folder was given', where='dataset',
                              allowed='dataset=FOLDER with them, or none of them')
    if dataset is not None:
        from ..dataset.generate_record import RolloutRecorder
        width = height = None
        if image_size is not None:
            if not isinstance(image_size, (tuple, list)) or len(image_size) != 2:
                raise InvalidArgument(f'image_size {image_size!r} is not (width, height)',
                                      where='image_size', allowed='(width, height)')
            width, height = image_size
        sink = RolloutRecorder(task, dataset, cameras=cameras, fps=fps, repo_id=repo_id,
                               task_text=task_text, width=width, height=height, seed=seed,
                               policy=policy.name)
    own_pool = pool is None
    try:
        if pool is None:             # own_pool
            assert nthread is not None     # checked above when no pool was given
            pool = task.make_pool(min(envs, n_ep), nthread=nthread)
        report = _run(task, policy, n_ep, min(envs, n_ep), seed, pool, videos, progress,
                      sink)
        if sink is not None:
            report.dataset = sink.finish()
            sink = None
        return report
    finally:
        if sink is not None:
            sink.abort()
        if own_pool and pool is not None:
            pool.close()


def _run(task: Task, policy: Policy, n_ep: int, m: int, seed: int, pool: 'EnvPool | RayPool',
         record: set[int], progress: Callable[[int, int], bool | None] | None,
         sink: 'RolloutRecorder | None' = None) -> EvaluationReport:
    t0 = time.perf_counter()
    lay = task.layout
    qpos_at = next(off for name, off, _ in lay.components if name == 'qpos')
    qvel_at = next(off for name, off, _ in lay.components if name == 'qvel')
    model = task.model
    amap = task.actions
    qpos = np.zeros((m, model.nq))
    qvel = np.zeros((m, model.nv))
    sens = np.zeros((m, model.nsensordata))
    cmd = np.zeros((m, task.command_size))
    last = np.zeros((m, task.act_size))
    setpoint = np.zeros((m, task.act_size))
    ctrl0 = np.zeros((m, model.nu))     # each episode's starting controls (servos at its start)
    steps = np.zeros(m, dtype=np.int64)
    ret = np.zeros(m)
    ep_of = np.full(m, -1, dtype=np.int64)
    active = np.zeros(m, dtype=bool)
    results: dict[int, EpisodeResult] = {}
    states: dict[int, list[np.ndarray]] = {}
    next_ep = 0
    env_steps = 0
    has_success = bool(task.success_names)
    use_sens = task.uses_sensordata

    def start(slots):
        nonlocal next_ep
        eps = np.arange(next_ep, next_ep + len(slots))
        next_ep += len(slots)
        draws = [task.draw(seed, int(e)) for e in eps]
        rows = np.stack([d.state for d in draws])
        patch = None
        if draws[0].patch is not None:
            patch = {k: np.stack([d.patch[k] for d in draws]) for k in draws[0].patch}
        pool.reset(slots, states=rows, randomization=patch)
        if use_sens:
            sens[slots] = pool.forward(slots).sensordata
        qpos[slots] = rows[:, qpos_at:qpos_at + model.nq]
        qvel[slots] = rows[:, qvel_at:qvel_at + model.nv]
        cmd[slots] = np.stack([d.command for d in draws]) if task.command_size else 0.0
        last[slots] = 0.0
        ctrl0[slots] = np.stack([task.start_ctrl if d.ctrl is None else d.ctrl for d in draws])
        setpoint[slots] = amap.first_setpoints(len(slots), ctrl0[slots])
        steps[slots] = 0
        ret[slots] = 0.0
        ep_of[slots] = eps
        active[slots] = True
        for e, row in zip(eps, rows, strict=True):
            if int(e) in record:
                states[int(e)] = [row.copy()]
        policy.reset(slots, eps)
        if sink is not None:
            sink.begin(eps, pool.get_state(slots, full=True), draws)

    start(np.arange(m))
    completed = True
    while active.any():
        ids = np.nonzero(active)[0]
        frame = Frame(qpos[ids], qvel[ids], sens[ids], cmd[ids], last[ids], last[ids])
        obs = task.observe(frame)
        if len(ids) == 1:   # see PAD: two rows keep a matrix product on its batched kernel
            out = policy.act(np.concatenate([obs, np.zeros_like(obs)]), PAD_SLOTS[ids[0]])
            out = out[:1] if isinstance(out, np.ndarray) and out.ndim == 2 else out
        else:
            out = policy.act(obs, ids)
        act = check_actions(out, len(ids), task, policy.name, ep_of[ids])
        sp = amap.apply(act, setpoint[ids])
        ctrl = amap.full_ctrl(sp, ctrl0[ids])
        if sink is not None:    # the stored float32 action is exactly what runs
            ctrl = ctrl.astype(np.float32).astype(np.float64)
            # rendered while the pool steps on (an EnvPool's jobs), else here and now;
            # evaluate refused a pool without render() (a RayPool) for a dataset's images
            render = getattr(pool, 'render_async', None) or \
                pool.render  # type: ignore[union-attr]
            images = (render(sink.cameras, ids, width=sink.width, height=sink.height)
                      if sink.cameras else None)
            sink.frames(ep_of[ids], qpos[ids], qvel[ids], ctrl, images)
        res = pool.step(task.decimation, ctrl=ctrl, env_ids=ids, sensors=use_sens)
        env_steps += len(ids)
        setpoint[ids] = sp
        qpos[ids], qvel[ids] = res.qpos, res.qvel
        if use_sens:
            sens[ids] = res.sensordata
        after = Frame(res.qpos, res.qvel, sens[ids], cmd[ids], act, last[ids])
        succ, fail = task.predicates(after)
        ret[ids] += task.reward(after, succ, fail)
        last[ids] = act
        steps[ids] += 1
        for p, e in enumerate(ep_of[ids].tolist()):
            if e in states:
                states[e].append(res.state[p].copy())
        unstable = np.asarray(res.unstable, dtype=bool)
        ended = unstable | (fail >= 0) | (succ >= 0) | (steps[ids] >= task.horizon)
        if ended.any():
            done = ids[ended]
            for p in np.nonzero(ended)[0].tolist():
                s = int(ids[p])
                if unstable[p]:
                    ok, failure, by = False, 'unstable', 'unstable'
                elif fail[p] >= 0:
                    failure = task.failure_names[fail[p]]
                    ok, by = False, failure
                elif succ[p] >= 0:
                    ok, failure, by = True, None, task.success_names[succ[p]]
                else:
                    ok = not has_success
                    failure, by = (None if ok else 'horizon'), 'horizon'
                e = int(ep_of[s])
                results[e] = EpisodeResult(e, ok, failure, float(ret[s]), int(steps[s]), by)
                if sink is not None:
                    sink.end(results[e])
            active[done] = False
            more = min(len(done), n_ep - next_ep)
            if more:
                start(np.sort(done)[:more])
        if progress is not None and progress(len(results), n_ep) is False and active.any():
            completed = False
            break
    wall = time.perf_counter() - t0
    return EvaluationReport(
        task=task.name, policy=policy.name, seed=seed, envs=m,
        episode_results=[results[k] for k in sorted(results)], requested=n_ep, completed=completed,
        wall_s=wall, env_steps=env_steps, physics_steps=env_steps * task.decimation,
        states={k: np.stack(v) for k, v in states.items()})
