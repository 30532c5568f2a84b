"""The daemon's HTTP endpoint: ``/metrics``, ``/healthz`` and ``/readyz``.

Owns: ``readiness`` (whether a daemon is doing its job, from the values it
keeps: the lease held, the market fresh, the notice queue read lately; a
short reason when not) and ``serve`` (one threaded HTTP server on
``addr:port`` answering the three paths). ``/healthz`` answers 200 while the
process serves; ``/readyz`` 200 ``{"ready": true}``, or 503 ``{"ready":
false, "reason": ...}``; ``/metrics`` the registry's exposition. The image's
HEALTHCHECK and the AWS module's container health check ask ``/readyz``.

Must not: decide anything, read the store or call the cloud (``ready`` is
handed in and reads only what the daemon already keeps), or log a request.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer
    from wsgiref.types import StartResponse, WSGIEnvironment

__all__ = ["MARKET_FRESH_INTERVALS", "QUEUE_FRESH_S", "Liveness", "readiness", "serve"]

# A market older than this many refresh intervals is stale: two refreshes in
# a row failed (a refresh runs every refresh_market_s and replaces a snapshot
# that old).
MARKET_FRESH_INTERVALS = 3
# The queue counts as readable while it was read at most this long ago, and
# at least every 6 polls: well inside the AWS notice window of 120 s.
QUEUE_FRESH_S = 30.0
QUEUE_FRESH_POLLS = 6


@dataclass(frozen=True)
class Liveness:
    """What readiness is judged on, as the daemon keeps it."""

    now: datetime
    running: bool
    lease_required: bool
    lease_held: bool
    market_at: datetime | None
    refresh_market_s: float
    queue_read_at: datetime | None
    queue_error: str | None
    poll_notices_s: float


def readiness(x: Liveness) -> str | None:
    """None when ready, else why not (one short phrase)."""
    if not x.running:
        return "not running (starting, or stopped)"
    if x.lease_required and not x.lease_held:
        return "lease not held"
    if x.market_at is None:
        return "no market snapshot yet"
    age = (x.now - x.market_at).total_seconds()
    if age > MARKET_FRESH_INTERVALS * x.refresh_market_s:
        return f"market stale ({age:.0f} s since the last refresh)"
    if x.queue_error is not None:
        return f"notice queue unreadable ({x.queue_error})"
    if x.queue_read_at is None:
        return "notice queue not read yet"
    since = (x.now - x.queue_read_at).total_seconds()
    if since > max(QUEUE_FRESH_S, QUEUE_FRESH_POLLS * x.poll_notices_s):
        return f"notice queue not read for {since:.0f} s"
    return None


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing (a scrape every 15 s is not news)."""


def _json(start: StartResponse, status: str, body: dict[str, object]) -> Iterable[bytes]:
    data = json.dumps(body).encode()
    start(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def _app(
    registry: CollectorRegistry, ready: Callable[[], str | None] | None
) -> Callable[[WSGIEnvironment, StartResponse], Iterable[bytes]]:
    metrics = make_wsgi_app(registry)

    def app(environ: WSGIEnvironment, start: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/healthz":
            return _json(start, "200 OK", {"alive": True})
        if path == "/readyz":
            try:
                reason = ready() if ready is not None else None
            except Exception as e:  # a reading that fails is an answer, not a crash
                reason = f"readiness unknown ({type(e).__name__})"
            if reason is None:
                return _json(start, "200 OK", {"ready": True})
            return _json(start, "503 Service Unavailable", {"ready": False, "reason": reason})
        if path in ("/metrics", "/"):
            out: Iterable[bytes] = metrics(environ, start)
            return out
        return _json(
            start,
            "404 Not Found",
            {"error": "no such path", "paths": ["/metrics", "/healthz", "/readyz"]},
        )

    return app


def serve(
    registry: CollectorRegistry,
    port: int,
    addr: str = "127.0.0.1",
    ready: Callable[[], str | None] | None = None,
) -> WSGIServer:
    """Serve the three paths on ``addr:port`` from a daemon thread; returns the
    server (``server_port``: the port bound, a free one for ``port`` 0)."""
    family = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)[0][0]

    class Server(ThreadingWSGIServer):
        address_family = family

    server = make_server(addr, port, _app(registry, ready), Server, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="http-endpoint", daemon=True).start()
    return server
