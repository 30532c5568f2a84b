"""The narrow interfaces the rest of Spotfolio depends on.

Owns: ``PriceSource`` (anything that answers "what did the market look like at
``at``?") and ``HistorySource`` (sources that also have an hourly time axis).
Adapters (default market, replay, AWS, GCP) implement these; ``broker`` names
only these protocols, never a concrete adapter, outside its composition roots.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

import pandas as pd

from markets.model import InstanceType, MarketSnapshot, Pool

__all__ = ["HistorySource", "PriceSource"]


@runtime_checkable
class PriceSource(Protocol):
    """A market that can be asked for a snapshot."""

    name: str

    def pools(self) -> Sequence[Pool]:
        """Every pool this source knows."""
        ...

    def instance_types(self) -> Sequence[InstanceType]:
        """The instance types of those pools."""
        ...

    def snapshot(self, at: datetime | None = None) -> MarketSnapshot:
        """Prices, placement, hazard and availability in force at ``at``
        (as-of semantics; ``None`` = latest known)."""
        ...


@runtime_checkable
class HistorySource(PriceSource, Protocol):
    """A market with an hourly time axis (replay, default market)."""

    def span(self) -> tuple[datetime, datetime]:
        """First and last time with data."""
        ...

    def hourly(self, start: datetime, hours: int) -> pd.DataFrame:
        """One row per (hour, pool): columns ``hour`` (UTC), ``pool_key``,
        ``spot_usd_per_hour``, ``on_demand_usd_per_hour``, ``spot_available``
        (share of the hour spot could be held, 0-1) and ``revocations``
        (count in the hour). Vectorised: no Python loop per row."""
        ...
