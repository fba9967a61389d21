"""A local stand-in for PagerDuty's Events API v2, plus a receiver for Alertmanager's webhook.

For tests and for machines with no PagerDuty account: point
``alerting.pagerduty.url`` at ``http://127.0.0.1:PORT/v2/enqueue`` and
``alerting.warning_webhook_url`` at ``http://127.0.0.1:PORT/alerts``. It checks
events the way the real API documents them (``POST /v2/enqueue``: 202 for an
accepted event, 400 "invalid event" with a list of errors, 400 "Unrecognized
object" for a body that is not a JSON object), records what it accepted, and, run
as ``python3 -m infersight.testing.pagerduty --port P``, prints every page with
its links (runbook, dashboard) as it arrives.

``GET /events`` returns everything received so far, for scripts that run the
receiver as a separate process.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ENQUEUE_PATH = "/v2/enqueue"
WEBHOOK_PATH = "/alerts"
EVENTS_PATH = "/events"
HEALTH_PATH = "/healthz"

ROUTING_KEY_LENGTH = 32
MAX_DEDUP_KEY = 255
MAX_SUMMARY = 1024
MAX_BODY_BYTES = 512 * 1024
EVENT_ACTIONS = ("trigger", "acknowledge", "resolve")
SEVERITIES = ("critical", "error", "warning", "info")
_OPTIONAL_PAYLOAD_STRINGS = ("component", "group", "class")


# ---- the Events API v2 contract -------------------------------------------------------------


def _blank(value: object) -> bool:
    return not isinstance(value, str) or not value.strip()


def _check_items(event: dict[str, Any], field: str, required: str) -> list[str]:
    """``links`` / ``images``: a list of objects, each with a non-blank string ``required`` key."""
    if field not in event:
        return []
    items = event[field]
    if not isinstance(items, list):
        return [f"'{field}' must be an array"]
    errors = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or _blank(item.get(required)):
            errors.append(f"'{field}[{index}].{required}' is missing or blank")
        elif any(not isinstance(v, str) for v in item.values()):
            errors.append(f"'{field}[{index}]' values must be strings")
    return errors


def _check_payload(payload: object) -> list[str]:
    if not isinstance(payload, dict):
        return ["'payload' is missing or not an object (required for trigger events)"]
    errors = []
    for field in ("summary", "source"):
        if _blank(payload.get(field)):
            errors.append(f"'payload.{field}' is missing or blank")
    summary = payload.get("summary")
    if isinstance(summary, str) and len(summary) > MAX_SUMMARY:
        errors.append(f"Length of 'payload.summary' is too long (maximum is {MAX_SUMMARY} characters)")
    if payload.get("severity") not in SEVERITIES:
        errors.append(
            f"'payload.severity' is invalid (should be one of {', '.join(SEVERITIES)}), "
            f"found {payload.get('severity')!r}"
        )
    if "timestamp" in payload:
        try:
            datetime.fromisoformat(payload["timestamp"])
        except (TypeError, ValueError):
            errors.append(f"'payload.timestamp' is not an ISO 8601 date-time, found {payload['timestamp']!r}")
    errors += [f"'payload.{f}' must be a string" for f in _OPTIONAL_PAYLOAD_STRINGS
               if not isinstance(payload.get(f, ""), str)]
    if "custom_details" in payload and not isinstance(payload["custom_details"], dict):
        errors.append("'payload.custom_details' must be an object")
    return errors


def validate_event(event: dict[str, Any]) -> list[str]:
    """Every reason the Events API v2 would reject ``event``; empty when it is valid."""
    errors = []
    key = event.get("routing_key")
    if _blank(key):
        errors.append("'routing_key' is missing or blank")
    elif len(key) != ROUTING_KEY_LENGTH:
        errors.append(f"Length of 'routing_key' is incorrect (should be {ROUTING_KEY_LENGTH} characters)")
    action = event.get("event_action")
    if action not in EVENT_ACTIONS:
        errors.append(f"'event_action' is invalid (should be one of {', '.join(EVENT_ACTIONS)}), found {action!r}")
    dedup = event.get("dedup_key")
    if dedup is not None and not isinstance(dedup, str):
        errors.append("'dedup_key' must be a string")
    elif isinstance(dedup, str) and len(dedup) > MAX_DEDUP_KEY:
        errors.append(f"Length of 'dedup_key' is too long (maximum is {MAX_DEDUP_KEY} characters)")
    elif action in ("acknowledge", "resolve") and _blank(dedup):
        errors.append(f"'dedup_key' is missing or blank (required for {action} events)")
    if action == "trigger":
        errors += _check_payload(event.get("payload"))
    errors += _check_items(event, "links", "href") + _check_items(event, "images", "src")
    errors += [f"'{f}' must be a string" for f in ("client", "client_url") if not isinstance(event.get(f, ""), str)]
    return errors


# ---- what was received ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    """One accepted request body and when it arrived (monotonic clock, comparable with time.monotonic())."""

    body: dict[str, Any]
    at: float
    wall_time: float


class Inbox:
    """A bounded, thread-safe record of received bodies that tests can wait on."""

    def __init__(self, limit: int = 10_000) -> None:
        self._items: deque[Received] = deque(maxlen=limit)
        self._cond = threading.Condition()

    def add(self, body: dict[str, Any]) -> Received:
        item = Received(body, time.monotonic(), time.time())
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()
        return item

    def items(self) -> list[Received]:
        with self._cond:
            return list(self._items)

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> Received:
        """The first received body matching ``predicate``, waiting up to ``timeout`` seconds for one."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for item in self._items:
                    if predicate(item.body):
                        return item
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"nothing matching arrived within {timeout:g} s ({len(self._items)} received)")
                self._cond.wait(left)


