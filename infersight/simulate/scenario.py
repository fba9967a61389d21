"""Scenario files: a timeline of phases, each a state of vLLM, GPU and business traffic, and the
alerts the scenario must fire.

A phase states only what differs from the steady state; every field it leaves out
takes the steady-state value, so a file reads as "what goes wrong". Loading
validates like the config: every error names the field path, the expected form
and the value found.

    name: latency-spike
    description: Long contexts surge; P99 goes from 1.9 s to 3.4 s.
    expect: [InfersightP99LatencyWarning]
    phases:
      - {name: steady, seconds: 20}
      - name: long-context surge
        seconds: 100
        incident: true
        vllm: {mix: [...]}

Durations are wall-clock seconds of the simulation; the files in ``scenarios/`` are
written for the game-day config (``gameday.compressed_config``), where one minute of
production time takes one second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import Field, ValidationError, model_validator

from infersight.config import ConfigError, PositiveSeconds, Ratio, Section

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"
NAME_PATTERN = r"^[a-z][a-z0-9-]{0,40}$"
NonNegative = Annotated[float, Field(ge=0.0)]


class RequestClass(Section):
    """A share of the traffic with one prompt length, output length and end-to-end latency."""

    share: Annotated[float, Field(gt=0.0, le=1.0)]
    prompt_tokens: Annotated[int, Field(gt=0)]
    generation_tokens: Annotated[int, Field(gt=1)]
    latency_seconds: PositiveSeconds


def steady_mix() -> list[RequestClass]:
    """Steady state: P99 1.9 s on vLLM's e2e buckets (5% of requests in (1.5, 2.0])."""
    return [
        RequestClass(share=0.95, prompt_tokens=800, generation_tokens=150, latency_seconds=0.8),
        RequestClass(share=0.05, prompt_tokens=1800, generation_tokens=300, latency_seconds=1.9),
    ]


class SpecDecode(Section):
    """Speculative decoding: ``acceptance`` of draft tokens, ``first_token_acceptance`` of drafts."""

    num_speculative_tokens: Annotated[int, Field(ge=1, le=16)] = 4
    drafts_per_second: NonNegative = 200.0
    acceptance: Ratio = 0.9
    first_token_acceptance: Ratio = 0.98

    @model_validator(mode="after")
    def _consistent(self) -> SpecDecode:
        if self.acceptance > self.first_token_acceptance:
            raise ValueError(
                "acceptance cannot exceed first_token_acceptance (a draft's later tokens count only after its "
                f"first), found acceptance={self.acceptance} first_token_acceptance={self.first_token_acceptance}"
            )
        return self


class VllmState(Section):
    requests_per_second: NonNegative = 40.0
    mix: list[RequestClass] = Field(default_factory=steady_mix, min_length=1, max_length=8)
    queue_seconds: NonNegative = 0.02
    running: Annotated[int, Field(ge=0)] = 12
    waiting: Annotated[int, Field(ge=0)] = 0
    kv_cache_usage: Ratio = 0.45
    preemptions_per_second: NonNegative = 0.0
    steps_per_second: Annotated[float, Field(gt=0.0)] = 40.0
    prefix_cache_hit_ratio: Ratio = 0.3
    spec_decode: SpecDecode | None = None
    down: bool = Field(False, description="The server is gone (connection refused); it restarts when up again.")
    restart: bool = Field(False, description="The engine restarts at the start of the phase (counters reset).")

    @model_validator(mode="after")
    def _shares(self) -> VllmState:
        total = sum(c.share for c in self.mix)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"mix shares must add up to 1, found {round(total, 6)}")
        return self


class GpuState(Section):
    utilization_percent: Annotated[float, Field(ge=0, le=100)] = 75.0
    jitter_percent: Annotated[float, Field(ge=0, le=50)] = Field(
        2.0, description="Driver samples alternate this far above and below utilization_percent."
    )
    dram_bandwidth_percent: Annotated[float, Field(ge=0, le=100)] = 70.0
    process_memory_gib: Annotated[float, Field(ge=0, le=1024)] = 60.0
    leak_mib_per_second: NonNegative = 0.0


class BusinessState(Section):
    domain_tokens_per_second: NonNegative = 300.0
    domain_accuracy: Ratio = 0.995
    compliance_checks_per_second: NonNegative = 2.0
    compliance_pass_rate: Ratio = 1.0


