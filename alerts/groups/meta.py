"""Alerts about the monitoring itself: the dead man's switch and the sidecar's health.

A silent pager means nothing unless something proves the pipeline can page, and
every signal the sidecar derives (normalized KV-cache usage, GPU, business) goes
quiet, not red, when the sidecar cannot do its job.
"""

from __future__ import annotations

from alerts.spec import Alert, Group
from alerts.targets import target_alerts, up_selector
from dashboards import OVERVIEW
from infersight.catalog.exporter import VLLM_UP
from infersight.config import Config


def watchdog() -> Alert:
    return Alert(
        name="InfersightWatchdog",
        expr="vector(1)",
        severity="info",
        summary="Always firing, to prove that alerts reach their receiver.",
        description=(
            "Dead man's switch: this alert fires at all times on purpose. Route it to a heartbeat receiver that "
            "raises an incident when it stops arriving; its absence means Prometheus, rule evaluation or "
            "Alertmanager delivery is broken."
        ),
        dashboard=OVERVIEW,
    )


def sidecar_cannot_poll(config: Config) -> Alert:
    """The sidecar is scraped fine but cannot poll vLLM, which Prometheus still reaches.

    Without this alert a wrong target URL in infersight.yaml leaves every
    sidecar-derived alert blind while ``up`` stays 1. It stays quiet while vLLM
    itself is down or gone, which InfersightVLLMTargetDown/Absent already page for.
    """
    vllm_up = up_selector(config.prometheus.vllm_job)
    wait = config.thresholds.target_down_for
    return Alert(
        name="InfersightSidecarVLLMUnreachable",
        expr=f"{VLLM_UP} == 0 unless on () ({vllm_up} == 0 or absent({vllm_up}))",
        for_=wait,
        severity="warning",
        summary="The sidecar cannot poll a vLLM server that Prometheus can scrape.",
        description=(
            "Sidecar {{ $labels.instance }} has failed to poll vLLM target {{ $labels.target }} for "
            f"{wait} while Prometheus scrapes vLLM fine: the sidecar's target URL or network path is wrong, so "
            "KV-cache, batch-efficiency and other sidecar-derived alerts for it cannot fire."
        ),
        dashboard=OVERVIEW,
    )


def groups(config: Config) -> list[Group]:
    sidecar = target_alerts(
        config,
        "Sidecar",
        config.prometheus.sidecar_job,
        "infersight sidecar",
        "KV-cache, GPU and business signals from it are missing, so the alerts built on them cannot fire.",
        "warning",
    )
    return [Group("infersight-meta", [watchdog(), *sidecar, sidecar_cannot_poll(config)])]
