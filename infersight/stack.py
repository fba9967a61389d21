"""``infersight stack``: the monitoring stack from local binaries, without Docker.

``up`` renders the rules, prometheus.yml (+ file-SD targets) and alertmanager.yml
into a run directory, starts Prometheus, Alertmanager, the sidecar and (with
``--local-pager``) a local PagerDuty Events v2 + webhook receiver, each in its own
process group, waits until Prometheus has loaded the rules, found Alertmanager and
scraped every target once, and records the PIDs. ``down`` stops every recorded
group (SIGTERM, then SIGKILL). ``status`` reports what runs and what Prometheus sees.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from alerts.render import prometheus_rules_yaml
from infersight.config import Config, Target, dump_config
from infersight.deploy import (
    ALERTMANAGER_PORT,
    ALERTMANAGER_TARGETS,
    PROMETHEUS_PORT,
    SIDECAR_TARGETS,
    VLLM_TARGETS,
    alertmanager_config,
    prometheus_config,
    targets_json,
)
from infersight.process import (
    ManagedProcess,
    find_binary,
    free_port,
    http_ok,
    process_start_time,
    stop_group,
)
from infersight.promapi import PrometheusAPI, PrometheusAPIError
from infersight.testing.pagerduty import ENQUEUE_PATH, EVENTS_PATH, HEALTH_PATH, ROUTING_KEY_LENGTH, WEBHOOK_PATH

STATE_FILE = "state.json"
CONFIG_FILE = "infersight.yaml"
RULES_FILE = "rules/infersight.rules.yaml"
ROUTING_KEY_FILE = "secrets/pagerduty_routing_key"
READY_TIMEOUT_SECONDS = 90.0
PROMETHEUS_BINARIES = (("prometheus",), "prometheus")
ALERTMANAGER_BINARIES = (("prometheus-alertmanager", "alertmanager"), "prometheus-alertmanager")


class StackError(RuntimeError):
    """The stack cannot be started or stopped as asked; the message says why and what to do."""


def default_run_dir() -> Path:
    state_home = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state_home / "infersight" / "stack"


def vllm_target(url: str, index: int) -> Target:
    """A ``--vllm`` argument as a sidecar target: a server's base URL gets ``/metrics`` appended."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise StackError(f"--vllm: expected a URL such as http://127.0.0.1:8000, found {url!r}")
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return Target(name=f"vllm-{index}", url=f"{parts.scheme}://{parts.netloc}{path}")


