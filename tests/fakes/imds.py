"""A local fake of the EC2 instance metadata service (IMDSv2), for the watcher.

``FakeImds`` is an ``http.server`` on 127.0.0.1 (a free port) answering as
IMDSv2 does: ``PUT /latest/api/token`` with
``X-aws-ec2-metadata-token-ttl-seconds`` (1-21600, else 400) issues a token;
every ``GET`` without a token it issued (or after ``expire_tokens()``) is
401; ``spot/instance-action`` and ``events/recommendations/rebalance`` are
404 until ``interrupt()`` / ``recommend()``, then the JSON documented in the
EC2 User Guide. ``fail_next(n)`` answers the next ``n`` GETs with 500.
Every request is recorded (method, path, token header, status).

Bounded: the server stops itself after ``lifetime_s``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["FakeImds", "Request"]

ACTION = "/latest/meta-data/spot/instance-action"
REBALANCE = "/latest/meta-data/events/recommendations/rebalance"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    header: str  # the TTL header on a PUT, the token on a GET
    status: int


def _iso(unix: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))


class FakeImds:
    def __init__(self, *, lifetime_s: float = 60.0) -> None:
        self.tokens: set[str] = set()
        self.action: dict[str, str] | None = None
        self.rebalance: dict[str, str] | None = None
        self.failures = 0
        self.accept_tokens = True  # False: every GET is 401, even with a new token
        self.interrupted_at: float | None = None
        self.deadline_unix: float | None = None
        self.requests: list[Request] = []
        self.cond = threading.Condition()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
                if self.path != "/latest/api/token" or not (
                    ttl.isdigit() and 1 <= int(ttl) <= 21600
                ):
                    fake._record("PUT", self.path, ttl, 400)
                    self._reply(400, "")
                    return
                with fake.cond:
                    token = f"token-{len(fake.tokens) + 1}-{time.monotonic_ns()}"
                    fake.tokens.add(token)
                fake._record("PUT", self.path, ttl, 200)
                self._reply(200, token)

            def do_GET(self) -> None:
                token = self.headers.get("X-aws-ec2-metadata-token", "")
                with fake.cond:
                    status, body = fake._answer(self.path, token)
                fake._record("GET", self.path, token, status)
                self._reply(status, body)

            def _reply(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    def _answer(self, path: str, token: str) -> tuple[int, str]:
        if token not in self.tokens or not self.accept_tokens:
            return 401, ""
        if self.failures > 0:
            self.failures -= 1
            return 500, "Internal Server Error"
        if path == ACTION:
            return (404, "Not Found") if self.action is None else (200, json.dumps(self.action))
        if path == REBALANCE:
            if self.rebalance is None:
                return 404, "Not Found"
            return 200, json.dumps(self.rebalance)
        return 404, "Not Found"

    def _record(self, method: str, path: str, header: str, status: int) -> None:
        with self.cond:
            self.requests.append(Request(method, path, header, status))
            self.cond.notify_all()

    def start(self) -> FakeImds:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self._timer.cancel()
        self.server.shutdown()
        self.server.server_close()

    def interrupt(self, action: str = "terminate", in_s: float = 120.0) -> None:
        """The two-minute warning: the action happens ``in_s`` from now."""
        with self.cond:
            now = time.time()
            self.interrupted_at = now
            self.deadline_unix = float(int(now + in_s))  # IMDS writes whole seconds
            self.action = {"action": action, "time": _iso(now + in_s)}

    def recommend(self) -> None:
        with self.cond:
            self.rebalance = {"noticeTime": _iso(time.time())}

    def expire_tokens(self) -> None:
        with self.cond:
            self.tokens.clear()

    def fail_next(self, n: int) -> None:
        with self.cond:
            self.failures = n

    def wait_for(self, count: int, path: str = ACTION, timeout_s: float = 15.0) -> None:
        """Until ``count`` more answered GETs of ``path`` have been served."""
        with self.cond:
            start = sum(1 for r in self.requests if r.path == path and r.status != 401)
            ok = self.cond.wait_for(
                lambda: (
                    sum(1 for r in self.requests if r.path == path and r.status != 401)
                    >= start + count
                ),
                timeout=timeout_s,
            )
        assert ok, f"the watcher did not read {path} {count} more times"
