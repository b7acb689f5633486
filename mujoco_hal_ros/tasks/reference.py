"""One episode on one plain MjData: the serial reference the pool's episodes must equal.

Why it exists: ``evaluate`` claims that its episodes are what a single MuJoCo simulation
would do, state for state; this is that single simulation, written the plain way (copy the
model for the episode's field patch, ``mj_setConst``, ``mj_resetData`` + ``mj_setState``,
``mj_step`` x decimation per control step), so tests compare the two exactly. It is also the
loop a real-time device runs for a task (sim_node's ``run_policy``): the same draw, the same
observation from the same sensors, the same action map, in the same order.
"""

import copy
from typing import Any

import mujoco
import numpy as np

from ..pool.layout import FULLPHYSICS
from ..pool.randomization import FIELDS, view
from .evaluate import EpisodeResult
from .policies import check_actions, make_policy
from .task import Frame, Task

_BAD = [int(mujoco.mjtWarning.mjWARN_BADQPOS), int(mujoco.mjtWarning.mjWARN_BADQVEL),
        int(mujoco.mjtWarning.mjWARN_BADQACC)]


def episode_model(task: Task, patch: dict[str, np.ndarray] | None) -> mujoco.MjModel:
    """The task's model with an episode's field patch written in (and mj_setConst run when a
    patched field needs it); the task's own model when there is no patch."""
    if not patch:
        return task.model
    m = copy.copy(task.model)
    for key, value in patch.items():
        view(m, key)[...] = value
    if any(FIELDS[k][0] for k in patch):
        mujoco.mj_setConst(m, mujoco.MjData(m))
    return m


def verdict(task: Task, succ: np.ndarray, fail: np.ndarray, unstable: bool
            ) -> tuple[bool, str | None, str] | None:
    """How one environment's episode ends after a control step, as the pool's evaluator
    judges it: (success, the failure's name, what ended it), or None when it goes on.
    Instability first, then a failure predicate, then a success predicate."""
    if unstable:
        return False, 'unstable', 'unstable'
    if fail[0] >= 0:
        return False, task.failure_names[fail[0]], task.failure_names[fail[0]]
    if succ[0] >= 0:
        return True, None, task.success_names[succ[0]]
    return None


def run_episode(task: Task, policy: Any, seed: int, episode: int, record: bool = False
                ) -> tuple[EpisodeResult, np.ndarray | None]:
    """Episode ``episode`` under ``seed`` on one MjData; ``record``: its physics rows too."""
    policy = make_policy(policy, task, seed)
    draw = task.draw(seed, episode)
    m = episode_model(task, draw.patch)
    d = mujoco.MjData(m)
    mujoco.mj_resetData(m, d)
    mujoco.mj_setState(m, d, draw.state, FULLPHYSICS)
    mujoco.mj_forward(m, d)
    amap = task.actions
    slots = np.array([0, -1])        # as ``evaluate`` pads a batch of one
    policy.reset(slots[:1], np.array([episode]))
    cmd = draw.command[None]
    last = np.zeros((1, task.act_size))
    ctrl0 = task.start_ctrl if draw.ctrl is None else draw.ctrl
    setpoint = amap.first_setpoints(1, ctrl0)
    rows: list[np.ndarray] = [draw.state.copy()]
    ret, steps = 0.0, 0
    ok, failure, by = (not task.success_names), None, 'horizon'
    while steps < task.horizon:
        frame = Frame(d.qpos[None].copy(), d.qvel[None].copy(), d.sensordata[None].copy(),
                      cmd, last, last)
        obs = task.observe(frame)
        out = policy.act(np.concatenate([obs, np.zeros_like(obs)]), slots)
        act = check_actions(out[:1] if np.ndim(out) == 2 else out, 1, task, policy.name)
        setpoint = amap.apply(act, setpoint)
        d.ctrl[:] = amap.full_ctrl(setpoint, ctrl0)[0]
        d.warning.number[_BAD] = 0
        for _ in range(task.decimation):
            mujoco.mj_step(m, d)
        if task.uses_sensordata:
            mujoco.mj_forward(m, d)          # sensors at the state the step ended in
        steps += 1
        if record:
            row = np.empty(mujoco.mj_stateSize(m, FULLPHYSICS))
            mujoco.mj_getState(m, d, row, FULLPHYSICS)
            rows.append(row)
        after = Frame(d.qpos[None].copy(), d.qvel[None].copy(), d.sensordata[None].copy(),
                      cmd, act, last)
        succ, fail = task.predicates(after)
        ret += float(task.reward(after, succ, fail)[0])
        last = act
        end = verdict(task, succ, fail, bool(d.warning.number[_BAD].any()))
        if end is not None:
            ok, failure, by = end
            break
    else:
        if task.success_names:
            failure = 'horizon'
    return EpisodeResult(episode, ok, failure, ret, steps, by), \
        (np.stack(rows) if record else None)
