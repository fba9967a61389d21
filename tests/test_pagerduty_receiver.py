"""The local PagerDuty Events v2 receiver over real HTTP, and a real Alertmanager paging it."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path

import pytest
import requests

from alerts.render import dashboard_url, runbook_url
from dashboards import OVERVIEW
from infersight.config import Config, parse_config
from infersight.deploy import alertmanager_config
from infersight.process import ManagedProcess, find_binary, free_port, http_ok
from infersight.stack import ALERTMANAGER_BINARIES, alertmanager_command
from infersight.testing.pagerduty import MAX_SUMMARY, LocalPager, format_page

KEY = "0123456789abcdef0123456789abcdef"
TRIGGER = {
    "routing_key": KEY,
    "event_action": "trigger",
    "dedup_key": "srv01/mysql",
    "payload": {
        "summary": "DISK at 99% on machine prod-datapipe03.example.com",
        "timestamp": "2015-07-17T08:42:58.315+0000",
        "severity": "critical",
        "source": "prod-datapipe03.example.com",
        "component": "mysql",
        "group": "prod-datapipe",
        "class": "disk",
        "custom_details": {"free space": "1%", "load avg": 0.75},
    },
    "client": "Sample Monitoring Service",
    "client_url": "https://monitoring.example.com",
    "links": [{"href": "https://example.com/runbook", "text": "Runbook"}],
    "images": [{"src": "https://example.com/chart.png", "href": "https://example.com/", "alt": "chart"}],
}


def post(pager: LocalPager, body: object, path: str = "/v2/enqueue") -> requests.Response:
    return requests.post(pager.url + path, json=body, timeout=5)


def changed(path: str, value: object) -> dict:
    """TRIGGER with one dotted field set (``value is None`` deletes it)."""
    event = copy.deepcopy(TRIGGER)
    *parents, last = path.split(".")
    target = event
    for part in parents:
        target = target[part]
    if value is None:
        del target[last]
    else:
        target[last] = value
    return event


def test_valid_trigger_is_accepted_and_recorded(local_pager: LocalPager) -> None:
    response = post(local_pager, TRIGGER)
    assert response.status_code == 202
    assert response.json() == {"status": "success", "message": "Event processed", "dedup_key": "srv01/mysql"}
    received = local_pager.events.wait_for(lambda e: e["dedup_key"] == "srv01/mysql", timeout=1)
    assert received.body["payload"]["custom_details"] == {"free space": "1%", "load avg": 0.75}


def test_trigger_without_dedup_key_gets_a_fresh_one(local_pager: LocalPager) -> None:
    keys = {post(local_pager, changed("dedup_key", None)).json()["dedup_key"] for _ in range(2)}
    assert len(keys) == 2 and all(len(k) == 32 for k in keys)
    assert {e.body["dedup_key"] for e in local_pager.events.items()} == keys


@pytest.mark.parametrize("action", ["acknowledge", "resolve"])
def test_acknowledge_and_resolve_need_only_the_dedup_key(local_pager: LocalPager, action: str) -> None:
    ok = post(local_pager, {"routing_key": KEY, "event_action": action, "dedup_key": "srv01/mysql"})
    assert ok.status_code == 202, ok.text
    missing = post(local_pager, {"routing_key": KEY, "event_action": action})
    assert missing.status_code == 400
    assert any("dedup_key" in e for e in missing.json()["errors"])
    assert [e.body["event_action"] for e in local_pager.events.items()] == [action]


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("routing_key", "short", "Length of 'routing_key' is incorrect (should be 32 characters)"),
        ("routing_key", None, "'routing_key' is missing or blank"),
        ("event_action", "page", "'event_action' is invalid"),
        ("dedup_key", "k" * 256, "Length of 'dedup_key' is too long"),
        ("payload", None, "'payload' is missing or not an object"),
        ("payload.summary", None, "'payload.summary' is missing or blank"),
        ("payload.summary", "x" * (MAX_SUMMARY + 1), "Length of 'payload.summary' is too long"),
        ("payload.source", "  ", "'payload.source' is missing or blank"),
        ("payload.severity", "fatal", "'payload.severity' is invalid"),
        ("payload.timestamp", "yesterday", "'payload.timestamp' is not an ISO 8601 date-time"),
        ("payload.custom_details", "text", "'payload.custom_details' must be an object"),
        ("payload.class", 3, "'payload.class' must be a string"),
        ("links", [{"text": "no href"}], "'links[0].href' is missing or blank"),
        ("links", {"href": "x"}, "'links' must be an array"),
        ("images", [{"href": "https://example.com"}], "'images[0].src' is missing or blank"),
        ("client_url", 7, "'client_url' must be a string"),
    ],
)
def test_invalid_events_are_rejected_with_the_reason(local_pager: LocalPager, field: str, value: object,
                                                     error: str) -> None:
    response = post(local_pager, changed(field, value))
    assert response.status_code == 400
    body = response.json()
    assert body["status"] == "invalid event" and body["message"] == "Event object is invalid"
    assert any(e.startswith(error) for e in body["errors"]), body["errors"]
    assert local_pager.events.items() == []


def test_summary_at_the_limit_and_every_severity_are_accepted(local_pager: LocalPager) -> None:
    for severity in ("critical", "error", "warning", "info"):
        event = changed("payload.severity", severity)
        event["payload"]["summary"] = "x" * MAX_SUMMARY
        assert post(local_pager, event).status_code == 202
    assert len(local_pager.events.items()) == 4


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b""])
def test_a_body_that_is_not_a_json_object_is_unrecognized(local_pager: LocalPager, body: bytes) -> None:
    response = requests.post(local_pager.enqueue_url, data=body, timeout=5,
                             headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json() == {
        "status": "Unrecognized object",
        "message": "Event object format is unrecognized",
        "errors": ["JSON parse error"],
    }


def test_oversized_bodies_and_unknown_paths_are_refused(local_pager: LocalPager) -> None:
    huge = changed("payload.custom_details", {"blob": "x" * 600_000})
    assert post(local_pager, huge).status_code == 413
    assert post(local_pager, TRIGGER, path="/v1/enqueue").status_code == 404
    assert local_pager.events.items() == []


def test_webhook_receiver_and_snapshot(local_pager: LocalPager) -> None:
    alert = {"status": "firing", "labels": {"alertname": "InfersightQueueBacklog", "severity": "warning"}}
    assert post(local_pager, {"version": "4", "status": "firing", "alerts": [alert]}, "/alerts").status_code == 200
    assert post(local_pager, {"alerts": "nope"}, "/alerts").status_code == 400
    post(local_pager, TRIGGER)
    snapshot = requests.get(local_pager.url + "/events", timeout=5).json()
    assert [w["body"]["alerts"][0]["labels"]["alertname"] for w in snapshot["webhooks"]] == ["InfersightQueueBacklog"]
    assert [p["body"]["dedup_key"] for p in snapshot["pagerduty"]] == ["srv01/mysql"]


def test_wait_for_times_out_when_nothing_matches(local_pager: LocalPager) -> None:
    post(local_pager, TRIGGER)
    with pytest.raises(TimeoutError, match="1 received"):
        local_pager.events.wait_for(lambda e: e["event_action"] == "resolve", timeout=0.2)


def test_format_page_shows_summary_and_links() -> None:
    text = format_page(TRIGGER)
    assert text.startswith("[TRIGGER critical] DISK at 99%")
    assert "Runbook: https://example.com/runbook" in text


# ---- a real Alertmanager sending to the receiver ----


@pytest.fixture
def alertmanager(monitoring_binaries: None, local_pager: LocalPager, tmp_path: Path):
    """Alertmanager 0.25 routing critical -> PagerDuty (the receiver), warning -> webhook, 1 s grouping."""
    key_file = tmp_path / "routing_key"
    key_file.write_text(KEY + "\n")
    config = parse_config({
        "alerting": {
            "pagerduty": {"url": local_pager.enqueue_url, "routing_key_file": str(key_file)},
            "warning_webhook_url": local_pager.webhook_url,
            "group_wait": "1s", "group_interval": "1s",
        }
    })
    (tmp_path / "am.yml").write_text(alertmanager_config(config))
    port = free_port()
    argv = alertmanager_command(find_binary(*ALERTMANAGER_BINARIES), tmp_path / "am.yml", tmp_path / "data", port)
    process = ManagedProcess("alertmanager", argv, tmp_path / "am.log").start()
    url = f"http://127.0.0.1:{port}"
    try:
        process.wait_ready(lambda: http_ok(url + "/-/ready"), timeout=30)
        yield url, config
    finally:
        process.stop()


def _am_alert(
    config: Config, name: str, severity: str, model: str = "tiny", ends_at: dt.datetime | None = None
) -> dict:
    now = dt.datetime.now(dt.timezone.utc)
    alert = {
        "labels": {"alertname": name, "severity": severity, "model_name": model},
        "annotations": {
            "summary": f"{name} summary.",
            "description": f"{name} description.",
            "action": "degrade to the fallback service",
            "runbook_url": runbook_url(config, name),
            "dashboard_url": dashboard_url(config, OVERVIEW),
        },
        "startsAt": (now - dt.timedelta(seconds=5)).isoformat(),
    }
    if ends_at is not None:
        alert["endsAt"] = ends_at.isoformat()
    return alert


@pytest.mark.integration
def test_real_alertmanager_pages_the_receiver(alertmanager, local_pager: LocalPager) -> None:
    url, config = alertmanager
    alerts = [_am_alert(config, "InfersightTestCritical", "critical"),
              _am_alert(config, "InfersightTestWarning", "warning", model="other")]  # not inhibited
    assert requests.post(url + "/api/v2/alerts", json=alerts, timeout=5).status_code == 200

    page = local_pager.events.wait_for(lambda e: e["event_action"] == "trigger", timeout=20).body
    assert page["routing_key"] == KEY
    assert page["payload"]["severity"] == "critical"
    assert page["payload"]["summary"] == "InfersightTestCritical summary."
    assert page["payload"]["custom_details"]["action"] == "degrade to the fallback service"
    assert page["payload"]["custom_details"]["model"] == "tiny"
    assert {link["text"]: link["href"] for link in page["links"]} == {
        "Runbook": runbook_url(config, "InfersightTestCritical"),
        "Dashboard": dashboard_url(config, OVERVIEW),
    }
    warning = local_pager.webhooks.wait_for(lambda b: b["status"] == "firing", timeout=20).body
    assert [a["labels"]["alertname"] for a in warning["alerts"]] == ["InfersightTestWarning"]
    assert len(local_pager.events.items()) == 1, "the warning must not page"

    resolved = [_am_alert(config, "InfersightTestCritical", "critical", ends_at=dt.datetime.now(dt.timezone.utc))]
    assert requests.post(url + "/api/v2/alerts", json=resolved, timeout=5).status_code == 200
    resolve = local_pager.events.wait_for(lambda e: e["event_action"] == "resolve", timeout=20).body
    assert resolve["dedup_key"] == page["dedup_key"]
