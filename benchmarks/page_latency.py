"""Time from overload start to the critical P99 page at the PagerDuty receiver, all components real.

Runs the end-to-end scenario of tests/integration/test_end_to_end.py N times
against one vLLM server (tiny model, CPU), each run with a fresh Prometheus,
Alertmanager and sidecar so no run inherits another's alert state. Prints every
run and the median, and the median's ratio to the floor the configuration sets
(``slo.critical_for`` + ``alerting.group_wait``): what scraping, rule evaluation,
the latency window filling and notification add on top.

    python3 -m benchmarks.page_latency [N]      (from the repository root; N defaults to 3)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from infersight.config import duration_seconds
from tests.harness.slo_scenario import monitored
from tests.harness.tiny_model import tiny_model
from tests.harness.vllm_env import venv_dir, venv_python
from tests.harness.vllm_pool import DEFAULT_ARGS
from tests.harness.vllm_server import VLLMServer, VLLMSpec

PAGE_TIMEOUT_SECONDS = 120.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="?", type=int, default=3, help="how many times to page (default: 3)")
    args = parser.parse_args()
    if not venv_python().exists():
        parser.error(f"no vLLM environment at {venv_dir()}: run tools/setup-vllm.sh")
    with tempfile.TemporaryDirectory(prefix="page-latency-") as tmp:
        root = Path(tmp)
        with VLLMServer(tiny_model(), VLLMSpec.of(DEFAULT_ARGS), root) as server:
            seconds, floor = [], 0.0
            for run in range(1, args.runs + 1):
                with monitored(server, root / f"run-{run}") as m:
                    floor = duration_seconds(m.config.slo.critical_for) + duration_seconds(m.config.alerting.group_wait)
                    page, load = m.overload_until_paged(PAGE_TIMEOUT_SECONDS)
                seconds.append(page.at - load.started)
                print(f"run {run}: page {seconds[-1]:.2f} s after overload start ({load.summary()})", flush=True)
    median = statistics.median(seconds)
    print(f"median over {len(seconds)} runs: {median:.2f} s; configured floor (critical_for + group_wait) "
          f"{floor:.0f} s; ratio {median / floor:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
