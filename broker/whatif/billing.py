"""Bill a plan against what actually happened, hour by hour.

Owns: ``Bill``, ``MarketActuals``, ``bill_plan`` (a plan and the published
reaction of the rules people use: an autoscaler tops serving up on on-demand)
and ``bill_reacted`` (a plan and the daemon's own reaction: lost spot goes
through the lifecycle manager, ``broker.whatif.reaction``). A plan is made on
a forecast; the bill uses the actual serving demand and the actual spot
market (price and the share of each hour spot could be held). Every billed
dollar is attributed to a tier and a workload.

``bill_plan``, the baselines' bill (on-demand, committed quantile, static
mix: each is a rule with an Auto Scaling group behind it, which replaces lost
spot and follows demand by launching on-demand):

- committed instances are paid every hour, used or not;
- on-demand allocations are paid as planned;
- spot allocations are paid only for the share of the hour spot was held, at
  the hour's spot price, and deliver work only for that share (a plan's spot
  work is what a held instance does: ``policies.cost_table`` does not scale
  it by the pool's expected share);
- serving demand above what was held is topped up on on-demand at the
  workload's cheapest on-demand price (an autoscaler's reaction; read from
  the snapshot's ``CostTable``, on-demand prices depend on none of its
  options); the part of
  the top-up caused by lost spot is *break-glass* dollars, the rest
  *forecast error* dollars. A top-up that would break the fleet's hourly
  budget is left unmet instead;
- training/batch work still missing at the deadline (or the horizon's end) is
  caught up on on-demand (dollars reported as ``catch_up_usd``) within the
  budgets over the period (the workload's, the fleet's): what they cannot
  buy is unmet, never bought past them (``budget_limits``); work done
  beyond the period's share of a job due after the period is carried to the
  next one at what it cost (``work_ahead_usd``, not charged to this period:
  a short what-if compares each scenario on the same share of the job).

``bill_reacted``, Spotfolio's bill: the plan's hours replayed through the
lifecycle manager (``broker.whatif.reaction.react``), and only what its
decisions bought is priced:

- committed and on-demand allocations as above;
- the plan's spot allocations at the hour's actual price, for the share of
  its whole instances the replay held (revoked ones hold nothing), with
  their work scaled the same way (the plan's fractional counts are billed,
  as the baselines' are; the replay rounds them as the daemon does to have
  instances to revoke);
- the lifecycle's launches for the instance-hours they ran: spot
  replacements and returns at their pool's actual price, break-glass at the
  pool's on-demand price (``break_glass_usd``: these dollars; the cap bounds
  the manager's estimate of their extra over spot), each with its work
  (``reaction.work_per_held_hour``);
- serving demand the held capacity does not meet is unmet where the plan had
  planned for it (lost spot the lifecycle did not make good: its decision);
  demand above the plan's own work (the forecast's error, which no notice
  announces) is topped up on on-demand as above, within the budget;
- training/batch catch-up at the deadline as above.

Must not: decide anything (it only prices decisions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from broker.lifecycle import LifecycleConfig
from broker.planning.plan import Plan
from broker.whatif.desired import DesiredByHour
from broker.whatif.reaction import Reaction, react, work_per_held_hour
from markets.model import MarketSnapshot, PoolSnapshot, Tier
from policies.cost_table import CostTable
from policies.workloads.spec import Workload, WorkloadClass, WorkloadSet

__all__ = ["Bill", "MarketActuals", "bill_plan", "bill_reacted", "bill_reaction", "launch_usd"]

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
    # Training/batch work done beyond this period's share of a job whose
    # deadline lies past the period: carried into the next period at what it
    # cost here, so not charged to this one (``total_usd`` is net of it).
    work_ahead_usd: float = 0.0
    work_ahead_unit_hours: dict[str, float] = field(default_factory=dict)
    metered_by_workload_usd: dict[str, float] = field(default_factory=dict)
    spot_instance_hours: float = 0.0
    expected_revocations: float = 0.0
    budget_exceeded_hours: int = 0
    # Demand left unmet because a top-up would have broken the fleet's hourly budget.
    budget_cut_unit_hours: float = 0.0
    # The budgets that left training/batch work unmet at the period's end.
    budget_limits: list[str] = field(default_factory=list)
    # bill_reacted only: the lifecycle's decisions by kind, the code that made
    # them, its break-glass ledger (extra dollars over spot, <= the cap) and
    # the spot launches markets refused.
    decisions: dict[str, int] | None = None
    decided_by: str | None = None
    break_glass_committed_usd: float | None = None
    refused_launches: int = 0

    def add(self, tier: Tier, workload: str | None, usd: float) -> None:
        self.by_tier_usd[tier.value] += usd
        self.total_usd += usd
        if workload is not None:
            self.by_workload_usd[workload] = self.by_workload_usd.get(workload, 0.0) + usd
            if tier is not Tier.COMMITTED:
                m = self.metered_by_workload_usd
                m[workload] = m.get(workload, 0.0) + usd

    def carry_ahead(self, workload: str, done: float, required: float) -> None:
        """Work ``done`` beyond this period's ``required`` share of a job:
        its metered (on-demand and spot) dollars, pro rata, are carried to
        the next period (commitments are paid every hour either way)."""
        if required <= 0 or done <= required * (1.0 + 1e-9):
            return
        ahead = done - required
        usd = self.metered_by_workload_usd.get(workload, 0.0) * ahead / done
        self.work_ahead_unit_hours[workload] = ahead
        self.work_ahead_usd += usd
        self.total_usd -= usd
        self.by_workload_usd[workload] = self.by_workload_usd.get(workload, 0.0) - usd


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
    hour_idx, inst, tiers, keys, names, work, price = _columns(a)

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
    # A planned spot instance does its work while held (see the module docstring).
    delivered = work * np.where(tiers == Tier.SPOT.value, held, 1.0)
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
            top_up, hourly_cost = _within_budget(bill, w.name, top_up, unit_price,
                                                 budget_h, hourly_cost)  # fmt: skip
            bill.add(Tier.ON_DEMAND, w.name, float(top_up.sum()))
            spot_part = np.where(short > 0, from_spot / np.maximum(short, 1e-12), 0.0)
            bill.break_glass_usd += float((top_up * spot_part).sum())
            bill.forecast_error_usd += float((top_up * (1 - spot_part)).sum())
        else:
            _settle_job(
                bill, w, workloads, float(delivered[mine].sum()), hours, od_work_price[w.name]
            )
    return bill


def bill_reacted(
    plan: Plan,
    workloads: WorkloadSet,
    actual_demand: Mapping[str, FloatArray],
    snapshot: MarketSnapshot,
    actuals: MarketActuals,
    *,
    costs: CostTable,
    lifecycle_costs: CostTable | None = None,
    config: LifecycleConfig | None = None,
    desired: DesiredByHour | None = None,
) -> Bill:
    """Replay ``plan`` through the lifecycle manager (``config``: its
    settings, the defaults if ``None``) and price what its decisions bought
    (see the module docstring); ``costs`` is ``snapshot``'s cost table,
    ``lifecycle_costs`` the manager's if the caller holds it
    (``reaction.lifecycle_cost_options``), ``desired`` the plan's rounded
    hours if it bills the same plan more than once."""
    costs.check(snapshot, workloads)
    reaction = react(
        plan,
        workloads,
        snapshot,
        actuals,
        costs=costs,
        lifecycle_costs=lifecycle_costs,
        config=config,
        desired=desired,
    )
    return bill_reaction(plan, reaction, workloads, actual_demand, snapshot, actuals, costs=costs)


def bill_reaction(
    plan: Plan,
    reaction: Reaction,
    workloads: WorkloadSet,
    actual_demand: Mapping[str, FloatArray],
    snapshot: MarketSnapshot,
    actuals: MarketActuals,
    *,
    costs: CostTable,
) -> Bill:
    """Price ``reaction`` (a replay of ``plan``, ``react``) over the plan's hours."""
    bill = Bill(unmet_unit_hours={n: 0.0 for n in workloads.names()})
    bill.decisions = dict(reaction.decisions)
    bill.decided_by = reaction.decided_by
    bill.break_glass_committed_usd = reaction.break_glass_committed_usd
    bill.refused_launches = reaction.refused_launches
    hours = plan.hours
    pools = snapshot.by_key()
    hazard = {k: p.hazard.rate_per_hour for k, p in pools.items()}
    od_work_price = {
        w.name: costs.cheapest_usd_per_work_hour(w.name, Tier.ON_DEMAND)
        for w in workloads.workloads
    }
    committed_h = plan.committed_usd_per_hour()
    bill.add(Tier.COMMITTED, None, committed_h * hours)

    # The plan's own rows: spot for the share of its whole instances held.
    a = plan.hourly_instances()
    hour_idx, inst, tiers, keys, names, work, price = _columns(a)
    held = np.ones(len(a))
    paid = price.copy()
    spot_rows = np.flatnonzero(tiers == Tier.SPOT.value)
    spot = Tier.SPOT.value
    for i in spot_rows:
        k = (int(hour_idx[i]), str(names[i]), str(keys[i]), spot)
        whole = reaction.plan_instances.get(k, 0)
        # A fraction the daemon's rounding left at zero here: its share of the
        # pool's hour, as the baselines' bill reads it.
        held[i] = (
            reaction.plan_held.get(k, 0.0) / whole if whole else actuals.held(keys[i], hour_idx[i])
        )
        paid[i] = actuals.price(keys[i], hour_idx[i], price[i])
    usd = inst * paid * np.where(tiers == spot, held, 1.0)
    delivered = work * np.where(tiers == spot, held, 1.0)
    hourly_cost = np.bincount(hour_idx, weights=usd, minlength=hours)[:hours] + committed_h
    got: dict[str, FloatArray] = {}
    for name in workloads.names():
        mine = names == name
        for tier in (Tier.ON_DEMAND, Tier.SPOT):
            m = mine & (tiers == tier.value)
            if m.any():
                bill.add(tier, name, float(usd[m].sum()))
        m = mine & (tiers == Tier.COMMITTED.value)
        if m.any():
            share = float((inst[m] * price[m]).sum())
            bill.by_workload_usd[name] = bill.by_workload_usd.get(name, 0.0) + share
        got[name] = np.bincount(hour_idx[mine], weights=delivered[mine], minlength=hours)[
            :hours
        ].astype(float)
    bill.spot_instance_hours = float((inst[spot_rows] * held[spot_rows]).sum())
    bill.expected_revocations = float(
        sum(inst[i] * held[i] * hazard.get(keys[i], 0.0) for i in spot_rows)
    )

    # The lifecycle's launches, for the instance-hours they ran.
    for (h, name, key, tier_name), ih in reaction.launched.items():
        if h >= hours or ih <= 0 or name not in got:
            continue
        tier = Tier(tier_name)
        unit_usd = launch_usd(pools.get(key), actuals, key, h, tier)
        if tier is Tier.SPOT:
            bill.spot_instance_hours += ih
            bill.expected_revocations += ih * hazard.get(key, 0.0)
        cost = ih * unit_usd
        bill.add(tier, name, cost)
        if tier is Tier.ON_DEMAND:
            bill.break_glass_usd += cost
        hourly_cost[h] += cost
        got[name][h] += ih * work_per_held_hour(costs, name, key, tier)

    budget_h = workloads.budget_usd_per_hour
    bill.budget_exceeded_hours = int(
        0 if budget_h is None else np.sum(hourly_cost > budget_h * (1 + 1e-9))
    )
    for w in workloads.workloads:
        mine = names == w.name
        if w.workload_class is WorkloadClass.SERVING:
            demand = np.asarray(actual_demand[w.name][:hours], dtype=float)
            planned = np.bincount(hour_idx[mine], weights=work[mine], minlength=hours)[:hours]
            short = np.maximum(demand - got[w.name], 0.0)
            # Above the plan's own work: the forecast's error, topped up; the
            # rest is lost spot the lifecycle's decisions left unmet.
            beyond = np.minimum(short, np.maximum(demand - planned, 0.0))
            bill.unmet_unit_hours[w.name] += float((short - beyond).sum())
            unit_price = od_work_price[w.name]
            top_up = beyond * unit_price
            top_up, hourly_cost = _within_budget(bill, w.name, top_up, unit_price,
                                                 budget_h, hourly_cost)  # fmt: skip
            bill.add(Tier.ON_DEMAND, w.name, float(top_up.sum()))
            bill.forecast_error_usd += float(top_up.sum())
        else:
            _settle_job(bill, w, workloads, float(got[w.name].sum()), hours, od_work_price[w.name])
    return bill


