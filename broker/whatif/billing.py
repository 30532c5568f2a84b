"""Bill a plan against what actually happened, hour by hour.

Owns: ``Bill`` and ``bill_plan``. A plan is made on a forecast; the bill uses
the actual serving demand and the actual spot market (price and the share of
each hour spot could be held). Every billed dollar is attributed to a tier and
a workload. The rules, the same for every scenario so comparisons are fair:

- committed instances are paid every hour, used or not;
- on-demand allocations are paid as planned;
- spot allocations are paid only for the share of the hour spot was held, at
  the hour's spot price, and deliver work only for that share. A plan's spot
  work already counts the pool's *expected* held share (``policies.cost_table``
  divides the spot factor by it), so the bill swaps the expected share for the
  actual one (work x held / expected) rather than taking it off twice;
- serving demand above what was held is topped up on on-demand at the
  workload's cheapest on-demand price (an autoscaler's reaction; read from
  the snapshot's ``CostTable``, on-demand prices depend on none of its
  options); the part of
  the top-up caused by lost spot is *break-glass* dollars, the rest
  *forecast error* dollars. A top-up that would break the fleet's hourly
  budget is left unmet instead;
- training/batch work still missing at the deadline (or the horizon's end) is
  caught up on on-demand (dollars reported as ``catch_up_usd``).

Must not: decide anything (it only prices decisions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from broker.planning.plan import Plan
from markets.model import MarketSnapshot, Tier
from policies.cost_table import CostTable
from policies.workloads.spec import WorkloadClass, WorkloadSet

__all__ = ["Bill", "MarketActuals", "bill_plan"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class MarketActuals:
    """Per pool key, hourly arrays over the horizon: spot price and the share
    of each hour spot could be held (1.0 where unknown)."""

    spot_usd_per_hour: Mapping[str, FloatArray]
    spot_available: Mapping[str, FloatArray]

    def price(self, key: str, hour: int, planned: float) -> float:
        arr = self.spot_usd_per_hour.get(key)
        if arr is None or hour >= len(arr) or not math.isfinite(arr[hour]):
            return planned
        return float(arr[hour])

    def held(self, key: str, hour: int) -> float:
        arr = self.spot_available.get(key)
        if arr is None or hour >= len(arr) or not math.isfinite(arr[hour]):
            return 1.0
        return float(arr[hour])


@dataclass
class Bill:
    """What a plan cost, by tier and by workload, and what it left undone."""

    total_usd: float = 0.0
    by_tier_usd: dict[str, float] = field(default_factory=lambda: {t.value: 0.0 for t in Tier})
    by_workload_usd: dict[str, float] = field(default_factory=dict)
    unmet_unit_hours: dict[str, float] = field(default_factory=dict)
    break_glass_usd: float = 0.0
    forecast_error_usd: float = 0.0
    catch_up_usd: float = 0.0
    catch_up_unit_hours: dict[str, float] = field(default_factory=dict)
    spot_instance_hours: float = 0.0
    expected_revocations: float = 0.0
    budget_exceeded_hours: int = 0

    def add(self, tier: Tier, workload: str | None, usd: float) -> None:
        self.by_tier_usd[tier.value] += usd
        self.total_usd += usd
        if workload is not None:
            self.by_workload_usd[workload] = self.by_workload_usd.get(workload, 0.0) + usd


def _expected_share(share: float | None) -> float:
    """The held share a plan's spot work assumed (``policies.cost_table``)."""
    return 1.0 if share is None or share <= 0 else share


