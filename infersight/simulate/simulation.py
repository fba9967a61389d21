"""Scenarios played side by side, each with its own vLLM server, GPU, sidecar and business traffic.

Every scenario gets what a serving pod has: a vLLM ``/metrics`` (the synthetic
engine), one GPU (the fake NVML), an infersight sidecar polling both, and an
application posting business events to that sidecar. Its model name, target
name, domain and compliance rule are the scenario's name, and its addresses and
GPU UUID are its own, so every alert can be traced back to one scenario.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from exporters.collectors.gpu import GpuCollector
from exporters.server import Sidecar
from infersight.client import EventClient
from infersight.config import Config, Target
from infersight.simulate.engine import Accrual, EngineModel
from infersight.simulate.exposition import CONTENT_TYPE
from infersight.simulate.scenario import GpuState, Phase, Scenario
from infersight.testing.fake_nvml import GIB, FakeGpu, FakeNVML

log = logging.getLogger(__name__)

TICK_SECONDS = 0.25
MIB = 1024**2
VLLM_PID = 4000  # the engine's PID on the GPU; a restart gets the next one
_UUID_NAMESPACE = uuid.UUID("6f1d2a52-7d0c-4f43-9a3e-5b1f3c9e2a10")


def gpu_uuid(scenario: str) -> str:
    return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, scenario)}"


class MetricsServer:
    """Serves one engine's page on a fixed port; ``stop()`` and ``start()`` again make a crash and a restart."""

    def __init__(self, engine: EngineModel, lock: threading.Lock, host: str, port: int) -> None:
        self.engine, self.lock, self.host, self.port = engine, lock, host, port
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        handler = type("Handler", (_MetricsHandler,), {"owner": self})
        self._server = _QuietServer((self.host, self.port), handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, args=(0.05,), name=f"vllm-{self.engine.model_name}",
                         daemon=True).start()  # fmt: skip

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def page(self) -> bytes:
        with self.lock:
            return self.engine.render().encode()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A scraper that gave up mid-answer is routine, not a traceback."""


class _MetricsHandler(BaseHTTPRequestHandler):
    owner: MetricsServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        """Quiet: Prometheus and the sidecar scrape every second."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        status, body, kind = (200, self.owner.page(), CONTENT_TYPE) if path == "/metrics" else (
            200 if path == "/health" else 404, b"", "text/plain")
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@dataclass
class Identity:
    """Label values that belong to one scenario and no other."""

    name: str
    vllm_address: str
    sidecar_address: str
    uuid: str

    def pairs(self) -> set[tuple[str, str]]:
        return {("model_name", self.name), ("target", self.name), ("domain", self.name), ("rule", self.name),
                ("uuid", self.uuid), ("instance", self.vllm_address), ("instance", self.sidecar_address)}  # fmt: skip


