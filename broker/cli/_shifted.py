"""A market moved in time: a synthetic history replayed on another calendar.

Owns: ``shifted`` (``market`` seen ``offset`` later: every snapshot, hourly
frame, span and revocation time moved by it). A synthetic market (the
embedded default) has no calendar, so a bill of any date replays on it moved
to the bill's dates; an offset of whole weeks keeps hours of day and days of
week where they were.

Must not: change prices, availability or hazard, or shift a recorded market
(its dates are facts).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from markets.protocols import HistorySource, PriceSource, RevocationSource

if TYPE_CHECKING:
    import pandas as pd

    from markets.model import InstanceType, MarketSnapshot, Pool

__all__ = ["shifted", "week_offset"]


def week_offset(span: tuple[datetime, datetime], start: datetime, hours: int) -> timedelta:
    """Whole weeks that move ``[start, start + hours)`` inside ``span``
    (from its start; zero when it is already inside)."""
    lo, hi = span
    if lo <= start and start + timedelta(hours=hours) <= hi:
        return timedelta(0)
    weeks = (start - lo) // timedelta(weeks=1)
    return timedelta(weeks=weeks)


class _Shifted:
    def __init__(self, market: RevocationSource, offset: timedelta) -> None:
        self._m = market
        self.offset = offset
        self.name = f"{market.name} (shifted {offset.days:+,} days)"

    def pools(self) -> Sequence[Pool]:
        return self._m.pools()

    def instance_types(self) -> Sequence[InstanceType]:
        return self._m.instance_types()

    def snapshot(self, at: datetime | None = None) -> MarketSnapshot:
        snap = self._m.snapshot(None if at is None else at - self.offset)
        pools = tuple(
            p.model_copy(update={"observed_at": p.observed_at + self.offset}) for p in snap.pools
        )
        return snap.model_copy(update={"at": snap.at + self.offset, "pools": pools})

    def span(self) -> tuple[datetime, datetime]:
        lo, hi = self._m.span()
        return lo + self.offset, hi + self.offset

    def hourly(self, start: datetime, hours: int) -> pd.DataFrame:
        frame = self._m.hourly(start - self.offset, hours)
        out = frame.copy()
        out["hour"] = out["hour"] + self.offset
        return out

    def available_share(self, pool_key: str, start: datetime, end: datetime) -> float:
        return float(
            self._m.available_share(pool_key, start - self.offset, end - self.offset)  # type: ignore[attr-defined]
        )

    def __getattr__(self, name: str) -> object:
        # time-free models of the market (pool_model, zone_model, ...)
        return getattr(self._m, name)

    def revocation_events(self, pool_key: str, start: datetime, end: datetime) -> pd.DatetimeIndex:
        return self._m.revocation_events(pool_key, start - self.offset, end - self.offset) + (
            self.offset
        )


def shifted(market: PriceSource, offset: timedelta) -> PriceSource:
    """``market`` moved ``offset`` later (itself when ``offset`` is zero or it
    has no time axis to move)."""
    if not offset or not isinstance(market, HistorySource):
        return market
    if not isinstance(market, RevocationSource):
        raise TypeError("shifted: a market with revocation times (the default market)")
    return _Shifted(market, offset)
