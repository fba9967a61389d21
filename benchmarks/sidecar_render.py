"""What the sidecar costs: /metrics render time, poll CPU per vLLM target, parse cost, RSS.

Serves the real vLLM 0.32 scrape as N local targets (1 and 8 by default), runs the
sidecar in this process with only the vllm collector, and prints medians. Render
time is compared with a baseline measured in the same process: generate_latest()
on an empty CollectorRegistry. Run from the repository root:

    python3 -m benchmarks.sidecar_render [--renders 500] [--polls 15] [--targets 1 8]
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporters.collectors.vllm import VllmCollector
from exporters.server import Sidecar
from exporters.vllm_scrape import parse
from infersight.config import Config
from tests.harness.scrape_server import REAL_SCRAPE, ScrapeServer, Script


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def median_seconds(fn: Callable[[], object], runs: int, clock: Callable[[], float] = time.perf_counter) -> float:
    samples = []
    for _ in range(runs):
        started = clock()
        fn()
        samples.append(clock() - started)
    return statistics.median(samples)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def bench_parse(runs: int) -> None:
    text = REAL_SCRAPE.read_text()

    def full() -> None:
        for family in text_string_to_metric_families(text):
            list(family.samples)

    full_s, prefiltered_s = median_seconds(full, runs), median_seconds(lambda: parse(text), runs)
    print(
        f"parse of the real scrape ({len(text)} bytes): full prometheus_client parser {ms(full_s)}, "
        f"prefiltered (what the collector uses) {ms(prefiltered_s)}, ratio {full_s / prefiltered_s:.1f}x"
    )


def bench_targets(n: int, renders: int, polls: int, baseline: float) -> None:
    with ScrapeServer() as server:
        for i in range(n):
            server.scripts[f"/t{i}"] = Script(body=REAL_SCRAPE.read_bytes())
        config = Config.model_validate(
            {
                "exporter": {"port": 0, "collectors": {"vllm": True, "gpu": False, "business": False}},
                # Background polls only at start, so they do not share the CPU with the measurements;
                # the window then holds every poll made here (1 + 2 x --polls, 31 by default, as at 1 Hz / 30 s).
                "vllm": {
                    "targets": [{"name": f"t{i}", "url": server.url(f"/t{i}")} for i in range(n)],
                    "poll_interval_seconds": 3600,
                    "rate_window_seconds": 7200,
                },
            }
        )
        rss_before = rss_mib()
        sidecar = Sidecar(config)
        sidecar.start()
        try:
            (collector,) = [c for c in sidecar.collectors if isinstance(c, VllmCollector)]
            deadline = time.monotonic() + 10
            while not all(t.snapshot.up for t in collector.targets):
                if time.monotonic() > deadline:
                    raise RuntimeError("targets did not come up")
                time.sleep(0.05)
            poll_cpu = median_seconds(collector.poll_all, polls, time.thread_time) / n
            poll_wall = median_seconds(collector.poll_all, polls) / n
            body = sidecar.render_metrics()
            in_process = median_seconds(sidecar.render_metrics, renders)
            conn = http.client.HTTPConnection("127.0.0.1", sidecar.port, timeout=5)

            def over_http() -> None:
                conn.request("GET", "/metrics")
                response = conn.getresponse()
                response.read()
                assert response.status == 200

            over_http_s = median_seconds(over_http, renders)
            conn.close()
            rss_after = rss_mib()
        finally:
            sidecar.stop()
    series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    print(f"targets={n}: /metrics {len(body)} bytes, {series} series")
    print(
        f"  render in-process median {ms(in_process)} ({in_process / baseline:.0f}x baseline), "
        f"over HTTP median {ms(over_http_s)} ({over_http_s / baseline:.0f}x baseline)"
    )
    print(f"  poll per target: CPU median {ms(poll_cpu)}, wall median {ms(poll_wall)}")
    print(f"  RSS before the sidecar {rss_before:.1f} MiB, after the polls and renders {rss_after:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=500)
    parser.add_argument("--polls", type=int, default=15)
    parser.add_argument("--targets", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    empty = CollectorRegistry()
    baseline = median_seconds(lambda: generate_latest(empty), args.renders)
    print(f"baseline: generate_latest(empty CollectorRegistry) median {ms(baseline)}")
    bench_parse(max(20, args.polls))
    for n in args.targets:
        bench_targets(n, args.renders, args.polls, baseline)


if __name__ == "__main__":
    main()
