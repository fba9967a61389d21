"""Metric names and ``le`` values in PromQL, for checking selectors against real metric names.

A tokenizer plus a little context (inside ``by (...)``? inside ``{...}``? followed
by ``(``?) is enough: strings, ranges and durations are single tokens, label
lists and function calls are told apart by the keyword before the parenthesis,
and Grafana's ``$variables`` are skipped. Anything it cannot tokenize is an
error, never silently ignored.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

KEYWORDS = frozenset({"and", "or", "unless", "offset", "bool", "inf", "nan"})
LABEL_LIST_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
AGGREGATORS = frozenset(
    {"sum", "avg", "count", "min", "max", "group", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values"}
)

_TOKEN = re.compile(
    r"""
      (?P<space>\s+|\#[^\n]*)
    | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
    | (?P<range>\[[^\]]*\])
    | (?P<var>\$\{[^}]*\}|\$\w+)
    | (?P<number>(?:[0-9]+(?:ms|[smhdwy]))+(?![\w:])|0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
    | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=,(){}@])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Selector:
    """A metric selector as written: its name, label matchers (label, op, unquoted value), range,
    and the calls around it, outermost first."""

    name: str
    matchers: tuple[tuple[str, str, str], ...] = ()
    range: str | None = None
    calls: tuple[str, ...] = ()

    @property
    def le(self) -> tuple[str, ...]:
        """The ``le`` values the selector matches exactly."""
        return tuple(v for label, op, v in self.matchers if label == "le" and op in {"=", "!="})

    def matches(self, label: str, op: str, value: str) -> bool:
        return (label, op, value) in self.matchers


def tokens(expr: str) -> list[tuple[str, str]]:
    """(kind, text) pairs without whitespace and comments; raises on anything unknown."""
    out, pos = [], 0
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        if match is None:
            raise ValueError(f"cannot tokenize PromQL at offset {pos}: {expr[pos : pos + 20]!r} in {expr!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            out.append((kind, match.group()))
        pos = match.end()
    return out


def _unquote(text: str) -> str:
    body = text[1:-1]
    return body if text[0] == "`" else re.sub(r"\\(.)", r"\1", body)


def _matchers(toks: list[tuple[str, str]], i: int) -> tuple[list[tuple[str, str, str]], int]:
    """Parse ``{label op "value", ...}`` starting at ``toks[i] == "{"``; return matchers and the index after ``}``."""
    out: list[tuple[str, str, str]] = []
    i += 1
    while i < len(toks) and toks[i][1] != "}":
        label, op, value = toks[i : i + 3] + [("", "")] * (i + 3 - len(toks))
        if label[0] != "ident" or op[1] not in {"=", "!=", "=~", "!~"} or value[0] != "string":
            raise ValueError(f"malformed label matcher: {label[1]} {op[1]} {value[1]}")
        out.append((label[1], op[1], _unquote(value[1])))
        i += 3
        if i < len(toks) and toks[i][1] == ",":
            i += 1
    if i >= len(toks):
        raise ValueError("unterminated label matchers: missing '}'")
    return out, i + 1


def selectors(expr: str) -> list[Selector]:
    """Every metric selector in ``expr``, in order of appearance."""
    toks = tokens(expr)
    out: list[Selector] = []
    stack: list[str] = []  # a call's name, "labels" for by (...) and friends, "group" for bare parentheses
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        following = toks[i + 1][1] if i + 1 < len(toks) else None
        if kind == "ident" and not (stack and stack[-1] == "labels"):
            low = text.lower()
            if following == "(":
                stack.append("labels" if low in LABEL_LIST_KEYWORDS else low)
                i += 2
                continue
            if low not in KEYWORDS | LABEL_LIST_KEYWORDS | AGGREGATORS:
                matchers: list[tuple[str, str, str]] = []
                i += 1
                if following == "{":
                    matchers, i = _matchers(toks, i)
                window = toks[i][1] if i < len(toks) and toks[i][0] == "range" else None
                calls = tuple(c for c in stack if c != "group")
                out.append(Selector(text, tuple(matchers), window, calls))
                continue
        elif text == "{":  # a selector by matchers only: {__name__="..."}
            matchers, i = _matchers(toks, i)
            names = [v for label, op, v in matchers if label == "__name__" and op == "="]
            window = toks[i][1] if i < len(toks) and toks[i][0] == "range" else None
            calls = tuple(c for c in stack if c != "group")
            out.extend(Selector(n, tuple(matchers), window, calls) for n in names)
            continue
        elif text == "(":
            stack.append("group")
        elif text == ")":
            if not stack:
                raise ValueError(f"unbalanced ')' in {expr!r}")
            stack.pop()
        i += 1
    if stack:
        raise ValueError(f"unbalanced '(' in {expr!r}")
    return out


def metric_names(expr: str) -> set[str]:
    return {s.name for s in selectors(expr)}


_FENCE = re.compile(r"^[ \t]*```promql\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)


def promql_blocks(markdown: Path) -> list[str]:
    """The ```` ```promql ```` code blocks of a markdown page (also inside list items), one query each."""
    return [textwrap.dedent(block).strip() for block in _FENCE.findall(markdown.read_text(encoding="utf-8"))]
