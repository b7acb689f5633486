"""Services, actions and goal topics: requests translated to Device calls and back.

Nothing here waits on the device inside a callback. ``Device.move_to(wait=False)`` returns
as soon as the IK is solved and the path posted (a few ms); action execute callbacks and
the waiting MoveTo service are coroutines that ``await`` a future. A watcher thread looks at
the waiting moves 50 times a second (``Move.done()``, a flag: it never touches MjData) and
wakes the executor through a guard condition only when there is work: a move finished, a
cancel to turn into ``hold``, feedback due (10 Hz). The executor then completes the futures
and publishes. An rclpy timer would do the same, but every executor wake rebuilds the wait
set over all of the node's entities, a few ms of CPU each, so waking 50 times a second for
nothing cost a fifth of a core. A refused request raises DeviceError before anything is
posted, so its code goes straight into the result and nothing moved.

Hold has its own mutually exclusive callback group so that it gets an executor thread even
while a flood of other requests keeps the control group busy.
"""

import threading
import time

import mujoco
import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.task import Future
from std_msgs.msg import Float64
from std_srvs.srv import SetBool, Trigger

from .. import conversions as cv
from ... import errors
from ...config import limits
from ...action import Hold as HoldAction, MoveTo as MoveToAction
from ...errors import DeviceError
from ...motion.move import point_pos
from ...srv import Describe, MoveTo as MoveToSrv, RunAction, SetGoals, Step

POLL_S = 0.02
FEEDBACK_S = 0.1
STILL_SPEED = 0.01          # rad/s or m/s: "all velocities near zero" for the Hold action
STILL_FOR_S = 0.2          # ... for this long
HOLD_SETTLE_S = 3.0


class _Watch:
    """Something a coroutine awaits: a move, or a predicate with a deadline."""

    def __init__(self, future, move=None, goal=None, check=None, deadline=None,
                 feedback=None):
        self.future = future
        self.move = move
        self.goal = goal
        self.check = check
        self.deadline = deadline
        self.feedback = feedback
        self.next_feedback = 0.0


