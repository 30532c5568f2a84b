"""The bill itself as a scenario: the replayed hours' usage priced as the bill says.

Owns: ``AsBilled`` (the bill's instance usage in the what-if's hours: its
EffectiveCost by tier, with BilledCost and the amortisation between them),
``BilledDay`` (one UTC day of it reconciled: the bill's dollars beside the
replay's market's price for the same instance-hours on the same tiers),
``as_billed`` and ``with_savings`` (every scenario's saving against
as-billed first, on-demand second).

The replay's price of a bill line: on-demand at the market's on-demand price
of its (region, type); spot at the hour's actual spot price, the mean over
the region's zones (a bill names no zone; the listed price where none is
recorded); committed at the market's 1-year committed price (on-demand where
none is listed). With the bill's prices in the market (``markets.billed``)
its spot and on-demand lines price at what the bill paid; ``from_bill``
counts the type-hours priced so. Lines of a type or region the market does
not price are counted apart (``unpriced_usd``). What an owned commitment
idled (``idle_commitment_usd``: its unused dollars over the hours the bill
saw it, spread evenly) was paid too: it is in the total and in each day.

Must not: read files (``markets.usage``), plan, or bill a plan (``billing``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import ClassVar, Protocol

import numpy as np
import pandas as pd

from broker.whatif.billing import MarketActuals
from markets.billed import BillPrices
from markets.model import MarketSnapshot, PoolSnapshot, Tier


class BillCommitment(Protocol):
    """What as-billed reads of a bill's commitment (``markets.usage.BillCommitment``)."""

    @property
    def unused_cost_usd(self) -> float: ...
    @property
    def hours_seen(self) -> float: ...
    @property
    def first_seen(self) -> datetime: ...
    @property
    def last_seen(self) -> datetime: ...


__all__ = ["AS_BILLED", "AsBilled", "BilledDay", "as_billed", "with_savings"]

AS_BILLED = "as_billed"
_TIERS = tuple(t.value for t in Tier)


@dataclass(frozen=True)
class BilledDay:
    """One UTC day: the bill's dollars and the replay's for the same usage."""

    day: date
    effective_usd: float
    billed_usd: float
    replay_usd: float  # the same instance-hours, same tiers, at the replay's prices
    unpriced_usd: float  # the bill's dollars of lines the market does not price
    idle_usd: float = 0.0  # owned commitments' unused dollars (in effective and billed)

    def to_dict(self) -> dict[str, object]:
        priced = self.effective_usd - self.unpriced_usd - self.idle_usd
        return {
            "day": self.day.isoformat(),
            "effective_cost_usd": round(self.effective_usd, 2),
            "billed_cost_usd": round(self.billed_usd, 2),
            "amortisation_usd": round(self.effective_usd - self.billed_usd, 2),
            "replay_usd": round(self.replay_usd, 2),
            "idle_commitment_usd": round(self.idle_usd, 2),
            "difference_usd": round(self.replay_usd - priced, 2),
        }


