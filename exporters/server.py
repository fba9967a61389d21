"""The sidecar's HTTP server: ``/metrics``, ``/healthz`` and the collectors' own routes.

Served with our own handler rather than prometheus_client's, so the exposition is
always the plain text format (no OpenMetrics name rewriting) and write routes get
one place for auth and body limits.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from exporters.collector import CollectorSet, Response, Route
from exporters.collectors import build_collectors
from infersight import __version__
from infersight.config import Config

log = logging.getLogger(__name__)
TOKEN_ENV = "INFERSIGHT_INGEST_TOKEN"


def _json(status: int, payload: object) -> Response:
    return Response(status, json.dumps(payload).encode() + b"\n")


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def load_token(config: Config) -> str | None:
    """The bearer token for write routes: environment first, then the configured file."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    path = config.exporter.ingest_token_file
    if path:
        token = Path(path).read_text(encoding="utf-8").strip()
        if not token:
            raise ValueError(f"exporter.ingest_token_file: {path} is empty")
        return token
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        """A scraper that hangs up mid-response is routine: log it quietly, not as a traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            log.debug("client %s disconnected mid-request", client_address[0])
            return
        log.exception("error serving %s", client_address[0])


class Sidecar:
    """Owns the collectors and the HTTP server; ``start()`` returns once it is listening."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.token = load_token(config)
        if self.token is None and not is_loopback(config.exporter.listen_address):
            raise ValueError(
                f"exporter.listen_address is {config.exporter.listen_address!r}, beyond loopback: "
                f"set exporter.ingest_token_file or {TOKEN_ENV} so write endpoints are authenticated"
            )
        self.collectors = build_collectors(config)
        self.collector_set = CollectorSet(self.collectors, __version__)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector_set)
        self.routes: dict[tuple[str, str], Route] = {}
        for collector in self.collectors:
            for route in collector.routes():
                self.routes[(route.method, route.path)] = route
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    def render_metrics(self) -> bytes:
        return generate_latest(self.registry)

    def healthz(self) -> Response:
        collectors = self.collector_set.health()
        return _json(200, {"status": "ok", "version": __version__, "collectors": collectors})

    def start(self) -> None:
        for collector in self.collectors:
            collector.start()
        handler = type("Handler", (_Handler,), {"sidecar": self})
        self._server = _Server((self.config.exporter.listen_address, self.config.exporter.port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="http", daemon=True)
        self._thread.start()
        log.info("infersight sidecar listening on %s:%d", self.config.exporter.listen_address, self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for collector in self.collectors:
            collector.stop()


class _Handler(BaseHTTPRequestHandler):
    sidecar: Sidecar
    server_version = f"infersight/{__version__}"
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, a keep-alive client's delayed ACK
    # holds the body back ~40 ms per scrape (measured by benchmarks/sidecar_render.py).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:  # an unread body is left behind: tell keep-alive clients not to reuse this socket
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(Response(200, self.sidecar.render_metrics(), CONTENT_TYPE_LATEST))
        elif path == "/healthz":
            self._send(self.sidecar.healthz())
        elif ("GET", path) in self.sidecar.routes:
            self._send(self.sidecar.routes[("GET", path)].handler(b""))
        else:
            self._send(_json(404, {"error": f"no such endpoint: GET {path}"}))

    do_HEAD = do_GET  # noqa: N815 - stdlib naming

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        route = self.sidecar.routes.get(("POST", path))
        if route is None:
            self._send(_json(404, {"error": f"no such endpoint: POST {path}"}))
            return
        if route.write and not self._authorized():
            self.close_connection = True
            self._send(_json(401, {"error": "missing or wrong bearer token"}))
            return
        length = self.headers.get("Content-Length")
        limit = self.sidecar.config.exporter.max_body_bytes
        if length is None or not length.isdigit():
            self.close_connection = True
            self._send(_json(411, {"error": "Content-Length header required"}))
            return
        if int(length) > limit:
            self.close_connection = True
            self._send(_json(413, {"error": f"body of {length} bytes exceeds the limit of {limit} bytes"}))
            return
        self._send(route.handler(self.rfile.read(int(length))))

    def _authorized(self) -> bool:
        token = self.sidecar.token
        if token is None:
            return True  # loopback-only sidecar without a configured token
        given = self.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())
