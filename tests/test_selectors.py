"""Every metric a rule, dashboard or runbook queries exists, under the name Prometheus stores.

A selector on a name nobody exposes is not an error in PromQL: it matches nothing,
so the alert never fires and the panel stays empty. Each name used must appear in
a real vLLM 0.32 scrape (tests/data) or in infersight's catalog, be a recording
rule defined in the rules, or be one of the series Prometheus itself writes.
Histogram ``le`` selectors must spell the bound as the exporter prints it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from alerts.render import rule_groups
from infersight.catalog import Metric, all_metrics
from infersight.catalog.vllm import LEGACY_NAMES, all_vllm_metrics
from infersight.config import Config
from tests.harness.promql import metric_names, promql_blocks, selectors

REPO = Path(__file__).resolve().parents[1]
SCRAPE = REPO / "tests" / "data" / "vllm-0.32.0-cpu-metrics.prom"
# Series Prometheus writes itself, per target and per alerting rule.
PROMETHEUS_SERIES = frozenset(
    {
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
        "ALERTS",
        "ALERTS_FOR_STATE",
    }
)
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s")
_LE = re.compile(r'\ble="([^"]*)"')
# How client_python prints a float bucket bound: always with a decimal point or an exponent.
_GO_FLOAT = re.compile(r"\+Inf|-?[0-9]+\.[0-9]+(e[+-][0-9]+)?|-?[0-9]+e[+-][0-9]+")


def _scrape() -> dict[str, set[str]]:
    """Series name -> the ``le`` values it has in the real scrape."""
    out: dict[str, set[str]] = {}
    for line in SCRAPE.read_text(encoding="utf-8").splitlines():
        match = _SAMPLE.match(line)
        if match:
            out.setdefault(match.group(1), set()).update(_LE.findall(match.group(2) or ""))
    return out


def _series_names(metric: Metric, name: str | None = None) -> set[str]:
    name = name or metric.name
    return {f"{name}_bucket", f"{name}_count", f"{name}_sum"} if metric.type == "histogram" else {name}


def _catalog() -> set[str]:
    names: set[str] = set()
    vllm = {m.name: m for m in all_vllm_metrics()}
    for metric in [*all_metrics(), *vllm.values()]:
        names |= _series_names(metric)
    for current, legacy in LEGACY_NAMES.items():
        names |= _series_names(vllm[current], legacy)
    return names


SCRAPED = _scrape()
CATALOG = _catalog()
RULES = rule_groups(Config())
RECORDED = {r["record"] for g in RULES for r in g["rules"] if "record" in r}
KNOWN = set(SCRAPED) | CATALOG | PROMETHEUS_SERIES | RECORDED


def unknown_names(expr: str) -> set[str]:
    return metric_names(expr) - KNOWN


def bad_le(expr: str) -> list[str]:
    """``le`` values written differently from how the metric's exporter prints them."""
    bad = []
    for sel in selectors(expr):
        printed = SCRAPED.get(sel.name)
        for value in sel.le:
            ok = value in printed if printed else _GO_FLOAT.fullmatch(value) is not None
            if not ok:
                bad.append(f'{sel.name}{{le="{value}"}}')
    return bad


def rule_exprs() -> list[tuple[str, str]]:
    return [(r.get("alert") or r["record"], r["expr"]) for g in RULES for r in g["rules"]]


def _grafana_query(query: str) -> list[str]:
    """The PromQL inside a Grafana template-variable query (``label_values(expr, label)`` ...)."""
    match = re.fullmatch(r"\s*(label_values|query_result)\((.*?)(,\s*\w+\s*)?\)\s*", query, re.DOTALL)
    if match and (match.group(1) == "query_result" or match.group(3)):
        return [match.group(2)]
    if match or re.fullmatch(r"\s*(label_names|metrics)\(.*\)\s*", query, re.DOTALL):
        return []  # label_values(label), label_names(), metrics(regex): no selector
    return [query]


def _dashboard_exprs(node: object, where: str) -> list[tuple[str, str]]:
    """Target expressions and variable queries anywhere in a dashboard JSON model."""
    out: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for target in node.get("targets") or []:
            if target.get("expr"):
                out.append((f"{where} panel {node.get('title', '?')!r}", target["expr"]))
        for var in (node.get("templating") or {}).get("list", []):
            query = var.get("query")
            query = query.get("query", "") if isinstance(query, dict) else query
            if var.get("type") == "query" and query:
                out.extend((f"{where} variable {var.get('name')!r}", q) for q in _grafana_query(query))
        for key, value in node.items():
            if key not in {"targets", "templating"}:
                out.extend(_dashboard_exprs(value, where))
    elif isinstance(node, list):
        for item in node:
            out.extend(_dashboard_exprs(item, where))
    return out


DASHBOARD_FILES = sorted((REPO / "dashboards" / "generated").glob("*.json"))
RUNBOOKS = sorted(p for p in (REPO / "runbooks").glob("*.md") if p.name != "README.md")


def dashboard_exprs(path: Path) -> list[tuple[str, str]]:
    return _dashboard_exprs(json.loads(path.read_text(encoding="utf-8")), path.name)


def runbook_exprs() -> list[tuple[str, str]]:
    return [(page.name, q) for page in RUNBOOKS for q in promql_blocks(page)]


def _problems(exprs: list[tuple[str, str]]) -> list[str]:
    problems = []
    for where, expr in exprs:
        problems += [f"{where}: unknown metric {name}" for name in sorted(unknown_names(expr))]
        problems += [f"{where}: {le} is not how the exporter prints the bound" for le in bad_le(expr)]
    return problems


# --- the extractor itself ----------------------------------------------------

