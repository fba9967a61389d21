"""The ``gpu`` collector on the fake NVML: window statistics, sample timestamps, GPM and its
fallback, lost GPUs, XIDs, isolation of failures, and the sidecar without a driver."""

from __future__ import annotations

import functools
import json
import logging
import math
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pynvml
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporters.collector import CollectorSet
from exporters.collectors.gpu import GpuCollector
from exporters.nvml_access import ERROR_REASONS
from exporters.nvml_window import SampleWindow
from exporters.server import Sidecar
from infersight.catalog import exporter as health
from infersight.catalog import gpu as cat
from infersight.config import Config, parse_config
from infersight.process import wait_until
from infersight.testing.fake_nvml import GIB, FakeGpu, FakeNVML
from tests.harness.monitoring import api, running_prometheus, write_prometheus_dir

PERIOD = 1 / 6  # the fake driver's sample period
ROOT = Path(__file__).resolve().parents[1]


def config(**gpu: object) -> Config:
    return parse_config({"gpu": gpu})


def render(collector: GpuCollector) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CollectorSet([collector], "test"))
    return generate_latest(registry).decode()


def samples(collector: GpuCollector, metric: object) -> dict[tuple[tuple[str, str], ...], float]:
    """Rendered samples of one catalog metric: sorted label pairs -> value."""
    out = {}
    for family in text_string_to_metric_families(render(collector)):
        for s in family.samples:
            if s.name == str(metric):
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def value(collector: GpuCollector, metric: object, **labels: str) -> float | None:
    """The one sample of ``metric`` whose labels include ``labels`` (None when absent)."""
    found = [v for k, v in samples(collector, metric).items() if set(labels.items()) <= set(k)]
    assert len(found) <= 1, found
    return found[0] if found else None


def errors(collector: GpuCollector) -> dict[str, float]:
    return dict(collector.errors.items())


@pytest.fixture
def fake() -> FakeNVML:
    return FakeNVML([FakeGpu(), FakeGpu(gpm=False, name="NVIDIA A10G")])


@pytest.fixture
def collector(fake: FakeNVML) -> Iterator[GpuCollector]:
    c = GpuCollector(Config(), nvml_module=fake, clock=fake.time)
    assert c.open()
    yield c
    c.stop()


def run(fake: FakeNVML, c: GpuCollector, seconds: float, poll_hz: float = 10.0) -> None:
    """Drive the collector as its pollers would: samples at ``poll_hz``, slow reads every second."""
    steps = round(seconds * poll_hz)
    for step in range(1, steps + 1):
        fake.advance(1 / poll_hz)
        c.poll_samples()
        if step % round(poll_hz) == 0:
            c.poll_slow()


# ----- window statistics --------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=1, max_value=400_000), min_size=1, max_size=300),
    values=st.lists(st.integers(min_value=0, max_value=100), min_size=300, max_size=300),
    window=st.floats(min_value=0.1, max_value=30.0),
    floats=st.booleans(),
)
def test_window_matches_numpy(gaps: list[int], values: list[int], window: float, floats: bool) -> None:
    """Mean and population std dev equal numpy's over exactly the samples in ``(now - span, now]``."""
    w = SampleWindow(window)
    ts = np.cumsum(gaps) + 1_700_000_000_000_000
    vals = [v / 3 if floats else v for v in values[: len(ts)]]
    for i, (t, v) in enumerate(zip(ts, vals, strict=True)):
        w.add(int(t), v)
        if i % 7 == 0:
            w.expire(int(t))
    now = int(ts[-1])
    w.expire(now)
    kept = np.array([v for t, v in zip(ts, vals, strict=True) if t > now - w.span_us], dtype=float)
    stats = w.stats()
    assert stats.count == len(kept)
    assert stats.mean == pytest.approx(kept.mean(), abs=1e-9)
    assert stats.stddev == pytest.approx(kept.std(), abs=1e-6)


def test_empty_window_has_no_mean() -> None:
    w = SampleWindow(1.0)
    w.add(1_000_000, 50)
    w.expire(2_000_000)
    assert (w.stats().count, w.stats().mean, w.stats().stddev) == (0, None, None)


