"""A stand-in for ``pynvml`` (nvidia-ml-py) where no GPU is present: tests, benchmarks, the simulator.

It mimics the real API's shape, not just its names: every faked function has
pynvml's name and parameter list, returns pynvml's own ctypes structures, and
fails by raising pynvml's own ``NVMLError`` subclasses by return code (so
``except pynvml.NVMLError_GpuIsLost`` works on it). Device, event-set and GPM
sample handles are real ``ctypes`` pointer types holding made-up addresses that
nothing dereferences. Constants and structures not defined here are pynvml's;
a pynvml function the fake does not implement raises ``AttributeError`` instead
of reaching for a driver.

Time is the fake's own clock (``time()``, seconds) and moves only by
``advance()``, so a scripted stream gives the same samples on every run (give
the collector ``clock=nvml.time``; a simulator on the wall clock calls
``advance()`` with the elapsed time instead)::

    nvml = FakeNVML([FakeGpu(), FakeGpu(gpm=False)])
    nvml.gpus[0].utilization.extend([90, 10, 90, 10])   # one value per driver sample period
    nvml.gpus[0].dram_bandwidth.value = 70.0             # percent, integrated for GPM
    nvml.advance(1.0)
    nvml.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_UNKNOWN, gpu=1, times=2)
    nvml.emit_xid(0, 48)
    nvml.lose(1)                                          # fell off the bus (and XID 79)
"""

# ruff: noqa: N802, N803  (the function and parameter names are pynvml's)
from __future__ import annotations

import ctypes
import inspect
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pynvml as _real

GIB = 1024**3
_NOT_MIG = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId outside MIG
_DEVICE_BASE, _EVENT_SET_BASE, _GPM_BASE = 0x1000_0000, 0x2000_0000, 0x3000_0000


def _pointer(pointer_type: Any, address: int) -> Any:
    return ctypes.cast(ctypes.c_void_p(address), pointer_type)


def _address(pointer: Any) -> int | None:
    try:
        return ctypes.cast(pointer, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):
        return None


def _error(code: int) -> Exception:
    return _real.NVMLError(code)  # pynvml maps the code to its NVMLError_* subclass


class Stream:
    """The values one quantity takes, one per driver sample period: queued values first,
    then ``fn(t)`` when set, else ``value`` (the last value taken) again."""

    def __init__(self, value: float, fn: Callable[[float], float] | None = None) -> None:
        self.value = value
        self.fn = fn
        self._queue: deque[float] = deque()

    def extend(self, values: Iterable[float]) -> None:
        self._queue.extend(values)

    def next(self, t: float) -> float:
        if self._queue:
            self.value = self._queue.popleft()
        elif self.fn is not None:
            self.value = self.fn(t)
        return self.value


@dataclass
class FakeProcess:
    name: str
    used_bytes: int | None  # None: the driver cannot tell (pynvml's WDDM case)


