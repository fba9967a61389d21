"""The ``vllm.stat_logger_plugins`` entry point: a thin adapter from vLLM to the recorder.

vLLM imports this in its API-server process when it builds its stat loggers and
calls ``record()`` once per engine step. All the work is in ``recorder`` (plain
Python, no vLLM import); this class only reads the few facts it needs from the
vLLM config and makes sure nothing it does can stop the engine.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from vllm.v1.metrics.loggers import StatLoggerBase

from infersight.vllm_plugin.channel import channel_dir, channel_path, remove_stale
from infersight.vllm_plugin.exposition import register
from infersight.vllm_plugin.recorder import EngineRecorder, Settings
from infersight.vllm_plugin.settings import load_plugin_config

log = logging.getLogger(__name__)


def token_budget(vllm_config: Any) -> int:
    """Tokens one engine step may schedule: what the scheduler itself uses as its budget."""
    scheduler = vllm_config.scheduler_config
    return getattr(scheduler, "max_num_scheduled_tokens", None) or scheduler.max_num_batched_tokens


def model_name(vllm_config: Any) -> str:
    """The ``model_name`` label vLLM puts on its own series."""
    return str(vllm_config.model_config.served_model_name)


class InfersightStatLogger(StatLoggerBase):
    def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
        self._recorder: EngineRecorder | None = None
        try:
            collector = register()
        except Exception:
            log.exception("infersight plugin: cannot register its metrics, vLLM runs on without them")
            return
        try:
            config = load_plugin_config()
            if not config.plugin.enabled:
                log.info("infersight plugin: disabled by plugin.enabled in the configuration")
                return
            recorder = EngineRecorder(
                Settings.from_config(config), model_name(vllm_config), str(engine_index), token_budget(vllm_config)
            )
            directory = channel_dir(config)
            remove_stale(directory)
            path = channel_path(directory, os.getpid(), engine_index)
        except Exception:
            collector.count_error("config")
            log.exception("infersight plugin: cannot start, vLLM runs on without its metrics")
            return
        collector.add_engine(recorder, path)
        self._recorder = recorder

    def record(
        self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None, engine_idx: int = 0
    ) -> None:
        recorder = self._recorder
        if recorder is not None:
            recorder.record(scheduler_stats, iteration_stats)

    def log_engine_initialized(self) -> None:
        """Nothing to log: the metrics are the output."""