def launch_usd(
    snap: PoolSnapshot | None, actuals: MarketActuals, key: str, hour: int, tier: Tier
) -> float:
    """What one instance-hour of a lifecycle launch costs: spot at the hour's
    actual price (the listed one where none is recorded), other tiers at the
    snapshot's price."""
    if tier is Tier.SPOT:
        listed = None if snap is None else snap.spot_usd_per_hour
        return actuals.price(key, hour, listed if listed is not None else 0.0)
    return 0.0 if snap is None else (snap.price(tier) or snap.on_demand_usd_per_hour)


def _columns(
    a: pd.DataFrame,
) -> tuple[npt.NDArray[np.int_], FloatArray, npt.NDArray[np.object_], npt.NDArray[np.object_],
           npt.NDArray[np.object_], FloatArray, FloatArray]:  # fmt: skip
    """A plan's hourly rows as arrays: hour, instances, tier, pool key,
    workload, work per hour, price per instance-hour."""
    return (
        a["hour"].to_numpy(dtype=int),
        a["instances"].to_numpy(dtype=float),
        a["tier"].to_numpy(),
        a["pool_key"].to_numpy(),
        a["workload"].to_numpy(),
        a["work_per_hour"].to_numpy(dtype=float),
        a["usd_per_instance_hour"].to_numpy(dtype=float),
    )


