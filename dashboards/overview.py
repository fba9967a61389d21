"""LLM serving overview: the first page on-call opens.

Is the service meeting its latency SLO, and if not, which signal moved with it:
traffic, queueing, KV cache pressure, preemptions, batching or the prefix cache.
Every threshold line comes from the config the alerts use, so the dashboard and
the page agree on what "bad" is.
"""

from __future__ import annotations

from grafanalib.core import Dashboard, Panel

from dashboards import OVERVIEW
from dashboards.common import (
    INSTANCE,
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
    up_mappings,
    variables,
)
from infersight.catalog import Metric, vllm
from infersight.catalog import exporter as ex
from infersight.config import Config

V = (MODEL, INSTANCE)  # vLLM's own series carry the scrape instance of the vLLM server
BY_MODEL = "{{model_name}}"
BY_TARGET = "{{model_name}} {{target}} engine {{engine}}"  # series the sidecar derives per vLLM target


def _by_model(expr: str) -> str:
    return f"sum by (model_name) ({expr})"


def _ratio(numerator: Metric | str, denominator: Metric | str) -> str:
    return f"{_by_model(rate(numerator, *V))} / {_by_model(rate(denominator, *V))}"


def _latency_steps(config: Config) -> list[dict[str, object]]:
    """SLO target, warning (x warning_factor) and critical (x critical_factor) lines."""
    slo = config.slo
    target = slo.tier(slo.model_latency_tier).latency_seconds
    assert target is not None  # the config validator guarantees a target for this tier
    return steps(
        "green",
        (target, "yellow"),
        (target * slo.warning_factor, "orange"),
        (target * slo.critical_factor, "red"),
    )


def _quantiles(histogram: Metric, config: Config) -> list[tuple[str, str]]:
    p = config.slo.percentile
    return [
        (quantile(0.5, histogram, *V), f"P50 {BY_MODEL}"),
        (quantile(p, histogram, *V), f"{percentile_label(p)} {BY_MODEL}"),
    ]


def _summary(config: Config) -> list[Panel]:
    p = config.slo.percentile
    t = config.thresholds
    jobs = config.prometheus
    return [
        stat("Requests/s", "Successful requests per second, all selected models.",
             [(f"sum({rate(vllm.REQUEST_SUCCESS, *V)})", "")], "reqps"),
        stat(f"E2E {percentile_label(p)} (worst model)",
             "End-to-end latency percentile of the worst model; lines at the SLO, warning and critical levels.",
             [(f"max({quantile(p, vllm.E2E_LATENCY, *V)})", "")], "s", thresholds=_latency_steps(config)),
        stat("KV cache usage (max)", "Fullest engine's KV cache; above the threshold requests get preempted.",
             [(f"max({sel(ex.VLLM_KV_CACHE_USAGE, MODEL)})", "")], "percentunit",
             thresholds=above(t.kv_cache_usage)),
        stat("Waiting requests", "Requests queued for a batch slot, all selected models.",
             [(f"sum({sel(vllm.NUM_REQUESTS_WAITING, *V)})", "")], "short",
             thresholds=above(t.queue_waiting_requests)),
        stat("vLLM targets up", "Prometheus scrapes of vLLM's own /metrics that succeed, of all.",
             [(f'sum(up{{job="{jobs.vllm_job}",{INSTANCE}}}) / count(up{{job="{jobs.vllm_job}",{INSTANCE}}})', "")],
             "percentunit", thresholds=below(1.0)),
        stat("Sidecar up", "Whether Prometheus can scrape each infersight sidecar.",
             [(f'min(up{{job="{jobs.sidecar_job}"}})', "")], "none",
             thresholds=below(1.0), mappings=up_mappings()),
    ]


def _latency(config: Config) -> list[Panel]:
    slo = config.slo
    tier = slo.model_latency_tier
    return [
        row("Traffic and latency"),
        timeseries("Request rate", "Successful requests per second by model.",
                   [(_by_model(rate(vllm.REQUEST_SUCCESS, *V)), BY_MODEL)], "reqps"),
        timeseries(
            f"E2E latency P50 / {percentile_label(slo.percentile)} vs SLO",
            f"End-to-end request latency. Lines: the {tier} SLO, warning (x{slo.warning_factor:g}: scale out) "
            f"and critical (x{slo.critical_factor:g}: degrade to the fallback service).",
            _quantiles(vllm.E2E_LATENCY, config), "s", thresholds=_latency_steps(config)),
        timeseries("Time to first token", "Queueing plus prefill; grows with prompt length and waiting requests.",
                   _quantiles(vllm.TTFT, config), "s"),
        timeseries("Inter-token latency", "Time between output tokens (decode speed) as clients see it.",
                   _quantiles(vllm.INTER_TOKEN_LATENCY, config), "s"),
    ]


