"""One synthetic vLLM engine: counters, gauges and histograms moved by a few parameters.

Requests are discrete: each request class of the phase's mix accrues
``requests_per_second x share`` per second and a request finishes whenever a
whole one has accrued, so shares hold exactly over any window and the P99 that
Prometheus computes from the buckets is the one the scenario states. Each
finished request is observed into every per-request histogram vLLM 0.32 has,
with the same bucket bounds (``tests/test_simulate.py`` compares the page with a
real scrape). A restart sets every counter back to zero, as a new process would.

With ``plugin`` the infersight stat-logger's real recorder is fed the same
requests and steps, so its series join the page as they would on vLLM's own
``/metrics``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from infersight.catalog import vllm as cat
from infersight.config import Config
from infersight.simulate.exposition import Family, render
from infersight.simulate.scenario import VllmState
from infersight.vllm_plugin.exposition import PluginCollector
from infersight.vllm_plugin.recorder import EngineRecorder, Settings

ENGINE = "0"
TOKEN_BUDGET = 2048

# Bucket bounds as vLLM 0.32 builds them.
REQUEST_SECONDS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                   120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
TTFT_SECONDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
TOKEN_SECONDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                 20.0, 40.0, 80.0)  # fmt: skip
ITERATION_TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PREEMPTIONS = (1, 2, 3, 4, 5, 10, 20)
PARAMS_N = (1, 2, 5, 10, 20)
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
WAITING_REASONS = ("capacity", "deferred")
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
CACHE_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
REJECTION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")


def buckets_1_2_5(max_value: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_value``: vLLM's token-count buckets for ``max_model_len``."""
    out: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(out)
            out.append(float(value))
        exponent += 1


class Histogram:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0.0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float, n: float = 1.0) -> None:
        index = next((i for i, b in enumerate(self.bounds) if value <= b), len(self.bounds))
        self.counts[index] += n
        self.total += value * n


class Accrual:
    """Whole events out of a fractional rate: the remainder carries to the next step."""

    __slots__ = ("carry",)

    def __init__(self) -> None:
        self.carry = 0.0

    def take(self, amount: float) -> int:
        self.carry += amount
        whole = math.floor(self.carry + 1e-9)
        self.carry -= whole
        return whole


# Counter families (name without _total) and their help, in vLLM's page order.
_COUNTERS = {
    "estimated_flops_per_gpu": "Estimated number of floating point operations per GPU (for Model Flops Utilization "
    "calculations).",
    "estimated_read_bytes_per_gpu": "Estimated number of bytes read from memory per GPU (for Model Flops Utilization "
    "calculations).",
    "estimated_write_bytes_per_gpu": "Estimated number of bytes written to memory per GPU (for Model Flops "
    "Utilization calculations).",
    "prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
    "external_prefix_cache_queries": "External prefix cache queries from KV connector cross-instance cache sharing, "
    "in terms of number of queried tokens.",
    "external_prefix_cache_hits": "External prefix cache hits from KV connector cross-instance cache sharing, in "
    "terms of number of cached tokens.",
    "mm_cache_queries": "Multi-modal cache queries, in terms of number of queried items.",
    "mm_cache_hits": "Multi-modal cache hits, in terms of number of cached items.",
    "num_preemptions": "Cumulative number of preemption from the engine.",
    "prompt_tokens": "Number of prefill tokens processed.",
    "prompt_tokens_cached": "Number of cached prompt tokens (local + external).",
    "generation_tokens": "Number of generation tokens processed.",
}
_SPEC_COUNTERS = {
    "spec_decode_num_drafts": "Number of spec decoding drafts.",
    "spec_decode_num_draft_tokens": "Number of draft tokens.",
    "spec_decode_num_accepted_tokens": "Number of accepted tokens.",
}
# Histogram families: attribute, help.
_HISTOGRAMS = {
    "request_prompt_tokens": "Number of prefill tokens processed.",
    "request_generation_tokens": "Number of generation tokens processed.",
    "iteration_tokens_total": "Histogram of number of tokens per engine_step.",
    "request_max_num_generation_tokens": "Histogram of maximum number of requested generation tokens.",
    "request_params_n": "Histogram of the n request parameter.",
    "request_params_max_tokens": "Histogram of the max_tokens request parameter.",
    "time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "request_time_per_output_token_seconds": "Histogram of time_per_output_token_seconds per request.",
    "e2e_request_latency_seconds": "Histogram of e2e request latency in seconds.",
    "request_queue_time_seconds": "Histogram of time spent in WAITING phase for request.",
    "request_inference_time_seconds": "Histogram of time spent in RUNNING phase for request.",
    "request_prefill_time_seconds": "Histogram of time spent in PREFILL phase for request.",
    "request_decode_time_seconds": "Histogram of time spent in DECODE phase for request.",
    "request_num_preemptions": "Histogram of the number of times a request was preempted.",
    "request_prefill_kv_computed_tokens": "Histogram of new KV tokens computed during prefill (excluding cached "
    "tokens).",
}


