"""Game day: every scenario against the real stack, as a table of expected / fired / missed / extra alerts,
the time from each incident to its first notification, and the overall precision and recall.

    python3 -m benchmarks.game_day                 # every scenario in scenarios/
    python3 -m benchmarks.game_day --scenario latency-spike --scenario kv-cache-pressure

Runs the machinery of tests/integration/test_alert_quality.py (infersight.simulate.gameday):
one stack, all scenarios side by side, one minute of production time per second.
Needs prometheus and prometheus-alertmanager on PATH.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from alerts.render import alerts
from infersight.config import Config
from infersight.simulate.gameday import GameDay, precision_recall, report
from infersight.simulate.scenario import all_scenarios, find_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", metavar="NAME", help="default: every scenario")
    args = parser.parse_args(argv)
    known = {a.name for a in alerts(Config())}
    scenarios = [find_scenario(n, known) for n in args.scenario] if args.scenario else all_scenarios(known)
    started = time.monotonic()
    tmp = tempfile.TemporaryDirectory(prefix="infersight-game-day-")
    with tmp, GameDay(scenarios, Path(tmp.name) / "run") as day:
        day.play()
        outcomes, unattributed = day.outcomes(), day.unattributed()
    print(report(outcomes, unattributed))
    print(f"\n{len(scenarios)} scenarios played side by side in {time.monotonic() - started:.0f} s "
          f"(time scale: 1 s = 1 min of production)")  # fmt: skip
    precision, recall = precision_recall(outcomes)
    return 0 if precision == recall == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
