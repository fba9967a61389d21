"""PromQL fragments every rule group writes the same way."""

from __future__ import annotations


def num(value: float) -> str:
    """A threshold as PromQL and prose write it: ``3`` not ``3.0000000000000004``."""
    return format(round(value, 9), ".12g")


def sum_rate(selector: str, window: str, by: str) -> str:
    """``sum by (by) (rate(selector[window]))``: a per-second rate aggregated to the alert's labels."""
    return f"sum by ({by}) (rate({selector}[{window}]))"