def test_exported_utilization_matches_numpy_over_scripted_stream(fake: FakeNVML, collector: GpuCollector) -> None:
    rng = np.random.default_rng(7)
    script = rng.integers(0, 101, size=600).tolist()  # 100 s of driver samples
    fake.gpus[0].utilization.extend(script)
    run(fake, collector, 100.0)
    in_window = np.array(script[-round(60 / PERIOD) :], dtype=float)  # the last 60 s: 360 samples
    assert value(collector, cat.UTIL_SAMPLES, gpu="0") == len(in_window) == 360
    assert value(collector, cat.UTIL_MEAN, gpu="0") == pytest.approx(in_window.mean() / 100, abs=1e-12)
    assert value(collector, cat.UTIL_STDDEV, gpu="0") == pytest.approx(in_window.std() / 100, abs=1e-12)


def test_window_length_comes_from_config(fake: FakeNVML) -> None:
    c = GpuCollector(config(sample_window_seconds=10), nvml_module=fake, clock=fake.time)
    assert c.open()
    fake.gpus[0].utilization.extend([100] * 60 + [0] * 60)  # 10 s busy, then 10 s idle
    run(fake, c, 20.0)
    assert value(c, cat.UTIL_SAMPLES, gpu="0") == 60
    assert value(c, cat.UTIL_MEAN, gpu="0") == 0.0
    c.stop()


# ----- timestamps across calls ---------------------------------------------------------------------


def test_every_sample_counted_once_across_irregular_polls(fake: FakeNVML, collector: GpuCollector) -> None:
    """Polls faster than the driver (NotFound), slower (several samples), and in between."""
    calls: list[int] = []
    real_get = fake.nvmlDeviceGetSamples

    def spy(device: object, sampling_type: int, timeStamp: int) -> object:  # noqa: N803 - pynvml's name
        if sampling_type == pynvml.NVML_GPU_UTILIZATION_SAMPLES and device is not None:
            calls.append(timeStamp)
        return real_get(device, sampling_type, timeStamp)

    fake.nvmlDeviceGetSamples = spy  # type: ignore[method-assign]
    fake.gpus[0].utilization.extend(range(1, 201))  # every sample has its own value
    steps = (0.05, 0.05, 0.5, 0.01, 2.0, 0.17, 0.3, 3.0, 0.02, 10.0)  # 16.1 s: 96 driver samples
    for step in steps:
        fake.advance(step)
        collector.poll_samples()
    produced = np.arange(1, 97, dtype=float)
    assert value(collector, cat.UTIL_SAMPLES, gpu="0") == len(produced)  # none missed, none twice
    assert value(collector, cat.UTIL_MEAN, gpu="0") == pytest.approx(produced.mean() / 100)
    assert value(collector, cat.UTIL_STDDEV, gpu="0") == pytest.approx(produced.std() / 100)
    # Each call passes the newest timestamp taken so far (two GPUs, so every other call is GPU 0).
    gpu0 = calls[::2]
    assert gpu0[0] == 0 and gpu0 == sorted(gpu0) and len(set(gpu0)) < len(gpu0)


def test_idle_gpu_window_empties_and_mean_disappears(fake: FakeNVML, collector: GpuCollector) -> None:
    fake.gpus[0].utilization.extend([80] * 30)
    run(fake, collector, 5.0)
    assert value(collector, cat.UTIL_SAMPLES, gpu="0") == 30
    fake.gpus[0].samples_paused = True  # the driver stops sampling an idle GPU: NotFound from now on
    run(fake, collector, 61.0)
    assert value(collector, cat.UTIL_SAMPLES, gpu="0") == 0
    assert value(collector, cat.UTIL_MEAN, gpu="0") is None
    assert value(collector, cat.UTIL_STDDEV, gpu="0") is None
    assert "not_found" not in {k for k, v in errors(collector).items() if v}  # an empty buffer is no error


# ----- HBM bandwidth: GPM, and the fallback that is never called bandwidth -------------------------


