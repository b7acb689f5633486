"""Gymnasium environments over a task: ``TaskEnv`` (one) and ``TaskVectorEnv`` (a pool).

Why: RL libraries train through Gymnasium's API, and a policy trained on exactly the task the
evaluator and the device use needs no translation layer. Both step a pool (``EnvPool``), so
observations, actions, rewards, success and failure are the evaluator's own (``evaluate``);
``terminated`` is a success or failure predicate (or MuJoCo's instability reset),
``truncated`` the horizon, and ``info`` says ``success`` and ``failure`` by name.

Episode draws come from ``(seed, episode)`` as in the evaluator: ``reset(seed=s)`` restarts
the episode counter at 0 under seed ``s``, later resets take the next episode indices. The
vector environment resets finished environments on their next ``step`` (Gymnasium's default
``NEXT_STEP`` autoreset: that step's action is ignored and its reward is 0).

Observations are float32 in an unbounded Box; actions a Box in [-1, 1] (what the task's
``scale`` maps to controls; clipping to ``ctrlrange`` happens in the action map).
"""

from typing import Any

import numpy as np

try:
    import gymnasium
    from gymnasium import spaces
    from gymnasium.vector import AutoresetMode, VectorEnv
except ImportError:  # pragma: no cover - an optional extra
    gymnasium = None  # type: ignore[assignment]
    VectorEnv = object  # type: ignore[assignment,misc]

from ..errors import ConfigError
from .task import Frame, Task


def _need_gymnasium():
    if gymnasium is None:
        raise ConfigError('the Gymnasium environments need gymnasium: pip install gymnasium',
                          where='gymnasium')


class _Runner:
    """The evaluator's per-environment bookkeeping, for callers that drive steps themselves."""

    def __init__(self, task: Task, n: int, nthread: int = 1):
        self.task = task
        self.pool = task.make_pool(n, nthread=nthread)
        m = task.model
        lay = {name: off for name, off, _ in task.layout.components}
        self._qpos, self._qvel = lay['qpos'], lay['qvel']
        self.qpos = np.zeros((n, m.nq))
        self.qvel = np.zeros((n, m.nv))
        self.sens = np.zeros((n, m.nsensordata))
        self.cmd = np.zeros((n, task.command_size))
        self.last = np.zeros((n, task.act_size))
        self.setpoint = np.zeros((n, task.act_size))
        self.ctrl0 = np.zeros((n, m.nu))      # each episode's starting controls
        self.steps = np.zeros(n, dtype=np.int64)

    def reset(self, slots: np.ndarray, seed: int, episodes: np.ndarray) -> np.ndarray:
        task, m = self.task, self.task.model
        draws = [task.draw(seed, int(e)) for e in episodes]
        rows = np.stack([d.state for d in draws])
        patch = None
        if draws[0].patch is not None:
            patch = {k: np.stack([(d.patch or {})[k] for d in draws]) for k in draws[0].patch}
        self.pool.reset(slots, states=rows, randomization=patch)
        if task.uses_sensordata:
            self.sens[slots] = self.pool.forward(slots).sensordata
        self.qpos[slots] = rows[:, self._qpos:self._qpos + m.nq]
        self.qvel[slots] = rows[:, self._qvel:self._qvel + m.nv]
        self.cmd[slots] = np.stack([d.command for d in draws]) if task.command_size else 0.0
        self.last[slots] = 0.0
        self.ctrl0[slots] = np.stack([task.start_ctrl if d.ctrl is None else d.ctrl
                                      for d in draws])
        self.setpoint[slots] = task.actions.first_setpoints(len(slots), self.ctrl0[slots])
        self.steps[slots] = 0
        return self.observe(slots)

    def observe(self, slots):
        f = Frame(self.qpos[slots], self.qvel[slots], self.sens[slots], self.cmd[slots],
                  self.last[slots], self.last[slots])
        return self.task.observe(f).astype(np.float32)

    def step(self, slots, act):
        task = self.task
        sp = task.actions.apply(act, self.setpoint[slots])
        res = self.pool.step(task.decimation, ctrl=task.actions.full_ctrl(sp, self.ctrl0[slots]),
                             env_ids=slots,
                             sensors=task.uses_sensordata)
        self.setpoint[slots] = sp
        self.qpos[slots], self.qvel[slots] = res.qpos, res.qvel
        if task.uses_sensordata:
            self.sens[slots] = res.sensordata
        f = Frame(res.qpos, res.qvel, self.sens[slots], self.cmd[slots], act, self.last[slots])
        succ, fail = task.predicates(f)
        reward = task.reward(f, succ, fail)
        self.last[slots] = act
        self.steps[slots] += 1
        unstable = np.asarray(res.unstable, dtype=bool)
        terminated = unstable | (succ >= 0) | (fail >= 0)
        truncated = ~terminated & (self.steps[slots] >= task.horizon)
        failure = [('unstable' if unstable[p] else task.failure_names[fail[p]] if fail[p] >= 0
                    else None) for p in range(len(slots))]
        success = ~unstable & (fail < 0) & (succ >= 0)
        return reward, terminated, truncated, success, failure

    def close(self) -> None:
        self.pool.close()


