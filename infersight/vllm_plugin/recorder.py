"""What one engine's steps and finished requests add to the plugin's metrics.

vLLM calls ``record()`` once per engine step on its event loop, so this does
only arithmetic on preallocated lists: no lock, no I/O, no allocation per
observation. It reads vLLM's stats objects by duck typing (``SchedulerStats``,
``IterationStats``, ``FinishedRequestStats``), which are not a stable upstream
interface: fields that vary between releases are read with a default, and any
other failure is caught and counted so the engine never sees it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from infersight.catalog import Metric
from infersight.catalog import plugin as catalog
from infersight.config import Config
from infersight.vllm_plugin import buckets
from infersight.vllm_plugin.histogram import Histogram
from infersight.vllm_plugin.tiers import TierTable

log = logging.getLogger(__name__)

Families = dict[str, Any]  # metric name -> prometheus_client metric family


@dataclass(frozen=True)
class Settings:
    """The parts of the configuration the recorder needs, resolved once at startup."""

    tiers: TierTable
    latency: tuple[float, ...]
    efficiency: tuple[float, ...]
    warmup_requests: int

    @classmethod
    def from_config(cls, config: Config) -> Settings:
        return cls(
            tiers=TierTable(config),
            latency=buckets.latency_buckets(config),
            efficiency=buckets.efficiency_buckets(config),
            warmup_requests=config.slo.warmup_requests,
        )


class TierSeries:
    """One tier's request histograms and counters."""

    __slots__ = ("decode", "e2e", "failed", "prefill", "queue", "tpot", "ttft", "warmup")

    def __init__(self, latency: tuple[float, ...]) -> None:
        self.e2e = Histogram(latency)
        self.ttft = Histogram(latency)
        self.queue = Histogram(latency)
        self.prefill = Histogram(latency)
        self.decode = Histogram(latency)
        self.tpot = Histogram(buckets.TPOT_BUCKETS)
        self.failed = 0
        self.warmup = 0


# Request histogram metric -> TierSeries attribute.
TIER_HISTOGRAMS = (
    (catalog.REQUEST_E2E, "e2e"),
    (catalog.REQUEST_TTFT, "ttft"),
    (catalog.REQUEST_QUEUE, "queue"),
    (catalog.REQUEST_PREFILL, "prefill"),
    (catalog.REQUEST_DECODE, "decode"),
    (catalog.REQUEST_TPOT, "tpot"),
)


def new_families() -> Families:
    """Empty families for every metric the recorders fill, keyed by metric name."""
    out: Families = {}
    for metric in vars(catalog).values():
        if not isinstance(metric, Metric):
            continue
        kind = {"histogram": HistogramMetricFamily, "counter": CounterMetricFamily}.get(metric.type, GaugeMetricFamily)
        out[metric.name] = kind(metric.family, metric.help, labels=list(metric.labels))
    return out


class EngineRecorder:
    """The plugin's state for one engine (one data-parallel rank)."""

    def __init__(self, settings: Settings, model_name: str, engine: str, token_budget: int) -> None:
        self.settings = settings
        self.labels = (model_name, engine)
        self.token_budget = max(int(token_budget), 1)
        self.tiers = [TierSeries(settings.latency) for _ in settings.tiers.names]
        self.warmup_left = settings.warmup_requests
        # Index 1: steps that ended with requests waiting; 0: none waiting.
        self.efficiency = (Histogram(settings.efficiency), Histogram(settings.efficiency))
        self.step_interval = Histogram(buckets.STEP_BUCKETS)
        self.model_execute = Histogram(buckets.STEP_BUCKETS)
        self.running = 0
        self.waiting = 0
        self.errors = 0
        self._last_step = 0.0
        self._busy = False

    def record(self, scheduler_stats: Any, iteration_stats: Any) -> None:
        """One call of vLLM's ``StatLoggerBase.record``; never raises."""
        try:
            if scheduler_stats is not None:
                self._step(scheduler_stats, iteration_stats)
            if iteration_stats is not None:
                finished = iteration_stats.finished_requests
                if finished:
                    self._finished(finished)
        except Exception:
            if not self.errors:
                log.exception("infersight plugin: recording a vLLM step failed; counting further failures silently")
            self.errors += 1

    def _step(self, stats: Any, iteration_stats: Any) -> None:
        now = time.perf_counter()
        running = stats.num_running_reqs
        waiting = stats.num_waiting_reqs + getattr(stats, "num_skipped_waiting_reqs", 0)
        details = getattr(stats, "iteration_details", None)
        if details is not None and not details.is_dummy:
            tokens = details.num_ctx_tokens + details.num_generation_tokens
            self.model_execute.observe(details.elapsed_ms / 1000.0)
        elif iteration_stats is not None:
            # Without iteration details a chunked prompt counts at the step that finishes it.
            tokens = iteration_stats.prompt_token_stats.computed + iteration_stats.num_generation_tokens
        else:
            tokens = 0
        if tokens:
            self.efficiency[waiting > 0].observe(tokens / self.token_budget)
        if self._busy:  # an interval that spans idle time says nothing about the engine
            self.step_interval.observe(now - self._last_step)
        self._last_step = now
        self._busy = running > 0
        self.running = running
        self.waiting = waiting

    def _finished(self, finished: Iterable[Any]) -> None:
        tier_of = self.settings.tiers.index
        for request in finished:
            series = self.tiers[tier_of(request.num_prompt_tokens)]
            if self.warmup_left > 0:
                self.warmup_left -= 1
                series.warmup += 1
                continue
            reason = getattr(request.finish_reason, "name", "")
            if reason == "ABORT":  # the client went away; its latency says nothing about the service
                continue
            if reason == "ERROR":
                series.failed += 1
                continue
            e2e = request.e2e_latency
            decode = request.decode_time
            series.e2e.observe(e2e)
            series.ttft.observe(e2e - decode)
            series.queue.observe(request.queued_time)
            series.prefill.observe(request.prefill_time)
            series.decode.observe(decode)
            if request.num_generation_tokens > 1:
                series.tpot.observe(request.mean_time_per_output_token)

    def add_samples(self, families: Families) -> None:
        """This engine's current values into ``families`` (from ``new_families``), at scrape time."""
        model, engine = self.labels
        for name, series in zip(self.settings.tiers.names, self.tiers, strict=True):
            labels = (model, engine, name)
            for metric, attr in TIER_HISTOGRAMS:
                getattr(series, attr).add_to(families[metric.name], labels)
            families[catalog.REQUESTS_FAILED.name].add_metric(labels, series.failed)
            families[catalog.WARMUP_REQUESTS.name].add_metric(labels, series.warmup)
        families[catalog.WARMUP_REMAINING.name].add_metric(self.labels, self.warmup_left)
        for waiting, histogram in zip(("false", "true"), self.efficiency, strict=True):
            histogram.add_to(families[catalog.BATCH_EFFICIENCY.name], (model, engine, waiting))
        self.step_interval.add_to(families[catalog.STEP_INTERVAL.name], self.labels)
        self.model_execute.add_to(families[catalog.MODEL_EXECUTE.name], self.labels)
        families[catalog.STEP_REQUESTS_RUNNING.name].add_metric(self.labels, self.running)
        families[catalog.STEP_REQUESTS_WAITING.name].add_metric(self.labels, self.waiting)
        families[catalog.TOKEN_BUDGET.name].add_metric(self.labels, self.token_budget)