# numpy types sums of float64 arrays as floating[Any] (a numpy stub, not ours)
Floats = npt.NDArray[np.floating[Any]]


def _within_budget(
    bill: Bill,
    name: str,
    top_up: Floats,
    unit_price: float,
    budget_h: float | None,
    hourly_cost: Floats,
) -> tuple[FloatArray, FloatArray]:
    """The hourly top-up the fleet's hourly budget allows (the rest is
    counted unmet), and the hourly cost with it."""
    if budget_h is None:
        return np.asarray(top_up, dtype=np.float64), np.asarray(hourly_cost, dtype=np.float64)
    room = np.maximum(budget_h - hourly_cost, 0.0)
    allowed = np.asarray(np.minimum(top_up, room), dtype=np.float64)
    cut = float(((top_up - allowed) / unit_price).sum())
    bill.unmet_unit_hours[name] += cut
    bill.budget_cut_unit_hours += cut
    return allowed, np.asarray(hourly_cost + allowed, dtype=np.float64)


def _settle_job(
    bill: Bill, w: Workload, workloads: WorkloadSet, done: float, hours: int, unit_price: float
) -> None:
    """A training/batch job at the period's end: work ahead of its share
    carried, work behind caught up on on-demand within the budgets that hold
    over the period (module docstring); what they cannot buy is unmet."""
    deadline = w.deadline_hours or math.inf
    required = (w.unit_hours or 0.0) * w.due_share(hours)
    missing = max(required - done, 0.0)
    if hours < deadline:
        bill.carry_ahead(w.name, done, required)
    if missing <= 1e-6:
        return
    room, limits = _budget_room(bill, w, workloads, hours)
    cost = missing * unit_price
    if cost > room * (1 + 1e-9):
        bought = max(room, 0.0) / unit_price if unit_price > 0 else 0.0
        bill.unmet_unit_hours[w.name] = bill.unmet_unit_hours.get(w.name, 0.0) + missing - bought
        bill.budget_limits.extend(x for x in limits if x not in bill.budget_limits)
        missing, cost = bought, bought * unit_price
    if missing > 1e-6:
        bill.add(Tier.ON_DEMAND, w.name, cost)
        bill.catch_up_usd += cost
        bill.catch_up_unit_hours[w.name] = missing


def _budget_room(
    bill: Bill, w: Workload, workloads: WorkloadSet, hours: int
) -> tuple[float, list[str]]:
    """Dollars the budgets over the period leave for ``w`` (the workload's
    total and hourly budgets, the fleet's total), and the tightest's name."""
    spent = bill.by_workload_usd.get(w.name, 0.0)
    room: list[tuple[float, str]] = []
    if w.budget_usd is not None:
        room.append((w.budget_usd - spent, f"{w.name}: budget ${w.budget_usd:,.2f}"))
    if w.budget_usd_per_hour is not None:
        room.append((w.budget_usd_per_hour * hours - spent,
                     f"{w.name}: budget ${w.budget_usd_per_hour:,.2f}/h"))  # fmt: skip
    if workloads.budget_usd is not None:
        room.append((workloads.budget_usd - bill.total_usd,
                     f"fleet budget ${workloads.budget_usd:,.2f}"))  # fmt: skip
    if not room:
        return math.inf, []
    least = min(r for r, _ in room)
    return least, [n for r, n in room if r <= least + 1e-9]
