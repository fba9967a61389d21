"""The registration table: one line per collector, enabled by ``exporter.collectors`` in the config.

Entries are import paths so a disabled collector's dependencies (the NVIDIA
driver bindings, say) are never imported.
"""

from __future__ import annotations

import importlib

from exporters.collector import Collector
from infersight.config import Config

COLLECTORS: dict[str, str] = {
    "vllm": "exporters.collectors.vllm:VllmCollector",
    "business": "exporters.collectors.business:BusinessCollector",
    "gpu": "exporters.collectors.gpu:GpuCollector",
}


def build_collectors(config: Config) -> list[Collector]:
    """Instantiate every collector the config enables, in table order."""
    enabled = config.exporter.collectors.model_dump()
    built = []
    for name, path in COLLECTORS.items():
        if not enabled.get(name, False):
            continue
        module_name, class_name = path.split(":")
        cls = getattr(importlib.import_module(module_name), class_name)
        built.append(cls(config))
    return built
