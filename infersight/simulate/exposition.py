"""The Prometheus text format (0.0.4), written by hand for the synthetic vLLM page.

Real vLLM 0.32 answers in this format whatever the Accept header, so Prometheus
keeps its ``vllm:`` names. prometheus_client's HTTP handlers would offer
OpenMetrics and rename them (the colon trap), so the page is rendered here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client.utils import floatToGoString

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = dict[str, str]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def sample_line(name: str, labels: Labels, value: float) -> str:
    """One sample, labels in name order as prometheus_client prints them."""
    if not labels:
        return f"{name} {floatToGoString(value)}"
    pairs = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{pairs}}} {floatToGoString(value)}"


@dataclass
class Family:
    """One ``# HELP`` / ``# TYPE`` block. ``name`` as the TYPE line prints it (counters with ``_total``)."""

    name: str
    type: str
    help: str
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)

    def add(self, labels: Labels, value: float, suffix: str = "") -> None:
        self.samples.append((self.name + suffix, labels, value))

    def add_histogram(self, labels: Labels, bounds: Sequence[float], counts: Sequence[float], total: float) -> None:
        """Cumulative ``_bucket`` samples (``counts`` per bucket, +Inf last), then ``_count`` and ``_sum``."""
        running = 0.0
        for bound, count in zip((*bounds, float("inf")), counts, strict=True):
            running += count
            self.add({**labels, "le": floatToGoString(bound)}, running, "_bucket")
        self.add(labels, running, "_count")
        self.add(labels, total, "_sum")

    def lines(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} {self.type}"
        for name, labels, value in self.samples:
            yield sample_line(name, labels, value)


def render(families: Iterable[Family]) -> str:
    return "".join(line + "\n" for family in families for line in family.lines())
