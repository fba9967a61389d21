"""The vllm collector against a real HTTP server serving a real vLLM 0.32 scrape and scripted variants.

Expected values are computed from the served texts with prometheus_client's full
parser, independently of the collector's prefiltering parser.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporters.collectors.vllm import VllmCollector
from exporters.vllm_scrape import ParseError, parse
from infersight.catalog import Metric, vllm
from infersight.catalog import exporter as cat
from infersight.config import Config
from tests.harness.scrape_server import REAL_SCRAPE, TINY, ScrapeServer, Script, free_port, value

REAL = REAL_SCRAPE.read_text()
# Names vLLM releases before the V1 renames exposed (the test's own record, not the catalog's).
LEGACY_RENAMES = {
    "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
    "vllm:prefix_cache_queries": "vllm:gpu_prefix_cache_queries",
    "vllm:prefix_cache_hits": "vllm:gpu_prefix_cache_hits",
    "vllm:inter_token_latency_seconds": "vllm:time_per_output_token_seconds",
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server() -> Iterator[ScrapeServer]:
    with ScrapeServer() as s:
        yield s


def make_collector(server: ScrapeServer, paths: list[str], clock: Clock | None = None, **over: object) -> VllmCollector:
    """A collector polling ``paths`` of the server; ``over`` overrides fields of the vllm config section."""
    targets = [{"name": p.strip("/") or "root", "url": server.url(p)} for p in paths]
    config = Config.model_validate({"vllm": {"targets": targets, **over}})
    return VllmCollector(config, clock=clock or Clock())


def exported(collector: VllmCollector) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value for family in collector.collect() for s in family.samples}


def get(collector: VllmCollector, metric: Metric, target: str, **labels: str) -> float | None:
    """The exported value of ``metric`` for ``target`` (and model/engine labels), None if absent."""
    name = metric.name
    key = frozenset({"target": target, **labels}.items())
    return exported(collector).get((name, key))


def with_values(text: str, values: dict[str, float]) -> str:
    """The text with the value of every sample named in ``values`` replaced."""
    for name, new in values.items():
        pattern = re.compile(rf"^({re.escape(name)}(\{{[^}}]*\}})?) \S+$", re.M)
        text, n = pattern.subn(rf"\g<1> {new!r}", text)
        assert n, name
    return text


def poll(collector: VllmCollector, clock: Clock, texts: list[str], script: Script, step: float = 1.0) -> None:
    for text in texts:
        script.set_text(text)
        collector.poll_all()
        clock.now += step


PREEMPT, RUNNING, WAITING, KV = (
    vllm.NUM_PREEMPTIONS.name,
    vllm.NUM_REQUESTS_RUNNING.name,
    vllm.NUM_REQUESTS_WAITING.name,
    vllm.KV_CACHE_USAGE.name,
)
STEPS, STEP_TOKENS = vllm.ITERATION_TOKENS.count, vllm.ITERATION_TOKENS.sum
QUERIES, HITS = vllm.PREFIX_CACHE_QUERIES.name, vllm.PREFIX_CACHE_HITS.name


def test_current_names_give_the_rates_computed_from_the_scrapes(server: ScrapeServer) -> None:
    server.scripts["/a"] = script = Script()
    clock = Clock()
    collector = make_collector(server, ["/a"], clock)
    first = REAL
    second = with_values(
        REAL,
        {PREEMPT: 6, STEPS: 444, STEP_TOKENS: 4395, QUERIES: 851, HITS: 200, WAITING: 2, RUNNING: 5, KV: 0.42},
    )
    poll(collector, clock, [first], script, step=2.0)
    assert get(collector, cat.VLLM_PREEMPTIONS_RATE, "a", **TINY) is None  # one poll: no rate yet
    poll(collector, clock, [second], script)

    def delta(name: str) -> float:
        return value(second, name) - value(first, name)

    assert get(collector, cat.VLLM_UP, "a") == 1.0
    assert get(collector, cat.VLLM_REQUESTS_RUNNING, "a", **TINY) == value(second, RUNNING)
    assert get(collector, cat.VLLM_REQUESTS_WAITING, "a", **TINY) == value(second, WAITING)
    assert get(collector, cat.VLLM_KV_CACHE_USAGE, "a", **TINY) == value(second, KV)
    assert get(collector, cat.VLLM_PREEMPTIONS_RATE, "a", **TINY) == pytest.approx(delta(PREEMPT) / 2.0)
    assert get(collector, cat.VLLM_ENGINE_STEPS_RATE, "a", **TINY) == pytest.approx(delta(STEPS) / 2.0)
    assert get(collector, cat.VLLM_TOKENS_PER_STEP, "a", **TINY) == pytest.approx(delta(STEP_TOKENS) / delta(STEPS))
    assert get(collector, cat.VLLM_PREFIX_CACHE_HIT_RATIO, "a", **TINY) == pytest.approx(delta(HITS) / delta(QUERIES))
    # Nothing was waiting at the first poll, so no interval qualifies for batch efficiency;
    # the real scrape has no speculative decoding, so no acceptance either.
    assert get(collector, cat.VLLM_BATCH_EFFICIENCY, "a", **TINY) is None
    assert get(collector, cat.VLLM_SPEC_DECODE_ACCEPTANCE, "a", **TINY) is None
    assert get(collector, cat.VLLM_RESTARTS, "a") == 0.0


def test_batch_efficiency_counts_only_intervals_with_requests_waiting_at_both_ends(server: ScrapeServer) -> None:
    server.scripts["/a"] = script = Script()
    clock = Clock()
    budget = 512
    collector = make_collector(server, ["/a"], clock, max_num_batched_tokens=budget)
    # Cumulative steps / tokens and the waiting gauge at four polls; only interval 1->2 has a queue at both ends.
    rows = [(1000, 20000, 0), (1100, 30000, 3), (1150, 50000, 4), (1400, 55000, 0)]
    texts = [with_values(REAL, {STEPS: s, STEP_TOKENS: t, WAITING: w}) for s, t, w in rows]
    poll(collector, clock, texts, script)

    busy_tokens_per_step = (value(texts[2], STEP_TOKENS) - value(texts[1], STEP_TOKENS)) / (
        value(texts[2], STEPS) - value(texts[1], STEPS)
    )
    all_tokens_per_step = (value(texts[3], STEP_TOKENS) - value(texts[0], STEP_TOKENS)) / (
        value(texts[3], STEPS) - value(texts[0], STEPS)
    )
    assert get(collector, cat.VLLM_BATCH_EFFICIENCY, "a", **TINY) == pytest.approx(busy_tokens_per_step / budget)
    assert get(collector, cat.VLLM_TOKENS_PER_STEP, "a", **TINY) == pytest.approx(all_tokens_per_step)
    assert busy_tokens_per_step != pytest.approx(all_tokens_per_step)  # the filter matters in this script


def test_rates_cover_only_the_rate_window(server: ScrapeServer) -> None:
    server.scripts["/a"] = script = Script()
    clock = Clock()
    collector = make_collector(server, ["/a"], clock, rate_window_seconds=10)
    texts = [with_values(REAL, {PREEMPT: p}) for p in (0, 100, 104, 110)]
    for text, step in zip(texts, (5.0, 5.0, 10.0, 0.0), strict=True):
        poll(collector, clock, [text], script, step=step)
    # Polls at t=0, 5, 10, 20: the window (10 s) keeps t=10 and t=20.
    expected = (value(texts[3], PREEMPT) - value(texts[2], PREEMPT)) / 10.0
    assert get(collector, cat.VLLM_PREEMPTIONS_RATE, "a", **TINY) == pytest.approx(expected)


def test_legacy_names_are_read(server: ScrapeServer) -> None:
    def legacy(text: str) -> str:
        for new, old in LEGACY_RENAMES.items():
            text = text.replace(f"{new}_", f"{old}_").replace(f"{new} ", f"{old} ").replace(f"{new}{{", f"{old}{{")
        return text

    texts = [legacy(with_values(REAL, {QUERIES: q, HITS: h, KV: kv})) for q, h, kv in ((100, 10, 0.1), (600, 260, 0.7))]
    assert "vllm:gpu_cache_usage_perc{" in texts[0] and "vllm:kv_cache_usage_perc" not in texts[0]
    assert "vllm:gpu_prefix_cache_hits_total{" in texts[0] and "vllm:prefix_cache_hits" not in texts[0]
    server.scripts["/old"] = script = Script()
    clock = Clock()
    collector = make_collector(server, ["/old"], clock)
    poll(collector, clock, texts, script)

    hits = value(texts[1], "vllm:gpu_prefix_cache_hits_total") - value(texts[0], "vllm:gpu_prefix_cache_hits_total")
    queries = value(texts[1], "vllm:gpu_prefix_cache_queries_total") - value(
        texts[0], "vllm:gpu_prefix_cache_queries_total"
    )
    assert get(collector, cat.VLLM_KV_CACHE_USAGE, "old", **TINY) == value(texts[1], "vllm:gpu_cache_usage_perc")
    assert get(collector, cat.VLLM_PREFIX_CACHE_HIT_RATIO, "old", **TINY) == pytest.approx(hits / queries)


def test_current_name_wins_when_both_are_exposed() -> None:
    both = with_values(REAL, {KV: 0.25}) + 'vllm:gpu_cache_usage_perc{engine="0",model_name="tiny"} 0.9\n'
    assert parse(both)[("tiny", "0")].kv_usage == value(both, KV)


def test_counter_reset_counts_a_restart_and_never_gives_a_negative_rate(server: ScrapeServer) -> None:
    server.scripts["/a"] = script = Script()
    clock = Clock()
    collector = make_collector(server, ["/a"], clock)
    rows = [(10, 1000, 5000), (14, 1100, 5600), (2, 30, 120)]  # the third poll follows an engine restart
    texts = [with_values(REAL, {PREEMPT: p, STEPS: s, STEP_TOKENS: t}) for p, s, t in rows]
    poll(collector, clock, texts, script)

    def increase(name: str) -> float:  # Prometheus' rule: after a reset the increase is the new value
        a, b, c = (value(t, name) for t in texts)
        return (b - a) + c

    assert get(collector, cat.VLLM_RESTARTS, "a") == 1.0
    assert get(collector, cat.VLLM_PREEMPTIONS_RATE, "a", **TINY) == pytest.approx(increase(PREEMPT) / 2.0)
    assert get(collector, cat.VLLM_ENGINE_STEPS_RATE, "a", **TINY) == pytest.approx(increase(STEPS) / 2.0)
    assert get(collector, cat.VLLM_TOKENS_PER_STEP, "a", **TINY) == pytest.approx(
        increase(STEP_TOKENS) / increase(STEPS)
    )
    poll(collector, clock, [with_values(REAL, {PREEMPT: 3, STEPS: 40, STEP_TOKENS: 150})], script)
    assert get(collector, cat.VLLM_RESTARTS, "a") == 1.0  # counting up again is not a restart


def test_spec_decode_acceptance_when_the_target_exposes_it(server: ScrapeServer) -> None:
    drafted, accepted = vllm.SPEC_DECODE_DRAFT_TOKENS, vllm.SPEC_DECODE_ACCEPTED_TOKENS

    def with_spec(d: int, a: int) -> str:
        lines = [f"# TYPE {drafted.family} counter", f'{drafted.name}{{engine="0",model_name="tiny"}} {d}.0']
        lines += [f"# TYPE {accepted.family} counter", f'{accepted.name}{{engine="0",model_name="tiny"}} {a}.0']
        return REAL + "\n".join(lines) + "\n"

    texts = [with_spec(100, 80), with_spec(300, 250)]
    server.scripts["/spec"] = script = Script()
    clock = Clock()
    collector = make_collector(server, ["/spec"], clock)
    poll(collector, clock, texts, script)
    expected = (value(texts[1], accepted.name) - value(texts[0], accepted.name)) / (
        value(texts[1], drafted.name) - value(texts[0], drafted.name)
    )
    assert get(collector, cat.VLLM_SPEC_DECODE_ACCEPTANCE, "spec", **TINY) == pytest.approx(expected)


def test_series_beyond_the_limit_are_dropped_counted_and_stable(server: ScrapeServer) -> None:
    def many_models(names: list[str]) -> str:
        out = []
        for line in REAL.splitlines():
            out.append(line)
            if 'model_name="tiny"' in line and not line.startswith("#"):
                out += [line.replace('model_name="tiny"', f'model_name="{n}"') for n in names]
        return "\n".join(out) + "\n"

    names = [f"m{i:02d}" for i in range(20)]
    server.scripts["/many"] = script = Script()
    clock = Clock()
    collector = make_collector(server, ["/many"], clock, max_series_per_target=4)
    poll(collector, clock, [many_models(names)] * 2, script)
    running = [k for (name, k) in exported(collector) if name == cat.VLLM_REQUESTS_RUNNING.name]
    kept = sorted(dict(k)["model_name"] for k in running)
    assert len(kept) == 4
    assert get(collector, cat.VLLM_SERIES_DROPPED, "many") == 2 * (len(names) + 1 - 4)
    # A new pair that sorts first does not push out the pairs already exported.
    poll(collector, clock, [many_models(["a-new", *names])], script)
    running = [k for (name, k) in exported(collector) if name == cat.VLLM_REQUESTS_RUNNING.name]
    assert sorted(dict(k)["model_name"] for k in running) == kept


def errors(collector: VllmCollector, target: str) -> dict[str, float]:
    return {
        dict(labels)["reason"]: v
        for (name, labels), v in exported(collector).items()
        if name == cat.VLLM_SCRAPE_ERRORS.name and dict(labels)["target"] == target
    }


def test_dead_target_is_reported_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    config = Config.model_validate({"vllm": {"targets": [{"name": "dead", "url": f"http://127.0.0.1:{port}/m"}]}})
    collector = VllmCollector(config)
    with caplog.at_level(logging.WARNING, logger="exporters.collectors.vllm"):
        for _ in range(3):
            collector.poll_all()
    assert get(collector, cat.VLLM_UP, "dead") == 0.0
    assert errors(collector, "dead")["connection"] == 3.0
    assert not collector.healthy()
    warnings = [r for r in caplog.records if "dead" in r.getMessage()]
    assert len(warnings) == 1 and "connection" in warnings[0].getMessage()


# A valid page well under half the real scrape's size (the too_large cases set the limit to half).
SMALL = REAL[: REAL.rindex("\n", 0, len(REAL) // 3) + 1]


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (Script(body=b"<html><body>Welcome to nginx</body></html>", content_type="text/html"), "parse"),
        (Script(body=b'vllm:num_requests_running{model_name="tiny" 1\n'), "parse"),
        (Script(body=b"\xff\xfe" + REAL.encode()), "parse"),
        (Script(body=b"internal error", status=500), "http_status"),
        (Script(body=REAL.encode(), delay=1.0), "timeout"),
        (Script(body=REAL.encode()[:4000], repeat=20, trickle=0.05), "timeout"),
        (Script(body=REAL.encode()[:4000], repeat=2, trickle=1.0), "timeout"),
        (Script(body=REAL.encode()), "too_large"),
        (Script(body=REAL.encode(), content_length=False, repeat=4000), "too_large"),
    ],
    ids=["html", "malformed", "not-utf8", "http-500", "slow", "trickle", "stalled-body", "large", "large-stream"],
)
def test_bad_answers_are_reported_by_reason_and_spare_the_other_targets(
    server: ScrapeServer, script: Script, reason: str
) -> None:
    server.scripts["/bad"] = script
    server.scripts["/good"] = Script(body=SMALL.encode())
    limit = len(REAL) // 2 if reason == "too_large" else 2 * len(REAL)
    collector = make_collector(server, ["/bad", "/good"], timeout_seconds=0.4, max_response_bytes=limit)
    started = time.monotonic()
    collector.poll_all()
    assert time.monotonic() - started < 2.5
    assert get(collector, cat.VLLM_UP, "bad") == 0.0
    assert errors(collector, "bad") == {r: (1.0 if r == reason else 0.0) for r in errors(collector, "bad")}
    assert get(collector, cat.VLLM_REQUESTS_RUNNING, "bad", **TINY) is None  # nothing stale is exported
    assert get(collector, cat.VLLM_UP, "good") == 1.0
    assert get(collector, cat.VLLM_REQUESTS_RUNNING, "good", **TINY) == value(SMALL, RUNNING)
    assert collector.healthy()
    if not script.content_length:  # the oversized stream was abandoned, not read whole
        assert script.bytes_sent < len(script.body) * script.repeat / 4


def test_recovery_after_failures_is_logged_and_exports_again(
    server: ScrapeServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.scripts["/a"] = script = Script(body=b"oops", status=500)
    collector = make_collector(server, ["/a"])
    with caplog.at_level(logging.INFO, logger="exporters.collectors.vllm"):
        collector.poll_all()
        collector.poll_all()
        script.status, script.body = 200, REAL.encode()
        collector.poll_all()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and "http_status: HTTP 500" in messages[0] and "answers again" in messages[1]
    assert get(collector, cat.VLLM_UP, "a") == 1.0
    assert errors(collector, "a")["http_status"] == 2.0
    assert get(collector, cat.VLLM_REQUESTS_WAITING, "a", **TINY) == value(REAL, WAITING)


def test_healthy_needs_one_target_that_answered_its_last_poll(server: ScrapeServer) -> None:
    server.scripts["/a"] = script = Script(body=REAL.encode())
    server.scripts["/b"] = Script(body=b"", status=503)
    collector = make_collector(server, ["/a", "/b"])
    assert not collector.healthy()  # nothing polled yet
    collector.poll_all()
    assert collector.healthy()
    script.status = 502
    collector.poll_all()
    assert not collector.healthy()


def test_a_slow_target_does_not_delay_the_others(server: ScrapeServer) -> None:
    server.scripts["/slow"] = Script(body=REAL.encode(), delay=1.0)
    server.scripts["/fast"] = fast = Script(body=REAL.encode())
    collector = make_collector(server, ["/slow", "/fast"], poll_interval_seconds=0.1, timeout_seconds=0.8)
    collector.start()
    try:
        time.sleep(1.0)
        fast_polls = fast.hits
    finally:
        collector.stop()
    # In one second the slow target answered at most once; the fast one was polled on its own schedule.
    assert fast_polls >= 6
    assert get(collector, cat.VLLM_UP, "fast") == 1.0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([RUNNING, WAITING, KV, PREEMPT, STEPS]), st.text(max_size=30)), max_size=5))
def test_parse_raises_only_parse_error_on_mangled_lines(lines: list[tuple[str, str]]) -> None:
    text = "\n".join(name + rest for name, rest in lines)
    try:
        series = parse(text)
    except ParseError:
        return
    assert series and all(isinstance(model, str) and isinstance(engine, str) for model, engine in series)
