"""The one configuration model: every SLO, threshold, window and URL lives here.

Defaults carry the numbers from the field article the bundle implements, so an
empty ``infersight.yaml`` is a working configuration. A user file overrides any
subset; loading validates it and every error names the field path, the expected
form and the value found.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

Ratio = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveSeconds = Annotated[float, Field(gt=0.0)]
_DURATION_RE = re.compile(r"^([0-9]+(ms|s|m|h|d|w))+$")


Duration = Annotated[str, Field(pattern=_DURATION_RE.pattern)]
LabelValue = Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_\-.]*$", max_length=64)]


def duration_seconds(value: str) -> float:
    """Seconds in a Prometheus duration string (``1h30m`` -> 5400)."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    return sum(int(n) * units[u] for n, u in re.findall(r"([0-9]+)(ms|s|m|h|d|w)", value))


class Section(BaseModel):
    """Base for every section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Tier(Section):
    """An SLO tier chosen by prompt length (the article: realtime / normal / batch)."""

    name: LabelValue
    """Tier label value (e.g. realtime)."""
    max_prompt_tokens: Annotated[int, Field(gt=0)] | None = Field(
        description="Upper bound of prompt tokens for this tier; null for the last, open-ended tier."
    )
    latency_seconds: PositiveSeconds | None = Field(
        description="End-to-end latency target; null for an asynchronous tier judged on backlog."
    )


class BurnWindow(Section):
    """One burn-rate condition: the error ratio over both windows exceeds ``factor`` x the budget rate."""

    short: Duration
    long: Duration
    factor: Annotated[float, Field(gt=0.0)]
    severity: Literal["critical", "warning"]

    @model_validator(mode="after")
    def _short_below_long(self) -> BurnWindow:
        if duration_seconds(self.short) >= duration_seconds(self.long):
            raise ValueError(f"short must be below long, found short={self.short} long={self.long}")
        return self


class BurnRate(Section):
    """Multi-window multi-burn-rate alerts on the per-tier SLIs (the SRE workbook's four pairs by default)."""

    period: Duration = Field("30d", description="SLO period; the error budget is (1 - objective) of its requests.")
    windows: list[BurnWindow] = Field(
        default_factory=lambda: [
            BurnWindow(short="5m", long="1h", factor=14.4, severity="critical"),
            BurnWindow(short="30m", long="6h", factor=6.0, severity="critical"),
            BurnWindow(short="2h", long="1d", factor=3.0, severity="warning"),
            BurnWindow(short="6h", long="3d", factor=1.0, severity="warning"),
        ],
        min_length=1,
        max_length=8,
    )
    """Multi-window multi-burn-rate pairs: short and long window, burn factor, severity."""
    min_requests: Annotated[int, Field(ge=0)] = Field(
        20, description="Low-traffic guard: a burn-rate condition needs this many requests in its long window."
    )
    critical_for: Duration = "2m"
    """for: of the paging burn-rate alert."""
    warning_for: Duration = "15m"
    """for: of the ticket burn-rate alert."""
    budget_interval: Duration = Field(
        "1m", description="Evaluation interval of the error-budget-remaining rule (it reads the whole period)."
    )


class BatchTier(Section):
    """An asynchronous tier (``latency_seconds: null``) is judged on its backlog, not its latency."""

    max_queue_seconds: PositiveSeconds = Field(
        300.0, description="Alert when the P99 queue wait of asynchronous-tier requests exceeds this."
    )
    window: Duration = "30m"
    """Window over which the asynchronous tier's backlog and throughput are judged."""
    alert_for: Duration = "15m"
    """for: of the batch-tier backlog and stall alerts."""


class SLO(Section):
    """Latency objectives and the P99 alert factors."""

    tiers: list[Tier] = Field(
        default_factory=lambda: [
            Tier(name="realtime", max_prompt_tokens=2048, latency_seconds=2.0),
            Tier(name="normal", max_prompt_tokens=32768, latency_seconds=5.0),
            Tier(name="batch", max_prompt_tokens=None, latency_seconds=None),
        ],
        min_length=1,
    )
    """SLO tiers by prompt length, shortest first; the last may be open-ended (max_prompt_tokens: null)."""
    percentile: Annotated[float, Field(gt=0.5, lt=1.0)] = 0.99
    """The latency percentile the per-model alerts watch (0.99 = P99)."""
    model_latency_tier: LabelValue = Field(
        "realtime",
        description="Tier whose target the per-model P99 alerts use (vLLM's own histograms are not split by tier).",
    )
    warning_factor: Annotated[float, Field(ge=1.0)] = 1.5
    """Warn when the P99 exceeds this multiple of the SLO (the article: 1.5x, scale out 10%)."""
    critical_factor: Annotated[float, Field(ge=1.0)] = 2.0
    """Page when the P99 exceeds this multiple of the SLO (the article: 2x, degrade to the fallback)."""
    latency_window: Duration = "1m"
    """Rate window of the per-model P99 recording rule."""
    warning_for: Duration = "1m"
    """How long the P99 must stay above the warning line before the warning fires."""
    critical_for: Duration = "5m"
    """How long the P99 must stay above the critical line before the page (the article: 5m)."""
    objective: Annotated[float, Field(gt=0.5, lt=1.0)] = 0.99
    """Share of requests per tier that must meet the tier's latency target (error budget = 1 - objective)."""
    warmup_requests: Annotated[int, Field(ge=0)] = 100
    """Requests after each engine start kept out of the SLO series (kernel loading runs 10-15% slow)."""
    min_requests_per_second: Annotated[float, Field(ge=0.0)] = Field(
        0.0, description="Low-traffic guard: latency alerts stay quiet below this request rate."
    )
    burn_rate: BurnRate = BurnRate()
    batch: BatchTier = BatchTier()

    @model_validator(mode="after")
    def _check_tiers(self) -> SLO:
        names = [t.name for t in self.tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"tier names must be unique, found {names}")
        bounds = [t.max_prompt_tokens for t in self.tiers]
        if any(b is None for b in bounds[:-1]):
            raise ValueError("only the last tier may have max_prompt_tokens: null")
        finite = [b for b in bounds if b is not None]
        if finite != sorted(set(finite)):
            raise ValueError(f"max_prompt_tokens must increase from tier to tier, found {bounds}")
        if self.model_latency_tier not in names:
            raise ValueError(f"model_latency_tier must be one of {names}, found {self.model_latency_tier!r}")
        if self.tier(self.model_latency_tier).latency_seconds is None:
            raise ValueError("model_latency_tier must name a tier with a latency_seconds target")
        if self.critical_factor < self.warning_factor:
            raise ValueError("critical_factor must be >= warning_factor")
        return self

    def tier(self, name: str) -> Tier:
        return next(t for t in self.tiers if t.name == name)


class HBMBand(Section):
    low: Ratio = 0.60
    """HBM bandwidth utilization below this while requests wait is underuse."""
    high: Ratio = 0.80
    """HBM bandwidth utilization above this is saturation."""

    @model_validator(mode="after")
    def _ordered(self) -> HBMBand:
        if self.low >= self.high:
            raise ValueError(f"low must be below high, found low={self.low} high={self.high}")
        return self


class Thresholds(Section):
    """Alert thresholds from the article, in base units (ratios 0..1, seconds)."""

    kv_cache_usage: Ratio = 0.80
    """KV-cache usage (0..1) above which InfersightKVCacheHigh fires (the article: keep < 0.8)."""
    kv_cache_for: Duration = "5m"
    """for: of InfersightKVCacheHigh."""
    queue_waiting_requests: Annotated[float, Field(ge=0)] = 10
    """Waiting requests above which InfersightQueueBacklog fires."""
    queue_for: Duration = "5m"
    """for: of InfersightQueueBacklog."""
    preemptions_per_second: Annotated[float, Field(ge=0)] = 1.0
    """Preemptions per second above which InfersightPreemptionsHigh fires."""
    preemptions_window: Duration = Field("2m", description="Window of rate() over vLLM's preemption counter.")
    preemptions_for: Duration = "5m"
    """for: of InfersightPreemptionsHigh."""
    batch_efficiency: Ratio = 0.85
    """Batch efficiency (0..1) below which InfersightBatchEfficiencyLow fires while requests wait."""
    scheduling_cycle_seconds: PositiveSeconds = 0.005
    """Scheduler time per step above which InfersightSchedulingCycleSlow fires (the article: 5 ms)."""
    gpu_util_stddev: Ratio = 0.15
    """GPU-Util standard deviation (0..1) above which InfersightGPUUtilUnstable fires (the article: 15%)."""
    hbm_bandwidth: HBMBand = HBMBand()
    domain_token_accuracy: Ratio = 0.98
    """Domain token accuracy (0..1) below which InfersightDomainTokenAccuracyLow fires (the article: 98%)."""
    compliance_pass_rate: Ratio = 1.0
    """Compliance pass rate (0..1) below which InfersightComplianceCheckFailed pages (the article: 100%)."""
    spec_decode_acceptance: Ratio = 0.85
    """Speculative-decoding acceptance (0..1) below which InfersightSpecDecodeAcceptanceLow fires."""
    spec_decode_failure: Ratio = 0.05
    """Share of drafts rejected at the first token above which InfersightSpecDecodeFailureHigh fires."""
    target_down_for: Duration = "1m"
    """for: of the target-down and absent alerts."""


class Target(Section):
    """One vLLM server whose /metrics the sidecar polls."""

    name: LabelValue
    url: Annotated[str, Field(pattern=r"^https?://")]


class VLLM(Section):
    """The vLLM servers the sidecar polls, and how (the ``vllm`` collector)."""

    targets: list[Target] = Field(
        default_factory=lambda: [Target(name="vllm-0", url="http://127.0.0.1:8000/metrics")],
        max_length=32,
        description="vLLM /metrics URLs to poll; name becomes the target label.",
    )
    poll_interval_seconds: PositiveSeconds = Field(1.0, description="How often each target is polled.")
    timeout_seconds: PositiveSeconds = Field(
        0.8, description="Limit for connecting, each read, and (checked between chunks) the whole answer."
    )
    rate_window_seconds: Annotated[float, Field(ge=2.0)] = Field(
        30.0, description="Window of the rates and ratios the sidecar derives (preemptions/s, batch efficiency...)."
    )
    max_num_batched_tokens: Annotated[int, Field(gt=0)] = Field(
        2048, description="The engine's token budget per step (vLLM --max-num-batched-tokens)."
    )
    max_response_bytes: Annotated[int, Field(gt=0)] = Field(
        8 * 1024 * 1024, description="Larger /metrics answers are refused (reason too_large), never read whole."
    )
    max_series_per_target: Annotated[int, Field(gt=0)] = Field(
        16, description="(model_name, engine) pairs exported per target; more are dropped and counted."
    )

    @field_validator("targets")
    @classmethod
    def _unique_names(cls, targets: list[Target]) -> list[Target]:
        names = [t.name for t in targets]
        if len(set(names)) != len(names):
            raise ValueError(f"target names must be unique, found {names}")
        return targets

    @model_validator(mode="after")
    def _window_spans_polls(self) -> VLLM:
        if self.rate_window_seconds < 2 * self.poll_interval_seconds:
            raise ValueError(
                "rate_window_seconds must cover at least two polls (2 x poll_interval_seconds), found "
                f"rate_window_seconds={self.rate_window_seconds} poll_interval_seconds={self.poll_interval_seconds}"
            )
        return self


class Collectors(Section):
    vllm: bool = True
    """Poll vLLM /metrics and export derived signals."""
    gpu: bool = True
    """Read GPU telemetry from NVML (disables itself with one log line where no driver is present)."""
    business: bool = True
    """Accept application events on POST /v1/events."""


class Exporter(Section):
    listen_address: str = "127.0.0.1"
    """Address the sidecar binds; beyond loopback it needs an ingest token."""
    port: Annotated[int, Field(ge=0, le=65535)] = 9400
    """Port of the sidecar's /metrics, /healthz and /v1/events."""
    collectors: Collectors = Collectors()
    ingest_token_file: str | None = Field(
        None,
        description="File holding the bearer token for write endpoints (or set INFERSIGHT_INGEST_TOKEN); "
        "required when listen_address is not loopback.",
    )
    max_body_bytes: Annotated[int, Field(gt=0, le=64 * 1024 * 1024)] = 1024 * 1024
    """Largest request body the sidecar reads; larger ones get 413."""


class Cost(Section):
    gpu_hour_usd: Annotated[float, Field(ge=0)] = Field(
        1.01, description="Price of one GPU-hour (an A10G on demand is about $1.01)."
    )
    gpus_per_replica: Annotated[int, Field(gt=0)] = 1
    """GPUs behind each vLLM target, for cost per request."""
    budget_per_request_usd: Annotated[float, Field(gt=0)] = Field(
        0.35, description="Alert when cost per request exceeds this (the article's single-A10G figure)."
    )
    window: Duration = Field("1h", description="Rate window of the cost-per-request and per-1K-token rules.")
    alert_for: Duration = "30m"
    """for: of InfersightCostPerRequestHigh."""


class PagerDuty(Section):
    url: Annotated[str, Field(pattern=r"^https?://")] = "https://events.pagerduty.com/v2/enqueue"
    """Events v2 endpoint Alertmanager posts pages to."""
    routing_key_file: str = "/etc/alertmanager/secrets/pagerduty_routing_key"
    """File holding the PagerDuty routing key, read by Alertmanager at each send."""


class Alerting(Section):
    pagerduty: PagerDuty = PagerDuty()
    warning_webhook_url: Annotated[str, Field(pattern=r"^https?://")] = "http://127.0.0.1:9095/alerts"
    """Webhook receiving warning alerts."""
    group_wait: Duration = "10s"
    """Alertmanager group_wait: delay before the first notification of a group."""
    group_interval: Duration = "1m"
    """Alertmanager group_interval."""
    repeat_interval: Duration = "4h"
    """Alertmanager repeat_interval for alerts still firing."""


class Prometheus(Section):
    scrape_interval: Duration = "15s"
    """Prometheus scrape interval in the generated prometheus.yml."""
    evaluation_interval: Duration = "15s"
    """Prometheus rule evaluation interval."""
    vllm_job: LabelValue = "vllm"
    """Scrape job name of the vLLM servers (rules select on it)."""
    sidecar_job: LabelValue = "infersight"
    """Scrape job name of the sidecars."""


class URLs(Section):
    runbook_base: Annotated[str, Field(pattern=r"^https?://")] = (
        "https://github.com/infersight/infersight/blob/main/runbooks"
    )
    """Base URL of runbooks/; every alert links <base>/<AlertName>.md#<alertname>."""
    dashboard_base: Annotated[str, Field(pattern=r"^https?://")] = "http://localhost:3000"
    """Grafana base URL; every alert links <base>/d/<dashboard uid>."""


class GPU(Section):
    """GPU telemetry from NVML (the ``gpu`` collector)."""

    sample_window_seconds: Annotated[float, Field(gt=0, le=3600)] = Field(
        60.0, description="Window of the utilization mean / standard deviation and of the HBM bandwidth mean."
    )
    poll_hz: Annotated[float, Field(gt=0, le=50)] = 10.0
    """How often the driver's utilization sample buffer is drained."""
    slow_poll_seconds: Annotated[float, Field(ge=1.0)] = Field(
        1.0, description="Period of the slow NVML calls (power, clocks, temperature): at most 1 Hz."
    )
    max_processes_per_gpu: Annotated[int, Field(ge=1, le=64)] = Field(
        8, description="Per-process memory is exported for at most this many processes per GPU, largest first."
    )
    process_allow_list: list[Annotated[str, Field(min_length=1, max_length=128)]] = Field(
        default_factory=list,
        max_length=64,
        description="Glob patterns on the process name (basename); empty means every compute process.",
    )
    xid_codes: list[Annotated[int, Field(ge=1, le=65535)]] = Field(
        default_factory=lambda: [13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120],
        min_length=1,
        max_length=64,
        description="XID codes counted under their own label value; any other code is counted as 'other'.",
    )
    min_window_samples: Annotated[int, Field(ge=2)] = Field(
        30, description="The utilization-stability alert needs this many driver samples in the window."
    )
    util_unstable_for: Duration = "10m"
    """for: of InfersightGPUUtilUnstable."""
    hbm_for: Duration = "10m"
    """for: of the HBM bandwidth alerts."""
    leak_lookback: Duration = Field("1h", description="Range of predict_linear over per-process GPU memory.")
    leak_horizon: Duration = Field("4h", description="Alert when the trend would use up free GPU memory within this.")
    leak_warmup: Duration = Field(
        "30m", description="A process is judged only once seen this long before the lookback (model load, warm-up)."
    )
    leak_min_growth_bytes: Annotated[int, Field(ge=0)] = Field(
        256 * 1024 * 1024, description="Growth over the lookback below this is noise, not a leak."
    )
    leak_for: Duration = "15m"
    """for: of InfersightGPUMemoryLeak."""
    xid_window: Duration = Field("10m", description="An XID keeps its alert firing this long.")
    lost_for: Duration = Field(
        "1m", description="A lost GPU stays lost until reset; this only lets one odd scrape pass unpaged."
    )
    throttle_reasons: list[
        Literal["sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"]
    ] = Field(
        default_factory=lambda: [
            "hw_slowdown",
            "sw_thermal_slowdown",
            "hw_thermal_slowdown",
            "hw_power_brake_slowdown",
        ],
        min_length=1,
        description="Clock-event reasons that count as throttling (sw_power_cap is routine at full load).",
    )
    throttle_ratio: Ratio = Field(0.25, description="Alert when clocks are held down this share of the time.")
    throttle_window: Duration = "5m"
    """Window over which the throttled share of time is measured."""
    throttle_for: Duration = "5m"
    """for: of InfersightGPUThrottling."""


class Business(Section):
    """Application-reported events (the ``business`` collector's ingest endpoint)."""

    domains: list[LabelValue] = Field(default_factory=lambda: ["general"], max_length=64)
    """Allowed domain label values; others fold into `other`."""
    compliance_rules: list[LabelValue] = Field(default_factory=list, max_length=256)
    """Allowed compliance rule ids; others fold into `other`."""
    tenants: list[LabelValue] = Field(default_factory=list, max_length=256)
    """Allowed tenant label values for cost attribution; others fold into `other`."""
    products: list[LabelValue] = Field(default_factory=list, max_length=256)
    """Allowed product label values for cost attribution; others fold into `other`."""
    max_events_per_batch: Annotated[int, Field(gt=0, le=100_000)] = 10_000
    """Most events one POST /v1/events may carry."""
    accuracy_window: Duration = "15m"
    """Window of the domain token accuracy ratio."""
    accuracy_min_tokens: Annotated[int, Field(ge=0)] = Field(
        1000, description="Low-volume guard: the accuracy alert needs this many tokens checked in the window."
    )
    accuracy_for: Duration = "5m"
    """for: of InfersightDomainTokenAccuracyLow."""
    compliance_window: Duration = Field("15m", description="How long one compliance failure keeps its alert firing.")
    compliance_for: Duration = "0s"
    """for: of InfersightComplianceCheckFailed (0s: page at the first failure)."""
    phase_window: Duration = Field("5m", description="Rate window of the gateway phase-latency rules.")
    roi_compare_offset: Annotated[str, Field(pattern=r"^[0-9]+[mhdw]$")] = Field(
        "7d", description="How far back the business dashboard's before/after panels look (a Grafana time shift)."
    )


class Plugin(Section):
    """The in-process vLLM stat-logger plugin."""

    enabled: bool = True
    """Turn the in-process vLLM plugin on or off without uninstalling it."""
    latency_buckets_seconds: list[PositiveSeconds] = Field(
        default_factory=lambda: [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0],
        min_length=1,
        max_length=40,
        description="Request latency buckets; every tier's target and its warning/critical multiples are added.",
    )
    channel_dir: str | None = Field(
        None,
        description="Directory of the shared-memory file the timed scheduler publishes to; null means /dev/shm "
        "where it exists, else the temp directory.",
    )
    engine_alert_window: Duration = Field(
        "5m", description="Rate window of the batch-efficiency, scheduling-cycle and speculative-decoding alerts."
    )
    engine_alert_for: Duration = "10m"
    """for: of the plugin's engine alerts (batch efficiency, scheduling, spec decode)."""


class Config(Section):
    """The whole ``infersight.yaml``."""

    version: Literal[1] = 1
    """Schema version of this file."""
    slo: SLO = SLO()
    thresholds: Thresholds = Thresholds()
    vllm: VLLM = VLLM()
    exporter: Exporter = Exporter()
    cost: Cost = Cost()
    alerting: Alerting = Alerting()
    prometheus: Prometheus = Prometheus()
    urls: URLs = URLs()
    gpu: GPU = GPU()
    business: Business = Business()
    plugin: Plugin = Plugin()


class ConfigError(ValueError):
    """A configuration file that cannot be used; ``problems`` has one line per bad field."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: invalid configuration\n" + "\n".join(f"  - {p}" for p in problems))


def _field_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def _known_fields(loc: tuple[Any, ...]) -> list[str]:
    """Field names valid at the parent of ``loc``, for did-you-mean hints."""
    model: Any = Config
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return []
        annotation = field.annotation
        inner = getattr(annotation, "__args__", None)
        model = inner[0] if inner else annotation
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
    return list(model.model_fields)


def _describe(error: dict[str, Any]) -> str:
    loc = tuple(error["loc"])
    path = _field_path(loc)
    found = error.get("input")
    if error["type"] == "extra_forbidden":
        hint = difflib.get_close_matches(str(loc[-1]), _known_fields(loc), n=1)
        suggestion = f"; did you mean {hint[0]!r}?" if hint else ""
        return f"{path}: unknown field{suggestion}"
    message = error["msg"].removeprefix("Value error, ").replace("Input should be", "expected")
    if error["type"] == "string_pattern_mismatch":
        pattern = str(error.get("ctx", {}).get("pattern", ""))
        message = (
            "expected a Prometheus duration such as 30s, 5m or 1h"
            if "ms|s|m|h|d|w" in pattern
            else f"expected a string matching {pattern!r}"
        )
    if ", found " in message:  # a model-level check already quoted the values
        return f"{path}: {message}"
    return f"{path}: {message[0].lower()}{message[1:]}, found {found!r}"


def parse_config(data: Any, source: str = "<config>") -> Config:
    """Validate a mapping (from YAML) into a Config, or raise ConfigError."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, [f"(top level): expected a mapping, found {type(data).__name__}"])
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, [_describe(e) for e in exc.errors()]) from None


def load_config(path: str | Path | None = None) -> Config:
    """Load a user file over the embedded defaults; no path means the defaults alone."""
    if path is None:
        return Config()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read file: {exc.strerror}"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [f"not valid YAML: {exc}"]) from None
    return parse_config(data, str(path))


def dump_config(config: Config) -> str:
    """The full configuration as YAML, every default spelled out."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, width=100)
