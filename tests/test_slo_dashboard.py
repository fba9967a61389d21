"""The SLO dashboard follows the config: a row per tier with that tier's own target lines.

The generic lint (tests/test_dashboards.py) checks every query's hygiene; the
plugin's integration test runs these panels against a real vLLM's data.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from alerts.groups.slo import BUDGET_RECORD
from dashboards import DASHBOARDS, SLO
from dashboards.common import render_json
from infersight.catalog import plugin as pl
from infersight.catalog import vllm
from infersight.config import Config, parse_config

CUSTOM = parse_config(
    {
        "slo": {
            "tiers": [
                {"name": "chat", "max_prompt_tokens": 1024, "latency_seconds": 1.0},
                {"name": "docs", "max_prompt_tokens": 8192, "latency_seconds": 4.0},
                {"name": "rag", "max_prompt_tokens": 16384, "latency_seconds": 8.0},
                {"name": "offline", "max_prompt_tokens": None, "latency_seconds": None},
            ],
            "model_latency_tier": "docs",
            "warning_factor": 1.25,
            "critical_factor": 3.0,
            "batch": {"max_queue_seconds": 900},
            "burn_rate": {"windows": [{"short": "10m", "long": "2h", "factor": 10, "severity": "critical"},
                                      {"short": "1h", "long": "12h", "factor": 2, "severity": "warning"}]},
        }
    }
)  # fmt: skip


def board(config: Config) -> dict[str, Any]:
    return json.loads(render_json(DASHBOARDS[SLO])(config))


def panels(config: Config) -> list[dict[str, Any]]:
    return board(config)["panels"]


def lines(panel: dict[str, Any]) -> list[float]:
    return [s["value"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"] if s["value"] is not None]


def exprs(panel: dict[str, Any]) -> str:
    return " ".join(t["expr"] for t in panel.get("targets", []))


def rows_and_panels(config: Config) -> dict[str, list[dict[str, Any]]]:
    """Row title -> the panels under it."""
    out: dict[str, list[dict[str, Any]]] = {}
    current = ""
    for panel in panels(config):
        if panel["type"] == "row":
            current = panel["title"]
            out[current] = []
        else:
            out[current].append(panel)
    return out


@pytest.mark.parametrize("config", [Config(), CUSTOM], ids=["defaults", "custom"])
def test_each_latency_tier_has_its_own_target_lines(config: Config) -> None:
    rows = rows_and_panels(config)
    slo = config.slo
    for tier in slo.tiers:
        (title,) = [t for t in rows if t.startswith(f"Tier {tier.name}:")]
        if tier.latency_seconds is None:
            (queue,) = [p for p in rows[title] if pl.REQUEST_QUEUE.bucket in exprs(p)]
            assert lines(queue) == [slo.batch.max_queue_seconds]
            continue
        target = tier.latency_seconds
        (p99,) = [p for p in rows[title] if p["title"].startswith("E2E")]
        assert lines(p99) == pytest.approx([target, target * slo.warning_factor, target * slo.critical_factor])
        assert f'tier="{tier.name}"' in exprs(p99)
        fallback = vllm.E2E_LATENCY.bucket in exprs(p99)
        assert fallback == (tier.name == slo.model_latency_tier), "vLLM's untiered fallback only for that tier"
        assert ("vLLM's own histograms" in p99["description"]) == fallback
        (burn,) = [p for p in rows[title] if p["title"] == "Burn rate by window"]
        assert lines(burn) == sorted(w.factor for w in slo.burn_rate.windows)
        assert {t["legendFormat"].split()[0] for t in burn["targets"]} == {
            w for pair in slo.burn_rate.windows for w in (pair.short, pair.long)
        }
        (budget,) = [p for p in rows[title] if BUDGET_RECORD in exprs(p)]
        assert slo.burn_rate.period in budget["title"]


def test_engine_panels_draw_the_alert_thresholds() -> None:
    config = parse_config({"thresholds": {"batch_efficiency": 0.7, "scheduling_cycle_seconds": 0.002}})
    rows = rows_and_panels(config)
    by_metric = {m: [p for p in rows["Engine steps"] if m in exprs(p)] for m in
                 (pl.BATCH_EFFICIENCY.sum, pl.SCHEDULER_CALL.bucket, vllm.SPEC_DECODE_DRAFTS.name)}  # fmt: skip
    assert [lines(p) for p in by_metric[pl.BATCH_EFFICIENCY.sum]] == [[0.7]]
    assert [lines(p) for p in by_metric[pl.SCHEDULER_CALL.bucket]] == [[0.002]]
    assert [lines(p) for p in by_metric[vllm.SPEC_DECODE_DRAFTS.name]] == [[config.thresholds.spec_decode_failure]]


def test_warmup_is_marked() -> None:
    (annotation,) = board(Config())["annotations"]["list"]
    assert pl.WARMUP_REMAINING.name in annotation["expr"] and annotation["datasource"]["uid"] == "${datasource}"
    requests = [p for row in rows_and_panels(Config()).values() for p in row if pl.WARMUP_REQUESTS.name in exprs(p)]
    assert len(requests) == len([t for t in Config().slo.tiers if t.latency_seconds is not None])
