"""Per-tier latency SLOs: SLI recording rules, error budget, multi-window multi-burn-rate alerts.

The SLI of a tier is the share of its requests that finished within the tier's
latency target: ``le=<target>`` of the plugin's end-to-end histogram (the plugin
puts every target on a bucket boundary, so the count is exact) over all requests
of the tier, engine errors included as misses. Warm-up requests never reach
that histogram, so they cannot burn budget.

Without the plugin the rules fall back to vLLM's own e2e histogram, which knows
no tiers: every request is judged against the ``slo.model_latency_tier`` target,
at the largest vLLM bucket bound not above it, and warm-up counts.

Burn-rate alerts follow the SRE workbook: a condition holds when both its short
and long window burn faster than ``factor`` x the sustainable rate, with a
minimum number of requests in the long window. Asynchronous tiers (no latency
target) get backlog and stall alerts instead.
"""

from __future__ import annotations

from alerts.promql import num, sum_rate
from alerts.spec import Alert, Group, Recording, Severity
from dashboards import SLO as SLO_DASHBOARD
from infersight.catalog.plugin import REQUEST_E2E, REQUEST_QUEUE, REQUESTS_FAILED
from infersight.catalog.vllm import E2E_LATENCY, NUM_REQUESTS_WAITING
from infersight.config import BurnWindow, Config, duration_seconds
from infersight.vllm_plugin.buckets import le, slo_points

LEVEL = "model_name_tier"
BY = "sum by (model_name, tier)"
OR = " or "

# vLLM 0.32's bucket bounds of vllm:e2e_request_latency_seconds (tested against a real scrape).
VLLM_E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

ALERT_NAMES: dict[Severity, str] = {"critical": "InfersightSLOFastBurn", "warning": "InfersightSLOSlowBurn"}


def requests_record(window: str) -> str:
    return f"{LEVEL}:infersight_slo_requests:rate{window}"


def good_record(window: str) -> str:
    return f"{LEVEL}:infersight_slo_good_requests:rate{window}"


def errors_record(window: str) -> str:
    return f"{LEVEL}:infersight_slo_errors:ratio_rate{window}"


BUDGET_RECORD = f"{LEVEL}:infersight_slo_error_budget_remaining:ratio"


def windows(config: Config) -> list[str]:
    """Every window a burn-rate condition reads, shortest first."""
    spans = {w for pair in config.slo.burn_rate.windows for w in (pair.short, pair.long)}
    return sorted(spans, key=duration_seconds)


def fallback_bound(target: float) -> float | None:
    """The largest vLLM e2e bucket bound not above ``target`` (stricter, never looser), if any."""
    below = [b for b in VLLM_E2E_BUCKETS if b <= target + 1e-9]
    return below[-1] if below else None


def _fallback(config: Config, window: str) -> tuple[str, str] | None:
    """Requests and good requests per second from vLLM's own e2e histogram, labelled as the model-latency tier."""
    tier = config.slo.model_latency_tier
    bound = fallback_bound(slo_points(config)[tier][0])
    if bound is None:
        return None

    def as_tier(selector: str) -> str:
        return f'label_replace({sum_rate(selector, window, "model_name")}, "tier", "{tier}", "", "")'

    return as_tier(E2E_LATENCY.count), as_tier(f'{E2E_LATENCY.bucket}{{le="{le(bound)}"}}')


def sli_rules(config: Config, window: str) -> list[Recording]:
    """Requests per second, good requests per second and the error ratio of every latency tier."""
    points = slo_points(config)
    requests = [
        f'{BY} (rate({REQUEST_E2E.count}{{tier="{t}"}}[{window}]))'
        f' + {BY} (rate({REQUESTS_FAILED}{{tier="{t}"}}[{window}]))'
        for t in points
    ]
    good = [f'{BY} (rate({REQUEST_E2E.bucket}{{tier="{t}",le="{le(p[0])}"}}[{window}]))' for t, p in points.items()]
    fallback = _fallback(config, window)
    if fallback is not None:
        requests.append(fallback[0])
        good.append(fallback[1])
    return [
        Recording(requests_record(window), OR.join(requests)),
        Recording(good_record(window), OR.join(good)),
        Recording(errors_record(window), f"1 - {good_record(window)} / {requests_record(window)}"),
    ]


def _span(seconds: float) -> str:
    """A duration in its two largest units: ``2d 2h``, ``5d``, ``50m``."""
    minutes = round(seconds / 60)
    days, minutes = divmod(minutes, 1440)
    hours, minutes = divmod(minutes, 60)
    shown = [f"{value}{unit}" for value, unit in ((days, "d"), (hours, "h"), (minutes, "m")) if value]
    return " ".join(shown[:2]) or "0m"


def exhaustion(config: Config, pair: BurnWindow) -> str:
    """How long the whole period's budget lasts at the pair's burn factor."""
    return _span(duration_seconds(config.slo.burn_rate.period) / pair.factor)


