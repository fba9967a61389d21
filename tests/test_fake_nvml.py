"""The fake NVML has the real pynvml's shape: names, parameter lists, structures, error classes.

The collector's source is scanned for every ``nvml*`` / ``NVML*`` name it uses, so a
new call in the collector that the fake lacks, or that pynvml spells differently,
fails here rather than on the first GPU host.
"""

from __future__ import annotations

import ast
import ctypes
import inspect
import re
import threading
from pathlib import Path

import pynvml
import pytest

from infersight.testing.fake_nvml import FakeGpu, FakeNVML

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR_SOURCES = [ROOT / "exporters/collectors/gpu.py", *sorted((ROOT / "exporters").glob("nvml_*.py"))]
NAME = re.compile(r"^(nvml[A-Z]\w*|NVML_\w+|NVMLError\w*|c_nvml\w+|NVMLLibraryMismatchError)$")


def _is_module(node: ast.expr) -> bool:
    """The collector holds the NVML module as ``m``, ``module`` or ``<something>.m``."""
    return (isinstance(node, ast.Name) and node.id in ("m", "module")) or (
        isinstance(node, ast.Attribute) and node.attr == "m"
    )


def names_used_by_collector() -> set[str]:
    """Names read from the NVML module, and string constants (``getattr(m, "nvml...")``), in the collector."""
    found: set[str] = set()
    for path in COLLECTOR_SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and _is_module(node.value) and NAME.match(node.attr):
                found.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.match(node.value):
                found.add(node.value)
    return found


USED = names_used_by_collector()
FUNCTIONS = sorted(n for n in USED if inspect.isfunction(getattr(pynvml, n, None)))
OTHERS = sorted(n for n in USED if n not in FUNCTIONS)


def _params(fn: object) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_scan_finds_the_calls_the_issue_names() -> None:
    expected = {
        "nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetSamples",
        "nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleGet", "nvmlGpmMetricsGet",
        "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlEventSetCreate", "nvmlDeviceRegisterEvents",
        "nvmlEventSetWait_v2", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetClockInfo",
    }  # fmt: skip
    assert expected <= set(FUNCTIONS)
    assert {"NVMLError", "c_nvmlGpmMetricsGet_t", "nvmlMemory_v2", "NVML_GPM_METRIC_DRAM_BW_UTIL"} <= set(OTHERS)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_fake_function_has_pynvml_parameter_list(name: str) -> None:
    fake = getattr(FakeNVML(), name)
    assert _params(fake) == _params(getattr(pynvml, name)), name


@pytest.mark.parametrize("name", OTHERS)
def test_constants_structures_and_errors_are_pynvml_own(name: str) -> None:
    assert hasattr(pynvml, name), f"pynvml has no {name}"
    assert getattr(FakeNVML(), name) is getattr(pynvml, name)


def test_unimplemented_pynvml_function_is_refused_not_forwarded() -> None:
    with pytest.raises(AttributeError, match="does not implement nvmlDeviceGetPcieThroughput"):
        _ = FakeNVML().nvmlDeviceGetPcieThroughput


def _fields(struct: type) -> set[str]:
    return {f[0] for f in struct._fields_}


# Fields the collector reads, per structure: they must exist in the installed pynvml.
READ_FIELDS = {
    pynvml.c_nvmlUtilization_t: {"gpu", "memory"},
    pynvml.c_nvmlMemory_t: {"total", "used", "free"},
    pynvml.c_nvmlMemory_v2_t: {"version", "total", "reserved", "used", "free"},
    pynvml.c_nvmlProcessInfo_t: {"pid", "usedGpuMemory"},
    pynvml.c_nvmlSample_t: {"timeStamp", "sampleValue"},
    pynvml.c_nvmlValue_t: {"uiVal", "dVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal"},
    pynvml.c_nvmlGpmSupport_t: {"version", "isSupportedDevice"},
    pynvml.c_nvmlGpmMetricsGet_t: {"version", "numMetrics", "sample1", "sample2", "metrics"},
    pynvml.c_nvmlGpmMetric_t: {"metricId", "nvmlReturn", "value"},
    pynvml.c_nvmlEventData_t: {"device", "eventType", "eventData"},
}


