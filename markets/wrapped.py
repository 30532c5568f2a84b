"""A market seen through a change to its snapshots.

Owns: ``AdjustedSnapshots``, the base of every wrapper that passes a
market's pools, instance types and name through and changes only what its
``snapshot`` returns (``adjust``): quotas added, a stress applied, the
market's own revocations hidden.

Must not: read or fetch anything itself, or change the wrapped market.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from markets.model import InstanceType, MarketSnapshot, Pool
from markets.protocols import PriceSource

__all__ = ["AdjustedSnapshots"]


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
