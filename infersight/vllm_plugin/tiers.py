"""SLO tier of a request by its prompt length, as ``slo.tiers`` defines them."""

from __future__ import annotations

from bisect import bisect_left

from infersight.config import Config


class TierTable:
    """Tier index of a prompt length: the first tier whose ``max_prompt_tokens`` is at least it.

    Bounds are inclusive (a 2048-token prompt is realtime when realtime ends at
    2048). Prompts above the last bound go to the last tier, so every request
    lands somewhere.
    """

    __slots__ = ("_bounds", "_last", "names")

    def __init__(self, config: Config) -> None:
        tiers = config.slo.tiers
        self.names: tuple[str, ...] = tuple(t.name for t in tiers)
        self._bounds = [t.max_prompt_tokens for t in tiers if t.max_prompt_tokens is not None]
        self._last = len(tiers) - 1

    def index(self, prompt_tokens: int) -> int:
        return min(bisect_left(self._bounds, prompt_tokens), self._last)

    def name(self, prompt_tokens: int) -> str:
        return self.names[self.index(prompt_tokens)]