def bill_plan(
    plan: Plan,
    workloads: WorkloadSet,
    actual_demand: Mapping[str, FloatArray],
    snapshot: MarketSnapshot,
    actuals: MarketActuals,
    *,
    costs: CostTable,
) -> Bill:
    """Price ``plan`` over its horizon against actual demand and market;
    ``costs`` is ``snapshot``'s cost table (any options)."""
    costs.check(snapshot, workloads)
    bill = Bill(unmet_unit_hours={n: 0.0 for n in workloads.names()})
    hours = plan.hours
    hazard = {p.pool.key: p.hazard.rate_per_hour for p in snapshot.pools}
    od_work_price = {
        w.name: costs.cheapest_usd_per_work_hour(w.name, Tier.ON_DEMAND)
        for w in workloads.workloads
    }
    committed_h = plan.committed_usd_per_hour()
    # Committed dollars belong to the workloads that use them, pro rata; the
    # unused part is the fleet's.
    bill.add(Tier.COMMITTED, None, committed_h * hours)

    a = plan.hourly_instances()
    hour_idx = a["hour"].to_numpy(dtype=int)
    inst = a["instances"].to_numpy(dtype=float)
    tiers = a["tier"].to_numpy()
    keys = a["pool_key"].to_numpy()
    names = a["workload"].to_numpy()
    work = a["work_per_hour"].to_numpy(dtype=float)
    price = a["usd_per_instance_hour"].to_numpy(dtype=float)

    held = np.ones(len(a))
    paid = price.copy()
    spot_rows = np.flatnonzero(tiers == Tier.SPOT.value)
    for i in spot_rows:
        held[i] = actuals.held(keys[i], hour_idx[i])
        paid[i] = actuals.price(keys[i], hour_idx[i], price[i])
    usd = inst * paid * np.where(tiers == Tier.SPOT.value, held, 1.0)
    for tier in (Tier.ON_DEMAND, Tier.SPOT):
        mask = tiers == tier.value
        for name in workloads.names():
            m = mask & (names == name)
            if m.any():
                bill.add(tier, name, float(usd[m].sum()))
    committed_mask = tiers == Tier.COMMITTED.value
    for name in workloads.names():
        m = committed_mask & (names == name)
        if m.any():
            share = float((inst[m] * price[m]).sum())
            bill.by_workload_usd[name] = bill.by_workload_usd.get(name, 0.0) + share
    bill.spot_instance_hours = float((inst[spot_rows] * held[spot_rows]).sum())
    bill.expected_revocations = float(
        sum(inst[i] * held[i] * hazard.get(keys[i], 0.0) for i in spot_rows)
    )
    # The plan's spot work assumed the snapshot's held share; what happened
    # replaces it (see the module docstring).
    expected = {p.pool.key: _expected_share(p.available_share) for p in snapshot.pools}
    share_ratio = np.ones(len(a))
    for i in spot_rows:
        share_ratio[i] = held[i] / expected.get(keys[i], 1.0)
    delivered = work * share_ratio
    budget_h = workloads.budget_usd_per_hour
    hourly_cost = np.bincount(hour_idx, weights=usd, minlength=hours)[:hours] + committed_h
    bill.budget_exceeded_hours = int(
        0 if budget_h is None else np.sum(hourly_cost > budget_h * (1 + 1e-9))
    )

    for w in workloads.workloads:
        mine = names == w.name
        if w.workload_class is WorkloadClass.SERVING:
            demand = np.asarray(actual_demand[w.name][:hours], dtype=float)
            got = np.bincount(hour_idx[mine], weights=delivered[mine], minlength=hours)[:hours]
            planned = np.bincount(hour_idx[mine], weights=work[mine], minlength=hours)[:hours]
            short = np.maximum(demand - got, 0.0)
            from_spot = np.minimum(short, planned - got)  # capacity spot failed to hold
            unit_price = od_work_price[w.name]
            top_up = short * unit_price
            if budget_h is not None:
                room = np.maximum(budget_h - hourly_cost, 0.0)
                allowed = np.minimum(top_up, room)
                bill.unmet_unit_hours[w.name] += float(((top_up - allowed) / unit_price).sum())
                top_up = allowed
                hourly_cost = hourly_cost + allowed
            bill.add(Tier.ON_DEMAND, w.name, float(top_up.sum()))
            spot_part = np.where(short > 0, from_spot / np.maximum(short, 1e-12), 0.0)
            bill.break_glass_usd += float((top_up * spot_part).sum())
            bill.forecast_error_usd += float((top_up * (1 - spot_part)).sum())
        else:
            deadline = w.deadline_hours or math.inf
            required = (w.unit_hours or 0.0) * min(1.0, hours / deadline)
            done = float(delivered[mine].sum())
            missing = max(required - done, 0.0)
            if missing > 1e-6:
                cost = missing * od_work_price[w.name]
                bill.add(Tier.ON_DEMAND, w.name, cost)
                bill.catch_up_usd += cost
                bill.catch_up_unit_hours[w.name] = missing
    return bill
