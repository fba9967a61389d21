"""GPU view: the signals the usual GPU dashboards cannot show, from the ``gpu`` collector.

Utilization is drawn as its window mean inside a band of plus/minus one standard
deviation (one panel per GPU, repeated over the ``uuid`` variable, because a band
needs its two edges by name), next to the spread itself against the
``thresholds.gpu_util_stddev`` line. HBM bandwidth (GPM) is drawn with the
``thresholds.hbm_bandwidth`` band shaded; GPUs without GPM get a separate panel of
memory-busy time, labelled as not being bandwidth. Then memory (device and per
process), power, temperature, clocks, throttle reasons, XIDs and ECC.
"""

from __future__ import annotations

from typing import Any

import attr
from grafanalib.core import Dashboard, Panel, Repeat, TimeSeries

from dashboards import GPU
from dashboards.common import (
    INSTANCE,
    above,
    below,
    dashboard,
    rate,
    row,
    sel,
    stat,
    steps,
    timeseries,
    up_mappings,
    variables,
)
from infersight.catalog import exporter as ex
from infersight.catalog import gpu as cat
from infersight.config import Config

UUID = 'uuid=~"$uuid"'
G = (INSTANCE, UUID)  # every GPU selector honours both variables
PER_GPU = "{{instance}} GPU {{gpu}}"
MEAN, UPPER, LOWER = "mean", "mean + std dev", "mean - std dev"
GPU_COLLECTOR = 'collector="gpu"'


def _increase(counter: object) -> str:
    """Events per Grafana interval of a GPU counter (XIDs, ECC errors)."""
    return f"increase({sel(counter, *G)}[$__rate_interval])"


def _uuid_variable(instance_variable: dict[str, Any]) -> dict[str, Any]:
    """``uuid``: the GPUs of the chosen instances (UUIDs are unique across nodes, indexes are not)."""
    query = f"label_values({sel(cat.LOST, INSTANCE)}, uuid)"
    return {
        **instance_variable,
        "name": "uuid",
        "label": "GPU",
        "query": {"query": query, "refId": "uuid-variable"},
        "definition": query,
    }


def _band(*props: tuple[str, object]) -> list[dict[str, Any]]:
    return [{"id": key, "value": value} for key, value in props]


def utilization_band() -> TimeSeries:
    """Mean with a shaded +/- one standard deviation band, one panel per GPU."""
    mean, std = sel(cat.UTIL_MEAN, *G), sel(cat.UTIL_STDDEV, *G)
    panel = timeseries(
        "GPU-Util: window mean and +/- 1 std dev ($uuid)",
        "Mean of the driver's utilization samples over gpu.sample_window_seconds, shaded one standard "
        "deviation either side. A wide band is a GPU that alternates between busy and idle.",
        [(mean, MEAN), (f"{mean} + {std}", UPPER), (f"clamp_min({mean} - {std}, 0)", LOWER)],
        "percentunit",
        max_value=1,
    )
    overrides = [
        {"matcher": {"id": "byName", "options": UPPER},
         "properties": _band(("custom.fillBelowTo", LOWER), ("custom.lineWidth", 0), ("custom.fillOpacity", 25))},
        {"matcher": {"id": "byName", "options": LOWER}, "properties": _band(("custom.lineWidth", 0))},
    ]  # fmt: skip
    return attr.evolve(panel, overrides=overrides, repeat=Repeat(direction="h", variable="uuid", maxPerRow=2))


def bandwidth(config: Config) -> list[Panel]:
    band = config.thresholds.hbm_bandwidth
    shaded = timeseries(
        "HBM bandwidth utilization (GPM)",
        f"DRAM bandwidth used over the theoretical peak (GPM, Hopper and newer), mean over the window. "
        f"Shaded: the {band.low:.0%}-{band.high:.0%} target band; red above it (saturation).",
        [(sel(cat.HBM_BANDWIDTH, *G, f'source="{cat.SOURCE_GPM}"'), PER_GPU)],
        "percentunit",
        thresholds=steps("transparent", (band.low, "green"), (band.high, "red")),
        max_value=1,
    )
    return [
        attr.evolve(shaded, thresholdsStyleMode="line+area"),
        timeseries(
            "Memory busy time (GPUs without GPM) - not bandwidth",
            "Share of time device memory was read or written, for GPUs that have no GPM. It says nothing about "
            "bandwidth and is never judged against the bandwidth band.",
            [(sel(cat.MEMORY_BUSY, *G), PER_GPU)],
            "percentunit",
            max_value=1,
        ),
    ]


