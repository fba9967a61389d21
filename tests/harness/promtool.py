"""Running the real promtool (Prometheus 2.42) on rule files and rule unit tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.harness.vllm_env import require_binary

REPO = Path(__file__).resolve().parents[2]
PROMTOOL_TESTS = sorted((REPO / "tests" / "promtool").glob("*.test.yaml"))


def promtool(*args: str | Path, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run promtool; without it the test skips saying what to install (fails in CI, see ``require``)."""
    binary = require_binary(("promtool",), "prometheus")
    return subprocess.run(
        [binary, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


def assert_ok(result: subprocess.CompletedProcess[str]) -> None:
    command = " ".join(result.args)
    assert result.returncode == 0, f"{command} exited {result.returncode}:\n{result.stdout}{result.stderr}"


def write_yaml(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path
