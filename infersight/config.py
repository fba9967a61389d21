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

    model_config = ConfigDict(extra="forbid", frozen=True)


class Tier(Section):
    """An SLO tier chosen by prompt length (the article: realtime / normal / batch)."""

    name: LabelValue
    max_prompt_tokens: Annotated[int, Field(gt=0)] | None = Field(
        description="Upper bound of prompt tokens for this tier; null for the last, open-ended tier."
    )
    latency_seconds: PositiveSeconds | None = Field(
        description="End-to-end latency target; null for an asynchronous tier judged on backlog."
    )


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
    percentile: Annotated[float, Field(gt=0.5, lt=1.0)] = 0.99
    model_latency_tier: LabelValue = Field(
        "realtime",
        description="Tier whose target the per-model P99 alerts use (vLLM's own histograms are not split by tier).",
    )
    warning_factor: Annotated[float, Field(ge=1.0)] = 1.5
    critical_factor: Annotated[float, Field(ge=1.0)] = 2.0
    latency_window: Duration = "1m"
    warning_for: Duration = "1m"
    critical_for: Duration = "5m"
    objective: Annotated[float, Field(gt=0.5, lt=1.0)] = 0.99
    warmup_requests: Annotated[int, Field(ge=0)] = 100
    min_requests_per_second: Annotated[float, Field(ge=0.0)] = Field(
        0.0, description="Low-traffic guard: latency alerts stay quiet below this request rate."
    )

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
    high: Ratio = 0.80

    @model_validator(mode="after")
    def _ordered(self) -> HBMBand:
        if self.low >= self.high:
            raise ValueError(f"low must be below high, found low={self.low} high={self.high}")
        return self


class Thresholds(Section):
    """Alert thresholds from the article, in base units (ratios 0..1, seconds)."""

    kv_cache_usage: Ratio = 0.80
    kv_cache_for: Duration = "5m"
    queue_waiting_requests: Annotated[float, Field(ge=0)] = 10
    queue_for: Duration = "5m"
    preemptions_per_second: Annotated[float, Field(ge=0)] = 1.0
    preemptions_for: Duration = "5m"
    batch_efficiency: Ratio = 0.85
    scheduling_cycle_seconds: PositiveSeconds = 0.005
    gpu_util_stddev: Ratio = 0.15
    hbm_bandwidth: HBMBand = HBMBand()
    domain_token_accuracy: Ratio = 0.98
    compliance_pass_rate: Ratio = 1.0
    spec_decode_acceptance: Ratio = 0.85
    spec_decode_failure: Ratio = 0.05
    target_down_for: Duration = "1m"


class Target(Section):
    """One vLLM server whose /metrics the sidecar polls."""

    name: LabelValue
    url: Annotated[str, Field(pattern=r"^https?://")]


class VLLM(Section):
    targets: list[Target] = Field(
        default_factory=lambda: [Target(name="vllm-0", url="http://127.0.0.1:8000/metrics")],
        max_length=32,
    )
    poll_interval_seconds: PositiveSeconds = 1.0
    timeout_seconds: PositiveSeconds = 0.8
    rate_window_seconds: Annotated[float, Field(ge=2.0)] = 30.0
    max_num_batched_tokens: Annotated[int, Field(gt=0)] = Field(
        2048, description="The engine's token budget per step (vLLM --max-num-batched-tokens)."
    )
    max_response_bytes: Annotated[int, Field(gt=0)] = 8 * 1024 * 1024
    max_series_per_target: Annotated[int, Field(gt=0)] = 16

    @field_validator("targets")
    @classmethod
    def _unique_names(cls, targets: list[Target]) -> list[Target]:
        names = [t.name for t in targets]
        if len(set(names)) != len(names):
            raise ValueError(f"target names must be unique, found {names}")
        return targets


class Collectors(Section):
    vllm: bool = True
    gpu: bool = True
    business: bool = True


class Exporter(Section):
    listen_address: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 9400
    collectors: Collectors = Collectors()
    ingest_token_file: str | None = Field(
        None,
        description="File holding the bearer token for write endpoints (or set INFERSIGHT_INGEST_TOKEN); "
        "required when listen_address is not loopback.",
    )
    max_body_bytes: Annotated[int, Field(gt=0, le=64 * 1024 * 1024)] = 1024 * 1024


class Cost(Section):
    gpu_hour_usd: Annotated[float, Field(ge=0)] = Field(
        1.01, description="Price of one GPU-hour (an A10G on demand is about $1.01)."
    )
    gpus_per_replica: Annotated[int, Field(gt=0)] = 1
    budget_per_request_usd: Annotated[float, Field(gt=0)] = Field(
        0.35, description="Alert when cost per request exceeds this (the article's single-A10G figure)."
    )


class PagerDuty(Section):
    url: Annotated[str, Field(pattern=r"^https?://")] = "https://events.pagerduty.com/v2/enqueue"
    routing_key_file: str = "/etc/alertmanager/secrets/pagerduty_routing_key"


class Alerting(Section):
    pagerduty: PagerDuty = PagerDuty()
    warning_webhook_url: Annotated[str, Field(pattern=r"^https?://")] = "http://127.0.0.1:9095/alerts"
    group_wait: Duration = "10s"
    group_interval: Duration = "1m"
    repeat_interval: Duration = "4h"


class Prometheus(Section):
    scrape_interval: Duration = "15s"
    evaluation_interval: Duration = "15s"
    vllm_job: LabelValue = "vllm"
    sidecar_job: LabelValue = "infersight"


class URLs(Section):
    runbook_base: Annotated[str, Field(pattern=r"^https?://")] = (
        "https://github.com/infersight/infersight/blob/main/runbooks"
    )
    dashboard_base: Annotated[str, Field(pattern=r"^https?://")] = "http://localhost:3000"


class GPU(Section):
    """GPU telemetry from NVML (the ``gpu`` collector)."""

    sample_window_seconds: Annotated[float, Field(gt=0)] = 60.0
    poll_hz: Annotated[float, Field(gt=0, le=50)] = 10.0
    slow_poll_seconds: Annotated[float, Field(ge=1.0)] = Field(
        1.0, description="Period of the slow NVML calls (power, clocks, temperature): at most 1 Hz."
    )


class Business(Section):
    """Application-reported events (the ``business`` collector's ingest endpoint)."""

    domains: list[LabelValue] = Field(default_factory=lambda: ["general"], max_length=64)
    compliance_rules: list[LabelValue] = Field(default_factory=list, max_length=256)
    tenants: list[LabelValue] = Field(default_factory=list, max_length=256)


class Plugin(Section):
    """The in-process vLLM stat-logger plugin."""

    enabled: bool = True


class Config(Section):
    """The whole ``infersight.yaml``."""

    version: Literal[1] = 1
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
