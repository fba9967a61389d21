"""Report application events to the infersight sidecar without getting in the way.

The calls an application makes on its request path (``request``, ``domain_tokens``,
``compliance``, ``cost``, ``emit``) check the event, serialize it and put it on a
bounded queue: a few microseconds, no I/O, and they never raise. A background
thread sends batches by size or age. When the queue is full or the sidecar is
down, events are dropped and counted by reason (``stats()``); the application
never waits for monitoring. ``close()`` flushes what is queued, with a timeout.

    client = EventClient("http://127.0.0.1:9400")
    client.request("realtime", preprocessing=0.008, allocation=0.012, postprocessing=0.009,
                   prompt_tokens=812, completion_tokens=143)
    client.compliance("pii-redaction", passed=True)
    client.close()

Only the standard library and ``requests``.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import requests

from exporters.events import INGEST_PATH, validate_event

log = logging.getLogger(__name__)
TOKEN_ENV = "INFERSIGHT_INGEST_TOKEN"  # the sidecar reads the same variable
DROP_REASONS = ("invalid", "queue_full", "unreachable", "rejected", "closed")


class _Flush:
    """A marker in the queue: send what is batched, then set ``done``."""

    def __init__(self) -> None:
        self.done = threading.Event()


_STOP = object()


class EventClient:
    """A buffered, batching, never-raising sender of ingest events.

    ``batch_size`` and ``max_batch_bytes`` must stay within the sidecar's
    ``business.max_events_per_batch`` and ``exporter.max_body_bytes``.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        token_file: str | None = None,
        batch_size: int = 500,
        max_batch_bytes: int = 512 * 1024,
        flush_interval: float = 1.0,
        max_queue: int = 10_000,
        timeout: float = 2.0,
    ) -> None:
        if batch_size < 1 or max_queue < 1 or max_batch_bytes < 1024 or flush_interval <= 0 or timeout <= 0:
            raise ValueError(
                "batch_size, max_queue, flush_interval and timeout must be positive, max_batch_bytes >= 1024"
            )
        self.endpoint = url.rstrip("/") + INGEST_PATH
        self.batch_size = batch_size
        self.max_batch_bytes = max_batch_bytes
        self.flush_interval = flush_interval
        self.timeout = timeout
        self._session = requests.Session()
        self._session.headers["Content-Type"] = "application/json"
        token = token or (Path(token_file).read_text(encoding="utf-8").strip() if token_file else None)
        token = token or os.environ.get(TOKEN_ENV, "").strip()
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue)
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="infersight-events", daemon=True)
        self._thread.start()

    # --- the application's calls: cheap, never raise -------------------------------------------

    def request(
        self,
        tier: str,
        *,
        preprocessing: float | None = None,
        allocation: float | None = None,
        postprocessing: float | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> bool:
        """Gateway phase timings (seconds) and token counts of one request."""
        timings = {"preprocessing": preprocessing, "allocation": allocation, "postprocessing": postprocessing}
        return self.emit(
            {
                "kind": "request",
                "tier": tier,
                "phases": {k: v for k, v in timings.items() if v is not None},
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
            }
        )

    def domain_tokens(self, domain: str, correct: int, total: int) -> bool:
        """The result of one domain-token check: ``correct`` of ``total`` tokens."""
        return self.emit({"kind": "domain_tokens", "domain": domain, "correct": correct, "total": total})

    def compliance(self, rule: str, passed: bool) -> bool:
        """The result of one compliance check."""
        return self.emit({"kind": "compliance", "rule": rule, "passed": passed})

    def cost(
        self,
        *,
        tenant: str | None = None,
        product: str | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> bool:
        """Tokens to attribute to a tenant, a product or both."""
        event: dict[str, Any] = {"kind": "cost", "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        for key, value in (("tenant", tenant), ("product", product)):
            if value is not None:
                event[key] = value
        return self.emit(event)

    def emit(self, event: dict[str, Any]) -> bool:
        """Queue one event as the ingest schema spells it; False (and counted) if it was dropped."""
        if self._closed:
            return self._drop("closed")
        try:
            validate_event(event)
            data = json.dumps(event, separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:  # EventError is a ValueError
            log.debug("infersight event dropped: %s", exc)
            return self._drop("invalid")
        try:
            self._queue.put_nowait(data)
        except queue.Full:
            return self._drop("queue_full")
        return True

    # --- lifecycle ------------------------------------------------------------------------------

    def flush(self, timeout: float = 5.0) -> bool:
        """Send everything queued so far; True if done within ``timeout`` seconds."""
        if self._closed:
            return False
        marker = _Flush()
        deadline = time.monotonic() + timeout
        try:
            self._queue.put(marker, timeout=timeout)
        except queue.Full:
            return False
        return marker.done.wait(max(0.0, deadline - time.monotonic()))

    def close(self, timeout: float = 5.0) -> bool:
        """Flush and stop the sender; True if everything queued was handled within ``timeout``."""
        if self._closed:
            return not self._thread.is_alive()
        self._closed = True
        deadline = time.monotonic() + timeout
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            return False
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            return False
        self._session.close()
        while not self._queue.empty():  # events that raced with close(), behind the stop marker
            self._queue.get_nowait()
            self._drop("closed")
        return True

    def __enter__(self) -> EventClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> dict[str, int]:
        """``sent`` plus dropped events by reason (``dropped_<reason>``)."""
        with self._lock:
            counts = dict(self._counts)
        return {"sent": counts.get("sent", 0), **{f"dropped_{r}": counts.get(r, 0) for r in DROP_REASONS}}

    # --- the sender thread ----------------------------------------------------------------------

    def _drop(self, reason: str, n: int = 1) -> bool:
        with self._lock:
            self._counts[reason] += n
        return False

    def _run(self) -> None:
        batch: list[bytes] = []
        size = 0
        oldest = 0.0
        while True:
            wait = None if not batch else max(0.0, oldest + self.flush_interval - time.monotonic())
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                item = None  # the oldest event reached flush_interval
            if isinstance(item, bytes):
                if batch and size + len(item) > self.max_batch_bytes:
                    self._send(batch)
                    batch, size = [], 0
                if not batch:
                    oldest = time.monotonic()
                batch.append(item)
                size += len(item) + 1
                if len(batch) < self.batch_size:
                    continue
            if batch:
                self._send(batch)
                batch, size = [], 0
            if isinstance(item, _Flush):
                item.done.set()
            elif item is _STOP:
                return

    def _send(self, batch: list[bytes]) -> None:
        body = b'{"events":[' + b",".join(batch) + b"]}"
        try:
            response = self._session.post(self.endpoint, data=body, timeout=self.timeout)
        except Exception as exc:  # any failure to deliver (requests wraps most): keep the sender thread alive
            log.debug("infersight sidecar unreachable: %s", exc)
            self._drop("unreachable", len(batch))
            return
        if response.status_code == 200:
            with self._lock:
                self._counts["sent"] += len(batch)
        else:
            log.warning("infersight sidecar rejected %d events: %s %s", len(batch), response.status_code, response.text)
            self._drop("rejected", len(batch))
