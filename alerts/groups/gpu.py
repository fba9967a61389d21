"""GPU alerts from the ``gpu`` collector: utilization stability, HBM bandwidth band, memory
leaks, lost GPUs, XIDs and throttling.

"While serving" and "while requests wait" join on ``instance``: the GPU series and
the ``infersight_vllm_*`` series come from the same sidecar (one per serving
node or pod), so its scrape ``instance`` is the key they share. The bandwidth
alerts read only ``source="gpm"``: the memory-busy fallback is a different
metric and is never judged against a bandwidth band.
"""

from __future__ import annotations

from alerts.promql import num
from alerts.spec import Alert, Group
from dashboards import GPU as GPU_DASHBOARD
from infersight.catalog import gpu as cat
from infersight.catalog.exporter import VLLM_REQUESTS_RUNNING, VLLM_REQUESTS_WAITING
from infersight.config import Config, duration_seconds

WHERE = "GPU {{ $labels.gpu }} ({{ $labels.model }}, {{ $labels.uuid }}) on {{ $labels.instance }}"
GPM_BANDWIDTH = f'{cat.HBM_BANDWIDTH}{{source="{cat.SOURCE_GPM}"}}'


def _serving(metric: object) -> str:
    """Sidecars whose vLLM targets report ``metric`` > 0 (running or waiting requests)."""
    return f"on (instance) (sum by (instance) ({metric}) > 0)"


def util_unstable(config: Config) -> Alert:
    limit, gpu = config.thresholds.gpu_util_stddev, config.gpu
    return Alert(
        name="InfersightGPUUtilUnstable",
        expr=(
            f"({cat.UTIL_STDDEV} > {num(limit)} and {cat.UTIL_SAMPLES} >= {gpu.min_window_samples}) "
            f"and {_serving(VLLM_REQUESTS_RUNNING)}"
        ),
        for_=gpu.util_unstable_for,
        severity="warning",
        summary="GPU utilization swings while the GPU serves requests.",
        description=(
            f"{WHERE}: the standard deviation of GPU-Util over the last {num(gpu.sample_window_seconds)}s of driver "
            f"samples is {{{{ $value | humanizePercentage }}}} (target < {num(limit * 100)}%) while requests run: "
            f"the batch is starved in bursts (scheduling stalls, long prefills, host-side gaps)."
        ),
        dashboard=GPU_DASHBOARD,
    )


def bandwidth_alerts(config: Config) -> list[Alert]:
    band, gpu = config.thresholds.hbm_bandwidth, config.gpu
    return [
        Alert(
            name="InfersightHBMBandwidthSaturated",
            expr=f"{GPM_BANDWIDTH} > {num(band.high)}",
            for_=gpu.hbm_for,
            severity="warning",
            summary="HBM bandwidth utilization is above its target band: decode is memory-bound at the limit.",
            description=(
                f"{WHERE}: DRAM bandwidth utilization (GPM) is {{{{ $value | humanizePercentage }}}}, above the "
                f"{num(band.high * 100)}% top of the {num(band.low * 100)}-{num(band.high * 100)}% band for "
                f"{gpu.hbm_for}: more concurrent sequences will queue on memory, not compute."
            ),
            dashboard=GPU_DASHBOARD,
        ),
        Alert(
            name="InfersightHBMBandwidthUnderused",
            expr=f"{GPM_BANDWIDTH} < {num(band.low)} and {_serving(VLLM_REQUESTS_WAITING)}",
            for_=gpu.hbm_for,
            severity="warning",
            summary="HBM bandwidth utilization is below its target band while requests wait.",
            description=(
                f"{WHERE}: DRAM bandwidth utilization (GPM) is {{{{ $value | humanizePercentage }}}}, below the "
                f"{num(band.low * 100)}% bottom of the band for {gpu.hbm_for} while requests wait for a batch "
                f"slot: the GPU has memory bandwidth to spare but the batch is not filled."
            ),
            dashboard=GPU_DASHBOARD,
        ),
    ]


