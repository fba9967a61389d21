"""The plugin inside a real vLLM: per-tier series, a warm-up that cannot page, a burn-rate page under overload.

One real vLLM CPU server loads the plugin through its entry point and runs the
timed scheduler; a real Prometheus scrapes it with the rules generated from the
same config. The config compresses the SLO to the tiny model's scale (a 0.5 s
realtime target, 5 s / 15 s burn windows, warm-up of 8 requests) so each phase
takes seconds:

1. warm-up: 8 concurrent 256-token requests, each slower than the target. vLLM's own
   histogram counts them; the SLO series do not, and the burn-rate alert stays quiet;
2. one light request per tier, classified by prompt length;
3. overload (48 clients against 16 batch slots): queueing pushes realtime requests
   past the target and the fast-burn alert fires;
4. the SLO dashboard, rendered from the same config: every panel query runs on this
   data, and the SLO and engine-step panels show it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from alerts.groups.slo import requests_record
from alerts.render import prometheus_rules_yaml
from dashboards import DASHBOARDS, SLO
from dashboards.common import render_json
from infersight.catalog import plugin as catalog
from infersight.catalog.vllm import E2E_LATENCY
from infersight.config import Config, parse_config
from infersight.process import http_get, wait_until
from infersight.promapi import PrometheusAPI
from infersight.vllm_plugin.channel import channel_dir, channel_path
from tests.harness.load import LoadGenerator, LoadShape
from tests.harness.monitoring import running_prometheus, write_prometheus_dir
from tests.harness.vllm_plugin_env import plugin_env
from tests.harness.vllm_pool import DEFAULT_ARGS, VLLMPool
from tests.harness.vllm_server import VLLMServer
from tests.test_dashboards import _concrete, queries

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("monitoring_binaries")]

TARGET_SECONDS = 0.5
WARMUP = 8
PROMPTS = {"realtime": 32, "normal": 128, "batch": 300}  # tier bounds below: 64 and 256 tokens
SCHEDULER = "infersight.vllm_plugin.scheduler.TimedScheduler"
FAST_BURN = "InfersightSLOFastBurn"


def plugin_config() -> Config:
    return parse_config(
        {
            "slo": {
                "tiers": [
                    {"name": "realtime", "max_prompt_tokens": 64, "latency_seconds": TARGET_SECONDS},
                    {"name": "normal", "max_prompt_tokens": 256, "latency_seconds": 2.0},
                    {"name": "batch", "max_prompt_tokens": None, "latency_seconds": None},
                ],
                "objective": 0.9,
                "warmup_requests": WARMUP,
                "burn_rate": {
                    "period": "2m",
                    "budget_interval": "1s",
                    "min_requests": 5,
                    "critical_for": "0s",
                    "windows": [{"short": "5s", "long": "15s", "factor": 2, "severity": "critical"}],
                },
            },
            "prometheus": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        },
        "plugin-e2e",
    )


@pytest.fixture
def plugin_server(vllm_pool: VLLMPool, tmp_path_factory: pytest.TempPathFactory) -> tuple[VLLMServer, Config]:
    root = tmp_path_factory.mktemp("plugin")
    config = plugin_config()
    config_file = root / "infersight.yaml"
    config_file.write_text(config.model_dump_json(), encoding="utf-8")  # JSON is YAML
    args = (*DEFAULT_ARGS, "--scheduler-cls", SCHEDULER, "--enable-logging-iteration-details")
    return vllm_pool.get(args, plugin_env(root, config_file)), config


@pytest.fixture
def prometheus(plugin_server: tuple[VLLMServer, Config], tmp_path: Path) -> Iterator[PrometheusAPI]:
    server, config = plugin_server
    address = server.base_url.removeprefix("http://")
    rules = {"infersight.rules.yaml": prometheus_rules_yaml(config)}
    config_file = write_prometheus_dir(tmp_path, config, vllm=[address], sidecar=[], alertmanagers=[],
                                       rule_files=rules)  # fmt: skip
    with running_prometheus(tmp_path, config_file) as url:
        yield PrometheusAPI(url)


def scrape(server: VLLMServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, body = http_get(server.metrics_url, timeout=5.0)
    assert status == 200
    return {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in {"engine", "model_name"}))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def load(server: VLLMServer, **shape: float) -> LoadGenerator:
    return LoadGenerator(server.base_url, server.model_name, server.model.vocab_size, LoadShape(**shape),
                         first_token=server.model.first_plain_token)  # fmt: skip


def fast_burn(api: PrometheusAPI, state: str) -> list[dict]:
    return api.query(f'ALERTS{{alertname="{FAST_BURN}", alertstate="{state}"}}')


def test_tiers_warmup_and_burn_rate_page(plugin_server: tuple[VLLMServer, Config], prometheus: PrometheusAPI) -> None:
    server, config = plugin_server
    api = prometheus
    channel = channel_path(channel_dir(config), server.process.pid, 0)
    assert not channel.exists(), "the plugin maps the timed scheduler's channel at startup and unlinks it"
    before = scrape(server)
    assert before[(catalog.WARMUP_REMAINING.name, ())] == WARMUP, "a fresh server starts in warm-up"

    # 1. Warm-up: slow requests that vLLM's own e2e histogram counts, the SLO series do not.
    warm = load(server, concurrency=WARMUP, prompt_tokens=PROMPTS["realtime"], max_tokens=256,
                max_requests=WARMUP, max_seconds=60).run()  # fmt: skip
    assert warm.ok == WARMUP and not warm.errors, warm.summary()
    after = scrape(server)
    assert after[(catalog.WARMUP_REQUESTS.name, (("tier", "realtime"),))] == WARMUP
    assert after[(catalog.WARMUP_REMAINING.name, ())] == 0
    assert after[(catalog.REQUEST_E2E.count, (("tier", "realtime"),))] == 0
    vllm_count = after[(E2E_LATENCY.count, ())] - before.get((E2E_LATENCY.count, ()), 0)
    vllm_fast = after[(E2E_LATENCY.bucket, (("le", "0.5"),))] - before.get((E2E_LATENCY.bucket, (("le", "0.5"),)), 0)
    assert vllm_count == WARMUP and vllm_fast < WARMUP * 0.8, "warm-up requests would burn budget if counted"

    window = config.slo.burn_rate.windows[0].long
    rule = f'{requests_record(window)}{{tier="realtime"}}'
    wait_until(lambda: api.query(f"{rule} == 0"), 30, f"{rule} evaluated on the warm-up scrape", 0.5)
    quiet_until = time.monotonic() + 8
    while time.monotonic() < quiet_until:  # several evaluations while the warm-up sits in every window
        assert fast_burn(api, "pending") + fast_burn(api, "firing") == [], "warm-up reached the burn-rate alert"
        time.sleep(1)

    # 2. One light request per tier: the tier comes from the prompt length.
    for tier, tokens in PROMPTS.items():
        light = load(server, concurrency=1, prompt_tokens=tokens, max_tokens=4, max_requests=2, max_seconds=30).run()
        assert light.ok == 2, (tier, light.summary())
    tiers = scrape(server)
    assert [tiers[(catalog.REQUEST_E2E.count, (("tier", t),))] for t in PROMPTS] == [2, 2, 2]
    assert tiers[(catalog.REQUEST_QUEUE.count, (("tier", "batch"),))] == 2

    # 3. Overload: 48 clients, 16 batch slots. Queueing pushes realtime requests past the target.
    overload = load(server, concurrency=48, prompt_tokens=PROMPTS["realtime"], max_tokens=64, max_seconds=90)
    started = time.monotonic()
    with overload:
        firing = wait_until(lambda: fast_burn(api, "firing"), 75, f"{FAST_BURN} firing under overload", 0.5)
    fired_after = time.monotonic() - started
    assert not overload.result.errors, overload.result.errors[:3]
    assert [(a["metric"]["tier"], a["metric"]["model_name"], a["metric"]["severity"]) for a in firing] == [
        ("realtime", server.model_name, "critical")
    ]
    print(f"{FAST_BURN} fired {fired_after:.1f} s into overload; {overload.result.summary()}")

    # The engine-step series, from this same run: requests waited, the scheduler was timed in the engine core.
    final = scrape(server)
    assert final[(catalog.BATCH_EFFICIENCY.count, (("requests_waiting", "true"),))] > 0
    assert final[(catalog.SCHEDULER_CALL.count, (("call", "schedule"),))] > 0
    assert final[(catalog.MODEL_EXECUTE.count, ())] > 0
    assert final[(catalog.STEP_INTERVAL.count, ())] > 0
    errors = {labels: value for (name, labels), value in final.items() if name == catalog.PLUGIN_ERRORS.name}
    assert len(errors) == 4 and set(errors.values()) == {0}, errors

    # 4. The SLO dashboard for this config, on this data.
    shown = {}
    for title, expr in queries(json.loads(render_json(DASHBOARDS[SLO])(config))):
        result = api.query(_concrete(expr))  # raises on a query Prometheus rejects
        shown[title] = shown.get(title, False) or bool(result)
    must_show = [
        f"Attainment ({window})", f"Error budget left ({config.slo.burn_rate.period})", "Burn rate by window",
        "E2E P99 vs SLO", "Where the time goes (P99 per phase)", "Requests/s and warm-up",
        "Batch efficiency while requests wait", "Scheduling cycle P99", "Step time P99", "Plugin loaded",
        "Warm-up requests left",
    ]
    assert [title for title in must_show if not shown.get(title)] == []
