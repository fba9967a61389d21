"""Drift test: the committed generated files are exactly what the generators produce now.

Rules, dashboards and deploy configs are committed so they can be reviewed and
used without running Python; this test fails when a generator or the default
config changed and nobody ran ``infersight generate``, or when a file left over
from a removed artifact still sits in a generated directory.
"""

from __future__ import annotations

import difflib
from functools import cache
from pathlib import Path

import pytest

from infersight.config import Config
from infersight.generate import render_all

ROOT = Path(__file__).resolve().parent.parent
GENERATED_DIRS = ("alerts/generated", "dashboards/generated", "deploy")
HINT = "run `python3 -m infersight generate` (or `infersight generate`) from the repository root and commit the result"


@cache
def rendered() -> dict[str, str]:
    return render_all(Config(), ROOT)


def _diff(committed: str, fresh: str, rel: str, limit: int = 30) -> str:
    lines = difflib.unified_diff(
        committed.splitlines(), fresh.splitlines(), f"committed/{rel}", f"generated/{rel}", lineterm=""
    )
    return "\n".join(list(lines)[:limit])


@pytest.mark.parametrize("rel", sorted(rendered()))
def test_committed_file_matches_the_generator(rel: str) -> None:
    path = ROOT / rel
    assert path.is_file(), f"{rel} is missing: {HINT}"
    committed = path.read_text(encoding="utf-8")
    fresh = rendered()[rel]
    assert committed == fresh, f"{rel} differs from a fresh render: {HINT}\n{_diff(committed, fresh, rel)}"


def test_no_stale_files_in_generated_directories() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for directory in GENERATED_DIRS
        for path in sorted((ROOT / directory).rglob("*"))
        if path.is_file() and str(path.relative_to(ROOT)) not in rendered()
    ]
    assert stale == [], f"files no generator writes (remove them, or add their renderer to the table): {stale}"
