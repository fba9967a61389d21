"""Per-tier latency SLOs: attainment, error budget, burn rates, P99 against the target, where the time goes.

One row per latency tier, each with its own target lines (target, warning and
critical multiples), then the asynchronous tier's backlog, then the engine-step
signals the plugin measures. The SLI panels read the same recording rules the
burn-rate alerts read. Warm-up is marked by an annotation and by its own series.

Without the infersight plugin in vLLM the recording rules fall back to vLLM's own
e2e histogram (no tiers, warm-up counted): only the ``slo.model_latency_tier``
row fills, from vLLM's series, and the panel descriptions say so.
"""

from __future__ import annotations

import attr
from grafanalib.core import Annotations, Dashboard, Panel

from alerts.groups.slo import BUDGET_RECORD, errors_record, windows
from dashboards import SLO
from dashboards.common import (
    DATASOURCE,
    MODEL,
    above,
    below,
    dashboard,
    percentile_label,
    quantile,
    rate,
    row,
    sel,
    stat,
    steps,
    timeseries,
    variables,
)
from infersight.catalog import Metric, vllm
from infersight.catalog import plugin as pl
from infersight.config import Config, Tier

BY_TIER = "{{model_name}} {{tier}}"
BY_ENGINE = "{{model_name}} {{instance}} engine {{engine}}"
ENGINE = ("instance", "model_name", "engine")
FALLBACK_NOTE = (
    " Without the infersight plugin this {what} comes from vLLM's own histograms, which know no tiers: all "
    "requests, warm-up included, judged against this tier's target."
)
NEEDS_PLUGIN = " Needs the infersight plugin in vLLM; empty without it."


def _tier(name: str) -> str:
    return f'tier="{name}"'


def _burn_lines(config: Config) -> list[dict[str, object]]:
    """A line at every configured burn factor: orange for ticket pairs, red for paging ones."""
    pairs = config.slo.burn_rate.windows
    return steps("green", *sorted({(p.factor, "red" if p.severity == "critical" else "orange") for p in pairs}))


def _target_lines(config: Config, target: float) -> list[dict[str, object]]:
    slo = config.slo
    return steps(
        "green", (target, "yellow"), (target * slo.warning_factor, "orange"), (target * slo.critical_factor, "red")
    )


def _with_fallback(config: Config, tier: Tier, plugin_expr: str, vllm_expr: str) -> str:
    """The plugin's expression, or vLLM's untiered one where the plugin is absent (model-latency tier only)."""
    if tier.name != config.slo.model_latency_tier:
        return plugin_expr
    return f"{plugin_expr} or on (model_name) {vllm_expr}"


