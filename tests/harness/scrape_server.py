"""A real HTTP server on 127.0.0.1 that serves scripted ``/metrics`` pages.

Each path has its own Script (body, status, delay, streaming shape) that a test
can change between polls, so the sidecar's HTTP client is exercised for real:
slow answers, error statuses, bodies without Content-Length, oversized streams.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

REAL_SCRAPE = Path(__file__).resolve().parent.parent / "data" / "vllm-0.32.0-cpu-metrics.prom"
TINY = {"model_name": "tiny", "engine": "0"}  # the one (model_name, engine) pair in the real scrape


def value(text: str, name: str, **labels: str) -> float:
    """A sample's value in an exposition text, read with prometheus_client's full parser."""
    want = labels or TINY
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in want.items()):
                return s.value
    raise KeyError(name)


def free_port() -> int:
    """A loopback port nothing listens on (once the probe socket is closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Script:
    """What one path answers. ``repeat`` sends the body that many times (for huge streams);
    ``trickle`` waits that long between repeats; ``content_length=False`` ends the body by closing."""

    body: bytes = b""
    status: int = 200
    delay: float = 0.0
    content_length: bool = True
    repeat: int = 1
    trickle: float = 0.0
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"
    hits: int = 0
    bytes_sent: int = 0

    def set_text(self, text: str) -> None:
        self.body = text.encode()


class _Handler(BaseHTTPRequestHandler):
    scripts: dict[str, Script]

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:
        script = self.scripts.get(self.path)
        if script is None:
            self.send_error(404)
            return
        script.hits += 1
        time.sleep(script.delay)
        self.send_response(script.status)
        self.send_header("Content-Type", script.content_type)
        if script.content_length:
            self.send_header("Content-Length", str(len(script.body) * script.repeat))
        self.end_headers()
        try:
            for _ in range(script.repeat):
                self.wfile.write(script.body)
                self.wfile.flush()
                script.bytes_sent += len(script.body)
                time.sleep(script.trickle)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should on an oversized body


class ScrapeServer:
    """``with ScrapeServer() as s: s.scripts["/a"] = Script(...); s.url("/a")``."""

    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        handler = type("Handler", (_Handler,), {"scripts": self.scripts})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="scrape-server", daemon=True
        )

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def __enter__(self) -> ScrapeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
