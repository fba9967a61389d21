"""The in-process vLLM plugin: tiers, buckets on the SLO, warm-up, per-step recording, exposition.

The plugin's core is plain Python, so most tests drive it here with stand-ins for
vLLM's stats objects. ``test_real_vllm_objects`` checks those stand-ins against
the real dataclasses of the installed vLLM and drives the real entry point with
real objects, in the vLLM environment (system Python has no vLLM).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from alerts.groups.slo import VLLM_E2E_BUCKETS, fallback_bound, good_record, sli_rules
from alerts.render import prometheus_rules_yaml
from infersight.catalog import Metric
from infersight.catalog import plugin as catalog
from infersight.config import Config, parse_config
from infersight.vllm_plugin import buckets
from infersight.vllm_plugin.channel import CALLS, ChannelReader, ChannelWriter, channel_path, remove_stale
from infersight.vllm_plugin.exposition import PluginCollector
from infersight.vllm_plugin.recorder import EngineRecorder, Settings
from infersight.vllm_plugin.tiers import TierTable
from tests.harness.promql import selectors
from tests.harness.promtool import assert_ok, promtool
from tests.harness.vllm_env import require_vllm
from tests.harness.vllm_plugin_env import PLUGIN_GROUP, REPO, entry_points_txt, plugin_path

# --- stand-ins with the field names of vLLM 0.32's stats objects (checked below) ---


class FinishReason(Enum):
    STOP = 0
    LENGTH = 1
    ABORT = 2
    ERROR = 3


@dataclass
class FinishedRequestStats:
    finish_reason: FinishReason = FinishReason.LENGTH
    e2e_latency: float = 1.0
    num_prompt_tokens: int = 100
    num_generation_tokens: int = 10
    queued_time: float = 0.1
    prefill_time: float = 0.2
    decode_time: float = 0.6
    mean_time_per_output_token: float = 0.06


@dataclass
class PromptTokenStats:
    computed: int = 0


@dataclass
class IterationStats:
    num_generation_tokens: int = 0
    prompt_token_stats: PromptTokenStats = field(default_factory=PromptTokenStats)
    finished_requests: list[FinishedRequestStats] = field(default_factory=list)


@dataclass
class SchedulerIterationDetails:
    num_ctx_tokens: int = 0
    num_generation_tokens: int = 0
    elapsed_ms: float = 0.0
    is_dummy: bool = False


@dataclass
class SchedulerStats:
    num_running_reqs: int = 0
    num_waiting_reqs: int = 0
    num_skipped_waiting_reqs: int = 0
    iteration_details: SchedulerIterationDetails | None = None


STAND_INS = (FinishedRequestStats, PromptTokenStats, IterationStats, SchedulerIterationDetails, SchedulerStats)


def recorder(config: Config | None = None, budget: int = 1000) -> EngineRecorder:
    return EngineRecorder(Settings.from_config(config or Config()), "m", "0", budget)


def no_warmup(**slo: Any) -> Config:
    return parse_config({"slo": {"warmup_requests": 0, **slo}})


def scrape(*recorders: EngineRecorder, collector: PluginCollector | None = None) -> dict[str, Any]:
    """Exposition text parsed back: sample name + sorted labels -> value."""
    collector = collector or PluginCollector()
    for r in recorders:
        collector.add_engine(r, Path("/nonexistent/channel"))
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: dict[str, Any], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


# --- tiers ---------------------------------------------------------------------


def test_tier_bounds_are_inclusive_and_everything_lands_somewhere() -> None:
    table = TierTable(Config())  # realtime <= 2048, normal <= 32768, batch open
    assert [table.name(n) for n in (0, 1, 2048, 2049, 32768, 32769, 10**7)] == [
        "realtime", "realtime", "realtime", "normal", "normal", "batch", "batch",
    ]  # fmt: skip
    bounded = parse_config(
        {"slo": {"tiers": [{"name": "short", "max_prompt_tokens": 10, "latency_seconds": 1},
                           {"name": "long", "max_prompt_tokens": 20, "latency_seconds": 2}],
                 "model_latency_tier": "short"}}
    )  # fmt: skip
    assert [TierTable(bounded).name(n) for n in (10, 11, 20, 21)] == ["short", "long", "long", "long"]


# --- buckets -------------------------------------------------------------------

targets = st.floats(min_value=0.05, max_value=500, allow_nan=False).map(lambda v: round(v, 3))


@settings(max_examples=60, deadline=None)
@given(realtime=targets, extra=targets, warning=st.floats(1, 3), critical_extra=st.floats(0, 3))
def test_every_slo_point_is_a_bucket_the_plugin_exposes_and_the_rules_select(
    realtime: float, extra: float, warning: float, critical_extra: float
) -> None:
    """Target, warning and critical multiples are bounds; the SLI rule selects the very ``le`` exposed."""
    config = parse_config(
        {"slo": {"warmup_requests": 0, "warning_factor": warning, "critical_factor": warning + critical_extra,
                 "tiers": [{"name": "realtime", "max_prompt_tokens": 2048, "latency_seconds": realtime},
                           {"name": "normal", "max_prompt_tokens": 32768, "latency_seconds": realtime + extra},
                           {"name": "batch", "max_prompt_tokens": None, "latency_seconds": None}]}}
    )  # fmt: skip
    bounds = buckets.latency_buckets(config)
    assert list(bounds) == sorted(set(bounds))
    exposed = {k[1] for k in scrape(recorder(config)) if k[0] == catalog.REQUEST_E2E.bucket}
    exposed_le = {dict(labels)["le"] for labels in exposed}
    for tier, points in buckets.slo_points(config).items():
        for point in points:
            assert round(point, 9) in bounds, f"{tier}: {point} is not a bucket bound"
            assert buckets.le(point) in exposed_le
    good = next(r for r in sli_rules(config, "5m") if r.record == good_record("5m"))
    selected = {le for s in selectors(good.expr) if s.name == catalog.REQUEST_E2E.bucket for le in s.le}
    assert selected == {buckets.le(p[0]) for p in buckets.slo_points(config).values()}
    assert selected <= exposed_le


def test_alert_thresholds_are_bucket_bounds() -> None:
    config = parse_config({"thresholds": {"batch_efficiency": 0.87, "scheduling_cycle_seconds": 0.003}})
    assert 0.87 in buckets.efficiency_buckets(config)
    assert 0.003 in buckets.scheduler_buckets(config)
    assert config.slo.batch.max_queue_seconds in buckets.latency_buckets(config)


def test_fallback_uses_vllms_own_bounds() -> None:
    """Without the plugin the SLI reads vLLM's histogram at the largest bound not above the target."""
    scraped = Path(REPO / "tests" / "data" / "vllm-0.32.0-cpu-metrics.prom").read_text()
    le_values = {
        line.split('le="')[1].split('"')[0]
        for line in scraped.splitlines()
        if line.startswith("vllm:e2e_request_latency_seconds_bucket")
    }
    assert {buckets.le(b) for b in VLLM_E2E_BUCKETS} | {"+Inf"} == le_values
    assert (fallback_bound(2.0), fallback_bound(1.7), fallback_bound(0.2)) == (2.0, 1.5, None)
    tight = parse_config({"slo": {"tiers": [{"name": "realtime", "max_prompt_tokens": None, "latency_seconds": 0.2}]}})
    assert "vllm:" not in " ".join(r.expr for r in sli_rules(tight, "5m"))