@dataclass(frozen=True)
class AsBilled:
    """The bill over the what-if's hours (module docstring)."""

    start: datetime
    hours: int
    effective_usd: float
    billed_usd: float
    by_tier_usd: Mapping[str, float]
    instance_hours_by_tier: Mapping[str, float]
    days: tuple[BilledDay, ...]
    # type-hours per tier the replay's market priced at the bill's own price,
    # and the (region/type) they were, per tier (``markets.billed``)
    from_bill: Mapping[str, int] = field(default_factory=dict)
    from_bill_types: Mapping[str, list[str]] = field(default_factory=dict)

    DEFINITIONS: ClassVar[dict[str, str]] = {
        "effective_cost_usd": "the bill's EffectiveCost of its instance usage in the replayed "
        "hours: what the usage cost with commitments amortised over the hours they covered",
        "billed_cost_usd": "the bill's BilledCost of the same lines: what was invoiced for them",
        "amortisation_usd": "effective less billed: commitment fees (upfront and recurring) "
        "the bill spreads over the usage they covered",
        "replay_usd": "the same instance-hours on the same tiers at the replay's market prices "
        "(on-demand, the hour's spot, the 1-year committed price)",
        "idle_commitment_usd": "what the owned commitments idled in the replayed hours "
        "(their unused dollars over the hours the bill saw them, spread evenly): paid, so "
        "in the effective and billed totals",
        "difference_usd": "replay less effective, for the lines the market prices",
        "prices_from_bill": "type-hours (an instance type in a region for an hour) whose "
        "spot or on-demand price the replay took from the bill's own lines, for the bill "
        "and every scenario alike; the market prices every other pool and hour",
    }

    @property
    def replay_usd(self) -> float:
        return sum(d.replay_usd for d in self.days)

    @property
    def unpriced_usd(self) -> float:
        return sum(d.unpriced_usd for d in self.days)

    @property
    def idle_usd(self) -> float:
        return sum(d.idle_usd for d in self.days)

    def to_dict(self) -> dict[str, object]:
        return {
            "start": self.start.isoformat(),
            "hours": self.hours,
            "effective_cost_usd": round(self.effective_usd, 2),
            "billed_cost_usd": round(self.billed_usd, 2),
            "amortisation_usd": round(self.effective_usd - self.billed_usd, 2),
            "cost_by_tier_usd": {k: round(v, 2) for k, v in self.by_tier_usd.items()},
            "instance_hours_by_tier": {
                k: round(v, 3) for k, v in self.instance_hours_by_tier.items()
            },
            "replay_usd": round(self.replay_usd, 2),
            "unpriced_usd": round(self.unpriced_usd, 2),
            "idle_commitment_usd": round(self.idle_usd, 2),
            "days": [d.to_dict() for d in self.days],
            "prices_from_bill": {
                tier: {"type_hours": n, "types": list(self.from_bill_types.get(tier, []))}
                for tier, n in self.from_bill.items()
            },
            "definitions": dict(self.DEFINITIONS),
        }

    def scenario_row(self, on_demand_total: float) -> dict[str, object]:
        """As-billed in the shape of a scenario row (``run.Scenario.to_dict``):
        what the bill does not say (revocations, break-glass, a plan) is ``None``."""
        saving = 0.0 if on_demand_total <= 0 else 1.0 - self.effective_usd / on_demand_total
        return {
            "name": AS_BILLED,
            "total_cost_usd": round(self.effective_usd, 2),
            "billed_cost_usd": round(self.billed_usd, 2),
            "amortisation_usd": round(self.effective_usd - self.billed_usd, 2),
            "cost_by_tier_usd": {k: round(v, 2) for k, v in self.by_tier_usd.items()},
            "unmet_unit_hours": 0.0,
            "savings_vs_on_demand": round(saving, 6),
            "expected_revocations": None,
            "break_glass_usd": None,
            "forecast_error_usd": None,
            "catch_up_usd": None,
            "work_ahead_usd": 0.0,
            "planned_cost_usd": None,
            "budget_limited": [],
        }