# ---- the HTTP server ------------------------------------------------------------------------------


def format_page(event: dict[str, Any]) -> str:
    """One page as an on-call engineer would read it: action, severity, summary, links."""
    payload = event.get("payload") or {}
    lines = [
        f"[{event.get('event_action', '?').upper()} {payload.get('severity', '-')}] "
        f"{payload.get('summary', '(no summary)')}  (dedup_key {event.get('dedup_key', '-')})"
    ]
    lines += [f"    {link.get('text') or 'link'}: {link['href']}" for link in event.get("links", [])]
    return "\n".join(lines)


def format_webhook(body: dict[str, Any]) -> str:
    alerts = body.get("alerts", [])
    names = sorted({a.get("labels", {}).get("alertname", "?") for a in alerts})
    return f"[WEBHOOK {body.get('status', '?')}] {len(alerts)} alert(s): {', '.join(names)}"


def _response(status: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"status": status, "message": message, **extra}


class LocalPager:
    """The receiver; ``start()`` returns once it listens. ``events``: accepted Events v2 bodies;
    ``webhooks``: Alertmanager webhook bodies."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0,
                 on_receive: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        self.events = Inbox()
        self.webhooks = Inbox()
        self.on_receive = on_receive
        handler = type("Handler", (_Handler,), {"pager": self})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(  # a short poll interval makes stop() quick
            target=self._server.serve_forever, args=(0.05,), name="local-pager", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def enqueue_url(self) -> str:
        return self.url + ENQUEUE_PATH

    @property
    def webhook_url(self) -> str:
        return self.url + WEBHOOK_PATH

    def start(self) -> LocalPager:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LocalPager:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def enqueue(self, body: object) -> tuple[int, dict[str, Any]]:
        """Handle one Events API v2 request body (already parsed JSON)."""
        if not isinstance(body, dict):
            return 400, _response("Unrecognized object", "Event object format is unrecognized",
                                  errors=["JSON parse error"])
        errors = validate_event(body)
        if errors:
            return 400, _response("invalid event", "Event object is invalid", errors=errors)
        dedup_key = body.get("dedup_key") or uuid.uuid4().hex
        recorded = self.events.add({**body, "dedup_key": dedup_key}).body
        if self.on_receive:
            self.on_receive("pagerduty", recorded)
        return 202, _response("success", "Event processed", dedup_key=dedup_key)

    def webhook(self, body: object) -> tuple[int, dict[str, Any]]:
        """Handle one Alertmanager webhook notification (``{"version": "4", "alerts": [...]}``)."""
        if not isinstance(body, dict) or not isinstance(body.get("alerts"), list):
            return 400, {"error": "expected an Alertmanager webhook body: an object with an 'alerts' array"}
        self.webhooks.add(body)
        if self.on_receive:
            self.on_receive("webhook", body)
        return 200, {"status": "ok"}

    def snapshot(self) -> dict[str, Any]:
        def dump(inbox: Inbox) -> list[dict[str, Any]]:
            return [{"received_at": r.wall_time, "body": r.body} for r in inbox.items()]

        return {"pagerduty": dump(self.events), "webhooks": dump(self.webhooks)}


class _Handler(BaseHTTPRequestHandler):
    pager: LocalPager
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        """Quiet: pages are reported through ``on_receive``."""

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode() + b"\n"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == HEALTH_PATH:
            self._send(200, {"status": "ok"})
        elif path == EVENTS_PATH:
            self._send(200, self.pager.snapshot())
        else:
            self._send(404, {"error": f"no such endpoint: GET {path}"})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        routes = {ENQUEUE_PATH: self.pager.enqueue, WEBHOOK_PATH: self.pager.webhook}
        if path not in routes:
            self._send(404, {"error": f"no such endpoint: POST {path}"})
            return
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            self.close_connection = True
            error = f"a Content-Length of at most {MAX_BODY_BYTES} bytes is required"
            self._send(413 if length.isdigit() else 411, {"error": error})
            return
        try:
            body = json.loads(self.rfile.read(int(length)))
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        self._send(*routes[path](body))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    args = parser.parse_args(argv)

    def show(kind: str, body: dict[str, Any]) -> None:
        print(format_page(body) if kind == "pagerduty" else format_webhook(body), flush=True)

    pager = LocalPager(args.host, args.port, on_receive=show).start()
    print(f"local pager listening: PagerDuty Events v2 at {pager.enqueue_url}, webhook at {pager.webhook_url}",
          flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    pager.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
