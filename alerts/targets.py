"""The down/absent alert pair for one Prometheus scrape job.

``up == 0`` catches a target Prometheus still knows but cannot scrape; it is empty
(not zero) when the target vanishes from service discovery, and so is
``sum(up) == 0``. ``absent(up{job=...})`` covers that second case.
"""

from __future__ import annotations

from alerts.spec import Alert, Severity
from dashboards import OVERVIEW
from infersight.config import Config


def up_selector(job: str) -> str:
    return f'up{{job="{job}"}}'


def target_alerts(
    config: Config, prefix: str, job: str, what: str, consequence: str, severity: Severity
) -> list[Alert]:
    """``Infersight<prefix>Down`` per target and ``Infersight<prefix>Absent`` for the whole job.

    ``what`` names the target kind in prose, ``consequence`` says what the on-call
    loses while one target is down.
    """
    wait = config.thresholds.target_down_for
    return [
        Alert(
            name=f"Infersight{prefix}Down",
            expr=f"{up_selector(job)} == 0",
            for_=wait,
            severity=severity,
            summary=f"Prometheus cannot scrape one of the {what} targets.",
            description=(
                f"Prometheus has failed to scrape {what} target {{{{ $labels.instance }}}} (job {job}) "
                f"for {wait}. {consequence}"
            ),
            dashboard=OVERVIEW,
        ),
        Alert(
            name=f"Infersight{prefix}Absent",
            expr=f"absent({up_selector(job)})",
            for_=wait,
            severity=severity,
            summary=f"Prometheus has no {what} target at all.",
            description=(
                f"Prometheus has had no target in job {job} for {wait}: the {what} targets are gone from service "
                f"discovery or the scrape configuration, and every alert on their metrics is blind."
            ),
            dashboard=OVERVIEW,
        ),
    ]
