"""A bounded load generator for the completions endpoint.

Prompts are token-id lists so their length is exact whatever the tokenizer, and
``ignore_eos`` keeps random weights from ending a request early, so every request
costs the same prefill and decode work. Each run is bounded in requests and time.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from dataclasses import dataclass, field

import requests


@dataclass(frozen=True)
class LoadShape:
    concurrency: int = 32
    prompt_tokens: int = 400
    max_tokens: int = 64
    max_requests: int = 20_000
    max_seconds: float = 120.0
    request_timeout: float = 60.0


@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    started: float = 0.0
    finished: float = 0.0

    @property
    def ok(self) -> int:
        return len(self.latencies)

    def quantile(self, q: float) -> float:
        """Empirical quantile of successful request latencies (NaN when none)."""
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def summary(self) -> str:
        median = statistics.median(self.latencies) if self.latencies else float("nan")
        return (
            f"{self.ok} ok, {len(self.errors)} errors in {self.finished - self.started:.1f} s; "
            f"latency p50 {median:.2f} s, p99 {self.quantile(0.99):.2f} s"
        )


class LoadGenerator:
    """``concurrency`` threads sending completions until stopped or a bound is reached."""

    def __init__(self, base_url: str, model: str, vocab_size: int, shape: LoadShape = LoadShape(),
                 first_token: int = 3, seed: int = 1) -> None:
        self.url = f"{base_url.rstrip('/')}/v1/completions"
        self.model = model
        self.shape = shape
        self.token_range = (first_token, vocab_size - 1)
        self.seed = seed
        self.result = LoadResult()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._issued = 0
        self._threads: list[threading.Thread] = []

    def _claim(self) -> bool:
        with self._lock:
            if self._issued >= self.shape.max_requests:
                return False
            self._issued += 1
            return True

    def _worker(self, index: int, deadline: float) -> None:
        rng = random.Random(self.seed * 1000 + index)
        session = requests.Session()
        while not self._stop.is_set() and time.monotonic() < deadline and self._claim():
            body = {
                "model": self.model,
                "prompt": [rng.randint(*self.token_range) for _ in range(self.shape.prompt_tokens)],
                "max_tokens": self.shape.max_tokens,
                "ignore_eos": True,
                "temperature": 0.0,
            }
            started = time.monotonic()
            try:
                response = session.post(self.url, json=body, timeout=self.shape.request_timeout)
                outcome = None if response.status_code == 200 else f"HTTP {response.status_code}: {response.text[:200]}"
            except requests.RequestException as exc:
                outcome = f"{type(exc).__name__}: {exc}"
            with self._lock:
                if outcome is None:
                    self.result.latencies.append(time.monotonic() - started)
                else:
                    self.result.errors.append(outcome)
        session.close()

    def start(self) -> LoadGenerator:
        self.result.started = time.monotonic()
        deadline = self.result.started + self.shape.max_seconds
        self._threads = [
            threading.Thread(target=self._worker, args=(i, deadline), name=f"load-{i}", daemon=True)
            for i in range(self.shape.concurrency)
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> LoadResult:
        """Stop issuing requests and wait for those in flight (bounded by the request timeout)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(self.shape.request_timeout + 5)
        self.result.finished = time.monotonic()
        return self.result

    def run(self) -> LoadResult:
        """Run to completion: until ``max_requests`` or ``max_seconds``."""
        self.start()
        for thread in self._threads:
            thread.join()
        return self.stop()

    def __enter__(self) -> LoadGenerator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