# --- recording -----------------------------------------------------------------


def test_request_phases_land_in_their_tier_with_exact_slo_counts() -> None:
    rec = recorder(no_warmup())
    at_target = FinishedRequestStats(e2e_latency=2.0, decode_time=1.5, num_prompt_tokens=2048)
    just_over = FinishedRequestStats(e2e_latency=2.0001, num_prompt_tokens=2048)
    normal = FinishedRequestStats(e2e_latency=7.5, num_prompt_tokens=4000)
    one_token = FinishedRequestStats(num_generation_tokens=1, mean_time_per_output_token=0.0)
    rec.record(None, IterationStats(finished_requests=[at_target, just_over, normal, one_token]))
    s = scrape(rec)
    rt = {"engine": "0", "model_name": "m", "tier": "realtime"}
    assert sample(s, catalog.REQUEST_E2E.bucket, le="2.0", **rt) == 2  # one_token (1.0s) and at_target
    assert sample(s, catalog.REQUEST_E2E.count, **rt) == 3
    normal_labels = {**rt, "tier": "normal"}
    assert sample(s, catalog.REQUEST_E2E.bucket, le="5.0", **normal_labels) == 0
    assert sample(s, catalog.REQUEST_E2E.bucket, le="7.5", **normal_labels) == 1, "1.5 x the 5 s target is a bound"
    assert sample(s, catalog.REQUEST_TTFT.sum, **rt) == pytest.approx((2.0 - 1.5) + (2.0001 - 0.6) + (1.0 - 0.6))
    assert sample(s, catalog.REQUEST_QUEUE.sum, **rt) == pytest.approx(0.3)
    assert sample(s, catalog.REQUEST_PREFILL.sum, **rt) == pytest.approx(0.6)
    assert sample(s, catalog.REQUEST_DECODE.sum, **rt) == pytest.approx(1.5 + 0.6 + 0.6)
    assert sample(s, catalog.REQUEST_TPOT.count, **rt) == 2, "a single-token request has no time per output token"
    assert sample(s, catalog.REQUEST_E2E.count, **{**rt, "tier": "batch"}) == 0, "every tier is exposed from the start"


