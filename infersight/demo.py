"""``infersight demo``: the whole bundle on a laptop with no GPU, no vLLM and no Docker.

It starts the simulator (synthetic vLLM servers, fake GPUs, business traffic) and
the native monitoring stack (Prometheus and Alertmanager from local binaries, the
generated rules, a local PagerDuty receiver), plays a few game-day scenarios side
by side, prints where to look, a line per phase, and every page or warning with
its runbook link as it arrives, then the game-day table. Ctrl-C, or the end of
the timeline, stops every process it started.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
import time
from pathlib import Path

from alerts.render import alerts
from infersight.config import Config, ConfigError
from infersight.deploy import ALERTMANAGER_PORT, PROMETHEUS_PORT
from infersight.process import NotReadyError
from infersight.simulate.gameday import SETTLE_SECONDS, GameDay, Notice, attribute, report
from infersight.simulate.scenario import Phase, Scenario, find_scenario
from infersight.stack import ALERTMANAGER_BINARIES, PROMETHEUS_BINARIES, StackError, default_run_dir

DEFAULT_SCENARIOS = ("latency-spike", "kv-cache-pressure", "compliance-failures", "crash-restart")
INSTALL = "apt-get install -y --no-install-recommends prometheus prometheus-alertmanager"


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", action="append", metavar="NAME",
                        help=f"scenario name (scenarios/NAME.yaml) or file; repeatable "
                        f"(default: {', '.join(DEFAULT_SCENARIOS)})")  # fmt: skip
    parser.add_argument("--duration", type=float, default=None,
                        help="stop after this many seconds (default: the longest timeline + settling time)")
    parser.add_argument("--dir", type=Path, default=None,
                        help=f"run directory for configs, data and logs (default: {default_run_dir().parent / 'demo'})")
    parser.add_argument("--prometheus-port", type=int, default=PROMETHEUS_PORT, help="0 picks a free port")
    parser.add_argument("--alertmanager-port", type=int, default=ALERTMANAGER_PORT, help="0 picks a free port")


def missing_binaries() -> list[str]:
    return [names[0] for names, _ in (PROMETHEUS_BINARIES, ALERTMANAGER_BINARIES)
            if not any(shutil.which(n) for n in names)]  # fmt: skip


class Printer:
    """Progress and notices, each line stamped with the seconds since the timelines began."""

    def __init__(self, total: float) -> None:
        self.total = total
        self.began = time.monotonic()
        self.day: GameDay | None = None

    def _stamp(self) -> str:
        return f"[{time.monotonic() - self.began:5.0f}s/{self.total:.0f}s]"

    def phase(self, scenario: Scenario, index: int, phase: Phase) -> None:
        if index == 0:
            self.began = time.monotonic()
        print(f"{self._stamp()} {scenario.name:<22} phase {index + 1}/{len(scenario.phases)}: {phase.name} "
              f"({phase.seconds:g} s)", flush=True)  # fmt: skip

    def notice(self, notice: Notice) -> None:
        assert self.day is not None
        owners = ", ".join(attribute(notice.labels, self.day.identities)) or "fleet"
        kind = "PAGE" if notice.channel == "page" else "notice"
        print(f"{self._stamp()} {kind} {notice.status.upper()} [{notice.severity}] {notice.alertname} ({owners}): "
              f"{notice.summary}\n{'':14}runbook: {notice.runbook_url}", flush=True)  # fmt: skip


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def run_demo(args: argparse.Namespace) -> int:
    missing = missing_binaries()
    if missing:
        print(f"infersight demo needs {' and '.join(missing)} on PATH; install them with:\n  {INSTALL}",
              file=sys.stderr)  # fmt: skip
        return 1
    known = {a.name for a in alerts(Config())}
    try:
        scenarios = [find_scenario(name, known) for name in (args.scenario or DEFAULT_SCENARIOS)]
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    run_dir = (args.dir or default_run_dir().parent / "demo").expanduser().resolve()
    total = args.duration or max(s.seconds for s in scenarios) + SETTLE_SECONDS
    printer = Printer(total)
    logging.getLogger("exporters").setLevel(logging.ERROR)  # the simulated pods' sidecars: noise on a demo screen
    signal.signal(signal.SIGTERM, _interrupt)
    print("infersight demo: starting the simulator and the monitoring stack ...", flush=True)
    try:
        with GameDay(scenarios, run_dir, prometheus_port=args.prometheus_port,
                     alertmanager_port=args.alertmanager_port, on_phase=printer.phase) as day:  # fmt: skip
            printer.day = day
            _print_where(day)
            day.play(on_notice=printer.notice, seconds=total)
            print("\n" + report(day.outcomes(), day.unattributed()), flush=True)
    except KeyboardInterrupt:
        print("\ninterrupted: everything stopped", flush=True)
        return 130
    except (StackError, NotReadyError, OSError, RuntimeError) as exc:
        print(f"infersight demo: {exc}", file=sys.stderr)
        return 1
    print("demo finished: everything stopped", flush=True)
    return 0


def _print_where(day: GameDay) -> None:
    assert day.stack is not None and day.simulation is not None
    stack = day.stack
    print(f"  Prometheus        {stack.prometheus_url}/alerts  (rules, targets, graphs)")
    print(f"  Alertmanager API  {stack.alertmanager_url}/api/v2/alerts")
    print(f"  PagerDuty log     {stack.run_dir / 'logs' / 'local-pager.log'}  (pages as the receiver got them)")
    for run in day.simulation.runs:
        print(f"  {run.scenario.name:<22} vLLM {run.metrics_url}  sidecar {run.sidecar_url}/metrics")
    print("Ctrl-C stops everything.", flush=True)
