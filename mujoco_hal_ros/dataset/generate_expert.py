"""A scripted expert: ``move_to`` and ``gripper`` steps played as a policy over a task.

Why a policy over the task's observation and not a controller with access to the physics:
the same expert then runs wherever a policy runs (``evaluate``, ``evaluate_policy``, the
pool_node action) and its episodes are recorded by the one path that records policy
rollouts, so a generated demonstration and an evaluated rollout are the same kind of data.
What the expert reads (the arm's joints, the bodies and commands its steps name) must
therefore be in the task's observation; the constructor says which term is missing.

A script is a list of steps, as Python dicts or a YAML list::

    - move_to: {to: {body: cube, offset: [0, 0, 0.12]}, duration: 1.2}
    - gripper: {value: 0.0, duration: 0.6}       # the gripper actuator's setpoint
    - wait: {duration: 0.5}

``move_to`` solves IK (``motion.ik``) once, at the step's first control step, for the tool
site at the target (a body's observed position, a command, or a fixed ``point``, plus
``offset``), pointing the site's z axis down and keeping the hand's yaw, then moves the arm's
position servos there along a smoothstep in joint space over ``duration`` seconds. After the
last step the expert holds its last setpoints. The task's action must be the actuators'
own setpoints (``mode: absolute``, ``units: channel``, ``scale: 1``, every actuator).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
import math
from typing import Any

import mujoco
import numpy as np

from ..errors import InvalidArgument
from ..motion.ik import IKSolver
from ..tasks.policies import Policy

STEP_KINDS = ('move_to', 'gripper', 'wait')
DOWN = ((0.0, 0.0, 1.0), (0.0, 0.0, -1.0))     # the site's z axis along world -z


@dataclass
class Step:
    kind: str
    steps: int                       # control steps
    target: dict[str, Any] = field(default_factory=dict)  # move_to: body|command|point, offset
    value: float = 0.0               # gripper: the setpoint


def _duration(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0 or value > 3600:
        raise InvalidArgument(f'duration {value!r} is not a number of seconds in (0, 3600]',
                              where=where, allowed='seconds, e.g. 1.0')
    return float(value)


def _xyz(value: Any, where: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float) if isinstance(value, (list, tuple)) else None
    if arr is None or arr.shape != (3,) or not np.isfinite(arr).all():
        raise InvalidArgument(f'{value!r} is not three finite numbers', where=where,
                              allowed='[x, y, z] in metres')
    return arr


def parse_script(script: Any, control_hz: float) -> list[Step]:
    """Checked steps with durations in control steps; InvalidArgument naming the bad key."""
    if isinstance(script, (str, bytes)) or not isinstance(script, Sequence) or not script:
        raise InvalidArgument('a script is a non-empty list of steps', where='script',
                              allowed=f'[{{kind: {{...}}}}, ...], kind one of {STEP_KINDS}')
    out = []
    for i, entry in enumerate(script):
        where = f'script[{i}]'
        if not isinstance(entry, dict) or len(entry) != 1 or next(iter(entry)) not in \
                STEP_KINDS or not isinstance(next(iter(entry.values())), dict):
            raise InvalidArgument(f'{entry!r} is not one step', where=where,
                                  allowed=f'{{kind: {{...}}}} with kind one of {STEP_KINDS}')
        kind, args = next(iter(entry.items()))
        allowed = {'move_to': {'to', 'duration'}, 'gripper': {'value', 'duration'},
                   'wait': {'duration'}}[kind]
        extra = set(args) - allowed
        if extra or 'duration' not in args:
            raise InvalidArgument(f'{kind} takes {sorted(allowed)}, got {sorted(args)}',
                                  where=f'{where}.{kind}', allowed=', '.join(sorted(allowed)))
        n = max(1, round(_duration(args['duration'], f'{where}.{kind}.duration') * control_hz))
        step = Step(kind, n)
        if kind == 'move_to':
            to = args.get('to')
            keys = {'body', 'command', 'point'}
            if not isinstance(to, dict) or len(keys & set(to)) != 1 or \
                    set(to) - keys - {'offset'}:
                raise InvalidArgument(f'to: {to!r} names no single target', where=f'{where}.'
                                      'move_to.to', allowed='{body: NAME} or {command: NAME} '
                                      'or {point: [x, y, z]}, with an optional offset')
            offset = _xyz(to.get('offset', [0, 0, 0]), f'{where}.move_to.offset')
            target: dict[str, Any] = {'offset': offset}
            if 'point' in to:
                target['point'] = _xyz(to['point'], f'{where}.move_to.to.point')
            else:
                kind_key = 'body' if 'body' in to else 'command'
                target[kind_key] = str(to[kind_key])
            step.target = target
        elif kind == 'gripper':
            value = args.get('value')
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not math.isfinite(value):
                raise InvalidArgument(f'gripper value {value!r} is not a number',
                                      where=f'{where}.gripper.value',
                                      allowed="the gripper actuator's setpoint")
            step.value = float(value)
        out.append(step)
    return out


class _Run:
    """One environment's progress through the script."""

    def __init__(self, q: np.ndarray, grip: float) -> None:
        self.index = 0
        self.k = 0
        self.q_from = q.copy()
        self.q_to = q.copy()
        self.grip = grip


