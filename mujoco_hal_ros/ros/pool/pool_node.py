"""pool_node: a batched EnvPool served over ROS 2 for sampling planners and rollouts.

Serves, under the node's namespace:
  evaluate      action (Evaluate): reset, roll controls forward, return final states,
                sensors and costs; feedback after every chunk and every 0.5 s (a heartbeat
                that lets a client tell a slow node from a dead one); cancel stops at the
                next chunk boundary.
  evaluate_policy action (EvaluatePolicy): a policy on a task, N seeded episodes closed
                loop (``policy_action``, ``mujoco_hal_ros.tasks``), on a pool of its own.
  reset         service (PoolReset): sparse reset, keyframe or states, randomization.
  site_jacobians service (SiteJacobians): batched site Jacobians at the current states.
  pool_info     service (PoolInfo): sizes, state layout, names and a model fingerprint.

The node translates messages to EnvPool calls and nothing more; the pool checks every
argument before it touches any environment, so a refused request changes nothing.

Threads: the executor never waits on physics. Evaluations, resets and Jacobians run on
the one worker thread of the node's CompletionBridge (``ros/bridge.py``), in the order
asked (the pool would serialise them anyway), and the action's execute callback and the
two services are coroutines that await it; the evaluation's progress feedback goes out
from the worker at every chunk. At most MAX_GOALS goals are accepted at once (one
evaluating, one queued behind it); more are refused. Goal, cancel, pool_info and the
heartbeat (a bridge tick while goals run) answer at once meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
import hashlib
import os
import sys
import threading
import time
from typing import Any, TYPE_CHECKING

import mujoco
import numpy as np
from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup

from ...action import Evaluate
from ...errors import (
    CLOSED,
    ConfigError,
    DeviceError,
    DONE,
    INTERNAL_ERROR,
    InvalidArgument,
    STOPPED,
    UnknownName,
)
from ...pool import EnvPool, MAX_NTHREAD, RayPool
from ...pool.validate import float_array
from ...srv import PoolInfo, PoolReset, SiteJacobians
from .. import conversions as cv
from ..bridge import CompletionBridge
from ..guard import ActionServer, GuardedNode  # every callback guarded
from ..parameters import refuse_unknown
from ..qos import action_queues, REQUEST_QOS
from ..run import run_node, start_or_destroy
from ..sim.web_view import attach_pool_viewer
from . import arrays
from .params import TABLE
from .policy_action import PolicyAction

if TYPE_CHECKING:     # the hints only
    from rclpy.action.server import ServerGoalHandle

    from ...viewer.web import WebViewer

    Cost = Callable[[np.ndarray, np.ndarray], np.ndarray]   # EnvPool's cost(qpos, qvel)

HEARTBEAT_S = 0.5
MAX_GOALS = 2          # one evaluating, one waiting for it
COSTS = ('none', 'qpos_distance')


def model_fingerprint(model: mujoco.MjModel) -> str:
    """sha256 of the compiled model: nodes with equal fingerprints step identically."""
    buf = np.empty(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buf)
    return hashlib.sha256(buf.data).hexdigest()   # the buffer itself, as a memoryview


def _names(model: mujoco.MjModel, objtype: mujoco.mjtObj, count: int) -> list[str]:
    return [mujoco.mj_id2name(model, objtype, i) or '' for i in range(count)]


class PoolNode(GuardedNode):
    """EnvPool behind an action and three services; see the module docstring."""

    def __init__(self, node_name: str = 'pool_node', **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        # all built by _start; None only while it runs (destroy_node copes with a refused one)
        self.pool: EnvPool | RayPool | None = None
        self.bridge: CompletionBridge | None = None
        self.viewer: WebViewer | None = None
        self._policy_action: PolicyAction | None = None
        self._closing = False
        start_or_destroy(self, self._start)

    def _start(self) -> None:
        self.p = TABLE.declare(self)
        refuse_unknown(self, ', '.join(TABLE.names()))
        self.model = self._load(self.p['model'])
        self._check_sizes()
        self.keyframe = self.p['keyframe'] or None
        ray = {'address': self.p['ray_address']} if self.p['ray_address'] else None
        self.pool = (RayPool if ray else EnvPool)(self.model, self.p['nbatch'],
                                                  nthread=self.p['nthread'],
                                                  keyframe=self.keyframe, **(ray or {}))
        self.info = self._info()
        self.viewer = attach_pool_viewer(self.pool, self.p, self.get_logger())
        self.bridge = CompletionBridge(self)        # pool work on its worker, in order
        self._goals_lock = threading.Lock()
        self._reserved = 0                          # accepted or being accepted, not finished
        # goal id bytes -> [handle, steps, nstep]
        self._active: dict[bytes, list[Any]] = {}
        action_group = MutuallyExclusiveCallbackGroup()
        self._action = ActionServer(
            self, Evaluate, 'evaluate', self._execute, callback_group=action_group,
            goal_callback=self._on_goal, handle_accepted_callback=self._on_accepted,
            cancel_callback=lambda _handle: CancelResponse.ACCEPT, result_timeout=10,
            **action_queues())
        self._policy_action = PolicyAction(self)    # evaluate_policy: tasks.evaluate
        queries = MutuallyExclusiveCallbackGroup()
        self.create_service(PoolReset, 'reset', self._reset, callback_group=queries,
                            qos_profile=REQUEST_QOS)
        self.create_service(SiteJacobians, 'site_jacobians', self._jacobians,
                            callback_group=queries, qos_profile=REQUEST_QOS)
        self.create_service(PoolInfo, 'pool_info', self._pool_info,
                            callback_group=MutuallyExclusiveCallbackGroup(),
                            qos_profile=REQUEST_QOS)
        self._heartbeats = self.bridge.every(HEARTBEAT_S, self._heartbeat)  # while goals run

    # --- parameters -------------------------------------------------------------------------
    def _load(self, path: str) -> mujoco.MjModel:
        if not path:
            from ...menagerie import bench_arm_path
            bench = bench_arm_path()
            if bench is None or not os.path.isfile(bench):
                raise ConfigError('the built-in bench arm (models/bench_arm.xml) was not found; '
                                  'source install/setup.bash or pass model',
                                  where='parameter model')
            path = bench
        elif not os.path.isfile(path):
            raise ConfigError(f'file not found: {path}', where='parameter model')
        self.p = self.p.replace(model=path)
        try:
            return mujoco.MjModel.from_xml_path(path)
        except Exception as err:  # noqa: BLE001 - MuJoCo's compiler errors are ValueError
            text = ' '.join(str(err).split())
            raise ConfigError(f'cannot load {path}: {text}', where='parameter model') from None

    def _check_sizes(self) -> None:
        if self.p['nthread'] == 0:          # sizes themselves: checked by TABLE
            self.p = self.p.replace(nthread=min(os.cpu_count() or 1, MAX_NTHREAD))
        p, m = self.p, self.model
        keys = _names(m, mujoco.mjtObj.mjOBJ_KEY, m.nkey)
        if p['keyframe'] and p['keyframe'] not in keys:
            raise ConfigError(f'no keyframe {p["keyframe"]!r} in {p["model"]}',
                              where='parameter keyframe',
                              allowed=', '.join(k for k in keys if k) or 'none: the model has '
                              'no named keyframes')

    def _info(self):
        m, pool = self.model, self.pool
        layout = pool.state_layout()
        return PoolInfo.Response(
            model=self.p['model'], model_fingerprint=model_fingerprint(m),
            nbatch=pool.nbatch, nthread=pool.nthread, chunk_steps=self.p['chunk_steps'],
            timestep=float(m.opt.timestep), nq=m.nq, nv=m.nv, nu=m.nu, na=m.na,
            nsensordata=m.nsensordata, state_size=pool.state_size,
            state_names=[n for n, _, _ in layout], state_offsets=[o for _, o, _ in layout],
            state_sizes=[s for _, _, s in layout], sites=pool.site_names,
            keyframes=_names(m, mujoco.mjtObj.mjOBJ_KEY, m.nkey),
            keyframe=self.p['keyframe'], randomizable_fields=list(pool.randomizable_fields))

    @property
    def closing(self) -> bool:
        """Whether the node is shutting down (goals are refused, running ones end)."""
        return self._closing

    def describe(self) -> str:
        """One line for the start-up log."""
        pool = self.pool
        assert pool is not None             # built by _start, before the node is handed out
        ns = self.get_namespace().rstrip('/')
        return (f'{self.p["model"]}: nbatch {pool.nbatch}, nthread {pool.nthread}, '
                f'state_size {pool.state_size}; serving {ns}/evaluate, '
                f'{ns}/evaluate_policy, {ns}/reset, '
                f'{ns}/site_jacobians, {ns}/pool_info')

    # --- evaluate ---------------------------------------------------------------------------
    def _on_goal(self, _goal: Evaluate.Goal) -> GoalResponse:
        """Refuse beyond MAX_GOALS: one evaluating and one queued behind it."""
        with self._goals_lock:
            if self._closing or self._reserved >= MAX_GOALS:
                return GoalResponse.REJECT
            self._reserved += 1
            return GoalResponse.ACCEPT

    def _on_accepted(self, handle: ServerGoalHandle) -> None:
        with self._goals_lock:
            self._active[bytes(handle.goal_id.uuid)] = [handle, 0, int(handle.request.nstep)]
            self._heartbeats.start()
        handle.execute()

    def _finish(self, handle: ServerGoalHandle) -> None:
        with self._goals_lock:
            self._active.pop(bytes(handle.goal_id.uuid), None)
            self._reserved = max(0, self._reserved - 1)
            if not self._active:
                self._heartbeats.stop()

    def _heartbeat(self) -> None:
        with self._goals_lock:
            tracked = [tuple(v) for v in self._active.values()]
        for handle, steps, nstep in tracked:
            self._feedback(handle, steps, nstep)

    @staticmethod
    def _feedback(handle: ServerGoalHandle, steps: int, nstep: int) -> None:
        handle.publish_feedback(Evaluate.Feedback(
            progress=steps / nstep if nstep else 0.0, steps_done=steps, nstep=nstep))

    async def _execute(self, handle):
        try:
            done = await self.bridge.run(self._evaluate, handle)
        finally:
            self._finish(handle)
        if done is None:                          # the node stopped before it ran
            done = 'abort', _fill_error(Evaluate.Result(), CLOSED, 'pool_node is shutting down')
        end, result = done
        {'succeed': handle.succeed, 'abort': handle.abort, 'canceled': handle.canceled}[end]()
        return result

    def _evaluate(self, handle):
        """On the bridge's worker: (how the goal ends, its Result); the coroutine ends it."""
        result = Evaluate.Result()
        if handle.is_cancel_requested:
            return 'canceled', _fill_error(result, STOPPED, 'canceled before it started')
        if self._closing:
            return 'abort', _fill_error(result, CLOSED, 'pool_node is shutting down')
        key = bytes(handle.goal_id.uuid)
        try:
            kwargs = self._evaluate_args(handle.request)
            steps = kwargs['ctrl'].shape[-2] if kwargs['ctrl'].ndim >= 2 else 0

            def progress(fraction):
                done = int(round(fraction * steps))
                with self._goals_lock:
                    if key in self._active:
                        self._active[key][1:] = [done, steps]
                self._feedback(handle, done, steps)
                return not (handle.is_cancel_requested or self._closing)

            res = self.pool.evaluate(**kwargs, progress=progress,
                                     chunk_steps=self.p['chunk_steps'])
        except DeviceError as err:
            return 'abort', _fill_error(result, err.code, str(err))
        except Exception as err:  # noqa: BLE001 - reported to the caller, logged here
            self.get_logger().error(f'evaluate: {cv.error_line(err)}')
            return 'abort', _fill_error(result, INTERNAL_ERROR, f'{type(err).__name__}: {err}')
        result.env_ids = [int(i) for i in res.env_ids]
        result.final_state = arrays.to_msg(res.state)
        if handle.request.want_sensors:
            result.sensordata = arrays.to_msg(res.sensordata)
        if res.cost is not None:
            result.costs = arrays.to_msg(res.cost)
        result.steps_done = int(res.steps_done)
        result.sim_time = res.steps_done * float(self.model.opt.timestep)
        result.completed = bool(res.completed)
        result.unstable = [bool(u) for u in res.unstable]
        if res.completed:
            result.success, result.code = True, DONE
            return 'succeed', result
        if handle.is_cancel_requested:
            result.code = STOPPED
            result.message = f'canceled after {res.steps_done} of {steps} steps'
            return 'canceled', result
        result.code = CLOSED
        result.message = f'pool_node shut down after {res.steps_done} of {steps} steps'
        return 'abort', result

    def _evaluate_args(self, goal):
        """Evaluate goal -> EnvPool.evaluate keyword arguments (the pool checks the rest)."""
        ids = arrays.env_ids(goal.env_ids)
        states = arrays.from_msg(goal.initial_state, 'initial_state')
        keyframe = goal.keyframe or None
        if keyframe is None and states is None:
            keyframe = self.keyframe
        ctrl = arrays.from_msg(goal.ctrl, 'ctrl')
        if ctrl is None:
            raise InvalidArgument('no controls given', where='ctrl',
                                  allowed=f'(nstep, {self.model.nu}) or (n, nstep, '
                                  f'{self.model.nu}) finite numbers')
        n = self.pool.nbatch if ids is None else len(ids)
        return dict(ctrl=ctrl, nstep=int(goal.nstep) or None, keyframe=keyframe,
                    initial_state=states, env_ids=ids,
                    randomization=arrays.randomization(goal.randomize_fields,
                                                       goal.randomize_values),
                    cost=self._cost(goal, n))

    def _cost(self, goal: Evaluate.Goal, n: int) -> Cost | None:
        """The goal's named cost as the pool's ``cost(qpos, qvel)`` callable, or None."""
        name = goal.cost or 'none'
        if name not in COSTS:
            raise UnknownName('cost', name, COSTS, where='cost')
        if name == 'none':
            if arrays.given(goal.cost_target) or len(goal.cost_weights):
                raise InvalidArgument('cost_target or cost_weights given without a cost',
                                      where='cost', allowed='qpos_distance')
            return None
        nq = self.model.nq
        target, _ = float_array(arrays.from_msg(goal.cost_target, 'cost_target'),
                                [(nq,), (n, nq)], 'cost_target')
        weights = np.ones(nq)
        if len(goal.cost_weights):
            weights, _ = float_array(np.asarray(goal.cost_weights), [(nq,)], 'cost_weights',
                                     low=0.0)

        def qpos_distance(qpos: np.ndarray, _qvel: np.ndarray) -> np.ndarray:
            return np.sum(weights * (qpos - target) ** 2, axis=1)
        return qpos_distance

    # --- services ---------------------------------------------------------------------------
    async def _answer(self, res, name, work):
        """``work()`` on the bridge's worker, its DeviceError or failure as the answer."""
        def run():
            work()
            return True
        try:
            if await self.bridge.run(run) is None:
                return _fill_error(res, CLOSED, 'pool_node is shutting down')
        except DeviceError as err:
            return _fill_error(res, err.code, str(err))
        except Exception as err:  # noqa: BLE001 - an answer, not a dead service
            self.get_logger().error(f'{name}: {cv.error_line(err)}')
            return _fill_error(res, INTERNAL_ERROR, f'{type(err).__name__}: {err}')
        res.success, res.code = True, DONE
        return res

    async def _reset(self, req, res):
        def work():
            states = arrays.from_msg(req.states, 'states')
            keyframe = req.keyframe or None
            if keyframe is None and states is None:
                keyframe = self.keyframe
            self.pool.reset(arrays.env_ids(req.env_ids), keyframe=keyframe, states=states,
                            randomization=arrays.randomization(req.randomize_fields,
                                                               req.randomize_values))
        return await self._answer(res, 'reset', work)

    async def _jacobians(self, req, res):
        def work():
            jacp, jacr = self.pool.site_jacobians(list(req.sites),
                                                  arrays.env_ids(req.env_ids))
            res.jacp, res.jacr = arrays.to_msg(jacp), arrays.to_msg(jacr)
        return await self._answer(res, 'site_jacobians', work)

    def _pool_info(self, _req: PoolInfo.Request, _res: PoolInfo.Response) -> PoolInfo.Response:
        return self.info

    # --- lifetime ---------------------------------------------------------------------------
    def answer_waiting(self, timeout: float) -> None:
        """Shutdown, while the executor still spins: a running evaluation stops at its
        next chunk and every waiting client gets its answer (CLOSED), for ``timeout`` s at
        most (``run_node`` calls it before the context goes)."""
        self._closing = True
        if self._policy_action is not None:
            self._policy_action.cancel_all()
        if self.bridge is not None:
            self.bridge.stop()
        deadline = time.monotonic() + timeout
        while self._active and time.monotonic() < deadline:
            time.sleep(0.01)

    def destroy_node(self) -> None:
        """Stop a running evaluation at its next chunk, then release the pool's threads."""
        self._closing = True
        if self._policy_action is not None:
            self._policy_action.cancel_all()
        if self.viewer is not None:
            self.viewer.close()
        if self.pool is not None:
            self.pool.close()
        if self.bridge is not None:
            self.bridge.close()
        return super().destroy_node()


def _fill_error(res: Any, code: str, message: str) -> Any:
    res.success = False
    res.code = code
    res.message = message
    return res


def main(argv: list[str] | None = None) -> int:
    """Run until Ctrl-C; a bad parameter or model ends it at start with one line, exit 2."""
    return run_node('pool_node', PoolNode, argv, threads=MAX_GOALS + 4,
                    started=lambda node: node.get_logger().info(node.describe()))


if __name__ == '__main__':
    sys.exit(main())