@dataclass
class FakeGpu:
    """One synthetic GPU; every field may be changed while the fake runs."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = ""  # assigned from the index when empty
    gpm: bool = True  # Hopper and newer
    memory_v2: bool = True  # nvmlDeviceGetMemoryInfo_v2 present in the driver
    ecc: bool = True
    xid_events: bool = True
    sample_period_s: float = 1 / 6  # the driver's utilization sampling period (~6 Hz); fixed once created
    buffer_size: int = 100  # samples the driver keeps per type (~16 s at 6 Hz)
    memory_total: int = 80 * GIB
    memory_reserved: int = 512 * 1024**2
    memory_base_used: int = 0  # used by nothing in ``processes`` (contexts, other users)
    power_mw: int = 350_000
    sm_clock_mhz: int = 1980
    memory_clock_mhz: int = 2619
    temperature_c: int = 55
    clock_event_reasons: int = 0  # nvmlClocksEventReason* bit mask
    ecc_corrected: int = 0
    ecc_uncorrected: int = 0
    utilization: Stream = field(default_factory=lambda: Stream(0))
    memory_busy: Stream = field(default_factory=lambda: Stream(0))
    dram_bandwidth: Stream = field(default_factory=lambda: Stream(0.0))
    processes: dict[int, FakeProcess] = field(default_factory=dict)
    lost: bool = False
    samples_paused: bool = False  # the driver records no utilization samples (an idle GPU)
    # Driver-side state, moved by FakeNVML.advance().
    _util_buffer: deque[tuple[int, int]] = field(default_factory=deque, repr=False)
    _busy_buffer: deque[tuple[int, int]] = field(default_factory=deque, repr=False)
    _sample_origin_us: int = field(default=0, repr=False)
    _samples_taken: int = field(default=0, repr=False)
    _dram_integral: float = field(default=0.0, repr=False)  # percent x seconds
    _dram_t: float | None = field(default=None, repr=False)

    def set_process(self, pid: int, name: str, used_bytes: int | None) -> None:
        self.processes[pid] = FakeProcess(name, used_bytes)

    @property
    def memory_used(self) -> int:
        return self.memory_base_used + sum(p.used_bytes or 0 for p in self.processes.values())

    def _dram_integral_at(self, t: float) -> float:
        """Percent-seconds up to ``t``; a period still running is taken at the last period's value."""
        if self._dram_t is None:
            return 0.0
        return self._dram_integral + self.dram_bandwidth.value * (t - self._dram_t)

    def _tick(self, ts: int) -> None:
        """One driver sample period ends at ``ts`` (microseconds): record samples, move the DRAM integral."""
        t = ts / 1_000_000
        for buffer, stream in ((self._util_buffer, self.utilization), (self._busy_buffer, self.memory_busy)):
            value = round(stream.next(t))
            if self.samples_paused:
                continue
            buffer.append((ts, value))
            while len(buffer) > self.buffer_size:
                buffer.popleft()
        self.dram_bandwidth.next(t)  # the period ending now ran at this value
        self._dram_integral = self._dram_integral_at(t)
        self._dram_t = t


@dataclass
class _Fault:
    code: int
    gpu: int | None
    times: int | None  # None: every call


@dataclass
class _EventSet:
    registered: dict[int, int] = field(default_factory=dict)  # gpu index -> event type mask
    queue: deque[tuple[int, int, int]] = field(default_factory=deque)  # (gpu, event type, data)
    freed: bool = False


