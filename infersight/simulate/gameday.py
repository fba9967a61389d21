"""Game day: scenarios against the real monitoring stack, and which alerts each one fired.

Prometheus and Alertmanager run from local binaries (``infersight.stack``) with
the generated rules, on a config where one minute of production time takes one
second (``compressed_config``), scraping every simulated vLLM server and sidecar.
Pages and warning notifications go to the local PagerDuty receiver.

An alert belongs to the scenario whose label values it carries (model name,
target, GPU UUID, domain, compliance rule or scrape address, see
``simulation.Identity``); alerts about the whole fleet (the Watchdog, a job-level
cost alert) belong to none. "Fired" is every alert that was ``firing`` in
Prometheus at any evaluation during the run, whether or not it resolved since.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from alerts.render import alerts, runbook_url
from infersight.config import Config, duration_seconds, parse_config
from infersight.process import http_get, wait_until
from infersight.promapi import PrometheusAPI
from infersight.simulate.scenario import Phase, Scenario
from infersight.simulate.simulation import Identity, Simulation
from infersight.stack import Stack, StackOptions
from infersight.testing.pagerduty import EVENTS_PATH

TIME_SCALE = 60.0  # production seconds per game-day second
MIN_WINDOW_SECONDS = 15  # a rate window spans at least this many 1 s scrapes
MIN_FOR_SECONDS = 10  # a `for` rides out a quick restart, and scrapes missed on a loaded machine
SETTLE_SECONDS = 10.0  # after the timeline: time for the last alerts to notify
SETTLE_TIMEOUT_SECONDS = 60.0
WATCHDOG = "InfersightWatchdog"
_FIXED = {"roi_compare_offset", "scrape_interval", "evaluation_interval", "group_wait", "group_interval"}
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w))+$")


def _compress(data: Any, key: str = "") -> Any:
    """Every duration in a dumped config divided by TIME_SCALE, floored so windows and `for`s stay usable."""
    if isinstance(data, dict):
        return {k: _compress(v, k) for k, v in data.items()}
    if isinstance(data, list):
        return [_compress(v, key) for v in data]
    if isinstance(data, str) and key not in _FIXED and _DURATION.match(data) and duration_seconds(data) > 0:
        floor = MIN_FOR_SECONDS if key.endswith("for") else MIN_WINDOW_SECONDS
        return f"{max(floor, round(duration_seconds(data) / TIME_SCALE))}s"
    return data


def compressed_config(base: Config | None = None, scenarios: Iterable[Scenario] = ()) -> Config:
    """The game-day config: 1 s scrape, evaluation and grouping, every window and `for` scaled down,
    and the scenarios' names as the business domains and compliance rules."""
    data = _compress((base or Config()).model_dump(mode="json"))
    names = [s.name for s in scenarios]
    data["prometheus"].update(scrape_interval="1s", evaluation_interval="1s")
    data["alerting"].update(group_wait="1s", group_interval="1s")
    data["gpu"].update(sample_window_seconds=MIN_WINDOW_SECONDS, poll_hz=1.0)  # the driver buffers ~16 s
    data["vllm"]["rate_window_seconds"] = MIN_WINDOW_SECONDS
    if names:
        data["business"].update(domains=names, compliance_rules=names)
    return parse_config(data, "game-day config")


@dataclass
class Notice:
    """One notification as the receiver got it: a PagerDuty event or a webhook alert."""

    channel: str  # "page" (PagerDuty) or "webhook"
    status: str  # trigger / resolve, firing / resolved
    alertname: str
    severity: str
    summary: str
    runbook_url: str
    labels: dict[str, str]
    at: float  # wall-clock time received


_LABEL_LINE = re.compile(r"^ - (\S+) = (.*)$")


def _alert_labels(firing: str) -> list[dict[str, str]]:
    """Label sets from Alertmanager's ``pagerduty.default.instances`` text (``Labels:`` then `` - k = v`` lines)."""
    out: list[dict[str, str]] = []
    in_labels = False
    for line in firing.splitlines():
        match = _LABEL_LINE.match(line)
        if line.startswith("Labels:"):
            out.append({})
            in_labels = True
        elif in_labels and match:
            out[-1][match.group(1)] = match.group(2)
        else:
            in_labels = False
    return out