def build(config: Config) -> Dashboard:
    t, gpu = config.thresholds, config.gpu
    base = variables(ex.VLLM_REQUESTS_RUNNING, cat.LOST)
    instance = next(v for v in base if v["name"] == "instance")
    panels: list[Panel] = [
        stat("GPUs on the bus", "DOWN when any selected GPU is lost (NVML_ERROR_GPU_IS_LOST).",
             [(f"min(1 - {sel(cat.LOST, *G)})", "")], "none", thresholds=below(1.0), mappings=up_mappings()),
        stat("GPU-Util std dev (worst GPU)", "Largest utilization spread; red above thresholds.gpu_util_stddev.",
             [(f"max({sel(cat.UTIL_STDDEV, *G)})", "")], "percentunit", thresholds=above(t.gpu_util_stddev)),
        stat("HBM bandwidth (busiest GPU)", "Highest GPM bandwidth utilization; green inside the target band.",
             [(f"max({sel(cat.HBM_BANDWIDTH, *G)})", "")], "percentunit",
             thresholds=steps("blue", (t.hbm_bandwidth.low, "green"), (t.hbm_bandwidth.high, "red"))),
        stat("Device memory used", "Memory allocated by processes over installed memory, selected GPUs.",
             [(f"sum({sel(cat.MEMORY_USED, *G)}) / sum({sel(cat.MEMORY_TOTAL, *G)})", "")], "percentunit"),
        stat("Power draw", "Sum over the selected GPUs.", [(f"sum({sel(cat.POWER, *G)})", "")], "watt"),
        stat("Hottest GPU", "Highest core temperature.", [(f"max({sel(cat.TEMPERATURE, *G)})", "")], "celsius"),
        row("Utilization (every driver sample)"),
        utilization_band(),
        timeseries("GPU-Util standard deviation",
                   "Spread of the driver's samples over the window; the line is thresholds.gpu_util_stddev.",
                   [(sel(cat.UTIL_STDDEV, *G), PER_GPU)], "percentunit", thresholds=above(t.gpu_util_stddev)),
        timeseries("Driver samples in the window",
                   "How many samples the mean and std dev are computed from (0 for an idle GPU).",
                   [(sel(cat.UTIL_SAMPLES, *G), PER_GPU)], "short"),
        row("HBM bandwidth"),
        *bandwidth(config),
        row("Memory"),
        timeseries("Device memory: total, reserved, used",
                   "Memory info v2. vLLM reserves most of the GPU at start, so 'used' is flat: leaks show per "
                   "process.",
                   [(sel(m, *G), f"{PER_GPU} {kind}") for m, kind in ((cat.MEMORY_TOTAL, "total"),
                    (cat.MEMORY_RESERVED, "reserved"), (cat.MEMORY_USED, "used"), (cat.MEMORY_FREE, "free"))],
                   "bytes"),
        timeseries("Memory per process",
                   f"Compute processes (gpu.process_allow_list, largest {gpu.max_processes_per_gpu} per GPU). A "
                   f"steady climb after warm-up is what the memory-leak alert looks for.",
                   [(sel(cat.PROCESS_MEMORY, *G), f"{PER_GPU} {{{{process}}}} ({{{{pid}}}})")], "bytes"),
        row("Power, temperature, clocks"),
        timeseries("Power draw", "Board power.", [(sel(cat.POWER, *G), PER_GPU)], "watt", width=8),
        timeseries("Temperature", "GPU core temperature.", [(sel(cat.TEMPERATURE, *G), PER_GPU)], "celsius",
                   width=8),
        timeseries("Clocks", "SM and memory clocks; a drop under load with a throttle reason below is throttling.",
                   [(sel(cat.SM_CLOCK, *G), f"{PER_GPU} SM"), (sel(cat.MEMORY_CLOCK, *G), f"{PER_GPU} memory")],
                   "hertz", width=8),
        timeseries("Throttle reasons (share of time)",
                   "Share of time each clock-event reason was active; the line is gpu.throttle_ratio.",
                   [(f"{rate(cat.CLOCK_EVENT_SECONDS, *G)} > 0", f"{PER_GPU} {{{{reason}}}}")], "percentunit",
                   thresholds=above(gpu.throttle_ratio), width=24),
        row("Errors"),
        timeseries("XID events", "XID critical errors by code ('other': codes outside gpu.xid_codes).",
                   [(f"{_increase(cat.XID_ERRORS)} > 0", f"{PER_GPU} XID {{{{xid}}}}")], "short",
                   width=8),
        timeseries("ECC errors", "Corrected and uncorrected ECC errors (volatile counters).",
                   [(f"{_increase(cat.ECC_ERRORS)} > 0", f"{PER_GPU} {{{{type}}}}")], "short",
                   width=8),
        timeseries("NVML errors of the collector", "Failed NVML calls by reason, per sidecar.",
                   [(f"sum by (instance, reason) ({rate(ex.COLLECTOR_ERRORS, INSTANCE, GPU_COLLECTOR)}) > 0",
                     "{{instance}} {{reason}}")], "short", width=8),
        timeseries("NVML time per call", "Mean wall time of the collector's NVML calls: the driver's cost.",
                   [(f"{rate(cat.NVML_CALL_SECONDS, INSTANCE)} / {rate(cat.NVML_CALLS, INSTANCE)}", "{{instance}}")],
                   "s", width=12),
        timeseries("NVML share of one core", "Wall time inside NVML per second, per sidecar.",
                   [(rate(cat.NVML_CALL_SECONDS, INSTANCE), "{{instance}}")], "percentunit", width=12),
    ]  # fmt: skip
    return dashboard(
        GPU,
        "infersight: GPUs",
        "Utilization stability, HBM bandwidth against its band, memory per process, power, clocks, "
        "throttling, XIDs and ECC from the infersight sidecar's NVML collector.",
        panels,
        [*base, _uuid_variable(instance)],
    )