class ScriptedExpert(Policy):
    """``move_to`` / ``gripper`` / ``wait`` steps as a Policy over ``task``'s observation.

    Args:
      task: the task it acts in (its action: every actuator's setpoint, absolute, scale 1).
      script: the steps (see the module doc).
      site: the tool site ``move_to`` places.
      arm_joints: the joints IK moves (default: the site's kinematic chain).
      gripper: the gripper's actuator name (its setpoint at the start is the first value).
    """

    name = 'scripted_expert'

    def __init__(self, task: Any, script: Any, *, site: str = 'tcp',
                 arm_joints: Sequence[str] | None = None, gripper: str | None = None) -> None:
        model = task.model
        self.steps = parse_script(script, 1.0 / task.control_dt)
        sp = task.spec.action
        if sp.mode != 'absolute' or sp.units != 'channel' or sp.scale != 1.0 \
                or task.act_size != model.nu or sp.offset != 'zero':
            raise InvalidArgument('the scripted expert outputs every actuator\'s setpoint; '
                                  f'task {task.name!r} maps actions otherwise', where='task',
                                  allowed='action: {mode: absolute, units: channel, '
                                  'scale: 1} over every actuator')
        self.task = task
        self.obs_size, self.act_size = task.obs_size, task.act_size
        self._data = mujoco.MjData(model)
        mujoco.mj_resetDataKeyframe(model, self._data, 0) if model.nkey else None
        self._ik = IKSolver(model, self._data, site=site, joints=arm_joints)
        self._qadr = np.asarray(self._ik.qadr)
        names = list(self._ik.joint_names)
        self._q_cols = self._obs_cols('joint_pos', names)
        self._arm_act = self._actuators_of(model, self._ik.joint_ids)
        self._grip_act = None
        if gripper is not None:
            ids = [i for i in range(model.nu) if model.actuator(i).name == gripper]
            if not ids:
                raise InvalidArgument(f'no actuator {gripper!r}', where='gripper',
                                      allowed=', '.join(model.actuator(i).name
                                                        for i in range(model.nu)))
            self._grip_act = ids[0]
        if any(s.kind == 'gripper' for s in self.steps) and self._grip_act is None:
            raise InvalidArgument('the script has gripper steps but no gripper actuator was '
                                  'named', where='gripper', allowed='an actuator name')
        self._targets: dict[tuple[str, str], np.ndarray] = {}
        for s in self.steps:
            if s.kind == 'move_to':
                key = ('body', s.target['body']) if 'body' in s.target else \
                    ('command', s.target['command']) if 'command' in s.target else None
                if key is not None and key not in self._targets:
                    self._targets[key] = self._target_cols(*key)
        hand = model.site_bodyid[self._ik.point_id]
        self._hand = int(hand)
        self._yaw0 = self._yaw(task.start_qpos[self._qadr])
        self._start_ctrl = task.start_ctrl.copy()
        self._runs: dict[int, _Run] = {}

    # -- observation columns ------------------------------------------------------------
    def _obs_cols(self, kind: str, names: list[str]) -> np.ndarray:
        for label, off, _size in self.task.observation_layout:
            if label.startswith(kind + '['):
                listed = label[len(kind) + 1:-1].split(',')
                if all(n in listed for n in names):
                    return np.asarray([off + listed.index(n) for n in names])
        raise InvalidArgument(f'the expert reads {kind} of {names}, which task '
                              f'{self.task.name!r} does not observe', where='task.observation',
                              allowed=f'an observation term {kind}: {names}')

    def _target_cols(self, kind: str, name: str) -> np.ndarray:
        if kind == 'body':
            for label, off, _size in self.task.observation_layout:
                if label == f'body_pos[{name},world]':
                    return np.arange(off, off + 3)
            raise InvalidArgument(f'move_to names body {name!r}, whose world position task '
                                  f'{self.task.name!r} does not observe',
                                  where='task.observation',
                                  allowed=f'body_pos: {{body: {name}, frame: world}}')
        at = 0
        for c in self.task.spec.commands:
            if c.name == name:
                if len(c.low) != 3:
                    break
                for label, off, _size in self.task.observation_layout:
                    if label.startswith('command[') and name in label[8:-1].split(','):
                        listed = label[8:-1].split(',')
                        sizes = {cc.name: len(cc.low) for cc in self.task.spec.commands}
                        start = off + sum(sizes[n] for n in listed[:listed.index(name)])
                        return np.arange(start, start + 3)
            at += len(c.low)
        raise InvalidArgument(f'move_to names command {name!r}, which task '
                              f'{self.task.name!r} does not observe as 3 numbers',
                              where='task.observation', allowed=f'command: [{name}]')

    @staticmethod
    def _actuators_of(model: mujoco.MjModel, joint_ids: Iterable[int]) -> np.ndarray:
        out = []
        for j in joint_ids:
            ids = [i for i in range(model.nu)
                   if int(model.actuator_trntype[i]) == int(mujoco.mjtTrn.mjTRN_JOINT)
                   and int(model.actuator_trnid[i, 0]) == int(j)]
            if not ids:
                raise InvalidArgument(f'joint {model.joint(int(j)).name!r} has no actuator '
                                      'to servo it', where='arm_joints',
                                      allowed='joints driven by position actuators')
            out.append(ids[0])
        return np.asarray(out)

    # -- kinematics ---------------------------------------------------------------------
    def _yaw(self, q: np.ndarray) -> float:
        d = self._data
        d.qpos[self._qadr] = q
        mujoco.mj_kinematics(self.task.model, d)
        x = d.xmat[self._hand].reshape(3, 3)[:, 0]
        return math.atan2(x[1], x[0])

    def _solve(self, target: np.ndarray, q0: np.ndarray) -> np.ndarray:
        res = self._ik.solve(target, aim=DOWN, q_init=q0, max_restarts=2)
        q = np.asarray(res.qpos, dtype=float).copy()
        # turn the last joint (the flange axis, vertical when the tool points down) so the
        # hand keeps its starting yaw modulo half a turn: the fingers stay square to the
        # table's axes, as a cube placed without yaw needs
        err = (self._yaw0 - self._yaw(q) + math.pi / 2) % math.pi - math.pi / 2
        lo, hi = self._ik.lower[-1], self._ik.upper[-1]
        for sign in (1.0, -1.0):
            trial = q.copy()
            trial[-1] = np.clip(q[-1] + sign * err, lo, hi)
            e2 = (self._yaw0 - self._yaw(trial) + math.pi / 2) % math.pi - math.pi / 2
            if abs(e2) < abs(err) - 1e-9:
                return trial
        return q

    # -- Policy -------------------------------------------------------------------------
    def reset(self, slots: np.ndarray, episodes: np.ndarray) -> None:
        for s in np.asarray(slots).tolist():
            self._runs.pop(int(s), None)

    def act(self, obs: np.ndarray, slots: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=float)
        out = np.empty((len(obs), int(self.task.act_size)))
        for p, s in enumerate(np.asarray(slots).tolist()):
            out[p] = self._act_one(obs[p], int(s))
        return out

    def _act_one(self, o: np.ndarray, slot: int) -> np.ndarray:
        run = self._runs.get(slot)
        if run is None:
            grip = self._start_ctrl[self._grip_act] if self._grip_act is not None else 0.0
            run = _Run(o[self._q_cols], grip)
            if slot >= 0:
                self._runs[slot] = run
        ctrl = self._start_ctrl.copy()
        while run.index < len(self.steps):
            step = self.steps[run.index]
            if run.k == 0:
                run.q_from = run.q_to.copy()
                if step.kind == 'move_to':
                    t = step.target
                    if 'point' in t:
                        base = t['point']
                    else:
                        key = ('body', t['body']) if 'body' in t else ('command', t['command'])
                        base = o[self._targets[key]]
                    run.q_to = self._solve(base + t['offset'], run.q_from)
                elif step.kind == 'gripper':
                    run.grip = step.value
            run.k += 1
            u = run.k / step.steps
            s = u * u * (3.0 - 2.0 * u)
            q = run.q_from + s * (run.q_to - run.q_from)
            if run.k >= step.steps:
                run.index += 1
                run.k = 0
            break
        else:
            q = run.q_to
        ctrl[self._arm_act] = q
        if self._grip_act is not None:
            ctrl[self._grip_act] = run.grip
        return ctrl
