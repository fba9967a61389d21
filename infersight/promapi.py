"""A small client for a running Prometheus's HTTP API (v1): queries, targets, rules, alerts.

Used to decide when a freshly started Prometheus is really ready (rules loaded,
Alertmanager discovered, every target scraped once) and by ``stack status``.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from infersight.process import http_get

NEVER_SCRAPED = "0001-01-01T00:00:00Z"


class PrometheusAPIError(RuntimeError):
    pass


class PrometheusAPI:
    def __init__(self, base_url: str, timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def get(self, path: str, **params: str) -> Any:
        """The ``data`` of a successful API answer; PrometheusAPIError otherwise."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"{self.base_url}/api/v1/{path}{query}"
        status, body = http_get(url, self.timeout)
        if status == 0:
            raise PrometheusAPIError(f"no answer from {url}")
        try:
            answer = json.loads(body)
        except json.JSONDecodeError:
            raise PrometheusAPIError(f"{url}: HTTP {status}, not JSON: {body[:200]!r}") from None
        if answer.get("status") != "success":
            raise PrometheusAPIError(f"{url}: {answer.get('errorType')}: {answer.get('error')}")
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result (a list of ``{"metric": {...}, "value": [t, "v"]}``)."""
        return self.get("query", query=expr)["result"]

    def targets(self) -> list[dict[str, Any]]:
        return self.get("targets", state="active")["activeTargets"]

    def rule_groups(self) -> list[dict[str, Any]]:
        return self.get("rules")["groups"]

    def alertmanagers(self) -> list[dict[str, Any]]:
        return self.get("alertmanagers")["activeAlertmanagers"]

    def alerts(self) -> list[dict[str, Any]]:
        return self.get("alerts")["alerts"]

    def ready_to_alert(self) -> bool:
        """Rules loaded, an Alertmanager discovered, every target scraped at least once."""
        try:
            targets = self.targets()
            return (
                bool(self.rule_groups())
                and bool(self.alertmanagers())
                and bool(targets)
                and all(t["lastScrape"] != NEVER_SCRAPED for t in targets)
            )
        except PrometheusAPIError:
            return False
