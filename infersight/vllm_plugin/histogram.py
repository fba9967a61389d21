"""A lock-free histogram for one writer, exposed at scrape time.

``record()`` runs once per engine step on vLLM's event loop, where
prometheus_client's ``Histogram.observe`` would take a lock per call. This
keeps plain per-bucket counts and a sum; the scrape (same event loop) turns them
into cumulative buckets. ``_count`` is derived from the buckets, so a scrape never
shows a count that disagrees with the ``+Inf`` bucket.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

from prometheus_client.core import HistogramMetricFamily

from infersight.vllm_plugin.buckets import le

_INF = math.inf


class Histogram:
    __slots__ = ("_les", "bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = list(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0
        self._les = [le(b) for b in (*self.bounds, _INF)]

    def observe(self, value: float) -> None:
        """Count ``value``; negatives (clock skew) count as 0, NaN and infinity are dropped."""
        if value < 0.0:
            value = 0.0
        elif not value < _INF:
            return
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, int]]:
        return cumulative(self._les, self.counts)

    def add_to(self, family: HistogramMetricFamily, labels: Sequence[str]) -> None:
        family.add_metric(list(labels), self.cumulative(), self.total)


def cumulative(les: Sequence[str], counts: Sequence[int]) -> list[tuple[str, int]]:
    """Per-bucket counts as Prometheus's cumulative ``(le, count)`` pairs."""
    out, running = [], 0
    for label, count in zip(les, counts, strict=True):
        running += count
        out.append((label, running))
    return out

