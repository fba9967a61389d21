"""Property-based fuzzing of ``POST /v1/events`` against the real sidecar process over HTTP.

Whatever arrives (arbitrary bytes, arbitrary JSON, valid events with one field
mangled, valid events with random label values), the sidecar answers 200, 400
or 413, never 5xx, never drops the connection, keeps serving ``/metrics``, and
its memory does not grow with the junk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from infersight.catalog import business as cat
from tests.harness.sidecar import SidecarProcess, business_only

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Target:
    def __init__(self, sidecar: SidecarProcess) -> None:
        self.sidecar = sidecar
        self.session = requests.Session()

    def post(self, body: bytes) -> requests.Response:
        response = self.session.post(f"{self.sidecar.url}/v1/events", data=body, timeout=10)
        assert response.status_code in (200, 400, 413), (response.status_code, response.text, body[:200])
        if response.status_code != 200:
            assert response.json()["error"]  # every refusal says why
        return response

    def series(self) -> int:
        response = self.session.get(f"{self.sidecar.url}/metrics", timeout=10)
        assert response.status_code == 200
        return sum(len(f.samples) for f in text_string_to_metric_families(response.text))


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    workdir: Path = tmp_path_factory.mktemp("fuzz")
    config = business_only(domains=["legal"], compliance_rules=["pii"], tenants=["acme"], max_events_per_batch=200)
    with SidecarProcess(workdir, config) as sidecar:
        yield Target(sidecar)
        assert sidecar.process.exited() is None, sidecar.process.log_tail()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=20,
)
labels = st.text(max_size=30)
valid_events = st.one_of(
    st.fixed_dictionaries(
        {"kind": st.just("request"), "tier": labels},
        optional={
            "phases": st.dictionaries(
                st.sampled_from(cat.GATEWAY_PHASES), st.floats(min_value=0, max_value=3600), max_size=3
            ),
            "prompt_tokens": st.integers(0, 2**32 - 1),
            "completion_tokens": st.integers(0, 2**32 - 1),
        },
    ),
    st.integers(0, 10**6).flatmap(
        lambda total: st.fixed_dictionaries(
            {
                "kind": st.just("domain_tokens"),
                "domain": labels,
                "total": st.just(total),
                "correct": st.integers(0, total),
            }
        )
    ),
    st.fixed_dictionaries({"kind": st.just("compliance"), "rule": labels, "passed": st.booleans()}),
    st.fixed_dictionaries({"kind": st.just("cost"), "tenant": labels}, optional={"product": labels}),
)


@st.composite
def mangled_events(draw: st.DrawFn) -> dict:
    """A valid event with one field replaced by any JSON value, or one field added."""
    event = dict(draw(valid_events))
    key = draw(st.sampled_from([*event, "extra"]))
    event[key] = draw(json_values)
    return event


@FUZZ
@given(body=st.binary(max_size=2000))
def test_arbitrary_bytes(target: Target, body: bytes) -> None:
    target.post(body)


@FUZZ
@given(value=json_values)
def test_arbitrary_json(target: Target, value: object) -> None:
    target.post(json.dumps(value).encode())
    target.post(json.dumps({"events": value}).encode())


@FUZZ
@given(events=st.lists(st.one_of(valid_events, mangled_events()), max_size=20))
def test_mangled_batches_are_all_or_nothing(target: Target, events: list[dict]) -> None:
    response = target.post(json.dumps({"events": events}).encode())
    if response.status_code == 200:
        assert response.json() == {"accepted": len(events)}
    else:
        assert response.json()["error"].startswith("events[")


@FUZZ
@given(events=st.lists(valid_events, min_size=1, max_size=200))
def test_valid_batches_are_accepted(target: Target, events: list[dict]) -> None:
    response = target.post(json.dumps({"events": events}).encode())
    assert response.json() == {"accepted": len(events)}


def test_memory_and_series_stay_bounded_under_junk(target: Target) -> None:
    """Thousands of junk bodies and random label values: no new series, RSS within a few MiB."""
    junk = [
        b"{" * 200_000,
        b"[" * 200_000,
        json.dumps({"events": [{"kind": "x" * 1000}] * 150}).encode(),
        json.dumps({"events": [[1] * 1000] * 150}).encode(),
    ]

    def burst(round_: int) -> None:
        for i in range(30):
            target.post(junk[i % len(junk)])
            events = [
                {"kind": "compliance", "rule": f"r{round_}-{i}-{j}-" + "x" * 50, "passed": False} for j in range(200)
            ]
            target.post(json.dumps({"events": events}).encode())

    burst(0)  # warm up allocator pools and caches
    series = target.series()
    rss = target.sidecar.rss_bytes()
    for round_ in range(1, 5):
        burst(round_)
    assert target.series() == series
    grown = target.sidecar.rss_bytes() - rss
    assert grown < 8 * 1024 * 1024, f"sidecar RSS grew by {grown / 2**20:.1f} MiB over 120 junk and 120 valid bodies"