@pytest.mark.parametrize("struct", list(READ_FIELDS), ids=lambda s: s.__name__)
def test_fields_read_exist_in_pynvml_structures(struct: type) -> None:
    assert READ_FIELDS[struct] <= _fields(struct)


@pytest.fixture
def nvml() -> FakeNVML:
    fake = FakeNVML([FakeGpu(), FakeGpu(gpm=False, name="NVIDIA A10G")])
    fake.nvmlInit()
    return fake


def test_returns_are_pynvml_structures(nvml: FakeNVML) -> None:
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    assert type(h) is pynvml.c_nvmlDevice_t
    nvml.gpus[0].set_process(42, "/usr/bin/python3", 1 << 30)
    nvml.advance(1.0)
    assert type(nvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)) is pynvml.c_nvmlMemory_v2_t
    assert type(nvml.nvmlDeviceGetMemoryInfo(h)) is pynvml.c_nvmlMemory_t
    assert type(nvml.nvmlDeviceGetUtilizationRates(h)) is pynvml.c_nvmlUtilization_t
    value_type, samples = nvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    assert value_type == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
    assert isinstance(samples, list) and all(type(s) is pynvml.c_nvmlSample_t for s in samples)
    (process,) = nvml.nvmlDeviceGetComputeRunningProcesses(h)
    assert type(process) is pynvml.nvmlFriendlyObject  # what pynvml returns, built from c_nvmlProcessInfo_t
    assert set(vars(process)) == _fields(pynvml.c_nvmlProcessInfo_t)
    assert type(nvml.nvmlGpmQueryDeviceSupport(h)) is pynvml.c_nvmlGpmSupport_t
    assert type(nvml.nvmlGpmSampleAlloc()) is pynvml.c_nvmlGpmSample_t
    assert type(nvml.nvmlEventSetCreate()) is pynvml.c_nvmlEventSet_t


def test_uninitialized_until_init_and_after_shutdown() -> None:
    fake = FakeNVML(1)
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
    fake.nvmlInit()
    assert fake.nvmlDeviceGetCount() == 1
    fake.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetHandleByIndex(0)


