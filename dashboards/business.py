"""Business view: what the application reports (accuracy, compliance, gateway phases, cost) beside vLLM.

Domain token accuracy and compliance are drawn against the same config targets
the alerts use. The request waterfall joins the gateway's phases (preprocessing,
resource allocation, postprocessing, reported through the sidecar) with vLLM's
queue, prefill and decode, split by SLO tier by the infersight vLLM plugin; the
phase means add up to the request's mean latency. Cost per request uses the
expression the cost rules record. The before/after row shows the article's ROI
table (P99, QPS, memory, cost) for the chosen range and the same range
``business.roi_compare_offset`` earlier.
"""

from __future__ import annotations

import attr
from grafanalib.core import Dashboard, Panel, Stat

from alerts.groups.business import SECONDS_PER_HOUR, hourly_cost
from dashboards import BUSINESS
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
    timeseries,
    variables,
)
from infersight.catalog import Metric, gpu, plugin, vllm
from infersight.catalog import business as cat
from infersight.config import Config

PASS, FAIL = 'result="pass"', 'result="fail"'


def _sum(expr: str, by: str = "") -> str:
    return f"sum by ({by}) ({expr})" if by else f"sum({expr})"


def _ratio(numerator: str, denominator: str, by: str = "") -> str:
    return f"{_sum(numerator, by)} / {_sum(denominator, by)}"


def _mean(histogram: Metric, *matchers: str) -> str:
    """Mean of a histogram over the rate interval: means of consecutive phases add up."""
    return _ratio(rate(histogram.sum, *matchers), rate(histogram.count, *matchers))


def _accuracy(by: str = "") -> str:
    return _ratio(rate(cat.DOMAIN_TOKENS_CORRECT, INSTANCE), rate(cat.DOMAIN_TOKENS, INSTANCE), by)


def _cost_per_request(config: Config) -> str:
    requests = _sum(rate(vllm.REQUEST_SUCCESS, f'job="{config.prometheus.vllm_job}"', MODEL))
    return f"sum({hourly_cost(config)}) / {SECONDS_PER_HOUR} / {requests}"


def _cost_per_1k_tokens(config: Config) -> str:
    job = f'job="{config.prometheus.vllm_job}"'
    tokens = f"({_sum(rate(vllm.PROMPT_TOKENS, job, MODEL))} + {_sum(rate(vllm.GENERATION_TOKENS, job, MODEL))})"
    return f"sum({hourly_cost(config)}) / {SECONDS_PER_HOUR} / {tokens} * 1000"


def _attributed(config: Config, metric: Metric, label: str) -> str:
    """Dollars per hour by tenant or product: its share of attributed tokens times the GPU cost."""
    share = f"{_sum(rate(metric, INSTANCE), label)} / ignoring ({label}) group_left {_sum(rate(metric, INSTANCE))}"
    return f"{share} * on () group_left sum({hourly_cost(config)})"


def _quality(config: Config) -> list[Panel]:
    t, b = config.thresholds, config.business
    checks = cat.COMPLIANCE_CHECKS
    return [
        row("Quality reported by the application"),
        stat("Domain token accuracy (worst domain)",
             f"Lowest share of correct domain tokens over the domains; the alert fires below "
             f"{t.domain_token_accuracy:.0%} over {b.accuracy_window}.",
             [(f"min({_accuracy('domain')})", "")], "percentunit", thresholds=below(t.domain_token_accuracy), width=6),
        stat("Compliance pass rate", "Checks passed over checks run, all rules; any failure pages.",
             [(_ratio(rate(checks, PASS, INSTANCE), rate(checks, INSTANCE)), "")], "percentunit",
             thresholds=below(t.compliance_pass_rate), width=6),
        stat("Domain tokens checked", f"Tokens checked per second, all domains; the accuracy alert needs "
             f"{b.accuracy_min_tokens} in {b.accuracy_window} per domain.",
             [(_sum(rate(cat.DOMAIN_TOKENS, INSTANCE)), "")], "suffix: tokens/s", width=6),
        stat("Label values folded to 'other'", "Values outside the allow-lists in infersight.yaml, per second: "
             "extend business.domains / compliance_rules / tenants / products if this is not zero.",
             [(_sum(rate(cat.LABELS_FOLDED, INSTANCE)), "")], "suffix: /s", width=6),
        timeseries("Domain token accuracy by domain",
                   f"Share of domain tokens the application's check found correct; the line is the "
                   f"{t.domain_token_accuracy:.0%} target.",
                   [(_accuracy("domain"), "{{domain}}")], "percentunit",
                   thresholds=below(t.domain_token_accuracy), max_value=1),
        timeseries("Failing compliance rules", "Failed checks per second by rule; only rules that fail are drawn.",
                   [(f"{_sum(rate(checks, FAIL, INSTANCE), 'rule')} > 0", "{{rule}}")], "suffix: /s"),
        timeseries("Events ingested", "Events accepted by kind and rejected by reason (POST /v1/events).",
                   [(_sum(rate(cat.EVENTS, INSTANCE), "kind"), "accepted {{kind}}"),
                    (_sum(rate(cat.EVENTS_REJECTED, INSTANCE), "reason"), "rejected {{reason}}")],
                   "suffix: events/s", width=24),
    ]  # fmt: skip