TRICKY = [
    (
        'histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket{le="120.0", '
        'model_name=~"a|b"}[5m] offset 1h)))',
        {"vllm:e2e_request_latency_seconds_bucket"},
    ),
    ("sum(rate(a_total[5m])) by (instance) / ignoring(engine) group_left(tier) b", {"a_total", "b"}),
    ('a and on (model_name) b > bool 3 or vector(1) unless absent(up{job="vllm"})', {"a", "b", "up"}),
    ('label_replace(up, "vllm:fake", "$1", "instance", "(.*):.*")', {"up"}),
    ("count_values(`not:a_metric`, x) + topk(5, y) - scalar(z) * time()", {"x", "y", "z"}),
    ('{__name__="vllm:num_requests_waiting", job="vllm"} > 1e3', {"vllm:num_requests_waiting"}),
    ("max_over_time(x[10m:1m]) > Inf or -NaN < y offset 1h30m", {"x", "y"}),
    ("rate(x[$__rate_interval]) * ${factor} + $k", {"x"}),
    ("SUM BY (model_name) (x) AND ON () y @ end()", {"x", "y"}),
    ("0x1F + .5 + 5e-3 # a comment naming not_a_metric\n + w", {"w"}),
    ('sum without (le) (x{le!="+Inf", instance=~"$instance"})', {"x"}),
    ('quantile(0.9, m) / count(n) by (group_left_label) * min(o) without (bool_label)', {"m", "n", "o"}),
]


@pytest.mark.parametrize(("expr", "names"), TRICKY)
def test_extractor_finds_exactly_the_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_extractor_reports_le_values_from_equality_matchers_only() -> None:
    found = selectors('x_bucket{le="120.0"} + x_bucket{le!="+Inf"} + x_bucket{le=~"1.*"} + y{le="2"}')
    assert [(s.name, s.le) for s in found] == [
        ("x_bucket", ("120.0",)),
        ("x_bucket", ("+Inf",)),
        ("x_bucket", ()),
        ("y", ("2",)),
    ]


@pytest.mark.parametrize("expr", ["sum(x", "x)", 'x{le="1"', "x{le=1}", "x ! y"])
def test_extractor_rejects_what_it_cannot_read(expr: str) -> None:
    with pytest.raises(ValueError):
        selectors(expr)


def test_wrong_names_and_bounds_are_caught() -> None:
    """The mistakes peer rule sets ship: a counter without ``_total``, ``le="120"``."""
    assert unknown_names("rate(vllm:num_preemptions[5m]) > 0") == {"vllm:num_preemptions"}
    assert unknown_names("rate(vllm:num_preemptions_total[5m]) > 0") == set()
    assert unknown_names("vllm:e2e_request_latency_seconds") == {"vllm:e2e_request_latency_seconds"}
    assert bad_le('vllm:e2e_request_latency_seconds_bucket{le="120"}') == [
        'vllm:e2e_request_latency_seconds_bucket{le="120"}'
    ]
    assert bad_le('vllm:e2e_request_latency_seconds_bucket{le="120.0"}') == []
    assert bad_le('vllm:e2e_request_latency_seconds_bucket{le="121.0"}') != []  # not a bucket vLLM has
    assert bad_le('infersight_never_scraped_bucket{le="1"}') != []
    assert bad_le('infersight_never_scraped_bucket{le="0.005"}') == []


# --- the real sources --------------------------------------------------------


def test_rule_selectors_exist() -> None:
    exprs = rule_exprs()
    assert len(exprs) >= 10, "expected the rule groups to render"
    problems = _problems(exprs)
    assert not problems, "\n".join(problems)


def test_recording_rules_are_used_under_their_own_names() -> None:
    """Recording-rule names count as known only because the rules define them: each one is used."""
    used = set().union(*(metric_names(expr) for _, expr in rule_exprs()))
    assert used & RECORDED, "the alerts read no recording rule"


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=[p.name for p in DASHBOARD_FILES])
def test_dashboard_selectors_exist(path: Path) -> None:
    exprs = dashboard_exprs(path)
    assert exprs, f"{path.name}: no target expressions found (has the JSON model changed shape?)"
    problems = _problems(exprs)
    assert not problems, "\n".join(problems)


def test_dashboard_walker_reads_targets_and_variables() -> None:
    model = {
        "panels": [
            {"type": "row", "panels": [{"title": "p", "targets": [{"expr": "rate(a_total[5m])"}]}]},
            {"title": "q", "targets": [{"expr": "b"}, {"refId": "B"}]},
        ],
        "templating": {
            "list": [
                {"type": "query", "name": "model", "query": {"query": "label_values(c{job='x'}, model_name)"}},
                {"type": "query", "name": "inst", "query": "label_values(instance)"},
                {"type": "query", "name": "r", "query": "query_result(topk(3, d))"},
                {"type": "datasource", "name": "datasource", "query": "prometheus"},
            ]
        },
    }
    found = _dashboard_exprs(model, "t.json")
    assert sorted(set().union(*(metric_names(e) for _, e in found))) == ["a_total", "b", "c", "d"]


def test_runbook_selectors_exist() -> None:
    exprs = runbook_exprs()
    assert exprs, "the runbooks hold no ```promql blocks"
    problems = _problems(exprs)
    assert not problems, "\n".join(problems)


def test_vllm_catalog_names_are_real() -> None:
    """The catalog is a source of truth above, so its vLLM names must match a real server.
    Speculative-decoding series appear only with speculative decoding enabled."""
    missing = [
        name
        for m in all_vllm_metrics()
        if not m.name.startswith("vllm:spec_decode_")
        for name in sorted(_series_names(m))
        if name not in SCRAPED
    ]
    assert not missing, f"catalog names absent from the real vLLM scrape: {missing}"
