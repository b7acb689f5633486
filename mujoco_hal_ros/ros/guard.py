"""One guard around every ROS entry point: no exception a request provokes ends the node.

rclpy re-raises an exception that escapes a service, subscription, timer or guard-condition
callback (or an action's goal and cancel callbacks) out of ``executor.spin``, and the node
is gone: one bad request from any DDS peer ends the simulation for everyone. The guard is in
one place, so no entry point can be forgotten: ``GuardedNode`` wraps every callback handed
to ``create_service``, ``create_subscription``, ``create_timer`` and
``create_guard_condition``, and ``ActionServer`` (a drop-in for rclpy's) wraps the goal,
cancel, handle-accepted and execute callbacks. An unexpected exception is answered (a
service response, an action result) with the code ``INTERNAL_ERROR`` and a short message,
logged once with its traceback (the same failure at the same entry point at most once per
``LOG_EVERY_S``, so a peer that repeats it cannot flood the log), and the node runs on.

Refusals a callback means to give (a ``DeviceError``) are still answered by the callback
itself with their own codes; the guard sees only what no callback expected.
"""

from __future__ import annotations

from collections.abc import Callable
import functools
import inspect
import json
import threading
import time
import traceback
from typing import Any, overload, TYPE_CHECKING, TypeAlias, TypeVar

from rclpy.action import ActionServer as _RclpyActionServer, CancelResponse, GoalResponse
from rclpy.node import Node

from ..errors import INTERNAL_ERROR, MESSAGE_CAP

if TYPE_CHECKING:     # the hints only
    from rclpy.action.server import ServerGoalHandle
    from rclpy.guard_condition import GuardCondition
    from rclpy.impl.rcutils_logger import RcutilsLogger
    from rclpy.service import Service
    from rclpy.subscription import Subscription
    from rclpy.timer import Timer

MsgT = TypeVar('MsgT')
# What a callback's failure is logged to: the logger, or how to get it when it happens.
LoggerSource: TypeAlias = 'RcutilsLogger | Callable[[], RcutilsLogger]'

GUARDED = '__mujoco_hal_ros_guarded__'   # set on every wrapped callback (tests look for it)
LOG_EVERY_S = 10.0
SHORT_MESSAGE = 300     # characters of the exception's text in a reply
_TEXT_FIELDS = ('message', 'error_message', 'error_string', 'status_message')
_RESULT_TYPE = 'simulation_interfaces/Result'


def short_message(exc: BaseException, where: str) -> str:
    """``INTERNAL_ERROR in <where>: <Type>: <text>`` cut to a reply's size: what failed,
    and what to do (report it; the node runs on)."""
    text = ' '.join(str(exc).split())
    if len(text) > SHORT_MESSAGE:
        text = f'{text[:SHORT_MESSAGE]}…({len(text)} chars)'
    return (f'{INTERNAL_ERROR} in {where}: {type(exc).__name__}: {text}; nothing is known to '
            'have changed and sim_node runs on. This is a bug: please report it with the '
            'request and the node log')[:MESSAGE_CAP]


def fill_error(msg: MsgT, text: str, code: str = INTERNAL_ERROR) -> MsgT:
    """Write a failure into any response or action result: ``success`` false, ``code`` and
    ``codes``, the message fields, a simulation_interfaces ``result`` (OPERATION_FAILED) and
    a ``json`` field. Fields a type lacks are skipped; returns ``msg``."""
    fill: Any = msg         # any rosidl message: its fields are read from the type itself
    try:
        fields = fill.get_fields_and_field_types()
    except AttributeError:
        return msg
    for name, kind in fields.items():
        try:
            if name == 'success' and kind == 'boolean':
                fill.success = False
            elif name == 'code' and kind == 'string':
                fill.code = code
            elif name == 'codes' and kind == 'sequence<string>':
                fill.codes = [code]
            elif name == 'messages' and kind == 'sequence<string>':
                fill.messages = [text]
            elif name in _TEXT_FIELDS and kind == 'string':
                setattr(fill, name, text)
            elif name == 'json' and kind == 'string':
                fill.json = json.dumps({'code': code, 'message': text})
            elif name == 'result' and kind == _RESULT_TYPE:
                result = fill.result
                result.result = type(result).RESULT_OPERATION_FAILED
                result.error_message = f'{code}: {text}' if code not in text else text
        except Exception:  # noqa: BLE001 - a field that will not take it stays as it is
            pass
    return msg


_TEARDOWN = threading.Event()


