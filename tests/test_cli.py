"""The ``infersight`` command, run as a real subprocess the way an operator runs it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from infersight import __version__
from tests.harness.scrape_server import REAL_SCRAPE, ScrapeServer, Script, free_port

REPO = Path(__file__).resolve().parents[1]
SUBCOMMANDS = ("exporter", "generate", "check-config", "stack")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "infersight", *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"infersight {__version__}"


def test_top_level_help_lists_every_subcommand() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for name in SUBCOMMANDS:
        assert name in result.stdout


@pytest.mark.parametrize("subcommand", SUBCOMMANDS)
def test_subcommand_help(subcommand: str) -> None:
    result = run_cli(subcommand, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: infersight {subcommand}")


def test_no_subcommand_is_a_usage_error() -> None:
    result = run_cli()
    assert result.returncode == 2 and "usage: infersight" in result.stderr


def test_check_config_accepts_a_good_file(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("thresholds:\n  kv_cache_usage: 0.75\n")
    result = run_cli("check-config", str(good))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{good}: OK"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "thresholds:\n  kv_cache_usage: 1.7\n",
            "thresholds.kv_cache_usage: expected less than or equal to 1, found 1.7",
        ),
        (
            "thresholds:\n  kv_cache_usag: 0.7\n",
            "thresholds.kv_cache_usag: unknown field; did you mean 'kv_cache_usage'?",
        ),
        ("thresholds: [1, 2\n", "not valid YAML"),
    ],
)
def test_check_config_rejects_a_bad_file_with_exit_2(tmp_path: Path, text: str, expected: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    result = run_cli("check-config", str(bad))
    assert result.returncode == 2
    assert expected in result.stderr and str(bad) in result.stderr
    assert "Traceback" not in result.stderr


def test_check_config_on_a_missing_file_exits_2(tmp_path: Path) -> None:
    result = run_cli("check-config", str(tmp_path / "absent.yaml"))
    assert result.returncode == 2 and "cannot read file" in result.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--listen-address", "0.0.0.0", "--port", "0"), "INFERSIGHT_INGEST_TOKEN"),
        (("--port", "99999"), "exporter.port: expected less than or equal to 65535, found 99999"),
    ],
)
def test_exporter_refuses_unusable_settings_with_exit_2(
    args: tuple[str, ...], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INFERSIGHT_INGEST_TOKEN", raising=False)
    result = run_cli("exporter", *args)
    assert result.returncode == 2
    assert expected in result.stderr and "Traceback" not in result.stderr


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=2) as response:
        return response.status, response.read()


@pytest.fixture
def vllm_page() -> Iterator[ScrapeServer]:
    with ScrapeServer() as server:
        server.scripts["/metrics"] = Script(body=REAL_SCRAPE.read_bytes())
        yield server


def test_exporter_serves_until_sigterm_stops_it_cleanly(tmp_path: Path, vllm_page: ScrapeServer) -> None:
    config = tmp_path / "infersight.yaml"
    config.write_text(
        "exporter:\n  collectors: {vllm: true, gpu: false, business: false}\n"
        f"vllm:\n  targets: [{{name: vllm-0, url: '{vllm_page.url('/metrics')}'}}]\n  poll_interval_seconds: 0.2\n"
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "infersight", "exporter", "-c", str(config), "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, process.communicate()
            try:
                status, body = get(f"{base}/healthz")
                metrics = get(f"{base}/metrics")[1].decode()
                if 'infersight_vllm_up{target="vllm-0"} 1.0' in metrics:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the exporter did not become ready in 20 s"
            time.sleep(0.1)
        assert status == 200 and json.loads(body)["status"] == "ok"
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert f"listening on http://127.0.0.1:{port}" in stdout
    assert "Traceback" not in stderr
    with pytest.raises(OSError):
        get(f"{base}/healthz")
