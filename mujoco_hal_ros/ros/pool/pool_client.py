"""One batch of evaluations split across every pool_node on the ROS graph.

``ShardedPoolClient`` finds pool_nodes by their ``evaluate`` action type (any namespace, any
machine on the DDS domain), reads each one's ``pool_info``, splits a batch of ``N``
environments into contiguous shares proportional to each node's ``nbatch`` (a share larger
than a node's pool runs as several goals in turn), and joins the final states in order::

    client = ShardedPoolClient()              # its own node and spinning thread
    client.discover(count=3)
    res = client.evaluate(ctrl, initial_state=states)   # ctrl (N, nstep, nu), states (N, S)
    res.state                                  # (N, state_size), row i is environment i

Why the result does not depend on which node ran which rows: every goal resets the
environments it uses from the goal's own states (or keyframe) and randomization, and a
pool_node steps each environment alone, so the same row gives bit-identical physics on any
node that runs the same compiled model (``pool_info.model_fingerprint``; nodes with another
fingerprint are left out).

A node that goes away mid-batch loses only time: its unfinished rows are split again across
the nodes still alive. Gone means: its goal ends ABORTED or CANCELED for a reason other than
bad input, the goal is rejected three times, its action leaves the graph, or nothing (goal
response, feedback, result) is heard from it for ``liveness_timeout`` seconds; pool_node
sends feedback at least every 0.5 s while a goal waits or runs, so silence is death, not
slowness. DDS alone would notice a SIGKILLed process only after its lease runs out (tens of
seconds with Fast DDS defaults). Bad input (INVALID_ARGUMENT, UNKNOWN_NAME) is the caller's
error, is raised as ``DeviceError`` with the node's code and message, and is never retried.

Threading: ``evaluate`` and ``discover`` block the calling thread while the node is spun
elsewhere (the client's own thread, or the caller's executor when a node is passed in), so
never call them from a callback of that executor.
"""

from dataclasses import dataclass, field
import threading
import time
from typing import Optional

from action_msgs.msg import GoalStatus
import numpy as np
import rclpy
from rclpy.action import ActionClient, get_action_names_and_types
from rclpy.executors import SingleThreadedExecutor

from . import arrays
from ...action import Evaluate
from ...errors import (INVALID_ARGUMENT, LIMIT_EXCEEDED, MODEL_ERROR, UNKNOWN_NAME,
                       DeviceError)
from ...srv import PoolInfo

EVALUATE_TYPE = 'mujoco_hal_ros/action/Evaluate'
CALLER_ERRORS = {INVALID_ARGUMENT, UNKNOWN_NAME, LIMIT_EXCEEDED, MODEL_ERROR}
MAX_REJECTIONS = 3
GRAPH_PERIOD_S = 1.0
INFO_TIMEOUT_S = 5.0


class NoPoolNode(RuntimeError):
    """No pool_node is left to run the remaining rows."""


@dataclass
class Share:
    """Rows ``start:stop`` of the batch, run by ``server``; ``attempt`` 1 unless retried."""
    server: str
    start: int
    stop: int
    attempt: int


@dataclass
class ShardedResult:
    state: np.ndarray                  # (N, state_size) final mjSTATE_FULLPHYSICS rows
    sensordata: Optional[np.ndarray]   # (N, nsensordata) with want_sensors
    cost: Optional[np.ndarray]         # (N,) with a cost
    unstable: np.ndarray               # (N,) bool
    steps_done: int
    shares: list = field(default_factory=list)     # Share per goal that delivered rows
    failed: dict = field(default_factory=dict)     # server -> why it was dropped


class _Server:
    def __init__(self, name, info, client):
        self.name = name                  # the evaluate action's full name
        self.info = info
        self.client = client
        self.alive = True
        self.reason = ''
        self.queue = []                   # [(start, stop, attempt)]
        self.inflight = None
        self.rejections = 0
        self.retry_at = 0.0

    @property
    def nbatch(self):
        return int(self.info.nbatch)