def notices(snapshot: dict[str, Any], runbooks: dict[str, str]) -> list[Notice]:
    """Every alert in the receiver's ``GET /events`` answer, one Notice per alert."""
    out = []
    for item in snapshot.get("pagerduty", []):
        event, at = item["body"], item["received_at"]
        payload = event.get("payload") or {}
        links = {link.get("text"): link.get("href", "") for link in event.get("links", [])}
        for labels in _alert_labels((payload.get("custom_details") or {}).get("firing", "")) or [{}]:
            name = labels.get("alertname", "?")
            runbook = links.get("Runbook") or runbooks.get(name, "")
            out.append(Notice("page", event.get("event_action", "?"), name, payload.get("severity", "?"),
                              payload.get("summary", ""), runbook, labels, at))  # fmt: skip
    for item in snapshot.get("webhooks", []):
        for alert in item["body"].get("alerts", []):
            labels, annotations = alert.get("labels", {}), alert.get("annotations", {})
            out.append(Notice("webhook", alert.get("status", "?"), labels.get("alertname", "?"),
                              labels.get("severity", "?"), annotations.get("summary", ""),
                              annotations.get("runbook_url", ""), labels, item["received_at"]))  # fmt: skip
    return out


@dataclass
class Outcome:
    """What one scenario was expected to fire and what it did."""

    scenario: Scenario
    fired: set[str]
    paged: set[str]
    first_notice: float | None  # seconds from the incident phase to the first notice about the scenario
    first_channel: str | None
    critical: set[str] = field(default_factory=set)
    notices: list[Notice] = field(default_factory=list)

    @property
    def expected(self) -> set[str]:
        return set(self.scenario.expect)

    @property
    def missed(self) -> set[str]:
        return self.expected - self.fired

    @property
    def extra(self) -> set[str]:
        return self.fired - self.expected


def attribute(labels: dict[str, str], identities: list[Identity]) -> list[str]:
    """Names of the scenarios whose label values ``labels`` carries."""
    pairs = set(labels.items())
    return [i.name for i in identities if i.pairs() & pairs]


