"""Opt-in ``--scheduler-cls`` subclasses that time the scheduler inside the engine core.

No vLLM metric gives the scheduler's own time: ``--enable-logging-iteration-details``
measures model execution and excludes ``schedule()``. These subclasses wrap
``schedule()`` and ``update_from_output()`` with ``time.perf_counter()`` and publish
the durations over the shared-memory channel the plugin reads. Use the class that
matches the scheduler vLLM would pick: ``TimedAsyncScheduler`` when async scheduling
is on (the GPU default), ``TimedScheduler`` otherwise (the CPU backend forces it off).
"""

from __future__ import annotations

import atexit
import logging
import os
import time
from typing import Any

from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler

from infersight.vllm_plugin import buckets
from infersight.vllm_plugin.channel import ChannelWriter, channel_dir, channel_path
from infersight.vllm_plugin.settings import load_plugin_config

log = logging.getLogger(__name__)

SCHEDULE, UPDATE = 0, 1  # indexes into channel.CALLS


def open_writer(vllm_config: Any) -> ChannelWriter | None:
    """The channel to the API server (this process's parent), or None when timing cannot run."""
    try:
        config = load_plugin_config()
        if not config.plugin.enabled:
            return None
        engine = getattr(vllm_config.parallel_config, "data_parallel_rank", 0) or 0
        writer = ChannelWriter(
            channel_path(channel_dir(config), os.getppid(), engine), buckets.scheduler_buckets(config)
        )
    except Exception:
        log.exception("infersight timed scheduler: cannot open the channel; scheduling runs untimed")
        return None
    atexit.register(writer.remove)
    return writer


def _timed(base: type) -> type:
    class Timed(base):  # type: ignore[misc, valid-type]
        def __init__(self, vllm_config: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(vllm_config, *args, **kwargs)
            self._infersight_channel = open_writer(vllm_config)

        def schedule(self, *args: Any, **kwargs: Any) -> Any:
            return self._infersight_timed(SCHEDULE, super().schedule, args, kwargs)

        def update_from_output(self, *args: Any, **kwargs: Any) -> Any:
            return self._infersight_timed(UPDATE, super().update_from_output, args, kwargs)

        def _infersight_timed(self, call: int, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            channel = self._infersight_channel
            if channel is None:
                return method(*args, **kwargs)
            start = time.perf_counter()
            result = method(*args, **kwargs)
            channel.observe(call, time.perf_counter() - start)
            return result

    Timed.__name__ = Timed.__qualname__ = f"Timed{base.__name__}"
    return Timed


TimedScheduler = _timed(Scheduler)
TimedAsyncScheduler = _timed(AsyncScheduler)