class _Attempt:
    """One goal in flight; executor callbacks write here, the evaluate loop reads."""

    def __init__(self, server, start, stop, attempt):
        self.server, self.start, self.stop, self.attempt = server, start, stop, attempt
        self.last_heard = time.monotonic()
        self.handle = None
        self.rejected = False
        self.error = None
        self.status = None
        self.result = None
        self.progress = 0.0


def split(start, stop, servers):
    """Rows start:stop as ``[(server, a, b)]`` proportional to nbatch, none above nbatch."""
    n = stop - start
    total = sum(s.nbatch for s in servers)
    exact = [n * s.nbatch / total for s in servers]
    counts = [int(x) for x in exact]
    order = sorted(range(len(servers)), key=lambda i: counts[i] - exact[i])
    for i in order[:n - sum(counts)]:
        counts[i] += 1
    out, a = [], start
    for server, count in zip(servers, counts):
        while count > 0:
            k = min(count, server.nbatch)
            out.append((server, a, a + k))
            a, count = a + k, count - k
    return out


class ShardedPoolClient:
    """Evaluate one batch across every pool_node found; see the module docstring.

    Args:
      node: a node spun by the caller's executor in another thread; None: the client makes
        its own Context, node and spinning thread (``close()`` ends them).
      liveness_timeout: seconds without any word from a node holding a goal before its rows
        go to the others.
      fingerprint: use only nodes whose pool_info.model_fingerprint is this
        (``pool_node.model_fingerprint(model)``); None: the first node found decides.
    """

    def __init__(self, node=None, *, liveness_timeout=5.0, fingerprint=None):
        self.liveness_timeout = float(liveness_timeout)
        self._own = node is None
        self._stop = threading.Event()
        if self._own:
            self._ctx = rclpy.Context()
            rclpy.init(context=self._ctx, args=[])
            node = rclpy.create_node('sharded_pool_client', context=self._ctx)
            self._executor = SingleThreadedExecutor(context=self._ctx)
            self._executor.add_node(node)
            self._thread = threading.Thread(target=self._spin, name='pool-client',
                                            daemon=True)
            self._thread.start()
        self.node = node
        self.servers = {}           # action name -> _Server
        self.skipped = {}           # action name -> why it is not used
        self.fingerprint = fingerprint
        self._cond = threading.Condition()

    def _spin(self):
        while not self._stop.is_set() and self._ctx.ok():
            try:
                self._executor.spin_once(timeout_sec=0.1)
            except Exception:  # noqa: BLE001 - a destroyed entity mid-wait; keep spinning
                if self._stop.is_set():
                    return

    def close(self):
        for server in self.servers.values():
            server.client.destroy()
        self.servers = {}
        if self._own:
            self._stop.set()
            self._thread.join(5.0)
            self._executor.shutdown(timeout_sec=1.0)
            self.node.destroy_node()
            rclpy.try_shutdown(context=self._ctx)
            self._own = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- discovery --------------------------------------------------------------------------
    def evaluate_actions(self):
        """Names of every Evaluate action server on the graph right now."""
        return sorted(name for name, types in get_action_names_and_types(self.node)
                      if EVALUATE_TYPE in types)

    @property
    def alive(self):
        """Live servers by name, so a batch splits the same way whichever answered first."""
        return sorted((s for s in self.servers.values() if s.alive), key=lambda s: s.name)

    def discover(self, count=None, timeout=20.0, settle=1.0):
        """Find pool_nodes; returns the names in use.

        With ``count``, wait until that many answer pool_info and serve goals; without,
        return once at least one does and no new one appeared for ``settle`` seconds.
        Raises TimeoutError if too few are found within ``timeout``.
        """
        end = time.monotonic() + timeout
        calm_since = time.monotonic()
        pending = {}      # name -> (client, future or None, asked at)
        unanswered = set()
        while True:
            for name in self.evaluate_actions():
                known = self.servers.get(name)
                if (name in pending or name in self.skipped or name in unanswered
                        or (known and known.alive)):
                    continue
                prefix = name[:-len('/evaluate')] if name.endswith('/evaluate') else None
                if prefix is None:
                    self.skipped[name] = 'not named <namespace>/evaluate'
                    continue
                cli = self.node.create_client(PoolInfo, f'{prefix}/pool_info')
                pending[name] = (cli, None, time.monotonic())
                calm_since = time.monotonic()
            for name, (cli, fut, asked) in list(pending.items()):
                if fut is None and cli.service_is_ready():
                    pending[name] = (cli, cli.call_async(PoolInfo.Request()), asked)
                elif fut is not None and fut.done():
                    self._add(name, fut.result())
                    self.node.destroy_client(cli)
                    del pending[name]
                elif time.monotonic() - asked > INFO_TIMEOUT_S:
                    # still listed but not answering: a killed node DDS has not expired yet
                    unanswered.add(name)
                    self.node.destroy_client(cli)
                    del pending[name]
            ready = [s for s in self.alive if s.client.server_is_ready()]
            now = time.monotonic()
            if count is not None and len(ready) >= count:
                break
            if count is None and ready and not pending and now - calm_since >= settle:
                break
            if now > end:
                for cli, _, _ in pending.values():
                    self.node.destroy_client(cli)
                raise TimeoutError(f'found {len(ready)} pool_node(s) ready within {timeout} s'
                                   f'{f", wanted {count}" if count else ""}: '
                                   f'{[s.name for s in ready]}; skipped {self.skipped}')
            time.sleep(0.05)
        for cli, _, _ in pending.values():
            self.node.destroy_client(cli)
        return [s.name for s in self.alive]

    def _add(self, name, info):
        if self.fingerprint is None:
            self.fingerprint = info.model_fingerprint
        if info.model_fingerprint != self.fingerprint:
            self.skipped[name] = (f'runs another model ({info.model}, fingerprint '
                                  f'{info.model_fingerprint[:12]}...)')
            return
        old = self.servers.get(name)
        if old is not None:
            old.client.destroy()
        self.servers[name] = _Server(name, info, ActionClient(self.node, Evaluate, name))

    # --- evaluate ---------------------------------------------------------------------------
    def evaluate(self, ctrl, *, n=None, initial_state=None, keyframe='', randomization=None,
                 cost='', cost_target=None, cost_weights=None, want_sensors=False,
                 timeout=None, progress=None):
        """Run ``N`` environments across the pool_nodes; row ``i`` of every array is env ``i``.

        Args:
          ctrl: ``(N, nstep, nu)`` per environment or ``(nstep, nu)`` shared.
          n: the batch size, needed only when no argument is per environment.
          initial_state: ``(N, state_size)`` or ``(state_size,)`` physics rows; None:
            ``keyframe``, or each node's keyframe parameter when that is empty too.
          randomization: ``{field: (N, *field shape)}``, one row per environment (use
            ``np.broadcast_to`` for a shared value).
          cost, cost_target, cost_weights: as in Evaluate.action; cost_target ``(nq,)`` or
            ``(N, nq)``.
          progress: ``progress(fraction, {server: fraction of its current goal})`` called
            from this thread about five times a second.
        Raises DeviceError for input a node refused, NoPoolNode when every node is gone,
        TimeoutError after ``timeout`` seconds.
        """
        ctrl = np.asarray(ctrl, dtype=np.float64)
        states = None if initial_state is None else np.asarray(initial_state, np.float64)
        target = None if cost_target is None else np.asarray(cost_target, np.float64)
        rand = {k: np.asarray(v, np.float64) for k, v in (randomization or {}).items()}
        sizes = {'n': n}
        if ctrl.ndim == 3:
            sizes['ctrl'] = ctrl.shape[0]
        if states is not None and states.ndim == 2:
            sizes['initial_state'] = states.shape[0]
        if target is not None and target.ndim == 2:
            sizes['cost_target'] = target.shape[0]
        for key, value in rand.items():
            sizes[f'randomization[{key!r}]'] = value.shape[0] if value.ndim else None
        given = {k: v for k, v in sizes.items() if v is not None}
        if not given or len(set(given.values())) != 1:
            raise DeviceError(INVALID_ARGUMENT, f'batch sizes disagree or none is given: '
                              f'{given}', where='evaluate',
                              allowed='one N: ctrl (N, nstep, nu), initial_state (N, S), '
                              'cost_target (N, nq), randomization (N, ...) or n=N')
        total = next(iter(given.values()))
        if total < 1:
            raise DeviceError(INVALID_ARGUMENT, 'an empty batch', where='evaluate',
                              allowed='N >= 1 environments')
        servers = self.alive
        if not servers:
            raise NoPoolNode('no pool_node known; call discover() first')
        first = servers[0].info
        out_state = np.empty((total, first.state_size))
        out_sens = np.empty((total, first.nsensordata)) if want_sensors else None
        out_cost = np.empty(total) if cost not in ('', 'none') else None
        out_unstable = np.zeros(total, dtype=bool)
        covered = np.zeros(total, dtype=np.int64)
        steps = []
        result = ShardedResult(out_state, out_sens, out_cost, out_unstable, 0)

        def goal_for(a, b):
            def rows(arr, per_env_ndim):
                return arr[a:b] if arr.ndim == per_env_ndim else arr
            goal = Evaluate.Goal(keyframe=keyframe or '', want_sensors=bool(want_sensors),
                                 cost=cost or '', env_ids=list(range(b - a)))
            goal.ctrl = arrays.to_msg(rows(ctrl, 3))
            if states is not None:
                goal.initial_state = arrays.to_msg(rows(states, 2))
            if target is not None:
                goal.cost_target = arrays.to_msg(rows(target, 2))
            if cost_weights is not None:
                goal.cost_weights = arrays.to_msg(cost_weights).data
            goal.randomize_fields = list(rand)
            goal.randomize_values = [arrays.to_msg(v[a:b]) for v in rand.values()]
            return goal

        for server, a, b in split(0, total, servers):
            server.queue.append((a, b, 1))
        end = None if timeout is None else time.monotonic() + timeout
        next_graph = time.monotonic() + GRAPH_PERIOD_S
        try:
            while covered.sum() < total:
                now = time.monotonic()
                for server in self.alive:
                    if server.inflight is None and server.queue and now >= server.retry_at:
                        a, b, attempt = server.queue.pop(0)
                        self._send(server, _Attempt(server, a, b, attempt), goal_for(a, b))
                with self._cond:
                    self._cond.wait(0.2)
                now = time.monotonic()
                for server in self.alive:
                    att = server.inflight
                    if att is None:
                        continue
                    if att.error is not None:
                        self._drop(server, f'goal request failed: {att.error}', result)
                    elif att.rejected:
                        server.inflight = None
                        server.rejections += 1
                        server.queue.insert(0, (att.start, att.stop, att.attempt))
                        server.retry_at = now + 0.5
                        if server.rejections >= MAX_REJECTIONS:
                            self._drop(server, 'rejected the goal (busy with others)', result)
                    elif att.status is not None:
                        self._collect(server, att, result, covered, steps)
                    elif now - att.last_heard > self.liveness_timeout:
                        self._drop(server, f'silent for {now - att.last_heard:.1f} s', result)
                if now >= next_graph:
                    next_graph = now + GRAPH_PERIOD_S
                    listed = set(self.evaluate_actions())
                    for server in self.alive:
                        if server.inflight is not None and server.name not in listed:
                            self._drop(server, 'left the ROS graph', result)
                if end is not None and now > end:
                    raise TimeoutError(f'evaluate: {total - int((covered > 0).sum())} of '
                                       f'{total} rows unfinished after {timeout} s')
                if progress is not None:
                    running = {s.name: s.inflight.progress for s in self.alive
                               if s.inflight is not None}
                    progress(float((covered > 0).sum()) / total, running)
        except BaseException:
            for server in self.alive:
                self._cancel(server)
            raise
        finally:
            for server in self.servers.values():
                server.queue = []
                server.inflight = None
        if covered.max() != 1 or covered.min() != 1:
            raise RuntimeError('internal: rows were not covered exactly once')
        result.steps_done = min(steps) if steps else 0
        result.shares.sort(key=lambda s: s.start)
        return result

    def _send(self, server, att, goal):
        server.inflight = att

        def on_feedback(msg):
            att.last_heard = time.monotonic()
            att.progress = float(msg.feedback.progress)

        def on_result(fut):
            try:
                res = fut.result()
                att.status, att.result = res.status, res.result
            except Exception as err:  # noqa: BLE001 - the server went away mid-request
                att.error = err
            att.last_heard = time.monotonic()
            self._notify()

        def on_response(fut):
            try:
                handle = fut.result()
            except Exception as err:  # noqa: BLE001
                att.error = err
                self._notify()
                return
            att.last_heard = time.monotonic()
            if not handle.accepted:
                att.rejected = True
                self._notify()
                return
            att.handle = handle
            handle.get_result_async().add_done_callback(on_result)

        server.client.send_goal_async(goal, feedback_callback=on_feedback) \
            .add_done_callback(on_response)

    def _notify(self):
        with self._cond:
            self._cond.notify_all()

    def _collect(self, server, att, result, covered, steps):
        server.inflight = None
        res = att.result
        if att.status == GoalStatus.STATUS_SUCCEEDED and res.success and res.completed:
            a, b = att.start, att.stop
            result.state[a:b] = arrays.from_msg(res.final_state, 'final_state')
            if result.sensordata is not None:
                result.sensordata[a:b] = arrays.from_msg(res.sensordata, 'sensordata')
            if result.cost is not None:
                result.cost[a:b] = arrays.from_msg(res.costs, 'costs')
            result.unstable[a:b] = np.asarray(res.unstable, dtype=bool)
            covered[a:b] += 1
            steps.append(int(res.steps_done))
            server.rejections = 0
            result.shares.append(Share(server.name, a, b, att.attempt))
            return
        if att.status == GoalStatus.STATUS_ABORTED and res.code in CALLER_ERRORS:
            raise DeviceError(res.code, f'{server.name}: {res.message}')
        state = {GoalStatus.STATUS_ABORTED: 'aborted', GoalStatus.STATUS_CANCELED: 'canceled'}
        why = f'goal {state.get(att.status, f"status {att.status}")}: {res.code} {res.message}'
        server.queue.insert(0, (att.start, att.stop, att.attempt))
        self._drop(server, why.strip(), result)

    def _cancel(self, server):
        att = server.inflight
        if att is not None and att.handle is not None:
            try:
                att.handle.cancel_goal_async()
            except Exception:  # noqa: BLE001 - best effort towards a node that may be gone
                pass

    def _drop(self, server, reason, result):
        """Stop using ``server``; its queued and in-flight rows go to the others."""
        self._cancel(server)
        rows = list(server.queue)
        if server.inflight is not None:
            att = server.inflight
            rows.insert(0, (att.start, att.stop, att.attempt))
        server.alive, server.reason = False, reason
        server.queue, server.inflight = [], None
        result.failed[server.name] = reason
        self.node.get_logger().warning(f'{server.name} dropped ({reason}); '
                                       f'{sum(b - a for a, b, _ in rows)} rows go elsewhere')
        others = self.alive
        if not others:
            raise NoPoolNode(f'every pool_node is gone; last: {server.name} ({reason})')
        for a, b, attempt in rows:
            for other, x, y in split(a, b, others):
                other.queue.append((x, y, attempt + 1))