class Control:
    """Every request interface of sim_node over one Device."""

    def __init__(self, node, device):
        self.node = node
        self.device = device
        self.log = node.get_logger()
        self.group = ReentrantCallbackGroup()
        self.hold_group = MutuallyExclusiveCallbackGroup()
        self._watches = []
        self._lock = threading.Lock()
        # _poll runs one at a time; the nudge only wakes the executor so that awaiting
        # coroutines resume at once rather than at the next unrelated event.
        self._poll_gc = node.create_guard_condition(
            self._poll, callback_group=MutuallyExclusiveCallbackGroup())
        self._nudge = node.create_guard_condition(lambda: None, callback_group=self.group)
        self._active = threading.Event()
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch_loop, name='sim_node-watcher',
                                         daemon=True)
        self._watcher.start()
        self._refused_topic = {}
        m = device.model
        self._joint_dofs = np.array(
            [m.jnt_dofadr[j] for j in range(m.njnt)
             if m.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)],
            dtype=int)
        n, g = node, self.group
        self.move_action = ActionServer(
            n, MoveToAction, 'move_to', execute_callback=self._execute_move, callback_group=g,
            goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=lambda _handle: CancelResponse.ACCEPT)
        self.hold_action = ActionServer(
            n, HoldAction, 'hold', execute_callback=self._execute_hold,
            callback_group=self.hold_group, goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=lambda _handle: CancelResponse.REJECT)
        self.services = [
            n.create_service(MoveToSrv, 'move_to', self._srv_move_to, callback_group=g),
            n.create_service(Trigger, 'hold', self._srv_hold, callback_group=self.hold_group),
            n.create_service(SetGoals, 'set_goals', self._srv_set_goals, callback_group=g),
            n.create_service(RunAction, 'run_action', self._srv_run_action, callback_group=g),
            n.create_service(Trigger, 'reset', self._srv_reset, callback_group=g),
            n.create_service(SetBool, 'pause', self._srv_pause, callback_group=g),
            n.create_service(Step, 'step', self._srv_step, callback_group=g),
            n.create_service(Describe, 'describe', self._srv_describe, callback_group=g),
        ]
        self.goal_subs = [
            n.create_subscription(Float64, f'goals/{name}',
                                  lambda msg, name=name: self._on_goal_topic(name, msg), 10,
                                  callback_group=g)
            for name in device.layout.goals]

    def describe(self):
        out = ['move_to (action and service)', 'hold (action and service)', 'set_goals',
               'run_action', 'reset', 'pause', 'step', 'describe']
        out += [f'goals/{n} (topic)' for n in self.device.layout.goals]
        return out

    def destroy(self):
        """Give every waiting coroutine an answer before the node goes away."""
        self._stopping.set()
        self._active.set()
        self._watcher.join(2.0)
        with self._lock:
            watches, self._watches = self._watches, []
        for w in watches:
            if not w.future.done():
                w.future.set_result(None)
        self.move_action.destroy()
        self.hold_action.destroy()

    # --- waiting without blocking ---------------------------------------------------------
    def _watch(self, **kw):
        fut = Future()
        w = _Watch(fut, **kw)
        with self._lock:
            self._watches.append(w)
            self._active.set()
        return w

    def _watch_loop(self):
        """Wake the executor only when a watch has work (see the module docstring)."""
        while not self._stopping.is_set():
            self._active.wait()
            if self._stopping.wait(POLL_S):
                return
            with self._lock:
                watches = list(self._watches)
                if not watches:
                    self._active.clear()
                    continue
            now = time.monotonic()
            try:
                if any(self._has_work(w, now) for w in watches):
                    self._poll_gc.trigger()
            except Exception:  # noqa: BLE001 - destroyed during shutdown
                if self._stopping.is_set():
                    return

    @staticmethod
    def _has_work(w, now):
        return ((w.move is not None and w.move.done())
                or (w.goal is not None and w.goal.is_cancel_requested)
                or (w.check is not None and w.check())
                or (w.deadline is not None and now >= w.deadline)
                or (w.feedback is not None and now >= w.next_feedback))

    def _wake_now(self, _done=None):
        """From any thread: look at the watches now rather than at the next poll."""
        try:
            self._poll_gc.trigger()
        except Exception:  # noqa: BLE001 - the node went away first; nobody waits
            pass

    def _poll(self):
        now = time.monotonic()
        finished = []
        with self._lock:
            watches = list(self._watches)
        for w in watches:
            try:
                done, value = self._poll_one(w, now)
            except Exception as err:  # noqa: BLE001 - a waiting client still gets an answer
                done, value = True, {'success': False, 'code': getattr(err, 'code', 'ERROR'),
                                     'message': str(err)}
            if done:
                finished.append((w, value))
        if finished:
            with self._lock:
                for w, _ in finished:
                    if w in self._watches:
                        self._watches.remove(w)
            for w, value in finished:
                if not w.future.done():
                    w.future.set_result(value)
            self._nudge.trigger()    # resume the awaiting coroutines now, not at the next event

    def _poll_one(self, w, now):
        if w.goal is not None and w.goal.is_cancel_requested and w.move is not None \
                and not w.move.done() and self.device.move is w.move:
            self.device.hold()                     # cancel means hold; the move ends STOPPED
        if w.move is not None and w.move.done():
            return True, w.move.result
        if w.check is not None and w.check():
            return True, 'ok'
        if w.deadline is not None and now >= w.deadline:
            return True, None
        if w.feedback is not None and now >= w.next_feedback:
            w.next_feedback = now + FEEDBACK_S
            w.feedback()
        return False, None

    def _point_now(self, move):
        return point_pos(self.device.layout, self.device.snapshot, move.point)

    def _move_feedback(self, goal, move):
        def send():
            fb = MoveToAction.Feedback()
            fb.distance_to_go = self.device.distance_to_go(move)
            fb.current = cv.point(self._point_now(move))
            goal.publish_feedback(fb)
        return send

    # --- move_to ----------------------------------------------------------------------------
    def _start_move(self, req):
        """Device.move_to(wait=False): the Move, or the DeviceError that refused it."""
        try:
            return self.device.move_to(**cv.move_request(req), wait=False), None
        except DeviceError as err:
            return None, err

    async def _execute_move(self, goal):
        result = MoveToAction.Result()
        move, err = self._start_move(goal.request)
        if err is not None:
            self.log.info(f'move_to refused: {cv.error_line(err)}')
            goal.abort()
            return cv.fill_error(result, err)
        if goal.is_cancel_requested:
            self.device.hold()
        w = self._watch(move=move, goal=goal, feedback=self._move_feedback(goal, move))
        move.add_done_callback(self._wake_now)        # the result goes out now, not at a poll
        outcome = await w.future
        if outcome is None:
            outcome = {'success': False, 'code': errors.CLOSED, 'message': 'sim_node stopped'}
        cv.fill_move_result(result, outcome)
        if goal.is_cancel_requested:
            goal.canceled()
        elif result.success:
            goal.succeed()
        else:
            goal.abort()
        return result

    async def _srv_move_to(self, req, res):
        move, err = self._start_move(req)
        if err is not None:
            return cv.fill_error(res, err)
        if req.wait:
            wait = self.device.params['action_wait']
            watch = self._watch(move=move, deadline=time.monotonic() + wait)
            move.add_done_callback(self._wake_now)
            outcome = await watch.future
            if outcome is not None:
                return cv.fill_move_result(res, outcome)
            msg = f'still moving after {wait:g} s'
        else:
            msg = 'moving'
        # still on its way: where it would get to, as the solved joints put it
        res.success, res.code, res.message = True, errors.STARTED, msg
        res.reached = cv.point(move.planned)
        res.miss = move.planned_miss
        return res

    # --- hold -------------------------------------------------------------------------------
    def _srv_hold(self, _req, res):
        try:
            res.success, res.message = True, self.device.hold()['message']
        except DeviceError as err:           # closed or dead: say so, never take spin down
            res.success, res.message = False, cv.error_line(err)
        return res

    def _max_joint_speed(self):
        """Over the hinge and slide joints joint_states reports: a block the arm knocked
        over may slide on, but the arm is still."""
        qvel = self.device.snapshot.qvel[self._joint_dofs]
        return float(np.abs(qvel).max()) if qvel.size else 0.0

    def _still_for(self, seconds):
        """A check that holds once every joint has stayed under STILL_SPEED for ``seconds``:
        a servo settling from a fast move swings through zero speed on its way."""
        since = [None]

        def check():
            now = time.monotonic()
            if self._max_joint_speed() >= STILL_SPEED:
                since[0] = None
                return False
            since[0] = now if since[0] is None else since[0]
            return now - since[0] >= seconds
        return check

    async def _execute_hold(self, goal):
        try:
            out = self.device.hold()
        except DeviceError as err:
            goal.abort()
            return HoldAction.Result(success=False, code=err.code, message=cv.error_line(err))

        def feedback():
            goal.publish_feedback(HoldAction.Feedback(max_joint_speed=self._max_joint_speed()))
        still = await self._watch(check=self._still_for(STILL_FOR_S),
                                  deadline=time.monotonic() + HOLD_SETTLE_S,
                                  feedback=feedback).future
        result = HoldAction.Result(success=True, code=errors.DONE, message=out['message'])
        if still is None:
            result.message = (f'holding; joints still moving at '
                              f'{self._max_joint_speed():.3f} after {HOLD_SETTLE_S:g} s')
        goal.succeed()
        return result

    # --- goals ------------------------------------------------------------------------------
    def _srv_set_goals(self, req, res):
        names, values = list(req.channels), list(req.values)
        n = len(names)
        if n == 0 or n != len(values):
            res.success = False
            res.codes = [errors.INVALID_ARGUMENT] * max(n, 1)
            res.messages = [f'give one value per channel ({n} channels, {len(values)} values)'
                            ] * max(n, 1)
            return res
        codes, messages = [], []
        for i, (name, value) in enumerate(zip(names, values)):
            try:
                if names.index(name) != i:
                    raise errors.InvalidArgument('channel given twice', where=name)
                limits.check_goals(self.device.layout, {name: value})
                codes.append(errors.STARTED)
                messages.append('')
            except DeviceError as err:
                codes.append(err.code)
                messages.append(str(err))
        if any(c != errors.STARTED for c in codes):
            res.success = False
            res.codes = [c if c != errors.STARTED else cv.NOT_APPLIED for c in codes]
            res.messages = [m or 'not applied: another channel was refused' for m in messages]
            return res
        try:
            self.device.set_goals(dict(zip(names, values)))
        except DeviceError as err:          # refused as a whole after all: report on all
            res.success, res.codes, res.messages = False, [err.code] * n, [str(err)] * n
            return res
        res.success, res.codes, res.messages = True, codes, ['moving'] * n
        return res

    def _on_goal_topic(self, name, msg):
        try:
            self.device.set_goals({name: msg.data})
            self._refused_topic.pop(name, None)
        except DeviceError as err:
            last = self._refused_topic.get(name, 0.0)
            if time.monotonic() - last > 2.0:     # a bad publisher must not flood the log
                self._refused_topic[name] = time.monotonic()
                self.log.warning(f'goals/{name} refused: {cv.error_line(err)}')

    # --- the rest ---------------------------------------------------------------------------
    def _srv_run_action(self, req, res):
        try:
            out = self.device.run_action(req.action, cv.run_action_args(req), wait=False)
        except DeviceError as err:
            res.success, res.code, res.message = False, err.code, str(err)
            return res
        if isinstance(out, dict):
            res.success, res.code, res.message = True, out['code'], out['message']
        else:
            res.success, res.code, res.message = True, errors.STARTED, 'moving'
        return res

    def _srv_reset(self, _req, res):
        try:
            self.device.reset()
            res.success, res.message = True, 'reset to the keyframe'
        except DeviceError as err:
            res.success, res.message = False, cv.error_line(err)
        return res

    def _srv_pause(self, req, res):
        try:
            self.device.pause(bool(req.data))
            res.success, res.message = True, 'paused' if req.data else 'running'
        except DeviceError as err:
            res.success, res.message = False, cv.error_line(err)
        return res

    async def _srv_step(self, req, res):
        """A coroutine: a million steps must not hold an executor thread, and a hold sent
        meanwhile runs between their chunks."""
        try:
            job = self.device.step(int(req.steps), wait=False)
            watch = self._watch(check=job.done)
            job.add_done_callback(self._wake_now)      # answer when done, not at a poll
            await watch.future
            if not job.done():
                raise DeviceError(errors.CLOSED, 'sim_node stopped before the steps ended')
            res.sim_time = float(job.result())
            res.success, res.message = True, f'stepped {req.steps}'
        except DeviceError as err:
            res.success, res.message = False, cv.error_line(err)
            res.sim_time = float(self.device.snapshot.time)
        return res

    def _srv_describe(self, _req, res):
        desc = self.device.describe()
        res.device, res.id = str(desc['device']), str(desc['id'])
        res.channels = cv.channel_infos(desc)
        res.actions = cv.action_infos(desc)
        res.json = cv.describe_json(desc)
        return res
