"""Numbers as a report shows them: condensed dollars, shares, counts.

Owns: ``short_usd`` (``$81.9k``: three significant digits, for text that
fits 80 columns and chart labels), ``full_usd`` (``$81,905``: tables with
room), ``share`` (``55.3%``) and ``amount`` (a count or unit-hours).

Must not: read a document or decide what to show.
"""

from __future__ import annotations

import math

__all__ = ["amount", "full_usd", "share", "short_usd"]

_UNITS = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def _sig3(x: float) -> str:
    """``x`` (>= 1) with three significant digits, no trailing ``.0``."""
    digits = 2 if x < 10 else 1 if x < 100 else 0
    text = f"{x:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def short_usd(usd: float | None, *, signed: bool = False) -> str:
    """``$81.9k``, ``$1.25M``, ``$512``, ``$0.45``, ``-$589`` (``+$589`` when
    ``signed``); ``-`` for ``None`` or a value that is not finite."""
    if usd is None or not math.isfinite(usd):
        return "-"
    sign = "-" if usd < 0 else "+" if signed and usd > 0 else ""
    x = abs(usd)
    for scale, unit in _UNITS:
        # 999.95 rounds to 1000 at three digits: it is then the next unit's 1.00
        if x >= scale * 0.9995:
            value = x / scale
            if value >= 999.5 and unit != "T":
                continue
            return f"{sign}${_sig3(value)}{unit}"
    if x >= 1:
        return f"{sign}${x:.0f}" if x >= 100 else f"{sign}${_sig3(x)}"
    return f"{sign}${x:.2f}" if x else "$0"


def full_usd(usd: float | None, *, signed: bool = False) -> str:
    """``$81,905`` (whole dollars; cents below $100); ``-`` for ``None``."""
    if usd is None or not math.isfinite(usd):
        return "-"
    sign = "-" if usd < 0 else "+" if signed and usd > 0 else ""
    x = abs(usd)
    if x == 0:
        return "$0"
    return f"{sign}${x:,.0f}" if x >= 100 else f"{sign}${x:,.2f}"


def share(x: float | None) -> str:
    """``55.3%``; ``-`` for ``None``."""
    return "-" if x is None or not math.isfinite(x) else f"{x:.1%}"


def amount(x: float | None) -> str:
    """A count or unit-hours: ``1,234``, ``12.5``, ``0``; ``-`` for ``None``."""
    if x is None or not math.isfinite(x):
        return "-"
    if float(x).is_integer():
        return f"{x:,.0f}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}"
