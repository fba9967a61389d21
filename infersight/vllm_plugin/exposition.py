"""The plugin's one prometheus_client collector, registered once per API-server process.

vLLM serves ``prometheus_client.REGISTRY`` on its own ``/metrics``; this collector
joins it and builds every plugin family at scrape time from the engines'
recorders and the timed scheduler's shared-memory channels. A failure while
building is counted and the scrape still succeeds: a broken plugin must not
take vLLM's own metrics down with it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

from infersight import __version__
from infersight.catalog import plugin as catalog
from infersight.vllm_plugin.channel import CALLS, ChannelReader
from infersight.vllm_plugin.recorder import EngineRecorder, new_families

log = logging.getLogger(__name__)

STAGES = ("config", "record", "channel", "collect")


class _Engine:
    """One engine's recorder and the channel its timed scheduler may write."""

    def __init__(self, recorder: EngineRecorder, channel_path: Path) -> None:
        self.recorder = recorder
        self.channel_path = channel_path
        self.reader: ChannelReader | None = None


class PluginCollector:
    def __init__(self) -> None:
        self._engines: dict[str, _Engine] = {}
        self._errors = dict.fromkeys(STAGES, 0)

    def add_engine(self, recorder: EngineRecorder, channel_path: Path) -> None:
        """Start reporting ``recorder``; a new recorder for the same engine replaces the old one.

        vLLM builds its stat loggers after the engine core is up, so the timed
        scheduler's channel normally exists already: attaching now unlinks it at once.
        """
        engine = _Engine(recorder, channel_path)
        self._engines[recorder.labels[1]] = engine
        self._attach(engine)

    def count_error(self, stage: str) -> None:
        self._errors[stage] += 1

    def collect(self) -> Iterator[Any]:
        try:
            families = new_families()
            for engine in self._engines.values():
                engine.recorder.add_samples(families)
                families[catalog.PLUGIN_INFO.name].add_metric([*engine.recorder.labels, __version__], 1)
                self._add_channel(engine, families[catalog.SCHEDULER_CALL.name])
        except Exception:
            if not self._errors["collect"]:
                log.exception("infersight plugin: building the metrics failed; counting further failures silently")
            self._errors["collect"] += 1
            families = new_families()
        errors = families[catalog.PLUGIN_ERRORS.name]
        record_errors = sum(e.recorder.errors for e in self._engines.values())
        for stage in STAGES:
            errors.add_metric([stage], self._errors[stage] + (record_errors if stage == "record" else 0))
        yield from families.values()

    def _attach(self, engine: _Engine) -> None:
        """Map the engine's channel once its writer exists, or exists anew (a restarted engine core)."""
        if engine.reader is not None and not engine.channel_path.exists():
            return
        try:
            engine.reader = ChannelReader.attach(engine.channel_path) or engine.reader
        except (OSError, ValueError):
            if not self._errors["channel"]:
                log.exception("infersight plugin: cannot read the scheduler channel %s", engine.channel_path)
            self._errors["channel"] += 1

    def _add_channel(self, engine: _Engine, family: Any) -> None:
        self._attach(engine)
        if engine.reader is None:
            return
        for index, call in enumerate(CALLS):
            buckets, total = engine.reader.histogram(index)
            family.add_metric([*engine.recorder.labels, call], buckets, total)


COLLECTOR = PluginCollector()
_registered: set[int] = set()


def register(registry: CollectorRegistry = REGISTRY) -> PluginCollector:
    """Register the process-wide collector with ``registry`` (idempotent)."""
    if id(registry) not in _registered:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            log.warning(
                "infersight plugin: vLLM runs several API servers (PROMETHEUS_MULTIPROC_DIR is set); "
                "its /metrics then serves only multiprocess files, so the plugin's metrics are not exposed"
            )
        registry.register(COLLECTOR)
        _registered.add(id(registry))
    return COLLECTOR
