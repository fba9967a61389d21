"""``infersight demo`` as a user runs it: a short timeline end to end, then Ctrl-C leaves nothing behind."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from infersight.demo import INSTALL
from infersight.stack import STATE_FILE, read_state

REPO = Path(__file__).resolve().parents[1]

SCENARIO = """\
name: demo-page
description: Compliance checks start failing three seconds in.
expect: [InfersightComplianceCheckFailed]
phases:
  - {name: steady state, seconds: 3}
  - {name: compliance failures, seconds: 120, incident: true, business: {compliance_pass_rate: 0.5}}
"""


def _processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line contains ``text`` (the demo's run directory names every child's files)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(int(entry.name))
    return found


class Lines:
    """A child's stdout, line by line, readable with a timeout."""

    def __init__(self, stream: object) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self._queue.put(line) for line in stream], daemon=True).start()  # type: ignore[attr-defined]

    def wait_for(self, needle: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            self.seen.append(line)
            if needle in line:
                return line
        raise AssertionError(f"no line with {needle!r} within {timeout} s; output:\n{''.join(self.seen)}")


@pytest.mark.integration
@pytest.mark.usefixtures("monitoring_binaries")
def test_demo_pages_then_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    scenario = tmp_path / "demo-page.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    run_dir = tmp_path / "run"
    demo = subprocess.Popen(
        [sys.executable, "-m", "infersight", "demo", "--scenario", str(scenario), "--dir", str(run_dir),
         "--prometheus-port", "0", "--alertmanager-port", "0"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        lines = Lines(demo.stdout)
        lines.wait_for("Alertmanager API", 90)
        lines.wait_for("phase 2/2: compliance failures", 30)
        page = lines.wait_for("PAGE TRIGGER", 60)
        assert "InfersightComplianceCheckFailed (demo-page)" in page
        runbook = lines.wait_for("runbook:", 5)
        assert "InfersightComplianceCheckFailed.md" in runbook
        services = read_state(run_dir)
        assert {s.name for s in services} == {"prometheus", "alertmanager", "local-pager"}
        assert _processes_mentioning(str(run_dir)), "the stack's processes should be running now"

        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=30) == 130
        lines.wait_for("everything stopped", 5)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
    assert _processes_mentioning(str(run_dir)) == []
    assert not (run_dir / STATE_FILE).exists()


def test_demo_names_the_packages_when_prometheus_is_missing(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "infersight", "demo", "--dir", str(tmp_path)],
        cwd=REPO, env={**os.environ, "PATH": str(tmp_path)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert INSTALL in result.stderr
    assert "prometheus" in result.stderr and "prometheus-alertmanager" in result.stderr
