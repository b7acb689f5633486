"""Structured errors: every refusal carries a machine-readable code and the offending name.

The ROS layer maps ``code`` straight onto result codes (``LIMIT_EXCEEDED``...), so a caller
can branch on it without parsing the message, and the message says what to do instead.
"""
from collections.abc import Iterable
from typing import Any

# Result codes shared by the core and the ROS interfaces.
DONE = 'DONE'
STARTED = 'STARTED'
LIMIT_EXCEEDED = 'LIMIT_EXCEEDED'
UNREACHABLE = 'UNREACHABLE'
MISSED = 'MISSED'            # a move that ended out of tolerance (the result says by how much)
INVALID_ARGUMENT = 'INVALID_ARGUMENT'
UNKNOWN_NAME = 'UNKNOWN_NAME'
PREEMPTED = 'PREEMPTED'
STOPPED = 'STOPPED'
CONFIG_ERROR = 'CONFIG_ERROR'
MODEL_ERROR = 'MODEL_ERROR'
UNSTABLE = 'UNSTABLE'
CLOSED = 'CLOSED'
NOT_PAUSED = 'NOT_PAUSED'
INTERNAL_ERROR = 'INTERNAL_ERROR'
TIMEOUT = 'TIMEOUT'
STEPPER_DEAD = 'STEPPER_DEAD'
FORBIDDEN = 'FORBIDDEN'      # not allowed by the node's configuration (world_edits, policies)
BUSY = 'BUSY'                # one at a time: another run (run_policy) is in progress

SHORT = 80                # characters of a user's value an error message repeats
MESSAGE_CAP = 2000        # characters of a whole message (the last line of defence)


def shorten(value: Any, limit: int = SHORT) -> str:
    """``repr(value)``, cut to ``limit`` characters with the full length said.

    A request can carry a megabyte-long name; echoing it whole in the reply and in every
    log line turns one bad request into megabytes of traffic. Every message that repeats
    user input goes through here, so the cut is decided once: ``'aaaa…(1048576 chars)'``.
    """
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return repr(f'{value[:limit]}…({len(value)} chars)')
    if type(value) in _CONTAINERS:
        return _shorten_container(value, limit)
    try:
        text = repr(value)
    except Exception:                  # a hostile __repr__ must not hide the real error
        text = f'<{type(value).__name__}>'
    if len(text) <= limit:
        return text
    return f'{text[:limit]}…({len(text)} chars)'


# Lists, tuples, dicts and sets are written piece by piece and only as far as the cut:
# YAML aliases (``&a [*b, *b, ...]``) nest one list in another by reference, so ten short
# lines make a value whose full ``repr`` has billions of characters and never finishes.
_CONTAINERS = (list, tuple, dict, set, frozenset)
_BRACKETS = {list: ('[', ']'), tuple: ('(', ')'), dict: ('{', '}'), set: ('{', '}'),
             frozenset: ('frozenset({', '})')}
_DEPTH = 16


def _shorten_container(value, limit):
    parts, size = [], 0
    try:
        for piece in _pieces(value, limit, 0):
            parts.append(piece)
            size += len(piece)
            if size > limit:
                break
        else:
            return ''.join(parts)
    except Exception:                  # an element's hostile __repr__
        return f'<{type(value).__name__} of {len(value)}>'
    return f'{"".join(parts)[:limit]}…({len(value)} items)'


def _pieces(value, limit, depth):
    """``repr(value)`` in pieces, lazily; a long string at most ``limit`` characters of it."""
    kind = type(value)
    if kind is str:
        yield repr(value if len(value) <= limit else value[:limit])
        return
    if kind not in _CONTAINERS or not value:
        yield repr(value)
        return
    if depth >= _DEPTH:
        yield '...'
        return
    opening, closing = _BRACKETS[kind]
    yield opening
    for i, item in enumerate(value.items() if kind is dict else value):
        if i:
            yield ', '
        if kind is dict:
            yield from _pieces(item[0], limit, depth + 1)
            yield ': '
            item = item[1]
        yield from _pieces(item, limit, depth + 1)
    if kind is tuple and len(value) == 1:
        yield ','
    yield closing


def _cap(text, limit):
    text = str(text)
    return text if len(text) <= limit else f'{text[:limit]}…({len(text)} chars)'


class DeviceError(Exception):
    """A refused request or a broken configuration; nothing was changed."""

    def __init__(self, code: str, message: str, *, where: str | None = None,
                 allowed: str | None = None, **details: Any):
        # ``where`` often holds a name from the request, ``message`` a value: both are capped
        # here so that no refusal, whoever built it, can echo a huge input in full.
        if where is not None:
            where = _cap(where, 4 * SHORT)
        self.code = code
        self.where = where
        self.allowed = allowed
        self.details = {k: _cap(v, 4 * SHORT) if isinstance(v, str) else v
                        for k, v in details.items()}
        text = _cap(message, MESSAGE_CAP)
        if where is not None:
            text = f'{where}: {text}'
        if allowed is not None:
            text = f'{text} (allowed: {allowed})'
        super().__init__(text)

    @property
    def message(self) -> str:
        return str(self)

    def to_dict(self) -> dict[str, Any]:
        out = {'code': self.code, 'message': str(self)}
        if self.where is not None:
            out['where'] = self.where
        if self.allowed is not None:
            out['allowed'] = self.allowed
        out.update(self.details)
        return out


class LimitExceeded(DeviceError):
    def __init__(self, message: str, **kw: Any):
        super().__init__(LIMIT_EXCEEDED, message, **kw)


class InvalidArgument(DeviceError):
    def __init__(self, message: str, **kw: Any):
        super().__init__(INVALID_ARGUMENT, message, **kw)


class UnknownName(DeviceError):
    def __init__(self, kind: str, name: Any, known: Iterable[str], **kw: Any):
        names = sorted(known)
        shown = ', '.join(names[:20]) + (' ...' if len(names) > 20 else '')
        if len(shown) > MESSAGE_CAP:
            shown = _cap(shown, MESSAGE_CAP)
        super().__init__(UNKNOWN_NAME, f'unknown {kind} {shorten(name)}',
                         allowed=shown or 'none', kind=kind,
                         name=name if isinstance(name, str) else shorten(name), **kw)


class ConfigError(DeviceError):
    def __init__(self, message: str, **kw: Any):
        super().__init__(CONFIG_ERROR, message, **kw)


class ModelError(DeviceError):
    def __init__(self, message: str, **kw: Any):
        super().__init__(MODEL_ERROR, message, **kw)


class ClosedError(DeviceError):
    def __init__(self, what: str):
        super().__init__(CLOSED, f'{what} is closed; create a new one to continue')
