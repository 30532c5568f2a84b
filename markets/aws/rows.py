"""Validation of what AWS returns: skipped rows are counted and logged.

Owns: ``SkippedRows`` (a tally of rows dropped, by API action and reason, each
also logged) and the small parsers every response reader shares: a price as a
non-negative decimal, a positive integer, an aware timestamp.

Must not: call AWS. A row that does not parse is never dropped silently: it is
skipped, counted here and logged with the action, the reason and the row.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime
from decimal import Decimal, InvalidOperation

from markets.clock import ensure_utc

__all__ = ["SkippedRows", "parse_positive_int", "parse_timestamp", "parse_usd"]

log = logging.getLogger(__name__)


class SkippedRows:
    """Rows dropped from AWS responses, counted by (action, reason)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()

    def skip(self, operation: str, reason: str, row: object) -> None:
        self.counts[(operation, reason)] += 1
        # The row itself goes in the log so an operator can see what AWS sent.
        log.warning("skipped a row from %s: %s: %.300r", operation, reason, row)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def by_reason(self) -> dict[str, int]:
        """``{"action: reason": count}``, sorted, for reports."""
        return {f"{op}: {reason}": n for (op, reason), n in sorted(self.counts.items())}


def parse_usd(value: object) -> float:
    """A price string (``"3.0600000000"``) as a finite, non-negative float.

    Decimal first: a float parse would accept ``"nan"``, ``"inf"`` and
    ``"1e400"``; AWS sends prices as decimal strings.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise ValueError(f"price is not a number: {value!r}")
    try:
        d = Decimal(str(value).strip())
    except InvalidOperation as e:
        raise ValueError(f"price is not a decimal: {value!r}") from e
    if not d.is_finite():
        raise ValueError(f"price is not finite: {value!r}")
    if d < 0:
        raise ValueError(f"price is negative: {value!r}")
    return float(d)


def parse_positive_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} is not a positive integer: {value!r}")
    return value


def parse_timestamp(value: object) -> datetime:
    """A response timestamp (botocore gives aware datetimes) in UTC."""
    if not isinstance(value, datetime):
        raise ValueError(f"timestamp is not a datetime: {value!r}")
    return ensure_utc(value)
