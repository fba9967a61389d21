"""One GPU as the ``gpu`` collector sees it: the NVML reads and the state they leave behind.

Two cadences, as the driver's costs demand: ``poll_samples`` (fast, ``gpu.poll_hz``)
drains the driver's sample buffers, which is cheap and loses nothing as long as it
runs more often than the buffer wraps (~16 s); ``poll_slow`` (``gpu.slow_poll_seconds``,
at most 1 Hz) makes the slow calls: memory, processes, power, clocks, temperature,
clock-event reasons, ECC and GPM. Each reading fails on its own: its error is counted
by reason and the others go on. ``GpuIsLost`` from any call marks the GPU lost and
stops polling it.
"""

from __future__ import annotations

import contextlib
import ctypes
import fnmatch
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exporters.collector import BoundedCounts
from exporters.nvml_access import Fallbacks, Nvml, UnsupportedError
from exporters.nvml_window import SampleWindow
from infersight.catalog.gpu import CLOCK_EVENT_REASONS, ECC_TYPES, XID_OTHER
from infersight.config import GPU

log = logging.getLogger(__name__)

LOG_REPEAT_SECONDS = 60.0  # the same failure of the same reading on the same GPU is logged again after this
MAX_NAME_CHARS = 64

# nvmlValueType_t -> the c_nvmlValue_t union member holding the sample.
_VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
# Clock-event reason label -> pynvml bit-mask constant.
_REASON_BITS = {
    "gpu_idle": "nvmlClocksEventReasonGpuIdle",
    "applications_clocks_setting": "nvmlClocksEventReasonApplicationsClocksSetting",
    "sw_power_cap": "nvmlClocksEventReasonSwPowerCap",
    "hw_slowdown": "nvmlClocksEventReasonHwSlowdown",
    "sync_boost": "nvmlClocksEventReasonSyncBoost",
    "sw_thermal_slowdown": "nvmlClocksEventReasonSwThermalSlowdown",
    "hw_thermal_slowdown": "nvmlClocksEventReasonHwThermalSlowdown",
    "hw_power_brake_slowdown": "nvmlClocksEventReasonHwPowerBrakeSlowdown",
    "display_clock_setting": "nvmlClocksEventReasonDisplayClockSetting",
}
assert tuple(_REASON_BITS) == CLOCK_EVENT_REASONS


def handle_address(handle: Any) -> int | None:
    """The address in an NVML device handle (a ctypes pointer): how events name their GPU."""
    return ctypes.cast(handle, ctypes.c_void_p).value


@dataclass
class SampleStream:
    """One driver sample buffer and the newest timestamp already taken from it."""

    sampling_type: int
    window: SampleWindow
    last_us: int = 0


@dataclass(frozen=True)
class Memory:
    total: int
    reserved: int | None  # None with memory info v1 (older drivers)
    used: int
    free: int


@dataclass(frozen=True)
class Process:
    pid: int
    name: str
    used_bytes: int
    first_seen: float