def memory_leak(config: Config) -> Alert:
    """Per-process growth whose linear trend would use up the GPU's free memory within the horizon.

    Guards: the process was first seen ``leak_warmup`` before the lookback began
    (model load, CUDA graph capture and profiling are over), it existed a full
    lookback ago, and it grew by more than ``leak_min_growth_bytes`` in it.
    """
    gpu = config.gpu
    proc, lookback = cat.PROCESS_MEMORY.name, gpu.leak_lookback
    horizon = int(duration_seconds(gpu.leak_horizon))
    settled = int(duration_seconds(gpu.leak_warmup) + duration_seconds(lookback))
    return Alert(
        name="InfersightGPUMemoryLeak",
        expr=(
            f"(predict_linear({proc}[{lookback}], {horizon}) - {proc}) "
            f"> on (instance, uuid) group_left () {cat.MEMORY_FREE}\n"
            f"and ({proc} - {proc} offset {lookback}) > {gpu.leak_min_growth_bytes}\n"
            f"and (time() - {cat.PROCESS_FIRST_SEEN}) > {settled}"
        ),
        for_=gpu.leak_for,
        severity="warning",
        summary="A serving process's GPU memory keeps growing and would exhaust the GPU.",
        description=(
            f"Process {{{{ $labels.process }}}} (pid {{{{ $labels.pid }}}}) on {WHERE} has grown by more than "
            f"{num(gpu.leak_min_growth_bytes / 2**20)} MiB in {lookback}; at that trend it adds "
            f"{{{{ $value | humanize1024 }}}}B within {gpu.leak_horizon}, more than the GPU has free."
        ),
        dashboard=GPU_DASHBOARD,
    )


def health_alerts(config: Config) -> list[Alert]:
    gpu = config.gpu
    reasons = "|".join(gpu.throttle_reasons)
    return [
        Alert(
            name="InfersightGPULost",
            expr=f"{cat.LOST} == 1",
            for_=gpu.lost_for,
            severity="critical",
            summary="A GPU fell off the bus: NVML reports it lost.",
            description=(
                f"{WHERE} is lost (NVML_ERROR_GPU_IS_LOST): every request on the replicas using it fails or hangs "
                f"until the node is drained and the GPU reset."
            ),
            dashboard=GPU_DASHBOARD,
        ),
        Alert(
            name="InfersightGPUXidError",
            expr=f"increase({cat.XID_ERRORS}[{gpu.xid_window}]) > 0",
            severity="warning",
            summary="The NVIDIA driver reported an XID critical error.",
            description=(
                f"{WHERE} reported XID {{{{ $labels.xid }}}} ({{{{ $value | humanize }}}} in the last "
                f"{gpu.xid_window}); look the code up in the runbook: some are application faults, others "
                f"hardware (ECC, bus, GSP)."
            ),
            dashboard=GPU_DASHBOARD,
        ),
        Alert(
            name="InfersightGPUThrottling",
            expr=f'rate({cat.CLOCK_EVENT_SECONDS}{{reason=~"{reasons}"}}[{gpu.throttle_window}]) > '
            f"{num(gpu.throttle_ratio)}",
            for_=gpu.throttle_for,
            severity="warning",
            summary="GPU clocks are held down by thermal or power limits.",
            description=(
                f"{WHERE}: clocks were slowed by {{{{ $labels.reason }}}} {{{{ $value | humanizePercentage }}}} of "
                f"the last {gpu.throttle_window} (limit {num(gpu.throttle_ratio * 100)}%): token latency rises "
                f"with the lost clock."
            ),
            dashboard=GPU_DASHBOARD,
        ),
    ]


def groups(config: Config) -> list[Group]:
    return [
        Group(
            "infersight-gpu",
            [util_unstable(config), *bandwidth_alerts(config), memory_leak(config), *health_alerts(config)],
        )
    ]