def test_gpm_bandwidth_mean_and_memory_busy_fallback(fake: FakeNVML, collector: GpuCollector) -> None:
    fake.gpus[0].dram_bandwidth.extend([40.0] * 180 + [80.0] * 180)  # 30 s at 40 %, 30 s at 80 %
    fake.gpus[1].memory_busy.extend([90] * 360)
    run(fake, collector, 60.0)
    bw = samples(collector, cat.HBM_BANDWIDTH)
    assert list(bw) == [tuple(sorted({"gpu": "0", "uuid": fake.gpus[0].uuid, "model": fake.gpus[0].name,
                                       "source": cat.SOURCE_GPM}.items()))]  # fmt: skip
    # GPM intervals of 1 s from t=1 s to t=60 s; the value steps from 40 to 80 at t=30 s.
    assert next(iter(bw.values())) == pytest.approx((29 * 0.4 + 30 * 0.8) / 59)
    busy = samples(collector, cat.MEMORY_BUSY)
    assert [dict(k)["gpu"] for k in busy] == ["1"] and all(dict(k)["source"] == cat.SOURCE_MEMORY_BUSY for k in busy)
    assert next(iter(busy.values())) == pytest.approx(0.9)
    assert value(collector, cat.HBM_BANDWIDTH, gpu="1") is None  # busy time is never exported as bandwidth


def test_gpm_missing_from_old_driver_falls_back_without_error(fake: FakeNVML) -> None:
    fake.fail("nvmlGpmQueryDeviceSupport", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, times=None)
    c = GpuCollector(Config(), nvml_module=fake, clock=fake.time)
    assert c.open()
    run(fake, c, 3.0)
    assert samples(c, cat.HBM_BANDWIDTH) == {}
    assert {dict(k)["gpu"] for k in samples(c, cat.MEMORY_BUSY)} == {"0", "1"}
    assert not any(errors(c).values())
    c.stop()


# ----- lost GPU, XID, isolation ---------------------------------------------------------------------


def test_gpu_lost_mid_run(fake: FakeNVML, collector: GpuCollector) -> None:
    fake.gpus[1].utilization.extend([50] * 1000)
    run(fake, collector, 5.0)
    assert value(collector, cat.LOST, gpu="1") == 0.0
    fake.lose(1)
    run(fake, collector, 5.0)
    calls_after_loss = fake.calls["nvmlDeviceGetPowerUsage"]
    run(fake, collector, 5.0)
    assert value(collector, cat.LOST, gpu="1") == 1.0
    assert value(collector, cat.LOST, gpu="0") == 0.0
    for gauge_metric in (cat.UTIL_MEAN, cat.MEMORY_USED, cat.POWER, cat.MEMORY_BUSY):
        assert value(collector, gauge_metric, gpu="1") is None  # no stale readings
    assert value(collector, cat.XID_ERRORS, gpu="1", xid="48") == 0.0  # counters stay
    assert value(collector, cat.UTIL_SAMPLES, gpu="0") == 90  # GPU 0 went on
    assert fake.calls["nvmlDeviceGetPowerUsage"] - calls_after_loss == 5  # only GPU 0 is still asked
    assert errors(collector)["gpu_lost"] == 1


