"""Runbooks: one page per alert, every link from an alert lands on a heading, every page usable.

An on-call engineer reaches a page from the ``runbook_url`` in the incident, so a
missing page or a broken anchor costs minutes at the worst moment. Pages quote the
defaults of the config fields they mention; those quotes are checked against the
config, and their PromQL against promtool.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from alerts.render import rule_groups
from infersight.config import Config
from tests.harness.promql import promql_blocks
from tests.harness.promtool import assert_ok, promtool, write_yaml

REPO = Path(__file__).resolve().parents[1]
RUNBOOKS = REPO / "runbooks"
INDEX = RUNBOOKS / "README.md"
SECTIONS = ["Meaning", "Impact", "Diagnosis", "Mitigation", "Escalation"]
CONFIG = Config()
ALERTS = {r["alert"]: r for g in rule_groups(CONFIG) for r in g["rules"] if "alert" in r}
PAGES = sorted(p for p in RUNBOOKS.glob("*.md") if p != INDEX)


def headings(markdown: str) -> list[tuple[int, str]]:
    """(level, text) of every ATX heading outside fenced code blocks (which may nest: ```` around ```)."""
    out, fence = [], ""
    for line in markdown.splitlines():
        stripped = line.strip()
        marker = re.match(r"(`{3,}|~{3,})", stripped)
        if marker:
            run = marker.group(1)
            if not fence:
                fence = run
            elif run[0] == fence[0] and len(run) >= len(fence) and stripped == run:
                fence = ""
            continue
        heading = re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not fence and heading:
            out.append((len(heading.group(1)), heading.group(2)))
    return out


def github_anchors(markdown: str) -> set[str]:
    """Anchors GitHub generates: lowercase, punctuation dropped, spaces to '-', repeats get -1, -2 ..."""
    seen: dict[str, int] = {}
    anchors = set()
    for _, text in headings(markdown):
        text = re.sub(r"`([^`]*)`", r"\1", text)
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def sections(markdown: str) -> dict[str, str]:
    """Body text under each level-2 heading (fences included), keyed by heading."""
    parts = re.split(r"^## +(.+?)\s*$", markdown, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_github_anchor_rules() -> None:
    page = "# InfersightP99LatencyWarning\n## What's `up`?\n## A & B\n## Meaning\n## Meaning\n```\n# not a title\n```\n"
    assert github_anchors(page) == {"infersightp99latencywarning", "whats-up", "a--b", "meaning", "meaning-1"}


def test_every_alert_has_a_page_and_every_page_an_alert() -> None:
    assert ALERTS, "no alerts rendered"
    pages = {p.stem for p in PAGES}
    assert not set(ALERTS) - pages, f"alerts without a runbook page: {sorted(set(ALERTS) - pages)}"
    assert not pages - set(ALERTS), f"orphan pages (no such alert): {sorted(pages - set(ALERTS))}"


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_page_has_title_and_the_five_sections(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    found = headings(text)
    assert found[0] == (1, page.stem), f"{page.name} must open with '# {page.stem}'"
    assert [t for level, t in found if level == 1] == [page.stem], "one title only"
    assert [t for level, t in found if level == 2] == SECTIONS
    body = sections(text)
    for name in SECTIONS:
        assert body[name].strip(), f"{page.name}: section {name} is empty"
    assert "```" in body["Diagnosis"], f"{page.name}: Diagnosis needs the queries or commands to run"


@pytest.mark.parametrize("alert", sorted(ALERTS))
def test_runbook_url_resolves_to_a_heading(alert: str) -> None:
    url = ALERTS[alert]["annotations"]["runbook_url"]
    base = CONFIG.urls.runbook_base.rstrip("/") + "/"
    assert url.startswith(base), f"{url} is not under urls.runbook_base"
    parts = urlsplit(url)
    page = RUNBOOKS / url[len(base) :].split("#", 1)[0]
    assert page.is_file(), f"{url}: no {page.relative_to(REPO)}"
    assert parts.fragment, f"{url}: no anchor"
    assert parts.fragment in github_anchors(page.read_text(encoding="utf-8")), f"{url}: no such heading"


def test_links_between_pages_resolve() -> None:
    broken = []
    for page in [*PAGES, INDEX]:
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if not (page.parent / target).is_file():
                broken.append(f"{page.name} -> {target}")
    assert not broken, f"broken links: {broken}"


def test_index_lists_every_alert_with_its_severity() -> None:
    rows = re.findall(r"^\| \[(\w+)\]\((\w+)\.md\) \| (\w+) \|", INDEX.read_text(encoding="utf-8"), re.MULTILINE)
    listed = [name for name, _, _ in rows]
    assert not set(ALERTS) - set(listed), f"alerts missing from the runbook index: {sorted(set(ALERTS) - set(listed))}"
    assert not set(listed) - set(ALERTS), f"index rows for no alert: {sorted(set(listed) - set(ALERTS))}"
    assert len(listed) == len(set(listed)), "an alert listed twice"
    for name, target, severity in rows:
        assert target == name
        assert severity == ALERTS[name]["labels"]["severity"], f"{name}: index says {severity}"


_DEFAULT = re.compile(r"default\s+`?([^\s,`]+)`?[^,()]*,\s*`([a-z_]+(?:\.[a-z_]+|\[[0-9]+\])+)`")


def _lookup(data: Any, path: str) -> Any:
    for key in re.findall(r"[a-z_]+|\[[0-9]+\]", path):
        data = data[int(key[1:-1])] if key.startswith("[") else data[key]
    return data


def _same(quoted: str, value: Any) -> bool:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(quoted) == float(value)
        except ValueError:
            return False
    return quoted == str(value)


def test_quoted_defaults_match_the_config() -> None:
    """"the configured threshold (default X, `thresholds.x`)" stays true when a default changes."""
    data = CONFIG.model_dump(mode="json")
    quotes = [(p.name, q, path) for p in PAGES for q, path in _DEFAULT.findall(p.read_text(encoding="utf-8"))]
    assert len(quotes) >= len(PAGES), "expected the pages to quote their thresholds' defaults"
    wrong = []
    for page, quoted, path in quotes:
        try:
            value = _lookup(data, path)
        except (KeyError, IndexError):
            wrong.append(f"{page}: `{path}` is not a config field")
            continue
        if not _same(quoted, value):
            wrong.append(f"{page}: says default {quoted} for `{path}`, the config has {value!r}")
    assert not wrong, "\n".join(wrong)


def test_runbook_promql_is_valid(tmp_path: Path) -> None:
    """Every ```promql block parses in Prometheus 2.42 (checked as a recording rule by promtool)."""
    queries = [(p.name, q) for p in PAGES for q in promql_blocks(p)]
    assert queries
    rules = [{"record": f"runbook_query_{i}", "expr": q} for i, (_, q) in enumerate(queries)]
    path = write_yaml(tmp_path / "runbook-queries.yaml", {"groups": [{"name": "runbook-queries", "rules": rules}]})
    assert_ok(promtool("check", "rules", path))
