"""The Python client against a real sidecar over HTTP, a dead port and a server that never answers."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exporters import server
from infersight import client as client_module
from infersight.catalog import business as cat
from infersight.client import EventClient
from infersight.process import free_port
from tests.test_business_ingest import CONFIG, Client, sample, serve


@pytest.fixture
def sidecar() -> Iterator[Client]:
    yield from serve(CONFIG)


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def checks(sidecar: Client, rule: str = "retention") -> float:
    return sample(sidecar.metrics(), cat.COMPLIANCE_CHECKS.name, rule=rule, result="pass")


def test_every_call_reaches_the_sidecar(sidecar: Client) -> None:
    with EventClient(sidecar.base, flush_interval=0.05) as client:
        assert client.request(
            "normal",
            preprocessing=0.009,
            allocation=0.02,
            postprocessing=0.011,
            prompt_tokens=4000,
            completion_tokens=90,
        )
        assert client.request("normal", allocation=0.5)
        assert client.domain_tokens("medical", correct=49, total=50)
        assert client.compliance("pii-redaction", passed=False)
        assert client.cost(tenant="acme", prompt_tokens=10, completion_tokens=5)
        assert client.cost(product="chat", completion_tokens=7)
        assert client.emit({"kind": "compliance", "rule": "retention", "passed": True})
    assert client.stats() == {"sent": 7, **{f"dropped_{r}": 0 for r in client_module.DROP_REASONS}}
    m = sidecar.metrics()
    assert sample(m, cat.GATEWAY_REQUESTS.name, tier="normal") == 2
    assert sample(m, cat.GATEWAY_PHASE_DURATION.count, phase="allocation", tier="normal") == 2
    assert sample(m, cat.GATEWAY_PHASE_DURATION.count, phase="preprocessing", tier="normal") == 1
    assert sample(m, cat.GATEWAY_TOKENS.name, tier="normal", type="prompt") == 4000
    assert sample(m, cat.DOMAIN_TOKENS_CORRECT.name, domain="medical") == 49
    assert sample(m, cat.COMPLIANCE_CHECKS.name, rule="pii-redaction", result="fail") == 1
    assert sample(m, cat.COST_TENANT_TOKENS.name, tenant="acme") == 15
    assert sample(m, cat.COST_PRODUCT_TOKENS.name, product="chat") == 7
    assert sample(m, cat.COST_PRODUCT_TOKENS.name, product="other") == 0


def test_full_batches_go_at_once_and_a_partial_one_waits_for_its_interval(sidecar: Client) -> None:
    client = EventClient(sidecar.base, batch_size=40, flush_interval=60)
    try:
        for _ in range(250):
            client.compliance("retention", passed=True)
        assert eventually(lambda: checks(sidecar) == 240)
        time.sleep(0.3)
        assert checks(sidecar) == 240  # the last 10 wait for the batch to fill or age
        assert client.flush(timeout=5)
        assert checks(sidecar) == 250
        assert client.stats()["sent"] == 250
    finally:
        client.close()


def test_a_partial_batch_is_sent_when_it_is_flush_interval_old(sidecar: Client) -> None:
    with EventClient(sidecar.base, batch_size=1000, flush_interval=0.2) as client:
        client.compliance("retention", passed=True)
        assert eventually(lambda: checks(sidecar) == 1, timeout=3)


def test_batches_stay_under_the_byte_limit(sidecar: Client) -> None:
    """Events of ~150 bytes, a 2 KiB batch limit: many small POSTs, none refused by the sidecar."""
    with EventClient(sidecar.base, batch_size=10_000, max_batch_bytes=2048, flush_interval=0.05) as client:
        for _ in range(300):
            client.request("realtime", preprocessing=0.01, allocation=0.02, postprocessing=0.01, prompt_tokens=100)
    assert client.stats()["sent"] == 300
    assert client.stats()["dropped_rejected"] == 0
    assert sample(sidecar.metrics(), cat.GATEWAY_REQUESTS.name, tier="realtime") == 300


def test_invalid_events_are_counted_and_never_raise(sidecar: Client) -> None:
    with EventClient(sidecar.base, flush_interval=0.05) as client:
        assert not client.domain_tokens("legal", correct=5, total=3)
        assert not client.request("realtime", preprocessing=-1.0)
        assert not client.compliance("x", passed="no")  # type: ignore[arg-type]
        assert not client.emit("not an event")  # type: ignore[arg-type]
        assert not client.emit({"kind": "compliance", 1: 2, "x": 3})  # type: ignore[dict-item]
        assert client.compliance("retention", passed=True)
    assert client.stats()["dropped_invalid"] == 5
    assert client.stats()["sent"] == 1
    assert checks(sidecar) == 1


def test_a_wrong_token_drops_the_batch_as_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(server.TOKEN_ENV, "right")
    generator = serve(CONFIG)
    sidecar = next(generator)
    try:
        monkeypatch.delenv(server.TOKEN_ENV)
        with EventClient(sidecar.base, token="wrong") as bad:
            bad.compliance("retention", passed=True)
        assert bad.stats()["dropped_rejected"] == 1
        with EventClient(sidecar.base, token="right") as good:
            good.compliance("retention", passed=True)
        assert good.stats()["sent"] == 1
        assert checks(sidecar) == 1
    finally:
        generator.close()


def test_the_token_comes_from_a_file_or_the_environment(
    sidecar: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert client_module.TOKEN_ENV == server.TOKEN_ENV
    path = tmp_path / "token"
    path.write_text("from-file\n")
    with EventClient(sidecar.base, token_file=str(path)) as from_file:
        assert from_file._session.headers["Authorization"] == "Bearer from-file"
    monkeypatch.setenv(server.TOKEN_ENV, "from-env")
    with EventClient(sidecar.base) as from_env:
        assert from_env._session.headers["Authorization"] == "Bearer from-env"


def test_a_dead_sidecar_costs_the_caller_nothing_and_drops_are_counted() -> None:
    client = EventClient(f"http://127.0.0.1:{free_port()}", batch_size=10, flush_interval=0.05, timeout=1)
    began = time.monotonic()
    results = [client.compliance("retention", passed=True) for _ in range(100)]
    assert time.monotonic() - began < 1.0  # queued, not sent, on the caller's thread
    assert all(results)
    assert client.close(timeout=5)
    assert client.stats()["dropped_unreachable"] == 100
    assert client.stats()["sent"] == 0
    assert not client.compliance("retention", passed=True)
    assert client.stats()["dropped_closed"] == 1


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections into its backlog and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_a_hung_sidecar_fills_the_queue_and_the_rest_is_dropped(silent_server: str) -> None:
    client = EventClient(silent_server, batch_size=1, max_queue=10, flush_interval=0.05, timeout=2)
    began = time.monotonic()
    accepted = sum(client.compliance("retention", passed=True) for _ in range(100))
    assert time.monotonic() - began < 1.0
    assert 10 <= accepted <= 12  # the queue plus what the sender thread took before it hung
    assert client.stats()["dropped_queue_full"] == 100 - accepted
    began = time.monotonic()
    assert not client.close(timeout=0.5)  # the sender is stuck in its POST: close gives up on time
    assert time.monotonic() - began < 1.5


def test_bad_settings_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        EventClient("http://127.0.0.1:1", batch_size=0)
