"""Alert quality, scenario by scenario, against real Prometheus and Alertmanager.

Every scenario in ``scenarios/`` plays at once in one stack (1 s scrape and
evaluation, every window and `for` scaled down), each on its own vLLM server,
sidecar, GPU, model name, domain and compliance rule, so every alert is traced
to exactly one scenario. Asserted: the set of alerts each scenario fired (from
Prometheus' ALERTS) is exactly its expected set, the pages it caused (from the
local PagerDuty receiver) are exactly its expected critical alerts, and nothing
fires fleet-wide but the Watchdog. Timings are not asserted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from alerts.render import alerts
from infersight.config import Config
from infersight.simulate.gameday import WATCHDOG, GameDay, Outcome, report
from infersight.simulate.scenario import all_scenarios

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("monitoring_binaries")]

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = all_scenarios({a.name for a in alerts(Config())})


class Played:
    def __init__(self, outcomes: list[Outcome], unattributed: set[str]) -> None:
        self.outcomes = {o.scenario.name: o for o in outcomes}
        self.unattributed = unattributed
        self.table = report(outcomes, unattributed)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Played]:
    with GameDay(SCENARIOS, tmp_path_factory.mktemp("game-day") / "run") as day:
        day.play()
        result = Played(day.outcomes(), day.unattributed())
    print("\n" + result.table)
    yield result


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_scenario_fires_exactly_its_expected_alerts(played: Played, name: str) -> None:
    outcome = played.outcomes[name]
    assert outcome.fired == outcome.expected, f"missed {outcome.missed}, extra {outcome.extra}\n{played.table}"
    assert outcome.paged == outcome.critical, f"paged {outcome.paged}\n{played.table}"


def test_restart_and_warmup_page_nobody_and_fire_nothing(played: Played) -> None:
    for name in ("crash-restart", "warmup-after-restart", "steady"):
        outcome = played.outcomes[name]
        assert not outcome.expected, f"{name} must expect nothing"
        assert outcome.paged == set() and outcome.first_notice is None, played.table


def test_nothing_fires_fleet_wide_but_the_watchdog(played: Played) -> None:
    assert played.unattributed == {WATCHDOG}, played.table


def test_every_incident_notifies_someone(played: Played) -> None:
    """Recall through the receiver, not only Prometheus: each expected alert reached the pager or webhook."""
    for name, outcome in played.outcomes.items():
        if outcome.expected:
            assert outcome.first_notice is not None, f"{name}: no notification\n{played.table}"


def test_pages_carry_the_runbook_of_their_alert(played: Played) -> None:
    pages = [n for o in played.outcomes.values() for n in o.notices if n.channel == "page" and n.status == "trigger"]
    assert pages, f"no page at all: the paging path is untested\n{played.table}"
    config = Config()
    for page in pages:
        assert page.runbook_url.startswith(config.urls.runbook_base), page
        assert (REPO / "runbooks" / f"{page.alertname}.md").is_file(), page
