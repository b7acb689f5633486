"""Structured errors: every refusal carries a machine-readable code and the offending name.

The ROS layer maps ``code`` straight onto result codes (``LIMIT_EXCEEDED``...), so a caller
can branch on it without parsing the message, and the message says what to do instead.
"""

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


class DeviceError(Exception):
    """A refused request or a broken configuration; nothing was changed."""

    def __init__(self, code, message, *, where=None, allowed=None, **details):
        self.code = code
        self.where = where
        self.allowed = allowed
        self.details = details
        text = message
        if where is not None:
            text = f'{where}: {text}'
        if allowed is not None:
            text = f'{text} (allowed: {allowed})'
        super().__init__(text)

    @property
    def message(self):
        return str(self)

    def to_dict(self):
        out = {'code': self.code, 'message': str(self)}
        if self.where is not None:
            out['where'] = self.where
        if self.allowed is not None:
            out['allowed'] = self.allowed
        out.update(self.details)
        return out


class LimitExceeded(DeviceError):
    def __init__(self, message, **kw):
        super().__init__(LIMIT_EXCEEDED, message, **kw)


class InvalidArgument(DeviceError):
    def __init__(self, message, **kw):
        super().__init__(INVALID_ARGUMENT, message, **kw)


class UnknownName(DeviceError):
    def __init__(self, kind, name, known, **kw):
        known = sorted(known)
        shown = ', '.join(known[:20]) + (' ...' if len(known) > 20 else '')
        super().__init__(UNKNOWN_NAME, f'unknown {kind} {name!r}',
                         allowed=shown or 'none', kind=kind, name=name, **kw)


class ConfigError(DeviceError):
    def __init__(self, message, **kw):
        super().__init__(CONFIG_ERROR, message, **kw)


class ModelError(DeviceError):
    def __init__(self, message, **kw):
        super().__init__(MODEL_ERROR, message, **kw)


class ClosedError(DeviceError):
    def __init__(self, what):
        super().__init__(CLOSED, f'{what} is closed; create a new one to continue')
