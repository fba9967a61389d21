"""Helpers every dashboard module uses, so all dashboards share one shape.

A dashboard module exposes ``build(config) -> grafanalib Dashboard``, adds its uid
to ``dashboards.DASHBOARDS``, and builds it from these pieces only:

- ``dashboard(uid, title, description, panels, template_variables)``: the Dashboard,
  panel ids and ``gridPos`` laid out in list order (left to right, 24 columns).
- ``variables(model_from, instance_from)``: the ``datasource``, ``model`` and
  ``instance`` template variables; ``model``/``instance`` list the ``model_name``/
  ``instance`` label values of the catalog metrics given (pick the metric whose
  ``instance`` your panels filter on: vLLM's own series or the sidecar's).
- ``row(title)``, ``timeseries(...)``, ``stat(...)``: the only panel types. Both
  builders take ``(title, description, [(expr, legend), ...], unit)``; the Grafana
  unit id is required (``"s"``, ``"percentunit"``, ``"reqps"``, ``"suffix: tokens"``).
  Thresholds come from ``above(x)`` (higher is worse), ``below(x)`` (lower is
  worse) or ``steps(base, (value, colour), ...)`` called with config values, never
  literals; ``up_mappings()`` labels 0/1 health series.
- ``sel(metric, *matchers)``, ``rate(series, *matchers)``, ``quantile(q, histogram,
  *matchers)``: PromQL from ``infersight.catalog`` metrics (``metric.bucket``,
  ``.count``, ``.sum`` for histogram series). ``rate`` always uses
  ``$__rate_interval``. ``MODEL`` and ``INSTANCE`` are the matchers bound to the
  variables; every selector of a metric with a ``model_name`` label needs ``MODEL``.
- ``render_json(module_name)``: the renderer the generated-artifacts table calls;
  JSON with sorted keys, byte-for-byte deterministic.

Every panel and target points at ``DATASOURCE`` (an object, as current Grafana
stores it; grafanalib's default plain string is legacy). tests/test_dashboards.py
lints every generated dashboard for all of the above.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attr
from grafanalib._gen import DashboardEncoder
from grafanalib.core import (
    Dashboard,
    DashboardLink,
    GridPos,
    Panel,
    RowPanel,
    Stat,
    Target,
    Templating,
    TimeSeries,
)

from infersight.catalog import Metric
from infersight.config import Config

DATASOURCE: dict[str, str] = {"type": "prometheus", "uid": "${datasource}"}
MODEL = 'model_name=~"$model"'
INSTANCE = 'instance=~"$instance"'
TAG = "infersight"
SCHEMA_VERSION = 39  # Grafana 10.4+; the JSON below is written in that model, so no migration runs
GRID_WIDTH = 24

Steps = list[dict[str, Any]]


# --- PromQL -----------------------------------------------------------------


def sel(metric: Metric | str, *matchers: str) -> str:
    """``name{m1,m2}``; ``metric`` is a catalog Metric or a series name derived from one
    (``Metric.bucket``/``.count``/``.sum``)."""
    inner = ",".join(matchers)
    return f"{metric}{{{inner}}}" if inner else str(metric)


def rate(series: Metric | str, *matchers: str) -> str:
    """Per-second rate of a counter (or histogram series) over Grafana's ``$__rate_interval``."""
    return f"rate({sel(series, *matchers)}[$__rate_interval])"


def quantile(q: float, histogram: Metric, *matchers: str, by: Sequence[str] = ("model_name",)) -> str:
    """The q-quantile of a histogram, aggregated over everything but ``by``."""
    if histogram.type != "histogram":
        raise ValueError(f"quantile() needs a histogram, {histogram.name} is a {histogram.type}")
    labels = ", ".join(("le", *by))
    return f"histogram_quantile({q:g}, sum by ({labels}) ({rate(histogram.bucket, *matchers)}))"


def percentile_label(q: float) -> str:
    """``0.99`` -> ``P99``, ``0.995`` -> ``P99.5``."""
    return f"P{round(q * 100, 3):g}"


# --- thresholds ---------------------------------------------------------------


def steps(base: str, *levels: tuple[float, str]) -> Steps:
    """Grafana threshold steps: ``base`` colour below the first level, then each (value, colour)."""
    values = [v for v, _ in levels]
    if values != sorted(values):
        raise ValueError(f"threshold levels must increase, found {values}")
    return [{"color": base, "value": None}, *({"color": c, "value": float(v)} for v, c in levels)]


def above(limit: float) -> Steps:
    """Higher is worse: red from ``limit`` up."""
    return steps("green", (limit, "red"))


def below(limit: float) -> Steps:
    """Lower is worse: red under ``limit``."""
    return steps("red", (limit, "green"))


# --- panels ---------------------------------------------------------------------


def target(expr: str, legend: str = "", ref_id: str = "A") -> Target:
    return Target(expr=expr, legendFormat=legend, refId=ref_id, datasource=DATASOURCE, intervalFactor=1)


def _targets(queries: Iterable[tuple[str, str]]) -> list[Target]:
    """``(expr, legend)`` pairs -> targets with refIds A, B, C ..."""
    return [target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(queries)]


def _size(width: int, height: int) -> GridPos:
    if not 0 < width <= GRID_WIDTH:
        raise ValueError(f"panel width must be 1..{GRID_WIDTH}, found {width}")
    return GridPos(h=height, w=width, x=0, y=0)  # x, y are set by dashboard()


