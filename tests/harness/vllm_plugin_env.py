"""Make the infersight plugin visible to one vLLM server without touching the shared vLLM venv.

vLLM finds stat-logger plugins through ``importlib.metadata`` entry points. A
directory on ``PYTHONPATH`` holding the ``infersight`` package (a symlink to this
checkout) and a ``.dist-info`` whose ``entry_points.txt`` is written from
pyproject.toml's own ``[project.entry-points]`` table is found by the same
mechanism as ``pip install infersight[vllm]``, but only by the servers started
with that ``PYTHONPATH``. Writing it is idempotent.
"""

from __future__ import annotations

from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from infersight import __version__

REPO = Path(__file__).resolve().parents[2]
PLUGIN_GROUP = "vllm.stat_logger_plugins"


def entry_points_txt(pyproject: Path = REPO / "pyproject.toml") -> str:
    """``entry_points.txt`` for the plugin groups pyproject.toml declares."""
    table = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["entry-points"]
    return "".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items()) + "\n"
        for group, entries in table.items()
    )


def plugin_path(root: Path) -> Path:
    """A ``PYTHONPATH`` entry under ``root`` that exposes the plugin; safe to call again."""
    site = root / "infersight-plugin-site"
    dist = site / f"infersight-{__version__}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: infersight\nVersion: {__version__}\n")
    (dist / "entry_points.txt").write_text(entry_points_txt())
    link = site / "infersight"
    if not link.is_symlink():
        link.symlink_to(REPO / "infersight", target_is_directory=True)
    return site


def plugin_env(root: Path, config_file: Path | None = None) -> dict[str, str]:
    """Environment for a vLLM server that loads the plugin (and reads ``config_file``)."""
    env = {"PYTHONPATH": str(plugin_path(root))}
    if config_file is not None:
        env["INFERSIGHT_CONFIG"] = str(config_file)
    return env
