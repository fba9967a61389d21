"""Rule specs: what a rule means, before any cross-cutting annotation is added."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["critical", "warning", "info"]
ALERT_PREFIX = "Infersight"


@dataclass(frozen=True)
class Recording:
    """A recording rule named ``level:metric:operation``."""

    record: str
    expr: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Alert:
    """An alert. ``summary`` is one static sentence; ``description`` may template
    labels and a humanized ``$value``. ``dashboard`` is the UID the page links to."""

    name: str
    expr: str
    severity: Severity
    summary: str
    description: str
    dashboard: str
    for_: str = "0s"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name.startswith(ALERT_PREFIX):
            raise ValueError(f"alert {self.name!r} must start with {ALERT_PREFIX!r}")
        if "$value" in "".join(self.labels.values()):
            raise ValueError(f"alert {self.name!r}: $value in labels makes a new alert at every change")


@dataclass(frozen=True)
class Group:
    name: str
    rules: list[Recording | Alert]
    interval: str | None = None
