"""The ``gpu`` collector: per-GPU telemetry from NVML that the usual tools cannot show.

* GPU utilization from the driver's sample buffer (``nvmlDeviceGetSamples`` with the
  last timestamp seen), exported as mean and standard deviation over a window:
  the article's "GPU-Util std dev < 15%" target needs every sample, not one
  reading per 30 s.
* HBM bandwidth from GPM (``NVML_GPM_METRIC_DRAM_BW_UTIL``, Hopper+). GPUs without
  GPM get the memory-busy time under a different metric name, never as bandwidth.
* Memory info v2, per-process memory (bounded), power, clocks, temperature and
  clock-event reasons at most 1 Hz; XID events on a background thread; ECC; lost GPUs.

Without a driver the collector logs one line, reports itself down and the sidecar
goes on. The NVML module is injectable (``nvml_module`` argument, or the class
attribute of the same name for code that builds collectors from config alone),
which is how the tests and the simulator run it on ``infersight.testing.fake_nvml``.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from exporters.collector import Collector, Poller, counter, gauge
from exporters.nvml_access import ERROR_REASONS, Nvml
from exporters.nvml_device import GpuDevice
from exporters.nvml_events import XidWatcher
from infersight.catalog import gpu as cat
from infersight.config import Config

log = logging.getLogger(__name__)

UNKNOWN = "unknown"


class GpuCollector(Collector):
    name = "gpu"
    error_reasons = ERROR_REASONS
    nvml_module: ClassVar[Any] = None  # default module for instances built without one (simulator)

    def __init__(self, config: Config, nvml_module: Any = None, clock: Callable[[], float] = time.time) -> None:
        """``clock`` must be the driver's time base: NVML stamps samples with wall-clock microseconds."""
        super().__init__(config)
        self._module = nvml_module if nvml_module is not None else type(self).nvml_module
        self.clock = clock
        self.nvml: Nvml | None = None
        self.devices: list[GpuDevice] = []
        self.disabled: str | None = None
        self._pollers: list[Poller] = []
        self._xid: XidWatcher | None = None

    # ----- lifecycle --------------------------------------------------------------------

    def open(self) -> bool:
        """Initialise NVML and enumerate the GPUs; False (collector disabled) without a driver."""
        try:
            module = self._module if self._module is not None else importlib.import_module("pynvml")
        except ImportError as exc:
            return self._disable("import", f"the pynvml module (nvidia-ml-py) cannot be imported: {exc}")
        nvml = Nvml(module)
        try:
            nvml.call(module.nvmlInit)
        except nvml.error_class as exc:
            return self._disable(nvml.reason(exc), f"NVML unavailable ({exc}): no NVIDIA driver on this host?")
        self.nvml = nvml
        try:
            count = nvml.call(module.nvmlDeviceGetCount)
        except nvml.error_class as exc:
            self.errors.inc(nvml.reason(exc))
            log.error("gpu collector: nvmlDeviceGetCount failed: %s; no GPU will be reported", exc)
            count = 0
        self.devices = [d for d in map(self._open_device, range(count)) if d is not None]
        log.info("gpu collector: %d GPU(s): %s", len(self.devices), ", ".join(d.labels[2] for d in self.devices))
        return True

    def _open_device(self, index: int) -> GpuDevice | None:
        """The GPU at ``index``; a lost one is kept (reported lost), any other failure skips it."""
        assert self.nvml is not None
        nvml, m = self.nvml, self.nvml.m
        handle, uuid, model = None, UNKNOWN, UNKNOWN
        try:
            handle = nvml.call(m.nvmlDeviceGetHandleByIndex, index)
            uuid = nvml.call(m.nvmlDeviceGetUUID, handle)
            model = nvml.call(m.nvmlDeviceGetName, handle)
        except nvml.error_class as exc:
            self.errors.inc(nvml.reason(exc))
            log.error("gpu collector: GPU %d cannot be opened: %s", index, exc)
            if nvml.code(exc) != nvml.lost_code:
                return None
            device = GpuDevice(nvml, index, handle, uuid, model, self.config.gpu, self.errors)
            device.lost = True
            return device
        device = GpuDevice(nvml, index, handle, uuid, model, self.config.gpu, self.errors)
        device.setup_bandwidth()
        return device

    def _disable(self, reason: str, message: str) -> bool:
        self.errors.inc(reason)
        self.disabled = message
        log.warning("gpu collector disabled: %s; the sidecar goes on without GPU metrics", message)
        return False

    def start(self) -> None:
        if not self.open():
            return
        settings = self.config.gpu
        self._pollers = [
            Poller("gpu-samples", 1.0 / settings.poll_hz, self.poll_samples),
            Poller("gpu-slow", settings.slow_poll_seconds, self.poll_slow),
        ]
        for poller in self._pollers:
            poller.start()
        assert self.nvml is not None
        watcher = XidWatcher(self.nvml, self.devices, self.errors)
        self._xid = watcher if watcher.start() else None

    def stop(self) -> None:
        for poller in self._pollers:
            poller.stop()
        self._pollers = []
        if self._xid is not None:
            self._xid.stop()
            self._xid = None
        if self.nvml is not None:
            for device in self.devices:
                device.close()
            try:
                self.nvml.call(self.nvml.m.nvmlShutdown)
            except self.nvml.error_class as exc:
                log.warning("gpu collector: nvmlShutdown failed: %s", exc)
            self.nvml = None

    def healthy(self) -> bool:
        return self.disabled is None

    # ----- polling (the pollers' threads; tests call these directly) ---------------------

    def poll_samples(self) -> None:
        now = self.clock()
        for device in self.devices:
            self._isolated(device, lambda d: d.poll_samples(now))

    def poll_slow(self) -> None:
        now = self.clock()
        for device in self.devices:
            self._isolated(device, lambda d: d.poll_slow(now))

    def _isolated(self, device: GpuDevice, poll: Callable[[GpuDevice], None]) -> None:
        """One GPU's unexpected failure is its own: logged and counted, the next GPU is polled."""
        try:
            poll(device)
        except Exception:
            self.errors.inc("other")
            log.exception("gpu collector: unexpected error polling GPU %s", device.labels[0])

    # ----- rendering --------------------------------------------------------------------

    def collect(self) -> Iterator[Any]:
        if not self.devices:
            return
        now_us = round(self.clock() * 1_000_000)
        gauges = {m: gauge(m) for m in _GAUGES}
        counters = {m: counter(m) for m in _COUNTERS}
        for device in self.devices:
            _render_device(device, now_us, gauges, counters)
        yield from gauges.values()
        yield from counters.values()
        if self.nvml is not None:
            seconds, calls = counter(cat.NVML_CALL_SECONDS), counter(cat.NVML_CALLS)
            seconds.add_metric([], self.nvml.nvml_seconds)
            calls.add_metric([], float(self.nvml.calls))
            yield from (seconds, calls)