def test_aborted_requests_are_ignored_and_errors_count_as_failed() -> None:
    rec = recorder(no_warmup())
    rec.record(None, IterationStats(finished_requests=[
        FinishedRequestStats(finish_reason=FinishReason.ABORT),
        FinishedRequestStats(finish_reason=FinishReason.ERROR),
        FinishedRequestStats(finish_reason=FinishReason.STOP),
    ]))  # fmt: skip
    s = scrape(rec)
    rt = {"engine": "0", "model_name": "m", "tier": "realtime"}
    assert sample(s, catalog.REQUEST_E2E.count, **rt) == 1
    assert sample(s, catalog.REQUESTS_FAILED.name, **rt) == 1


def test_warmup_requests_stay_out_of_the_slo_series() -> None:
    rec = recorder(parse_config({"slo": {"warmup_requests": 3}}))
    labels = {"engine": "0", "model_name": "m"}
    assert sample(scrape(rec), catalog.WARMUP_REMAINING.name, **labels) == 3
    slow = [FinishedRequestStats(e2e_latency=30.0, num_prompt_tokens=n) for n in (10, 5000, 10)]
    rec.record(None, IterationStats(finished_requests=slow[:2]))
    rec.record(None, IterationStats(finished_requests=[slow[2], FinishedRequestStats(), FinishedRequestStats()]))
    s = scrape(rec)
    assert sample(s, catalog.WARMUP_REMAINING.name, **labels) == 0
    assert sample(s, catalog.WARMUP_REQUESTS.name, tier="realtime", **labels) == 2
    assert sample(s, catalog.WARMUP_REQUESTS.name, tier="normal", **labels) == 1
    assert sample(s, catalog.REQUEST_E2E.count, tier="realtime", **labels) == 2
    assert sample(s, catalog.REQUEST_E2E.bucket, tier="realtime", le="2.0", **labels) == 2, "no 30 s warm-up request"
    assert sample(s, catalog.REQUEST_E2E.count, tier="normal", **labels) == 0


def test_batch_efficiency_uses_exact_tokens_when_iteration_details_exist() -> None:
    rec = recorder(budget=1000)
    detailed = SchedulerStats(
        num_running_reqs=4, num_waiting_reqs=2, iteration_details=SchedulerIterationDetails(600, 250, 12.5)
    )
    rec.record(detailed, IterationStats(num_generation_tokens=4, prompt_token_stats=PromptTokenStats(100)))
    rec.record(SchedulerStats(num_running_reqs=4), IterationStats(num_generation_tokens=100))  # no details: 100
    rec.record(SchedulerStats(num_running_reqs=0, num_skipped_waiting_reqs=1), None)  # nothing scheduled
    s = scrape(rec)
    labels = {"engine": "0", "model_name": "m"}
    eff = catalog.BATCH_EFFICIENCY
    assert sample(s, eff.sum, requests_waiting="true", **labels) == pytest.approx(0.85)
    assert sample(s, eff.bucket, requests_waiting="true", le="0.85", **labels) == 1, "0.85 sits on a bound"
    assert sample(s, eff.sum, requests_waiting="false", **labels) == pytest.approx(0.1)
    assert sample(s, catalog.MODEL_EXECUTE.sum, **labels) == pytest.approx(0.0125)
    assert sample(s, catalog.STEP_INTERVAL.count, **labels) == 2, "intervals after busy steps only"
    assert sample(s, catalog.STEP_REQUESTS_WAITING.name, **labels) == 1, "deferred requests wait too"
    assert sample(s, catalog.TOKEN_BUDGET.name, **labels) == 1000