def test_gpu_lost_or_unreadable_at_start(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNVML(3)
    fake.lose(1, xid=None)
    fake.fail("nvmlDeviceGetUUID", pynvml.NVML_ERROR_NO_PERMISSION, gpu=2)
    c = GpuCollector(Config(), nvml_module=fake, clock=fake.time)
    assert c.open()
    run(fake, c, 2.0)
    assert samples(c, cat.LOST) == {
        (("gpu", "0"), ("model", fake.gpus[0].name), ("uuid", fake.gpus[0].uuid)): 0.0,
        (("gpu", "1"), ("model", "unknown"), ("uuid", "unknown")): 1.0,  # lost before it could be named
    }  # GPU 2 could not be opened for another reason: skipped, counted and logged
    assert errors(c)["no_permission"] == 1 and errors(c)["gpu_lost"] == 1
    assert any("GPU 2 cannot be opened" in r.getMessage() for r in caplog.records)
    assert value(c, cat.UTIL_SAMPLES, gpu="0") == 12
    c.stop()


def test_xid_events_counted_by_bounded_code(fake: FakeNVML) -> None:
    c = GpuCollector(Config(), nvml_module=fake, clock=fake.time)
    c.start()
    try:
        fake.emit_xid(0, 48)
        fake.emit_xid(0, 48)
        fake.emit_xid(0, 4242)  # not in gpu.xid_codes
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and value(c, cat.XID_ERRORS, gpu="0", xid=cat.XID_OTHER) != 1:
            time.sleep(0.02)
        assert value(c, cat.XID_ERRORS, gpu="0", xid="48") == 2
        assert value(c, cat.XID_ERRORS, gpu="0", xid=cat.XID_OTHER) == 1
        assert sum(samples(c, cat.XID_ERRORS).values()) == 3
        codes = {dict(k)["xid"] for k in samples(c, cat.XID_ERRORS)}
        assert codes == {*(str(x) for x in Config().gpu.xid_codes), cat.XID_OTHER}
    finally:
        started = time.monotonic()
        c.stop()
    assert time.monotonic() - started < 2.0  # the event thread notices stop within one wait


def test_one_failing_reading_or_gpu_does_not_stop_the_others(fake: FakeNVML, collector: GpuCollector) -> None:
    fake.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_UNKNOWN, gpu=0, times=None)
    fake.fail("nvmlDeviceGetClockInfo", pynvml.NVML_ERROR_IRQ_ISSUE, gpu=0, times=None)  # no reason of its own

    def broken(handle: object) -> object:
        raise RuntimeError("a bug, not an NVML error")

    real_memory = fake.nvmlDeviceGetMemoryInfo
    fake.nvmlDeviceGetComputeRunningProcesses = broken  # type: ignore[method-assign]
    run(fake, collector, 3.0)
    assert value(collector, cat.POWER, gpu="0") is None
    assert value(collector, cat.SM_CLOCK, gpu="0") is None
    assert value(collector, cat.TEMPERATURE, gpu="0") == 55.0  # the same GPU's other readings
    assert value(collector, cat.POWER, gpu="1") == 350.0
    assert value(collector, cat.MEMORY_TOTAL, gpu="1") == 80 * GIB
    assert real_memory is not None
    counts = errors(collector)
    assert counts["unknown"] == 3 and counts["other"] >= 3
    assert set(counts) == {"collect", *ERROR_REASONS, "other"}  # a bounded reason set


def test_unsupported_readings_are_skipped_and_counted_once(fake: FakeNVML) -> None:
    fake.gpus[0].ecc = False
    fake.gpus[0].memory_v2 = False
    c = GpuCollector(Config(), nvml_module=fake, clock=fake.time)
    assert c.open()
    run(fake, c, 5.0)
    assert value(c, cat.ECC_ERRORS, gpu="0", type="corrected") is None
    assert value(c, cat.ECC_ERRORS, gpu="1", type="uncorrected") == 0.0
    assert fake.calls["nvmlDeviceGetTotalEccErrors"] == 1 + 2 * 5  # GPU 0 asked once, GPU 1 twice a tick
    assert errors(c)["not_supported"] == 1
    assert value(c, cat.MEMORY_RESERVED, gpu="0") is None  # memory info v1: no reserved figure
    assert value(c, cat.MEMORY_TOTAL, gpu="0") == 80 * GIB
    assert value(c, cat.MEMORY_RESERVED, gpu="1") == fake.gpus[1].memory_reserved
    c.stop()


# ----- memory, processes, slow readings -------------------------------------------------------------


def test_processes_bounded_by_allow_list_and_top_n(fake: FakeNVML) -> None:
    gpu = fake.gpus[0]
    for pid in range(100, 112):
        gpu.set_process(pid, f"/opt/venv/bin/vllm-worker-{pid}", (pid - 99) * GIB)
    gpu.set_process(200, "/usr/bin/Xorg", 50 * GIB)
    c = GpuCollector(config(max_processes_per_gpu=3, process_allow_list=["vllm*"]), nvml_module=fake,
                     clock=fake.time)  # fmt: skip
    assert c.open()
    run(fake, c, 2.0)
    first = samples(c, cat.PROCESS_MEMORY)
    assert sorted((dict(k)["pid"], dict(k)["process"], v) for k, v in first.items()) == [
        ("109", "vllm-worker-109", 10 * GIB), ("110", "vllm-worker-110", 11 * GIB),
        ("111", "vllm-worker-111", 12 * GIB),
    ]  # fmt: skip
    seen = value(c, cat.PROCESS_FIRST_SEEN, pid="111")
    assert seen == pytest.approx(fake.time() - 1.0)  # first slow tick, one second ago
    gpu.set_process(111, "/opt/venv/bin/vllm-worker-111", 13 * GIB)
    del gpu.processes[110]
    run(fake, c, 2.0)
    assert {dict(k)["pid"] for k in samples(c, cat.PROCESS_MEMORY)} == {"108", "109", "111"}
    assert value(c, cat.PROCESS_MEMORY, pid="111") == 13 * GIB
    assert value(c, cat.PROCESS_FIRST_SEEN, pid="111") == seen  # unchanged while the process lives
    assert value(c, cat.MEMORY_USED, gpu="0") == (sum(range(1, 11)) + 13 + 50) * GIB
    assert fake.calls["nvmlSystemGetProcessName"] == 13  # names looked up once per process
    c.stop()


