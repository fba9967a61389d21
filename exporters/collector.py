"""The collector interface and the health bookkeeping shared by every collector.

As in node_exporter, a collector's failure is its own: it is logged and reported
as ``infersight_collector_up == 0`` plus an error count by reason, and the other
collectors go on.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector as PromCollector

from infersight.catalog import Metric
from infersight.catalog import exporter as cat
from infersight.config import Config

log = logging.getLogger(__name__)


def gauge(metric: Metric, labels: Iterable[str] | None = None) -> GaugeMetricFamily:
    """An empty gauge family for a catalog entry (labels default to the catalog's)."""
    return GaugeMetricFamily(metric.name, metric.help, labels=list(labels or metric.labels))


def counter(metric: Metric, labels: Iterable[str] | None = None) -> CounterMetricFamily:
    """An empty counter family for a catalog entry; the ``_total`` suffix is added on exposition."""
    return CounterMetricFamily(metric.family, metric.help, labels=list(labels or metric.labels))


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"


@dataclass(frozen=True)
class Route:
    """An extra HTTP endpoint a collector serves (e.g. event ingest). Write routes need auth."""

    method: str
    path: str
    handler: Callable[[bytes], Response]
    write: bool = True


class BoundedCounts:
    """Counts by a reason drawn from a fixed set; anything else folds into ``other``."""

    def __init__(self, reasons: Iterable[str]) -> None:
        self._counts: dict[str, float] = {r: 0.0 for r in reasons}
        self._counts.setdefault("other", 0.0)
        self._lock = threading.Lock()

    def inc(self, reason: str, amount: float = 1.0) -> None:
        key = reason if reason in self._counts else "other"
        with self._lock:
            self._counts[key] += amount

    def items(self) -> list[tuple[str, float]]:
        with self._lock:
            return sorted(self._counts.items())


class Collector(ABC):
    """One source of metrics. ``collect()`` must be cheap: slow reads belong in
    ``start()``'s background thread, whose latest results ``collect()`` renders."""

    name: str = ""
    error_reasons: tuple[str, ...] = ()

    def __init__(self, config: Config) -> None:
        self.config = config
        self.errors = BoundedCounts(("collect", *self.error_reasons))

    def start(self) -> None:  # noqa: B027 - optional hook
        """Start background work, if any."""

    def stop(self) -> None:  # noqa: B027 - optional hook
        """Stop background work and release resources."""

    def routes(self) -> list[Route]:
        return []

    def healthy(self) -> bool:
        """False when the collector cannot do its job (no driver, no target reachable...)."""
        return True

    @abstractmethod
    def collect(self) -> Iterable[Metric]:
        """Yield prometheus_client metric families."""


@dataclass
class _RunStats:
    up: bool = True
    duration: float = 0.0


class CollectorSet(PromCollector):
    """Runs every enabled collector for each scrape and adds the per-collector health families."""

    def __init__(self, collectors: list[Collector], version: str) -> None:
        self.collectors = collectors
        self.version = version
        self._stats: dict[str, _RunStats] = {c.name: _RunStats() for c in collectors}
        self._lock = threading.Lock()

    def collect(self) -> Iterator:
        with self._lock:  # one scrape at a time: collectors are not required to be re-entrant
            yield from self._collect_locked()

    def _collect_locked(self) -> Iterator:
        for collector in self.collectors:
            started = time.perf_counter()
            try:
                families = list(collector.collect())
                ok = collector.healthy()
            except Exception:
                log.exception("collector %s failed", collector.name)
                collector.errors.inc("collect")
                families, ok = [], False
            self._stats[collector.name] = _RunStats(ok, time.perf_counter() - started)
            yield from families
        yield from self._health_families()

    def _health_families(self) -> Iterator:
        up, duration = gauge(cat.COLLECTOR_UP), gauge(cat.COLLECTOR_DURATION)
        errors = counter(cat.COLLECTOR_ERRORS)
        for collector in self.collectors:
            stats = self._stats[collector.name]
            up.add_metric([collector.name], 1.0 if stats.up else 0.0)
            duration.add_metric([collector.name], stats.duration)
            for reason, value in collector.errors.items():
                errors.add_metric([collector.name, reason], value)
        build = gauge(cat.BUILD_INFO)
        build.add_metric([self.version], 1.0)
        yield from (up, duration, errors, build)

    def health(self) -> dict[str, bool]:
        return {c.name: self._stats[c.name].up for c in self.collectors}


@dataclass
class Poller:
    """Calls ``fn`` every ``interval`` seconds on a daemon thread until stopped."""

    name: str
    interval: float
    fn: Callable[[], None]
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        next_run = time.monotonic()
        while not self._stop.is_set():
            try:
                self.fn()
            except Exception:
                log.exception("poller %s: unexpected error", self.name)
            next_run += self.interval
            delay = next_run - time.monotonic()
            if delay < 0:  # fell behind: skip missed ticks rather than bursting
                next_run, delay = time.monotonic(), 0.0
            self._stop.wait(delay)