def _address(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


@dataclass
class StackOptions:
    """How to run the stack. A port of 0 means a free one chosen at start."""

    run_dir: Path = field(default_factory=default_run_dir)
    vllm_urls: list[str] | None = None  # None: the config's vllm.targets
    local_pager: bool = False
    prometheus_port: int = PROMETHEUS_PORT
    alertmanager_port: int = ALERTMANAGER_PORT
    sidecar_port: int | None = None  # None: the config's exporter.port
    pager_port: int = 0
    ready_timeout: float = READY_TIMEOUT_SECONDS
    external_sidecars: list[str] | None = None  # base URLs of running sidecars (the simulator's): none is started


@dataclass
class ServiceRecord:
    """One started service as recorded in the run directory's state file."""

    name: str
    url: str
    pid: int
    start_time: int | None
    log: str


@dataclass
class _Service:
    process: ManagedProcess
    url: str
    ready: Callable[[], bool]


def prometheus_command(binary: str, config_file: Path, data_dir: Path, port: int) -> list[str]:
    return [binary, f"--config.file={config_file}", f"--storage.tsdb.path={data_dir}",
            f"--web.listen-address=127.0.0.1:{port}"]


def alertmanager_command(binary: str, config_file: Path, data_dir: Path, port: int) -> list[str]:
    """An empty ``--cluster.listen-address`` keeps a lone Alertmanager from gossiping on 0.0.0.0:9094
    and waiting for peers."""
    return [binary, f"--config.file={config_file}", f"--storage.path={data_dir}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="]


def _child_env() -> dict[str, str]:
    """The environment for Python children: this checkout (or install) first on the path."""
    root = str(Path(__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{path}" if path else root}


class Stack:
    """Prometheus + Alertmanager + sidecar (+ local pager) for one config, in one run directory.

    Usable from Python (tests, demos) as a context manager: ``with Stack(config, options) as s``.
    """

    def __init__(self, config: Config, options: StackOptions) -> None:
        self.options = options
        self.run_dir = options.run_dir.resolve()
        self.prometheus_bin = find_binary(*PROMETHEUS_BINARIES)
        self.alertmanager_bin = find_binary(*ALERTMANAGER_BINARIES)
        self.ports = {
            "prometheus": options.prometheus_port or free_port(),
            "alertmanager": options.alertmanager_port or free_port(),
            "sidecar": (config.exporter.port if options.sidecar_port is None else options.sidecar_port)
            or free_port(),
        }
        if options.local_pager:
            self.ports["local-pager"] = options.pager_port or free_port()
        self.config = self._effective_config(config)
        self.prometheus_url = f"http://127.0.0.1:{self.ports['prometheus']}"
        self.alertmanager_url = f"http://127.0.0.1:{self.ports['alertmanager']}"
        self.sidecar_url = f"http://{self.config.exporter.listen_address}:{self.ports['sidecar']}"
        self.pager_url = f"http://127.0.0.1:{self.ports['local-pager']}" if options.local_pager else None
        self.services: list[_Service] = []

    # ---- rendering ----

    def _effective_config(self, config: Config) -> Config:
        update: dict[str, object] = {
            "exporter": config.exporter.model_copy(update={"port": self.ports["sidecar"]}),
        }
        if self.options.vllm_urls is not None:
            targets = [vllm_target(url, i) for i, url in enumerate(self.options.vllm_urls)]
            update["vllm"] = config.vllm.model_copy(update={"targets": targets})
        if self.options.local_pager:
            pager = f"http://127.0.0.1:{self.ports['local-pager']}"
            pagerduty = config.alerting.pagerduty.model_copy(
                update={"url": pager + ENQUEUE_PATH, "routing_key_file": str(self.run_dir / ROUTING_KEY_FILE)}
            )
            update["alerting"] = config.alerting.model_copy(
                update={"pagerduty": pagerduty, "warning_webhook_url": pager + WEBHOOK_PATH}
            )
        return config.model_copy(update=update)

    def render(self) -> None:
        """Write every config file into the run directory, and fresh, empty data directories."""
        files = {
            CONFIG_FILE: dump_config(self.config),
            RULES_FILE: prometheus_rules_yaml(self.config),
            "prometheus.yml": prometheus_config(self.config, [RULES_FILE]),
            VLLM_TARGETS: targets_json([_address(t.url) for t in self.config.vllm.targets]),
            SIDECAR_TARGETS: targets_json([_address(u) for u in self.options.external_sidecars or [self.sidecar_url]]),
            ALERTMANAGER_TARGETS: targets_json([_address(self.alertmanager_url)]),
            "alertmanager.yml": alertmanager_config(self.config),
        }
        for rel, text in files.items():
            path = self.run_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if self.options.local_pager:
            key = self.run_dir / ROUTING_KEY_FILE
            key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            key.unlink(missing_ok=True)
            with os.fdopen(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
                out.write(secrets.token_hex(ROUTING_KEY_LENGTH // 2) + "\n")
        for name in ("prometheus", "alertmanager"):
            data = self.run_dir / "data" / name
            shutil.rmtree(data, ignore_errors=True)
            data.mkdir(parents=True)

    # ---- processes ----

    def _process(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> ManagedProcess:
        return ManagedProcess(name, argv, self.run_dir / "logs" / f"{name}.log", env=env, cwd=self.run_dir)

    def _plan(self) -> list[_Service]:
        run, python, env = self.run_dir, sys.executable, _child_env()
        prometheus_api = PrometheusAPI(self.prometheus_url)
        plan = []
        if self.pager_url:
            argv = [python, "-m", "infersight.testing.pagerduty", "--port", str(self.ports["local-pager"])]
            plan.append(_Service(self._process("local-pager", argv, env), self.pager_url + EVENTS_PATH,
                                 lambda: http_ok(self.pager_url + HEALTH_PATH)))
        if self.options.external_sidecars is None:
            argv = [python, "-m", "infersight", "exporter", "-c", str(run / CONFIG_FILE),
                    "--port", str(self.ports["sidecar"])]
            plan.append(_Service(self._process("sidecar", argv, env), self.sidecar_url + "/metrics",
                                 lambda: http_ok(self.sidecar_url + "/healthz")))
        argv = alertmanager_command(self.alertmanager_bin, run / "alertmanager.yml", run / "data" / "alertmanager",
                                    self.ports["alertmanager"])
        plan.append(_Service(self._process("alertmanager", argv), self.alertmanager_url,
                             lambda: http_ok(self.alertmanager_url + "/-/ready")))
        argv = prometheus_command(self.prometheus_bin, run / "prometheus.yml", run / "data" / "prometheus",
                                  self.ports["prometheus"])
        plan.append(_Service(self._process("prometheus", argv), self.prometheus_url,
                             lambda: http_ok(self.prometheus_url + "/-/ready") and prometheus_api.ready_to_alert()))
        return plan

    def up(self) -> Stack:
        """Render, start everything, wait until all of it is ready; on failure stop what started."""
        running = [r.name for r in read_state(self.run_dir) if _alive(r)]
        if running:
            raise StackError(
                f"a stack is already running from {self.run_dir} ({', '.join(running)}); "
                f"stop it first: infersight stack down --dir {self.run_dir}"
            )
        self.render()
        try:
            for service in self._plan():
                service.process.start()
                self.services.append(service)
            write_state(self.run_dir, self.records())
            for service in self.services:
                service.process.wait_ready(service.ready, self.options.ready_timeout, interval=0.2)
        except BaseException:
            self.down()
            raise
        return self

    def records(self) -> list[ServiceRecord]:
        return [
            ServiceRecord(s.process.name, s.url, s.process.pid, s.process.start_time, str(s.process.log_path))
            for s in self.services
        ]

    def exited(self) -> str | None:
        """A line naming a service that has stopped on its own, or None while all run."""
        for service in self.services:
            reason = service.process.exited()
            if reason:
                return f"{service.process.name} {reason}\n{service.process.log_tail()}"
        return None

    def down(self) -> list[str]:
        """Stop every service (last started first); returns the names that would not stop."""
        stuck = [s.process.name for s in reversed(self.services) if not s.process.stop()]
        self.services = []
        if not stuck:
            (self.run_dir / STATE_FILE).unlink(missing_ok=True)
            shutil.rmtree(self.run_dir / "data", ignore_errors=True)
        return stuck

    def __enter__(self) -> Stack:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()


# ---- the state file, for `down` and `status` from another process ----


def write_state(run_dir: Path, records: list[ServiceRecord]) -> None:
    path = run_dir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"services": [asdict(r) for r in records]}, indent=2), encoding="utf-8")
    tmp.replace(path)


def read_state(run_dir: Path) -> list[ServiceRecord]:
    try:
        data = json.loads((run_dir / STATE_FILE).read_text(encoding="utf-8"))
        return [ServiceRecord(**r) for r in data["services"]]
    except FileNotFoundError:
        return []
    except (ValueError, KeyError, TypeError) as exc:
        raise StackError(f"{run_dir / STATE_FILE} is damaged ({exc}); stop the processes by hand") from None


def _alive(record: ServiceRecord) -> bool:
    current = process_start_time(record.pid)
    return current is not None and (record.start_time is None or current == record.start_time)


def stop_recorded(run_dir: Path) -> tuple[list[str], list[str]]:
    """Stop every service recorded in ``run_dir``: (stopped names, names that would not stop)."""
    records = read_state(run_dir)
    stopped, stuck = [], []
    for record in reversed(records):
        (stopped if stop_group(record.pid, record.start_time) else stuck).append(record.name)
    if not stuck:
        (run_dir / STATE_FILE).unlink(missing_ok=True)
        shutil.rmtree(run_dir / "data", ignore_errors=True)
    return stopped, stuck


# ---- the CLI ----


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("up", "down", "status"), help="start, stop or inspect the stack")
    parser.add_argument("--dir", type=Path, default=None,
                        help=f"run directory for configs, data, logs and PIDs (default: {default_run_dir()})")
    parser.add_argument("--vllm", metavar="URL", action="extend", nargs="+", default=None,
                        help="vLLM server(s) to monitor, e.g. http://127.0.0.1:8000 (default: vllm.targets)")
    parser.add_argument("--local-pager", action="store_true",
                        help="run a local PagerDuty Events v2 + webhook receiver and route alerts to it")
    parser.add_argument("--prometheus-port", type=int, default=PROMETHEUS_PORT,
                        help="default: %(default)s; 0 picks a free port")
    parser.add_argument("--alertmanager-port", type=int, default=ALERTMANAGER_PORT,
                        help="default: %(default)s; 0 picks a free port")
    parser.add_argument("--sidecar-port", type=int, default=None,
                        help="default: exporter.port from the config; 0 picks a free port")
    parser.add_argument("--foreground", action="store_true", help="stay attached; Ctrl-C stops everything")
    parser.add_argument("--timeout", type=float, default=READY_TIMEOUT_SECONDS,
                        help="seconds to wait for each service to become ready (default: %(default)s)")


def _print_up(stack: Stack) -> None:
    print(f"infersight stack is up (run directory {stack.run_dir})")
    for record in stack.records():
        print(f"  {record.name:<13} {record.url:<45} pid {record.pid}  log {record.log}")
    for target in stack.config.vllm.targets:
        print(f"  vLLM target   {target.url}")
    if stack.pager_url:
        print(f"  pages are printed to {stack.run_dir / 'logs' / 'local-pager.log'}")
    elif not Path(stack.config.alerting.pagerduty.routing_key_file).exists():
        print(f"  warning: {stack.config.alerting.pagerduty.routing_key_file} does not exist: critical alerts "
              "cannot page until it holds the PagerDuty routing key (or use --local-pager)")


def _foreground(stack: Stack) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print("running in the foreground; Ctrl-C stops everything", flush=True)
    died = None
    while not stop.wait(0.5):
        died = stack.exited()
        if died:
            print(f"stopping the stack: {died}", file=sys.stderr)
            break
    stuck = stack.down()
    print("stack stopped" if not stuck else f"could not stop: {', '.join(stuck)}")
    return 1 if died or stuck else 0


def cmd_up(config: Config, args: argparse.Namespace, run_dir: Path) -> int:
    options = StackOptions(
        run_dir=run_dir, vllm_urls=args.vllm, local_pager=args.local_pager,
        prometheus_port=args.prometheus_port, alertmanager_port=args.alertmanager_port,
        sidecar_port=args.sidecar_port, ready_timeout=args.timeout,
    )
    stack = Stack(config, options).up()
    _print_up(stack)
    if args.foreground:
        return _foreground(stack)
    print(f"stop it with: infersight stack down --dir {stack.run_dir}")
    return 0


def cmd_down(run_dir: Path) -> int:
    stopped, stuck = stop_recorded(run_dir)
    if not stopped and not stuck:
        print(f"no stack recorded in {run_dir}")
    for name in stopped:
        print(f"stopped {name}")
    for name in stuck:
        print(f"could not stop {name}", file=sys.stderr)
    return 1 if stuck else 0


def cmd_status(run_dir: Path) -> int:
    records = read_state(run_dir)
    if not records:
        print(f"no stack recorded in {run_dir}")
        return 1
    healthy = True
    for record in records:
        alive = _alive(record)
        healthy &= alive
        print(f"  {record.name:<13} {'running' if alive else 'STOPPED':<8} pid {record.pid:<8} {record.url}")
    prometheus = next((r for r in records if r.name == "prometheus"), None)
    if prometheus and _alive(prometheus):
        api = PrometheusAPI(prometheus.url)
        try:
            for target in api.targets():
                labels = target["labels"]
                print(f"  target {labels.get('job')}/{labels.get('instance')}: {target['health']}"
                      + (f" ({target['lastError']})" if target.get("lastError") else ""))
            firing = [a["labels"]["alertname"] for a in api.alerts() if a["state"] == "firing"]
            print(f"  firing alerts: {', '.join(sorted(firing)) or 'none'}")
        except PrometheusAPIError as exc:
            print(f"  prometheus API: {exc}")
            healthy = False
    return 0 if healthy else 1


def run_stack_command(args: argparse.Namespace) -> int:
    from infersight.config import load_config

    run_dir = (args.dir or default_run_dir()).expanduser().resolve()
    try:
        if args.action == "up":
            return cmd_up(load_config(args.config), args, run_dir)
        if args.action == "down":
            return cmd_down(run_dir)
        return cmd_status(run_dir)
    except (RuntimeError, OSError) as exc:  # StackError, NotReadyError, MissingBinaryError: no traceback
        print(f"infersight stack {args.action}: {exc}", file=sys.stderr)
        return 1