def as_billed(
    frame: pd.DataFrame,
    start: datetime,
    hours: int,
    snapshot: MarketSnapshot,
    actuals: MarketActuals,
    from_bill: BillPrices | None = None,
    commitments: Sequence[BillCommitment] = (),
) -> AsBilled:
    """The bill's usage ``frame`` (``markets.usage.FRAME_COLUMNS``) over
    ``hours`` from ``start``, priced as billed and reconciled per day
    against ``snapshot`` and ``actuals`` (module docstring)."""
    t0 = pd.Timestamp(start)
    rows = frame[(frame["hour"] >= t0) & (frame["hour"] < t0 + pd.Timedelta(hours=hours))]
    pools: dict[tuple[str, str], list[PoolSnapshot]] = defaultdict(list)
    for p in snapshot.pools:
        pools[(p.pool.region, p.pool.instance_type)].append(p)
    billed_col = "billed_usd" if "billed_usd" in rows else "cost_usd"
    by_tier = dict.fromkeys(_TIERS, 0.0)
    ih_tier = dict.fromkeys(_TIERS, 0.0)
    days: dict[date, list[float]] = {}
    offsets = ((rows["hour"] - t0) // pd.Timedelta(hours=1)).to_numpy(dtype=np.int64)
    for h, region, itype, tier, ih, cost, billed in zip(
        offsets, rows["region"], rows["instance_type"], rows["tier"], rows["instance_hours"],
        rows["cost_usd"], rows[billed_col], strict=True,
    ):  # fmt: skip
        tier = str(tier)
        cost, billed, ih = float(cost), float(billed), float(ih)
        by_tier[tier] = by_tier.get(tier, 0.0) + cost
        ih_tier[tier] = ih_tier.get(tier, 0.0) + ih
        day = (start + timedelta(hours=int(h))).date()
        d = days.setdefault(day, [0.0, 0.0, 0.0, 0.0, 0.0])
        d[0] += cost
        d[1] += billed
        unit = _replay_price(pools.get((str(region), str(itype)), []), tier, int(h), actuals)
        if tier == Tier.ON_DEMAND.value and from_bill is not None and unit is not None:
            unit = from_bill.on_demand.get((t0 + pd.Timedelta(hours=int(h)), str(region),
                                            str(itype)), unit)  # fmt: skip
        if unit is None:
            d[3] += cost
        else:
            d[2] += ih * unit
    for day, usd in _idle_by_day(commitments, start, hours).items():
        d = days.setdefault(day, [0.0, 0.0, 0.0, 0.0, 0.0])
        d[0] += usd
        d[1] += usd
        d[4] += usd
    return AsBilled(
        start=start,
        hours=hours,
        effective_usd=sum(v[0] for v in days.values()),
        billed_usd=sum(v[1] for v in days.values()),
        by_tier_usd=by_tier,
        instance_hours_by_tier=ih_tier,
        days=tuple(BilledDay(k, *v) for k, v in sorted(days.items())),
        from_bill={} if from_bill is None else from_bill.counts(start, hours),
        from_bill_types={} if from_bill is None else from_bill.types(start, hours),
    )


def _idle_by_day(
    commitments: Sequence[BillCommitment], start: datetime, hours: int
) -> dict[date, float]:
    """Each UTC day's share of what the commitments idled (module docstring)."""
    out: dict[date, float] = {}
    for c in commitments:
        seen = c.hours_seen
        if c.unused_cost_usd <= 0 or seen <= 0:
            continue
        per_hour = c.unused_cost_usd / seen
        for h in range(hours):
            t = start + timedelta(hours=h)
            if c.first_seen <= t < c.last_seen:
                out[t.date()] = out.get(t.date(), 0.0) + per_hour
    return out


def _replay_price(
    pools: Sequence[PoolSnapshot], tier: str, hour: int, actuals: MarketActuals
) -> float | None:
    """The replay's dollars per instance-hour of ``tier`` (module docstring)."""
    if not pools:
        return None
    od = min(p.on_demand_usd_per_hour for p in pools)
    if tier == Tier.SPOT.value:
        prices = [
            actuals.price(p.pool.key, hour, p.spot_usd_per_hour)
            for p in pools
            if p.spot_usd_per_hour is not None
        ]
        return float(np.mean(prices)) if prices else od
    if tier == Tier.COMMITTED.value:
        listed = [c for p in pools if (c := p.price(Tier.COMMITTED)) is not None]
        return min(listed) if listed else od
    return od


def with_savings(
    rows: Sequence[dict[str, object]], billed: AsBilled | None
) -> list[dict[str, object]]:
    """``rows`` with as-billed first and every row's saving against it
    (``savings_vs_as_billed``, a fraction, and ``saving_vs_as_billed_usd``)
    beside the one against on-demand; ``rows`` as they are without a bill."""
    if billed is None:
        return list(rows)
    od = next((r for r in rows if r.get("name") == "on_demand"), None)
    od_total = od.get("total_cost_usd") if od is not None else None
    first = billed.scenario_row(float(od_total) if isinstance(od_total, int | float) else 0.0)
    base = billed.effective_usd
    out = []
    for r in [first, *rows]:
        total = r.get("total_cost_usd")
        x = float(total) if isinstance(total, int | float) else 0.0
        row = dict(r)
        row["saving_vs_as_billed_usd"] = round(base - x, 2)
        row["savings_vs_as_billed"] = round(0.0 if base <= 0 else 1.0 - x / base, 6)
        out.append(row)
    return out
