"""``POST /v1/events`` on a real sidecar (in-process, real HTTP): validation, folding, exposition.

Expected values are read back from ``/metrics`` with prometheus_client's parser,
so every test goes through the same path Prometheus does.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from alerts.groups.business import accuracy_record, phase_quantile_record
from alerts.render import prometheus_rules_yaml
from exporters.collectors.business import PHASE_BUCKETS
from exporters.server import TOKEN_ENV, Sidecar
from infersight.catalog import business as cat
from infersight.client import EventClient
from infersight.config import Config
from tests.harness.monitoring import running_prometheus, wait_for_series, write_prometheus_dir

CONFIG = {
    "exporter": {"port": 0, "collectors": {"vllm": False, "gpu": False, "business": True}},
    "business": {
        "domains": ["legal", "medical"],
        "compliance_rules": ["pii-redaction", "retention"],
        "tenants": ["acme"],
        "products": ["chat"],
        "max_events_per_batch": 50,
    },
}
BUSINESS_PREFIXES = ("infersight_business_", "infersight_gateway_", "infersight_cost_")
REQUEST = {
    "kind": "request",
    "tier": "realtime",
    "phases": {"preprocessing": 0.008, "allocation": 0.021, "postprocessing": 0.012},
    "prompt_tokens": 812,
    "completion_tokens": 143,
}
DOMAIN = {"kind": "domain_tokens", "domain": "legal", "correct": 97, "total": 100}
COMPLIANCE = {"kind": "compliance", "rule": "pii-redaction", "passed": False}
COST = {"kind": "cost", "tenant": "acme", "product": "chat", "prompt_tokens": 812, "completion_tokens": 143}


class Client:
    def __init__(self, base: str) -> None:
        self.base = base
        self.session = requests.Session()

    def post(self, body: object, **headers: str) -> requests.Response:
        """POST ``body`` as JSON, or as it is when it is already bytes."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.session.post(f"{self.base}/v1/events", data=data, headers=headers, timeout=10)

    def metrics(self) -> dict[tuple[str, frozenset], float]:
        response = self.session.get(f"{self.base}/metrics", timeout=10)
        assert response.status_code == 200
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.text)
            for s in family.samples
        }


def sample(metrics: dict, name: str, **labels: str) -> float:
    return metrics[(name, frozenset(labels.items()))]


def start(config: dict) -> Sidecar:
    sidecar = Sidecar(Config.model_validate(config))
    sidecar.start()
    return sidecar


def serve(config: dict) -> Iterator[Client]:
    sidecar = start(config)
    try:
        yield Client(f"http://127.0.0.1:{sidecar.port}")
    finally:
        sidecar.stop()


@pytest.fixture
def client() -> Iterator[Client]:
    """A fresh sidecar: for tests that read absolute counts."""
    yield from serve(CONFIG)


@pytest.fixture(scope="module")
def shared() -> Iterator[Client]:
    """One sidecar for the many rejection cases (each server stop takes half a second)."""
    yield from serve(CONFIG)


def test_a_batch_of_every_kind_lands_in_the_metrics(client: Client) -> None:
    response = client.post({"events": [REQUEST, REQUEST, DOMAIN, COMPLIANCE, COST]})
    assert response.status_code == 200, response.text
    assert response.json() == {"accepted": 5}
    m = client.metrics()
    assert sample(m, cat.GATEWAY_REQUESTS.name, tier="realtime") == 2
    assert sample(m, cat.GATEWAY_TOKENS.name, tier="realtime", type="prompt") == 1624
    assert sample(m, cat.GATEWAY_TOKENS.name, tier="realtime", type="completion") == 286
    hist = cat.GATEWAY_PHASE_DURATION
    assert sample(m, hist.count, phase="allocation", tier="realtime") == 2
    assert sample(m, hist.sum, phase="allocation", tier="realtime") == pytest.approx(0.042)
    assert sample(m, hist.bucket, phase="allocation", tier="realtime", le="0.02") == 0
    assert sample(m, hist.bucket, phase="allocation", tier="realtime", le="0.025") == 2
    assert sample(m, cat.DOMAIN_TOKENS.name, domain="legal") == 100
    assert sample(m, cat.DOMAIN_TOKENS_CORRECT.name, domain="legal") == 97
    assert sample(m, cat.COMPLIANCE_CHECKS.name, rule="pii-redaction", result="fail") == 1
    assert sample(m, cat.COMPLIANCE_CHECKS.name, rule="pii-redaction", result="pass") == 0
    assert sample(m, cat.COST_TENANT_TOKENS.name, tenant="acme") == 955
    assert sample(m, cat.COST_PRODUCT_TOKENS.name, product="chat") == 955
    assert sample(m, cat.EVENTS.name, kind="request") == 2
    assert sample(m, cat.EVENTS.name, kind="cost") == 1


