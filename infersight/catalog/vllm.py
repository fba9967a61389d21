"""vLLM's own metric names (V1 engine, 0.32+) and the legacy names older servers expose.

Counters carry ``_total`` as Prometheus stores them; ``le`` values are printed
with a decimal point (``"120.0"``). Every series has ``model_name`` and ``engine``.
"""

from __future__ import annotations

from infersight.catalog import Metric

_L = ("model_name", "engine")

NUM_REQUESTS_RUNNING = Metric("vllm:num_requests_running", "gauge", "Requests in model execution batches.", _L)
NUM_REQUESTS_WAITING = Metric("vllm:num_requests_waiting", "gauge", "Requests waiting to be processed.", _L)
KV_CACHE_USAGE = Metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage, 1 means 100 percent.", _L)
NUM_PREEMPTIONS = Metric("vllm:num_preemptions_total", "counter", "Cumulative preemptions.", _L)
PROMPT_TOKENS = Metric("vllm:prompt_tokens_total", "counter", "Prefill tokens processed.", _L)
GENERATION_TOKENS = Metric("vllm:generation_tokens_total", "counter", "Generation tokens processed.", _L)
REQUEST_SUCCESS = Metric(
    "vllm:request_success_total", "counter", "Successfully processed requests.", (*_L, "finished_reason")
)
PREFIX_CACHE_QUERIES = Metric("vllm:prefix_cache_queries_total", "counter", "Prefix-cache queries, in tokens.", _L)
PREFIX_CACHE_HITS = Metric("vllm:prefix_cache_hits_total", "counter", "Prefix-cache hits, in tokens.", _L)
SPEC_DECODE_DRAFT_TOKENS = Metric(
    "vllm:spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed.", _L
)
SPEC_DECODE_ACCEPTED_TOKENS = Metric(
    "vllm:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.", _L
)
SPEC_DECODE_DRAFTS = Metric("vllm:spec_decode_num_drafts_total", "counter", "Speculative drafts.", _L)
SPEC_DECODE_ACCEPTED_PER_POS = Metric(
    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    "counter",
    "Draft tokens accepted, by draft position (position 0 is accepted unless the whole draft is rejected).",
    (*_L, "position"),
)
ITERATION_TOKENS = Metric("vllm:iteration_tokens_total", "histogram", "Tokens per engine step.", _L)
E2E_LATENCY = Metric("vllm:e2e_request_latency_seconds", "histogram", "End-to-end request latency.", _L)
TTFT = Metric("vllm:time_to_first_token_seconds", "histogram", "Time to first token.", _L)
INTER_TOKEN_LATENCY = Metric("vllm:inter_token_latency_seconds", "histogram", "Inter-token latency.", _L)
QUEUE_TIME = Metric("vllm:request_queue_time_seconds", "histogram", "Time spent waiting in the queue.", _L)
PREFILL_TIME = Metric("vllm:request_prefill_time_seconds", "histogram", "Time spent in prefill.", _L)
DECODE_TIME = Metric("vllm:request_decode_time_seconds", "histogram", "Time spent in decode.", _L)
INFERENCE_TIME = Metric("vllm:request_inference_time_seconds", "histogram", "Time spent running.", _L)
PROMPT_TOKENS_PER_REQUEST = Metric("vllm:request_prompt_tokens", "histogram", "Prompt tokens per request.", _L)

# Names older vLLM releases expose for the same quantities: current name -> legacy name.
LEGACY_NAMES: dict[str, str] = {
    KV_CACHE_USAGE.name: "vllm:gpu_cache_usage_perc",
    PREFIX_CACHE_QUERIES.name: "vllm:gpu_prefix_cache_queries_total",
    PREFIX_CACHE_HITS.name: "vllm:gpu_prefix_cache_hits_total",
    INTER_TOKEN_LATENCY.name: "vllm:time_per_output_token_seconds",
}


def all_vllm_metrics() -> list[Metric]:
    return [m for m in globals().values() if isinstance(m, Metric)]