def test_sample_buffer_semantics(nvml: FakeNVML) -> None:
    """Every sample newer than the timestamp passed; NotFound when there is none; the buffer wraps."""
    gpu = nvml.gpus[0]
    gpu.utilization.extend(range(1, 13))
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    nvml.advance(1.0)  # 6 samples at 1/6 s
    _, first = nvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    assert [s.sampleValue.uiVal for s in first] == [1, 2, 3, 4, 5, 6]
    stamps = [s.timeStamp for s in first]
    assert stamps == sorted(stamps) and stamps[-1] == round(nvml.time() * 1e6)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, stamps[-1])
    nvml.advance(0.5)
    _, newer = nvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, stamps[2])
    assert [s.sampleValue.uiVal for s in newer] == [4, 5, 6, 7, 8, 9]
    gpu.buffer_size = 4
    nvml.advance(1.0)
    _, wrapped = nvml.nvmlDeviceGetSamples(h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    assert [s.sampleValue.uiVal for s in wrapped] == [12, 12, 12, 12]  # the stream holds its last value


def test_gpm_bandwidth_is_the_rate_between_two_samples(nvml: FakeNVML) -> None:
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice == 1
    assert nvml.nvmlGpmQueryDeviceSupport(nvml.nvmlDeviceGetHandleByIndex(1)).isSupportedDevice == 0
    nvml.gpus[0].dram_bandwidth.extend([40.0] * 6 + [80.0] * 6)
    first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
    nvml.nvmlGpmSampleGet(h, first)
    nvml.advance(2.0)
    nvml.nvmlGpmSampleGet(h, second)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version, request.numMetrics = pynvml.NVML_GPM_METRICS_GET_VERSION, 2
    request.sample1, request.sample2 = first, second
    request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL
    request.metrics[1].metricId = pynvml.NVML_GPM_METRIC_SM_UTIL
    nvml.nvmlGpmMetricsGet(request)
    # One value per sample period: 40 % for the first second, 80 % for the second.
    assert request.metrics[0].nvmlReturn == pynvml.NVML_SUCCESS
    assert request.metrics[0].value == pytest.approx(60.0)
    assert request.metrics[1].nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    request.sample1, request.sample2 = second, first
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlGpmMetricsGet(request)


def test_injected_faults_raise_pynvml_error_classes(nvml: FakeNVML) -> None:
    h0, h1 = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.fail("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NOT_SUPPORTED, gpu=1, times=2)
    assert nvml.nvmlDeviceGetPowerUsage(h0) == 350_000
    for _ in range(2):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            nvml.nvmlDeviceGetPowerUsage(h1)
    assert nvml.nvmlDeviceGetPowerUsage(h1) == 350_000
    with pytest.raises(ValueError, match="not an NVML function"):
        nvml.fail("nvmlDeviceGetPowerUsageTypo", pynvml.NVML_ERROR_UNKNOWN)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_used_function_can_be_made_to_fail(name: str) -> None:
    """fail() reaches each function the collector calls (the fake checks faults under the right name)."""
    fake = FakeNVML(1)
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    args = {
        "handle": h, "device": h, "index": 0, "pid": 1, "sensor": pynvml.NVML_TEMPERATURE_GPU,
        "type": pynvml.NVML_CLOCK_SM, "sampling_type": pynvml.NVML_GPU_UTILIZATION_SAMPLES, "timeStamp": 0,
        "errorType": 0, "counterType": 0, "eventTypes": pynvml.nvmlEventTypeXidCriticalError,
        "eventSet": None, "timeoutms": 1, "gpmSample": None, "metricsGet": None,
    }  # fmt: skip
    params = [p for p in inspect.signature(getattr(fake, name)).parameters.values() if p.default is p.empty]
    fake.fail(name, pynvml.NVML_ERROR_IRQ_ISSUE, gpu=None, times=1)
    with pytest.raises(pynvml.NVMLError) as raised:
        getattr(fake, name)(*[args[p.name] for p in params])
    assert raised.value.value == pynvml.NVML_ERROR_IRQ_ISSUE


def test_lost_gpu_raises_gpu_is_lost_and_emits_xid_79(nvml: FakeNVML) -> None:
    h0, h1 = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    events = nvml.nvmlEventSetCreate()
    nvml.nvmlDeviceRegisterEvents(h1, pynvml.nvmlEventTypeXidCriticalError, events)
    nvml.lose(1)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetMemoryInfo(h1)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetHandleByIndex(1)
    assert nvml.nvmlDeviceGetMemoryInfo(h0).total == 80 * 1024**3
    event = nvml.nvmlEventSetWait_v2(events, 100)
    assert type(event) is pynvml.c_nvmlEventData_t
    assert (event.eventType, event.eventData) == (pynvml.nvmlEventTypeXidCriticalError, 79)


def test_event_wait_times_out_then_delivers_from_another_thread(nvml: FakeNVML) -> None:
    h0 = nvml.nvmlDeviceGetHandleByIndex(0)
    events = nvml.nvmlEventSetCreate()
    nvml.nvmlDeviceRegisterEvents(h0, pynvml.nvmlEventTypeXidCriticalError, events)
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait_v2(events, 10)
    threading.Timer(0.05, nvml.emit_xid, (0, 48)).start()
    event = nvml.nvmlEventSetWait_v2(events, 2000)
    assert event.eventData == 48
    assert ctypes.cast(event.device, ctypes.c_void_p).value == ctypes.cast(h0, ctypes.c_void_p).value
    nvml.emit_xid(1, 13)  # GPU 1 is not registered in this set
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait_v2(events, 10)


def test_memory_is_consistent_across_versions(nvml: FakeNVML) -> None:
    gpu = nvml.gpus[0]
    gpu.set_process(7, "vllm", 40 * 1024**3)
    gpu.memory_base_used = 1024**3
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    v2 = nvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    v1 = nvml.nvmlDeviceGetMemoryInfo(h)
    assert v2.used == 41 * 1024**3 and v2.total == v2.reserved + v2.used + v2.free
    assert v1.used == v2.used + v2.reserved and v1.free == v2.free
    gpu.memory_v2 = False
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