def test_one_event_without_a_batch_is_accepted(client: Client) -> None:
    assert client.post({"kind": "compliance", "rule": "retention", "passed": True}).json() == {"accepted": 1}
    assert sample(client.metrics(), cat.COMPLIANCE_CHECKS.name, rule="retention", result="pass") == 1


def test_every_series_exists_at_zero_before_any_event(client: Client) -> None:
    """So the first compliance failure is an increase Prometheus can see, not a new series."""
    m = client.metrics()
    for rule in ("pii-redaction", "retention", "other"):
        for result in ("pass", "fail"):
            assert sample(m, cat.COMPLIANCE_CHECKS.name, rule=rule, result=result) == 0
    for tier in ("realtime", "normal", "batch", "other"):
        for phase in cat.GATEWAY_PHASES:
            assert sample(m, cat.GATEWAY_PHASE_DURATION.count, phase=phase, tier=tier) == 0
    assert sample(m, cat.DOMAIN_TOKENS.name, domain="medical") == 0


def test_bucket_bounds_are_inclusive(client: Client) -> None:
    bound = PHASE_BUCKETS[4]
    events = [{"kind": "request", "tier": "normal", "phases": {"preprocessing": v}} for v in (bound, bound + 1e-9)]
    client.post({"events": events})
    m = client.metrics()
    hist = cat.GATEWAY_PHASE_DURATION
    assert sample(m, hist.bucket, phase="preprocessing", tier="normal", le=str(bound)) == 1
    assert sample(m, hist.bucket, phase="preprocessing", tier="normal", le=str(PHASE_BUCKETS[5])) == 2
    assert sample(m, hist.bucket, phase="preprocessing", tier="normal", le="+Inf") == 2


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"events": [DOMAIN, DOMAIN, DOMAIN, {**DOMAIN, "domain": 12}]},
            "events[3].domain: expected a string, found 12",
        ),
        ({"kind": "compliance", "rule": "x"}, "passed: expected true or false, found nothing (the field is missing)"),
        ({**COMPLIANCE, "passed": "yes"}, "passed: expected true or false, found 'yes'"),
        ({**COMPLIANCE, "rulle": "x"}, "rulle: unknown field; expected one of ['kind', 'passed', 'rule']"),
        (
            {"kind": "latency"},
            "kind: expected one of ['request', 'domain_tokens', 'compliance', 'cost'], found 'latency'",
        ),
        ({"rule": "x"}, "kind: expected one of ['request', 'domain_tokens', 'compliance', 'cost'], found nothing"),
        (
            {**REQUEST, "phases": {"decode": 0.1}},
            "phases: expected phases from ['preprocessing', 'allocation', 'postprocessing'], found 'decode'",
        ),
        (
            {**REQUEST, "phases": {"allocation": -0.001}},
            "phases.allocation: expected seconds from 0 to 3600, found -0.001",
        ),
        (b'{"kind": "request", "tier": "x", "phases": {"allocation": 1e400}}', "phases.allocation: expected seconds"),
        ({**REQUEST, "phases": [0.1]}, "phases: expected an object of seconds by phase"),
        ({**REQUEST, "prompt_tokens": True}, "prompt_tokens: expected an integer from 0 to 4294967295, found True"),
        ({**REQUEST, "prompt_tokens": 12.0}, "prompt_tokens: expected an integer from 0 to 4294967295, found 12.0"),
        ({**REQUEST, "tier": None}, "tier: expected a string, found None"),
        ({**DOMAIN, "correct": 101}, "correct: expected at most total (100), found 101"),
        ({"kind": "cost", "prompt_tokens": 5}, "tenant: expected a string (a cost event names a tenant, a product"),
        ([DOMAIN], "event: expected an object, found [{"),
        ({"events": DOMAIN}, "events: expected a list of events, found {"),
        ({"events": [], "source": "x"}, "source: unknown field; a batch is {'events': [...]}"),
        ({"events": [DOMAIN, "x"]}, "events[1]: expected an object, found 'x'"),
    ],
)
def test_a_schema_error_is_a_400_naming_the_field(shared: Client, body: object, message: str) -> None:
    response = shared.post(body)
    assert response.status_code == 400
    assert response.json()["error"].startswith(message)


