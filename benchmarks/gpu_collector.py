"""CPU cost of the ``gpu`` collector per GPU per second, and the ``/metrics`` render time.

Drives the collector on the fake NVML exactly as its pollers would (samples at
10 Hz, slow reads at 1 Hz) over simulated time, for 1 and 8 GPUs, and splits the
thread's CPU time into:

* NVML: time inside the NVML module's functions (here the fake's, measured with a
  thin wrapper around each function; on a real GPU the driver's costs differ:
  ~0.8 ms for nvmlDeviceGetSamples, ~3.6 ms for power, reported on an H100);
* collector: everything else the collector does (window math, parsing samples,
  bookkeeping), the part this code controls.

Goal: collector CPU under 1 % of one core for 8 GPUs. Render time is the median
of ``generate_latest`` over the sidecar registry, against a baseline in the same
process: the same families, built once and replayed, so the baseline is
prometheus_client's text encoding alone and the ratio is what ``collect()`` adds.

Run: ``python3 benchmarks/gpu_collector.py`` (options: ``--seconds``, ``--repeats``).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import CollectorRegistry, generate_latest

from exporters.collector import CollectorSet
from exporters.collectors.gpu import GpuCollector
from infersight.config import Config
from infersight.testing.fake_nvml import GIB, FakeGpu, FakeNVML

POLL_HZ = 10


class TimedModule:
    """Forwards to the fake, adding the CPU time spent inside each ``nvml*`` function to ``seconds``."""

    def __init__(self, module: FakeNVML) -> None:
        self._module = module
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if name.startswith("nvml") and inspect.ismethod(value):
            value = self._timed(value)
        setattr(self, name, value)  # later lookups skip __getattr__
        return value

    def _timed(self, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.thread_time() - started

        return timed


def make_fake(gpus: int) -> FakeNVML:
    fake = FakeNVML([FakeGpu() for _ in range(gpus)])
    for index, gpu in enumerate(fake.gpus):
        gpu.utilization.fn = lambda t: 50 + 45 * ((int(t * 6) % 7) - 3) / 3  # a jagged 5..95 % pattern
        gpu.dram_bandwidth.fn = lambda t: 70.0
        for pid in range(2):
            gpu.set_process(1000 + 10 * index + pid, "/usr/bin/python3", (20 + pid) * GIB)
    return fake


def measure_cpu(gpus: int, seconds: int) -> tuple[float, float]:
    """(collector CPU, NVML CPU) in seconds over ``seconds`` of simulated polling."""
    fake = make_fake(gpus)
    timed = TimedModule(fake)
    collector = GpuCollector(Config(), nvml_module=timed, clock=fake.time)
    assert collector.open()
    timed.seconds = 0.0
    collector_cpu = 0.0
    for step in range(1, seconds * POLL_HZ + 1):
        fake.advance(1 / POLL_HZ)  # the simulated driver: not the collector's cost
        started = time.thread_time()
        collector.poll_samples()
        if step % POLL_HZ == 0:
            collector.poll_slow()
        collector_cpu += time.thread_time() - started
    nvml_cpu = timed.seconds
    collector.stop()
    return collector_cpu - nvml_cpu, nvml_cpu


def render_ms(registries: list[CollectorRegistry], rounds: int) -> list[float]:
    """Median ms of generate_latest per registry, interleaved so load changes hit every one alike."""
    times: list[list[float]] = [[] for _ in registries]
    for _ in range(rounds):
        for registry, out in zip(registries, times, strict=True):
            started = time.perf_counter()
            generate_latest(registry)
            out.append(time.perf_counter() - started)
    return [statistics.median(t) * 1000 for t in times]


class Replay:
    """A registry collector yielding the same prebuilt families every time: exposition cost only."""

    def __init__(self, families: list[Any]) -> None:
        self.families = families

    def collect(self) -> list[Any]:
        return self.families


def measure_render(gpus: int, rounds: int) -> tuple[float, float, int]:
    """(median render ms with the GPU collector, baseline ms replaying its output, samples rendered)."""
    fake = make_fake(gpus)
    collector = GpuCollector(Config(), nvml_module=fake, clock=fake.time)
    assert collector.open()
    for step in range(1, 60 * POLL_HZ + 1):  # a full 60 s window of samples
        fake.advance(1 / POLL_HZ)
        collector.poll_samples()
        if step % POLL_HZ == 0:
            collector.poll_slow()
    live, replay = CollectorRegistry(auto_describe=False), CollectorRegistry(auto_describe=False)
    collector_set = CollectorSet([collector], "bench")
    live.register(collector_set)
    replay.register(Replay(list(collector_set.collect())))

    def samples(registry: CollectorRegistry) -> list[str]:  # series, not values (durations differ per run)
        return [line.rsplit(" ", 1)[0] for line in generate_latest(registry).decode().splitlines() if line[0] != "#"]

    assert samples(live) == samples(replay)
    live_ms, replay_ms = render_ms([live, replay], rounds)
    result = live_ms, replay_ms, len(samples(live))
    collector.stop()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60, help="simulated seconds per run (default 60)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per GPU count; medians are printed")
    parser.add_argument("--render-rounds", type=int, default=200)
    args = parser.parse_args()

    print(f"gpu collector, {POLL_HZ} Hz sample polling, 1 Hz slow reads, {args.seconds} s simulated, "
          f"median of {args.repeats} runs (thread CPU time)")  # fmt: skip
    per_gpu: dict[int, float] = {}
    for gpus in (1, 8):
        runs = [measure_cpu(gpus, args.seconds) for _ in range(args.repeats)]
        own = statistics.median(r[0] for r in runs)
        nvml = statistics.median(r[1] for r in runs)
        per_gpu[gpus] = own / args.seconds / gpus
        print(
            f"  {gpus} GPU(s): collector {own / args.seconds * 1e3:7.3f} ms CPU/s = "
            f"{own / args.seconds * 100:6.3f} % of one core "
            f"({per_gpu[gpus] * 1e6:6.1f} us per GPU per second); "
            f"inside NVML (fake) {nvml / args.seconds * 1e3:7.3f} ms/s"
        )
    print(f"  per-GPU cost, 8 GPUs vs 1 GPU: {per_gpu[8] / per_gpu[1]:.2f}x")
    goal = per_gpu[8] * 8 * 100
    print(f"  goal < 1 % of one core for 8 GPUs (NVML excluded): {goal:.3f} % -> {'met' if goal < 1 else 'NOT met'}")

    print(f"/metrics render (generate_latest), median of {args.render_rounds}:")
    for gpus in (1, 8):
        with_gpu, baseline, series = measure_render(gpus, args.render_rounds)
        print(
            f"  {gpus} GPU(s): {with_gpu:6.3f} ms for {series} samples; baseline (same families replayed) "
            f"{baseline:6.3f} ms; ratio {with_gpu / baseline:4.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
