"""The dashboard table: UID -> module with ``build(config) -> grafanalib Dashboard``.

UIDs are stable (alerts link to ``/d/<uid>``), so they are defined here, once.
"""

from __future__ import annotations

from collections.abc import Callable

from infersight.config import Config

OVERVIEW = "infersight-overview"
GPU = "infersight-gpu"
SLO = "infersight-slo"
BUSINESS = "infersight-business"

DASHBOARDS: dict[str, str] = {
    OVERVIEW: "dashboards.overview",
    BUSINESS: "dashboards.business",
    GPU: "dashboards.gpu",
    SLO: "dashboards.slo",
}


def dashboard_artifacts() -> dict[str, Callable[[Config], str]]:
    """Repository path -> renderer, for the generated-artifacts table."""
    from dashboards.common import render_json

    return {f"dashboards/generated/{uid}.json": render_json(module) for uid, module in DASHBOARDS.items()}