@pytest.mark.parametrize(
    "raw", [b"{", b"\xff\xfe\x00", b'{"kind": "request", "tier": "x", "prompt_tokens": NaN}', b"[" * 100_000]
)
def test_a_body_that_is_not_json_is_a_400(shared: Client, raw: bytes) -> None:
    before = sample(shared.metrics(), cat.EVENTS_REJECTED.name, reason="invalid_json")
    response = shared.post(raw)
    assert response.status_code == 400
    assert response.json()["error"].startswith("body: not valid JSON")
    assert sample(shared.metrics(), cat.EVENTS_REJECTED.name, reason="invalid_json") == before + 1


def test_a_rejected_batch_changes_nothing_but_the_reject_count(client: Client) -> None:
    def business(metrics: dict) -> dict:
        return {k: v for k, v in metrics.items() if k[0].startswith(BUSINESS_PREFIXES)}

    before = business(client.metrics())
    response = client.post({"events": [DOMAIN, COMPLIANCE, {**COST, "tenant": 5}]})
    assert response.status_code == 400
    after = business(client.metrics())
    rejected = (cat.EVENTS_REJECTED.name, frozenset({"reason": "schema"}.items()))
    assert after.pop(rejected) == before.pop(rejected) + 3
    assert after == before


def test_a_batch_over_the_limit_is_a_413(client: Client) -> None:
    response = client.post({"events": [DOMAIN] * 51})
    assert response.status_code == 413
    assert response.json()["error"] == "events: expected at most 50 events per batch, found 51"
    m = client.metrics()
    assert sample(m, cat.EVENTS_REJECTED.name, reason="too_many_events") == 51
    assert sample(m, cat.DOMAIN_TOKENS.name, domain="legal") == 0
    assert client.post({"events": [DOMAIN] * 50}).status_code == 200


def test_values_outside_the_allow_lists_fold_into_other(client: Client) -> None:
    events = []
    for i in range(300):
        events += [
            {**REQUEST, "tier": f"tier-{i}"},
            {**DOMAIN, "domain": f"domain-{i}"},
            {**COMPLIANCE, "rule": f"rule-{i}"},
            {**COST, "tenant": f"tenant-{i}", "product": f"product-{i}"},
        ]
    baseline = len(client.metrics())
    for start_at in range(0, len(events), 50):
        assert client.post({"events": events[start_at : start_at + 50]}).status_code == 200
    m = client.metrics()
    assert len(m) == baseline  # no new series: only values of existing ones changed
    assert sample(m, cat.GATEWAY_REQUESTS.name, tier="other") == 300
    assert sample(m, cat.DOMAIN_TOKENS.name, domain="other") == 30_000
    assert sample(m, cat.COMPLIANCE_CHECKS.name, rule="other", result="fail") == 300
    assert sample(m, cat.COST_TENANT_TOKENS.name, tenant="other") == 300 * 955
    for label in ("tier", "domain", "rule", "tenant", "product"):
        assert sample(m, cat.LABELS_FOLDED.name, label=label) == 300
    assert sample(m, cat.DOMAIN_TOKENS.name, domain="legal") == 0