def _tier_panels(config: Config, tier: Tier) -> list[Panel]:
    slo = config.slo
    target = tier.latency_seconds
    assert target is not None  # called for latency tiers only
    p = slo.percentile
    pct = percentile_label(p)
    budget = 1 - slo.objective
    is_model_tier = tier.name == slo.model_latency_tier
    note = FALLBACK_NOTE if is_model_tier else NEEDS_PLUGIN
    longest = windows(config)[-1]
    by_tier = ("model_name", "tier")
    prompts = f"prompts up to {tier.max_prompt_tokens} tokens" if tier.max_prompt_tokens else "the longest prompts"
    phase_queries = [
        (
            _with_fallback(config, tier, quantile(p, plugin, MODEL, _tier(tier.name), by=by_tier),
                           quantile(p, fallback, MODEL)),
            f"{phase} {BY_TIER}",
        )
        for phase, plugin, fallback in (
            ("queue", pl.REQUEST_QUEUE, vllm.QUEUE_TIME),
            ("prefill", pl.REQUEST_PREFILL, vllm.PREFILL_TIME),
            ("decode", pl.REQUEST_DECODE, vllm.DECODE_TIME),
            ("TTFT", pl.REQUEST_TTFT, vllm.TTFT),
        )
    ]  # fmt: skip
    return [
        row(f"Tier {tier.name}: {target:g}s target, {prompts}"),
        stat(
            f"Attainment ({longest})",
            f"Share of {tier.name} requests within {target:g}s over {longest} (engine errors count as misses); "
            f"red under the {slo.objective:.2%} objective." + note.format(what="figure"),
            [(f"1 - {sel(errors_record(longest), MODEL, _tier(tier.name))}", "{{model_name}}")],
            "percentunit", thresholds=below(slo.objective), width=4,
        ),
        stat(
            f"Error budget left ({slo.burn_rate.period})",
            f"Share of the {slo.burn_rate.period} error budget ({budget:.2%} of requests may miss) not yet spent; "
            "negative once the SLO is broken." + note.format(what="figure"),
            [(sel(BUDGET_RECORD, MODEL, _tier(tier.name)), "{{model_name}}")],
            "percentunit", thresholds=below(0.0), width=4,
        ),
        timeseries(
            "Burn rate by window",
            "Missed share over each alert window divided by the budget rate: 1 spends the budget exactly over the "
            "period. Lines at the alert factors (orange: ticket, red: page); a condition needs both its windows "
            "above its factor." + note.format(what="series"),
            [(f"{sel(errors_record(w), MODEL, _tier(tier.name))} / {budget:g}", f"{w} {{{{model_name}}}}")
             for w in windows(config)],
            "none", thresholds=_burn_lines(config), width=16,
        ),
        timeseries(
            f"E2E {pct} vs SLO",
            f"End-to-end {pct} of {tier.name} requests, warm-up excluded. The target, x{slo.warning_factor:g} and "
            f"x{slo.critical_factor:g} are bucket bounds of the plugin's histogram, so crossing a line is exact."
            + note.format(what="series"),
            [(_with_fallback(config, tier, quantile(p, pl.REQUEST_E2E, MODEL, _tier(tier.name), by=by_tier),
                             quantile(p, vllm.E2E_LATENCY, MODEL)), BY_TIER)],
            "s", thresholds=_target_lines(config, target),
        ),
        timeseries(
            f"Where the time goes ({pct} per phase)",
            "Queue (waiting for a batch slot: capacity), prefill (prompt length, prefix-cache misses), decode "
            "(tokens out x time per token), and time to first token." + note.format(what="series"),
            phase_queries, "s", thresholds=_target_lines(config, target),
        ),
        timeseries(
            "Requests/s and warm-up",
            "Finished requests counted by the SLI, engine errors, and warm-up requests (the first "
            f"{slo.warmup_requests} after each start, kept out of the SLI)." + NEEDS_PLUGIN,
            [
                (f"sum by (model_name) ({rate(pl.REQUEST_E2E.count, MODEL, _tier(tier.name))})", "SLI {{model_name}}"),
                (f"sum by (model_name) ({rate(pl.REQUESTS_FAILED, MODEL, _tier(tier.name))})", "errors {{model_name}}"),
                (f"sum by (model_name) ({rate(pl.WARMUP_REQUESTS, MODEL, _tier(tier.name))})",
                 "warm-up {{model_name}}"),
            ],
            "reqps", width=24,
        ),
    ]


def _async_panels(config: Config, tier: Tier) -> list[Panel]:
    batch = config.slo.batch
    p = config.slo.percentile
    return [
        row(f"Tier {tier.name}: asynchronous, judged on backlog"),
        timeseries(
            f"Queue wait {percentile_label(p)}",
            f"How long {tier.name} requests waited for a batch slot; the line is the backlog alert bound."
            + NEEDS_PLUGIN,
            [(quantile(p, pl.REQUEST_QUEUE, MODEL, _tier(tier.name), by=("model_name", "tier")), BY_TIER)],
            "s", thresholds=above(batch.max_queue_seconds),
        ),
        timeseries(
            "Completions/s and waiting requests",
            f"{tier.name} requests finishing per second (zero while requests wait: stalled) and vLLM's waiting "
            "queue (all tiers).",
            [
                (f"sum by (model_name) ({rate(pl.REQUEST_E2E.count, MODEL, _tier(tier.name))})", "completions/s"),
                (f"sum by (model_name) ({sel(vllm.NUM_REQUESTS_WAITING, MODEL)})", "waiting {{model_name}}"),
            ],
            "short",
        ),
    ]


def _engine_quantile(config: Config, histogram: Metric, *matchers: str) -> str:
    return quantile(config.slo.percentile, histogram, MODEL, *matchers, by=ENGINE)


def _ratio(numerator: str, denominator: str) -> str:
    by = ", ".join(ENGINE)
    return f"sum by ({by}) ({numerator}) / sum by ({by}) ({denominator})"


