"""At most one vLLM server at a time for a whole test session, reused while the spec matches.

A start costs 20-60 s and ~2.4 GB on a small machine, so tests share the server:
asking for the same extra flags and environment returns the running one; asking
for different ones stops it and starts the new one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.harness.tiny_model import TinyModel
from tests.harness.vllm_server import VLLMServer, VLLMSpec

# The shared default: a 16-sequence batch limit, so overload builds a real waiting queue.
DEFAULT_ARGS = ("--max-num-seqs", "16")


class VLLMPool:
    def __init__(self, model: TinyModel, log_dir: Path) -> None:
        self.model = model
        self.log_dir = log_dir
        self.current: VLLMServer | None = None

    def get(self, extra_args: Iterable[str] = DEFAULT_ARGS, env: Mapping[str, str] | None = None) -> VLLMServer:
        """A healthy server with exactly these extra flags and environment."""
        spec = VLLMSpec.of(extra_args, env)
        if self.current is not None and self.current.spec == spec and self.current.running():
            return self.current
        self.close()
        self.current = VLLMServer(self.model, spec, self.log_dir).start()
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None
