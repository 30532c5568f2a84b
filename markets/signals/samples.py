"""The checks every metric sample passes, whichever system it came from.

Owns: ``checked_value`` (a reply's number as a float that is finite, >= 0
and below ``MAX_METRIC_VALUE``; ``None`` for "no value") and
``BadReplyError``, the error of a reply that is not what the API documents.

Must not: call a monitoring system, or know what the value means.
"""

from __future__ import annotations

import math

from markets.errors import TransientError

__all__ = ["MAX_METRIC_VALUE", "BadReplyError", "checked_value"]

# A demand metric counts requests, tokens or replicas: 1e15 per second is
# beyond any fleet, and keeps replicas x units inside the planner's bounds.
MAX_METRIC_VALUE = 1e15


class BadReplyError(TransientError):
    """A reply that is not what the API documents (a proxy's error page, a
    truncated body, a negative rate): the caller keeps its last good value."""


def checked_value(raw: object, *, source: str, query: str) -> float | None:
    """``raw`` (a JSON number or numeric string) as a sample value.

    ``NaN`` is "no value" (Prometheus writes it for 0/0 and for series
    that ended): ``None``, a gap. Anything else that is not a finite
    number in ``[0, MAX_METRIC_VALUE]`` is a ``BadReplyError`` naming the
    query (a demand below zero or beyond any fleet is a broken query).
    """
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise BadReplyError(f"{source}: a number for {query!r}, got {type(raw).__name__}")
    try:
        value = float(raw)
    except ValueError:
        raise BadReplyError(f"{source}: a number for {query!r}, got {str(raw)[:40]!r}") from None
    if math.isnan(value):
        return None
    if not 0.0 <= value <= MAX_METRIC_VALUE:
        raise BadReplyError(
            f"{source}: a value in [0, {MAX_METRIC_VALUE:g}] for {query!r}, got {value:g}"
        )
    return value