def _waterfall(config: Config) -> list[Panel]:
    """One line of stats per tier: the article's five phases, resource allocation split in its two parts."""
    panels: list[Panel] = [row("Request phases by SLO tier (mean seconds; gateway and vLLM)")]
    gateway = cat.GATEWAY_PHASE_DURATION
    for tier in config.slo.tiers:
        t = f'tier="{tier.name}"'
        phases = [
            ("preprocessing", _mean(gateway, 'phase="preprocessing"', t, INSTANCE), "gateway"),
            ("allocation", _mean(gateway, 'phase="allocation"', t, INSTANCE), "gateway: routing, admission"),
            ("queue", _mean(plugin.REQUEST_QUEUE, t, MODEL), "vLLM: waiting for a batch slot"),
            ("prefill", _mean(plugin.REQUEST_PREFILL, t, MODEL), "vLLM"),
            ("decode", _mean(plugin.REQUEST_DECODE, t, MODEL), "vLLM, all output tokens"),
            ("postprocessing", _mean(gateway, 'phase="postprocessing"', t, INSTANCE), "gateway, with audit logging"),
        ]
        panels += [
            stat(f"{tier.name}: {name}", f"Mean {name} time of {tier.name} requests ({where}).", [(expr, "")], "s")
            for name, expr, where in phases
        ]
    p = config.slo.percentile
    panels.append(
        timeseries(f"Gateway phase {percentile_label(p)} by tier",
                   "Tail of each gateway phase; the article's ranges: preprocessing 5-15 ms, allocation 10-30 ms, "
                   "postprocessing 5-20 ms.",
                   [(quantile(p, gateway, INSTANCE, by=("phase", "tier")), "{{tier}} {{phase}}")], "s", width=24)
    )  # fmt: skip
    return panels


def _cost(config: Config) -> list[Panel]:
    budget = config.cost.budget_per_request_usd
    return [
        row("Cost"),
        stat("Cost per request", "GPU cost of every scraped vLLM replica over requests finished.",
             [(_cost_per_request(config), "")], "currencyUSD", thresholds=above(budget), width=8),
        stat("Cost per 1K tokens", "GPU cost over prompt plus generated tokens, per thousand.",
             [(_cost_per_1k_tokens(config), "")], "currencyUSD", width=8),
        stat("GPU cost per hour", "cost.gpu_hour_usd x cost.gpus_per_replica x scraped vLLM replicas (up or down).",
             [(f"sum({hourly_cost(config)})", "")], "currencyUSD", width=8),
        timeseries("Cost per request vs budget", "The line is cost.budget_per_request_usd.",
                   [(_cost_per_request(config), "per request")], "currencyUSD", thresholds=above(budget), width=8),
        timeseries("Cost per hour by tenant", "GPU cost split by each tenant's share of attributed tokens.",
                   [(_attributed(config, cat.COST_TENANT_TOKENS, "tenant"), "{{tenant}}")], "currencyUSD", width=8),
        timeseries("Cost per hour by product", "GPU cost split by each product's share of attributed tokens.",
                   [(_attributed(config, cat.COST_PRODUCT_TOKENS, "product"), "{{product}}")], "currencyUSD",
                   width=8),
    ]  # fmt: skip


def _compare(panel: Stat, shift: str | None) -> Stat:
    """Averaged over the range (an ROI figure, not the last point), optionally shifted back in time."""
    return attr.evolve(panel, reduceCalc="mean", timeShift=shift)


def _before_after(config: Config) -> list[Panel]:
    p = config.slo.percentile
    offset = config.business.roi_compare_offset
    figures = [
        (f"{percentile_label(p)} latency", quantile(p, vllm.E2E_LATENCY, MODEL, by=()), "s"),
        ("QPS", _sum(rate(vllm.REQUEST_SUCCESS, MODEL)), "reqps"),
        ("GPU memory used", _sum(sel(gpu.MEMORY_USED, INSTANCE)), "bytes"),
        ("Cost per request", _cost_per_request(config), "currencyUSD"),
    ]
    panels: list[Panel] = [row(f"Before / after: this range and {offset} earlier (means over the range)")]
    for title, expr, unit in figures:
        panels += [
            _compare(stat(f"{title}: {offset} earlier", f"{title}, mean over the range {offset} earlier.",
                          [(expr, "")], unit, width=3), offset),
            _compare(stat(f"{title}: now", f"{title}, mean over the selected range.", [(expr, "")], unit, width=3),
                     None),
        ]  # fmt: skip
    return panels


def build(config: Config) -> Dashboard:
    return dashboard(
        uid=BUSINESS,
        title="LLM serving: business",
        description="Domain token accuracy, compliance, the five request phases by tier, cost, before/after.",
        panels=[*_quality(config), *_waterfall(config), *_cost(config), *_before_after(config)],
        template_variables=variables(model_from=vllm.NUM_REQUESTS_RUNNING, instance_from=cat.EVENTS),
    )