def _engine_panels(config: Config) -> list[Panel]:
    t = config.thresholds
    pct = percentile_label(config.slo.percentile)
    waiting = 'requests_waiting="true"'
    first = rate(vllm.SPEC_DECODE_ACCEPTED_PER_POS, MODEL, 'position="0"')
    rejected = _ratio(first, rate(vllm.SPEC_DECODE_DRAFTS, MODEL))
    eff = pl.BATCH_EFFICIENCY
    return [
        row("Engine steps"),
        timeseries(
            "Batch efficiency while requests wait",
            "Tokens per step over the token budget, mean over steps that ended with requests waiting (plugin; exact "
            "with --enable-logging-iteration-details). Without the plugin: vLLM's tokens per step over "
            "vllm.max_num_batched_tokens from the configuration.",
            [
                (_ratio(rate(eff.sum, MODEL, waiting), rate(eff.count, MODEL, waiting)), BY_ENGINE),
                (f"{_ratio(rate(vllm.ITERATION_TOKENS.sum, MODEL), rate(vllm.ITERATION_TOKENS.count, MODEL))}"
                 f" / {config.vllm.max_num_batched_tokens}", f"vLLM fallback {BY_ENGINE}"),
            ],
            "percentunit", thresholds=below(t.batch_efficiency), max_value=1,
        ),
        timeseries(
            f"Scheduling cycle {pct}",
            "Wall time of schedule() and update_from_output() in the engine core, measured by the timed scheduler "
            "class (--scheduler-cls infersight.vllm_plugin.scheduler.TimedScheduler); no vLLM metric has it."
            + NEEDS_PLUGIN,
            [(_engine_quantile(config, pl.SCHEDULER_CALL, 'call="schedule"'), f"schedule {BY_ENGINE}"),
             (_engine_quantile(config, pl.SCHEDULER_CALL, 'call="update_from_output"'), f"update {BY_ENGINE}")],
            "s", thresholds=above(t.scheduling_cycle_seconds),
        ),
        timeseries(
            f"Step time {pct}",
            "Model execution per step (--enable-logging-iteration-details) and the interval between steps as the "
            "API server sees them; the difference is scheduling, output processing and IPC." + NEEDS_PLUGIN,
            [(_engine_quantile(config, pl.MODEL_EXECUTE), f"model {BY_ENGINE}"),
             (_engine_quantile(config, pl.STEP_INTERVAL), f"interval {BY_ENGINE}")],
            "s",
        ),
        timeseries(
            "Speculative decoding acceptance",
            "Accepted over proposed draft tokens; below the line verification work is wasted. Only with "
            "--speculative-config.",
            [(_ratio(rate(vllm.SPEC_DECODE_ACCEPTED_TOKENS, MODEL), rate(vllm.SPEC_DECODE_DRAFT_TOKENS, MODEL)),
              BY_ENGINE)],
            "percentunit", thresholds=below(t.spec_decode_acceptance), max_value=1,
        ),
        timeseries(
            "Speculative drafts rejected outright",
            "Drafts whose first token was rejected, over all drafts; above the line trip the circuit breaker "
            "(turn speculative decoding off). Only with --speculative-config.",
            [(f"1 - {rejected}", BY_ENGINE)],
            "percentunit", thresholds=above(t.spec_decode_failure), max_value=1,
        ),
        stat(
            "Plugin loaded",
            "Engines reporting through the infersight plugin. 0: every panel marked as needing it is empty and the "
            "SLO falls back to vLLM's untiered histogram.",
            [(f"count({sel(pl.PLUGIN_INFO, MODEL)}) or vector(0)", "")],
            "none", thresholds=below(1.0), width=6,
        ),
        stat(
            "Warm-up requests left",
            "Finished requests still to come before the SLI counts them, summed over engines; non-zero after a "
            "restart.",
            [(f"sum({sel(pl.WARMUP_REMAINING, MODEL)})", "")],
            "none", thresholds=above(1.0), width=6,
        ),
        stat(
            "Plugin errors",
            "Failures the plugin caught and counted in the last interval (config, record, channel, collect); vLLM "
            "runs on regardless, but the plugin's series may be incomplete.",
            [(f"sum(increase({sel(pl.PLUGIN_ERRORS)}[$__rate_interval]))", "")],
            "short", thresholds=above(1.0), width=6,
        ),
    ]


def _warmup_annotation() -> dict[str, object]:
    return {
        "name": "Warm-up",
        "datasource": DATASOURCE,
        "enable": True,
        "iconColor": "orange",
        "expr": f"sum by (model_name, engine) ({sel(pl.WARMUP_REMAINING, MODEL)}) > 0",
        "step": "30s",
        "titleFormat": "warm-up: {{model_name}} engine {{engine}}",
        "textFormat": "requests in warm-up are kept out of the SLI",
    }


def build(config: Config) -> Dashboard:
    latency = [t for t in config.slo.tiers if t.latency_seconds is not None]
    asynchronous = [t for t in config.slo.tiers if t.latency_seconds is None]
    panels: list[Panel] = [
        *(p for t in latency for p in _tier_panels(config, t)),
        *(p for t in asynchronous for p in _async_panels(config, t)),
        *_engine_panels(config),
    ]
    board = dashboard(
        uid=SLO,
        title="LLM serving SLOs",
        description="Per-tier latency SLOs: attainment, error budget, burn rates, P99 against the target, and the "
        "engine-step signals behind them.",
        panels=panels,
        template_variables=variables(model_from=vllm.NUM_REQUESTS_RUNNING, instance_from=vllm.NUM_REQUESTS_RUNNING),
    )
    return attr.evolve(board, annotations=Annotations(list=[_warmup_annotation()]))
