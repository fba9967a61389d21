"""``infersight simulate``: serve synthetic vLLM servers, GPUs and business traffic until Ctrl-C.

For pointing a Prometheus of your own at something that behaves like a sick
replica: each scenario gets a vLLM ``/metrics`` and a sidecar (GPU on the fake
NVML, vLLM collector, business ingest). The timeline plays once and its last
phase holds until stopped. Business events go to the scenario's own sidecar, or
to ``--business-url`` (an existing sidecar, with its ingest token).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from alerts.render import alerts
from infersight.config import ConfigError, load_config
from infersight.simulate.scenario import Phase, Scenario, find_scenario
from infersight.simulate.simulation import ScenarioRun, Simulation


def add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", action="append", metavar="NAME", default=None,
                        help="scenario name (scenarios/NAME.yaml) or file; repeatable (default: steady)")  # fmt: skip
    parser.add_argument("--host", default="127.0.0.1", help="address the vLLM pages listen on (default: %(default)s)")
    parser.add_argument("--vllm-port", type=int, default=0,
                        help="port of the (single) scenario's vLLM page; 0 picks a free one (default)")
    parser.add_argument("--business-url", default=None, help="post business events to this sidecar instead")
    parser.add_argument("--ingest-token-file", type=Path, default=None, help="bearer token for --business-url")


def _phase_line(scenario: Scenario, index: int, phase: Phase) -> None:
    print(f"{scenario.name}: phase {index + 1}/{len(scenario.phases)} {phase.name} ({phase.seconds:g} s)", flush=True)


def run_simulate(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
        known = {a.name for a in alerts(config)}
        scenarios = [find_scenario(name, known) for name in (args.scenario or ["steady"])]
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.vllm_port and len(scenarios) > 1:
        print("infersight simulate: --vllm-port needs a single --scenario", file=sys.stderr)
        return 2
    token = args.ingest_token_file.read_text(encoding="utf-8").strip() if args.ingest_token_file else None
    try:
        runs = [ScenarioRun(s, config, args.host, args.vllm_port, args.business_url, token) for s in scenarios]
    except OSError as exc:
        print(f"infersight simulate: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with Simulation(runs, _phase_line) as simulation:
        for run in runs:
            print(f"{run.scenario.name}: vLLM {run.metrics_url}  sidecar {run.sidecar_url}/metrics  "
                  f"GPU {run.identity().uuid}", flush=True)  # fmt: skip
        simulation.begin()
        stop.wait()
    print("simulation stopped", flush=True)
    return 0
