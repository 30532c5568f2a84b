"""Who a log line is about, and how the command line says a fatal error.

Owns: the log context (``owner`` and ``account`` of the daemon's config,
``None`` until it is read), stamped on every JSON log line, and
``error_line``: the one line a fatal error prints, plain text
(``spotfolio: error: ...``) or, once ``--log-format json`` was chosen, one
JSON object with the same fields as a log line (``ts``, ``level``,
``logger``, ``event``, ``message``, ``exit_code``, ``owner``, ``account``).
``--log-format`` is an eager option, so the choice is known before any
other option or file is read.

Must not: pick handlers or levels, redact (the caller does), or decide an
exit code.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from datetime import UTC, datetime

__all__ = [
    "context",
    "error_line",
    "errors_as_json",
    "json_chosen",
    "reset",
    "set_context",
    "utc_stamp",
]

_JSON: ContextVar[bool] = ContextVar("spotfolio_errors_as_json", default=False)
_CONTEXT: ContextVar[dict[str, object] | None] = ContextVar("spotfolio_log_context", default=None)


def reset() -> None:
    """A new command: plain errors, no owner or account known."""
    _JSON.set(False)
    _CONTEXT.set(None)


def errors_as_json(on: bool) -> None:
    _JSON.set(on)


def json_chosen() -> bool:
    return _JSON.get()


def set_context(*, owner: str, account: str) -> None:
    _CONTEXT.set({"owner": owner, "account": account})


def context() -> dict[str, object]:
    """``owner`` and ``account`` (each ``None`` before the config is read)."""
    return dict(_CONTEXT.get() or {"owner": None, "account": None})


def utc_stamp(created: float) -> str:
    ts = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
    return ts.replace("+00:00", "Z")


def error_line(prefix: str, message: str, *, event: str, exit_code: int) -> str:
    """The fatal error's line: ``prefix: message`` as text, or a JSON object."""
    if not _JSON.get():
        return f"{prefix}: {message}"
    out: dict[str, object] = {
        "ts": utc_stamp(datetime.now(UTC).timestamp()),
        "level": "error",
        "logger": "spotfolio",
        **context(),
        "event": event,
        "message": message,
        "exit_code": exit_code,
    }
    return json.dumps(out)
