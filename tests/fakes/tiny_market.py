"""A tiny hand-made market for the simulated-cloud and daemon tests.

Three or more pools whose prices, hourly spot availability and revocation
times the test states outright, so every expected number can be worked out
by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pandas as pd

from markets import catalog
from markets.model import Hazard, InstanceType, MarketSnapshot, Pool, PoolSnapshot

T0 = datetime(2026, 3, 2, tzinfo=UTC)
SPOT_USD = 1.0  # per instance-hour, every pool
ON_DEMAND_USD = 3.0


def pool_key(zone: str, itype: str = "p3.2xlarge") -> str:
    return f"aws/us-east-1/us-east-1{zone}/{itype}"


class TinyMarket:
    """``HistorySource`` with ``revocation_events``, like the default market."""

    name = "tiny"

    def __init__(
        self,
        keys: Sequence[str] = (pool_key("a"), pool_key("b"), pool_key("c")),
        *,
        share: Mapping[str, float] | None = None,
        events: Mapping[str, Sequence[datetime]] | None = None,
        days: int = 40,
        spot_usd: Mapping[str, float] | None = None,
    ) -> None:
        self.keys = list(keys)
        self.share = dict(share or {})
        self.events = {k: sorted(v) for k, v in (events or {}).items()}
        self.days = days
        self.spot_usd = dict(spot_usd or {})

    def span(self) -> tuple[datetime, datetime]:
        return T0, T0 + timedelta(days=self.days)

    def pools(self) -> list[Pool]:
        return [Pool.from_key(k) for k in self.keys]

    def instance_types(self) -> list[InstanceType]:
        return [catalog.instance_type(n) for n in sorted({k.split("/")[-1] for k in self.keys})]

    def snapshot(self, at: datetime | None = None) -> MarketSnapshot:
        at = at or T0
        snaps = tuple(
            PoolSnapshot(
                pool=Pool.from_key(k),
                instance=catalog.instance_type(k.split("/")[-1]),
                on_demand_usd_per_hour=ON_DEMAND_USD,
                spot_usd_per_hour=self.spot_usd.get(k, SPOT_USD),
                committed_1y_usd_per_hour=2.0,
                placement_score=9,
                hazard=Hazard(rate_per_hour=0.01),
                available_share=self.share.get(k, 1.0),
                spot_available=self.share.get(k, 1.0) > 0,
                observed_at=at,
            )
            for k in self.keys
        )
        return MarketSnapshot(at=at, pools=snaps, source="tiny")

    def hourly(self, start: datetime, hours: int) -> pd.DataFrame:
        start = start.replace(minute=0, second=0, microsecond=0)
        stamps = pd.date_range(start, periods=hours, freq="h", tz="UTC")
        rows = []
        for h in stamps:
            for k in self.keys:
                n = sum(1 for t in self.events.get(k, ()) if h <= t < h + pd.Timedelta(hours=1))
                rows.append(
                    {
                        "hour": h,
                        "pool_key": k,
                        "spot_usd_per_hour": self.spot_usd.get(k, SPOT_USD),
                        "on_demand_usd_per_hour": ON_DEMAND_USD,
                        "spot_available": self.share.get(k, 1.0),
                        "revocations": n,
                    }
                )
        return pd.DataFrame(rows)

    def revocation_events(self, pool: str, start: datetime, end: datetime) -> pd.DatetimeIndex:
        return pd.DatetimeIndex([t for t in self.events.get(pool, ()) if start <= t < end])


__all__ = ["ON_DEMAND_USD", "SPOT_USD", "T0", "TinyMarket", "pool_key"]
