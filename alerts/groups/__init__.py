"""The rule-group table: one module per area, each a ``groups(config)`` function."""

from __future__ import annotations

import importlib

from alerts.spec import Group
from infersight.config import Config

GROUP_MODULES: tuple[str, ...] = (
    "alerts.groups.vllm",
    "alerts.groups.meta",
    "alerts.groups.business",
    "alerts.groups.slo",
    "alerts.groups.plugin",
    "alerts.groups.gpu",
)


def all_groups(config: Config) -> list[Group]:
    groups: list[Group] = []
    for module in GROUP_MODULES:
        groups.extend(importlib.import_module(module).groups(config))
    return groups