def test_ingest_needs_the_bearer_token_when_one_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "s3cret")
    sidecar = start(CONFIG)
    try:
        client = Client(f"http://127.0.0.1:{sidecar.port}")
        assert client.post(DOMAIN).status_code == 401
        assert client.post(DOMAIN, Authorization="Bearer wrong").status_code == 401
        assert client.post(DOMAIN, Authorization="Bearer s3cret").status_code == 200
        assert sample(client.metrics(), cat.DOMAIN_TOKENS.name, domain="legal") == 100
    finally:
        sidecar.stop()


def test_metrics_keep_answering_during_a_flood(client: Client) -> None:
    stop = threading.Event()
    bodies = [json.dumps({"events": [REQUEST] * 50}).encode(), b"{" * 50_000, json.dumps([1] * 10_000).encode()]
    sent = [0]

    def flood(body: bytes) -> None:
        session = requests.Session()
        while not stop.is_set():
            session.post(f"{client.base}/v1/events", data=body, timeout=10)
            sent[0] += 1

    threads = [threading.Thread(target=flood, args=(b,), daemon=True) for b in bodies]
    for t in threads:
        t.start()
    try:
        slowest = 0.0
        for _ in range(10):
            began = time.monotonic()
            client.metrics()
            slowest = max(slowest, time.monotonic() - began)
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=15)
    assert sent[0] > 30  # the flood really ran alongside
    assert slowest < 2.0
    m = client.metrics()
    assert sample(m, cat.EVENTS_REJECTED.name, reason="invalid_json") > 0
    assert sample(m, cat.GATEWAY_REQUESTS.name, tier="realtime") > 0


# --- end to end: client -> sidecar -> real Prometheus -> rules -> alert --------------------


@pytest.mark.integration
def test_events_reach_prometheus_rules_and_the_compliance_alert(tmp_path: Path, monitoring_binaries: None) -> None:
    """The client's events, scraped by Prometheus 2.42 from the sidecar, drive the generated rules: the
    accuracy ratio is what was reported and one compliance failure fires the critical alert at once."""
    config = Config.model_validate({**CONFIG, "prometheus": {"scrape_interval": "1s", "evaluation_interval": "1s"}})
    sidecar = Sidecar(config)
    sidecar.start()
    base = f"http://127.0.0.1:{sidecar.port}"
    try:
        rules = {"infersight.rules.yaml": prometheus_rules_yaml(config)}
        config_file = write_prometheus_dir(tmp_path, config, [], [f"127.0.0.1:{sidecar.port}"], [], rules)
        with running_prometheus(tmp_path, config_file) as url, EventClient(base, flush_interval=0.1) as client:
            fail_series = f'{cat.COMPLIANCE_CHECKS}{{rule="pii-redaction",result="fail"}} == 0'
            wait_for_series(url, fail_series)  # scraped at 0 before the failure, so increase() sees it
            for _ in range(20):
                client.domain_tokens("legal", correct=97, total=100)
                client.compliance("pii-redaction", passed=True)
            client.compliance("pii-redaction", passed=False)
            client.request("realtime", preprocessing=0.009, allocation=0.022, postprocessing=0.011)
            assert client.flush()
            ratio = wait_for_series(url, f'{accuracy_record(config)}{{domain="legal"}}')
            assert float(ratio[0]["value"][1]) == pytest.approx(0.97)
            firing = wait_for_series(url, 'ALERTS{alertname="InfersightComplianceCheckFailed",alertstate="firing"}')
            assert [a["metric"]["rule"] for a in firing] == ["pii-redaction"]
            pending = wait_for_series(url, 'ALERTS{alertname="InfersightDomainTokenAccuracyLow"}')
            assert [(a["metric"]["domain"], a["metric"]["alertstate"]) for a in pending] == [("legal", "pending")]
            p99 = wait_for_series(url, f'{phase_quantile_record(config)}{{phase="allocation",tier="realtime"}}')
            assert 0.02 < float(p99[0]["value"][1]) <= 0.025  # inside the bucket that holds 22 ms
    finally:
        sidecar.stop()