class ScenarioRun:
    """One scenario's pod: engine + server, fake GPU + sidecar, business event client."""

    def __init__(self, scenario: Scenario, config: Config, host: str = "127.0.0.1", vllm_port: int = 0,
                 business_url: str | None = None, ingest_token: str | None = None) -> None:  # fmt: skip
        self.scenario = scenario
        self.lock = threading.Lock()
        self.engine = EngineModel(
            scenario.name, warmup_requests=scenario.warmup_requests, warmup_slowdown=scenario.warmup_slowdown,
            plugin_config=config if scenario.plugin else None,
        )
        self.server = MetricsServer(self.engine, self.lock, host, vllm_port)
        self.server.start()
        self.nvml = FakeNVML([FakeGpu(uuid=gpu_uuid(scenario.name))])
        sidecar_config = config.model_copy(update={
            "vllm": config.vllm.model_copy(update={"targets": [Target(name=scenario.name, url=self.metrics_url)]}),
            "exporter": config.exporter.model_copy(update={"port": 0, "listen_address": "127.0.0.1"}),
        })  # fmt: skip
        GpuCollector.nvml_module = self.nvml  # read by the GPU collector the sidecar builds from config
        try:
            self.sidecar = Sidecar(sidecar_config)
        finally:
            GpuCollector.nvml_module = None
        self.business_url = business_url
        self.ingest_token = ingest_token
        self.events: EventClient | None = None
        first = scenario.phases[0]
        self.phase_index = 0  # the first phase plays from the start (begin() announces it)
        self.engine.state = first.vllm
        if first.vllm.down:
            self.server.stop()
        self.pid = VLLM_PID
        self.leaked = 0.0
        self.tokens, self.checks, self.failures = Accrual(), Accrual(), Accrual()

    @property
    def metrics_url(self) -> str:
        return f"{self.server.base_url}/metrics"

    @property
    def sidecar_url(self) -> str:
        return f"http://127.0.0.1:{self.sidecar.port}"

    def identity(self) -> Identity:
        return Identity(self.scenario.name, f"{self.server.host}:{self.server.port}",
                        f"127.0.0.1:{self.sidecar.port}", gpu_uuid(self.scenario.name))  # fmt: skip

    def start(self) -> None:
        self.sidecar.start()
        self.events = EventClient(self.business_url or self.sidecar_url, token=self.ingest_token, flush_interval=1.0)

    def stop(self) -> None:
        if self.events is not None:
            self.events.close(timeout=2.0)
        self.sidecar.stop()
        self.server.stop()

    def step(self, elapsed: float, seconds: float) -> tuple[int, Phase] | None:
        """Play ``seconds`` of the phase at ``elapsed``; returns (index, phase) when a new phase began."""
        index, phase = self.scenario.phase_at(elapsed)
        began = index != self.phase_index
        if began:
            self.phase_index = index
            self._enter(phase)
        if not phase.vllm.down:
            with self.lock:
                self.engine.advance(seconds, phase.vllm)
        self._drive_gpu(phase.gpu, seconds, serving=not phase.vllm.down)
        self._post_business(phase, seconds)
        return (index, phase) if began else None

    def _enter(self, phase: Phase) -> None:
        """Crash, restart or come back: what a phase changes at its start."""
        if phase.vllm.down and self.server.running:
            self.server.stop()
        elif not phase.vllm.down and (phase.vllm.restart or not self.server.running):
            with self.lock:
                self.engine.restart()
            self.pid += 1
            self.leaked = 0.0
            if not self.server.running:
                self.server.start()

    def _drive_gpu(self, state: GpuState, seconds: float, serving: bool) -> None:
        gpu = self.nvml.gpus[0]
        mean, jitter = state.utilization_percent, state.jitter_percent
        period = gpu.sample_period_s
        gpu.utilization.fn = lambda t: min(100.0, max(0.0, mean + jitter * (1 if round(t / period) % 2 else -1)))
        gpu.dram_bandwidth.value = state.dram_bandwidth_percent
        self.leaked += state.leak_mib_per_second * MIB * seconds
        gpu.processes.clear()
        if serving:
            gpu.set_process(self.pid, "vllm", round(state.process_memory_gib * GIB + self.leaked))
        self.nvml.advance(max(0.0, time.time() - self.nvml.time()))  # the driver's clock is the wall clock

    def _post_business(self, phase: Phase, seconds: float) -> None:
        b, name = phase.business, self.scenario.name
        assert self.events is not None
        total = self.tokens.take(b.domain_tokens_per_second * seconds)
        if total:
            self.events.domain_tokens(name, round(total * b.domain_accuracy), total)
        checks = self.checks.take(b.compliance_checks_per_second * seconds)
        failed = self.failures.take(checks * (1 - b.compliance_pass_rate))  # of the checks made, never more
        for i in range(checks):
            self.events.compliance(name, passed=i >= failed)


PhaseCallback = Callable[[Scenario, int, Phase], None]


class Simulation:
    """Runs scenario pods and one clock for all of them; the timelines start at ``begin()``."""

    def __init__(self, runs: list[ScenarioRun], on_phase: PhaseCallback | None = None) -> None:
        self.runs = runs
        self.on_phase = on_phase
        self.began: float | None = None  # time.time() when the timelines started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="simulation", daemon=True)

    @classmethod
    def of(cls, scenarios: list[Scenario], config: Config, on_phase: PhaseCallback | None = None) -> Simulation:
        return cls([ScenarioRun(s, config) for s in scenarios], on_phase)

    def start(self) -> Simulation:
        for run in self.runs:
            run.start()
        self._thread.start()
        return self

    def begin(self) -> None:
        self.began = time.time()
        if self.on_phase is not None:
            for run in self.runs:
                self.on_phase(run.scenario, 0, run.scenario.phases[0])

    def elapsed(self) -> float:
        return 0.0 if self.began is None else time.time() - self.began

    @property
    def seconds(self) -> float:
        return max(run.scenario.seconds for run in self.runs)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        for run in self.runs:
            run.stop()

    def __enter__(self) -> Simulation:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(TICK_SECONDS):
            now = time.monotonic()
            seconds, last = now - last, now
            elapsed = self.elapsed()
            for run in self.runs:
                try:
                    began = run.step(elapsed, seconds)
                except Exception:  # one scenario's bug must not freeze the others
                    log.exception("simulation: scenario %s failed a step", run.scenario.name)
                    continue
                if began and self.on_phase is not None and self.began is not None:
                    self.on_phase(run.scenario, *began)
