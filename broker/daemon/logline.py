"""One structured log line: an event name and its typed fields.

Owns: ``LogLine``, a ``str`` (``event key=value ...``, what the plain-text
log shows, values with spaces quoted, a list as ``a,b``) that also keeps its
``event`` and its fields as the objects they were, so the JSON log
(``spotfolio daemon --log-format json``) writes numbers as numbers and
lists as arrays. ``broker.daemon.executor.kv``
builds one.

Must not: format JSON, pick handlers or levels (the command line does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["LogLine"]


class LogLine(str):
    """``event key=value ...``, with ``event`` and ``fields`` kept apart."""

    event: str
    fields: Mapping[str, object]

    def __new__(cls, event: str, fields: Mapping[str, object]) -> LogLine:
        parts = [event]
        for k, v in fields.items():
            s = ",".join(str(x) for x in v) if isinstance(v, list | tuple) else str(v)
            parts.append(f'{k}="{s}"' if (" " in s or not s) else f"{k}={s}")
        line = super().__new__(cls, " ".join(parts))
        line.event = event
        line.fields = dict(fields)
        return line

    def redacted(self, rule: Callable[[str], str]) -> LogLine:
        """This line with ``rule`` (``markets.redaction.redact``) applied to
        each text field as ``key=value``, so a secret-named key is caught as
        in a plain line; numbers and other values stay as they are."""
        out: dict[str, object] = {}
        for k, v in self.fields.items():
            if isinstance(v, str):
                v = _redacted(k, v, rule)
            elif isinstance(v, list | tuple):
                v = [_redacted(k, x, rule) if isinstance(x, str) else x for x in v]
            out[k] = v
        return LogLine(rule(self.event), out)


def _redacted(key: str, value: str, rule: Callable[[str], str]) -> str:
    cleaned = rule(f"{key}={value}")
    return cleaned.split("=", 1)[1] if cleaned.startswith(f"{key}=") else cleaned