class Phase(Section):
    name: Annotated[str, Field(min_length=1, max_length=60)]
    seconds: PositiveSeconds
    incident: bool = Field(False, description="Time to page is counted from the start of the first such phase.")
    vllm: VllmState = VllmState()
    gpu: GpuState = GpuState()
    business: BusinessState = BusinessState()


class Scenario(Section):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    description: Annotated[str, Field(min_length=1)]
    expect: list[Annotated[str, Field(pattern=r"^Infersight[A-Za-z0-9]+$")]] = Field(default_factory=list)
    plugin: bool = Field(False, description="The infersight plugin runs in the engine: its series join /metrics.")
    warmup_requests: Annotated[int, Field(ge=0)] = Field(
        100, description="Requests after each (re)start that run warmup_slowdown times slower (kernel loading)."
    )
    warmup_slowdown: Annotated[float, Field(ge=1.0)] = 1.15
    phases: list[Phase] = Field(min_length=1, max_length=32)

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)

    @property
    def incident_at(self) -> float | None:
        """Seconds from the start of the timeline to the first incident phase."""
        elapsed = 0.0
        for phase in self.phases:
            if phase.incident:
                return elapsed
            elapsed += phase.seconds
        return None

    def phase_at(self, elapsed: float) -> tuple[int, Phase]:
        """The phase playing ``elapsed`` seconds into the timeline; the last one holds after the end."""
        for index, phase in enumerate(self.phases):
            if elapsed < phase.seconds:
                return index, phase
            elapsed -= phase.seconds
        return len(self.phases) - 1, self.phases[-1]


def _problem(error: dict[str, Any]) -> str:
    path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in error["loc"]).replace(".[", "[")
    path = path or "(top level)"
    if error["type"] == "extra_forbidden":
        return f"{path}: unknown field"
    message = error["msg"].removeprefix("Value error, ").replace("Input should be", "expected")
    if error["type"] == "string_pattern_mismatch":
        message = f"expected a string matching {error.get('ctx', {}).get('pattern', '')!r}"
    if ", found " in message:
        return f"{path}: {message}"
    return f"{path}: {message[0].lower()}{message[1:]}, found {error.get('input')!r}"


def parse_scenario(data: Any, source: str, known_alerts: set[str] | None = None) -> Scenario:
    """Validate a mapping into a Scenario, or raise ConfigError naming every bad field.

    ``known_alerts``: the alert names ``expect`` may use (an unknown name is an error).
    """
    if not isinstance(data, dict):
        raise ConfigError(source, [f"(top level): expected a mapping, found {type(data).__name__}"])
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, [_problem(e) for e in exc.errors()]) from None
    if known_alerts is not None:
        unknown = [name for name in scenario.expect if name not in known_alerts]
        if unknown:
            raise ConfigError(source, [f"expect: unknown alert(s) {unknown}, expected names from the rule set"])
    return scenario


def load_scenario(path: str | Path, known_alerts: set[str] | None = None) -> Scenario:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read file: {exc.strerror}"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [f"not valid YAML: {exc}"]) from None
    return parse_scenario(data, str(path), known_alerts)


def scenario_files(directory: Path = SCENARIO_DIR) -> list[Path]:
    return sorted(directory.glob("*.yaml"))


def find_scenario(name_or_path: str, known_alerts: set[str] | None = None) -> Scenario:
    """A scenario by file path, or by name from ``scenarios/``; the error lists the names there."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return load_scenario(path, known_alerts)
    candidate = SCENARIO_DIR / f"{name_or_path}.yaml"
    if candidate.exists():
        return load_scenario(candidate, known_alerts)
    names = ", ".join(p.stem for p in scenario_files())
    raise ConfigError(name_or_path, [f"no such scenario; expected a file or one of: {names}"])


def all_scenarios(known_alerts: set[str] | None = None) -> list[Scenario]:
    """Every scenario in ``scenarios/``; a file's ``name`` must match its file name."""
    scenarios = []
    for path in scenario_files():
        scenario = load_scenario(path, known_alerts)
        if scenario.name != path.stem:
            raise ConfigError(str(path), [f"name: expected {path.stem!r} (the file name), found {scenario.name!r}"])
        scenarios.append(scenario)
    return scenarios
