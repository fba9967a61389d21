"""The sidecar's HTTP server, started for real on a free loopback port."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporters.events import INGEST_PATH
from exporters.server import TOKEN_ENV, Sidecar
from infersight import __version__
from infersight.config import Config
from tests.harness.scrape_server import REAL_SCRAPE, ScrapeServer, Script, free_port, value

MAX_BODY = 256


@pytest.fixture(autouse=True)
def no_token_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)


@pytest.fixture
def vllm_page() -> Iterator[ScrapeServer]:
    with ScrapeServer() as server:
        server.scripts["/metrics"] = Script(body=REAL_SCRAPE.read_bytes())
        yield server


def make_config(vllm_page: ScrapeServer, **exporter: object) -> Config:
    """One live vLLM target and one that is gone; the business collector supplies a write route."""
    return Config.model_validate(
        {
            "exporter": {
                "port": 0,
                "max_body_bytes": MAX_BODY,
                "collectors": {"vllm": True, "gpu": False, "business": True},
                **exporter,
            },
            "vllm": {
                "targets": [
                    {"name": "vllm-0", "url": vllm_page.url("/metrics")},
                    {"name": "gone", "url": f"http://127.0.0.1:{free_port()}/metrics"},
                ],
                "poll_interval_seconds": 0.1,
            },
        }
    )


@pytest.fixture
def sidecar(vllm_page: ScrapeServer) -> Iterator[Sidecar]:
    running = Sidecar(make_config(vllm_page))
    running.start()
    yield running
    running.stop()


def request(
    sidecar: Sidecar, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP exchange; ``body=None`` sends no Content-Length at all."""
    conn = http.client.HTTPConnection("127.0.0.1", sidecar.port, timeout=5)
    try:
        conn.putrequest(method, path)
        for name, val in (headers or {}).items():
            conn.putheader(name, val)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def scrape_until_up(sidecar: Sidecar) -> str:
    deadline = time.monotonic() + 5
    while True:
        status, _, body = request(sidecar, "GET", "/metrics")
        assert status == 200
        text = body.decode()
        if 'infersight_vllm_up{target="vllm-0"} 1.0' in text or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


def test_metrics_serves_plain_text_with_no_colon_names(sidecar: Sidecar) -> None:
    text = scrape_until_up(sidecar)
    _, headers, _ = request(sidecar, "GET", "/metrics")
    assert headers["Content-Type"].startswith("text/plain;")  # the text format, never OpenMetrics
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert all(re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", name) for name, _ in samples)
    assert samples[("infersight_vllm_up", (("target", "vllm-0"),))] == 1.0
    assert samples[("infersight_vllm_up", (("target", "gone"),))] == 0.0  # a dead target is reported, not fatal
    labels = (("engine", "0"), ("model_name", "tiny"), ("target", "vllm-0"))
    real = REAL_SCRAPE.read_text()
    assert samples[("infersight_vllm_requests_running", labels)] == value(real, "vllm:num_requests_running")
    assert samples[("infersight_vllm_kv_cache_usage_ratio", labels)] == value(real, "vllm:kv_cache_usage_perc")
    assert samples[("infersight_collector_up", (("collector", "vllm"),))] == 1.0
    assert samples[("infersight_build_info", (("version", __version__),))] == 1.0


def test_promtool_check_metrics_is_clean(sidecar: Sidecar) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found on PATH: apt-get install prometheus (2.42)")
    text = scrape_until_up(sidecar)
    assert "infersight_vllm_requests_running{" in text  # the per-model families are in what is checked
    result = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_healthz_reports_version_and_collectors(sidecar: Sidecar) -> None:
    scrape_until_up(sidecar)  # collector health is what the last scrape found
    status, headers, body = request(sidecar, "GET", "/healthz")
    assert status == 200 and headers["Content-Type"] == "application/json"
    health = json.loads(body)
    assert (health["status"], health["version"]) == ("ok", __version__)
    assert health["collectors"]["vllm"] is True and "gpu" not in health["collectors"]  # disabled in this config


@pytest.mark.parametrize(("method", "path"), [("GET", "/nope"), ("GET", "/metrics/extra"), ("POST", "/metrics")])
def test_unknown_routes_are_404(sidecar: Sidecar, method: str, path: str) -> None:
    status, _, body = request(sidecar, method, path, body=b"{}" if method == "POST" else None)
    assert status == 404
    assert f"{method} {path}" in json.loads(body)["error"]


def test_write_route_needs_content_length_and_a_bounded_body(sidecar: Sidecar) -> None:
    status, _, body = request(sidecar, "POST", INGEST_PATH)
    assert status == 411 and "Content-Length" in json.loads(body)["error"]
    status, headers, body = request(sidecar, "POST", INGEST_PATH, body=b" " * (MAX_BODY + 1))
    assert status == 413 and str(MAX_BODY) in json.loads(body)["error"]
    assert headers["Connection"] == "close"  # the unread body poisons the socket: keep-alive clients must not reuse it
    status, _, body = request(sidecar, "POST", INGEST_PATH, body=b'{"events": []}')
    assert status == 200, body  # the same route takes a body within the limit
    assert request(sidecar, "GET", "/healthz")[0] == 200  # and the server is still serving


def test_token_guards_write_routes(vllm_page: ScrapeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "s3cret-token")
    guarded = Sidecar(make_config(vllm_page))
    guarded.start()
    try:
        body = b'{"events": []}'
        assert request(guarded, "POST", INGEST_PATH, body)[0] == 401
        assert request(guarded, "POST", INGEST_PATH, body, {"Authorization": "Bearer wrong"})[0] == 401
        assert request(guarded, "POST", INGEST_PATH, body, {"Authorization": "Bearer s3cret-token"})[0] == 200
        assert request(guarded, "GET", "/metrics")[0] == 200  # reads need no token
    finally:
        guarded.stop()


def test_non_loopback_address_needs_a_token(
    vllm_page: ScrapeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Constructing the Sidecar is where the check happens; nothing is bound to a public address here.
    with pytest.raises(ValueError, match=rf"exporter.listen_address is '0.0.0.0'.*{TOKEN_ENV}") as refused:
        Sidecar(make_config(vllm_page, listen_address="0.0.0.0"))
    assert "ingest_token_file" in str(refused.value)
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file\n")
    assert Sidecar(make_config(vllm_page, listen_address="0.0.0.0", ingest_token_file=str(token_file))).token == (
        "from-a-file"
    )
    monkeypatch.setenv(TOKEN_ENV, "from-the-environment")
    assert Sidecar(make_config(vllm_page, listen_address="0.0.0.0")).token == "from-the-environment"


def test_stop_closes_the_port(vllm_page: ScrapeServer) -> None:
    running = Sidecar(make_config(vllm_page))
    running.start()
    assert request(running, "GET", "/healthz")[0] == 200
    running.stop()
    with pytest.raises(ConnectionRefusedError):
        request(running, "GET", "/healthz")


@pytest.mark.parametrize(
    ("error", "level"), [(ConnectionResetError(), "DEBUG"), (BrokenPipeError(), "DEBUG"), (ValueError("bug"), "ERROR")]
)
def test_a_client_hanging_up_is_not_an_error(
    sidecar: Sidecar, caplog: pytest.LogCaptureFixture, error: Exception, level: str
) -> None:
    caplog.set_level("DEBUG", logger="exporters.server")
    try:
        raise error
    except Exception:
        sidecar._server.handle_error(None, ("127.0.0.1", 5555))
    assert [r.levelname for r in caplog.records if r.name == "exporters.server"] == [level]
    assert request(sidecar, "GET", "/healthz")[0] == 200
