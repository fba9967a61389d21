"""Session-wide fixtures for tests that run real components.

``vllm_pool`` owns the one vLLM server a session may run (request one with
``vllm_pool.get(extra_args, env)``; ``vllm_server`` is the shared default).
Missing dependencies skip with the command that installs them, or fail when
``INFERSIGHT_REQUIRE_INTEGRATION=1``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infersight.stack import ALERTMANAGER_BINARIES, PROMETHEUS_BINARIES
from infersight.testing.pagerduty import LocalPager
from tests.harness.tiny_model import TinyModel, tiny_model
from tests.harness.vllm_env import require_binary, require_vllm
from tests.harness.vllm_pool import VLLMPool
from tests.harness.vllm_server import VLLMServer


@pytest.fixture(scope="session")
def tiny_llama() -> TinyModel:
    python = require_vllm()
    return tiny_model(python=python)


@pytest.fixture(scope="session")
def vllm_pool(tiny_llama: TinyModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMPool]:
    pool = VLLMPool(tiny_llama, tmp_path_factory.mktemp("vllm-logs"))
    yield pool
    pool.close()


@pytest.fixture
def vllm_server(vllm_pool: VLLMPool) -> VLLMServer:
    """The shared default server (``--max-num-seqs 16``)."""
    return vllm_pool.get()


@pytest.fixture(scope="session")
def monitoring_binaries() -> None:
    """Prometheus and Alertmanager must be on PATH."""
    require_binary(*PROMETHEUS_BINARIES)
    require_binary(*ALERTMANAGER_BINARIES)


@pytest.fixture
def local_pager() -> Iterator[LocalPager]:
    with LocalPager() as pager:
        yield pager
