"""The ``vllm`` collector: polls each vLLM server's ``/metrics`` and exports derived signals.

One poller thread per target, so a slow or dead server never delays the others.
Each poll is parsed once and appended to the target's rate window; the derived
values are computed there, so ``collect()`` only renders the latest snapshot.
A failed poll sets ``up`` to 0, counts its reason and logs (at most once a minute
per target and reason); the sidecar keeps serving.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import requests
import urllib3
from prometheus_client.core import Metric as Family

from exporters.collector import BoundedCounts, Collector, Poller, counter, gauge
from exporters.vllm_scrape import Derived, ParseError, Poll, Series, SeriesKey, Window, parse
from infersight.catalog import exporter as cat
from infersight.config import VLLM, Config, Target

log = logging.getLogger(__name__)

SCRAPE_ERROR_REASONS = ("timeout", "connection", "http_status", "too_large", "parse")
LOG_REPEAT_SECONDS = 60.0  # a target failing the same way is logged again after this long
_CHUNK_BYTES = 64 * 1024

# Exported per (target, model_name, engine): catalog entry -> Derived attribute.
_DERIVED_FAMILIES = (
    (cat.VLLM_REQUESTS_RUNNING, "running"),
    (cat.VLLM_REQUESTS_WAITING, "waiting"),
    (cat.VLLM_KV_CACHE_USAGE, "kv_usage"),
    (cat.VLLM_PREEMPTIONS_RATE, "preemptions_per_second"),
    (cat.VLLM_ENGINE_STEPS_RATE, "steps_per_second"),
    (cat.VLLM_TOKENS_PER_STEP, "tokens_per_step"),
    (cat.VLLM_BATCH_EFFICIENCY, "batch_efficiency"),
    (cat.VLLM_PREFIX_CACHE_HIT_RATIO, "prefix_cache_hit_ratio"),
    (cat.VLLM_SPEC_DECODE_ACCEPTANCE, "spec_decode_acceptance"),
)


class ScrapeError(Exception):
    """A failed poll; ``reason`` is one of SCRAPE_ERROR_REASONS, or ``other`` for the unexpected."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def fetch(session: requests.Session, url: str, timeout: float, max_bytes: int) -> str:
    """The body of ``url``, streamed so an oversized page is refused before it is all read.

    ``timeout`` bounds the connect, each read, and (checked between chunks) the whole body.
    """
    deadline = time.monotonic() + timeout
    try:
        with session.get(url, timeout=timeout, stream=True) as response:
            if response.status_code != 200:
                raise ScrapeError("http_status", f"HTTP {response.status_code}")
            declared = response.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > max_bytes:
                raise ScrapeError("too_large", f"Content-Length {declared} exceeds {max_bytes} bytes")
            chunks, size = [], 0
            for chunk in response.iter_content(_CHUNK_BYTES):
                size += len(chunk)
                if size > max_bytes:
                    raise ScrapeError("too_large", f"body exceeds {max_bytes} bytes")
                if time.monotonic() > deadline:
                    raise ScrapeError("timeout", f"body not complete within {timeout} s")
                chunks.append(chunk)
    except requests.RequestException as exc:
        cause = exc.args[0] if exc.args else exc
        # requests reports a read timeout in the middle of the body as a ConnectionError.
        if isinstance(exc, requests.Timeout) or isinstance(cause, urllib3.exceptions.ReadTimeoutError):
            raise ScrapeError("timeout", f"no answer within {timeout} s ({type(exc).__name__})") from None
        cause = getattr(cause, "reason", cause)  # urllib3 wraps the socket error
        raise ScrapeError("connection", f"{type(exc).__name__}: {cause}") from None
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScrapeError("parse", f"body is not UTF-8 text: {exc}") from None