def _spaces(task):
    obs = spaces.Box(-np.inf, np.inf, (task.obs_size,), np.float32)
    act = spaces.Box(-1.0, 1.0, (task.act_size,), np.float32)
    return obs, act


class TaskEnv(gymnasium.Env if gymnasium is not None else object):  # type: ignore[misc]
    """One environment of ``task`` (a pool of one underneath, so it steps as the evaluator)."""

    metadata: dict[str, Any] = {'render_modes': []}

    def __init__(self, task: Any, seed: int = 0):
        _need_gymnasium()
        if isinstance(task, str):
            from . import load_task
            task = load_task(task)
        self.task = task
        self.observation_space, self.action_space = _spaces(task)
        self._runner = _Runner(task, 1)
        self._seed, self._episode = int(seed), 0
        self._slots = np.array([0])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._seed, self._episode = int(seed), 0
        obs = self._runner.reset(self._slots, self._seed, np.array([self._episode]))
        self._episode += 1
        return obs[0], {'episode': self._episode - 1}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        act = np.asarray(action, dtype=np.float64).reshape(1, self.task.act_size)
        if not np.isfinite(act).all():
            raise ValueError('actions must be finite numbers')
        reward, term, trunc, success, failure = self._runner.step(self._slots, act)
        obs = self._runner.observe(self._slots)
        info = {'success': bool(success[0]), 'failure': failure[0]}
        if trunc[0] and self.task.success_names:
            info['failure'] = 'horizon'
        return obs[0], float(reward[0]), bool(term[0]), bool(trunc[0]), info

    def close(self) -> None:
        self._runner.close()


class TaskVectorEnv(VectorEnv):
    """``num_envs`` environments of ``task`` stepped together on one EnvPool."""

    metadata = {'autoreset_mode': AutoresetMode.NEXT_STEP if gymnasium is not None else None}

    def __init__(self, task: Any, num_envs: int, seed: int = 0, nthread: int = 1):
        _need_gymnasium()
        if isinstance(task, str):
            from . import load_task
            task = load_task(task)
        self.task = task
        self.num_envs = int(num_envs)
        self.single_observation_space, self.single_action_space = _spaces(task)
        self.observation_space = gymnasium.vector.utils.batch_space(
            self.single_observation_space, self.num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space,
                                                               self.num_envs)
        self._runner = _Runner(task, self.num_envs, nthread)
        self._seed, self._next = int(seed), 0
        self._done = np.zeros(self.num_envs, dtype=bool)
        self._all = np.arange(self.num_envs)

    def _episodes(self, n):
        eps = np.arange(self._next, self._next + n)
        self._next += n
        return eps

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None:
            self._seed, self._next = int(seed) if not isinstance(seed, list) else \
                int(seed[0]), 0
        obs = self._runner.reset(self._all, self._seed, self._episodes(self.num_envs))
        self._done[:] = False
        return obs, {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                 dict[str, Any]]:
        act = np.asarray(actions, dtype=np.float64).reshape(self.num_envs, self.task.act_size)
        if not np.isfinite(act).all():
            raise ValueError('actions must be finite numbers')
        reward = np.zeros(self.num_envs)
        term = np.zeros(self.num_envs, dtype=bool)
        trunc = np.zeros(self.num_envs, dtype=bool)
        success = np.zeros(self.num_envs, dtype=bool)
        failure = np.full(self.num_envs, None, dtype=object)
        restart = np.nonzero(self._done)[0]
        run = np.nonzero(~self._done)[0]
        if len(run):
            r, te, tr, su, fa = self._runner.step(run, act[run])
            reward[run], term[run], trunc[run], success[run] = r, te, tr, su
            failure[run] = fa
        if len(restart):
            self._runner.reset(restart, self._seed, self._episodes(len(restart)))
        self._done[:] = term | trunc
        obs = self._runner.observe(self._all)
        return obs, reward, term, trunc, {'success': success, 'failure': failure}

    def close_extras(self, **kwargs: Any) -> None:
        self._runner.close()
