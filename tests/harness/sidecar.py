"""The real sidecar as a child process (``python3 -m infersight exporter``) on a free loopback port.

Used where the process itself is under test: its memory after junk requests,
its throughput on one pinned core.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from infersight.process import ManagedProcess, free_port, http_ok

REPO = Path(__file__).resolve().parents[2]


class SidecarProcess:
    """``with SidecarProcess(tmp, {...config...}) as sidecar:`` -> ``sidecar.url``, ``sidecar.rss_bytes()``."""

    def __init__(self, workdir: Path, config: dict[str, Any], cpus: Sequence[int] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config_path = workdir / "infersight.yaml"
        config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
        argv = [sys.executable, "-m", "infersight", "exporter", "-c", str(config_path), "--port", str(self.port)]
        if cpus is not None:
            argv = ["taskset", "-c", ",".join(map(str, cpus)), *argv]
        env = {k: v for k, v in os.environ.items() if k != "INFERSIGHT_INGEST_TOKEN"}
        self.process = ManagedProcess("sidecar", argv, workdir / "sidecar.log", env=env, cwd=REPO)

    def __enter__(self) -> SidecarProcess:
        self.process.start()
        self.process.wait_ready(lambda: http_ok(f"{self.url}/healthz"), timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stop()

    def rss_bytes(self) -> int:
        """Resident memory of the sidecar (the leader of its process group; taskset execs in place)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no VmRSS for pid {self.process.pid}")


def business_only(**business: Any) -> dict[str, Any]:
    """A config with only the business collector enabled (no vLLM target or NVML to wait for)."""
    return {
        "exporter": {"collectors": {"vllm": False, "gpu": False, "business": True}},
        "business": business,
    }
