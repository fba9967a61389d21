"""The simulator: its vLLM page against a real vLLM 0.32 scrape, the model's arithmetic, scenario files,
the game-day config, and one scenario pod end to end (synthetic vLLM -> real sidecar on the fake NVML)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from alerts.render import alerts, rule_groups
from infersight.catalog import exporter as sidecar_cat
from infersight.catalog import gpu as gpu_cat
from infersight.catalog import vllm as vllm_cat
from infersight.config import Config, ConfigError, duration_seconds
from infersight.process import wait_until
from infersight.simulate.engine import REQUEST_SECONDS, EngineModel
from infersight.simulate.gameday import (
    MIN_FOR_SECONDS,
    MIN_WINDOW_SECONDS,
    TIME_SCALE,
    _alert_labels,
    compressed_config,
    precision_recall,
)
from infersight.simulate.scenario import VllmState, all_scenarios, find_scenario, parse_scenario
from infersight.simulate.simulation import ScenarioRun, gpu_uuid

REAL_SCRAPE = Path(__file__).resolve().parent / "data" / "vllm-0.32.0-cpu-metrics.prom"
KNOWN_ALERTS = {a.name for a in alerts(Config())}
SPEC_FAMILIES = {m.name.removesuffix("_total") for m in vllm_cat.all_vllm_metrics() if "spec_decode" in m.name}


def shape(text: str) -> dict[str, tuple[str, frozenset[str], tuple[str, ...]]]:
    """vLLM family -> (type, label names, le values) as prometheus_client's parser reads the page."""
    out = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("vllm:"):
            continue
        labels = frozenset(k for s in family.samples for k in s.labels if k != "le")
        les = tuple(s.labels["le"] for s in family.samples if s.name.endswith("_bucket"))
        out[family.name] = (family.type, labels, les)
    return out


def page(state: VllmState | None = None, seconds: float = 5.0, **kwargs: object) -> tuple[EngineModel, str]:
    engine = EngineModel("tiny", **kwargs)  # type: ignore[arg-type]
    for _ in range(int(seconds / 0.25)):
        engine.advance(0.25, state or VllmState())
    return engine, engine.render()


