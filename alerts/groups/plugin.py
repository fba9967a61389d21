"""Engine-step alerts: batch efficiency, scheduling cycle, speculative decoding.

Batch efficiency reads the plugin's per-step histogram (exact scheduled tokens
with ``--enable-logging-iteration-details``, over the engine's real token
budget); where the plugin is absent it falls back to vLLM's tokens-per-step
histogram over ``vllm.max_num_batched_tokens`` while the waiting queue never
emptied. The scheduling cycle is measured by the timed scheduler class and has
no fallback: no vLLM metric contains the scheduler's time. Speculative decoding
needs no plugin: vLLM's counters have what the two alerts need.
"""

from __future__ import annotations

from alerts.promql import num, sum_rate
from alerts.spec import Alert, Group
from dashboards import SLO as SLO_DASHBOARD
from infersight.catalog.plugin import BATCH_EFFICIENCY, SCHEDULER_CALL
from infersight.catalog.vllm import (
    ITERATION_TOKENS,
    NUM_REQUESTS_WAITING,
    SPEC_DECODE_ACCEPTED_PER_POS,
    SPEC_DECODE_ACCEPTED_TOKENS,
    SPEC_DECODE_DRAFT_TOKENS,
    SPEC_DECODE_DRAFTS,
)
from infersight.config import Config

ENGINE = "instance, model_name, engine"
WHERE = "model {{ $labels.model_name }} on {{ $labels.instance }} (engine {{ $labels.engine }})"


def _rate(selector: str, window: str) -> str:
    return sum_rate(selector, window, ENGINE)


def batch_efficiency_alert(config: Config) -> Alert:
    window = config.plugin.engine_alert_window
    threshold = num(config.thresholds.batch_efficiency)
    waiting = '{requests_waiting="true"}'
    plugin = f"{_rate(BATCH_EFFICIENCY.sum + waiting, window)} / {_rate(BATCH_EFFICIENCY.count + waiting, window)}"
    fallback = (
        f"{_rate(ITERATION_TOKENS.sum, window)} / {_rate(ITERATION_TOKENS.count, window)}"
        f" / {config.vllm.max_num_batched_tokens}"
    )
    return Alert(
        name="InfersightBatchEfficiencyLow",
        expr=(
            f"{plugin} < {threshold} or ({fallback} < {threshold}"
            f" and on ({ENGINE}) min by ({ENGINE}) (min_over_time({NUM_REQUESTS_WAITING}[{window}])) > 0"
            f" unless on ({ENGINE}) {BATCH_EFFICIENCY.count})"
        ),
        for_=config.plugin.engine_alert_for,
        severity="warning",
        summary="Engine steps schedule far fewer tokens than the budget while requests wait.",
        description=(
            f"Steps of {WHERE} used {{{{ $value | humanizePercentage }}}} of the token budget on average over "
            f"{window} while requests were waiting, below {num(config.thresholds.batch_efficiency * 100)}%: "
            "something other than the token budget (sequence limit, KV-cache blocks) holds requests back."
        ),
        dashboard=SLO_DASHBOARD,
    )


def scheduling_cycle_alert(config: Config) -> Alert:
    window = config.plugin.engine_alert_window
    threshold = config.thresholds.scheduling_cycle_seconds
    pct = f"P{num(config.slo.percentile * 100)}"
    return Alert(
        name="InfersightSchedulingCycleSlow",
        expr=(
            f"histogram_quantile({num(config.slo.percentile)}, sum by ({ENGINE}, le) "
            f'(rate({SCHEDULER_CALL.bucket}{{call="schedule"}}[{window}]))) > {num(threshold)}'
        ),
        for_=config.plugin.engine_alert_for,
        severity="warning",
        summary="vLLM's scheduler takes longer per engine step than its budget.",
        description=(
            f"{pct} of schedule() in the engine core of {WHERE} is {{{{ $value | humanizeDuration }}}} over "
            f"{window}, above {num(threshold * 1000)}ms: every step waits for it before the model runs."
        ),
        dashboard=SLO_DASHBOARD,
    )


def spec_decode_alerts(config: Config) -> list[Alert]:
    window = config.plugin.engine_alert_window
    t = config.thresholds
    acceptance = f"{_rate(SPEC_DECODE_ACCEPTED_TOKENS.name, window)} / {_rate(SPEC_DECODE_DRAFT_TOKENS.name, window)}"
    first_accepted = f'{SPEC_DECODE_ACCEPTED_PER_POS}{{position="0"}}'
    rejected = f"1 - {_rate(first_accepted, window)} / {_rate(SPEC_DECODE_DRAFTS.name, window)}"
    return [
        Alert(
            name="InfersightSpecDecodeAcceptanceLow",
            expr=f"{acceptance} < {num(t.spec_decode_acceptance)}",
            for_=config.plugin.engine_alert_for,
            severity="warning",
            summary="Speculative decoding accepts too few draft tokens to pay for itself.",
            description=(
                f"Speculative decoding of {WHERE} accepted {{{{ $value | humanizePercentage }}}} of draft tokens over "
                f"{window}, below {num(t.spec_decode_acceptance * 100)}%: verification work is being wasted."
            ),
            dashboard=SLO_DASHBOARD,
        ),
        Alert(
            name="InfersightSpecDecodeFailureHigh",
            expr=f"{rejected} > {num(t.spec_decode_failure)}",
            for_=config.plugin.engine_alert_for,
            severity="warning",
            summary="Too many speculative drafts are rejected outright: trip the circuit breaker.",
            description=(
                f"{{{{ $value | humanizePercentage }}}} of speculative drafts of {WHERE} had even their first token "
                f"rejected over {window}, above {num(t.spec_decode_failure * 100)}%. Action: turn speculative "
                "decoding off until the draft model is fixed."
            ),
            dashboard=SLO_DASHBOARD,
            annotations={"action": "turn speculative decoding off"},
        ),
    ]


def groups(config: Config) -> list[Group]:
    return [
        Group(
            "infersight-engine-steps",
            [batch_efficiency_alert(config), scheduling_cycle_alert(config), *spec_decode_alerts(config)],
        )
    ]