_GAUGES = (
    cat.LOST,
    cat.UTIL_MEAN,
    cat.UTIL_STDDEV,
    cat.UTIL_SAMPLES,
    cat.HBM_BANDWIDTH,
    cat.MEMORY_BUSY,
    cat.MEMORY_TOTAL,
    cat.MEMORY_RESERVED,
    cat.MEMORY_USED,
    cat.MEMORY_FREE,
    cat.PROCESS_MEMORY,
    cat.PROCESS_FIRST_SEEN,
    cat.POWER,
    cat.SM_CLOCK,
    cat.MEMORY_CLOCK,
    cat.TEMPERATURE,
)
_COUNTERS = (cat.CLOCK_EVENT_SECONDS, cat.XID_ERRORS, cat.ECC_ERRORS)


def _render_device(device: GpuDevice, now_us: int, gauges: dict[Any, GaugeMetricFamily],
                   counters: dict[Any, CounterMetricFamily]) -> None:  # fmt: skip
    labels = list(device.labels)

    def put(metric: Any, value: float | None, *extra: str) -> None:
        if value is not None:
            family = gauges[metric] if metric in gauges else counters[metric]
            family.add_metric([*labels, *extra], value)

    with device.lock:
        put(cat.LOST, 1.0 if device.lost else 0.0)
        for reason, seconds in device.clock_event_seconds.items():
            put(cat.CLOCK_EVENT_SECONDS, seconds, reason)
        for code, count in device.xid.items():
            put(cat.XID_ERRORS, count, code)
        for kind, count in device.ecc.items():
            put(cat.ECC_ERRORS, count, kind)
        if device.lost:
            return  # last readings of a lost GPU would be stale: only the counters stay
        device.util.window.expire(now_us)
        util = device.util.window.stats()
        put(cat.UTIL_SAMPLES, float(util.count))
        put(cat.UTIL_MEAN, _ratio(util.mean))
        put(cat.UTIL_STDDEV, _ratio(util.stddev))
        if device.bandwidth is not None:
            device.bandwidth.expire(now_us)
            put(cat.HBM_BANDWIDTH, _ratio(device.bandwidth.stats().mean), cat.SOURCE_GPM)
        if device.memory_busy is not None:
            device.memory_busy.window.expire(now_us)
            put(cat.MEMORY_BUSY, _ratio(device.memory_busy.window.stats().mean), cat.SOURCE_MEMORY_BUSY)
        memory = device.memory
        if memory is not None:
            put(cat.MEMORY_TOTAL, float(memory.total))
            put(cat.MEMORY_RESERVED, None if memory.reserved is None else float(memory.reserved))
            put(cat.MEMORY_USED, float(memory.used))
            put(cat.MEMORY_FREE, float(memory.free))
        for process in device.processes:
            put(cat.PROCESS_MEMORY, float(process.used_bytes), str(process.pid), process.name)
            put(cat.PROCESS_FIRST_SEEN, process.first_seen, str(process.pid), process.name)
        put(cat.POWER, device.power_watts)
        put(cat.SM_CLOCK, device.sm_clock_hz)
        put(cat.MEMORY_CLOCK, device.memory_clock_hz)
        put(cat.TEMPERATURE, device.temperature_c)


def _ratio(percent: float | None) -> float | None:
    """Driver percents (0..100) as the 0..1 ratios the catalog promises."""
    return None if percent is None else percent / 100.0
