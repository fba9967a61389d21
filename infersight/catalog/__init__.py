"""Metric names, defined once.

The exporter builds its families from these specs and the rule and dashboard
generators take their selectors from them, so a renamed metric breaks at import
time instead of silently matching nothing in PromQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["gauge", "counter", "histogram", "info"]


@dataclass(frozen=True)
class Metric:
    """One metric family. ``name`` is the family name as Prometheus stores it
    (counters carry ``_total``); ``labels`` is the full, bounded label set."""

    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name

    @property
    def family(self) -> str:
        """The name client_python expects when building the family (no ``_total``)."""
        return self.name.removesuffix("_total") if self.type == "counter" else self.name

    @property
    def bucket(self) -> str:
        return f"{self.name}_bucket"

    @property
    def count(self) -> str:
        return f"{self.name}_count"

    @property
    def sum(self) -> str:
        return f"{self.name}_sum"


def all_metrics() -> list[Metric]:
    """Every metric the sidecar or the in-process plugin can expose."""
    from infersight.catalog import business, exporter, gpu, plugin

    metrics: list[Metric] = []
    for module in (exporter, business, gpu, plugin):
        metrics.extend(m for m in vars(module).values() if isinstance(m, Metric))
    return metrics
