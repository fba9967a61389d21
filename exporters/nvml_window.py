"""A time window over driver samples: count, mean and standard deviation in O(1) per sample.

The driver's utilization samples are integer percents, so the running sums are
exact integers and the variance has no cancellation error however long the
sidecar runs; float inputs (GPM bandwidth) get ordinary float sums, clamped at 0.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class WindowStats:
    count: int
    mean: float | None  # None when the window is empty
    stddev: float | None  # population standard deviation (numpy.std, ddof=0)


class SampleWindow:
    """Samples ``(timestamp_us, value)`` newer than ``seconds`` before the newest time seen."""

    def __init__(self, seconds: float) -> None:
        self.span_us = int(seconds * 1_000_000)
        self._samples: deque[tuple[int, float]] = deque()
        self._sum: float = 0
        self._sum_sq: float = 0

    def __len__(self) -> int:
        return len(self._samples)

    def add(self, timestamp_us: int, value: float) -> None:
        self._samples.append((timestamp_us, value))
        self._sum += value
        self._sum_sq += value * value

    def expire(self, now_us: int) -> None:
        """Drop samples at or before ``now_us - span``: the window is ``(now - span, now]``."""
        cutoff = now_us - self.span_us
        samples = self._samples
        while samples and samples[0][0] <= cutoff:
            _, value = samples.popleft()
            self._sum -= value
            self._sum_sq -= value * value
        if not samples:  # reset so float residue never outlives the samples it came from
            self._sum = self._sum_sq = 0

    def stats(self) -> WindowStats:
        n = len(self._samples)
        if n == 0:
            return WindowStats(0, None, None)
        variance = (n * self._sum_sq - self._sum * self._sum) / (n * n)
        return WindowStats(n, self._sum / n, math.sqrt(max(variance, 0.0)))
