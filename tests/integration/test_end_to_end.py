"""The whole path, all real: vLLM (tiny model) -> sidecar + Prometheus (generated rules) ->
Alertmanager (generated config) -> PagerDuty Events v2 page with runbook and dashboard links.

Light traffic must not page; overload must, within a bounded time, and the page
must carry what the on-call engineer needs.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from alerts.groups.vllm import p99_record
from alerts.promql import num
from alerts.render import runbook_url
from alerts.spec import Alert
from dashboards import DASHBOARDS
from infersight.catalog import exporter as cat
from infersight.config import duration_seconds
from infersight.process import wait_until
from infersight.promapi import PrometheusAPI
from infersight.testing.pagerduty import format_page
from tests.harness.slo_scenario import (
    CRITICAL_P99_ALERT,
    LATENCY_TARGET_SECONDS,
    ROUTING_KEY,
    Monitored,
    alert_spec,
    monitored,
)
from tests.harness.vllm_server import VLLMServer
from tests.test_runbooks import github_anchors

REPO = Path(__file__).resolve().parents[2]
PAGE_TIMEOUT_SECONDS = 120.0

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("monitoring_binaries")]


@pytest.fixture
def scenario(vllm_server: VLLMServer, tmp_path: Path):
    with monitored(vllm_server, tmp_path) as m:
        yield m


def _assert_quiet_under_light_traffic(m: Monitored, api: PrometheusAPI) -> None:
    """Warm traffic reaches the P99 rule (so 'no page' is not vacuous) and stays under both thresholds."""
    warm = m.warm()
    assert warm.ok == 20 and not warm.errors, warm.summary()
    record = p99_record(m.config)
    p99 = wait_until(lambda: api.query(f'{record}{{model_name="{m.server.model_name}"}} >= 0'), 30,
                     f"{record} for the warm requests")
    warning = alert_spec(m.config, "InfersightP99LatencyWarning")
    assert float(p99[0]["value"][1]) < m.config.slo.warning_factor * LATENCY_TARGET_SECONDS, (warning.name, p99)
    # Long enough for a wrongly firing alert to pass its `for` and reach the receiver.
    settle = duration_seconds(m.config.slo.critical_for) + duration_seconds(m.config.alerting.group_wait) + 3
    try:
        early = m.pager.events.wait_for(lambda e: True, settle)
    except TimeoutError:
        pass
    else:
        pytest.fail(f"paged under light traffic: {format_page(early.body)}")
    firing = [a["labels"]["alertname"] for a in api.alerts() if a["labels"]["alertname"].startswith("InfersightP99")]
    assert firing == [], f"P99 alerts pending/firing under light traffic: {firing}"


def _assert_page(m: Monitored, page: dict, spec: Alert) -> None:
    assert page["routing_key"] == ROUTING_KEY
    payload = page["payload"]
    assert payload["severity"] == "critical"
    assert payload["summary"] == spec.summary
    details = payload["custom_details"]
    assert details["model"] == m.server.model_name
    assert details["action"] == spec.annotations["action"]
    assert details["num_firing"] == "1"
    threshold = num(m.config.slo.critical_factor * LATENCY_TARGET_SECONDS)
    assert f"above {threshold}s" in details["description"], details["description"]

    links = {link["text"]: link["href"] for link in page["links"]}
    runbook = links["Runbook"]
    assert runbook == runbook_url(m.config, CRITICAL_P99_ALERT)
    relative = runbook.removeprefix(m.config.urls.runbook_base.rstrip("/") + "/")
    file, _, anchor = relative.partition("#")
    page_file = REPO / "runbooks" / file
    assert page_file.is_file(), f"{runbook}: no {page_file}"
    assert anchor in github_anchors(page_file.read_text(encoding="utf-8")), f"{runbook}: no such heading"

    dashboard = urlsplit(links["Dashboard"])
    assert links["Dashboard"].startswith(m.config.urls.dashboard_base.rstrip("/") + "/d/")
    uid = dashboard.path.rsplit("/", 1)[-1]
    assert uid in DASHBOARDS and (REPO / "dashboards" / "generated" / f"{uid}.json").is_file()


def _assert_sidecar_series(m: Monitored, api: PrometheusAPI) -> None:
    job = m.config.prometheus.sidecar_job
    target = m.config.vllm.targets[0].name
    up = api.query(f'{cat.VLLM_UP}{{job="{job}", target="{target}"}}')
    assert [s["value"][1] for s in up] == ["1"], up
    running = api.query(f'{cat.VLLM_REQUESTS_RUNNING}{{job="{job}", target="{target}"}}')
    assert {s["metric"]["model_name"] for s in running} == {m.server.model_name}, running
    names = {s["metric"]["__name__"] for s in api.query(f'{{__name__=~"infersight_vllm_.+", job="{job}"}}')}
    assert {cat.VLLM_UP.name, cat.VLLM_REQUESTS_RUNNING.name, cat.VLLM_KV_CACHE_USAGE.name} <= names, names


def test_overload_pages_with_runbook_and_dashboard_links(scenario: Monitored) -> None:
    api = PrometheusAPI(scenario.stack.prometheus_url)
    _assert_quiet_under_light_traffic(scenario, api)

    page, load = scenario.overload_until_paged(PAGE_TIMEOUT_SECONDS)
    assert not load.errors, load.errors[:3]
    print(f"page after {page.at - load.started:.1f} s of overload; load: {load.summary()}")
    _assert_page(scenario, page.body, alert_spec(scenario.config, CRITICAL_P99_ALERT))
    _assert_sidecar_series(scenario, api)