class GpuDevice:
    """State and reads of one GPU. Pollers write under ``lock``; the collector renders under it."""

    def __init__(self, nvml: Nvml, index: int, handle: Any, uuid: str, model: str, settings: GPU,
                 errors: BoundedCounts) -> None:  # fmt: skip
        self.nvml, self.m = nvml, nvml.m
        self.index, self.handle = index, handle
        self.labels = (str(index), uuid, model)
        self.address = handle_address(handle)
        self.settings = settings
        self.errors = errors
        self.lock = threading.Lock()
        self.lost = False
        self.fallbacks = Fallbacks(nvml)
        window = settings.sample_window_seconds
        self.util = SampleStream(self.m.NVML_GPU_UTILIZATION_SAMPLES, SampleWindow(window))
        self.memory_busy: SampleStream | None = None  # only without GPM
        self.bandwidth: SampleWindow | None = None  # GPM DRAM bandwidth, percent per slow tick
        self.memory: Memory | None = None
        self.processes: list[Process] = []
        self.power_watts: float | None = None
        self.sm_clock_hz: float | None = None
        self.memory_clock_hz: float | None = None
        self.temperature_c: float | None = None
        self.clock_event_seconds = dict.fromkeys(CLOCK_EVENT_REASONS, 0.0)
        self.ecc: dict[str, float] = {}
        self.xid = dict.fromkeys([*(str(c) for c in settings.xid_codes), XID_OTHER], 0.0)
        self._xid_codes = frozenset(settings.xid_codes)
        self._reason_bits = [(reason, getattr(self.m, const)) for reason, const in _REASON_BITS.items()]
        self._first_seen: dict[int, float] = {}
        self._names: dict[int, str] = {}
        self._last_slow: float | None = None
        self._gpm_samples: list[Any] = []
        self._gpm_request: Any = None
        self._gpm_primed = False
        self._logged: dict[tuple[str, str], float] = {}

    # ----- setup and teardown -----------------------------------------------------------

    def setup_bandwidth(self) -> None:
        """GPM DRAM bandwidth where the GPU has it (Hopper+), else the memory-busy samples."""
        m = self.m
        try:
            if self.nvml.call(m.nvmlGpmQueryDeviceSupport, self.handle).isSupportedDevice:
                self._gpm_samples = [self.nvml.call(m.nvmlGpmSampleAlloc) for _ in range(2)]
                request = m.c_nvmlGpmMetricsGet_t()
                request.version = m.NVML_GPM_METRICS_GET_VERSION
                request.numMetrics = 1
                self._gpm_request = request
                self.bandwidth = SampleWindow(self.settings.sample_window_seconds)
                return
        except self.nvml.error_class as exc:
            if self._lost_on(exc, "gpm"):
                return
            if not self.nvml.unsupported(exc):
                self._failed("gpm", exc)
            self._free_gpm()
        log.info("GPU %s (%s): no GPM; exporting memory-busy time, not bandwidth", self.labels[0], self.labels[2])
        self.memory_busy = SampleStream(
            self.m.NVML_MEMORY_UTILIZATION_SAMPLES, SampleWindow(self.settings.sample_window_seconds)
        )

    def close(self) -> None:
        self._free_gpm()

    def _free_gpm(self) -> None:
        for sample in self._gpm_samples:
            with contextlib.suppress(self.nvml.error_class):  # a lost GPU's samples go with the session
                self.nvml.call(self.m.nvmlGpmSampleFree, sample)
        self._gpm_samples = []

    # ----- fast: the driver's sample buffers -------------------------------------------

    def poll_samples(self, now: float) -> None:
        if self.lost:
            return
        now_us = round(now * 1_000_000)
        for stream in (self.util, self.memory_busy):
            if stream is None:
                continue
            try:
                self._drain(stream, now_us)
            except self.nvml.error_class as exc:
                if self._lost_on(exc, "samples"):
                    return
                self._failed("samples", exc)

    def _drain(self, stream: SampleStream, now_us: int) -> None:
        """Take every sample newer than the last one taken: none missed, none counted twice."""
        try:
            value_type, samples = self.nvml.call(
                self.m.nvmlDeviceGetSamples, self.handle, stream.sampling_type, stream.last_us
            )
        except self.nvml.error_class as exc:
            if self.nvml.code(exc) != self.nvml.not_found_code:
                raise
            samples, value_type = [], None  # NOT_FOUND: nothing newer (an idle GPU)
        last = stream.last_us
        with self.lock:
            if samples:
                member = _VALUE_FIELDS[value_type]
                for sample in samples:
                    timestamp = sample.timeStamp
                    if timestamp > last:
                        stream.window.add(timestamp, getattr(sample.sampleValue, member))
                        last = timestamp
            stream.last_us = last
            stream.window.expire(now_us)

    # ----- slow: at most 1 Hz ----------------------------------------------------------

    def poll_slow(self, now: float) -> None:
        if self.lost:
            return
        readings: list[tuple[str, Callable[[float], None]]] = [
            ("memory", self._read_memory),
            ("processes", self._read_processes),
            ("power", self._read_power),
            ("clocks", self._read_clocks),
            ("temperature", self._read_temperature),
            ("clock_events", self._read_clock_events),
            ("ecc", self._read_ecc),
        ]
        if self.bandwidth is not None:
            readings.append(("gpm", self._read_gpm))
        for name, read in readings:
            try:
                read(now)
            except UnsupportedError as exc:
                if exc.first:
                    self.errors.inc("not_supported")
                    log.info("GPU %s (%s): %s not supported by this GPU or driver; skipped", *self.labels[:2], name)
            except self.nvml.error_class as exc:
                if self._lost_on(exc, name):
                    return
                self._failed(name, exc)
            except Exception as exc:  # a bug or an odd driver answer: this reading only
                self._failed(name, exc, unexpected=True)
        self._last_slow = now

    def _read_memory(self, now: float) -> None:
        m, h = self.m, self.handle
        info = self.fallbacks.read(
            "memory",
            lambda: m.nvmlDeviceGetMemoryInfo(h, version=m.nvmlMemory_v2),
            lambda: m.nvmlDeviceGetMemoryInfo(h),
        )
        memory = Memory(info.total, getattr(info, "reserved", None), info.used, info.free)
        with self.lock:
            self.memory = memory

    def _read_processes(self, now: float) -> None:
        m, h = self.m, self.handle
        found = self.fallbacks.read(
            "processes",
            lambda: m.nvmlDeviceGetComputeRunningProcesses(h),
            lambda: m.nvmlDeviceGetComputeRunningProcesses_v2(h),
        )
        current = {p.pid: p.usedGpuMemory for p in found if p.usedGpuMemory is not None}
        for gone in self._first_seen.keys() - current.keys():
            del self._first_seen[gone]
            self._names.pop(gone, None)
        allow = self.settings.process_allow_list
        chosen = []
        for pid, used in current.items():
            first_seen = self._first_seen.setdefault(pid, now)
            name = self._process_name(pid)
            if allow and not any(fnmatch.fnmatchcase(name, pattern) for pattern in allow):
                continue
            chosen.append(Process(pid, name, used, first_seen))
        chosen.sort(key=lambda p: (-p.used_bytes, p.pid))
        with self.lock:
            self.processes = chosen[: self.settings.max_processes_per_gpu]

    def _process_name(self, pid: int) -> str:
        """The executable's base name, looked up once per process ('unknown' when NVML cannot tell)."""
        name = self._names.get(pid)
        if name is None:
            try:
                full = self.nvml.call(self.m.nvmlSystemGetProcessName, pid)
                name = (full.decode(errors="replace") if isinstance(full, bytes) else str(full)).rsplit("/", 1)[-1]
            except self.nvml.error_class as exc:
                self.errors.inc(self.nvml.reason(exc))
                name = "unknown"
            self._names[pid] = name = name[:MAX_NAME_CHARS] or "unknown"
        return name

    def _read_power(self, now: float) -> None:
        milliwatts = self.nvml.call(self.m.nvmlDeviceGetPowerUsage, self.handle)
        self.power_watts = milliwatts / 1000.0

    def _read_clocks(self, now: float) -> None:
        m = self.m
        self.sm_clock_hz = self.nvml.call(m.nvmlDeviceGetClockInfo, self.handle, m.NVML_CLOCK_SM) * 1e6
        self.memory_clock_hz = self.nvml.call(m.nvmlDeviceGetClockInfo, self.handle, m.NVML_CLOCK_MEM) * 1e6

    def _read_temperature(self, now: float) -> None:
        m, h = self.m, self.handle
        self.temperature_c = float(
            self.fallbacks.read(
                "temperature",
                lambda: m.nvmlDeviceGetTemperatureV(h, m.NVML_TEMPERATURE_GPU),
                lambda: m.nvmlDeviceGetTemperature(h, m.NVML_TEMPERATURE_GPU),
            )
        )

    def _read_clock_events(self, now: float) -> None:
        """Credit the time since the last slow tick to every reason active now (a sampled estimate)."""
        m, h = self.m, self.handle
        mask = self.fallbacks.read(
            "clock_events",
            lambda: m.nvmlDeviceGetCurrentClocksEventReasons(h),
            lambda: m.nvmlDeviceGetCurrentClocksThrottleReasons(h),
        )
        if self._last_slow is None:
            return
        # A stalled poller must not credit a whole stall to one sample.
        elapsed = min(max(now - self._last_slow, 0.0), 2 * self.settings.slow_poll_seconds)
        with self.lock:
            for reason, bit in self._reason_bits:
                if mask & bit:
                    self.clock_event_seconds[reason] += elapsed

    def _read_ecc(self, now: float) -> None:
        m, h = self.m, self.handle
        corrected = self.fallbacks.read(
            "ecc", lambda: m.nvmlDeviceGetTotalEccErrors(h, m.NVML_MEMORY_ERROR_TYPE_CORRECTED, m.NVML_VOLATILE_ECC)
        )
        uncorrected = self.nvml.call(
            m.nvmlDeviceGetTotalEccErrors, h, m.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, m.NVML_VOLATILE_ECC
        )
        with self.lock:
            self.ecc = dict(zip(ECC_TYPES, (float(corrected), float(uncorrected)), strict=True))

    def _read_gpm(self, now: float) -> None:
        """DRAM bandwidth between the previous GPM sample and one taken now (slow ticks are >= 1 s apart)."""
        previous, current = self._gpm_samples
        self.nvml.call(self.m.nvmlGpmSampleGet, self.handle, current)
        self._gpm_samples = [current, previous]
        if not self._gpm_primed:
            self._gpm_primed = True
            return
        request = self._gpm_request
        request.sample1, request.sample2 = previous, current
        request.metrics[0].metricId = self.m.NVML_GPM_METRIC_DRAM_BW_UTIL
        self.nvml.call(self.m.nvmlGpmMetricsGet, request)
        metric = request.metrics[0]
        if metric.nvmlReturn != self.m.NVML_SUCCESS:
            raise self.m.NVMLError(metric.nvmlReturn)
        now_us = round(now * 1_000_000)
        with self.lock:
            assert self.bandwidth is not None
            self.bandwidth.add(now_us, metric.value)
            self.bandwidth.expire(now_us)

    # ----- events and failures ----------------------------------------------------------

    def record_xid(self, code: int) -> None:
        label = str(code) if code in self._xid_codes else XID_OTHER
        with self.lock:
            self.xid[label] += 1
        log.error("GPU %s (%s): XID %d", self.labels[0], self.labels[1], code)

    def _lost_on(self, exc: BaseException, reading: str) -> bool:
        """Mark the GPU lost if ``exc`` says so (counted and logged once); True when it did."""
        if self.nvml.code(exc) != self.nvml.lost_code:
            return False
        if not self.lost:
            self.lost = True
            self.errors.inc("gpu_lost")
            log.error(
                "GPU %s (%s) is lost (NVML: %s during %s read): its metrics stop and infersight_gpu_lost is 1 "
                "until the sidecar restarts",
                self.labels[0], self.labels[1], exc, reading,
            )  # fmt: skip
        return True

    def _failed(self, reading: str, exc: BaseException, unexpected: bool = False) -> None:
        """Count by reason; log at most once a minute per reading and reason (with a traceback if unexpected)."""
        reason = "other" if unexpected else self.nvml.reason(exc)
        self.errors.inc(reason)
        now = time.monotonic()
        key = (reading, reason)
        if now - self._logged.get(key, -LOG_REPEAT_SECONDS) >= LOG_REPEAT_SECONDS:
            self._logged[key] = now
            log.warning(
                "GPU %s (%s): %s read failed: %s (%s)", self.labels[0], self.labels[1], reading, exc, reason,
                exc_info=exc if unexpected else None,
            )  # fmt: skip
