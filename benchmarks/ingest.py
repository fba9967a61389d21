"""Event ingest: events/s on one core, single and batched, p99 request latency, RSS after 1M events.

The sidecar runs as its own process (``python3 -m infersight exporter``, only the
business collector) pinned to one core; the load generator is pinned to another
and speaks raw ``http.client`` on one keep-alive connection, so the figures are
the sidecar's, not a client library's. The baseline, measured in this process,
is the ingest handler called directly (JSON parse + validation + apply, no HTTP).
The Python client's own end-to-end rate is measured last. Run from the repository root:

    python3 -m benchmarks.ingest [--events 1000000] [--batch 500] [--repeats 3] [--sidecar-cpu 0 --load-cpu 1]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from exporters.collectors.business import BusinessCollector
from infersight.client import EventClient
from infersight.config import Config
from tests.harness.sidecar import SidecarProcess, business_only

DOMAINS = ["legal", "medical", "finance"]
RULES = ["pii-redaction", "retention", "disclaimer"]


def events(n: int) -> list[dict]:
    """A realistic mix: per request one phase event, one domain check, one compliance check, one cost record."""
    out: list[dict] = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            phases = {"preprocessing": 0.005 + (i % 10) / 1000, "allocation": 0.01 + (i % 20) / 1000}
            out.append({"kind": "request", "tier": "realtime", "phases": {**phases, "postprocessing": 0.012}})
        elif kind == 1:
            out.append({"kind": "domain_tokens", "domain": DOMAINS[i % 3], "correct": 98, "total": 100})
        elif kind == 2:
            out.append({"kind": "compliance", "rule": RULES[i % 3], "passed": i % 1000 != 2})
        else:
            out.append({"kind": "cost", "tenant": "acme", "prompt_tokens": 812, "completion_tokens": 143})
    return out


def batch_body(batch: list[dict]) -> bytes:
    return json.dumps({"events": batch}).encode()


def baseline(body: bytes, per_body: int, seconds: float = 2.0) -> float:
    """Events/s through the handler alone, in this process."""
    collector = BusinessCollector(Config.model_validate(business_only(domains=DOMAINS, compliance_rules=RULES)))
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        assert collector.ingest(body).status == 200
        done += per_body
    return done / (time.perf_counter() - started)


def post_loop(conn: http.client.HTTPConnection, body: bytes, requests: int) -> list[float]:
    """Request latencies in seconds for ``requests`` POSTs of ``body``."""
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    latencies = []
    for _ in range(requests):
        started = time.perf_counter()
        conn.request("POST", "/v1/events", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        latencies.append(time.perf_counter() - started)
        if response.status != 200:
            raise RuntimeError(f"sidecar answered {response.status}")
    return latencies


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def run_shape(
    conn: http.client.HTTPConnection, body: bytes, per_body: int, requests: int, repeats: int
) -> tuple[float, str]:
    """Median events/s over ``repeats`` runs, and the request latencies (median, p99) of the median run."""
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        latencies = post_loop(conn, body, requests)
        runs.append((requests * per_body / (time.perf_counter() - started), latencies))
    rate, latencies = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    return (
        rate,
        f"request latency median {statistics.median(latencies) * 1000:.2f} ms, p99 {p99(latencies) * 1000:.2f} ms",
    )


def client_rate(url: str, mix: list[dict], total: int, batch: int) -> tuple[float, dict[str, int]]:
    """Events/s from the first emit() until close() has delivered everything."""
    client = EventClient(url, batch_size=batch, max_queue=total, flush_interval=0.05, timeout=10)
    started = time.perf_counter()
    for i in range(total):
        client.emit(mix[i % len(mix)])
    client.close(timeout=120)
    return total / (time.perf_counter() - started), client.stats()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="events for the RSS run")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--single-requests", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sidecar-cpu", type=int, default=0)
    parser.add_argument("--load-cpu", type=int, default=1)
    args = parser.parse_args()

    os.sched_setaffinity(0, {args.load_cpu})
    mix = events(args.batch)
    batched = batch_body(mix)
    single = json.dumps(mix[1]).encode()
    base = baseline(batched, args.batch)
    print(f"baseline, handler alone in-process, batches of {args.batch}: {base:,.0f} events/s")

    config = business_only(domains=DOMAINS, compliance_rules=RULES, max_events_per_batch=max(args.batch, 1000))
    with tempfile.TemporaryDirectory() as tmp, SidecarProcess(Path(tmp), config, cpus=[args.sidecar_cpu]) as sidecar:
        conn = http.client.HTTPConnection("127.0.0.1", sidecar.port, timeout=30)
        post_loop(conn, batched, 200)  # warm up
        rss_start = sidecar.rss_bytes()

        rate, tail = run_shape(conn, single, 1, args.single_requests, args.repeats)
        print(
            f"sidecar on cpu {args.sidecar_cpu}, single events: {rate:,.0f} events/s (median of {args.repeats}), {tail}"
        )
        requests = max(1, 200_000 // args.batch)
        rate_b, tail_b = run_shape(conn, batched, args.batch, requests, args.repeats)
        print(
            f"sidecar on cpu {args.sidecar_cpu}, batches of {args.batch}: {rate_b:,.0f} events/s "
            f"(median of {args.repeats}), {tail_b}; "
            f"{rate_b / base:.2f}x the in-process baseline, {rate_b / rate:.1f}x single events"
        )

        sent, rss_points = 0, []
        while sent < args.events:
            post_loop(conn, batched, 100)
            sent += 100 * args.batch
            if sent % 200_000 < 100 * args.batch:
                rss_points.append((sent, sidecar.rss_bytes()))
        conn.close()
        rss_end = sidecar.rss_bytes()
        trace = ", ".join(f"{n // 1000}k: {b / 2**20:.1f}" for n, b in rss_points)
        print(
            f"sidecar RSS after warm-up {rss_start / 2**20:.1f} MiB, after {sent:,} more events "
            f"{rss_end / 2**20:.1f} MiB (ratio {rss_end / rss_start:.3f}); MiB along the way: {trace}"
        )

        client_events = min(args.events, 200_000)
        rate_c, stats = client_rate(sidecar.url, mix, client_events, args.batch)
        print(
            f"Python client (infersight.client), {client_events:,} events end to end: {rate_c:,.0f} events/s, {stats}"
        )


if __name__ == "__main__":
    main()
