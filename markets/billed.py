"""A market with a bill's own prices where the bill shows them.

Owns: ``BillPrices`` (what a bill's spot and on-demand lines say a
(region, instance type) cost in each hour: its dollars over its
instance-hours) and ``with_bill_prices``, the market seen through them.
In an hour the bill ran a type on spot in a region, every pool of that type
there has the bill's spot price and spot held that hour (the bill's spot
ran; its share held is 1, no revocation); an hour the bill ran it on
on-demand, the bill's on-demand price. A bill names a region, not a zone,
so its price holds for every zone of the region. The market fills every
other pool and hour. ``BillPrices.counts`` says how many type-hours came
from the bill, for the report.

Must not: read bills (``markets.usage``), change the market's hazard,
committed prices or pools, or price a pool the bill does not name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd

from markets.model import MarketSnapshot, PoolSnapshot
from markets.protocols import HistorySource, PriceSource, RevocationSource
from markets.wrapped import AdjustedHistory, AdjustedRevocations, AdjustedSnapshots

__all__ = ["BillPrices", "with_bill_prices"]

_SPOT, _OD = "spot", "on_demand"
_Key = tuple[pd.Timestamp, str, str]  # (hour, region, instance type)


@dataclass(frozen=True)
class BillPrices:
    """USD per instance-hour the bill paid, per tier, keyed (hour, region, type)."""

    spot: Mapping[_Key, float]
    on_demand: Mapping[_Key, float]

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> BillPrices:
        """From ``markets.usage.FRAME_COLUMNS`` rows: the spot and on-demand
        lines with instance-hours, their EffectiveCost over their hours."""
        out: dict[str, dict[_Key, float]] = {_SPOT: {}, _OD: {}}
        rows = frame[frame["tier"].isin(list(out)) & (frame["instance_hours"] > 1e-9)]
        rows = rows[rows["region"].notna()]
        sums = rows.groupby(["tier", "hour", "region", "instance_type"])[
            ["cost_usd", "instance_hours"]
        ].sum()
        for (tier, hour, region, itype), cost, ih in zip(
            sums.index, sums["cost_usd"], sums["instance_hours"], strict=True
        ):
            unit = float(cost) / float(ih)
            if np.isfinite(unit) and unit >= 0:
                out[str(tier)][(pd.Timestamp(hour), str(region), str(itype))] = unit
        return cls(out[_SPOT], out[_OD])

    def counts(self, start: datetime, hours: int) -> dict[str, int]:
        """Type-hours per tier priced from the bill in ``[start, start + hours)``."""
        lo, hi = pd.Timestamp(start), pd.Timestamp(start) + pd.Timedelta(hours=hours)
        return {
            tier: sum(1 for k in prices if lo <= k[0] < hi)
            for tier, prices in ((_SPOT, self.spot), (_OD, self.on_demand))
        }

    def types(self, start: datetime, hours: int) -> dict[str, list[str]]:
        """Per tier, the ``region/type`` the bill priced in the window."""
        lo, hi = pd.Timestamp(start), pd.Timestamp(start) + pd.Timedelta(hours=hours)
        return {
            tier: sorted({f"{k[1]}/{k[2]}" for k in prices if lo <= k[0] < hi})
            for tier, prices in ((_SPOT, self.spot), (_OD, self.on_demand))
        }


def _hour(at: datetime) -> pd.Timestamp:
    t = pd.Timestamp(at)
    t = t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")
    return t.floor("h")


class _Snapshots(AdjustedSnapshots):
    """The snapshot of an hour with the bill's prices of that hour."""

    def __init__(self, market: PriceSource, prices: BillPrices) -> None:
        super().__init__(market)
        self.bill_prices = prices
        self.name = market.name

    def adjust(self, snapshot: MarketSnapshot) -> MarketSnapshot:
        hour = _hour(snapshot.at)
        b = self.bill_prices
        pools: list[PoolSnapshot] = []
        changed = False
        for p in snapshot.pools:
            key = (hour, p.pool.region, p.pool.instance_type)
            update: dict[str, object] = {}
            if key in b.on_demand:
                update["on_demand_usd_per_hour"] = b.on_demand[key]
            if key in b.spot and p.spot_usd_per_hour is not None:
                update["spot_usd_per_hour"] = b.spot[key]
            if update:
                changed = True
                p = p.model_copy(update=update)
            pools.append(p)
        return snapshot.model_copy(update={"pools": tuple(pools)}) if changed else snapshot

    def adjust_hourly(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``market.hourly`` rows with the bill's prices, and spot held where
        the bill ran spot (module docstring)."""
        if frame.empty:
            return frame
        where = {p.key: (p.region, p.instance_type) for p in self.pools()}
        out = frame.copy()
        hours = pd.to_datetime(out["hour"], utc=True)
        keys = [
            (h, *where.get(str(k), ("", ""))) for h, k in zip(hours, out["pool_key"], strict=True)
        ]
        b = self.bill_prices
        spot = np.array([b.spot.get(k, np.nan) for k in keys], dtype=float)
        od = np.array([b.on_demand.get(k, np.nan) for k in keys], dtype=float)
        s, o = np.isfinite(spot), np.isfinite(od)
        if s.any():
            out.loc[s, "spot_usd_per_hour"] = spot[s]
            out.loc[s, "spot_available"] = 1.0
            if "revocations" in out:
                out.loc[s, "revocations"] = 0
        if o.any() and "on_demand_usd_per_hour" in out:
            out.loc[o, "on_demand_usd_per_hour"] = od[o]
        return out


class _History(_Snapshots, AdjustedHistory):
    def __init__(self, market: HistorySource, prices: BillPrices) -> None:
        AdjustedHistory.__init__(self, market)
        self.bill_prices = prices

    def hourly(self, start: datetime, hours: int) -> pd.DataFrame:
        return self.adjust_hourly(self._history.hourly(start, hours))


class _Revocations(_History, AdjustedRevocations):
    def __init__(self, market: RevocationSource, prices: BillPrices) -> None:
        AdjustedRevocations.__init__(self, market)
        self.bill_prices = prices

    def revocation_events(self, pool_key: str, start: datetime, end: datetime) -> pd.DatetimeIndex:
        """The market's revocations, but none in an hour the bill's spot of
        the pool's type and region ran."""
        events = self._revocations.revocation_events(pool_key, start, end)
        pool = next((p for p in self.pools() if p.key == pool_key), None)
        if pool is None or len(events) == 0:
            return events
        spot = self.bill_prices.spot
        keep = [
            (_hour(t), pool.region, pool.instance_type) not in spot for t in events.to_pydatetime()
        ]
        return events[np.asarray(keep, dtype=bool)]


def with_bill_prices(market: PriceSource, prices: BillPrices) -> PriceSource:
    """``market`` with ``prices`` where the bill shows them (module docstring);
    a wrapper of the same protocols as ``market``."""
    if isinstance(market, RevocationSource):
        return _Revocations(market, prices)
    if isinstance(market, HistorySource):
        return _History(market, prices)
    return _Snapshots(market, prices)