def _panel(
    title: str, description: str, queries: Sequence[tuple[str, str]], unit: str,
    thresholds: Steps | None, width: int, height: int,
) -> dict[str, Any]:
    """What every panel carries: datasource object, targets, thresholds, size; a unit is mandatory."""
    if not unit:
        raise ValueError(f"panel {title!r}: a unit is required")
    return {
        "title": title,
        "description": description,
        "dataSource": DATASOURCE,
        "targets": _targets(queries),
        "thresholds": thresholds or steps("green"),
        "gridPos": _size(width, height),
    }


def timeseries(
    title: str,
    description: str,
    queries: Sequence[tuple[str, str]],
    unit: str,
    *,
    thresholds: Steps | None = None,
    width: int = 12,
    height: int = 8,
    max_value: int | None = None,
) -> TimeSeries:
    """A time-series panel; ``thresholds`` are drawn as lines."""
    return TimeSeries(
        **_panel(title, description, queries, unit, thresholds, width, height),
        unit=unit,
        thresholdsStyleMode="line" if thresholds else "off",
        valueMin=0,
        valueMax=max_value,
        legendDisplayMode="table",
        legendCalcs=["lastNotNull", "max"],
        tooltipMode="multi",
    )


def stat(
    title: str,
    description: str,
    queries: Sequence[tuple[str, str]],
    unit: str,
    *,
    thresholds: Steps | None = None,
    width: int = 4,
    height: int = 4,
    mappings: list[dict[str, Any]] | None = None,
) -> Stat:
    """A single-value panel showing the last value, coloured by ``thresholds``."""
    return Stat(
        **_panel(title, description, queries, unit, thresholds, width, height),
        format=unit,
        color={"mode": "thresholds"},
        colorMode="background",
        reduceCalc="lastNotNull",
        mappings=mappings or [],
        noValue="no data",
    )


def up_mappings() -> list[dict[str, Any]]:
    """Value mappings for 0/1 health series (``up``, ``*_up``)."""
    return [
        {
            "type": "value",
            "options": {
                "0": {"text": "DOWN", "color": "red", "index": 0},
                "1": {"text": "UP", "color": "green", "index": 1},
            },
        }
    ]


def row(title: str) -> RowPanel:
    return RowPanel(title=title, gridPos=_size(GRID_WIDTH, 1))


# --- variables and the dashboard --------------------------------------------------


def _query_variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": f"{name}-variable"},
        "definition": query,
        "refresh": 2,  # on time-range change: new models/instances appear without a reload
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "regex": "",
        "sort": 1,
        "hide": 0,
    }


def variables(model_from: Metric, instance_from: Metric) -> list[dict[str, Any]]:
    """``datasource``, ``model`` (``model_name`` of ``model_from``) and ``instance``
    (``instance`` of ``instance_from``, narrowed by the chosen models when it has them)."""
    instance_matchers = (MODEL,) if "model_name" in instance_from.labels else ()
    return [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "options": [],
            "refresh": 1,
            "regex": "",
            "hide": 0,
            "includeAll": False,
            "multi": False,
        },
        _query_variable("model", "Model", f"label_values({model_from}, model_name)"),
        _query_variable(
            "instance", "Instance", f"label_values({sel(instance_from, *instance_matchers)}, instance)"
        ),
    ]


def _layout(panels: Sequence[Panel]) -> list[Panel]:
    """Flow panels left to right in rows of 24 columns; ids follow list order."""
    out: list[Panel] = []
    x = y = line_height = 0
    for panel_id, panel in enumerate(panels, start=1):
        pos = panel.gridPos
        if x + pos.w > GRID_WIDTH or isinstance(panel, RowPanel):
            x, y, line_height = 0, y + line_height, 0
        out.append(attr.evolve(panel, id=panel_id, gridPos=GridPos(h=pos.h, w=pos.w, x=x, y=y)))
        x += pos.w
        line_height = max(line_height, pos.h)
        if isinstance(panel, RowPanel):
            x, y, line_height = 0, y + pos.h, 0
    return out


def dashboard(
    uid: str,
    title: str,
    description: str,
    panels: Sequence[Panel],
    template_variables: list[dict[str, Any]],
) -> Dashboard:
    return Dashboard(
        uid=uid,
        title=title,
        description=description,
        tags=[TAG],
        panels=_layout(panels),
        templating=Templating(list=template_variables),
        links=[DashboardLink(title="infersight", tags=[TAG], asDropdown=True, includeVars=True, keepTime=True)],
        refresh="30s",
        schemaVersion=SCHEMA_VERSION,
        timezone="browser",
        graphTooltip=1,  # shared crosshair: line up a latency spike with the KV cache at the same instant
    )


def render_json(module_name: str) -> Callable[[Config], str]:
    """Renderer for one dashboard module: checks its uid against the table, returns sorted JSON."""

    def render(config: Config) -> str:
        from dashboards import DASHBOARDS

        expected = [uid for uid, module in DASHBOARDS.items() if module == module_name]
        board = importlib.import_module(module_name).build(config)
        if [board.uid] != expected:
            raise ValueError(f"{module_name}.build() returned uid {board.uid!r}, the table says {expected}")
        return json.dumps(board.to_json_data(), cls=DashboardEncoder, sort_keys=True, indent=2) + "\n"

    return render