def test_slow_calls_only_on_the_slow_tick(fake: FakeNVML, collector: GpuCollector) -> None:
    for _ in range(20):
        fake.advance(0.1)
        collector.poll_samples()
    slow = ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetClockInfo", "nvmlDeviceGetTemperatureV",
            "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetMemoryInfo", "nvmlGpmSampleGet")  # fmt: skip
    assert all(fake.calls[name] == 0 for name in slow)
    assert fake.calls["nvmlDeviceGetSamples"] == 20 * 3  # util on both GPUs, memory-busy on the non-GPM one


def test_nvml_time_and_calls_are_exported(fake: FakeNVML, collector: GpuCollector) -> None:
    run(fake, collector, 3.0)
    assert value(collector, cat.NVML_CALLS) == sum(fake.calls.values())  # every call, counted once
    assert value(collector, cat.NVML_CALL_SECONDS) > 0


def test_slow_poll_faster_than_1hz_is_refused() -> None:
    with pytest.raises(ValueError, match=r"gpu\.slow_poll_seconds"):
        config(slow_poll_seconds=0.5)


def test_clock_event_seconds_accumulate_per_active_reason(fake: FakeNVML, collector: GpuCollector) -> None:
    fake.gpus[0].clock_event_reasons = (
        pynvml.nvmlClocksEventReasonHwThermalSlowdown | pynvml.nvmlClocksEventReasonSwPowerCap
    )
    run(fake, collector, 11.0)  # 11 slow ticks: 10 intervals of 1 s
    assert value(collector, cat.CLOCK_EVENT_SECONDS, gpu="0", reason="hw_thermal_slowdown") == pytest.approx(10.0)
    assert value(collector, cat.CLOCK_EVENT_SECONDS, gpu="0", reason="sw_power_cap") == pytest.approx(10.0)
    assert value(collector, cat.CLOCK_EVENT_SECONDS, gpu="0", reason="hw_slowdown") == 0.0
    assert value(collector, cat.CLOCK_EVENT_SECONDS, gpu="1", reason="hw_thermal_slowdown") == 0.0
    assert value(collector, cat.POWER, gpu="0") == 350.0
    assert value(collector, cat.SM_CLOCK, gpu="0") == 1980e6
    assert value(collector, cat.MEMORY_CLOCK, gpu="0") == 2619e6


def test_exposition_passes_promtool_check_metrics(fake: FakeNVML, collector: GpuCollector) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Prometheus 2.42) must be installed"
    fake.gpus[0].set_process(1, "python3", GIB)
    run(fake, collector, 3.0)
    text = render(collector)
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(name in text for name in (cat.UTIL_STDDEV.name, cat.HBM_BANDWIDTH.name, cat.MEMORY_BUSY.name))


# ----- no driver: disabled, reported down, the sidecar keeps serving ----------------------------------


def test_no_driver_disables_the_collector_with_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNVML(1)
    fake.fail("nvmlInit", pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, times=None)
    c = GpuCollector(Config(), nvml_module=fake, clock=fake.time)
    with caplog.at_level(logging.INFO):
        c.start()
        text = render(c)
        c.stop()
    lines = [r for r in caplog.records if r.name.startswith("exporters")]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    message = lines[0].getMessage()
    assert "gpu collector disabled" in message and "NVML Shared Library Not Found" in message
    assert 'infersight_collector_up{collector="gpu"} 0.0' in text
    assert cat.UTIL_MEAN.name not in text
    assert errors(c)["library_not_found"] == 1


