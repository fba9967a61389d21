"""vLLM serving alerts: per-model P99 latency against the SLO, saturation, scrape health.

The latency alerts read two recording rules (P99 and request rate per model), so
both alerts and the runbooks' queries use one computed series. The request-rate guard keeps
them quiet without traffic, where ``histogram_quantile`` returns NaN, and below
``slo.min_requests_per_second``, where one slow request makes the P99.
"""

from __future__ import annotations

from alerts.promql import num, sum_rate
from alerts.spec import Alert, Group, Recording, Severity
from alerts.targets import target_alerts
from dashboards import OVERVIEW
from infersight.catalog import Metric
from infersight.catalog.exporter import VLLM_KV_CACHE_USAGE
from infersight.catalog.vllm import E2E_LATENCY, NUM_PREEMPTIONS, NUM_REQUESTS_WAITING
from infersight.config import Config


def _level_name(metric: Metric, suffix: str = "") -> str:
    """The ``metric`` part of ``level:metric:operation`` (colons are reserved for the separators)."""
    return metric.name.replace(":", "_") + suffix


def p99_record(config: Config) -> str:
    """``model_name:vllm_e2e_request_latency_seconds:p99_1m`` for the configured percentile and window."""
    quantile = num(config.slo.percentile * 100).replace(".", "")
    return f"model_name:{_level_name(E2E_LATENCY)}:p{quantile}_{config.slo.latency_window}"


def request_rate_record(config: Config) -> str:
    """Finished requests per second per model: the population the P99 is computed over."""
    return f"model_name:{_level_name(E2E_LATENCY, '_count')}:rate{config.slo.latency_window}"


def recording_rules(config: Config) -> list[Recording]:
    window = config.slo.latency_window
    return [
        Recording(
            record=p99_record(config),
            expr=(
                f"histogram_quantile({num(config.slo.percentile)}, "
                f"{sum_rate(E2E_LATENCY.bucket, window, 'le, model_name')})"
            ),
        ),
        Recording(
            record=request_rate_record(config),
            expr=sum_rate(E2E_LATENCY.count, window, "model_name"),
        ),
    ]


def _latency_alert(config: Config, severity: Severity, factor: float, for_: str, action: str) -> Alert:
    slo = config.slo
    target = slo.tier(slo.model_latency_tier).latency_seconds
    assert target is not None  # the config validator guarantees a latency tier
    threshold = num(factor * target)
    pct = f"P{num(slo.percentile * 100)}"
    return Alert(
        name=f"InfersightP99Latency{severity.capitalize()}",
        expr=(
            f"{p99_record(config)} > {threshold} "
            f"and on (model_name) {request_rate_record(config)} > {num(slo.min_requests_per_second)}"
        ),
        for_=for_,
        severity=severity,
        summary=f"{pct} end-to-end latency of a model is above {num(factor)} times its SLO.",
        description=(
            f"{pct} end-to-end latency of model {{{{ $labels.model_name }}}} is {{{{ $value | humanizeDuration }}}} "
            f"over {slo.latency_window} windows, above {threshold}s ({num(factor)} x the {num(target)}s "
            f"{slo.model_latency_tier} SLO) for {for_}. Action: {action}."
        ),
        dashboard=OVERVIEW,
        annotations={"action": action},
    )


def latency_alerts(config: Config) -> list[Alert]:
    slo = config.slo
    return [
        _latency_alert(config, "warning", slo.warning_factor, slo.warning_for, "scale out 10%"),
        _latency_alert(config, "critical", slo.critical_factor, slo.critical_for, "degrade to the fallback service"),
    ]


def saturation_alerts(config: Config) -> list[Alert]:
    t = config.thresholds
    kv = num(t.kv_cache_usage * 100)
    return [
        Alert(
            name="InfersightKVCacheHigh",
            expr=f"{VLLM_KV_CACHE_USAGE} > {num(t.kv_cache_usage)}",
            for_=t.kv_cache_for,
            severity="warning",
            summary="vLLM KV-cache usage is above its threshold.",
            description=(
                f"KV-cache usage of model {{{{ $labels.model_name }}}} on {{{{ $labels.target }}}} "
                f"(engine {{{{ $labels.engine }}}}) is {{{{ $value | humanizePercentage }}}}, above {kv}% "
                f"for {t.kv_cache_for}: new requests queue and running ones get preempted."
            ),
            dashboard=OVERVIEW,
        ),
        Alert(
            name="InfersightQueueBacklog",
            expr=f"{NUM_REQUESTS_WAITING} > {num(t.queue_waiting_requests)}",
            for_=t.queue_for,
            severity="warning",
            summary="Requests are piling up in the vLLM waiting queue.",
            description=(
                f"{{{{ $value | humanize }}}} requests of model {{{{ $labels.model_name }}}} are waiting for a batch "
                f"slot on {{{{ $labels.instance }}}} (engine {{{{ $labels.engine }}}}), more than "
                f"{num(t.queue_waiting_requests)} for {t.queue_for}: queue time adds to every request's latency."
            ),
            dashboard=OVERVIEW,
        ),
        Alert(
            name="InfersightPreemptionsHigh",
            expr=f"rate({NUM_PREEMPTIONS}[{t.preemptions_window}]) > {num(t.preemptions_per_second)}",
            for_=t.preemptions_for,
            severity="warning",
            summary="vLLM is preempting running requests to free KV-cache blocks.",
            description=(
                f"Model {{{{ $labels.model_name }}}} on {{{{ $labels.instance }}}} (engine {{{{ $labels.engine }}}}) "
                f"preempts {{{{ $value | humanize }}}} requests/s over {t.preemptions_window}, above "
                f"{num(t.preemptions_per_second)}/s for {t.preemptions_for}: preempted requests recompute their "
                f"prefill, which inflates tail latency."
            ),
            dashboard=OVERVIEW,
        ),
    ]


def groups(config: Config) -> list[Group]:
    vllm_job = config.prometheus.vllm_job
    return [
        Group("infersight-vllm-latency", [*recording_rules(config), *latency_alerts(config)]),
        Group("infersight-vllm-saturation", saturation_alerts(config)),
        Group(
            "infersight-vllm-targets",
            target_alerts(
                config,
                "VLLMTarget",
                vllm_job,
                "vLLM",
                "vLLM serves /metrics from the same API server as completions, so this replica is most likely not "
                "serving either.",
                "critical",
            ),
        ),
    ]
