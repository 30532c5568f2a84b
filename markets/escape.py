"""Text from outside made safe for one log line.

Owns: ``log_safe`` (control characters escaped, length bounded). Notice ids,
instance ids and reasons come from queue messages anyone with ``SendMessage``
can write; a newline in one of them would otherwise start a forged log line.

Must not: redact secrets (the redaction rule's job) or touch printable text
other than by truncating it.
"""

from __future__ import annotations

import re

__all__ = ["LOG_FIELD_LIMIT", "log_safe"]

# Long enough for an ARN (AWS allows 1,600 characters for a Health event ARN,
# but ours are ~110) and a reason; a field longer than this is an attack or a
# bug, and a log line is no place for all of it.
LOG_FIELD_LIMIT = 512
# C0 and C1 controls, DEL, and the two Unicode line separators: everything
# str.splitlines or a terminal treats as a line break or an escape sequence.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def log_safe(value: object, limit: int = LOG_FIELD_LIMIT) -> str:
    """``value`` as text for a log field: control characters written as
    ``\\xNN`` / ``\\uNNNN`` escapes, cut after ``limit`` characters."""
    text = str(value)
    if len(text) > limit:
        text = f"{text[:limit]}...(+{len(text) - limit} chars)"
    return _CONTROL.sub(_escape, text)
