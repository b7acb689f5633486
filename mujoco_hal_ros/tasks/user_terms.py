"""Rewards and predicates of the user's own: a Python callable on the batch's arrays.

Why: the built-in kinds cover the common terms, but a researcher's reward (a shaped
distance, a grasp bonus) must not send them back to writing a Gymnasium env by hand. A term
``{python: {function: module:attr}}`` is called once per control step on the same
``Frame`` the built-in terms read (``qpos`` ``(n, nq)``, ``qvel``, ``sens`` (sensordata),
``command``, ``action``, ``prev_action``), for every running environment at once, so it
costs one Python call per step, not one per environment.

``attr`` is a function ``f(frame) -> (n,)`` or a class, made once with the task
(``cls(task)``) so it can look addresses up in ``task.model`` and then called as ``f(frame)``.
Like a policy, it is checked before any environment runs (called on a two-row frame of the
task's start) and on every step: a reward must return ``n`` finite numbers, a predicate
``n`` booleans (or numbers, non-zero meaning it holds); anything else, or an exception in
it, is refused with INVALID_ARGUMENT naming the term's key. ``module`` is imported with the
task file's directory and the current directory on ``sys.path`` (a task file and the module
of its terms are kept side by side).
"""

from collections.abc import Callable
import importlib
import os
import sys
from typing import Any

import numpy as np

from ..errors import DeviceError, InvalidArgument, shorten

ALLOWED = 'module:attr naming f(frame) -> (n,) or a class made as cls(task)'


def _load(text: str, where: str, search: str | None) -> Any:
    module, _, attr = text.partition(':')
    if os.getcwd() not in sys.path and '' not in sys.path:
        sys.path.insert(0, os.getcwd())
    if search and search not in sys.path:
        sys.path.insert(0, search)
    try:    # SystemExit too: a module that runs a program on import must not end ours
        obj: Any = importlib.import_module(module)
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's to fix
        raise InvalidArgument(f'cannot import {shorten(module)}: {type(err).__name__}: '
                              f'{shorten(str(err), 200)}', where=where,
                              allowed=ALLOWED) from None
    for part in attr.split('.'):
        if not hasattr(obj, part):
            raise InvalidArgument(f'{shorten(module)} has no attribute {shorten(attr)}',
                                  where=where, allowed=ALLOWED)
        obj = getattr(obj, part)
    return obj


class UserTerm:
    """One reward or predicate term of the user's own, bound to its task by ``bind``."""

    def __init__(self, function: Any, where: str, predicate: bool,
                 search: str | None = None) -> None:
        self.function = function
        self.search = search
        self.where = where
        self.predicate = predicate
        self.name = function if isinstance(function, str) else \
            getattr(function, '__name__', type(function).__name__)
        self._fn: Callable[[Any], Any] = self._unbound

    def _unbound(self, frame):
        raise InvalidArgument('the term is not bound to its task yet', where=self.where)

    def bind(self, task: Any, probe: Any) -> None:
        """Load and make the callable, then check it on ``probe`` (a two-row start frame)."""
        obj = _load(self.function, self.where, self.search) if isinstance(self.function, str) \
            else self.function
        if isinstance(obj, type):
            try:
                obj = obj(task)
            except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's to fix
                raise InvalidArgument(f'{shorten(self.name)} cannot be made with the task: '
                                      f'{type(err).__name__}: {shorten(str(err), 200)}',
                                      where=self.where, allowed=ALLOWED) from None
        if not callable(obj):
            raise InvalidArgument(f'{shorten(self.name)} is not callable', where=self.where,
                                  allowed=ALLOWED)
        self._fn = obj
        self(probe)

    def __call__(self, frame: Any) -> np.ndarray:
        n = len(frame.qpos)
        try:
            out = self._fn(frame)
        except DeviceError:
            raise
        except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's code failed
            raise InvalidArgument(f'{shorten(self.name)} raised: {type(err).__name__}: '
                                  f'{shorten(str(err), 200)}', where=self.where,
                                  allowed=ALLOWED) from None
        arr = np.asarray(out)
        what = 'booleans' if self.predicate else 'finite numbers'
        if arr.dtype.kind not in 'biuf' or (arr.dtype == np.bool_ and not self.predicate):
            raise InvalidArgument(f'{shorten(self.name)} returned {arr.dtype} values',
                                  where=self.where, allowed=f'{n} {what}, shape ({n},)')
        if arr.shape != (n,):
            raise InvalidArgument(f'{shorten(self.name)} returned shape {arr.shape} for {n} '
                                  'environments', where=self.where,
                                  allowed=f'{n} {what}, shape ({n},)')
        if arr.dtype != np.bool_ and not np.isfinite(arr).all():
            raise InvalidArgument(f'{shorten(self.name)} returned NaN or infinity',
                                  where=self.where, allowed=f'{n} {what}')
        return arr != 0 if self.predicate else arr.astype(np.float64, copy=False)
