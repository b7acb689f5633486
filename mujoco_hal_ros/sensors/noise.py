"""Noise and delay models for simulated sensors: bias, Gaussian noise, delay, dropout.

A stack that only ever sees perfect data is not tested; one that sees a different random
stream every run cannot be debugged. So every model draws from its own ``numpy`` Generator
seeded from one seed and the sensor's name: the same seed gives the same readings.
Everything is off by default (a zero model returns its input unchanged).
"""

from collections import deque
from dataclasses import dataclass
import zlib

import numpy as np

from ..errors import ConfigError

KEYS = ('bias', 'std', 'delay', 'dropout')


@dataclass(frozen=True)
class NoiseSpec:
    """bias and std in the sensor's units (per component), delay in simulated seconds,
    dropout as the probability that a reading is lost."""

    bias: float = 0.0
    std: float = 0.0
    delay: float = 0.0
    dropout: float = 0.0

    @property
    def off(self):
        return not (self.bias or self.std or self.delay or self.dropout)


def spec_from(entry, where, number):
    """A NoiseSpec from a device-file mapping (``number`` checks a finite number)."""
    if entry is None:
        return NoiseSpec()
    if not isinstance(entry, dict):
        raise ConfigError(f'expected a mapping, got {type(entry).__name__}', where=where)
    for key in entry:
        if key not in KEYS:
            raise ConfigError(f'unknown key {key!r}', where=where, allowed=', '.join(KEYS))
    vals = {k: number(v, f'{where}.{k}') for k, v in entry.items()}
    for key in ('std', 'delay'):
        if vals.get(key, 0.0) < 0:
            raise ConfigError('must be 0 or above', where=f'{where}.{key}')
    if not 0.0 <= vals.get('dropout', 0.0) < 1.0:
        raise ConfigError('a probability from 0 up to (not including) 1',
                          where=f'{where}.dropout')
    return NoiseSpec(**vals)


def generator(seed, name):
    """The Generator of one sensor: from the global seed and the sensor's name."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode())])


class Noise:
    """One sensor's corruption: ``apply(t, values)`` -> ``(t_measured, values)`` or None.

    With a delay, the reading returned is the newest one taken at least ``delay`` simulated
    seconds ago (stamped with the time it was taken, as a real sensor's late message is),
    None while there is none yet; a dropped reading is None.
    """

    def __init__(self, spec, seed=0, name=''):
        self.spec = spec
        self._rng = generator(seed, name)
        self._queue = deque()

    def apply(self, t, values):
        s = self.spec
        if s.off:
            return t, values
        out = np.asarray(values, dtype=float)
        if s.std:
            out = out + self._rng.normal(0.0, s.std, out.shape)
        if s.bias:
            out = out + s.bias
        drop = s.dropout and self._rng.random() < s.dropout
        if s.delay:
            if not drop:
                self._queue.append((t, out))
            ready = None
            while self._queue and self._queue[0][0] <= t - s.delay + 1e-12:
                ready = self._queue.popleft()
            return ready
        return None if drop else (t, out)