class GameDay:
    """``with GameDay(scenarios, run_dir) as day: day.play(); day.outcomes()``."""

    def __init__(self, scenarios: list[Scenario], run_dir: Path, config: Config | None = None,
                 prometheus_port: int = 0, alertmanager_port: int = 0,
                 on_phase: Callable[[Scenario, int, Phase], None] | None = None) -> None:  # fmt: skip
        self.scenarios = scenarios
        self.config = config or compressed_config(scenarios=scenarios)
        self.run_dir = run_dir
        self.ports = (prometheus_port, alertmanager_port)
        self.on_phase = on_phase
        self.simulation: Simulation | None = None
        self.stack: Stack | None = None
        self._alerts = {a.name: a for a in alerts(self.config)}

    def __enter__(self) -> GameDay:
        self.simulation = Simulation.of(self.scenarios, self.config, self.on_phase).start()
        try:
            runs = self.simulation.runs
            options = StackOptions(
                run_dir=self.run_dir, vllm_urls=[r.server.base_url for r in runs], local_pager=True,
                prometheus_port=self.ports[0], alertmanager_port=self.ports[1],
                external_sidecars=[r.sidecar_url for r in runs],
            )  # fmt: skip
            self.stack = Stack(self.config, options).up()
            self._settle()
        except BaseException:
            if self.stack is not None:
                self.stack.down()
            self.simulation.stop()
            raise
        self.simulation.begin()
        return self

    def _settle(self) -> None:
        """Wait until nothing but the Watchdog is pending or firing: a fresh Prometheus evaluates
        ``absent(up)`` before its first scrape, and that is no part of any scenario."""
        assert self.stack is not None
        api = PrometheusAPI(self.stack.prometheus_url)
        wait_until(lambda: not [a for a in api.alerts() if a["labels"]["alertname"] != WATCHDOG],
                   SETTLE_TIMEOUT_SECONDS, "alerts to settle before the scenarios begin", 0.5)  # fmt: skip

    def __exit__(self, *exc: object) -> None:
        if self.stack is not None:
            self.stack.down()
        if self.simulation is not None:
            self.simulation.stop()

    @property
    def identities(self) -> list[Identity]:
        assert self.simulation is not None
        return [r.identity() for r in self.simulation.runs]

    def notices(self) -> list[Notice]:
        assert self.stack is not None and self.stack.pager_url
        status, body = http_get(self.stack.pager_url + EVENTS_PATH, timeout=5.0)
        if status != 200:
            return []
        runbooks = {name: runbook_url(self.config, name) for name in self._alerts}
        return notices(json.loads(body), runbooks)

    def play(self, on_notice: Callable[[Notice], None] | None = None, seconds: float | None = None,
             poll: float = 0.5) -> None:  # fmt: skip
        """Run the timelines (or ``seconds``), passing each new notice to ``on_notice``; stops early if a
        service of the stack dies."""
        assert self.simulation is not None and self.stack is not None
        until = self.simulation.seconds + SETTLE_SECONDS if seconds is None else seconds
        seen = 0
        while self.simulation.elapsed() < until:
            time.sleep(poll)
            died = self.stack.exited()
            if died:
                raise RuntimeError(f"the monitoring stack stopped: {died}")
            if on_notice is not None:
                current = self.notices()
                for notice in current[seen:]:
                    on_notice(notice)
                seen = len(current)

    def fired(self) -> list[dict[str, str]]:
        """Label sets of every alert that was firing at any evaluation since the timelines began."""
        assert self.simulation is not None and self.stack is not None
        window = max(int(self.simulation.elapsed()), 1)
        result = PrometheusAPI(self.stack.prometheus_url).query(
            f'max_over_time(ALERTS{{alertstate="firing"}}[{window}s])'
        )
        return [r["metric"] for r in result]

    def unattributed(self) -> set[str]:
        """Alerts that fired for no scenario in particular (the Watchdog, fleet-wide alerts)."""
        return {a["alertname"] for a in self.fired() if not attribute(a, self.identities)}

    def outcomes(self) -> list[Outcome]:
        assert self.simulation is not None
        identities, fired, received = self.identities, self.fired(), self.notices()
        out = []
        for scenario in self.scenarios:
            mine = {a["alertname"] for a in fired if scenario.name in attribute(a, identities)}
            own = [n for n in received if scenario.name in attribute(n.labels, identities)
                   and n.at >= (self.simulation.began or 0.0)]
            paged = {n.alertname for n in own if n.channel == "page" and n.status == "trigger"}
            start = self.simulation.began + (scenario.incident_at or 0.0) if self.simulation.began else 0.0
            first = min((n for n in own if n.status in ("trigger", "firing")), key=lambda n: n.at, default=None)
            critical = {a for a in scenario.expect if a in self._alerts and self._alerts[a].severity == "critical"}
            out.append(Outcome(scenario, mine, paged, None if first is None else first.at - start,
                               None if first is None else first.channel, critical, own))  # fmt: skip
        return out


def precision_recall(outcomes: list[Outcome]) -> tuple[float, float]:
    """Over every (scenario, alert) pair: fired and expected / fired, fired and expected / expected."""
    hits = sum(len(o.fired & o.expected) for o in outcomes)
    fired = sum(len(o.fired) for o in outcomes)
    expected = sum(len(o.expected) for o in outcomes)
    return (hits / fired if fired else 1.0), (hits / expected if expected else 1.0)


def report(outcomes: list[Outcome], unattributed: set[str]) -> str:
    """The game-day table and the overall precision and recall."""

    def names(values: set[str]) -> str:
        return ", ".join(sorted(v.removeprefix("Infersight") for v in values)) or "-"

    rows = [("scenario", "expected", "fired", "missed", "extra", "first notice")]
    for o in outcomes:
        notice = "-" if o.first_notice is None else f"{o.first_notice:.1f} s ({o.first_channel})"
        rows.append((o.scenario.name, names(o.expected), names(o.fired), names(o.missed), names(o.extra), notice))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    precision, recall = precision_recall(outcomes)
    lines.append("")
    lines.append(f"precision {precision:.3f}  recall {recall:.3f}  "
                 f"(over {len(outcomes)} scenarios; fleet-wide alerts fired: {names(unattributed)})")  # fmt: skip
    return "\n".join(lines)
