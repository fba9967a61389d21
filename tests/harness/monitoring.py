"""Real Prometheus and Alertmanager on free loopback ports, configured by infersight.deploy.

Each runs from a temp dir holding exactly the files the renderers produce, so a
test exercises the same configs ``infersight generate`` writes, only with local
addresses. Both are stopped (process group and all) when the context exits.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from infersight.config import Config
from infersight.deploy import (
    ALERTMANAGER_TARGETS,
    SIDECAR_TARGETS,
    VLLM_TARGETS,
    alertmanager_config,
    prometheus_config,
    targets_json,
)
from infersight.process import ManagedProcess, find_binary, free_port, http_ok, wait_until
from infersight.promapi import PrometheusAPI
from infersight.stack import alertmanager_command, prometheus_command

READY_TIMEOUT = 30.0


def write_prometheus_dir(
    root: Path,
    config: Config,
    vllm: list[str],
    sidecar: list[str],
    alertmanagers: list[str],
    rule_files: dict[str, str] | None = None,
) -> Path:
    """prometheus.yml, its target files and ``rules/<name>`` files under ``root``; returns the config path."""
    rules = rule_files or {}
    for name, text in rules.items():
        (root / "rules").mkdir(parents=True, exist_ok=True)
        (root / "rules" / name).write_text(text, encoding="utf-8")
    for rel, addresses in ((VLLM_TARGETS, vllm), (SIDECAR_TARGETS, sidecar), (ALERTMANAGER_TARGETS, alertmanagers)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(targets_json(addresses), encoding="utf-8")
    path = root / "prometheus.yml"
    path.write_text(prometheus_config(config, [f"rules/{name}" for name in rules]), encoding="utf-8")
    return path


@contextmanager
def running_prometheus(root: Path, config_file: Path) -> Iterator[str]:
    """Prometheus on a free port with ``config_file``; yields its base URL."""
    binary = find_binary(["prometheus"], "prometheus")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = prometheus_command(binary, config_file, root / "data", port)
    proc = ManagedProcess("prometheus", command, root / "prometheus.log").start()
    try:
        proc.wait_ready(lambda: http_ok(f"{url}/-/ready"), READY_TIMEOUT)
        yield url
    finally:
        proc.stop()


@contextmanager
def running_alertmanager(root: Path, config: Config, routing_key_file: Path) -> Iterator[str]:
    """Alertmanager on a free port with ``alertmanager_config(config)``; yields its base URL."""
    binary = find_binary(["prometheus-alertmanager", "alertmanager"], "prometheus-alertmanager")
    root.mkdir(parents=True, exist_ok=True)
    config_file = root / "alertmanager.yml"
    config_file.write_text(alertmanager_config(config, str(routing_key_file)), encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = alertmanager_command(binary, config_file, root / "data", port)
    proc = ManagedProcess("alertmanager", command, root / "alertmanager.log").start()
    try:
        proc.wait_ready(lambda: http_ok(f"{url}/-/ready"), READY_TIMEOUT)
        yield url
    finally:
        proc.stop()


def api(url: str, path: str, **params: str) -> Any:
    """``data`` of a Prometheus HTTP API answer (``path`` like ``/api/v1/query``); raises on an error status."""
    return PrometheusAPI(url).get(path.removeprefix("/api/v1/"), **params)


def wait_for_series(url: str, expr: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The instant-query result of ``expr`` once it is non-empty."""
    return wait_until(lambda: api(url, "/api/v1/query", query=expr)["result"], timeout, f"series for {expr}", 0.25)
