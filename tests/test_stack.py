"""``infersight stack``: URL handling, missing binaries, and (integration) the real stack started by
the CLI, paged through, inspected and stopped with nothing left behind."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from infersight.catalog import exporter as cat
from infersight.cli import main
from infersight.config import Config
from infersight.process import MissingBinaryError, free_port, wait_until
from infersight.promapi import PrometheusAPI
from infersight.stack import ROUTING_KEY_FILE, STATE_FILE, Stack, StackError, StackOptions, vllm_target

REPO = Path(__file__).resolve().parents[1]
FAST = "prometheus:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nalerting:\n  group_wait: 1s\n"


def test_vllm_urls_become_metrics_targets() -> None:
    assert vllm_target("http://127.0.0.1:8000", 0).url == "http://127.0.0.1:8000/metrics"
    target = vllm_target("http://10.0.0.5:8000/", 2)
    assert (target.name, target.url) == ("vllm-2", "http://10.0.0.5:8000/metrics")
    assert vllm_target("https://vllm.internal/custom/metrics", 1).url == "https://vllm.internal/custom/metrics"
    with pytest.raises(StackError, match=r"--vllm: expected a URL such as http://127\.0\.0\.1:8000, found '127"):
        vllm_target("127.0.0.1:8000", 0)


def test_missing_binary_names_the_apt_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MissingBinaryError, match=r"apt-get install -y --no-install-recommends prometheus$"):
        Stack(Config(), StackOptions(run_dir=tmp_path / "run"))
    assert main(["stack", "up", "--dir", str(tmp_path / "run")]) == 1
    assert "none of prometheus found on PATH" in capsys.readouterr().err
    assert not (tmp_path / "run").exists(), "nothing is written before the binaries are found"


def test_status_and_down_without_a_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stack", "status", "--dir", str(tmp_path)]) == 1
    assert main(["stack", "down", "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count(f"no stack recorded in {tmp_path}") == 2


# ---- the real stack ----


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "infersight", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, check=False)


def leftovers(run_dir: Path) -> list[str]:
    """Live processes whose command line mentions ``run_dir`` (every service's does)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] if cmdline else "Z"
        except OSError:
            continue
        if str(run_dir).encode() in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline.replace(bytes(1), b' ').decode()}")
    return found


@pytest.fixture
def run_dir(tmp_path: Path, monitoring_binaries: None):
    """A run directory; whatever a failing test left running there is stopped afterwards."""
    path = tmp_path / "run"
    yield path
    if (path / STATE_FILE).exists():
        cli("stack", "down", "--dir", str(path))
    assert leftovers(path) == []


def up_args(run_dir: Path, *extra: str) -> list[str]:
    config = run_dir.parent / "infersight.yaml"
    config.write_text(FAST)
    absent_vllm = f"http://127.0.0.1:{free_port()}"  # nothing listens there: the target is down
    return ["stack", "up", "-c", str(config), "--dir", str(run_dir), "--vllm", absent_vllm, "--local-pager",
            "--prometheus-port", "0", "--alertmanager-port", "0", "--sidecar-port", "0", *extra]


def services(run_dir: Path) -> dict[str, dict]:
    return {s["name"]: s for s in json.loads((run_dir / STATE_FILE).read_text())["services"]}


def _page_through_local_pager(alertmanager: str, pager_events: str) -> dict:
    alert = {"labels": {"alertname": "InfersightStackTest", "severity": "critical"},
             "annotations": {"summary": "stack test page.", "runbook_url": "https://example.com/rb"},
             "startsAt": dt.datetime.now(dt.timezone.utc).isoformat()}
    assert requests.post(f"{alertmanager}/api/v2/alerts", json=[alert], timeout=5).status_code == 200
    pages = wait_until(lambda: requests.get(pager_events, timeout=5).json()["pagerduty"], 20, "page at the local pager")
    return pages[0]


@pytest.mark.integration
def test_up_status_down_leaves_nothing_behind(run_dir: Path) -> None:
    started = cli(*up_args(run_dir))
    assert started.returncode == 0, started.stderr
    recorded = services(run_dir)
    assert set(recorded) == {"local-pager", "sidecar", "alertmanager", "prometheus"}
    for name, service in recorded.items():
        assert service["url"] in started.stdout and os.path.exists(f"/proc/{service['pid']}"), name

    # Prometheus scraped both jobs before `up` returned: sidecar up, the absent vLLM down.
    api = PrometheusAPI(recorded["prometheus"]["url"])
    health = {t["labels"]["job"]: t["health"] for t in api.targets()}
    assert health == {Config().prometheus.sidecar_job: "up", Config().prometheus.vllm_job: "down"}
    assert wait_until(lambda: api.query(f"{cat.VLLM_UP} == 0"), 10, "the sidecar reporting vLLM down")

    # --local-pager: Alertmanager reads the generated routing key and pages the local receiver.
    key = (run_dir / ROUTING_KEY_FILE).read_text().strip()
    assert len(key) == 32 and (run_dir / ROUTING_KEY_FILE).stat().st_mode & 0o077 == 0
    page = _page_through_local_pager(recorded["alertmanager"]["url"], recorded["local-pager"]["url"])
    assert page["body"]["routing_key"] == key
    assert page["body"]["payload"]["summary"] == "stack test page."
    log = Path(recorded["local-pager"]["log"])
    assert wait_until(lambda: "[TRIGGER critical] stack test page." in log.read_text(), 5, "the page in the log")
    assert "Runbook: https://example.com/rb" in log.read_text()

    again = cli(*up_args(run_dir))
    assert again.returncode == 1 and "already running" in again.stderr

    status = cli("stack", "status", "--dir", str(run_dir))
    assert status.returncode == 0, status.stdout
    assert "prometheus    running" in status.stdout and ": down (" in status.stdout

    stopped = cli("stack", "down", "--dir", str(run_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert leftovers(run_dir) == []
    assert not (run_dir / STATE_FILE).exists() and not (run_dir / "data").exists()


@pytest.mark.integration
def test_foreground_stops_everything_on_ctrl_c(run_dir: Path) -> None:
    process = subprocess.Popen([sys.executable, "-m", "infersight", *up_args(run_dir, "--foreground")], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if "Ctrl-C stops everything" in line:
                break
        assert len(services(run_dir)) == 4, "".join(lines)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert "stack stopped" in output
    assert leftovers(run_dir) == []


@pytest.mark.integration
def test_a_failed_start_stops_what_had_started(run_dir: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = up_args(run_dir)
        args[args.index("--prometheus-port") + 1] = str(port)
        failed = cli(*args)
    assert failed.returncode == 1
    assert "prometheus: exited with status" in failed.stderr and "address already in use" in failed.stderr
    assert leftovers(run_dir) == []
    assert not (run_dir / STATE_FILE).exists()
