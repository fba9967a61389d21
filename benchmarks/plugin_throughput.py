"""What the in-process plugin costs vLLM: generation throughput with and without it, and ``record()`` per step.

Throughput: the real vLLM CPU server (tiny model) under the same fixed load (16
clients, 128-token prompts, 64 generated tokens each, ``ignore_eos``) in three
variants, started fresh for every run and alternated round by round so drift on a
shared machine spreads over all of them:

* ``vllm``: no plugin (the baseline);
* ``plugin``: the stat-logger plugin loaded through its entry point;
* ``plugin+scheduler``: the plugin and ``--scheduler-cls ...TimedScheduler``.

Prints generated tokens/s per run, the median per variant and its ratio to the
baseline (goal: >= 0.99); for the timed-scheduler runs also the mean ``schedule()``
and ``update_from_output()`` times the engine core published.

Scheduler time: first one run with the timed scheduler and
``--enable-logging-iteration-details`` compares the measured ``schedule()`` +
``update_from_output()`` time per step with the best proxy available without the
timed scheduler (step interval minus model execution time) and prints its bias.

``record()`` cost: in the vLLM environment, real ``SchedulerStats`` /
``IterationStats`` / ``FinishedRequestStats`` objects for a busy step (16 running,
4 waiting, one request finishing every 4th step) fed to the plugin's logger and,
as the baseline in the same process, to vLLM's own ``PrometheusStatLogger``;
median microseconds per call over repeats.

    python3 -m benchmarks.plugin_throughput [--rounds 3] [--requests 400] [--skip-servers]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import textwrap
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from infersight.catalog.plugin import MODEL_EXECUTE, SCHEDULER_CALL, STEP_INTERVAL
from infersight.process import http_get
from infersight.vllm_plugin.channel import CALLS
from tests.harness.load import LoadGenerator, LoadShape
from tests.harness.tiny_model import TinyModel, tiny_model
from tests.harness.vllm_env import venv_dir, venv_python
from tests.harness.vllm_plugin_env import plugin_env
from tests.harness.vllm_pool import DEFAULT_ARGS
from tests.harness.vllm_server import BASE_ENV, VLLMServer, VLLMSpec

SCHEDULER = ("--scheduler-cls", "infersight.vllm_plugin.scheduler.TimedScheduler")
WARM = LoadShape(concurrency=4, prompt_tokens=128, max_tokens=16, max_requests=20, max_seconds=60)


def variants(root: Path) -> dict[str, VLLMSpec]:
    env = plugin_env(root)
    return {
        "vllm": VLLMSpec.of(DEFAULT_ARGS),
        "plugin": VLLMSpec.of(DEFAULT_ARGS, env),
        "plugin+scheduler": VLLMSpec.of((*DEFAULT_ARGS, *SCHEDULER), env),
    }


def step_means(metrics_url: str) -> dict[str, float]:
    """Mean seconds per call/step of the plugin's timing histograms, from the server's /metrics."""
    status, body = http_get(metrics_url, timeout=5.0)
    if status != 200:
        raise RuntimeError(f"{metrics_url}: HTTP {status}")
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            name = {SCHEDULER_CALL.name: s.labels.get("call", ""), STEP_INTERVAL.name: "step interval",
                    MODEL_EXECUTE.name: "model execute"}.get(family.name)  # fmt: skip
            if name and s.name.endswith("_sum"):
                sums[name] = s.value
            elif name and s.name.endswith("_count"):
                counts[name] = s.value
    return {name: sums[name] / counts[name] for name in counts if counts[name]}


MAX_ERROR_SHARE = 0.01  # more failed requests than this and the run measures failure, not throughput


def run(model: TinyModel, spec: VLLMSpec, log_dir: Path, shape: LoadShape) -> tuple[float, dict[str, float]]:
    """Generated tokens/s under ``shape`` on a fresh server, and its step means at the end."""
    with VLLMServer(model, spec, log_dir) as server:
        first = model.first_plain_token
        LoadGenerator(server.base_url, server.model_name, model.vocab_size, WARM, first_token=first).run()
        result = LoadGenerator(server.base_url, server.model_name, model.vocab_size, shape, first_token=first).run()
        means = step_means(server.metrics_url)
    if len(result.errors) > MAX_ERROR_SHARE * shape.max_requests or result.ok == 0:
        raise RuntimeError(f"load run failed: {result.summary()}; first error: {result.errors[:1]}")
    if result.errors:  # a dropped keep-alive connection under overload; counted, not fatal
        print(f"  note: {len(result.errors)} of {shape.max_requests} requests failed: {result.errors[0]}", flush=True)
    return result.ok * shape.max_tokens / (result.finished - result.started), means


def _us(means: dict[str, float], *names: str) -> str:
    return ", ".join(f"{n} {means[n] * 1e6:.0f} us" for n in names if n in means)


def throughput(rounds: int, shape: LoadShape) -> None:
    model = tiny_model()
    with tempfile.TemporaryDirectory(prefix="plugin-throughput-") as tmp:
        specs = variants(Path(tmp))
        names = list(specs)
        results: dict[str, list[float]] = {name: [] for name in names}
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                rate, means = run(model, specs[name], Path(tmp), shape)
                results[name].append(rate)
                print(f"round {r + 1} {name:<17} {rate:8.1f} tokens/s {_us(means, *CALLS)}".rstrip(), flush=True)
    base = statistics.median(results["vllm"])
    for name in names:
        median = statistics.median(results[name])
        spread = f"{min(results[name]):.1f}..{max(results[name]):.1f}"
        print(f"{name:<17} median {median:8.1f} tokens/s over {rounds} runs (range {spread}); "
              f"ratio to vllm {median / base:.3f}")  # fmt: skip


def scheduler_proxy(shape: LoadShape) -> None:
    """The measured scheduler time against the best proxy without the timed scheduler.

    The proxy is step interval minus model execution (both from the plugin, the latter
    from --enable-logging-iteration-details): what a step spends outside the model.
    """
    with tempfile.TemporaryDirectory(prefix="plugin-proxy-") as tmp:
        spec = VLLMSpec.of((*DEFAULT_ARGS, *SCHEDULER, "--enable-logging-iteration-details"), plugin_env(Path(tmp)))
        _, m = run(tiny_model(), spec, Path(tmp), shape)
    measured = m["schedule"] + m["update_from_output"]
    proxy = m["step interval"] - m["model execute"]
    print(f"per step: {_us(m, *CALLS, 'model execute', 'step interval')}")
    print(f"proxy (step interval - model execute) {proxy * 1e6:.0f} us vs measured schedule + update_from_output "
          f"{measured * 1e6:.0f} us: the proxy overstates the scheduler by {proxy / measured:.1f}x")


_RECORD = r"""
import json, os, statistics, sys, time
from vllm.engine.arg_utils import EngineArgs
from vllm.v1.engine import FinishReason
from vllm.v1.metrics import stats
from vllm.v1.metrics.loggers import PrometheusStatLogger
from infersight.vllm_plugin.stat_logger import InfersightStatLogger

