"""Policies: batched observations in, batched actions out, checked before any environment runs.

Why batched: one ONNX call for all environments each control step costs about what one call
for a single environment costs on a small network, which is where the evaluator's speed over
a per-environment loop comes from (``bench/bench_policy.py``). A policy maps
``(n, task.obs_size)`` to ``(n, task.act_size)``; ``reset(slots, episodes)`` tells a policy
with memory (or a seeded random one) which episode each environment slot starts, so its
output can depend on the episode and never on which slot or batch the episode landed in.

    zero        all-zero actions (what "do nothing" means depends on the task's action mode)
    random      uniform in [-1, 1], from a generator seeded with (seed, episode)
    FILE.onnx   onnxruntime, one input (n, obs) and one output (n, act), float32 or float64
    module:attr a callable ``f(obs) -> actions`` (an object may add ``reset(slots, episodes)``;
                a class is instantiated with no arguments); ``module`` is imported with the
                current directory on ``sys.path``
"""

from collections.abc import Iterable
import importlib
import os
import sys
from typing import Any, TYPE_CHECKING

import numpy as np

from ..errors import DeviceError, InvalidArgument, shorten, STOPPED, TIMEOUT

if TYPE_CHECKING:     # the hints only: task.py imports this module
    from .task import Task

KINDS = 'zero, random, FILE.onnx or module:attr'


class Policy:
    """Base class; subclasses set ``obs_size``/``act_size`` when they know them."""

    name = 'policy'
    obs_size: int | None = None
    act_size: int | None = None

    def reset(self, slots: np.ndarray, episodes: np.ndarray) -> None:
        """Environments ``slots`` start episodes ``episodes`` (same length)."""

    def act(self, obs: np.ndarray, slots: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.name!r})'


