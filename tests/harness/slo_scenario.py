"""The end-to-end paging scenario: real vLLM -> Prometheus rules -> Alertmanager -> PagerDuty receiver.

Shared by the integration test and ``benchmarks/page_latency.py``. The config
lowers the SLO so the tiny model's idle and warm states stay quiet while overload
pages: light requests (16-token prompts, 8 new tokens) finish in ~0.05 s, all in
vLLM's first e2e bucket (le 0.3), so ``histogram_quantile`` puts their P99 at
most at 0.3 s, under both thresholds (1.5 x and 2 x the 0.25 s target); 32
clients against ``--max-num-seqs 16`` queue for 1.4-1.7 s (measured on 2 cores).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from alerts.render import alerts
from alerts.spec import Alert
from infersight.config import Config, parse_config
from infersight.stack import Stack, StackOptions
from infersight.testing.pagerduty import LocalPager, Received
from tests.harness.load import LoadGenerator, LoadResult, LoadShape
from tests.harness.vllm_server import VLLMServer

CRITICAL_P99_ALERT = "InfersightP99LatencyCritical"
LATENCY_TARGET_SECONDS = 0.25
WARM = LoadShape(concurrency=1, prompt_tokens=16, max_tokens=8, max_requests=20, max_seconds=30)
OVERLOAD = LoadShape(concurrency=32, prompt_tokens=400, max_tokens=64, max_seconds=120)
ROUTING_KEY = "e2e0e2e0e2e0e2e0e2e0e2e0e2e0e2e0"


def scenario_config(server: VLLMServer, pager: LocalPager, routing_key_file: Path) -> Config:
    """Fast loops (1 s scrape, evaluation, grouping) and a lowered SLO for the tiny model."""
    tiers = [t.model_dump() for t in Config().slo.tiers]
    model_tier = Config().slo.model_latency_tier
    for tier in tiers:
        if tier["name"] == model_tier:
            tier["latency_seconds"] = LATENCY_TARGET_SECONDS
    return parse_config({
        "slo": {"tiers": tiers, "latency_window": "10s", "warning_for": "3s", "critical_for": "3s"},
        "vllm": {"targets": [{"name": "vllm-0", "url": server.metrics_url}], "poll_interval_seconds": 1.0},
        "prometheus": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "alerting": {
            "pagerduty": {"url": pager.enqueue_url, "routing_key_file": str(routing_key_file)},
            "warning_webhook_url": pager.webhook_url,
            "group_wait": "1s",
            "group_interval": "1s",
        },
    }, "scenario")


def alert_spec(config: Config, name: str) -> Alert:
    return next(a for a in alerts(config) if a.name == name)


@dataclass
class Monitored:
    server: VLLMServer
    pager: LocalPager
    config: Config
    stack: Stack

    def warm(self) -> LoadResult:
        """A few light requests: traffic the SLO must tolerate."""
        return LoadGenerator(self.server.base_url, self.server.model_name, self.server.model.vocab_size, WARM,
                             first_token=self.server.model.first_plain_token).run()

    def overload_until_paged(self, timeout: float) -> tuple[Received, LoadResult]:
        """Drive overload until the critical P99 page arrives (or ``timeout``); stop the load either way."""
        summary = alert_spec(self.config, CRITICAL_P99_ALERT).summary
        load = LoadGenerator(self.server.base_url, self.server.model_name, self.server.model.vocab_size, OVERLOAD,
                             first_token=self.server.model.first_plain_token)
        with load:
            page = self.pager.events.wait_for(
                lambda e: e["event_action"] == "trigger" and e["payload"]["summary"] == summary, timeout
            )
        return page, load.result


@contextlib.contextmanager
def monitored(server: VLLMServer, run_dir: Path) -> Iterator[Monitored]:
    """The stack on free ports watching ``server``, paging an in-process receiver."""
    key_file = run_dir / "routing_key"
    run_dir.mkdir(parents=True, exist_ok=True)
    key_file.write_text(ROUTING_KEY + "\n")
    with LocalPager() as pager:
        config = scenario_config(server, pager, key_file)
        options = StackOptions(run_dir=run_dir / "stack", prometheus_port=0, alertmanager_port=0, sidecar_port=0)
        with Stack(config, options) as stack:
            yield Monitored(server, pager, config, stack)