def test_step_interval_skips_idle_gaps() -> None:
    rec = recorder()
    rec.record(SchedulerStats(num_running_reqs=0), None)
    rec.record(SchedulerStats(num_running_reqs=1), None)  # after an idle step: not an interval
    rec.record(SchedulerStats(num_running_reqs=1), None)
    assert sample(scrape(rec), catalog.STEP_INTERVAL.count, engine="0", model_name="m") == 1


def test_malformed_stats_are_counted_never_raised() -> None:
    rec = recorder(no_warmup())
    rec.record(object(), None)
    rec.record(SchedulerStats(), IterationStats(finished_requests=[object()]))  # type: ignore[list-item]
    rec.record(SchedulerStats(num_running_reqs=1), IterationStats(finished_requests=[FinishedRequestStats()]))
    s = scrape(rec)
    assert sample(s, catalog.PLUGIN_ERRORS.name, stage="record") == 2
    assert sample(s, catalog.REQUEST_E2E.count, engine="0", model_name="m", tier="realtime") == 1, "and it goes on"


def test_a_failing_scrape_still_answers_and_counts() -> None:
    broken = recorder()
    broken.add_samples = None  # type: ignore[method-assign]
    collector = PluginCollector()
    s = scrape(broken, collector=collector)
    assert sample(s, catalog.PLUGIN_ERRORS.name, stage="collect") == 1
    assert not any(name == catalog.REQUEST_E2E.count for name, _ in s)


def test_engines_are_labelled_and_replaced_not_duplicated() -> None:
    collector = PluginCollector()
    first, second, again = (EngineRecorder(Settings.from_config(Config()), "m", e, 1) for e in ("0", "1", "0"))
    for r in (first, second, again):
        collector.add_engine(r, Path("/nonexistent"))
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    info = [line for line in text.splitlines() if line.startswith(catalog.PLUGIN_INFO.name)]
    assert sorted(line.split('engine="')[1][0] for line in info) == ["0", "1"]


