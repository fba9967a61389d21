"""Histogram bucket boundaries that put every alert threshold on a boundary.

A histogram answers "what share of requests took at most X" exactly only where X
is a bucket boundary; anywhere else ``histogram_quantile`` interpolates. So the
request buckets include each tier's target and its warning and critical
multiples, the batch-efficiency buckets include the efficiency threshold and the
scheduler buckets the scheduling-cycle threshold. Rules select those buckets by
the ``le`` string this module prints, the same one the plugin exposes.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.utils import floatToGoString

from infersight.config import Config

TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5)
EFFICIENCY_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
SCHEDULER_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)


def boundaries(values: Iterable[float]) -> tuple[float, ...]:
    """Sorted, de-duplicated boundaries; rounding keeps 1.5 x 0.2 from printing as 0.30000000000000004."""
    return tuple(sorted({round(v, 9) for v in values}))


def le(value: float) -> str:
    """The ``le`` label value of a boundary, printed as the plugin and vLLM print it (``2.0``, ``0.005``)."""
    return floatToGoString(round(value, 9))


def slo_points(config: Config) -> dict[str, tuple[float, float, float]]:
    """Tier name -> (target, warning, critical) seconds, for every tier with a latency target."""
    slo = config.slo
    return {
        t.name: (t.latency_seconds, t.latency_seconds * slo.warning_factor, t.latency_seconds * slo.critical_factor)
        for t in slo.tiers
        if t.latency_seconds is not None
    }


def latency_buckets(config: Config) -> tuple[float, ...]:
    """The configured buckets plus every tier's SLO points and the asynchronous tiers' queue bound."""
    points = [p for triple in slo_points(config).values() for p in triple]
    return boundaries([*config.plugin.latency_buckets_seconds, *points, config.slo.batch.max_queue_seconds])


def efficiency_buckets(config: Config) -> tuple[float, ...]:
    return boundaries([*EFFICIENCY_BUCKETS, config.thresholds.batch_efficiency])


def scheduler_buckets(config: Config) -> tuple[float, ...]:
    return boundaries([*SCHEDULER_BUCKETS, config.thresholds.scheduling_cycle_seconds])