class ZeroPolicy(Policy):
    name = 'zero'
    act_size: int

    def __init__(self, act_size: int):
        self.act_size = act_size

    def act(self, obs: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return np.zeros((len(obs), self.act_size))


class RandomPolicy(Policy):
    """Uniform actions from one generator per episode, so results do not depend on batching."""

    name = 'random'
    act_size: int

    def __init__(self, act_size: int, seed: int = 0):
        self.act_size, self.seed = act_size, int(seed)
        self._rng: dict[int, np.random.Generator] = {}

    def reset(self, slots: np.ndarray, episodes: np.ndarray) -> None:
        for s, e in zip(np.asarray(slots).tolist(), np.asarray(episodes).tolist(), strict=True):
            self._rng[s] = np.random.Generator(np.random.Philox(key=[self.seed, e * 8 + 7]))

    def act(self, obs: np.ndarray, slots: np.ndarray) -> np.ndarray:
        out = np.empty((len(obs), self.act_size))
        for p, s in enumerate(np.asarray(slots).tolist()):
            rng = self._rng.get(s)
            if rng is None:       # a slot nobody reset (direct use, padding): its own stream
                rng = self._rng[s] = np.random.default_rng([self.seed, abs(s), 101])
            out[p] = rng.uniform(-1.0, 1.0, self.act_size)
        return out


class CallablePolicy(Policy):
    """A user function or object: ``f(obs) -> actions``, optional ``f.reset(slots, episodes)``."""

    def __init__(self, fn: Any, name: str = 'callable'):
        if isinstance(fn, type):
            fn = fn()
        if not callable(fn):
            raise InvalidArgument(f'{name} is a {type(fn).__name__}, not callable',
                                  where='policy', allowed='a function f(obs) -> actions')
        self.fn, self.name = fn, name
        self.obs_size = _size_attr(fn, 'obs_size')
        self.act_size = _size_attr(fn, 'act_size')

    def reset(self, slots: np.ndarray, episodes: np.ndarray) -> None:
        reset = getattr(self.fn, 'reset', None)
        if callable(reset):
            reset(slots, episodes)

    def act(self, obs: np.ndarray, slots: np.ndarray) -> np.ndarray:
        try:
            return self.fn(obs)
        except SystemExit as exc:       # sys.exit in a policy must not end the process
            raise InvalidArgument(f'{self.name} called exit ({shorten(exc.code)}) when '
                                  'asked for actions', where='policy',
                                  allowed='a function f(obs) -> actions that returns') from None


def _size_attr(obj, attr):
    value = getattr(obj, attr, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class OnnxPolicy(Policy):
    """An ONNX network run by onnxruntime on the CPU, all environments in one call.

    The session's threads do not spin while idle (``allow_spinning=0``): between calls the
    pool's threads step physics on the same cores, and a spinning runtime steals them.
    """

    def __init__(self, path: str, threads: int = 0):
        try:
            import onnxruntime as ort
        except ImportError:
            raise InvalidArgument('ONNX policies need onnxruntime: pip install onnxruntime',
                                  where='policy') from None
        if not os.path.isfile(path):
            raise InvalidArgument(f'no such file {shorten(path)}', where='policy',
                                  allowed='an existing .onnx file')
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(threads)
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry('session.intra_op.allow_spinning', '0')
        try:
            self.session = ort.InferenceSession(path, opts, providers=['CPUExecutionProvider'])
        except Exception as err:  # noqa: BLE001 - onnxruntime's own message says why
            raise InvalidArgument(f'onnxruntime cannot load {shorten(path)}: {err}',
                                  where='policy') from None
        self.name = os.path.basename(path)
        ins, outs = self.session.get_inputs(), self.session.get_outputs()
        if len(ins) != 1 or len(outs) < 1:
            raise InvalidArgument(f'{self.name} has {len(ins)} inputs and {len(outs)} outputs',
                                  where='policy', allowed='one input (n, obs) and one output '
                                  '(n, act)')
        self._in, self._out = ins[0].name, outs[0].name
        types = {'tensor(float)': np.float32, 'tensor(double)': np.float64}
        if ins[0].type not in types:
            raise InvalidArgument(f'{self.name} takes {ins[0].type}', where='policy',
                                  allowed='tensor(float) or tensor(double) input')
        self._dtype = types[ins[0].type]
        for arg, shape in (('input', ins[0].shape), ('output', outs[0].shape)):
            if len(shape) != 2:
                raise InvalidArgument(f'{self.name} {arg} has shape {shape}', where='policy',
                                      allowed='rank 2: (batch, size)')
        self.obs_size = ins[0].shape[1] if isinstance(ins[0].shape[1], int) else None
        self.act_size = outs[0].shape[1] if isinstance(outs[0].shape[1], int) else None

    def act(self, obs: np.ndarray, slots: np.ndarray) -> np.ndarray:
        return self.session.run([self._out], {self._in: obs.astype(self._dtype, copy=False)})[0]


def _load_callable(text):
    module, _, attr = text.partition(':')
    if not module or not attr:
        raise InvalidArgument(f'{shorten(text)} is not module:attr', where='policy',
                              allowed=KINDS)
    if os.getcwd() not in sys.path and '' not in sys.path:
        sys.path.insert(0, os.getcwd())
    # SystemExit too: a module that runs a program on import (``pkg.__main__``) or a class
    # whose constructor exits must not end the process that loads the policy
    try:
        obj: Any = importlib.import_module(module)
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's to fix
        raise InvalidArgument(f'cannot import {shorten(module)}: {type(err).__name__}: '
                              f'{shorten(str(err), 200)}', where='policy',
                              allowed=KINDS) from None
    try:
        for part in attr.split('.'):
            if not hasattr(obj, part):
                raise InvalidArgument(f'{shorten(module)} has no attribute {shorten(attr)}',
                                      where='policy', allowed=KINDS)
            obj = getattr(obj, part)
        return CallablePolicy(obj, text)
    except InvalidArgument:
        raise
    except (Exception, SystemExit) as err:  # noqa: BLE001 - a class that cannot be made
        raise InvalidArgument(f'{shorten(text)} cannot be made a policy: '
                              f'{type(err).__name__}: {shorten(str(err), 200)}',
                              where='policy', allowed=KINDS) from None


def check_policy(policy: Policy, task: 'Task') -> Policy:
    """Refuse a policy whose sizes do not fit the task, naming both, before any env runs.

    Sizes a policy declares are compared first; then a zero batch of two observations is
    passed through it (built-ins excepted), which is how a callable's or a dynamic ONNX
    network's output size is found. A policy with memory sees that call before ``reset``.
    """
    where = 'policy'
    if policy.obs_size is not None and policy.obs_size != task.obs_size:
        raise InvalidArgument(f'{policy.name} takes {policy.obs_size} observations, task '
                              f'{task.name!r} gives {task.obs_size}', where=where,
                              allowed=f'a policy with input size {task.obs_size}',
                              policy_obs=policy.obs_size, task_obs=task.obs_size)
    if policy.act_size is not None and policy.act_size != task.act_size:
        raise InvalidArgument(f'{policy.name} outputs {policy.act_size} actions, task '
                              f'{task.name!r} takes {task.act_size}', where=where,
                              allowed=f'a policy with output size {task.act_size}',
                              policy_act=policy.act_size, task_act=task.act_size)
    if isinstance(policy, (ZeroPolicy, RandomPolicy)):
        return policy
    try:
        out = policy.act(np.zeros((2, task.obs_size)), np.array([-1, -2]))
    except DeviceError as err:
        if err.code in (TIMEOUT, STOPPED):    # a policy in a worker: late, or stopped
            raise
        raise InvalidArgument(f'{policy.name} raised on a (2, {task.obs_size}) batch of zero '
                              f'observations: {type(err).__name__}: {err}', where=where,
                              allowed=f'a policy taking (n, {task.obs_size})') from None
    except (Exception, SystemExit) as err:  # noqa: BLE001 - refused, with its own message
        raise InvalidArgument(f'{policy.name} raised on a (2, {task.obs_size}) batch of zero '
                              f'observations: {type(err).__name__}: {err}', where=where,
                              allowed=f'a policy taking (n, {task.obs_size})') from None
    check_actions(out, 2, task, policy.name)
    return policy


def check_actions(out: Any, n: int, task: 'Task', name: str,
                  episodes: Iterable[int] | None = None) -> np.ndarray:
    """The policy's output as a finite float64 ``(n, act_size)`` array, or a refusal."""
    at = '' if episodes is None else f' (episodes {shorten(list(episodes)[:5])})'
    arr = np.asarray(out) if not isinstance(out, np.ndarray) else out
    if arr.dtype == np.bool_ or arr.dtype.kind not in 'fiu':
        raise InvalidArgument(f'{name} returned {arr.dtype} actions{at}', where='policy',
                              allowed=f'numbers of shape ({n}, {task.act_size})')
    if arr.shape != (n, task.act_size):
        size = arr.shape[-1] if arr.ndim == 2 else arr.shape
        raise InvalidArgument(f'{name} outputs {size} actions per environment (shape '
                              f'{arr.shape}), task {task.name!r} takes {task.act_size}{at}',
                              where='policy', allowed=f'shape ({n}, {task.act_size})',
                              policy_act=str(size), task_act=task.act_size)
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        raise InvalidArgument(f'{name} returned NaN or infinite actions{at}', where='policy',
                              allowed='finite numbers')
    return arr


def make_policy(policy: Any, task: 'Task', seed: int = 0) -> Policy:
    """A checked Policy from ``zero``, ``random``, ``FILE.onnx``, ``module:attr``, a Policy
    or a callable; refused (InvalidArgument) when it does not fit ``task``."""
    if isinstance(policy, Policy):
        return check_policy(policy, task)
    if isinstance(policy, str):
        if policy == 'zero':
            return ZeroPolicy(task.act_size)
        if policy == 'random':
            return RandomPolicy(task.act_size, seed)
        if policy.endswith('.onnx'):
            return check_policy(OnnxPolicy(policy), task)
        if ':' in policy:
            return check_policy(_load_callable(policy), task)
        raise InvalidArgument(f'unknown policy {shorten(policy)}', where='policy',
                              allowed=KINDS)
    if callable(policy):
        return check_policy(CallablePolicy(policy, getattr(policy, '__name__', 'callable')),
                            task)
    raise InvalidArgument(f'expected a policy, got {type(policy).__name__}', where='policy',
                          allowed=KINDS)
