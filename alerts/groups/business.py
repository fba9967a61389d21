"""Business alerts: domain token accuracy, compliance failures and cost per request.

Accuracy and pass rates are ratios of rates of the counters the application
reports through the sidecar, so any window works and low volume can be guarded.
Cost per request is the price of the GPUs behind the scraped vLLM replicas over
the requests they finished: replicas are counted from Prometheus' own ``up``
series (every target, up or down: a replica that is down still bills), times
``cost.gpus_per_replica``. NVML's view is not used because it sees every GPU on
a node, serving or not, and is absent where the GPU collector is off.
"""

from __future__ import annotations

from alerts.promql import num, sum_rate
from alerts.spec import Alert, Group, Recording
from alerts.targets import up_selector
from dashboards import BUSINESS
from infersight.catalog import business as cat
from infersight.catalog.vllm import GENERATION_TOKENS, PROMPT_TOKENS, REQUEST_SUCCESS
from infersight.config import Config

# --- quality: domain token accuracy and compliance ----------------------------------------------------


def accuracy_record(config: Config) -> str:
    return f"domain:infersight_business_domain_tokens_correct:ratio_rate{config.business.accuracy_window}"


def accuracy_volume_record(config: Config) -> str:
    return f"domain:infersight_business_domain_tokens:increase{config.business.accuracy_window}"


def compliance_record(config: Config) -> str:
    return f"rule:infersight_business_compliance_checks:pass_ratio_rate{config.business.compliance_window}"


def quality_rules(config: Config) -> list[Recording | Alert]:
    b, t = config.business, config.thresholds
    checks = cat.COMPLIANCE_CHECKS.name
    passed = checks + '{result="pass"}'
    accuracy_pct = num(t.domain_token_accuracy * 100)
    pass_pct = num(t.compliance_pass_rate * 100)
    return [
        Recording(
            record=accuracy_record(config),
            expr=(
                f"{sum_rate(cat.DOMAIN_TOKENS_CORRECT.name, b.accuracy_window, 'domain')} "
                f"/ {sum_rate(cat.DOMAIN_TOKENS.name, b.accuracy_window, 'domain')}"
            ),
        ),
        Recording(
            record=accuracy_volume_record(config),
            expr=f"sum by (domain) (increase({cat.DOMAIN_TOKENS}[{b.accuracy_window}]))",
        ),
        Recording(
            record=compliance_record(config),
            expr=f"{sum_rate(passed, b.compliance_window, 'rule')} / {sum_rate(checks, b.compliance_window, 'rule')}",
        ),
        Alert(
            name="InfersightDomainTokenAccuracyLow",
            expr=(
                f"{accuracy_record(config)} < {num(t.domain_token_accuracy)} "
                f"and on (domain) {accuracy_volume_record(config)} >= {b.accuracy_min_tokens}"
            ),
            for_=b.accuracy_for,
            severity="warning",
            summary="Domain token accuracy reported by the application is below its target.",
            description=(
                f"Domain token accuracy for domain {{{{ $labels.domain }}}} is {{{{ $value | humanizePercentage }}}} "
                f"over {b.accuracy_window}, below the {accuracy_pct}% target for {b.accuracy_for} "
                f"(at least {b.accuracy_min_tokens} tokens checked): answers in this domain carry wrong terms."
            ),
            dashboard=BUSINESS,
        ),
        Alert(
            name="InfersightComplianceCheckFailed",
            expr=f"{compliance_record(config)} < {num(t.compliance_pass_rate)}",
            for_=b.compliance_for,
            severity="critical",
            summary="A compliance check failed on served responses.",
            description=(
                f"Compliance rule {{{{ $labels.rule }}}} passed {{{{ $value | humanizePercentage }}}} of its checks "
                f"over {b.compliance_window}, below the {pass_pct}% target: responses that break the rule may have "
                f"reached users."
            ),
            dashboard=BUSINESS,
        ),
    ]


# --- gateway phases --------------------------------------------------------------------------------------


def phase_quantile_record(config: Config) -> str:
    """``phase_tier:infersight_gateway_phase_duration_seconds:p99_5m`` for the configured percentile and window."""
    quantile = num(config.slo.percentile * 100).replace(".", "")
    return f"phase_tier:{cat.GATEWAY_PHASE_DURATION}:p{quantile}_{config.business.phase_window}"


