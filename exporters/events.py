"""The event schema of ``POST /v1/events``, checked by hand over plain dicts.

A hand-written check keeps ingest fast (no model object per event) and gives
the error form the rest of infersight uses: ``events[3].domain: expected a
string, found 12``. Validation knows nothing about the config; folding label
values into allow-lists happens when events are applied. The Python client runs
the same check before queueing, so one bad call never poisons a batch.

Body: one event object, or ``{"events": [event, ...]}``. Events:

- ``{"kind": "request", "tier": "realtime", "phases": {"preprocessing": 0.008, ...},
  "prompt_tokens": 812, "completion_tokens": 143}``: gateway phase timings, in seconds;
- ``{"kind": "domain_tokens", "domain": "legal", "correct": 980, "total": 1000}``;
- ``{"kind": "compliance", "rule": "pii-redaction", "passed": true}``;
- ``{"kind": "cost", "tenant": "acme", "product": "chat", "prompt_tokens": 812, "completion_tokens": 143}``
  (tenant, product or both).
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Callable
from typing import Any, NoReturn

from infersight.catalog.business import GATEWAY_PHASES

INGEST_PATH = "/v1/events"
MAX_TOKENS = 2**32 - 1
MAX_SECONDS = 3600.0
REJECT_REASONS = ("invalid_json", "schema", "too_many_events")

RequestEvent = tuple[str, str, tuple[tuple[str, float], ...], int, int]  # kind, tier, phases, prompt, completion
DomainEvent = tuple[str, str, int, int]  # kind, domain, correct, total
ComplianceEvent = tuple[str, str, bool]  # kind, rule, passed
CostEvent = tuple[str, str | None, str | None, int]  # kind, tenant, product, tokens
Event = RequestEvent | DomainEvent | ComplianceEvent | CostEvent

_show = reprlib.Repr()
_show.maxstring = 60
_show.maxother = 60


class EventError(ValueError):
    """An ingest body that cannot be accepted; ``reason`` is one of ``REJECT_REASONS``."""

    def __init__(self, reason: str, message: str, events: int = 1) -> None:
        super().__init__(message)
        self.reason = reason
        self.events = events


def _loc(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _fail(event: dict[str, Any], path: str, key: str, expected: str) -> NoReturn:
    found = _show.repr(event[key]) if key in event else "nothing (the field is missing)"
    raise EventError("schema", f"{_loc(path, key)}: expected {expected}, found {found}")


def _check_keys(event: dict[str, Any], allowed: frozenset[str], path: str) -> None:
    if not event.keys() <= allowed:
        extra = sorted(map(str, event.keys() - allowed))[0][:60]
        raise EventError("schema", f"{_loc(path, extra)}: unknown field; expected one of {sorted(allowed)}")


def _label(event: dict[str, Any], key: str, path: str) -> str:
    value = event.get(key)
    if type(value) is not str:
        _fail(event, path, key, "a string")
    return value


def _optional_label(event: dict[str, Any], key: str, path: str) -> str | None:
    return _label(event, key, path) if key in event else None


def _tokens(event: dict[str, Any], key: str, path: str, default: int | None = 0) -> int:
    value = event.get(key, default)
    if type(value) is not int or not 0 <= value <= MAX_TOKENS:
        _fail(event, path, key, f"an integer from 0 to {MAX_TOKENS}")
    return value


_REQUEST_KEYS = frozenset({"kind", "tier", "phases", "prompt_tokens", "completion_tokens"})
_PHASES = frozenset(GATEWAY_PHASES)


def _request(event: dict[str, Any], path: str) -> RequestEvent:
    _check_keys(event, _REQUEST_KEYS, path)
    tier = _label(event, "tier", path)
    phases = event.get("phases", {})
    if type(phases) is not dict:
        _fail(event, path, "phases", f"an object of seconds by phase ({', '.join(GATEWAY_PHASES)})")
    for phase, seconds in phases.items():
        if phase not in _PHASES:
            raise EventError(
                "schema",
                f"{_loc(path, 'phases')}: expected phases from {list(GATEWAY_PHASES)}, found {_show.repr(phase)}",
            )
        if type(seconds) not in (int, float) or not 0 <= seconds <= MAX_SECONDS:
            _fail(phases, _loc(path, "phases"), phase, f"seconds from 0 to {MAX_SECONDS:g}")
    return (
        "request",
        tier,
        tuple(phases.items()),
        _tokens(event, "prompt_tokens", path),
        _tokens(event, "completion_tokens", path),
    )


_DOMAIN_KEYS = frozenset({"kind", "domain", "correct", "total"})


def _domain_tokens(event: dict[str, Any], path: str) -> DomainEvent:
    _check_keys(event, _DOMAIN_KEYS, path)
    domain = _label(event, "domain", path)
    total = _tokens(event, "total", path, default=None)
    correct = _tokens(event, "correct", path, default=None)
    if correct > total:
        _fail(event, path, "correct", f"at most total ({total})")
    return ("domain_tokens", domain, correct, total)


_COMPLIANCE_KEYS = frozenset({"kind", "rule", "passed"})


def _compliance(event: dict[str, Any], path: str) -> ComplianceEvent:
    _check_keys(event, _COMPLIANCE_KEYS, path)
    rule = _label(event, "rule", path)
    passed = event.get("passed")
    if type(passed) is not bool:
        _fail(event, path, "passed", "true or false")
    return ("compliance", rule, passed)


_COST_KEYS = frozenset({"kind", "tenant", "product", "prompt_tokens", "completion_tokens"})


def _cost(event: dict[str, Any], path: str) -> CostEvent:
    _check_keys(event, _COST_KEYS, path)
    tenant = _optional_label(event, "tenant", path)
    product = _optional_label(event, "product", path)
    if tenant is None and product is None:
        _fail(event, path, "tenant", "a string (a cost event names a tenant, a product or both)")
    tokens = _tokens(event, "prompt_tokens", path) + _tokens(event, "completion_tokens", path)
    return ("cost", tenant, product, tokens)


_KINDS: dict[str, Callable[[dict[str, Any], str], Event]] = {
    "request": _request,
    "domain_tokens": _domain_tokens,
    "compliance": _compliance,
    "cost": _cost,
}
KINDS: tuple[str, ...] = tuple(_KINDS)


def validate_event(event: object, path: str = "") -> Event:
    """The event as a tuple, or EventError naming the field at ``path``."""
    if type(event) is not dict:
        raise EventError("schema", f"{path or 'event'}: expected an object, found {_show.repr(event)}")
    kind = event.get("kind")
    check = _KINDS.get(kind) if type(kind) is str else None
    if check is None:
        _fail(event, path, "kind", f"one of {list(KINDS)}")
    return check(event, path)


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a number JSON allows")


def parse_body(body: bytes, max_events: int) -> list[Event]:
    """Every event in an ingest body, all or none: one bad event rejects the batch."""
    try:
        data = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # RecursionError: pathologically nested arrays
        raise EventError("invalid_json", f"body: not valid JSON ({_show.repr(str(exc))})") from None
    if type(data) is dict and "events" in data:
        if len(data) != 1:
            extra = sorted(k for k in data if k != "events")[0][:60]
            raise EventError("schema", f"{extra}: unknown field; a batch is {{'events': [...]}}")
        events = data["events"]
        if type(events) is not list:
            raise EventError("schema", f"events: expected a list of events, found {_show.repr(events)}")
        if len(events) > max_events:
            raise EventError(
                "too_many_events",
                f"events: expected at most {max_events} events per batch, found {len(events)}",
                events=len(events),
            )
        try:
            return [validate_event(e, f"events[{i}]") for i, e in enumerate(events)]
        except EventError as exc:
            exc.events = len(events)
            raise
    return [validate_event(data)]