config = EngineArgs(model=sys.argv[1], load_format="dummy", max_model_len=512, dtype="bfloat16",
                    enforce_eager=True, served_model_name=["tiny"]).create_engine_config()
steps = []
for i in range(64):
    it = stats.IterationStats()
    it.num_generation_tokens = 16
    it.inter_token_latencies_iter = [0.02] * 16
    if i % 4 == 0:
        it.finished_requests.append(stats.FinishedRequestStats(
            finish_reason=FinishReason.LENGTH, e2e_latency=1.2, num_prompt_tokens=128, num_generation_tokens=64,
            queued_time=0.1, prefill_time=0.05, decode_time=1.0, inference_time=1.05,
            mean_time_per_output_token=0.016))
    details = stats.SchedulerIterationDetails(i, 0, 0, 16, 16, 20.0)
    steps.append((stats.SchedulerStats(num_running_reqs=16, num_waiting_reqs=4, iteration_details=details), it))

def per_call_us(logger, calls=20000, repeats=7):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for n in range(calls):
            s, it = steps[n & 63]
            logger.record(s, it)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)

class Empty:
    def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx=0):
        pass

print(json.dumps({
    "plugin": per_call_us(InfersightStatLogger(config, 0)),
    "vllm_prometheus": per_call_us(PrometheusStatLogger(config, [0])),
    "empty_call": per_call_us(Empty()),
}))
"""


def record_cost() -> None:
    model = tiny_model()
    with tempfile.TemporaryDirectory(prefix="plugin-record-") as tmp:
        env = {**os.environ, **BASE_ENV, **plugin_env(Path(tmp))}
        result = subprocess.run(
            [str(venv_python()), "-c", textwrap.dedent(_RECORD), str(model.path)],
            capture_output=True, text=True, timeout=600, env=env, cwd=tmp, check=False,
        )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    us = json.loads(result.stdout.strip().splitlines()[-1])
    plugin, vllm = us["plugin"], us["vllm_prometheus"]
    print(
        f"record() per step, median of 7 x 20000 calls: plugin {plugin:.2f} us, "
        f"vLLM's PrometheusStatLogger {vllm:.2f} us (ratio {plugin / vllm:.2f}), empty call {us['empty_call']:.2f} us"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs per variant (default: 3)")
    parser.add_argument("--requests", type=int, default=400, help="requests per measured run (default: 400)")
    parser.add_argument("--skip-servers", action="store_true", help="only measure record()")
    args = parser.parse_args()
    if not venv_python().exists():
        parser.error(f"no vLLM environment at {venv_dir()}: run tools/setup-vllm.sh")
    record_cost()
    if not args.skip_servers:
        shape = LoadShape(concurrency=16, prompt_tokens=128, max_tokens=64, max_requests=args.requests, max_seconds=600)
        scheduler_proxy(shape)
        throughput(args.rounds, shape)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