class FakeNVML:
    """The fake module: pass an instance wherever a ``pynvml`` module is expected."""

    def __init__(self, gpus: Iterable[FakeGpu] | int = 1, start_time: float | None = None) -> None:
        """``start_time`` (seconds since the epoch) defaults to now: driver timestamps are wall-clock
        microseconds, and a collector on the real clock must see them as recent."""
        if start_time is None:
            start_time = time.time()
        self.gpus: list[FakeGpu] = [FakeGpu() for _ in range(gpus)] if isinstance(gpus, int) else list(gpus)
        for index, gpu in enumerate(self.gpus):
            gpu.uuid = gpu.uuid or f"GPU-fa4e0000-0000-4000-8000-{index:012x}"
            gpu._sample_origin_us = round(start_time * 1_000_000)
            gpu._dram_t = start_time
        self._now_us = round(start_time * 1_000_000)  # integer microseconds: no drift however long it runs
        self._refcount = 0
        self._faults: dict[str, list[_Fault]] = {}
        self._event_sets: dict[int, _EventSet] = {}
        self._gpm_samples: dict[int, tuple[int, float, float] | None] = {}
        self._next_id = 1
        self._lock = threading.RLock()
        self._events = threading.Condition(self._lock)
        self.calls: Counter[str] = Counter()

    # ----- driving the fake -------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        value = getattr(_real, name)  # AttributeError for names pynvml lacks too
        if inspect.isfunction(value):
            raise AttributeError(f"the fake NVML does not implement {name}")
        return value

    def time(self) -> float:
        """The fake's clock in seconds since the epoch (what the driver's timestamps count)."""
        return self._now_us / 1_000_000

    def advance(self, seconds: float) -> None:
        """Move the clock; every GPU records the samples its driver would take meanwhile."""
        with self._lock:
            end = self._now_us + round(seconds * 1_000_000)
            for gpu in self.gpus:
                period_us = gpu.sample_period_s * 1_000_000
                while (tick := gpu._sample_origin_us + round((gpu._samples_taken + 1) * period_us)) <= end:
                    if not gpu.lost:
                        gpu._tick(tick)
                    gpu._samples_taken += 1  # ticks counted, not summed: no drift
            self._now_us = end

    def fail(self, function: str, code: int, gpu: int | None = None, times: int | None = 1) -> None:
        """Make the next ``times`` calls of ``function`` (on GPU ``gpu``, or any) raise the error ``code``."""
        if not inspect.ismethod(getattr(self, function, None)) or function.startswith("_"):
            raise ValueError(f"{function!r} is not an NVML function of the fake")
        with self._lock:
            self._faults.setdefault(function, []).append(_Fault(code, gpu, times))

    def lose(self, index: int, xid: int | None = 79) -> None:
        """GPU ``index`` falls off the bus: every call on it raises GpuIsLost from now on."""
        if xid is not None:
            self.emit_xid(index, xid)
        with self._lock:
            self.gpus[index].lost = True

    def emit_xid(self, index: int, code: int) -> None:
        """Deliver an XID critical error event to every event set registered for it on GPU ``index``."""
        with self._events:
            for event_set in self._event_sets.values():
                if event_set.registered.get(index, 0) & _real.nvmlEventTypeXidCriticalError:
                    event_set.queue.append((index, _real.nvmlEventTypeXidCriticalError, code))
            self._events.notify_all()

    # ----- plumbing ---------------------------------------------------------------------

    def _fault(self, function: str, index: int | None) -> None:
        for fault in self._faults.get(function, ()):
            if fault.gpu is None or fault.gpu == index:
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults[function].remove(fault)
                raise _error(fault.code)

    def _enter(self, function: str) -> None:
        self.calls[function] += 1
        if function in self._faults:
            self._fault(function, None)
        if self._refcount <= 0:
            raise _error(_real.NVML_ERROR_UNINITIALIZED)

    def _device(self, function: str, handle: Any) -> FakeGpu:
        self.calls[function] += 1
        if self._refcount <= 0:
            raise _error(_real.NVML_ERROR_UNINITIALIZED)
        address = _address(handle)
        index = None if address is None else address - _DEVICE_BASE
        if index is None or not 0 <= index < len(self.gpus) or address != _DEVICE_BASE + index:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        if function in self._faults:
            self._fault(function, index)
        gpu = self.gpus[index]
        if gpu.lost:
            raise _error(_real.NVML_ERROR_GPU_IS_LOST)
        return gpu

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    # ----- pynvml API: same names and parameters as nvidia-ml-py --------------------------

    def nvmlInit(self) -> None:
        with self._lock:
            self.calls["nvmlInit"] += 1
            self._fault("nvmlInit", None)
            self._refcount += 1

    def nvmlShutdown(self) -> None:
        with self._lock:
            self._enter("nvmlShutdown")
            self._refcount -= 1

    def nvmlDeviceGetCount(self) -> int:
        with self._lock:
            self._enter("nvmlDeviceGetCount")
            return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        with self._lock:
            self._enter("nvmlDeviceGetHandleByIndex")
            if not 0 <= index < len(self.gpus):
                raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
            if self.gpus[index].lost:
                raise _error(_real.NVML_ERROR_GPU_IS_LOST)
            return _pointer(_real.c_nvmlDevice_t, _DEVICE_BASE + index)

    def nvmlDeviceGetName(self, handle: Any) -> str:
        with self._lock:
            return self._device("nvmlDeviceGetName", handle).name

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        with self._lock:
            return self._device("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetSamples(self, device: Any, sampling_type: int, timeStamp: int) -> tuple[int, list[Any]]:
        with self._lock:
            gpu = self._device("nvmlDeviceGetSamples", device)
            buffers = {
                _real.NVML_GPU_UTILIZATION_SAMPLES: gpu._util_buffer,
                _real.NVML_MEMORY_UTILIZATION_SAMPLES: gpu._busy_buffer,
            }
            if sampling_type not in buffers:
                raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
            newer = [(ts, value) for ts, value in buffers[sampling_type] if ts > timeStamp]
            if not newer:
                raise _error(_real.NVML_ERROR_NOT_FOUND)
            samples = (_real.c_nvmlSample_t * len(newer))()
            for sample, (ts, value) in zip(samples, newer, strict=True):
                sample.timeStamp = ts
                sample.sampleValue.uiVal = value
            return _real.NVML_VALUE_TYPE_UNSIGNED_INT, samples[0 : len(newer)]

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        with self._lock:
            gpu = self._device("nvmlDeviceGetUtilizationRates", handle)
            rates = _real.c_nvmlUtilization_t()
            rates.gpu = gpu._util_buffer[-1][1] if gpu._util_buffer else 0
            rates.memory = gpu._busy_buffer[-1][1] if gpu._busy_buffer else 0
            return rates

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        with self._lock:
            gpu = self._device("nvmlDeviceGetMemoryInfo", handle)
            used = gpu.memory_used
            if not version:
                info = _real.c_nvmlMemory_t()
                info.total, info.used = gpu.memory_total, gpu.memory_reserved + used
                info.free = gpu.memory_total - info.used
                return info
            if not gpu.memory_v2:
                raise _error(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
            if version != _real.nvmlMemory_v2:
                raise _error(_real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            info = _real.c_nvmlMemory_v2_t()
            info.version = version
            info.total, info.reserved, info.used = gpu.memory_total, gpu.memory_reserved, used
            info.free = gpu.memory_total - gpu.memory_reserved - used
            return info

    def _processes(self, function: str, handle: Any) -> list[Any]:
        with self._lock:
            gpu = self._device(function, handle)
            out = []
            for pid, process in sorted(gpu.processes.items()):
                info = _real.c_nvmlProcessInfo_v3_t()
                info.pid, info.gpuInstanceId, info.computeInstanceId = pid, _NOT_MIG, _NOT_MIG
                info.usedGpuMemory = process.used_bytes or 0
                obj = _real.nvmlStructToFriendlyObject(info)
                if process.used_bytes is None:
                    obj.usedGpuMemory = None
                out.append(obj)
            return out

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        return self._processes("nvmlDeviceGetComputeRunningProcesses", handle)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any) -> list[Any]:
        return self._processes("nvmlDeviceGetComputeRunningProcesses_v2", handle)

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        with self._lock:
            self._enter("nvmlSystemGetProcessName")
            for gpu in self.gpus:
                if pid in gpu.processes:
                    return gpu.processes[pid].name
            raise _error(_real.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        with self._lock:
            return self._device("nvmlDeviceGetPowerUsage", handle).power_mw

    def nvmlDeviceGetClockInfo(self, handle: Any, type: int) -> int:  # noqa: A002 - pynvml's name
        with self._lock:
            gpu = self._device("nvmlDeviceGetClockInfo", handle)
            clocks = {
                _real.NVML_CLOCK_GRAPHICS: gpu.sm_clock_mhz,
                _real.NVML_CLOCK_SM: gpu.sm_clock_mhz,
                _real.NVML_CLOCK_MEM: gpu.memory_clock_mhz,
            }
            if type not in clocks:
                raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
            return clocks[type]

    def _temperature(self, function: str, handle: Any, sensor: int) -> int:
        with self._lock:
            gpu = self._device(function, handle)
            if sensor != _real.NVML_TEMPERATURE_GPU:
                raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
            return gpu.temperature_c

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        return self._temperature("nvmlDeviceGetTemperature", handle, sensor)

    def nvmlDeviceGetTemperatureV(self, handle: Any, sensor: int, version: int = _real.nvmlTemperature_v1) -> int:
        if version != _real.nvmlTemperature_v1:
            raise _error(_real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        return self._temperature("nvmlDeviceGetTemperatureV", handle, sensor)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        with self._lock:
            return self._device("nvmlDeviceGetCurrentClocksEventReasons", handle).clock_event_reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        with self._lock:
            return self._device("nvmlDeviceGetCurrentClocksThrottleReasons", handle).clock_event_reasons

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:
        with self._lock:
            gpu = self._device("nvmlDeviceGetTotalEccErrors", handle)
            if not gpu.ecc:
                raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
            if counterType not in (_real.NVML_VOLATILE_ECC, _real.NVML_AGGREGATE_ECC):
                raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
            counts = {
                _real.NVML_MEMORY_ERROR_TYPE_CORRECTED: gpu.ecc_corrected,
                _real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED: gpu.ecc_uncorrected,
            }
            if errorType not in counts:
                raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
            return counts[errorType]

    # GPM: a sample records the DRAM-bandwidth integral; metrics are its rate between two samples.

    def nvmlGpmQueryDeviceSupport(self, device: Any) -> Any:
        with self._lock:
            gpu = self._device("nvmlGpmQueryDeviceSupport", device)
            support = _real.c_nvmlGpmSupport_t()
            support.version = _real.NVML_GPM_SUPPORT_VERSION
            support.isSupportedDevice = 1 if gpu.gpm else 0
            return support

    def nvmlGpmSampleAlloc(self) -> Any:
        with self._lock:
            self._enter("nvmlGpmSampleAlloc")
            address = _GPM_BASE + self._new_id()
            self._gpm_samples[address] = None
            return _pointer(_real.c_nvmlGpmSample_t, address)

    def nvmlGpmSampleFree(self, gpmSample: Any) -> None:
        with self._lock:
            self._enter("nvmlGpmSampleFree")
            if self._gpm_samples.pop(_address(gpmSample) or 0, False) is False:
                raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlGpmSampleGet(self, device: Any, gpmSample: Any) -> Any:
        with self._lock:
            gpu = self._device("nvmlGpmSampleGet", device)
            address = _address(gpmSample) or 0
            if address not in self._gpm_samples:
                raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
            if not gpu.gpm:
                raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
            now = self.time()
            self._gpm_samples[address] = (self.gpus.index(gpu), now, gpu._dram_integral_at(now))
            return gpmSample

    def nvmlGpmMetricsGet(self, metricsGet: Any) -> Any:
        with self._lock:
            self._enter("nvmlGpmMetricsGet")
            if metricsGet.version != _real.NVML_GPM_METRICS_GET_VERSION:
                raise _error(_real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            first = self._gpm_samples.get(_address(metricsGet.sample1) or 0)
            second = self._gpm_samples.get(_address(metricsGet.sample2) or 0)
            if first is None or second is None or first[0] != second[0] or second[1] <= first[1]:
                raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
            if self.gpus[second[0]].lost:
                raise _error(_real.NVML_ERROR_GPU_IS_LOST)
            for i in range(metricsGet.numMetrics):
                metric = metricsGet.metrics[i]
                if metric.metricId == _real.NVML_GPM_METRIC_DRAM_BW_UTIL:
                    metric.value = (second[2] - first[2]) / (second[1] - first[1])
                    metric.nvmlReturn = _real.NVML_SUCCESS
                else:
                    metric.nvmlReturn = _real.NVML_ERROR_NOT_SUPPORTED
            return metricsGet

    # Events: XIDs are delivered by emit_xid(); waiting blocks in real time up to timeoutms.

    def nvmlEventSetCreate(self) -> Any:
        with self._lock:
            self._enter("nvmlEventSetCreate")
            address = _EVENT_SET_BASE + self._new_id()
            self._event_sets[address] = _EventSet()
            return _pointer(_real.c_nvmlEventSet_t, address)

    def _event_set(self, event_set: Any) -> _EventSet:
        found = self._event_sets.get(_address(event_set) or 0)
        if found is None or found.freed:
            raise _error(_real.NVML_ERROR_INVALID_ARGUMENT)
        return found

    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None:
        with self._lock:
            gpu = self._device("nvmlDeviceRegisterEvents", handle)
            target = self._event_set(eventSet)
            if not gpu.xid_events:
                raise _error(_real.NVML_ERROR_NOT_SUPPORTED)
            index = self.gpus.index(gpu)
            target.registered[index] = target.registered.get(index, 0) | eventTypes

    def nvmlEventSetWait_v2(self, eventSet: Any, timeoutms: int) -> Any:
        with self._events:
            self._enter("nvmlEventSetWait_v2")
            target = self._event_set(eventSet)
            self._events.wait_for(lambda: target.queue or target.freed, timeout=timeoutms / 1000)
            if target.freed or not target.queue:
                raise _error(_real.NVML_ERROR_TIMEOUT)
            index, event_type, data = target.queue.popleft()
            event = _real.c_nvmlEventData_t()
            event.device = _pointer(_real.c_nvmlDevice_t, _DEVICE_BASE + index)
            event.eventType, event.eventData = event_type, data
            event.gpuInstanceId = event.computeInstanceId = _NOT_MIG
            return event

    def nvmlEventSetFree(self, eventSet: Any) -> None:
        with self._events:
            self._enter("nvmlEventSetFree")
            self._event_set(eventSet).freed = True
            self._events.notify_all()