def _as_scrape_error(exc: Exception) -> ScrapeError:
    if isinstance(exc, ScrapeError):
        return exc
    if isinstance(exc, ParseError):
        return ScrapeError("parse", str(exc))
    return ScrapeError("other", f"unexpected {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class Snapshot:
    """The latest state of one target, replaced whole after each poll so readers need no lock."""

    up: bool = False
    duration: float = 0.0
    restarts: float = 0.0
    series_dropped: float = 0.0
    series: dict[SeriesKey, Derived] = field(default_factory=dict)


class TargetPoller:
    """Polls one vLLM target and keeps its rate window and latest snapshot."""

    def __init__(self, target: Target, settings: VLLM, clock: Callable[[], float]) -> None:
        self.target = target
        self.settings = settings
        self.clock = clock
        self.session = requests.Session()
        self.window = Window(settings.rate_window_seconds, settings.max_num_batched_tokens)
        self.errors = BoundedCounts(SCRAPE_ERROR_REASONS)
        self.snapshot = Snapshot()
        self._kept: set[SeriesKey] = set()
        self._logged: tuple[str, float] | None = None  # (reason, when) of the last failure logged
        self._suppressed = 0

    def poll(self) -> None:
        started = time.perf_counter()
        try:
            series = parse(
                fetch(self.session, self.target.url, self.settings.timeout_seconds, self.settings.max_response_bytes)
            )
        except Exception as exc:  # every failure is reported, none stops the poller
            self._failed(_as_scrape_error(exc), time.perf_counter() - started)
            return
        kept, dropped = self._bound(series)
        reset = self.window.add(Poll(self.clock(), {k: series[k] for k in kept}))
        previous = self.snapshot
        self.snapshot = Snapshot(
            up=True,
            duration=time.perf_counter() - started,
            restarts=previous.restarts + int(reset),
            series_dropped=previous.series_dropped + dropped,
            series=self.window.derive(kept),
        )
        if self._logged is not None:
            log.info("vLLM target %s (%s) answers again", self.target.name, self.target.url)
            self._logged, self._suppressed = None, 0

    def _bound(self, series: dict[SeriesKey, Series]) -> tuple[list[SeriesKey], int]:
        """At most max_series_per_target pairs; pairs already exported keep their place."""
        ordered = sorted(series, key=lambda k: (k not in self._kept, k))
        kept = ordered[: self.settings.max_series_per_target]
        self._kept = set(kept)
        return kept, len(ordered) - len(kept)

    def _failed(self, error: ScrapeError, duration: float) -> None:
        self.errors.inc(error.reason)
        previous = self.snapshot
        self.snapshot = Snapshot(duration=duration, restarts=previous.restarts, series_dropped=previous.series_dropped)
        now = time.monotonic()
        if self._logged and self._logged[0] == error.reason and now - self._logged[1] < LOG_REPEAT_SECONDS:
            self._suppressed += 1
            return
        repeats = f" ({self._suppressed} more failures since the last report)" if self._suppressed else ""
        log.warning(
            "vLLM target %s (%s) poll failed: %s: %s%s", self.target.name, self.target.url, error.reason, error, repeats
        )
        self._logged, self._suppressed = (error.reason, now), 0


class VllmCollector(Collector):
    """Derived vLLM signals per target and per (model_name, engine), plus per-target poll health."""

    name = "vllm"

    def __init__(self, config: Config, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(config)
        self.targets = [TargetPoller(t, config.vllm, clock) for t in config.vllm.targets]
        self._pollers = [
            Poller(f"vllm-{t.target.name}", config.vllm.poll_interval_seconds, t.poll) for t in self.targets
        ]

    def start(self) -> None:
        for poller in self._pollers:
            poller.start()

    def stop(self) -> None:
        for poller in self._pollers:
            poller.stop()
        for target in self.targets:
            target.session.close()

    def poll_all(self) -> None:
        """Poll every target once, in this thread (the pollers do this on their own)."""
        for target in self.targets:
            target.poll()

    def healthy(self) -> bool:
        return any(t.snapshot.up for t in self.targets) if self.targets else True

    def collect(self) -> Iterator[Family]:
        up, duration = gauge(cat.VLLM_UP), gauge(cat.VLLM_SCRAPE_DURATION)
        errors, restarts = counter(cat.VLLM_SCRAPE_ERRORS), counter(cat.VLLM_RESTARTS)
        dropped = counter(cat.VLLM_SERIES_DROPPED)
        derived = [(attr, gauge(metric)) for metric, attr in _DERIVED_FAMILIES]
        for target in self.targets:
            name, snap = target.target.name, target.snapshot
            up.add_metric([name], 1.0 if snap.up else 0.0)
            duration.add_metric([name], snap.duration)
            restarts.add_metric([name], snap.restarts)
            dropped.add_metric([name], snap.series_dropped)
            for reason, value in target.errors.items():
                errors.add_metric([name, reason], value)
            for (model_name, engine), values in snap.series.items():
                for attr, family in derived:
                    value = getattr(values, attr)
                    if value is not None:
                        family.add_metric([name, model_name, engine], value)
        yield from (up, duration, errors, restarts, dropped)
        yield from (family for _, family in derived)
