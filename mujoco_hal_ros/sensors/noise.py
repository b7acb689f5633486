"""Noise and delay models for simulated sensors: bias, Gaussian noise, delay, dropout.

A stack that only ever sees perfect data is not tested; one that sees a different random
stream every run cannot be debugged. So every model draws from its own ``numpy`` Generator
seeded from one seed and the sensor's name: the same seed gives the same readings.
Everything is off by default (a zero model returns its input unchanged).
"""

from collections import deque
from typing import Any
import zlib

import numpy as np

from ..config.sensor_settings import NoiseSpec

# A sensor's noise entry (``NoiseSpec``) is part of the device file's schema, so it lives in
# ``config.sensor_settings``; the models that apply it are here.


def generator(seed: int, name: str) -> np.random.Generator:
    """The Generator of one sensor: from the global seed and the sensor's name."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode())])


class Noise:
    """One sensor's corruption: ``apply(t, values)`` -> ``(t_measured, values)`` or None.

    With a delay, the reading returned is the newest one taken at least ``delay`` simulated
    seconds ago (stamped with the time it was taken, as a real sensor's late message is),
    None while there is none yet; a dropped reading is None.
    """

    def __init__(self, spec: NoiseSpec, seed: int = 0, name: str = '') -> None:
        self.spec = spec
        self._rng = generator(seed, name)
        self._queue: deque[Any] = deque()

    def apply(self, t: float, values: np.ndarray) -> tuple[float, np.ndarray] | None:
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
