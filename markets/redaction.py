"""The one redaction rule for every message, log line and stored text.

Owns: ``redact`` (a text with its secrets replaced by ``***``) and
``RedactingFilter`` (a ``logging.Filter`` that applies it to a record's
message, exception and stack text before any handler formats it). The CLI
prints its error lines through ``redact``; the daemon's log handler carries
the filter; hook results pass through ``redact`` before they are stored.

What counts as a secret (the rule, in order):

1. **A URL's password**: ``scheme://user:PASSWORD@host`` becomes
   ``scheme://user:***@host`` (store URLs, proxies, webhook URLs). The user
   name stays: it says which account failed.
2. **A value keyed by a secret-looking name**: a key containing
   ``authorization``, ``password`` / ``passwd`` / ``pwd``, ``secret``,
   ``token``, ``api-key`` / ``apikey``, ``access-key``, ``private-key``,
   ``signing-key``, ``cookie``, ``credential`` or ``session-id`` (any case,
   ``-`` / ``_`` / ``.`` around it: ``X-Api-Key``, ``PGPASSWORD``,
   ``AWS_SECRET_ACCESS_KEY``, ``aws_session_token``), followed by ``=`` or
   ``:`` and a value: ``key=value`` (log fields, query strings, environment
   lines), ``Key: value`` (HTTP headers; ``Bearer x`` / ``Basic x`` as one
   value) and quoted forms (``"key": "value"`` in JSON, ``'key': 'value'`` in
   a Python repr). The key stays, the value becomes ``***``.

A bare ``key`` is not secret-looking (``pool_key=``, ``idempotency_key=``
name ids, not credentials), nor is ``secretsmanager`` (a reference's kind,
``{secretsmanager: name}``: its value names a secret, it is not one), and
a value that is the word ``expected`` is kept: ``headers.X-Token: expected
a string`` is an error message's field path, not a header.

Over-redaction is the safe side (``tokens_used=3`` loses its 3). A
password with an unencoded ``/`` is not a valid URL authority and is not
recognised by rule 1: percent-encode it (``%2F``), as URL parsers require.

Must not: log, raise, or know where a text goes (callers decide); import
anything of the project but the standard library.
"""

from __future__ import annotations

import logging
import re

__all__ = ["MASK", "RedactingFilter", "redact", "secret_named"]

MASK = "***"

# Rule 1: scheme://user:password@ (the password ends at the first '@', and has
# no '/' or whitespace: an unencoded '/' would end the authority anyway).
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*:)(?P<pw>[^@/\s'\"]+)(?=@)"
)

_SECRET_WORD = (
    r"authorization|passw(?:or)?d|pwd|secret(?!s?[-_.]?manager)|token|api[-_.]?key|access[-_.]?key"
    r"|private[-_.]?key|signing[-_.]?key|cookie|credential|session[-_.]?id"
)
_NAME = rf"[A-Za-z0-9_.\-]*(?:{_SECRET_WORD})[A-Za-z0-9_.\-]*"
_SECRET_NAME = re.compile(rf"(?i)^{_NAME}$")

# Rule 2: the key (bare or quoted), its separator, then one value: a quoted
# string, or an auth scheme and its credential, or a run up to a delimiter.
_KEYED = re.compile(
    rf"""(?ix)
    (?P<key>(?P<q>["']?)\b{_NAME}(?P=q))
    (?P<sep>\s*[:=]\s*)
    (?!expected\b)
    (?P<val>
        "(?:[^"\\]|\\.)*"
      | '(?:[^'\\]|\\.)*'
      | (?:(?:bearer|basic|digest|token)\s+)?[^\s,;&}}\])"']+
    )
    """
)


def secret_named(name: str) -> bool:
    """Whether a key, header or variable name looks like it holds a secret."""
    return bool(_SECRET_NAME.match(name))


def _mask_value(m: re.Match[str]) -> str:
    val = m.group("val")
    if len(val) >= 2 and val[0] in "\"'" and val[-1] == val[0]:
        masked = f"{val[0]}{MASK}{val[0]}"
    else:
        masked = MASK
    return f"{m.group('key')}{m.group('sep')}{masked}"


def redact(text: str) -> str:
    """``text`` with URL passwords and secret-named values replaced by ``***``."""
    if not text:
        return text
    out = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    return _KEYED.sub(_mask_value, out)


class RedactingFilter(logging.Filter):
    """Redacts a record in place (message, exception text, stack) and keeps it.

    Put it on a handler: every record the handler emits, from any logger that
    reaches it, is redacted before formatting. The message is rendered
    (``getMessage``) first, so secrets in ``%``-arguments are caught too;
    a record with nothing to redact keeps its arguments (the JSON log types
    them).
    """

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        structured = getattr(record.msg, "redacted", None)
        if callable(structured) and not record.args:
            # A structured line (``broker.daemon.logline.LogLine``) redacts its
            # own fields and keeps them typed for the JSON log.
            record.msg = structured(redact)
        else:
            rendered = record.getMessage()
            cleaned = redact(rendered)
            if cleaned != rendered:  # a secret: keep only the redacted text
                record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