def test_exposition_passes_promtool_check_metrics() -> None:
    rec = recorder(no_warmup())
    rec.record(SchedulerStats(num_running_reqs=1), IterationStats(finished_requests=[FinishedRequestStats()]))
    collector = PluginCollector()
    collector.add_engine(rec, Path("/nonexistent"))
    registry = CollectorRegistry()
    registry.register(collector)
    result = subprocess.run(
        [shutil.which("promtool") or "promtool", "check", "metrics"],
        input=generate_latest(registry).decode(), capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_catalog_metric_is_exposed() -> None:
    rec = recorder()
    names = {k[0] for k in scrape(rec)}
    families = {n.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum") for n in names}
    expected = {m.name for m in vars(catalog).values() if isinstance(m, Metric)}
    assert expected - families == {catalog.SCHEDULER_CALL.name}, "the scheduler channel is absent here"


# --- the scheduler channel -------------------------------------------------------

_WRITER = """
import sys
from pathlib import Path
from infersight.vllm_plugin.channel import ChannelWriter
w = ChannelWriter(Path(sys.argv[1]), [0.001, 0.005, 0.01])
for v in (0.0005, 0.004, 0.005, 0.02):
    w.observe(0, v)
w.observe(1, 0.002)
"""


def test_channel_carries_a_histogram_across_processes(tmp_path: Path) -> None:
    path = channel_path(tmp_path, 1234, 0)
    assert ChannelReader.attach(path) is None, "no writer yet"
    subprocess.run([sys.executable, "-c", _WRITER, str(path)], check=True, cwd=REPO, timeout=30)
    reader = ChannelReader.attach(path)
    assert reader is not None
    assert not path.exists(), "the reader unlinks the file so none outlives the processes"
    schedule, total = reader.histogram(CALLS.index("schedule"))
    assert schedule == [("0.001", 1), ("0.005", 3), ("0.01", 3), ("+Inf", 4)]
    assert total == pytest.approx(0.0295)
    assert reader.histogram(CALLS.index("update_from_output"))[0][-1] == ("+Inf", 1)


def test_channel_reader_rejects_foreign_files(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus"
    bogus.write_bytes(b"x" * 64)
    with pytest.raises(ValueError, match="not an infersight scheduler channel"):
        ChannelReader.attach(bogus)


def test_collector_reports_the_channel_and_reattaches_to_a_new_writer(tmp_path: Path) -> None:
    path = channel_path(tmp_path, 1, 0)
    collector = PluginCollector()
    rec = recorder()
    collector.add_engine(rec, path)
    writer = ChannelWriter(path, buckets.scheduler_buckets(Config()))
    writer.observe(0, 0.002)
    registry = CollectorRegistry()
    registry.register(collector)

    def count() -> float:
        text = generate_latest(registry).decode()
        return sample(
            {(s.name, tuple(sorted(s.labels.items()))): s.value
             for f in text_string_to_metric_families(text) for s in f.samples},
            catalog.SCHEDULER_CALL.count, call="schedule", engine="0", model_name="m",
        )  # fmt: skip

    assert count() == 1
    writer.observe(0, 0.002)
    assert count() == 2, "the mapping is live"
    ChannelWriter(path, buckets.scheduler_buckets(Config()))  # an engine core started anew
    assert count() == 0


def test_the_plugin_takes_the_channel_at_startup(tmp_path: Path) -> None:
    """vLLM starts the engine core (and so the writer) before the stat loggers: the file is gone at once."""
    path = channel_path(tmp_path, 7, 0)
    ChannelWriter(path, buckets.scheduler_buckets(Config()))
    PluginCollector().add_engine(recorder(), path)
    assert not path.exists()


def test_stale_channels_of_dead_api_servers_are_swept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True, timeout=30)  # fmt: skip
    stale = channel_path(tmp_path, int(dead.stdout), 0)
    live = channel_path(tmp_path, os.getpid(), 0)
    for path in (stale, live):
        ChannelWriter(path, [0.001])
    assert remove_stale(tmp_path) == [stale]
    assert live.exists()


# --- rules from config ------------------------------------------------------------


def test_burn_rate_windows_come_from_config(tmp_path: Path) -> None:
    config = parse_config(
        {"slo": {"objective": 0.9, "burn_rate": {
            "period": "10m", "min_requests": 3, "critical_for": "0s",
            "windows": [{"short": "10s", "long": "30s", "factor": 2, "severity": "critical"}]}}}
    )  # fmt: skip
    text = prometheus_rules_yaml(config)
    assert "ratio_rate10s" in text and "ratio_rate30s" in text and "rate10m" in text
    assert "InfersightSLOSlowBurn" not in text, "no warning pair configured, no ticket alert"
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    assert_ok(promtool("check", "rules", path))


def test_burn_window_pairs_are_validated() -> None:
    with pytest.raises(ValueError, match=r"short must be below long"):
        parse_config({"slo": {"burn_rate": {"windows": [
            {"short": "1h", "long": "5m", "factor": 14.4, "severity": "critical"}]}}})  # fmt: skip


# --- packaging and the real vLLM --------------------------------------------------


def test_the_plugin_imports_nothing_heavy() -> None:
    """vLLM imports the plugin at startup: no sidecar, generators, HTTP client or NVML come with it."""
    modules = ", ".join(f"infersight.vllm_plugin.{m}" for m in ("channel", "exposition", "recorder", "settings"))
    heavy = "{'grafanalib', 'exporters', 'alerts', 'dashboards', 'requests', 'pynvml'}"
    code = f"import sys, {modules}; print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy}))"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                            check=True)  # fmt: skip
    assert result.stdout.strip() == "[]"


def test_pyproject_registers_the_stat_logger() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    value = project["entry-points"][PLUGIN_GROUP]["infersight"]
    assert value == "infersight.vllm_plugin.stat_logger:InfersightStatLogger"
    assert f"[{PLUGIN_GROUP}]\ninfersight = {value}\n" in entry_points_txt()
    assert "vllm" in " ".join(project["optional-dependencies"]["vllm"])


_REAL = r"""
import dataclasses, json, os, sys
stand_ins = json.loads(sys.argv[1])
from importlib.metadata import entry_points
from types import SimpleNamespace as NS
from prometheus_client import generate_latest
from vllm.config.scheduler import SchedulerConfig
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.engine import FinishReason
from vllm.v1.metrics.loggers import load_stat_logger_plugin_factories
from vllm.v1.metrics import stats
from vllm.v1.spec_decode.metrics import SpecDecodingStats

out = {}
out["missing_fields"] = {
    name: sorted(set(fields) - {f.name for f in dataclasses.fields(getattr(stats, name))})
    for name, fields in stand_ins.items() if name != "IterationStats"
}
it = stats.IterationStats()
out["missing_fields"]["IterationStats"] = sorted(f for f in stand_ins["IterationStats"] if not hasattr(it, f))
out["finish_reasons"] = sorted(r.name for r in FinishReason)
factories = load_stat_logger_plugin_factories()
out["factories"] = [f"{f.__module__}.{f.__qualname__}" for f in factories]
(Logger,) = factories
from infersight.vllm_plugin.scheduler import TimedAsyncScheduler, TimedScheduler
out["schedulers"] = [
    issubclass(TimedScheduler, Scheduler), issubclass(TimedAsyncScheduler, AsyncScheduler),
    SchedulerConfig.default_factory(scheduler_cls="infersight.vllm_plugin.scheduler.TimedScheduler")
    .get_scheduler_cls() is TimedScheduler,
]
cfg = NS(scheduler_config=NS(max_num_batched_tokens=2048, max_num_scheduled_tokens=None),
         model_config=NS(served_model_name="tiny"))
logger = Logger(cfg, 0)
for i in range(3):
    it = stats.IterationStats()
    it.num_generation_tokens = 16
    it.finished_requests.append(stats.FinishedRequestStats(
        finish_reason=FinishReason.LENGTH, e2e_latency=1.5, num_prompt_tokens=100 + 30000 * i,
        num_generation_tokens=16, queued_time=0.1, prefill_time=0.2, decode_time=1.2,
        mean_time_per_output_token=0.08))
    details = stats.SchedulerIterationDetails(
        iteration_index=i, num_ctx_requests=1, num_ctx_tokens=1700, num_generation_requests=16,
        num_generation_tokens=16, elapsed_ms=7.0)
    logger.record(stats.SchedulerStats(num_running_reqs=16, num_waiting_reqs=3, iteration_details=details,
                                       spec_decoding_stats=SpecDecodingStats.new(2)), it)
logger.log()
logger.log_engine_initialized()
os.environ["INFERSIGHT_CONFIG"] = sys.argv[2]  # an invalid file: engine 1 runs on without the plugin
broken = Logger(cfg, 1)
broken.record(stats.SchedulerStats(num_running_reqs=1), stats.IterationStats())
out["metrics"] = [l for l in generate_latest().decode().splitlines() if l.startswith("infersight_")]
print(json.dumps(out))
"""


def test_real_vllm_objects(tmp_path: Path) -> None:
    """The stand-ins' fields exist on vLLM's classes, the real entry point records real objects, and an
    invalid configuration disables the plugin for that engine without raising."""
    python = require_vllm()
    (tmp_path / "cfg.yaml").write_text("slo:\n  warmup_requests: 1\n")
    (tmp_path / "bad.yaml").write_text("slo:\n  warmup_request: 1\n")
    fields = {cls.__name__: [f for f in cls.__dataclass_fields__] for cls in STAND_INS}
    env = {"PYTHONPATH": str(plugin_path(tmp_path)), "INFERSIGHT_CONFIG": str(tmp_path / "cfg.yaml"),
           "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}  # fmt: skip
    result = subprocess.run(
        [str(python), "-c", textwrap.dedent(_REAL), json.dumps(fields), str(tmp_path / "bad.yaml")],
        capture_output=True, text=True, timeout=240, env=env, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["missing_fields"] == {name: [] for name in fields}
    assert {"ABORT", "ERROR"} <= set(out["finish_reasons"])
    assert out["factories"] == ["infersight.vllm_plugin.stat_logger.InfersightStatLogger"]
    assert out["schedulers"] == [True, True, True]
    s = {
        (x.name, tuple(sorted(x.labels.items()))): x.value
        for family in text_string_to_metric_families("\n".join(out["metrics"]) + "\n")
        for x in family.samples
    }
    labels = {"engine": "0", "model_name": "tiny"}
    assert sample(s, catalog.WARMUP_REQUESTS.name, tier="realtime", **labels) == 1
    assert sample(s, catalog.REQUEST_E2E.bucket, le="2.0", tier="normal", **labels) == 1
    assert sample(s, catalog.REQUEST_E2E.count, tier="batch", **labels) == 1
    assert sample(s, catalog.BATCH_EFFICIENCY.bucket, le="0.85", requests_waiting="true", **labels) == 3
    assert sample(s, catalog.MODEL_EXECUTE.sum, **labels) == pytest.approx(0.021)
    assert sample(s, catalog.PLUGIN_ERRORS.name, stage="record") == 0
    assert sample(s, catalog.PLUGIN_ERRORS.name, stage="config") == 1, "the invalid config is counted"
    assert [dict(k[1])["engine"] for k in s if k[0] == catalog.PLUGIN_INFO.name] == ["0"]
    assert "did you mean 'warmup_requests'" in result.stderr, "and logged with the field named"
