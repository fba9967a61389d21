"""Metrics the sidecar exposes about vLLM targets and about itself."""

from __future__ import annotations

from infersight.catalog import Metric

_T = ("target",)
_M = ("target", "model_name", "engine")

# Sidecar self-health: every collector reports its own success, cost and failures.
COLLECTOR_UP = Metric("infersight_collector_up", "gauge", "1 if the collector's last run succeeded.", ("collector",))
COLLECTOR_DURATION = Metric(
    "infersight_collector_duration_seconds", "gauge", "Duration of the collector's last run.", ("collector",)
)
COLLECTOR_ERRORS = Metric(
    "infersight_collector_errors_total", "counter", "Collector failures by reason.", ("collector", "reason")
)
BUILD_INFO = Metric("infersight_build_info", "gauge", "Sidecar version; always 1.", ("version",))

# vLLM targets, as polled by the sidecar.
VLLM_UP = Metric("infersight_vllm_up", "gauge", "1 if the last poll of the vLLM target succeeded.", _T)
VLLM_SCRAPE_DURATION = Metric(
    "infersight_vllm_scrape_duration_seconds", "gauge", "Duration of the last poll of the vLLM target.", _T
)
VLLM_SCRAPE_ERRORS = Metric(
    "infersight_vllm_scrape_errors_total",
    "counter",
    "Failed polls of the vLLM target by reason (timeout, connection, http_status, too_large, parse, other).",
    ("target", "reason"),
)
VLLM_RESTARTS = Metric(
    "infersight_vllm_restarts_total",
    "counter",
    "Restarts seen on the target: polls in which a vLLM counter went down (a counter reset).",
    _T,
)
VLLM_REQUESTS_RUNNING = Metric("infersight_vllm_requests_running", "gauge", "Requests in the running batch.", _M)
VLLM_REQUESTS_WAITING = Metric("infersight_vllm_requests_waiting", "gauge", "Requests waiting for a batch slot.", _M)
VLLM_KV_CACHE_USAGE = Metric(
    "infersight_vllm_kv_cache_usage_ratio", "gauge", "KV-cache usage, 0..1 (current or legacy vLLM name).", _M
)
VLLM_PREEMPTIONS_RATE = Metric(
    "infersight_vllm_preemptions_per_second", "gauge", "Preemptions per second over the rate window.", _M
)
VLLM_ENGINE_STEPS_RATE = Metric(
    "infersight_vllm_engine_steps_per_second", "gauge", "Engine steps per second over the rate window.", _M
)
VLLM_TOKENS_PER_STEP = Metric(
    "infersight_vllm_tokens_per_step", "gauge", "Mean tokens scheduled per engine step over the rate window.", _M
)
VLLM_BATCH_EFFICIENCY = Metric(
    "infersight_vllm_batch_efficiency_ratio",
    "gauge",
    "Tokens per engine step over max_num_batched_tokens, in poll intervals with requests waiting at both ends.",
    _M,
)
VLLM_PREFIX_CACHE_HIT_RATIO = Metric(
    "infersight_vllm_prefix_cache_hit_ratio",
    "gauge",
    "Prefix-cache hit tokens over queried tokens over the rate window.",
    _M,
)
VLLM_SPEC_DECODE_ACCEPTANCE = Metric(
    "infersight_vllm_spec_decode_acceptance_ratio",
    "gauge",
    "Accepted over proposed draft tokens over the rate window (only with speculative decoding).",
    _M,
)
VLLM_SERIES_DROPPED = Metric(
    "infersight_vllm_series_dropped_total",
    "counter",
    "Model/engine pairs ignored because the target exceeded max_series_per_target.",
    _T,
)
