"""The ``business`` collector: what the application reports through ``POST /v1/events``.

Domain token accuracy, compliance checks, gateway phase timings and cost
attribution happen in the application, where vLLM cannot see them. Events are
validated by ``exporters.events`` outside the lock, then folded into plain
dicts under one lock per batch: no metric object per event, so one core
ingests tens of thousands of events a second. Every label value comes from
an allow-list in the config, anything else counts as ``other``, and every
series exists from start-up, so the first failure shows in ``increase()``.
"""

from __future__ import annotations

import json
import threading
from bisect import bisect_left
from collections.abc import Iterable
from itertools import accumulate

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric as PromMetric
from prometheus_client.utils import floatToGoString

from exporters.collector import BoundedCounts, Collector, Response, Route, counter
from exporters.events import INGEST_PATH, KINDS, REJECT_REASONS, Event, EventError, parse_body
from infersight.catalog import Metric
from infersight.catalog import business as cat
from infersight.catalog.business import COMPLIANCE_RESULTS, GATEWAY_PHASES, OTHER, TOKEN_TYPES
from infersight.config import Config

# Around the article's gateway phases: preprocessing 5-15 ms, allocation 10-30 ms, postprocessing 5-20 ms.
PHASE_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
FOLDED_LABELS = ("tier", "domain", "rule", "tenant", "product")


def _allowed(values: Iterable[str]) -> tuple[str, ...]:
    """An allow-list plus ``other``, in config order, without duplicates."""
    return tuple(dict.fromkeys([*values, OTHER]))


def _zeros(keys: Iterable[object]) -> dict:
    return dict.fromkeys(keys, 0.0)


def _json(status: int, payload: object) -> Response:
    return Response(status, json.dumps(payload).encode() + b"\n")


class BusinessCollector(Collector):
    """Serves the ingest route and renders the running totals at each scrape."""

    name = "business"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        business = config.business
        self.max_events = business.max_events_per_batch
        tiers = _allowed(t.name for t in config.slo.tiers)
        domains = _allowed(business.domains)
        rules = _allowed(business.compliance_rules)
        self.tiers, self.domains, self.rules = frozenset(tiers), frozenset(domains), frozenset(rules)
        self.tenants, self.products = frozenset(_allowed(business.tenants)), frozenset(_allowed(business.products))
        self._lock = threading.Lock()
        self.rejected = BoundedCounts(REJECT_REASONS)
        self.folded = _zeros(FOLDED_LABELS)
        self.events = _zeros(KINDS)
        self.requests = _zeros(tiers)
        self.tokens = _zeros((t, k) for t in tiers for k in TOKEN_TYPES)
        self.phase_counts = {(p, t): [0] * (len(PHASE_BUCKETS) + 1) for p in GATEWAY_PHASES for t in tiers}
        self.phase_sums = _zeros(self.phase_counts)
        self.domain_total = _zeros(domains)
        self.domain_correct = _zeros(domains)
        self.compliance = _zeros((r, res) for r in rules for res in COMPLIANCE_RESULTS)
        self.tenant_tokens = _zeros(_allowed(business.tenants))
        self.product_tokens = _zeros(_allowed(business.products))

    def routes(self) -> list[Route]:
        return [Route("POST", INGEST_PATH, self.ingest)]

    def ingest(self, body: bytes) -> Response:
        """Validate a whole body, then apply it; a rejected body changes nothing but the reject count."""
        try:
            events = parse_body(body, self.max_events)
        except EventError as exc:
            self.rejected.inc(exc.reason, exc.events)
            return _json(413 if exc.reason == "too_many_events" else 400, {"error": str(exc)})
        self.apply(events)
        return _json(200, {"accepted": len(events)})

    def _fold(self, value: str | None, allowed: frozenset[str], label: str) -> str | None:
        if value is None or value in allowed:
            return value
        self.folded[label] += 1
        return OTHER

    def apply(self, events: list[Event]) -> None:
        """Add validated events to the totals (one lock per batch)."""
        fold = self._fold
        with self._lock:
            for event in events:
                kind = event[0]
                self.events[kind] += 1
                if kind == "request":
                    _, tier, phases, prompt, completion = event
                    tier = fold(tier, self.tiers, "tier")
                    self.requests[tier] += 1
                    self.tokens[(tier, "prompt")] += prompt
                    self.tokens[(tier, "completion")] += completion
                    for phase, seconds in phases:
                        key = (phase, tier)
                        self.phase_counts[key][bisect_left(PHASE_BUCKETS, seconds)] += 1
                        self.phase_sums[key] += seconds
                elif kind == "domain_tokens":
                    _, domain, correct, total = event
                    domain = fold(domain, self.domains, "domain")
                    self.domain_correct[domain] += correct
                    self.domain_total[domain] += total
                elif kind == "compliance":
                    _, rule, passed = event
                    self.compliance[(fold(rule, self.rules, "rule"), "pass" if passed else "fail")] += 1
                else:
                    _, tenant, product, tokens = event
                    if tenant is not None:
                        self.tenant_tokens[fold(tenant, self.tenants, "tenant")] += tokens
                    if product is not None:
                        self.product_tokens[fold(product, self.products, "product")] += tokens

    def collect(self) -> list[PromMetric]:
        with self._lock:  # a consistent snapshot: the families are built before the lock is released
            return [
                self._phase_histogram(),
                _counter(cat.GATEWAY_REQUESTS, self.requests),
                _counter(cat.GATEWAY_TOKENS, self.tokens),
                _counter(cat.DOMAIN_TOKENS, self.domain_total),
                _counter(cat.DOMAIN_TOKENS_CORRECT, self.domain_correct),
                _counter(cat.COMPLIANCE_CHECKS, self.compliance),
                _counter(cat.COST_TENANT_TOKENS, self.tenant_tokens),
                _counter(cat.COST_PRODUCT_TOKENS, self.product_tokens),
                _counter(cat.EVENTS, self.events),
                _counter(cat.LABELS_FOLDED, self.folded),
                _counter(cat.EVENTS_REJECTED, dict(self.rejected.items())),
            ]

    def _phase_histogram(self) -> HistogramMetricFamily:
        metric = cat.GATEWAY_PHASE_DURATION
        family = HistogramMetricFamily(metric.name, metric.help, labels=list(metric.labels))
        bounds = [*(floatToGoString(b) for b in PHASE_BUCKETS), "+Inf"]
        for key, counts in self.phase_counts.items():
            buckets = list(zip(bounds, accumulate(counts), strict=True))
            family.add_metric(list(key), buckets, self.phase_sums[key])
        return family


def _counter(metric: Metric, values: dict) -> CounterMetricFamily:
    family = counter(metric)
    for key, value in values.items():
        family.add_metric(list(key) if isinstance(key, tuple) else [key], value)
    return family
