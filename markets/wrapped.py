"""A market seen through a change to its snapshots.

Owns: ``AdjustedSnapshots``, the base of every wrapper that passes a
market's pools, instance types and name through and changes only what its
``snapshot`` returns (``adjust``): quotas added, a stress applied, the
market's own revocations hidden; ``AdjustedHistory`` and
``AdjustedRevocations``, the same for a market with an hourly axis and with
revocation times. Each level defines its methods on the class, so a
wrapper is a ``HistorySource`` / ``RevocationSource`` exactly when its
market is, on every Python (``isinstance`` on a protocol reads the class
from 3.12 on, not ``__getattr__``).

Must not: read or fetch anything itself, or change the wrapped market.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pandas as pd

from markets.model import InstanceType, MarketSnapshot, Pool
from markets.protocols import HistorySource, PriceSource, RevocationSource

__all__ = ["AdjustedHistory", "AdjustedRevocations", "AdjustedSnapshots"]


class AdjustedSnapshots:
    """``market`` with each snapshot passed through ``adjust`` (as is here)."""

    def __init__(self, market: PriceSource) -> None:
        self._market = market
        self.name = market.name

    def pools(self) -> Sequence[Pool]:
        return self._market.pools()

    def instance_types(self) -> Sequence[InstanceType]:
        return self._market.instance_types()

    def snapshot(self, at: datetime | None = None) -> MarketSnapshot:
        return self.adjust(self._market.snapshot(at))

    def adjust(self, snapshot: MarketSnapshot) -> MarketSnapshot:
        return snapshot


class AdjustedHistory(AdjustedSnapshots):
    """An ``AdjustedSnapshots`` over a ``HistorySource``: span and hourly
    frame passed through."""

    def __init__(self, market: HistorySource) -> None:
        super().__init__(market)
        self._history = market

    def span(self) -> tuple[datetime, datetime]:
        return self._history.span()

    def hourly(self, start: datetime, hours: int) -> pd.DataFrame:
        return self._history.hourly(start, hours)


class AdjustedRevocations(AdjustedHistory):
    """An ``AdjustedHistory`` over a ``RevocationSource``: revocation times
    passed through."""

    def __init__(self, market: RevocationSource) -> None:
        super().__init__(market)
        self._revocations = market

    def revocation_events(self, pool_key: str, start: datetime, end: datetime) -> pd.DatetimeIndex:
        return self._revocations.revocation_events(pool_key, start, end)