def test_real_pynvml_without_driver_disables_the_collector() -> None:
    """The installed pynvml on this (GPU-less) machine: NVML's own failure path, no fake."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present: this test covers hosts without one")
    c = GpuCollector(Config())
    c.start()
    assert not c.healthy() and c.devices == []
    assert sum(errors(c).values()) == 1
    c.stop()


def test_sidecar_serves_with_gpu_collector_down(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNVML(1)
    fake.fail("nvmlInit", pynvml.NVML_ERROR_DRIVER_NOT_LOADED, times=None)
    monkeypatch.setattr(GpuCollector, "nvml_module", fake)  # how code that builds from config injects it
    cfg = parse_config({"exporter": {"port": 0, "collectors": {"vllm": False, "business": False, "gpu": True}}})
    sidecar = Sidecar(cfg)
    sidecar.start()
    try:
        base = f"http://127.0.0.1:{sidecar.port}"
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
            body = response.read().decode()
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
            health_body = json.loads(response.read())
    finally:
        sidecar.stop()
    assert f'{health.COLLECTOR_UP.name}{{collector="gpu"}} 0.0' in body
    assert 'reason="driver_not_loaded"} 1.0' in body
    assert health_body["collectors"] == {"gpu": False}


# ----- the dashboard's queries on a real Prometheus scraping the sidecar ------------------------------


class RealtimeDriver:
    """Moves the fake driver's clock with wall time and keeps events coming (XIDs, ECC errors)."""

    def __init__(self, fake: FakeNVML) -> None:
        self.fake = fake
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-driver", daemon=True)

    def __enter__(self) -> RealtimeDriver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        last, tick = time.monotonic(), 0
        while not self._stop.wait(0.05):
            now = time.monotonic()
            self.fake.advance(now - last)
            last, tick = now, tick + 1
            if tick % 40 == 0:  # every 2 s
                self.fake.emit_xid(0, 48)
                self.fake.gpus[1].ecc_corrected += 1


@pytest.mark.integration
def test_dashboard_queries_return_data_from_real_prometheus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, monitoring_binaries: None
) -> None:
    """Every panel query of the generated GPU dashboard, run by Prometheus 2.42 on what it scraped."""
    fake = FakeNVML([FakeGpu(), FakeGpu(gpm=False, name="NVIDIA A10G")])  # its clock starts now: the sidecar's
    fake.gpus[0].utilization.fn = lambda t: 50 + 40 * math.sin(t)
    fake.gpus[0].dram_bandwidth.fn = lambda t: 70.0
    fake.gpus[1].memory_busy.fn = lambda t: 30.0
    fake.gpus[0].set_process(4242, "/usr/bin/python3", 30 * GIB)
    fake.gpus[0].clock_event_reasons = pynvml.nvmlClocksEventReasonHwThermalSlowdown
    fake.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_UNKNOWN, gpu=1, times=None)
    monkeypatch.setattr(GpuCollector, "nvml_module", fake)
    cfg = parse_config(
        {
            "exporter": {"port": 0, "collectors": {"vllm": False, "business": False, "gpu": True}},
            "prometheus": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        }
    )
    board = json.loads((ROOT / "dashboards" / "generated" / "infersight-gpu.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 20
    variables = {"$instance": ".*", "$uuid": ".*", "$__rate_interval": "10s"}
    concrete = [functools.reduce(lambda e, kv: e.replace(*kv), variables.items(), expr) for expr in exprs]
    missing = list(concrete)
    with RealtimeDriver(fake):
        sidecar = Sidecar(cfg)
        sidecar.start()
        try:
            prom_dir = tmp_path / "prometheus"
            config_file = write_prometheus_dir(prom_dir, cfg, [], [f"127.0.0.1:{sidecar.port}"], [])
            with running_prometheus(prom_dir, config_file) as url:

                def all_answer() -> bool:
                    missing[:] = [q for q in missing if not api(url, "/api/v1/query", query=q)["result"]]
                    return not missing

                wait_until(all_answer, 60, "data for every GPU dashboard query", 0.5, context=lambda: str(missing))
        finally:
            sidecar.stop()
    assert missing == []