def _scheduler(config: Config) -> list[Panel]:
    t = config.thresholds
    return [
        row("Scheduler and KV cache"),
        timeseries("Running / waiting requests",
                   "Requests in the running batch and queued for a slot; the line is the waiting-queue alert level.",
                   [(_by_model(sel(vllm.NUM_REQUESTS_RUNNING, *V)), f"running {BY_MODEL}"),
                    (_by_model(sel(vllm.NUM_REQUESTS_WAITING, *V)), f"waiting {BY_MODEL}")],
                   "short", thresholds=above(t.queue_waiting_requests)),
        timeseries("KV cache usage",
                   "Per engine, as the sidecar reads it (current or legacy vLLM name) and the alert judges it. "
                   "Past the line the scheduler starts preempting requests.",
                   [(sel(ex.VLLM_KV_CACHE_USAGE, MODEL), BY_TARGET)], "percentunit",
                   thresholds=above(t.kv_cache_usage), max_value=1),
        timeseries("Preemptions/s", "Requests evicted for lack of KV cache and recomputed later.",
                   [(_by_model(rate(vllm.NUM_PREEMPTIONS, *V)), BY_MODEL)], "suffix: /s",
                   thresholds=above(t.preemptions_per_second)),
        timeseries("Engine steps/s", "Scheduler iterations per second (one forward pass each).",
                   [(_by_model(rate(vllm.ITERATION_TOKENS.count, *V)), BY_MODEL)], "suffix: steps/s"),
        timeseries("Tokens per step", "Mean tokens scheduled per engine step; the line is the step token budget.",
                   [(_ratio(vllm.ITERATION_TOKENS.sum, vllm.ITERATION_TOKENS.count), BY_MODEL)],
                   "suffix: tokens", thresholds=steps("green", (config.vllm.max_num_batched_tokens, "orange"))),
        timeseries("Batch efficiency",
                   "Tokens per step over the step budget while requests waited (from the sidecar); "
                   "below the line the batch is not filling although work is queued.",
                   [(sel(ex.VLLM_BATCH_EFFICIENCY, MODEL), BY_TARGET)],
                   "percentunit", thresholds=below(t.batch_efficiency), max_value=1),
        timeseries("Prefix-cache hit ratio", "Prompt tokens served from the prefix cache over tokens looked up.",
                   [(_ratio(vllm.PREFIX_CACHE_HITS, vllm.PREFIX_CACHE_QUERIES), BY_MODEL)],
                   "percentunit", max_value=1),
    ]


def _health(config: Config) -> list[Panel]:
    jobs = config.prometheus
    return [
        row("Targets"),
        timeseries("Scrape targets up", "1 when Prometheus scraped the target; 0 means its metrics are stale.",
                   [(f'up{{job="{jobs.vllm_job}",{INSTANCE}}}', "vllm {{instance}}"),
                    (f'up{{job="{jobs.sidecar_job}"}}', "sidecar {{instance}}")],
                   "none", thresholds=below(1.0), width=8, max_value=1),
        timeseries("vLLM polled by the sidecar", "1 when the sidecar's last poll of the vLLM target succeeded.",
                   [(sel(ex.VLLM_UP), "{{target}}")], "none", thresholds=below(1.0), width=8, max_value=1),
        timeseries("Sidecar collectors up", "1 when the collector's last run succeeded.",
                   [(sel(ex.COLLECTOR_UP), "{{instance}} {{collector}}")], "none",
                   thresholds=below(1.0), width=8, max_value=1),
    ]


def build(config: Config) -> Dashboard:
    return dashboard(
        uid=OVERVIEW,
        title="LLM serving overview",
        description="Latency against the SLO and the serving signals that explain it.",
        panels=[*_summary(config), *_latency(config), *_scheduler(config), *_health(config)],
        template_variables=variables(model_from=vllm.NUM_REQUESTS_RUNNING, instance_from=vllm.NUM_REQUESTS_RUNNING),
    )
