"""Metrics the in-process vLLM plugin adds to vLLM's own ``/metrics``.

Request histograms carry the SLO ``tier`` (chosen by prompt length) and leave out
the warm-up requests, so SLO rules read them without filters. Label values are
bounded: ``tier`` by the configured tiers, ``engine`` by the data-parallel size,
``model_name`` by vLLM's served model name, the rest by fixed sets.
"""

from __future__ import annotations

from infersight.catalog import Metric

_E = ("model_name", "engine")
_T = ("model_name", "engine", "tier")

REQUEST_E2E = Metric(
    "infersight_request_e2e_seconds",
    "histogram",
    "End-to-end latency of finished requests by SLO tier, warm-up excluded; buckets include every target.",
    _T,
)
REQUEST_TTFT = Metric(
    "infersight_request_ttft_seconds",
    "histogram",
    "Time to first token (end-to-end minus decode time) by SLO tier, warm-up excluded.",
    _T,
)
REQUEST_QUEUE = Metric(
    "infersight_request_queue_seconds", "histogram", "Time waiting for a batch slot by SLO tier.", _T
)
REQUEST_PREFILL = Metric("infersight_request_prefill_seconds", "histogram", "Prefill time by SLO tier.", _T)
REQUEST_DECODE = Metric("infersight_request_decode_seconds", "histogram", "Decode time by SLO tier.", _T)
REQUEST_TPOT = Metric(
    "infersight_request_time_per_output_token_seconds",
    "histogram",
    "Mean decode time per output token of each finished request, by SLO tier.",
    _T,
)
REQUESTS_FAILED = Metric(
    "infersight_requests_failed_total",
    "counter",
    "Requests that finished with an engine error, by SLO tier; the SLI counts them as missed.",
    _T,
)
WARMUP_REQUESTS = Metric(
    "infersight_warmup_requests_total",
    "counter",
    "Requests finished during warm-up; they are kept out of the SLO histograms.",
    _T,
)
WARMUP_REMAINING = Metric(
    "infersight_warmup_remaining_requests",
    "gauge",
    "Finished requests still to come before warm-up ends; 0 once requests count toward the SLO.",
    _E,
)
BATCH_EFFICIENCY = Metric(
    "infersight_step_batch_efficiency_ratio",
    "histogram",
    "Tokens scheduled per engine step over the token budget (max_num_batched_tokens), "
    "split by whether requests were waiting.",
    (*_E, "requests_waiting"),
)
STEP_INTERVAL = Metric(
    "infersight_step_interval_seconds", "histogram", "Time between engine steps as the API server receives them.", _E
)
MODEL_EXECUTE = Metric(
    "infersight_step_model_execute_seconds",
    "histogram",
    "Model execution time per engine step (only with vLLM --enable-logging-iteration-details).",
    _E,
)
STEP_REQUESTS_RUNNING = Metric(
    "infersight_step_requests_running", "gauge", "Requests in the batch at the last engine step.", _E
)
STEP_REQUESTS_WAITING = Metric(
    "infersight_step_requests_waiting", "gauge", "Requests waiting for a batch slot at the last engine step.", _E
)
TOKEN_BUDGET = Metric(
    "infersight_step_token_budget_tokens", "gauge", "The engine's token budget per step (max_num_batched_tokens).", _E
)
SCHEDULER_CALL = Metric(
    "infersight_scheduler_call_seconds",
    "histogram",
    "Wall time of the engine core's scheduler calls (schedule, update_from_output), "
    "measured by the timed scheduler class.",
    (*_E, "call"),
)
PLUGIN_ERRORS = Metric(
    "infersight_plugin_errors_total",
    "counter",
    "Failures caught inside the plugin by stage (config, record, channel); vLLM goes on.",
    ("stage",),
)
PLUGIN_INFO = Metric(
    "infersight_plugin_info", "gauge", "Always 1 while the plugin is loaded.", ("model_name", "engine", "version")
)
