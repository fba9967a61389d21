"""Metrics of the ``gpu`` collector (NVML), per GPU with ``gpu`` (index), ``uuid`` and ``model``.

HBM bandwidth and memory-busy time are two different names on purpose: the
memory-busy percentage (share of time the memory controller was busy, what most
tools call "memory utilization") says nothing about bandwidth, so it must never
be averaged, graphed or alerted on as if it were. A rule on the bandwidth name
cannot match busy-time data by accident; the ``source`` label says the same
again to anyone reading a raw series.
"""

from __future__ import annotations

from infersight.catalog import Metric

DEVICE_LABELS = ("gpu", "uuid", "model")
PROCESS_LABELS = (*DEVICE_LABELS, "pid", "process")

# Label values of the bounded label sets below.
SOURCE_GPM = "gpm"
SOURCE_MEMORY_BUSY = "memory_busy"
ECC_TYPES = ("corrected", "uncorrected")
CLOCK_EVENT_REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
)
XID_OTHER = "other"

UTIL_MEAN = Metric(
    "infersight_gpu_utilization_mean_ratio",
    "gauge",
    "Mean GPU utilization (share of time a kernel ran) over the driver samples in the window, 0..1.",
    DEVICE_LABELS,
)
UTIL_STDDEV = Metric(
    "infersight_gpu_utilization_stddev_ratio",
    "gauge",
    "Population standard deviation of the driver's GPU utilization samples in the window, 0..1.",
    DEVICE_LABELS,
)
UTIL_SAMPLES = Metric(
    "infersight_gpu_utilization_samples",
    "gauge",
    "Driver utilization samples in the window (0: idle GPU or no samples, mean and stddev absent).",
    DEVICE_LABELS,
)
HBM_BANDWIDTH = Metric(
    "infersight_gpu_hbm_bandwidth_utilization_ratio",
    "gauge",
    "DRAM bandwidth used over the theoretical peak, 0..1, from GPM (Hopper and newer), mean over the window.",
    (*DEVICE_LABELS, "source"),
)
MEMORY_BUSY = Metric(
    "infersight_gpu_memory_busy_ratio",
    "gauge",
    "Share of time device memory was read or written (NOT bandwidth), 0..1, mean over the window; "
    "exported only for GPUs without GPM.",
    (*DEVICE_LABELS, "source"),
)
MEMORY_TOTAL = Metric("infersight_gpu_memory_total_bytes", "gauge", "Installed device memory.", DEVICE_LABELS)
MEMORY_RESERVED = Metric(
    "infersight_gpu_memory_reserved_bytes",
    "gauge",
    "Device memory reserved by the driver and firmware (memory info v2; absent on older drivers).",
    DEVICE_LABELS,
)
MEMORY_USED = Metric(
    "infersight_gpu_memory_used_bytes", "gauge", "Device memory allocated by processes.", DEVICE_LABELS
)
MEMORY_FREE = Metric("infersight_gpu_memory_free_bytes", "gauge", "Device memory still allocatable.", DEVICE_LABELS)
PROCESS_MEMORY = Metric(
    "infersight_gpu_process_memory_used_bytes",
    "gauge",
    "Device memory used by a compute process (allow-listed names, largest max_processes_per_gpu per GPU).",
    PROCESS_LABELS,
)
PROCESS_FIRST_SEEN = Metric(
    "infersight_gpu_process_first_seen_timestamp_seconds",
    "gauge",
    "When the sidecar first saw the process on the GPU (guards the leak alert against model load and warm-up).",
    PROCESS_LABELS,
)
POWER = Metric("infersight_gpu_power_watts", "gauge", "Power draw of the board.", DEVICE_LABELS)
SM_CLOCK = Metric("infersight_gpu_sm_clock_hertz", "gauge", "Current SM clock.", DEVICE_LABELS)
MEMORY_CLOCK = Metric("infersight_gpu_memory_clock_hertz", "gauge", "Current memory clock.", DEVICE_LABELS)
TEMPERATURE = Metric("infersight_gpu_temperature_celsius", "gauge", "GPU core temperature.", DEVICE_LABELS)
CLOCK_EVENT_SECONDS = Metric(
    "infersight_gpu_clock_event_seconds_total",
    "counter",
    "Seconds a clock-event (throttle) reason was active, sampled every slow_poll_seconds.",
    (*DEVICE_LABELS, "reason"),
)
XID_ERRORS = Metric(
    "infersight_gpu_xid_errors_total",
    "counter",
    "XID critical error events by code (codes outside gpu.xid_codes are counted as 'other').",
    (*DEVICE_LABELS, "xid"),
)
ECC_ERRORS = Metric(
    "infersight_gpu_ecc_errors_total",
    "counter",
    "ECC errors since the driver loaded (volatile counters), by type.",
    (*DEVICE_LABELS, "type"),
)
LOST = Metric(
    "infersight_gpu_lost",
    "gauge",
    "1 once NVML reported the GPU lost (fallen off the bus); it stays 1 until the sidecar restarts.",
    DEVICE_LABELS,
)
NVML_CALL_SECONDS = Metric(
    "infersight_gpu_nvml_call_seconds_total",
    "counter",
    "Wall time spent inside NVML calls: the driver's cost, apart from the collector's own (XID waits excluded).",
)
NVML_CALLS = Metric("infersight_gpu_nvml_calls_total", "counter", "NVML calls made by the collector.")
