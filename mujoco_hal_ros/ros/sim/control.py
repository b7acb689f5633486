"""Services, actions and goal topics: requests translated to Device calls and back.

Nothing here waits on the device inside a callback. A Device call that hands work to the
stepper and waits for it to be taken (``set_goals``, ``reset``, ``pause``, ``run_action``,
the start of ``move_to``) waits behind whatever the stepper is doing, a long ``step(n)``
included, so every service and action callback is a coroutine that runs that call on the
CompletionBridge's worker (``ros/bridge.py``) and awaits it: the executor's threads stay
free to answer ``describe``, ``hold`` and the rest meanwhile. A move's end, a step job's
future, the next feedback time or a cancel likewise complete an rclpy future on the
executor, and nothing polls while nothing happens. A refused request raises DeviceError
before anything is posted, so its code goes straight into the result and nothing moved;
checks that need no physics (set_goals' per-channel codes) run in the callback itself.

``goals/<channel>`` messages are checked in the subscription callback (a bad one is logged
and never queued) and handed to the worker latest-first: a value the next message replaced
before the stepper took it is dropped, as a full subscription queue would drop it.

Hold is the one exception: its request is urgent, taken between the chunks of any step, so
it waits one chunk at most; it has its own mutually exclusive callback group so that it
gets an executor thread even while a flood of other requests keeps the control group busy.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from rclpy.action import CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from std_msgs.msg import Float64
from std_srvs.srv import SetBool, Trigger

from ... import checks, errors, joint_view
from ...action import Hold as HoldAction, MoveTo as MoveToAction
from ...config import limits
from ...errors import DeviceError
from ...motion import settling
from ...motion.move import point_pos
from ...srv import Describe, MoveTo as MoveToSrv, RunAction, SetGoals, Step
from .. import conversions as cv
from ..guard import ActionServer  # every callback guarded
from ..qos import action_queues, REQUEST_QOS

if TYPE_CHECKING:                      # types only: no import at run time
    from rclpy.node import Node
    from rclpy.subscription import Subscription
    from rclpy.task import Future

    from ...sim.ports import DeviceApi
    from ..bridge import CompletionBridge

POLL_S = 0.02               # first move_to feedback; the Hold action's stillness checks
FEEDBACK_S = 0.1            # feedback period of both actions
HOLD_SETTLE_S = 3.0         # the longest the Hold action waits for the joints to settle


class Control:
    """Every request interface of sim_node over one Device."""

    def __init__(self, node: Node, device: DeviceApi, bridge: CompletionBridge,
                 namespace: str = '') -> None:
        # namespace: one robot of several (``RobotView``): its interfaces under
        # ``<namespace>/``, and none of the world's (reset, pause, step are the node's own)
        self.node = node
        self.device = device
        self.namespace = namespace
        self.world = not namespace
        ns = f'{namespace}/' if namespace else ''
        self.bridge = bridge
        self.log = node.get_logger()
        self.group = ReentrantCallbackGroup()
        self.hold_group = MutuallyExclusiveCallbackGroup()
        self._lock = threading.Lock()
        # move_to goal id -> future its cancel completes
        self._cancel_wakes: dict[bytes, Future] = {}
        self._refused_topic: dict[str, float] = {}     # channel -> when last refused
        # goals/<channel> values the worker has not taken
        self._topic_goals: dict[str, float] = {}
        self._goals_running = 0              # move_to and hold goals not answered yet
        self._joint_dofs = self._dofs(device.model)
        n, g = node, self.group
        self.move_action = ActionServer(
            n, MoveToAction, f'{ns}move_to', execute_callback=self._counted(self._run_move),
            callback_group=g, goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=self._on_move_cancel, **action_queues())
        self.hold_action = ActionServer(
            n, HoldAction, f'{ns}hold', execute_callback=self._counted(self._run_hold),
            callback_group=self.hold_group, goal_callback=lambda _goal: GoalResponse.ACCEPT,
            cancel_callback=lambda _handle: CancelResponse.REJECT, **action_queues())
        served = [(MoveToSrv, 'move_to', self._srv_move_to, g),
                  (Trigger, 'hold', self._srv_hold, self.hold_group),
                  (SetGoals, 'set_goals', self._srv_set_goals, g),
                  (RunAction, 'run_action', self._srv_run_action, g),
                  (Describe, 'describe', self._srv_describe, g)]
        if self.world:
            served[4:4] = [(Trigger, 'reset', self._srv_reset, g),
                           (SetBool, 'pause', self._srv_pause, g),
                           (Step, 'step', self._srv_step, g)]
        self.services = [n.create_service(kind, ns + name, callback, callback_group=group,
                                          qos_profile=REQUEST_QOS)
                         for kind, name, callback, group in served]
        self.goal_subs: dict[str, Subscription] = {}
        self._follow_goals(device.layout)
        self._unsubscribe = device.swaps.subscribe(self._follow)

    def _follow(self, event):
        """The model swapped: the joints hold watches and the goal topics are the new
        model's (another world's channels get their own ``goals/<name>``)."""
        self._joint_dofs = self._dofs(event.model)
        self._follow_goals(self.device.layout)     # a robot's own channels, or the device's

    def _dofs(self, model):
        """The dofs hold watches: every hinge and slide joint's (what joint_states
        reports), or a robot's own."""
        view = joint_view.view(model)
        if self.world:
            return view.moving().dofs
        layout = self.device.layout                # a robot's names are its own
        return view.dofs(layout.joints.index(j) for j in self.device.joint_names)

    def _follow_goals(self, layout):
        """One ``goals/<name>`` subscription per goal channel of ``layout``, no more."""
        with self._lock:
            for name in [n for n in self.goal_subs if n not in layout.goals]:
                self.node.destroy_subscription(self.goal_subs.pop(name))
            for name in layout.goals:
                if name not in self.goal_subs:
                    self.goal_subs[name] = self.node.create_subscription(
                        Float64, f'{self.namespace}/goals/{name}' if self.namespace
                        else f'goals/{name}',
                        lambda msg, name=name: self._on_goal_topic(name, msg), 10,
                        callback_group=self.group)

    def describe(self) -> list[str]:
        ns = f'{self.namespace}/' if self.namespace else ''
        out = ['move_to (action and service)', 'hold (action and service)', 'set_goals',
               'run_action'] + (['reset', 'pause', 'step'] if self.world else []) + [
               'describe']
        out = [ns + name for name in out]
        out += [f'{ns}goals/{n} (topic)' for n in self.device.layout.goals]
        return out

    @property
    def goals_running(self) -> int:
        """Action goals whose result is not out yet: shutdown waits for it to reach 0."""
        return self._goals_running

    def _goal_began(self, change):
        with self._lock:
            self._goals_running += change

    def _counted(self, run):
        """``run`` as an action's execute callback whose goal counts in ``goals_running``
        until its result is out, whichever way it ends."""
        async def execute(goal):
            self._goal_began(1)
            try:
                return await run(goal)
            finally:
                self._goal_began(-1)
        return execute

    def destroy(self) -> None:
        """The bridge answers every waiting coroutine (the node closes it)."""
        self._unsubscribe()
        self.move_action.destroy()
        self.hold_action.destroy()
        if not self.world:          # a robot removed while the node runs on
            for service in self.services:
                self.node.destroy_service(service)
            with self._lock:
                for sub in self.goal_subs.values():
                    self.node.destroy_subscription(sub)
                self.goal_subs.clear()

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
    async def _start_move(self, req):
        """Device.move_to(wait=False) on the worker (the IK, then the stepper taking the
        path): the Move, or the DeviceError that refused it."""
        try:
            return await self.bridge.call(
                lambda: self.device.move_to(**cv.move_request(req), wait=False)), None
        except DeviceError as err:
            return None, err

    def _on_move_cancel(self, goal):
        """Wake the goal's coroutine now; it turns the cancel into a hold."""
        with self._lock:
            wake = self._cancel_wakes.get(bytes(goal.goal_id.uuid))
        if wake is not None:
            self.bridge.complete(wake)
        return CancelResponse.ACCEPT

    async def _follow_move(self, goal, move):
        """Until the move ends: feedback at the first poll and every FEEDBACK_S after, and a
        cancel turned into hold (the move then ends STOPPED). The move's result, or None if
        the node stopped first."""
        done = self.bridge.move(move)
        key = bytes(goal.goal_id.uuid)
        cancel = self.bridge.future()
        with self._lock:
            self._cancel_wakes[key] = cancel
        feedback = self._move_feedback(goal, move)
        next_feedback = time.monotonic() + POLL_S
        try:
            if goal.is_cancel_requested:
                self.device.hold()
            while not done.done() and not self.bridge.closed:
                watch = (done,) if cancel.done() else (done, cancel)
                await self.bridge.wait(*watch,
                                       timeout=max(0.0, next_feedback - time.monotonic()))
                if done.done():
                    break
                if goal.is_cancel_requested and not move.done() and self.device.move is move:
                    self.device.hold()             # cancel means hold; the move ends STOPPED
                now = time.monotonic()
                if now >= next_feedback and not move.done():
                    next_feedback = now + FEEDBACK_S
                    feedback()
        except Exception as err:  # noqa: BLE001 - a waiting client still gets an answer
            return {'success': False, 'code': getattr(err, 'code', 'ERROR'),
                    'message': str(err)}
        finally:
            with self._lock:
                self._cancel_wakes.pop(key, None)
        return done.result() if done.done() else None

    async def _run_move(self, goal):
        result = MoveToAction.Result()
        move, err = await self._start_move(goal.request)
        if err is not None:
            self.log.info(f'move_to refused: {cv.error_line(err)}')
            goal.abort()
            return cv.fill_error(result, err)
        outcome = await self._follow_move(goal, move)
        if outcome is None:
            outcome = {'success': False, 'code': errors.CLOSED,
                       'message': 'sim_node is shutting down: the move was not finished'}
        cv.fill_move_result(result, outcome)
        if goal.is_cancel_requested:
            goal.canceled()
        elif result.success:
            goal.succeed()
        else:
            goal.abort()
        return result

    async def _srv_move_to(self, req, res):
        move, err = await self._start_move(req)
        if err is not None:
            return cv.fill_error(res, err)
        if req.wait:
            wait = self.device.params['action_wait']
            done = self.bridge.move(move)
            if await self.bridge.wait(done, timeout=wait) and done.result() is not None:
                return cv.fill_move_result(res, done.result())
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
        return settling.joint_speed(self.device.snapshot.qvel, self._joint_dofs)

    async def _settle(self, feedback):
        """Poll until the joints settled (``motion.settling``: still, and for long
        enough) (True) or HOLD_SETTLE_S passed (False), feedback at the first poll and
        every FEEDBACK_S after."""
        stillness = settling.Stillness()

        def still():
            return stillness.update(self._max_joint_speed(), time.monotonic())
        deadline = time.monotonic() + HOLD_SETTLE_S
        next_feedback = 0.0
        try:
            while not self.bridge.closed:
                await self.bridge.sleep(POLL_S)
                now = time.monotonic()
                if still():
                    return True
                if now >= deadline:
                    return False
                if now >= next_feedback:
                    next_feedback = now + FEEDBACK_S
                    feedback()
        except Exception:  # noqa: BLE001 - closed under us: the hold itself was answered
            return True
        return True                 # shutting down: the hold itself is in force

    async def _run_hold(self, goal):
        try:
            out = self.device.hold()
        except DeviceError as err:
            goal.abort()
            return HoldAction.Result(success=False, code=err.code, message=cv.error_line(err))

        def feedback():
            goal.publish_feedback(HoldAction.Feedback(max_joint_speed=self._max_joint_speed()))
        still = await self._settle(feedback)
        result = HoldAction.Result(success=True, code=errors.DONE, message=out['message'])
        if not still:
            result.message = (f'holding; joints still moving at '
                              f'{self._max_joint_speed():.3f} after {HOLD_SETTLE_S:g} s')
        goal.succeed()
        return result

    # --- goals ------------------------------------------------------------------------------
    async def _srv_set_goals(self, req, res):
        names, values = list(req.channels), list(req.values)
        n = len(names)
        if n == 0 or n != len(values):
            res.success = False
            res.codes = [errors.INVALID_ARGUMENT] * max(n, 1)
            res.messages = [f'give one value per channel ({n} channels, {len(values)} values)'
                            ] * max(n, 1)
            return res
        codes, messages = [], []
        seen = set()
        for name, value in zip(names, values, strict=True):
            try:
                if name in seen:            # the shared check's refusal, on this channel
                    checks.unique_names([name, name], where='set_goals', kind='channel')
                seen.add(name)
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
            await self.bridge.call(self.device.set_goals, dict(zip(names, values, strict=True)))
        except DeviceError as err:          # refused as a whole after all: report on all
            res.success, res.codes, res.messages = False, [err.code] * n, [str(err)] * n
            return res
        res.success, res.codes, res.messages = True, codes, ['moving'] * n
        return res

    def _on_goal_topic(self, name, msg):
        """Checked here, applied on the worker: the newest value of each channel wins."""
        try:
            limits.check_goals(self.device.layout, {name: msg.data})
        except DeviceError as err:
            self._topic_refused(name, err)
            return
        with self._lock:
            queue = not self._topic_goals
            self._topic_goals[name] = msg.data
        if queue:
            self.bridge.post(self._apply_topic_goals)

    def _apply_topic_goals(self):
        """Worker: every channel's newest value, one set_goals each as each message was."""
        with self._lock:
            goals, self._topic_goals = self._topic_goals, {}
        for name, value in goals.items():
            try:
                self.device.set_goals({name: value})
                with self._lock:
                    self._refused_topic.pop(name, None)
            except DeviceError as err:
                self._topic_refused(name, err)

    def _topic_refused(self, name, err):
        with self._lock:
            last = self._refused_topic.get(name, 0.0)
            quiet = time.monotonic() - last <= 2.0    # a bad publisher must not flood the log
            if not quiet:
                self._refused_topic[name] = time.monotonic()
        if not quiet:
            self.log.warning(f'goals/{name} refused: {cv.error_line(err)}')

    # --- the rest ---------------------------------------------------------------------------
    async def _srv_run_action(self, req, res):
        try:
            if self.device.action(req.action).command == 'hold':
                # hold's urgent path, not queued behind other requests on the worker
                out = self.device.run_action(req.action, cv.run_action_args(req), wait=False)
            else:
                out = await self.bridge.call(self.device.run_action, req.action,
                                             cv.run_action_args(req), wait=False)
        except DeviceError as err:
            res.success, res.code, res.message = False, err.code, str(err)
            return res
        if isinstance(out, dict):
            res.success, res.code, res.message = True, out['code'], out['message']
        else:
            res.success, res.code, res.message = True, errors.STARTED, 'moving'
        return res

    async def _srv_reset(self, _req, res):
        try:
            await self.bridge.call(self.device.reset)
            res.success, res.message = True, 'reset to the keyframe'
        except DeviceError as err:
            res.success, res.message = False, cv.error_line(err)
        return res

    async def _srv_pause(self, req, res):
        try:
            await self.bridge.call(self.device.pause, bool(req.data))
            res.success, res.message = True, 'paused' if req.data else 'running'
        except DeviceError as err:
            res.success, res.message = False, cv.error_line(err)
        return res

    async def _srv_step(self, req, res):
        """A coroutine: a million steps must not hold an executor thread, and a hold sent
        meanwhile runs between their chunks."""
        try:
            sim_time = await self.bridge.wrap(self.device.step(int(req.steps), wait=False))
            if sim_time is None:
                raise DeviceError(errors.CLOSED, 'sim_node stopped before the steps ended')
            res.sim_time = float(sim_time)
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
