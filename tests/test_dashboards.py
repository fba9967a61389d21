"""Lint of every generated dashboard, plus the overview's config-driven thresholds.

The lint reads ``dashboards/generated/*.json`` generically, so a new dashboard is
checked without touching this file: panel types and units, datasource objects,
template variables, stable uid and ids, and PromQL hygiene (known metric names,
counters only inside rate()/increase() over ``$__rate_interval``, histogram buckets
only inside histogram_quantile()). The integration test runs every panel query
against a real Prometheus scraping a real vLLM /metrics page.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from alerts.render import rule_groups
from dashboards import DASHBOARDS, OVERVIEW
from dashboards.common import DATASOURCE, render_json, stat, steps, timeseries
from infersight.catalog import Metric, all_metrics, vllm
from infersight.catalog import exporter as ex
from infersight.config import Config
from tests.harness.monitoring import api, running_prometheus, wait_for_series, write_prometheus_dir
from tests.harness.promql import selectors
from tests.harness.scrape_server import REAL_SCRAPE, ScrapeServer, Script

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "dashboards" / "generated"
FILES = sorted(GENERATED.glob("*.json"))
PANEL_TYPES = {"timeseries", "stat", "row"}
CATALOG: dict[str, Metric] = {m.name: m for m in [*vllm.all_vllm_metrics(), *all_metrics()]}
PROMETHEUS_BUILTINS = {"up"}
# Recording rules: panels show the very numbers the alerts judge (level:metric:operation names).
RECORDED = {r["record"] for g in rule_groups(Config()) for r in g["rules"] if "record" in r}
HISTOGRAM_SERIES = ("_bucket", "_count", "_sum")


# --- the PromQL lint ---------------------------------------------------------------------


def _histogram_part(name: str) -> str | None:
    """``_bucket``/``_count``/``_sum`` when ``name`` is that series of a catalog histogram."""
    for suffix in HISTOGRAM_SERIES:
        base = CATALOG.get(name.removesuffix(suffix))
        if name.endswith(suffix) and base is not None and base.type == "histogram":
            return suffix
    return None


def problems(expr: str) -> list[str]:
    """Everything wrong with one panel query; empty when it is clean."""
    found = []
    for use in selectors(expr):
        if use.name in RECORDED:
            if "model_name" in use.name.split(":")[0] and not use.matches("model_name", "=~", "$model"):
                found.append(f'{use.name}: aggregated by model_name, so the selector must honour model_name=~"$model"')
            continue
        part = _histogram_part(use.name)
        metric = CATALOG.get(use.name)
        if metric is None and part is None and use.name not in PROMETHEUS_BUILTINS:
            found.append(f"{use.name}: not in infersight.catalog (type metric names from the catalog)")
            continue
        if metric is not None and metric.type == "histogram":
            found.append(f"{use.name}: a histogram family has no series of its own; use _bucket/_count/_sum")
        counter = part is not None or use.name.endswith("_total") or (metric is not None and metric.type == "counter")
        if counter and (not use.calls or use.calls[-1] not in {"rate", "increase"}):
            found.append(f"{use.name}: a counter must sit directly inside rate() or increase()")
        if counter and use.range != "[$__rate_interval]":
            found.append(f"{use.name}: counter range must be [$__rate_interval], found {use.range}")
        if part == "_bucket" and "histogram_quantile" not in use.calls:
            found.append(f"{use.name}: histogram buckets belong inside histogram_quantile(rate(...))")
        family = CATALOG.get(use.name.removesuffix(part)) if part else metric
        if family is not None and "model_name" in family.labels and not use.matches("model_name", "=~", "$model"):
            found.append(f'{use.name}: has model_name, so the selector must honour model_name=~"$model"')
    return found


# --- reading dashboards ---------------------------------------------------------------------


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def all_panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in board["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))  # collapsed rows nest their panels
    return out


def queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in all_panels(board) for t in p.get("targets", [])]


def threshold_values(panel: dict[str, Any]) -> list[float]:
    return [s["value"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"] if s["value"] is not None]


def panels_using(board: dict[str, Any], series: str) -> list[dict[str, Any]]:
    return [p for p in all_panels(board) if any(series in t["expr"] for t in p.get("targets", []))]


def overview(config: Config) -> dict[str, Any]:
    return json.loads(render_json(DASHBOARDS[OVERVIEW])(config))


ids = pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])


# --- the lint, on every generated file ---------------------------------------------------------


def test_generated_files_are_the_dashboard_table() -> None:
    assert {p.name for p in FILES} == {f"{uid}.json" for uid in DASHBOARDS}, (
        "dashboards/generated/ differs from dashboards.DASHBOARDS; run `infersight generate` "
        "and delete files of dashboards no longer in the table"
    )


@ids
def test_uid_is_the_file_name(path: Path) -> None:
    assert load(path)["uid"] == path.stem


@ids
def test_panel_types_and_units(path: Path) -> None:
    for panel in all_panels(load(path)):
        assert panel["type"] in PANEL_TYPES, f"{panel['title']}: type {panel['type']}"
        if panel["type"] != "row":
            assert panel["fieldConfig"]["defaults"].get("unit"), f"{panel['title']}: no unit"
            assert panel["targets"], f"{panel['title']}: no query"


def _string_datasources(node: Any, where: str = "") -> list[str]:
    if isinstance(node, dict):
        found = [where] if isinstance(node.get("datasource"), str) else []
        return found + [x for k, v in node.items() for x in _string_datasources(v, f"{where}/{k}")]
    if isinstance(node, list):
        return [x for i, v in enumerate(node) for x in _string_datasources(v, f"{where}[{i}]")]
    return []


@ids
def test_datasources_are_objects_bound_to_the_variable(path: Path) -> None:
    board = load(path)
    assert _string_datasources(board) == []
    for panel in all_panels(board):
        if panel["type"] != "row":
            assert panel["datasource"] == DATASOURCE, panel["title"]
            for target in panel["targets"]:
                assert target["datasource"] == DATASOURCE, f"{panel['title']} {target['refId']}"


@ids
def test_template_variables(path: Path) -> None:
    variables = {v["name"]: v for v in load(path)["templating"]["list"]}
    assert {"datasource", "model", "instance"} <= set(variables)
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("model", "instance"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"] == DATASOURCE
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"


@ids
def test_panel_ids_unique_and_grid_without_overlap(path: Path) -> None:
    panels = all_panels(load(path))
    panel_ids = [p["id"] for p in panels]
    assert len(panel_ids) == len(set(panel_ids)), "duplicate panel ids"
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, f"{panel['title']}: {pos}"
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


@ids
def test_queries_are_clean(path: Path) -> None:
    found = [f"{title}: {p}" for title, expr in queries(load(path)) for p in problems(expr)]
    assert found == []


@ids
def test_json_is_canonical(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"


# --- the lint catches what it should --------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "complaint"),
    [
        ('vllm:num_preemptions_total{model_name=~"$model"}', "directly inside rate()"),
        ('rate(vllm:num_preemptions_total{model_name=~"$model"}[5m])', "[$__rate_interval]"),
        ('sum(vllm:iteration_tokens_total_count{model_name=~"$model"})', "directly inside rate()"),
        ('rate(vllm:e2e_request_latency_seconds_bucket{model_name=~"$model"}[$__rate_interval])', "histogram_quantile"),
        ('vllm:num_preemptions{model_name=~"$model"}', "not in infersight.catalog"),
        ('vllm:e2e_request_latency_seconds{model_name=~"$model"}', "histogram family"),
        ("vllm:num_requests_waiting", 'model_name=~"$model"'),
        ('sum by (model_name) (vllm:num_requests_waiting{model_name="x"})', 'model_name=~"$model"'),
    ],
)
def test_lint_rejects(expr: str, complaint: str) -> None:
    assert any(complaint in p for p in problems(expr)), problems(expr)


@pytest.mark.parametrize(
    "expr",
    [
        'histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket'
        '{model_name=~"$model"}[$__rate_interval])))',
        'sum by (model_name) (increase(vllm:num_preemptions_total{model_name=~"$model"}[$__rate_interval]))',
        'up{job="vllm"} == 0 or absent(up{job="vllm"})',
        f'{ex.VLLM_UP} * on (target) group_left {ex.VLLM_SCRAPE_DURATION}',
    ],
)
def test_lint_accepts(expr: str) -> None:
    assert problems(expr) == []


# --- the overview follows the config --------------------------------------------------------


def _latency_lines(config: Config) -> set[float]:
    slo = config.slo
    target = slo.tier(slo.model_latency_tier).latency_seconds
    assert target is not None
    return {target, target * slo.warning_factor, target * slo.critical_factor}


@pytest.mark.parametrize(
    "config",
    [
        Config(),
        Config.model_validate(
            {
                "slo": {"percentile": 0.95, "warning_factor": 1.2, "critical_factor": 3.0},
                "thresholds": {"kv_cache_usage": 0.7, "batch_efficiency": 0.6},
            }
        ),
    ],
    ids=["defaults", "custom"],
)
def test_overview_thresholds_come_from_the_config(config: Config) -> None:
    board = overview(config)
    kv = panels_using(board, ex.VLLM_KV_CACHE_USAGE.name)
    assert kv and all(threshold_values(p) == [config.thresholds.kv_cache_usage] for p in kv)
    p_tail = f"histogram_quantile({config.slo.percentile:g}, sum by (le, model_name) (rate({vllm.E2E_LATENCY.bucket}"
    latency = panels_using(board, p_tail)
    assert latency, f"no panel shows the {config.slo.percentile} quantile of e2e latency"
    assert all(set(threshold_values(p)) == _latency_lines(config) for p in latency)
    efficiency = panels_using(board, ex.VLLM_BATCH_EFFICIENCY.name)
    assert [threshold_values(p) for p in efficiency] == [[config.thresholds.batch_efficiency]]


def test_committed_overview_uses_the_default_thresholds() -> None:
    board = load(GENERATED / f"{OVERVIEW}.json")
    assert {v for p in panels_using(board, ex.VLLM_KV_CACHE_USAGE.name) for v in threshold_values(p)} == {0.8}
    p99 = panels_using(board, f"histogram_quantile(0.99, sum by (le, model_name) (rate({vllm.E2E_LATENCY.bucket}")
    assert p99 and all(set(threshold_values(p)) == {2.0, 3.0, 4.0} for p in p99)


def test_rendering_is_deterministic() -> None:
    render = render_json(DASHBOARDS[OVERVIEW])
    assert render(Config()) == render(Config())


def test_builders_refuse_bad_panels() -> None:
    with pytest.raises(ValueError, match="unit is required"):
        timeseries("x", "d", [("up", "")], "")
    with pytest.raises(ValueError, match="unit is required"):
        stat("x", "d", [("up", "")], "")
    with pytest.raises(ValueError, match="must increase"):
        steps("green", (0.9, "red"), (0.8, "orange"))


def test_render_refuses_a_uid_the_table_does_not_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DASHBOARDS, "some-other-uid", DASHBOARDS.pop(OVERVIEW))
    with pytest.raises(ValueError, match="the table says"):
        render_json("dashboards.overview")(Config())


# --- every query against a real Prometheus holding a real vLLM scrape -------------------------


def _concrete(expr: str) -> str:
    """A panel query as Grafana sends it, variables expanded (All -> .*)."""
    return expr.replace("$__rate_interval", "10s").replace("$model", ".*").replace("$instance", ".*")


@pytest.mark.integration
def test_every_query_runs_on_real_prometheus(tmp_path: Path) -> None:
    """Every panel query parses; those on vLLM's own series return data from a real 0.32 scrape."""
    config = Config.model_validate({"prometheus": {"scrape_interval": "1s", "evaluation_interval": "1s"}})
    with ScrapeServer() as server:
        server.scripts["/metrics"] = Script(body=REAL_SCRAPE.read_bytes())
        address = urllib.parse.urlsplit(server.url("/metrics")).netloc
        config_file = write_prometheus_dir(tmp_path, config, [address], [], [])
        with running_prometheus(tmp_path, config_file) as url:
            wait_for_series(url, f"count_over_time({vllm.NUM_REQUESTS_RUNNING}[1m]) >= 3")
            empty = []
            for path in FILES:
                for title, expr in queries(load(path)):
                    result = api(url, "/api/v1/query", query=_concrete(expr))["result"]
                    names = [u.name for u in selectors(expr)]
                    # Speculative-decoding series exist only on servers started with --speculative-config.
                    spec = any(n.startswith("vllm:spec_decode_") for n in names)
                    if not result and not spec and all(n.startswith("vllm:") for n in names):
                        empty.append(f"{path.name} {title}: {expr}")
            assert empty == []