def _vllm(name: str) -> str:
    return f"vllm:{name}"


class EngineModel:
    """The counters of one engine since its (re)start, and the gauges of the current phase."""

    def __init__(self, model_name: str, max_model_len: int = 32768, warmup_requests: int = 0,
                 warmup_slowdown: float = 1.0, plugin_config: Config | None = None,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.model_name = model_name
        self.max_model_len = max_model_len
        self.warmup_requests = warmup_requests
        self.warmup_slowdown = warmup_slowdown
        self.plugin_config = plugin_config
        self.clock = clock
        self.state = VllmState()
        self.restarts = 0
        self.reset()

    def reset(self) -> None:
        """A fresh process: every counter and histogram at zero, warm-up ahead."""
        tokens = buckets_1_2_5(self.max_model_len)
        bounds = {
            "request_prompt_tokens": tokens, "request_generation_tokens": tokens,
            "iteration_tokens_total": tuple(map(float, ITERATION_TOKENS)),
            "request_max_num_generation_tokens": tokens, "request_params_n": tuple(map(float, PARAMS_N)),
            "request_params_max_tokens": tokens, "time_to_first_token_seconds": TTFT_SECONDS,
            "inter_token_latency_seconds": TOKEN_SECONDS, "request_time_per_output_token_seconds": TOKEN_SECONDS,
            "request_num_preemptions": tuple(map(float, PREEMPTIONS)), "request_prefill_kv_computed_tokens": tokens,
        }  # fmt: skip
        self.histograms = {name: Histogram(bounds.get(name, REQUEST_SECONDS)) for name in _HISTOGRAMS}
        self.counters = dict.fromkeys((*_COUNTERS, *_SPEC_COUNTERS), 0.0)
        self.success = dict.fromkeys(FINISHED_REASONS, 0.0)
        self.prompt_by_source = dict.fromkeys(PROMPT_SOURCES, 0.0)
        self.cached_by_source = dict.fromkeys(CACHE_SOURCES, 0.0)
        self.accepted_per_pos: list[float] = []
        self.created = self.clock()
        self.warmup_left = self.warmup_requests
        self.requests = [Accrual() for _ in range(8)]
        self.steps, self.preemptions, self.drafts = Accrual(), Accrual(), Accrual()
        self.plugin: PluginCollector | None = None
        self.recorder: EngineRecorder | None = None
        if self.plugin_config is not None:
            self.recorder = EngineRecorder(Settings.from_config(self.plugin_config), self.model_name, ENGINE,
                                           TOKEN_BUDGET)
            self.plugin = PluginCollector()
            self.plugin.add_engine(self.recorder, Path("/nonexistent/infersight-simulated-channel"))

    def restart(self) -> None:
        self.restarts += 1
        self.reset()

    # ---- moving time ----

    def advance(self, seconds: float, state: VllmState) -> None:
        """``seconds`` of serving in ``state``: finished requests, steps, preemptions, drafts."""
        self.state = state
        finished = []
        prompt = generation = 0.0
        preempted = self.preemptions.take(state.preemptions_per_second * seconds)
        self.counters["num_preemptions"] += preempted
        for accrual, request_class in zip(self.requests, state.mix, strict=False):
            for _ in range(accrual.take(state.requests_per_second * request_class.share * seconds)):
                slow = self.warmup_slowdown if self.warmup_left > 0 else 1.0
                self.warmup_left = max(self.warmup_left - 1, 0)
                finished.append(self._finish(request_class.prompt_tokens, request_class.generation_tokens,
                                             request_class.latency_seconds * slow, preempted > 0))
                preempted = max(preempted - 1, 0)
                prompt += request_class.prompt_tokens
                generation += request_class.generation_tokens
        steps = self.steps.take(state.steps_per_second * seconds)
        per_step = (prompt + generation) / steps if steps else 0.0
        if steps:
            self.histograms["iteration_tokens_total"].observe(per_step, steps)
        if state.spec_decode is not None:
            self._speculate(self.drafts.take(state.spec_decode.drafts_per_second * seconds))
        if self.recorder is not None:
            self._record_plugin(steps, prompt, generation, finished)

    def _finish(self, prompt: int, generation: int, latency: float, preempted: bool) -> SimpleNamespace:
        h, state = self.histograms, self.state
        queue = min(state.queue_seconds, latency / 2)
        prefill = (latency - queue) * 0.25
        decode = latency - queue - prefill
        per_token = decode / (generation - 1)
        hit = state.prefix_cache_hit_ratio
        for name, value in (
            ("e2e_request_latency_seconds", latency), ("request_queue_time_seconds", queue),
            ("request_prefill_time_seconds", prefill), ("request_decode_time_seconds", decode),
            ("request_inference_time_seconds", prefill + decode), ("time_to_first_token_seconds", queue + prefill),
            ("request_time_per_output_token_seconds", per_token), ("request_prompt_tokens", prompt),
            ("request_generation_tokens", generation), ("request_max_num_generation_tokens", generation),
            ("request_params_max_tokens", generation), ("request_params_n", 1),
            ("request_num_preemptions", 1 if preempted else 0),
            ("request_prefill_kv_computed_tokens", prompt * (1 - hit)),
        ):  # fmt: skip
            h[name].observe(value)
        h["inter_token_latency_seconds"].observe(per_token, generation - 1)
        c = self.counters
        c["prompt_tokens"] += prompt
        c["generation_tokens"] += generation
        c["prefix_cache_queries"] += prompt
        c["prefix_cache_hits"] += prompt * hit
        c["prompt_tokens_cached"] += prompt * hit
        self.prompt_by_source["local_compute"] += prompt * (1 - hit)
        self.prompt_by_source["local_cache_hit"] += prompt * hit
        self.cached_by_source["device"] += prompt * hit
        self.success["length"] += 1
        return SimpleNamespace(
            num_prompt_tokens=prompt, num_generation_tokens=generation, e2e_latency=latency, queued_time=queue,
            prefill_time=prefill, decode_time=decode, inference_time=prefill + decode,
            mean_time_per_output_token=per_token, finish_reason=SimpleNamespace(name="LENGTH"),
        )

    def _speculate(self, drafts: int) -> None:
        """Drafts whose first token is accepted with ``first_token_acceptance``, later positions geometrically
        less, so that accepted / proposed tokens is ``acceptance``."""
        spec = self.state.spec_decode
        assert spec is not None
        k = spec.num_speculative_tokens
        ratio = _position_ratio(spec.first_token_acceptance, spec.acceptance * k, k)
        if len(self.accepted_per_pos) != k:
            self.accepted_per_pos = [0.0] * k
        for position in range(k):
            accepted = drafts * spec.first_token_acceptance * ratio**position
            self.accepted_per_pos[position] += accepted
            self.counters["spec_decode_num_accepted_tokens"] += accepted
        self.counters["spec_decode_num_drafts"] += drafts
        self.counters["spec_decode_num_draft_tokens"] += drafts * k

    def _record_plugin(self, steps: int, prompt: float, generation: float, finished: list[SimpleNamespace]) -> None:
        assert self.recorder is not None
        scheduler = SimpleNamespace(num_running_reqs=self.state.running, num_waiting_reqs=self.state.waiting)
        for step in range(steps):
            last = step == steps - 1
            iteration = SimpleNamespace(
                prompt_token_stats=SimpleNamespace(computed=prompt / steps), num_generation_tokens=generation / steps,
                finished_requests=finished if last else [],
            )
            self.recorder.record(scheduler, iteration)
        if not steps and finished:
            self.recorder.record(None, SimpleNamespace(finished_requests=finished))

    # ---- the page ----

    def families(self) -> list[Family]:
        """Every vLLM family of the page, in vLLM 0.32's order (process and HTTP families left out)."""
        labels = {"engine": ENGINE, "model_name": self.model_name}
        out: list[Family] = []

        def counter(name: str, help_: str, values: dict[str, float] | float, label: str = "",
                    base: dict[str, str] = labels) -> None:  # fmt: skip
            total, created = Family(_vllm(name + "_total"), "counter", help_), Family(
                _vllm(name + "_created"), "gauge", help_
            )
            for key, value in (values.items() if isinstance(values, dict) else [("", values)]):
                series = {**base, label: key} if label else base
                total.add(series, value)
                created.add(series, self.created)
            out.extend((total, created))

        def gauge(name: str, help_: str, values: dict[str, float] | float, label: str = "") -> None:
            family = Family(_vllm(name), "gauge", help_)
            for key, value in (values.items() if isinstance(values, dict) else [("", values)]):
                family.add({**labels, label: key} if label else labels, value)
            out.append(family)

        s = self.state
        for name in ("estimated_flops_per_gpu", "estimated_read_bytes_per_gpu", "estimated_write_bytes_per_gpu"):
            counter(name, _COUNTERS[name], self.counters[name])
        gauge("num_requests_running", "Number of requests in model execution batches.", s.running)
        gauge("num_requests_waiting", "Number of requests waiting to be processed.", s.waiting)
        gauge("num_requests_waiting_by_reason", "Number of waiting requests by reason.",
              {"capacity": s.waiting, "deferred": 0.0}, "reason")  # fmt: skip
        gauge("engine_sleep_state", "Engine sleep state; awake = 0 means engine is sleeping.",
              {state: float(state == "awake") for state in SLEEP_STATES}, "sleep_state")  # fmt: skip
        gauge(cat.KV_CACHE_USAGE.name.removeprefix("vllm:"), "KV-cache usage. 1 means 100 percent usage.",
              s.kv_cache_usage)  # fmt: skip
        for name in ("prefix_cache_queries", "prefix_cache_hits", "external_prefix_cache_queries",
                     "external_prefix_cache_hits", "mm_cache_queries", "mm_cache_hits", "num_preemptions",
                     "prompt_tokens"):  # fmt: skip
            counter(name, _COUNTERS[name], self.counters[name])
        counter("prompt_tokens_by_source", "Number of prompt tokens by source.", self.prompt_by_source, "source")
        counter("prompt_tokens_cached", _COUNTERS["prompt_tokens_cached"], self.counters["prompt_tokens_cached"])
        counter("prompt_tokens_cached_by_source", "Prefix-cache hit tokens by the cache tier that supplied them.",
                self.cached_by_source, "source")  # fmt: skip
        counter("generation_tokens", _COUNTERS["generation_tokens"], self.counters["generation_tokens"])
        counter("request_success", "Count of successfully processed requests.", self.success, "finished_reason")
        counter("admission_rejections", "Number of admission attempts rejected by a queue limit, by reason.",
                dict.fromkeys(REJECTION_REASONS, 0.0), "reason", {"model_name": self.model_name})  # fmt: skip
        if s.spec_decode is not None:
            for name, help_ in _SPEC_COUNTERS.items():
                counter(name, help_, self.counters[name])
            counter("spec_decode_num_accepted_tokens_per_pos", "Number of accepted tokens per draft position.",
                    {str(i): v for i, v in enumerate(self.accepted_per_pos)}, "position")  # fmt: skip
        for name, help_ in _HISTOGRAMS.items():
            h = self.histograms[name]
            family, created = Family(_vllm(name), "histogram", help_), Family(_vllm(name + "_created"), "gauge", help_)
            family.add_histogram(labels, h.bounds, h.counts, h.total)
            created.add(labels, self.created)
            out.extend((family, created))
        info = Family(_vllm("cache_config_info"), "gauge", "Information of the LLMEngine CacheConfig")
        info.add({"engine": ENGINE, **self._cache_config()}, 1.0)  # vLLM gives it no model_name
        out.append(info)
        return out

    def _cache_config(self) -> dict[str, str]:
        block_size, blocks = 16, 32768
        return {
            "block_size": str(block_size), "cache_dtype": "auto", "enable_prefix_caching": "True",
            "gpu_memory_utilization": "0.9", "num_gpu_blocks": str(blocks), "num_gpu_blocks_override": "None",
            "kv_cache_size_tokens": str(block_size * blocks), "sliding_window": "None",
        }  # fmt: skip

    def render(self) -> str:
        """The whole ``/metrics`` page: vLLM's families, then the plugin's when it runs."""
        page = render(self.families())
        if self.plugin is not None:
            registry = CollectorRegistry(auto_describe=False)
            registry.register(self.plugin)
            page += generate_latest(registry).decode()
        return page


def _position_ratio(first: float, accepted_per_draft: float, k: int) -> float:
    """r in [0, 1] with first x (1 + r + ... + r^(k-1)) = accepted_per_draft (bisection; monotone in r)."""
    if first <= 0 or k == 1:
        return 0.0
    low, high = 0.0, 1.0
    for _ in range(50):
        mid = (low + high) / 2
        if first * sum(mid**i for i in range(k)) < accepted_per_draft:
            low = mid
        else:
            high = mid
    return (low + high) / 2
