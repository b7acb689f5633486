"""Feature statistics as LeRobot computes them (min, max, mean, std, count, quantiles).

Policies normalise their inputs with ``meta/stats.json``, so the numbers must mean what
LeRobot's mean: per vector entry for numeric features over an episode's frames; per colour
channel, scaled to [0, 1] and shaped (3, 1, 1), for camera frames (images wider or taller
than 300 pixels strided down to about 150 first, as LeRobot does). Numeric quantiles use
LeRobot's histogram estimate (5000 bins between min and max); camera quantiles are exact
(a 256-bin histogram of the uint8 values), and camera statistics cover every frame
rather than a sample.
"""

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS = tuple(f'q{int(q * 100):02d}' for q in QUANTILES)
HISTOGRAM_BINS = 5000


def _histogram_quantile(hist: np.ndarray, edges: np.ndarray, target: float) -> float:
    """The value below which ``target`` counts lie, linear within its bin."""
    cumulative = np.cumsum(hist)
    i = int(np.searchsorted(cumulative, target))
    if i == 0:
        return float(edges[0])
    if i >= len(cumulative):
        return float(edges[-1])
    before = cumulative[i - 1]
    inside = cumulative[i] - before
    if inside == 0:
        return float(edges[i])
    return float(edges[i] + (target - before) / inside * (edges[i + 1] - edges[i]))


def vector_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """Statistics of ``values`` (frames x entries, or frames for a scalar column)."""
    raw = np.asarray(values)
    raw = raw.reshape(len(raw), -1)
    flat = raw.astype(np.float64)
    count = len(flat)
    # min and max keep the column's type (integers stay integers in meta/episodes, as
    # LeRobot's are); the moments and quantiles are real numbers
    stats: dict[str, np.ndarray] = {
        'min': raw.min(axis=0), 'max': raw.max(axis=0), 'mean': flat.mean(axis=0),
        'std': flat.std(axis=0), 'count': np.array([count], dtype=np.int64)}
    if count < 2:
        for key in QUANTILE_KEYS:
            stats[key] = stats['mean'].copy()
    else:
        columns = []
        for i in range(flat.shape[1]):
            edges = np.linspace(float(stats['min'][i]) - 1e-10, float(stats['max'][i]) + 1e-10,
                                HISTOGRAM_BINS + 1)
            hist, _ = np.histogram(flat[:, i], bins=edges)
            columns.append([_histogram_quantile(hist, edges, q * count) for q in QUANTILES])
        table = np.array(columns)           # entries x quantiles
        for j, key in enumerate(QUANTILE_KEYS):
            stats[key] = table[:, j]
    return stats


def downsample(image: np.ndarray) -> np.ndarray:
    """HxWxC strided as LeRobot strides images for statistics (none below 300 pixels)."""
    height, width = image.shape[:2]
    if max(height, width) < 300:
        return image
    step = int(width / 150) if width > height else int(height / 150)
    return image[::step, ::step]


class ImageStats:
    """Running per-channel statistics of uint8 HxWx3 frames, one frame at a time."""

    def __init__(self) -> None:
        self.frames = 0
        self.pixels = 0
        self._sum = np.zeros(3)
        self._squares = np.zeros(3)
        self._hist = np.zeros((3, 256), dtype=np.int64)

    def add(self, image: np.ndarray) -> None:
        pixels = downsample(image).reshape(-1, 3)
        self.frames += 1
        self.pixels += len(pixels)
        as_float = pixels.astype(np.float64)
        self._sum += as_float.sum(axis=0)
        self._squares += (as_float ** 2).sum(axis=0)
        for c in range(3):
            self._hist[c] += np.bincount(pixels[:, c], minlength=256)

    def result(self) -> dict[str, np.ndarray]:
        mean = self._sum / self.pixels
        std = np.sqrt(np.maximum(0.0, self._squares / self.pixels - mean ** 2))
        values = np.arange(256)
        stats = {
            'min': np.array([values[h > 0].min() for h in self._hist], dtype=np.float64),
            'max': np.array([values[h > 0].max() for h in self._hist], dtype=np.float64),
            'mean': mean, 'std': std}
        cumulative = np.cumsum(self._hist, axis=1)
        for q, key in zip(QUANTILES, QUANTILE_KEYS, strict=True):
            # the inverted CDF: the smallest value with at least q of the pixels at or below
            stats[key] = np.array([np.searchsorted(c, q * self.pixels) for c in cumulative],
                                  dtype=np.float64)
        scaled = {key: (value / 255.0).reshape(3, 1, 1) for key, value in stats.items()}
        out = {key: scaled[key] for key in ('min', 'max', 'mean', 'std')}
        out['count'] = np.array([self.frames], dtype=np.int64)     # LeRobot's column order
        out.update((key, scaled[key]) for key in QUANTILE_KEYS)
        return out


def aggregate(episodes: Iterable[Mapping[str, Mapping[str, np.ndarray]]]
              ) -> dict[str, dict[str, np.ndarray]]:
    """Whole-dataset statistics from per-episode ones, weighted by count (LeRobot's rule:
    pooled mean and variance, min of mins, max of maxes, count-weighted quantiles)."""
    episodes = list(episodes)
    keys: list[str] = []
    for stats in episodes:
        keys += [key for key in stats if key not in keys]
    out: dict[str, dict[str, np.ndarray]] = {}
    for key in keys:
        parts = [stats[key] for stats in episodes if key in stats]
        means = np.stack([np.asarray(p['mean'], dtype=np.float64) for p in parts])
        variances = np.stack([np.asarray(p['std'], dtype=np.float64) ** 2 for p in parts])
        counts = np.stack([np.asarray(p['count']) for p in parts]).astype(np.float64)
        total = counts.sum(axis=0)
        weights = counts.reshape(counts.shape + (1,) * (means.ndim - counts.ndim))
        mean = (means * weights).sum(axis=0) / total
        variance = ((variances + (means - mean) ** 2) * weights).sum(axis=0) / total
        merged = {
            'min': np.min(np.stack([np.asarray(p['min']) for p in parts]), axis=0),
            'max': np.max(np.stack([np.asarray(p['max']) for p in parts]), axis=0),
            'mean': mean, 'std': np.sqrt(variance),
            'count': total.astype(np.int64)}
        for q in QUANTILE_KEYS:
            if all(q in p for p in parts):
                values = np.stack([np.asarray(p[q], dtype=np.float64) for p in parts])
                merged[q] = (values * weights).sum(axis=0) / total
        out[key] = merged
    return out


def to_json(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, Any]]:
    return {key: {name: np.asarray(value).tolist() for name, value in feature.items()}
            for key, feature in stats.items()}


def from_json(data: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, np.ndarray]]:
    return {key: {name: np.asarray(value) for name, value in feature.items()}
            for key, feature in data.items()}
