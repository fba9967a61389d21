"""Where the plugin and the timed scheduler find infersight's configuration."""

from __future__ import annotations

import os

from infersight.config import Config, load_config

CONFIG_ENV = "INFERSIGHT_CONFIG"


def load_plugin_config() -> Config:
    """The file named by ``INFERSIGHT_CONFIG``, else the embedded defaults; raises ConfigError."""
    return load_config(os.environ.get(CONFIG_ENV) or None)
