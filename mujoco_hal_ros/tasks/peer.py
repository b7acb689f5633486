"""What a peer on the ROS domain may name: data it may, code only the operator (no ROS here).

Why: ``module:attr`` makes the process that reads it import a module, and importing runs
the module's top-level code; any peer on an open DDS domain can send a goal. So over ROS a
policy is one of

    zero, random     the built-ins;
    FILE.onnx        an ONNX network (data, run by onnxruntime) inside ``resource_roots``
                     (the rule spawn_entity's files obey; empty: any file the node can read);
    NAME             a name the operator declared in the node's ``policies`` parameter
                     (``NAME=module:attr``), run in a worker process under a deadline
                     (``policy_process``);

and anything else is refused FORBIDDEN before anything is imported or opened. A task file
named over ROS, and the model file it names, obey ``resource_roots`` the same way. The
Python API and the executables a user runs on their own machine keep ``module:attr``
(``policies.make_policy``): there the user is the operator.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
import os
import re
from typing import TYPE_CHECKING

from ..errors import DeviceError, FORBIDDEN, shorten
from .policies import make_policy, Policy

if TYPE_CHECKING:     # the hints only: a task is loaded when a peer names one
    from .spec import TaskSpec
    from .task import Task

BUILTIN_POLICIES = ('zero', 'random')
_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_\-]{0,63}\Z')
_DOTTED = re.compile(r'[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z')


def declared_policies(entries: Sequence[str]) -> dict[str, str]:
    """``["NAME=module:attr", ...]`` (the ``policies`` parameter) as ``{NAME: target}``;
    ValueError naming the entry that is not one. The modules are not imported here: the
    worker imports one when a run asks for it."""
    table: dict[str, str] = {}
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        name, eq, target = (part.strip() for part in entry.partition('='))
        if not eq or not _NAME.match(name):
            raise ValueError(f'{entry[:120]!r} is not NAME=module:attr (NAME: letters, digits, '
                             '_ and -, at most 64)')
        if name in BUILTIN_POLICIES:
            raise ValueError(f'{name!r} is a built-in policy; give the declared one another '
                             'name')
        module, colon, attr = target.partition(':')
        if not colon or not _DOTTED.match(module) or not _DOTTED.match(attr):
            raise ValueError(f'{entry[:120]!r}: {target[:80]!r} is not module:attr (e.g. '
                             'my_pkg.policies:Walker)')
        if name in table:
            raise ValueError(f'{name!r} is declared twice')
        table[name] = target
    return table


def code_terms(spec: 'TaskSpec') -> list[str]:
    """The keys of ``spec``'s terms that name Python of the user's own (``python`` kind)."""
    out = []
    for group in ('observation', 'success', 'failure', 'reward'):
        out += [f'{group}.{t.name}' for t in getattr(spec, group, ()) if t.kind == 'python']
    return out


def under_roots(path: str, roots: Sequence[str] | None) -> bool:
    """Whether ``path`` (links resolved) lies under one of ``roots``; True without roots."""
    if not roots:
        return True
    real = os.path.realpath(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep)
               for r in (os.path.realpath(r) for r in roots))


@dataclass(frozen=True)
class PeerPolicies:
    """The node's rules for what a peer names: declared policies, roots, deadline, memory."""

    declared: dict[str, str] = field(default_factory=dict)
    roots: tuple[str, ...] | None = None
    timeout_s: float = 1.0
    memory_mb: int = 0

    @classmethod
    def from_parameters(cls, policies: Sequence[str], roots: Sequence[str], timeout_s: float,
                        memory_mb: int) -> 'PeerPolicies':
        return cls(declared_policies(policies), tuple(roots) or None, float(timeout_s),
                   int(memory_mb))

    def _forbidden(self, what, value, allowed):
        return DeviceError(FORBIDDEN, f'{what} {shorten(value)} is not one this node may '
                           'run for a peer; nothing was opened or imported', where=what,
                           allowed=allowed)

    def _roots_words(self):
        return ('under resource_roots (' + ', '.join(self.roots) + ')') if self.roots else \
            'the node can read'

    def policy(self, requested: str, start: bool = True) -> str | Policy:
        """The policy a peer named, as ``make_policy`` takes it: a built-in name, the ONNX
        file's path, or a ProcessPolicy (its worker started) for a declared name; refused
        FORBIDDEN for anything else, before anything is imported. ``start=False`` only
        checks the name (a declared one comes back as its name)."""
        if not isinstance(requested, str):
            raise self._forbidden('policy', requested, self._allowed())
        if requested in BUILTIN_POLICIES:
            return requested
        target = self.declared.get(requested)
        if target is not None:
            if not start:
                return requested
            from .policy_process import ProcessPolicy
            return ProcessPolicy(target, self.timeout_s, name=requested,
                                 memory_mb=self.memory_mb)
        if requested.endswith('.onnx') and '\0' not in requested:
            if not under_roots(requested, self.roots):
                raise self._forbidden('policy', requested, self._allowed())
            return requested
        raise self._forbidden('policy', requested, self._allowed())

    def _allowed(self) -> str:
        names = ', '.join(sorted(self.declared)) or 'none declared'
        return (f'zero, random, a .onnx file {self._roots_words()}, or a name the operator '
                f'declared in the parameter policies (NAME=module:attr): {names}')

    def make(self, requested: str, task: 'Task', seed: int = 0) -> Policy:
        """``policy(requested)`` made and checked against ``task`` (a declared one's worker
        is closed again if it does not fit)."""
        policy = self.policy(requested)
        try:
            return make_policy(policy, task, seed)
        except BaseException:
            close = getattr(policy, 'close', None)
            if close is not None:
                close()
            raise

    def task(self, requested: str) -> 'Task':
        """The task a peer named: a built-in, or a task file (and the model it names)
        under ``resource_roots``; FORBIDDEN outside them, before the file is read, and
        FORBIDDEN for a file whose terms are Python of the user's own (``{python:
        {function: module:attr}}``), before anything is imported: a task file is data a peer
        may name, its code terms are code."""
        from . import builtin_tasks, load_task
        from .spec import load_file
        from .task import model_file, Task
        if not isinstance(requested, str) or requested in builtin_tasks():
            return load_task(requested)
        allowed = (', '.join(builtin_tasks()) + ' or a task file ' + self._roots_words())
        if self.roots and ('\0' in requested or not under_roots(requested, self.roots)):
            raise self._forbidden('task', requested, allowed)
        if '\0' in requested or not os.path.isfile(requested):
            return load_task(requested)          # its own refusal: no such file
        spec = load_file(requested)
        code = code_terms(spec)
        if code:
            raise DeviceError(FORBIDDEN, f'task {shorten(requested)} has terms that run Python '
                              f'of its own ({", ".join(code)}); a peer may not make the node '
                              'import code: run it with evaluate_policy on your machine, or '
                              'give the term a built-in kind', where='task',
                              allowed='task files whose terms are built-in kinds')
        from .. import menagerie
        if self.roots and spec.model != 'bench_arm' and \
                spec.model not in menagerie.model_names():
            model = model_file(spec)
            if not under_roots(model, self.roots):
                raise DeviceError(FORBIDDEN, f'task {shorten(requested)} names the model '
                                  f'{shorten(model)}, outside resource_roots; nothing was '
                                  'loaded', where='task', allowed='a model file ' +
                                  self._roots_words())
        return Task(spec)