def tearing_down() -> None:
    """The process's node is being torn down (``run_node``, after every waiting client was
    answered): from here on a callback that fails does so because the executor or the
    context went away under it (Jazzy's ``create_task`` on a shut-down executor, a goal
    accepted in the last milliseconds), which is the shutdown, not a failure to log as an
    ERROR. The callback's client is still answered (INTERNAL_ERROR) where it can be."""
    _TEARDOWN.set()


class _Log:
    """Once per (entry point, exception type) per LOG_EVERY_S, with the traceback; nothing
    once the process tears its node down (``tearing_down``)."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def __call__(self, logger: RcutilsLogger, where: str, exc: BaseException) -> None:
        if _TEARDOWN.is_set():
            return
        key = (where, type(exc).__name__)
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(key, -LOG_EVERY_S) < LOG_EVERY_S:
                return
            self._last[key] = now
            if len(self._last) > 1000:
                self._last = {key: now}
        tb = ''.join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        try:
            logger.error(f'{INTERNAL_ERROR} in {where} (the node runs on): {tb}')
        except Exception:  # noqa: BLE001 - a logger torn down at shutdown
            pass


log_failure = _Log()


@overload
def _wrap(callback: None, where: str, logger: LoggerSource,
          on_error: Callable[..., Any]) -> None: ...


@overload
def _wrap(callback: Callable[..., Any], where: str, logger: LoggerSource,
          on_error: Callable[..., Any]) -> Callable[..., Any]: ...


def _wrap(callback: Callable[..., Any] | None, where: str, logger: LoggerSource,
          on_error: Callable[..., Any]) -> Callable[..., Any] | None:
    """``callback`` (plain or ``async def``) that hands an escaping Exception to
    ``on_error(exc, *args)`` after logging it; the wrapper keeps the callback's kind, as
    rclpy awaits coroutine functions and calls the others."""
    if callback is None or getattr(callback, GUARDED, False):
        return callback
    get_logger = logger if callable(logger) else (lambda: logger)
    if inspect.iscoroutinefunction(callback):
        @functools.wraps(callback)
        async def guarded(*args: Any, **kwargs: Any) -> Any:  # kwargs: a timer's TimerInfo
            try:
                return await callback(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the point of the guard
                log_failure(get_logger(), where, exc)
                return on_error(exc, *args)
    else:
        @functools.wraps(callback)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return callback(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the point of the guard
                log_failure(get_logger(), where, exc)
                return on_error(exc, *args)
    setattr(guarded, GUARDED, True)
    return guarded


def _response(value: MsgT, response: MsgT) -> MsgT:
    """``value`` if it is a response of the service's type; rclpy would fail to send
    anything else (None, a dict) out of the executor, so it counts as a failure."""
    if type(value) is not type(response):
        raise TypeError(f'the callback returned {type(value).__name__}, not '
                        f'{type(response).__name__}')
    return value


@overload
def service(callback: None, name: str, logger: LoggerSource) -> None: ...


@overload
def service(callback: Callable[..., Any], name: str,
            logger: LoggerSource) -> Callable[..., Any]: ...


def service(callback: Callable[..., Any] | None, name: str,
            logger: LoggerSource) -> Callable[..., Any] | None:
    """A service callback answering INTERNAL_ERROR in its response on an exception (or on
    a return value that is no response)."""
    if callback is None or getattr(callback, GUARDED, False):
        return callback
    where = f'service {name}'

    async def checked_async(request: Any, response: Any) -> Any:
        return _response(await callback(request, response), response)

    def checked_sync(request: Any, response: Any) -> Any:
        return _response(callback(request, response), response)
    checked = checked_async if inspect.iscoroutinefunction(callback) else checked_sync
    functools.update_wrapper(checked, callback)

    def answer(exc: Exception, _request: Any = None, response: Any = None, *_: Any) -> Any:
        return fill_error(response, short_message(exc, where)) if response is not None \
            else None
    return _wrap(checked, where, logger, answer)


@overload
def plain(callback: None, where: str, logger: LoggerSource) -> None: ...


@overload
def plain(callback: Callable[..., Any], where: str,
          logger: LoggerSource) -> Callable[..., Any]: ...


def plain(callback: Callable[..., Any] | None, where: str,
          logger: LoggerSource) -> Callable[..., Any] | None:
    """A subscription, timer or guard-condition callback: logged, nothing to answer."""
    return _wrap(callback, where, logger, lambda *_: None)


class GuardedNode(Node):
    """A Node whose every service, subscription, timer and guard-condition callback is
    guarded (rclpy's own parameter services included): the base of sim_node and pool_node.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Services rclpy made without create_service (get_type_description): guarded too.
        for srv in self.services:
            if not getattr(srv.callback, GUARDED, False):
                srv.callback = service(srv.callback, srv.srv_name, self._guard_logger)

    def _guard_logger(self) -> RcutilsLogger:
        return self.get_logger()

    def create_service(self, srv_type: type[Any], srv_name: str,
                       callback: Callable[[Any, Any], Any], *args: Any,
                       **kwargs: Any) -> Service:
        return super().create_service(srv_type, srv_name,
                                      service(callback, srv_name, self._guard_logger),
                                      *args, **kwargs)

    def create_subscription(self, msg_type: type[MsgT], topic: str,
                            callback: Callable[..., Any], *args: Any,
                            **kwargs: Any) -> Subscription:
        return super().create_subscription(
            msg_type, topic, plain(callback, f'subscription {topic}', self._guard_logger),
            *args, **kwargs)

    def create_timer(self, timer_period_sec: float, callback: Callable[..., Any] | None,
                     *args: Any, **kwargs: Any) -> Timer:
        name = getattr(callback, '__qualname__', 'callback')
        return super().create_timer(timer_period_sec,
                                    plain(callback, f'timer {name}', self._guard_logger),
                                    *args, **kwargs)

    def create_guard_condition(self, callback: Callable[[], Any], *args: Any,
                               **kwargs: Any) -> GuardCondition:
        name = getattr(callback, '__qualname__', 'callback')
        return super().create_guard_condition(
            plain(callback, f'guard condition {name}', self._guard_logger), *args, **kwargs)


class ActionServer(_RclpyActionServer):
    """rclpy's ActionServer with every callback guarded: a goal callback that raises rejects
    the goal, a cancel callback that raises rejects the cancel, and an execute (or
    handle-accepted) callback that raises aborts the goal with a result carrying
    INTERNAL_ERROR, so the client always gets an answer."""

    def _where(self, part: str) -> str:
        name = getattr(self, '_guard_name', None) or 'action'
        return f'action {name} ({part})'

    def __init__(self, node: Node, action_type: type[Any], action_name: str, *args: Any,
                 **kwargs: Any) -> None:
        self._guard_name = action_name
        self._guard_node = node
        self._guard_type = action_type
        super().__init__(node, action_type, action_name, *args, **kwargs)

    def _guard_logger(self) -> RcutilsLogger:
        return self._guard_node.get_logger()

    def _error_result(self, exc: Exception, part: str) -> Any:
        return fill_error(self._guard_type.Result(), short_message(exc, self._where(part)))

    def register_goal_callback(self, goal_callback: Callable[[Any], GoalResponse] | None
                               ) -> None:
        super().register_goal_callback(_wrap(goal_callback, self._where('goal'),
                                             self._guard_logger,
                                             lambda *_: GoalResponse.REJECT))

    def register_cancel_callback(self, cancel_callback: Callable[[Any], CancelResponse] | None
                                 ) -> None:
        super().register_cancel_callback(_wrap(cancel_callback, self._where('cancel'),
                                               self._guard_logger,
                                               lambda *_: CancelResponse.REJECT))

    def register_handle_accepted_callback(
            self, handle_accepted_callback: Callable[[ServerGoalHandle], None]
            | None) -> None:
        def answer(exc: Exception, handle: ServerGoalHandle | None = None,
                   *_: Any) -> None:
            if handle is None:
                return None
            result = self._error_result(exc, 'accepted')

            def aborted(h: ServerGoalHandle) -> Any:
                if h.is_active:
                    h.abort()
                return result
            try:
                handle.execute(aborted)        # the result the client waits for
            except Exception:  # noqa: BLE001 - already executing: the execute guard answers
                pass
            return None
        super().register_handle_accepted_callback(_wrap(
            handle_accepted_callback, self._where('accepted'), self._guard_logger, answer))

    def register_execute_callback(
            self, execute_callback: Callable[[ServerGoalHandle], Any]) -> None:
        def answer(exc: Exception, handle: ServerGoalHandle | None = None,
                   *_: Any) -> Any:
            result = self._error_result(exc, 'execute')
            try:
                if handle is not None and handle.is_active:
                    handle.abort()
            except Exception:  # noqa: BLE001 - the goal ended meanwhile
                pass
            return result
        super().register_execute_callback(_wrap(execute_callback, self._where('execute'),
                                                self._guard_logger, answer))