def _condition(config: Config, pair: BurnWindow) -> str:
    budget = num(1 - config.slo.objective)
    factor = num(pair.factor)
    guard = f"{requests_record(pair.long)} * {num(duration_seconds(pair.long))} >= {config.slo.burn_rate.min_requests}"
    return (
        f"({errors_record(pair.short)} / {budget} > {factor}"
        f" and {errors_record(pair.long)} / {budget} > {factor}"
        f" and {guard})"
    )


def burn_alert(config: Config, severity: Severity) -> Alert | None:
    pairs = [p for p in config.slo.burn_rate.windows if p.severity == severity]
    if not pairs:
        return None
    br = config.slo.burn_rate
    page = severity == "critical"
    conditions = " or ".join(
        f"{p.short} and {p.long} both burn above {num(p.factor)}x (budget gone in {exhaustion(config, p)})"
        for p in pairs
    )
    return Alert(
        name=ALERT_NAMES[severity],
        expr=OR.join(_condition(config, p) for p in pairs),
        for_=br.critical_for if page else br.warning_for,
        severity=severity,
        summary=(
            "A latency tier is burning its error budget fast enough to page."
            if page
            else "A latency tier is burning its error budget faster than it can last the SLO period."
        ),
        description=(
            f"Tier {{{{ $labels.tier }}}} of model {{{{ $labels.model_name }}}} misses its latency target "
            f"{{{{ $value | humanize }}}}x as often as the {num(config.slo.objective * 100)}% objective allows "
            f"(short window). This alert fires when {conditions}, with at least {br.min_requests} requests in the "
            f"long window; the times are how long the {br.period} error budget lasts at that burn rate."
        ),
        dashboard=SLO_DASHBOARD,
    )


def _async_tiers(config: Config) -> list[str]:
    return [t.name for t in config.slo.tiers if t.latency_seconds is None]


def backlog_alerts(config: Config) -> list[Alert]:
    """Asynchronous tiers: judged on queue wait and on whether they complete at all."""
    tiers = _async_tiers(config)
    if not tiers:
        return []
    batch = config.slo.batch
    p = num(config.slo.percentile)
    pct = f"P{num(config.slo.percentile * 100)}"
    backlog = [
        f"histogram_quantile({p}, sum by (model_name, tier, le) "
        f'(rate({REQUEST_QUEUE.bucket}{{tier="{t}"}}[{batch.window}]))) > {num(batch.max_queue_seconds)}'
        for t in tiers
    ]
    stalled = [
        f'({BY} (increase({REQUEST_E2E.count}{{tier="{t}"}}[{batch.window}])) == 0'
        f' and {BY} (increase({REQUEST_E2E.count}{{tier="{t}"}}[{batch.window}] offset {batch.window})) > 0'
        f" and on (model_name) sum by (model_name) ({NUM_REQUESTS_WAITING}) > 0)"
        for t in tiers
    ]
    return [
        Alert(
            name="InfersightBatchTierBacklog",
            expr=OR.join(backlog),
            for_=batch.alert_for,
            severity="warning",
            summary="Requests of an asynchronous tier wait too long for a batch slot.",
            description=(
                f"{pct} queue wait of tier {{{{ $labels.tier }}}} requests of model {{{{ $labels.model_name }}}} is "
                f"{{{{ $value | humanizeDuration }}}} over {batch.window}, above {num(batch.max_queue_seconds)}s: the "
                "backlog grows faster than the engines drain it."
            ),
            dashboard=SLO_DASHBOARD,
        ),
        Alert(
            name="InfersightBatchTierStalled",
            expr=OR.join(stalled),
            for_=batch.alert_for,
            severity="warning",
            summary="An asynchronous tier stopped completing requests while requests wait.",
            description=(
                f"No tier {{{{ $labels.tier }}}} request of model {{{{ $labels.model_name }}}} finished in the last "
                f"{batch.window}, although some finished in the {batch.window} before and requests are waiting: "
                "long prompts are starved or stuck."
            ),
            dashboard=SLO_DASHBOARD,
        ),
    ]


def groups(config: Config) -> list[Group]:
    period = config.slo.burn_rate.period
    sli = [rule for window in windows(config) for rule in sli_rules(config, window)]
    alerts = [a for a in (burn_alert(config, "critical"), burn_alert(config, "warning")) if a is not None]
    budget = [
        *([] if period in windows(config) else sli_rules(config, period)),
        Recording(BUDGET_RECORD, f"1 - {errors_record(period)} / {num(1 - config.slo.objective)}"),
    ]
    return [
        Group("infersight-slo", [*sli, *alerts, *backlog_alerts(config)]),
        Group("infersight-slo-budget", budget, interval=config.slo.burn_rate.budget_interval),
    ]
