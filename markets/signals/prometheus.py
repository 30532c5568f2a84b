"""Prometheus as a ``MetricSource``: the HTTP API's range query.

Owns: ``PrometheusReader`` (``GET /api/v1/query_range`` of one PromQL
expression, its reply checked and turned into samples) and how a reply maps
to the project's error tree:

- 400 ``bad_data`` (the query does not parse): ``InputError`` naming the
  query: a human must fix the workload's ``demand_metric.query``;
- 401 / 403: ``AuthError``;
- 422 (the query could not run: too many samples), 5xx, a refused
  connection, a timeout: ``TransientError``; a reply that is not the
  documented JSON, more than ``MAX_REPLY_BYTES``, or several series:
  ``BadReplyError`` (transient). The caller keeps its last good value.

Safety: every call has a timeout (``DEFAULT_TIMEOUT_S``), a reply is read up
to ``MAX_REPLY_BYTES`` and no further, every number passes
``markets.signals.samples.checked_value``, and a window holds at most
``MAX_POINTS`` steps (Prometheus refuses more than 11,000 points per series).
Messages name the server through ``markets.redaction.redact``.

Reference: https://prometheus.io/docs/prometheus/latest/querying/api/
(``/api/v1/query_range``: ``query``, ``start``, ``end``, ``step``; the
reply's ``data.result`` is a matrix of ``{"metric": ..., "values": [[t, "v"],
...]}``).

Must not: retry (the caller's next run is the retry), cache, or decide.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import IO

from markets.errors import AuthError, InputError, TransientError
from markets.redaction import redact
from markets.signals.samples import BadReplyError, checked_value

__all__ = ["DEFAULT_TIMEOUT_S", "MAX_POINTS", "MAX_REPLY_BYTES", "PrometheusReader"]

DEFAULT_TIMEOUT_S = 10.0  # a range query of a few hundred points takes milliseconds
# A window of MAX_POINTS samples is ~300 KB of JSON: 4 MiB is room for labels.
MAX_REPLY_BYTES = 4 * 1024 * 1024
MAX_POINTS = 11_000  # Prometheus' own limit of points per series in a range query

Opener = Callable[[urllib.request.Request, float], IO[bytes]]


def _urlopen(request: urllib.request.Request, timeout: float) -> IO[bytes]:
    reply: IO[bytes] = urllib.request.urlopen(request, timeout=timeout)
    return reply


class PrometheusReader:
    """One Prometheus server's range queries (module docstring)."""

    name = "prometheus"

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        opener: Opener = _urlopen,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError("demand_metric.url", None, "an http(s) URL of a Prometheus server")
        self._base = url.rstrip("/")
        self._where = redact(self._base)
        self._timeout_s = timeout_s
        self._max_bytes = max_reply_bytes
        self._open = opener

    def series(
        self, query: str, start: datetime, end: datetime, step_s: float
    ) -> Sequence[tuple[datetime, float]]:
        """Samples of ``query`` in ``[start, end]`` every ``step_s`` (one
        series; an empty result is no samples)."""
        if not step_s > 0 or end < start:
            raise ValueError(f"a window with end >= start and step > 0 (step {step_s})")
        if (end - start).total_seconds() / step_s > MAX_POINTS:
            raise ValueError(f"at most {MAX_POINTS} steps in a range query")
        params = urllib.parse.urlencode(
            {
                "query": query,
                "start": f"{start.timestamp():.3f}",
                "end": f"{end.timestamp():.3f}",
                "step": f"{step_s:g}",
            }
        )
        body = self._get(f"{self._base}/api/v1/query_range?{params}", query)
        return self._samples(body, query)

    # --- HTTP ---------------------------------------------------------------------
    def _get(self, url: str, query: str) -> object:
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        try:
            with self._open(req, self._timeout_s) as reply:
                raw = reply.read(self._max_bytes + 1)
        except urllib.error.HTTPError as e:
            raise self._http_error(e, query) from e
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            raise TransientError(f"prometheus {self._where}: {redact(str(e))}") from e
        if len(raw) > self._max_bytes:
            raise BadReplyError(
                f"prometheus {self._where}: a reply of at most {self._max_bytes:,} bytes"
            )
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise BadReplyError(f"prometheus {self._where}: a JSON reply ({e})") from e

    def _http_error(self, e: urllib.error.HTTPError, query: str) -> Exception:
        detail = ""
        try:
            doc = json.loads(e.read(64 * 1024))
            if isinstance(doc, dict):
                detail = str(doc.get("error", ""))[:300]
        except (ValueError, OSError):
            pass
        finally:
            e.close()
        text = f"prometheus {self._where}: HTTP {e.code}"
        if e.code == 400:
            return InputError(
                "demand_metric.query",
                None,
                "a PromQL expression the server accepts",
                got=f"{query} ({redact(detail)})" if detail else query,
            )
        if e.code in (401, 403):
            return AuthError(text)
        return TransientError(f"{text} {redact(detail)}".rstrip())

    # --- the reply ----------------------------------------------------------------
    def _samples(self, doc: object, query: str) -> list[tuple[datetime, float]]:
        where = f"prometheus {self._where}"
        if not isinstance(doc, dict) or doc.get("status") != "success":
            raise BadReplyError(f"{where}: a reply with status 'success'")
        data = doc.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise BadReplyError(f"{where}: a matrix result for a range query")
        result = data.get("result")
        if not isinstance(result, list):
            raise BadReplyError(f"{where}: a list of series")
        if not result:
            return []
        if len(result) > 1:
            raise BadReplyError(
                f"{where}: one series for {query!r}, got {len(result)} (wrap it in sum(...))"
            )
        values = result[0].get("values") if isinstance(result[0], dict) else None
        if not isinstance(values, list):
            raise BadReplyError(f"{where}: a series with values")
        out: list[tuple[datetime, float]] = []
        for pair in values:
            if not isinstance(pair, list) or len(pair) != 2:
                raise BadReplyError(f"{where}: [time, value] pairs")
            t, v = pair
            if isinstance(t, bool) or not isinstance(t, int | float):
                raise BadReplyError(f"{where}: a numeric sample time")
            value = checked_value(v, source=where, query=query)
            try:
                at = datetime.fromtimestamp(float(t), tz=UTC)
            except (OverflowError, OSError, ValueError) as e:
                raise BadReplyError(f"{where}: a sample time in range, got {t!r}") from e
            if value is not None:
                out.append((at, value))
        return out