def value(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise KeyError(name, labels)


def histogram_quantile(q: float, text: str, metric: str) -> float:
    """Prometheus' interpolation over the cumulative buckets of one histogram."""
    buckets = sorted(
        (float(s.labels["le"]), s.value)
        for f in text_string_to_metric_families(text) for s in f.samples
        if s.name == f"{metric}_bucket"
    )  # fmt: skip
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    raise AssertionError("rank beyond +Inf")


# ---- the page against a real vLLM 0.32 scrape ------------------------------------------------------


def test_page_has_the_families_labels_and_buckets_of_real_vllm() -> None:
    real = shape(REAL_SCRAPE.read_text(encoding="utf-8"))
    _, text = page(max_model_len=512)  # the real scrape's server ran with --max-model-len 512
    synthetic = shape(text)
    assert set(synthetic) == set(real)
    for name, (kind, labels, les) in real.items():
        if name == "vllm:cache_config_info":  # its labels are the engine's cache config fields
            assert synthetic[name][1] <= labels, name
            continue
        assert synthetic[name] == (kind, labels, les), name


def test_spec_decode_families_appear_only_when_enabled_with_catalog_labels() -> None:
    _, plain = page()
    assert not SPEC_FAMILIES & set(shape(plain))
    state = VllmState.model_validate({"spec_decode": {}})
    _, text = page(state)
    families = shape(text)
    for metric in vllm_cat.all_vllm_metrics():
        if "spec_decode" in metric.name:
            assert families[metric.name.removesuffix("_total")][1] == frozenset(metric.labels), metric.name


def test_page_is_plain_text_with_colon_names_and_decimal_le() -> None:
    _, text = page()
    assert f'{vllm_cat.E2E_LATENCY.bucket}{{engine="0",le="120.0",model_name="tiny"}}' in text
    assert "vllm_" not in text


def test_plugin_series_join_the_page_when_the_plugin_runs() -> None:
    _, without = page()
    _, text = page(plugin_config=Config(), warmup_requests=0)
    assert "infersight_" not in without
    e2e = {f.name for f in text_string_to_metric_families(text)}
    assert "infersight_request_e2e_seconds" in e2e, sorted(n for n in e2e if n.startswith("infersight"))
    warmup = value(text, "infersight_warmup_requests_total", tier="realtime")
    count = value(text, "infersight_request_e2e_seconds_count", tier="realtime")
    assert warmup == Config().slo.warmup_requests and count > 0  # the plugin's warm-up guard saw the requests


# ---- the model's arithmetic ----------------------------------------------------------------------------


def test_steady_mix_gives_the_articles_p99_and_the_spike_mix_its_spike() -> None:
    _, steady = page(seconds=60)
    assert histogram_quantile(0.99, steady, vllm_cat.E2E_LATENCY.name) == pytest.approx(1.9, abs=0.01)
    spike = find_scenario("latency-spike", KNOWN_ALERTS)
    surge = next(p for p in spike.phases if p.incident)
    _, text = page(surge.vllm, seconds=64)
    assert histogram_quantile(0.99, text, vllm_cat.E2E_LATENCY.name) == pytest.approx(3.4, abs=0.01)


def test_counters_only_grow_until_a_restart_sets_them_to_zero() -> None:
    engine, first = page()
    for _ in range(8):
        engine.advance(0.25, VllmState())
    second = engine.render()
    counters = [s for f in text_string_to_metric_families(second) if f.type in ("counter", "histogram")
                for s in f.samples if s.name.startswith("vllm:") and not s.name.endswith("_created")]  # fmt: skip
    assert counters
    for s in counters:
        assert s.value >= value(first, s.name, **s.labels), s
    assert value(second, vllm_cat.REQUEST_SUCCESS.name, finished_reason="length") == 280  # 40/s x 7 s
    created = value(second, "vllm:num_preemptions_created")
    time.sleep(0.01)
    engine.restart()
    after = engine.render()
    assert value(after, vllm_cat.E2E_LATENCY.count) == 0
    assert value(after, vllm_cat.PROMPT_TOKENS.name) == 0
    assert value(after, "vllm:num_preemptions_created") > created


def test_warmup_requests_run_slower_after_each_start() -> None:
    state = VllmState.model_validate({"mix": [{"share": 1, "prompt_tokens": 100, "generation_tokens": 10,
                                                "latency_seconds": 0.9}]})  # fmt: skip
    engine, text = page(state, seconds=1.0, warmup_requests=10, warmup_slowdown=1.5)  # 40 requests
    le = {float(b) for b in REQUEST_SECONDS}
    assert 1.0 in le and 1.5 in le
    slow = value(text, vllm_cat.E2E_LATENCY.bucket, le="1.5") - value(text, vllm_cat.E2E_LATENCY.bucket, le="1.0")
    assert slow == 10  # 0.9 s x 1.5 = 1.35 s for exactly the first 10
    engine.restart()
    engine.advance(0.25, state)
    assert value(engine.render(), vllm_cat.E2E_LATENCY.bucket, le="1.0") == 0


def test_spec_decode_counters_give_the_stated_acceptance_and_first_token_rate() -> None:
    state = VllmState.model_validate({"spec_decode": {"acceptance": 0.45, "first_token_acceptance": 0.7}})
    _, text = page(state)
    drafts = value(text, vllm_cat.SPEC_DECODE_DRAFTS.name)
    assert drafts == 1000
    accepted = value(text, vllm_cat.SPEC_DECODE_ACCEPTED_TOKENS.name)
    proposed = value(text, vllm_cat.SPEC_DECODE_DRAFT_TOKENS.name)
    assert accepted / proposed == pytest.approx(0.45, rel=1e-6)
    assert value(text, vllm_cat.SPEC_DECODE_ACCEPTED_PER_POS.name, position="0") / drafts == pytest.approx(0.7)


# ---- scenario files --------------------------------------------------------------------------------------


def test_every_scenario_file_loads_and_names_real_alerts() -> None:
    scenarios = all_scenarios(KNOWN_ALERTS)
    names = {s.name for s in scenarios}
    assert {"steady", "latency-spike", "gpu-memory-leak", "gpu-util-jitter", "hbm-saturation", "kv-cache-pressure",
            "spec-decode-collapse", "compliance-failures", "domain-accuracy-drop", "crash-restart",
            "warmup-after-restart"} == names  # fmt: skip
    for scenario in scenarios:
        assert scenario.incident_at is not None or not scenario.expect, scenario.name


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"name": "Bad Name", "phases": [{"name": "x", "seconds": 1}]}, "name: expected a string matching"),
        ({"phaseses": []}, "phaseses: unknown field"),
        ({"phases": [{"name": "x", "seconds": -1}]}, "phases[0].seconds: expected greater than 0, found -1"),
        ({"phases": [{"name": "x", "seconds": 1, "vllm": {"mix": [{"share": 0.5, "prompt_tokens": 1,
          "generation_tokens": 2, "latency_seconds": 1}]}}]}, "mix shares must add up to 1, found 0.5"),
        ({"phases": [{"name": "x", "seconds": 1, "vllm": {"spec_decode": {"acceptance": 0.9,
          "first_token_acceptance": 0.5}}}]}, "acceptance cannot exceed first_token_acceptance"),
        ({"phases": [{"name": "x", "seconds": 1, "gpu": {"utilization_percent": 120}}]},
         "phases[0].gpu.utilization_percent: expected less than or equal to 100, found 120"),
        ({"expect": ["InfersightNoSuchAlert"], "phases": [{"name": "x", "seconds": 1}]},
         "expect: unknown alert(s) ['InfersightNoSuchAlert']"),
    ],
)  # fmt: skip
def test_bad_scenarios_are_refused_naming_the_field(data: dict, problem: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_scenario({"name": "bad", "description": "d", **data}, "bad.yaml", KNOWN_ALERTS)
    assert problem.lower() in str(error.value).lower(), str(error.value)
    assert str(error.value).startswith("bad.yaml: invalid configuration")


def test_unknown_scenario_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="latency-spike"):
        find_scenario("no-such-scenario")