def gateway_rules(config: Config) -> list[Recording | Alert]:
    window = config.business.phase_window
    return [
        Recording(
            record=phase_quantile_record(config),
            expr=(
                f"histogram_quantile({num(config.slo.percentile)}, "
                f"{sum_rate(cat.GATEWAY_PHASE_DURATION.bucket, window, 'le, phase, tier')})"
            ),
        )
    ]


# --- cost ----------------------------------------------------------------------------------------------


def _window_record(level: str, metric: str, operation: str, config: Config) -> str:
    return f"{level}:{metric}:{operation}{config.cost.window}"


HOURLY_COST = "job:infersight_cost_usd_per_hour:sum"
SECONDS_PER_HOUR = 3600


def request_rate_record(config: Config) -> str:
    return _window_record("job", "vllm_request_success", "rate", config)


def token_rate_record(config: Config) -> str:
    return _window_record("job", "vllm_tokens", "rate", config)


def cost_per_request_record(config: Config) -> str:
    return _window_record("job", "infersight_cost_usd_per_request", "ratio_rate", config)


def cost_per_1k_tokens_record(config: Config) -> str:
    return _window_record("job", "infersight_cost_usd_per_1k_tokens", "ratio_rate", config)


def attributed_cost_record(config: Config, dimension: str) -> str:
    return _window_record(dimension, "infersight_cost_usd_per_hour", "share_rate", config)


def hourly_cost(config: Config) -> str:
    """Dollars per hour for the GPUs of every scraped vLLM replica (the dashboard shows the same expression)."""
    c = config.cost
    return f"count by (job) ({up_selector(config.prometheus.vllm_job)}) * {num(c.gpus_per_replica * c.gpu_hour_usd)}"


def cost_rules(config: Config) -> list[Recording | Alert]:
    c = config.cost
    w = c.window
    in_job = f'{{job="{config.prometheus.vllm_job}"}}'
    rules: list[Recording | Alert] = [
        Recording(record=HOURLY_COST, expr=hourly_cost(config)),
        Recording(record=request_rate_record(config), expr=sum_rate(f"{REQUEST_SUCCESS}{in_job}", w, "job")),
        Recording(
            record=token_rate_record(config),
            expr=" + ".join(sum_rate(f"{m}{in_job}", w, "job") for m in (PROMPT_TOKENS, GENERATION_TOKENS)),
        ),
        Recording(
            record=cost_per_request_record(config),
            expr=f"{HOURLY_COST} / {SECONDS_PER_HOUR} / {request_rate_record(config)}",
        ),
        Recording(
            record=cost_per_1k_tokens_record(config),
            expr=f"{HOURLY_COST} / {SECONDS_PER_HOUR} / {token_rate_record(config)} * 1000",
        ),
    ]
    for dimension, metric in (("tenant", cat.COST_TENANT_TOKENS), ("product", cat.COST_PRODUCT_TOKENS)):
        rules.append(
            Recording(
                record=attributed_cost_record(config, dimension),
                expr=(
                    f"{sum_rate(metric.name, w, dimension)} / ignoring ({dimension}) group_left "
                    f"sum(rate({metric}[{w}])) * on () group_left sum({HOURLY_COST})"
                ),
            )
        )
    budget = num(c.budget_per_request_usd)
    rules.append(
        Alert(
            name="InfersightCostPerRequestHigh",
            expr=(f"{cost_per_request_record(config)} > {budget} and on (job) {request_rate_record(config)} > 0"),
            for_=c.alert_for,
            severity="warning",
            summary="Serving cost per request is above its budget.",
            description=(
                f'Each request finished by job {{{{ $labels.job }}}} costs ${{{{ $value | printf "%.4f" }}}} '
                f"over {w} (GPU price x GPUs of every scraped replica / finished requests), above the "
                f"${budget} budget for {c.alert_for}: capacity is idle or requests got slower."
            ),
            dashboard=BUSINESS,
        )
    )
    return rules


def groups(config: Config) -> list[Group]:
    return [
        Group("infersight-business-quality", quality_rules(config)),
        Group("infersight-business-gateway", gateway_rules(config)),
        Group("infersight-business-cost", cost_rules(config)),
    ]
