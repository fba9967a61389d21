"""The generated rules: valid for Prometheus 2.42, unit-tested with promtool, following the conventions.

promtool tests in tests/promtool run against the committed
alerts/generated/infersight.rules.yaml (the default config). The checks here make
sure every alert has such a test that sees it fire, and that every alert with a
``for:`` is also seen silent while pending, within ``for`` before it fires.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts.render import alerts, prometheus_rules_yaml, rule_groups
from alerts.spec import ALERT_PREFIX
from infersight.catalog.vllm import E2E_LATENCY
from infersight.config import Config, duration_seconds, parse_config
from tests.harness.promql import metric_names
from tests.harness.promtool import PROMTOOL_TESTS, assert_ok, promtool, write_yaml

CONFIG = Config()
RENDERED = {r["alert"]: r for g in rule_groups(CONFIG) for r in g["rules"] if "alert" in r}
SEVERITIES = {"critical", "warning", "info"}


# --- promtool ----------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [{}, {"slo": {"percentile": 0.995, "latency_window": "5m", "model_latency_tier": "normal"}}],
    ids=["defaults", "custom-slo"],
)
def test_generated_rules_pass_promtool_check(tmp_path: Path, overrides: dict[str, Any]) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(prometheus_rules_yaml(parse_config(overrides)), encoding="utf-8")
    assert_ok(promtool("check", "rules", path))


def test_promtool_unit_tests_pass() -> None:
    assert PROMTOOL_TESTS, "no tests/promtool/*.test.yaml"
    assert_ok(promtool("test", "rules", *(p.name for p in PROMTOOL_TESTS), cwd=PROMTOOL_TESTS[0].parent))


@dataclass(frozen=True)
class Check:
    """One alert_rule_test entry, with the test case it belongs to."""

    file: Path
    case: int
    alertname: str
    at: float
    firing: bool


def _checks() -> list[Check]:
    out = []
    for path in PROMTOOL_TESTS:
        for i, case in enumerate(yaml.safe_load(path.read_text(encoding="utf-8")).get("tests") or []):
            out += [
                Check(path, i, t["alertname"], duration_seconds(t["eval_time"]), bool(t.get("exp_alerts")))
                for t in case.get("alert_rule_test") or []
            ]
    return out


CHECKS = _checks()


def test_promtool_tests_name_existing_alerts() -> None:
    """An alert_rule_test for a renamed alert expects nothing and passes silently: catch it here."""
    assert {c.alertname for c in CHECKS} - set(RENDERED) == set()


@pytest.mark.parametrize("alert", sorted(RENDERED))
def test_alert_is_seen_firing_by_promtool(alert: str) -> None:
    assert any(c.alertname == alert and c.firing for c in CHECKS), f"no promtool test expects {alert} to fire"


def _for_edge_tested(name: str, wait: float) -> bool:
    """A silent check and a firing check of ``name`` in one test case, at most ``wait`` seconds apart."""
    return any(
        (silent.file, silent.case) == (fire.file, fire.case) and 0 < fire.at - silent.at <= wait
        for silent in CHECKS
        if silent.alertname == name and not silent.firing
        for fire in CHECKS
        if fire.alertname == name and fire.firing
    )


def test_for_duration_is_tested_at_its_edge() -> None:
    """Each alert with ``for:`` is seen silent, then firing at most ``for`` later, in one test case.

    Firing at t means the condition held at every evaluation since t - for, so a
    silent check in that window is one where the condition held but ``for`` had not
    elapsed: the alert was pending, not firing.
    """
    missing = [
        f"{name} (for: {rule['for']})"
        for name, rule in sorted(RENDERED.items())
        if duration_seconds(rule.get("for", "0s")) > 0
        and not _for_edge_tested(name, duration_seconds(rule["for"]))
    ]
    assert not missing, f"alerts without a silent-then-firing promtool test inside their for: window: {missing}"


# --- the low-traffic guard and config-driven thresholds ------------------------


def _histogram_series(model: str, per_step: dict[str, int]) -> list[dict[str, str]]:
    """Cumulative bucket counters for one model: ``per_step`` maps le -> requests added per scrape."""
    labels = f'job="vllm",instance="{model}:8000",engine="0",model_name="{model}"'
    series = [
        {"series": f'{E2E_LATENCY.bucket}{{{labels},le="{le}"}}', "values": f"0+{n}x20"} for le, n in per_step.items()
    ]
    series.append({"series": f"{E2E_LATENCY.count}{{{labels}}}", "values": f"0+{per_step['+Inf']}x20"})
    return series


def test_latency_alerts_follow_config_and_guard_low_traffic(tmp_path: Path) -> None:
    """With warning_factor 2.4 (threshold 4.8 s) and a 5 req/s guard, only the busy slow model fires.

    busy-slow: P99 4.975 s at 6.7 req/s -> fires; busy-fast: P99 3.75 s (over the default 3 s,
    under 4.8 s) -> quiet; quiet-slow: P99 4.975 s at 1 req/s -> held by the guard.
    """
    config = parse_config({"slo": {"warning_factor": 2.4, "critical_factor": 3, "min_requests_per_second": 5}})
    rules = tmp_path / "rules.yaml"
    rules.write_text(prometheus_rules_yaml(config), encoding="utf-8")
    slow = {"2.5": 0, "5.0": 100, "+Inf": 100}
    fast = {"2.5": 98, "5.0": 100, "+Inf": 100}
    quiet = {"2.5": 0, "5.0": 15, "+Inf": 15}
    case = {
        "interval": "15s",
        "input_series": [
            *_histogram_series("busy-slow", slow),
            *_histogram_series("busy-fast", fast),
            *_histogram_series("quiet-slow", quiet),
        ],
        "promql_expr_test": [
            {
                "expr": 'ALERTS{alertname="InfersightP99LatencyWarning", alertstate="firing"}',
                "eval_time": "2m",
                "exp_samples": [
                    {
                        "labels": 'ALERTS{alertname="InfersightP99LatencyWarning", alertstate="firing", '
                        'model_name="busy-slow", severity="warning"}',
                        "value": 1,
                    }
                ],
            }
        ],
    }
    test = {"rule_files": [str(rules)], "evaluation_interval": "15s", "tests": [case]}
    assert_ok(promtool("test", "rules", write_yaml(tmp_path / "guard.test.yaml", test)))


# --- conventions -------------------------------------------------------------

# Alerts on a level signal that deliberately page without for:, and why.
FIRES_AT_ONCE = {
    "InfersightComplianceCheckFailed": "one failed compliance check is the event (target: 100% pass); the rate "
    "window of its recording rule already holds it, and business.compliance_for can add a for:",
}
_EVENT_FUNCTIONS = re.compile(r"\b(increase|changes|resets)\(")
_NOISY = re.compile(r"\b(rate|irate|histogram_quantile|deriv|delta)\(")


def needs_for(expr: str) -> bool:
    """Level signals (gauges, rates, quantiles, up, absent) flap around a threshold and need ``for:``;
    a constant (the Watchdog) or a count of discrete events (``increase(...) > 0``) does not."""
    if not metric_names(expr):
        return False
    return not (_EVENT_FUNCTIONS.search(expr) and not _NOISY.search(expr))


def test_needs_for_classification() -> None:
    assert needs_for("vllm:num_requests_waiting > 10")
    assert needs_for("rate(vllm:num_preemptions_total[2m]) > 1")
    assert needs_for('absent(up{job="vllm"})')
    assert not needs_for("vector(1)")
    assert not needs_for("increase(infersight_gpu_xid_errors_total[5m]) > 0")


@pytest.mark.parametrize("alert", sorted(RENDERED))
def test_alert_conventions(alert: str) -> None:
    rule = RENDERED[alert]
    labels, annotations = rule["labels"], rule["annotations"]
    assert re.fullmatch(rf"{ALERT_PREFIX}[A-Z][A-Za-z0-9]*", alert), "CamelCase with the shared prefix"
    assert labels.get("severity") in SEVERITIES
    assert not any("{{" in v or "$value" in v for v in labels.values()), "templated labels make a new alert per change"
    summary = annotations.get("summary", "")
    assert summary and "{{" not in summary, "summary: one static sentence"
    assert summary.endswith(".") and ". " not in summary.rstrip("."), f"summary is not one sentence: {summary!r}"
    description = annotations.get("description", "")
    assert description.strip(), "description must say what is wrong, with the values"
    for use in re.findall(r"\$value[^}]*", description):
        assert re.match(r"\$value\s*\|\s*(humanize|printf)", use), f"format $value (humanize*, printf): {use!r}"
    if needs_for(rule["expr"]) and alert not in FIRES_AT_ONCE:
        assert duration_seconds(rule.get("for", "0s")) > 0, f"{alert} flaps without for: ({rule['expr']})"


def test_fires_at_once_exceptions_name_real_alerts() -> None:
    assert set(FIRES_AT_ONCE) <= set(RENDERED)


def test_alert_names_are_unique() -> None:
    names = [a.name for a in alerts(CONFIG)]
    assert len(names) == len(set(names))


def test_recording_rules_are_named_level_metric_operation() -> None:
    records = [r["record"] for g in rule_groups(CONFIG) for r in g["rules"] if "record" in r]
    assert records
    for record in records:
        assert re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_]+:[a-zA-Z0-9_]+", record), record