def test_phase_at_holds_the_last_phase_after_the_timeline() -> None:
    spike = find_scenario("latency-spike", KNOWN_ALERTS)
    assert spike.phase_at(0)[0] == 0
    assert spike.phase_at(spike.incident_at or 0)[1].incident
    assert spike.phase_at(spike.seconds + 100)[0] == len(spike.phases) - 1


# ---- the game-day config ------------------------------------------------------------------------------------


_RANGE = re.compile(r"\[([0-9]+[smhdw])(?::[^\]]*)?\]")


def _ranges(config: Config) -> set[float]:
    exprs = [rule["expr"] for group in rule_groups(config) for rule in group["rules"]]
    return {duration_seconds(r) for expr in exprs for r in _RANGE.findall(expr)}


def test_compressed_config_scales_every_for_and_every_window() -> None:
    """A `for` or window not taken from the config would keep its production value here."""
    default, fast = Config(), compressed_config()
    fors = {a.name: a.for_ for a in alerts(default)}
    for alert in alerts(fast):
        production = duration_seconds(fors[alert.name])
        expected = 0 if production == 0 else max(MIN_FOR_SECONDS, round(production / TIME_SCALE))
        assert duration_seconds(alert.for_) == expected, (alert.name, alert.for_)
    scaled = {max(MIN_WINDOW_SECONDS, round(r / TIME_SCALE)) for r in _ranges(default)}
    assert _ranges(fast) == scaled
    assert fast.prometheus.scrape_interval == "1s" and fast.alerting.group_wait == "1s"


def test_pages_are_split_into_their_alerts_labels() -> None:
    firing = (
        "Labels:\n - alertname = A\n - rule = x\nAnnotations:\n - summary = s\nSource: u\n"
        "Labels:\n - alertname = B\n"
    )
    assert _alert_labels(firing) == [{"alertname": "A", "rule": "x"}, {"alertname": "B"}]


def test_precision_and_recall_count_scenario_alert_pairs() -> None:
    from infersight.simulate.gameday import Outcome

    a, b = find_scenario("kv-cache-pressure", KNOWN_ALERTS), find_scenario("steady", KNOWN_ALERTS)
    outcomes = [Outcome(a, set(a.expect[:2]), set(), None, None), Outcome(b, {"InfersightWatchdog"}, set(), None, None)]
    assert precision_recall(outcomes) == (2 / 3, 2 / 4)


# ---- one scenario pod: synthetic vLLM -> the real sidecar on the fake NVML ---------------------------------


def test_a_scenario_pod_feeds_its_sidecar_vllm_gpu_and_business_series() -> None:
    scenario = find_scenario("crash-restart", KNOWN_ALERTS)
    config = compressed_config(scenarios=[scenario])
    run = ScenarioRun(scenario, config)
    run.start()
    try:
        def sidecar_has(*needles: str) -> bool:
            run.step(1.0, 0.25)
            text = requests.get(run.sidecar_url + "/metrics", timeout=2).text
            return all(n in text for n in needles)

        wait_until(lambda: sidecar_has(
            f'{sidecar_cat.VLLM_UP}{{target="{scenario.name}"}} 1.0',
            f'{sidecar_cat.VLLM_REQUESTS_RUNNING}{{engine="0",model_name="{scenario.name}",target="{scenario.name}"}}',
            gpu_uuid(scenario.name), gpu_cat.PROCESS_MEMORY.name,
            f'domain="{scenario.name}"',
        ), 20, "sidecar series from the scenario pod", 0.25)  # fmt: skip

        run.step(1.0, 10.0)  # enough traffic that every counter the sidecar reads is ahead of the restarted one
        time.sleep(2 * config.vllm.poll_interval_seconds)
        run.step(scenario.incident_at or 0, 0.25)  # crashed: connection refused
        with pytest.raises(requests.ConnectionError):
            requests.get(run.metrics_url, timeout=2)
        run.step((scenario.incident_at or 0) + 5, 0.25)  # back, counters from zero
        text = requests.get(run.metrics_url, timeout=2).text
        assert value(text, vllm_cat.E2E_LATENCY.count) < 20
        wait_until(lambda: sidecar_has(f'{sidecar_cat.VLLM_RESTARTS}{{target="{scenario.name}"}} 1.0'), 20,
                   "the sidecar counting the restart", 0.25)  # fmt: skip
    finally:
        run.stop()


def test_simulate_command_serves_the_scenario_until_sigterm() -> None:
    import signal
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    child = subprocess.Popen([sys.executable, "-m", "infersight", "simulate", "--scenario", "spec-decode-collapse"],
                             cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)  # fmt: skip
    try:
        assert child.stdout is not None
        line = next(line for line in child.stdout if " vLLM http://" in line)
        url = line.split(" vLLM ", 1)[1].split()[0]
        def drafts() -> float:
            return value(requests.get(url, timeout=5).text, vllm_cat.SPEC_DECODE_DRAFTS.name)

        wait_until(drafts, 10, "speculative drafts counted on the page")
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=20) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
