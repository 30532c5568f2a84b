"""What to do, read off a what-if: the decisions a platform engineer signs.

Owns: ``Advice`` and its parts, made by ``advise`` from a ``WhatIfResult``:

- ``CommitmentBuy``: the commitments to buy (the whole-period plan's buy
  decision, or with owned commitments what it buys on top of them), each
  passed through the lookback rule (``broker.whatif.lookback``: enough days
  of usage that can use it, sized on that usage net of what is owned, in the
  regions allowed; the scopes it refuses are listed with the days they
  need), with the term figures ``broker.planning.optimizer.commitments.appraise``
  gave them (obligation, monthly saving against the spot/on-demand mix,
  break-even utilisation) and the rule's (upfront, hourly, expected
  utilisation P10/P50/P90, net saving over the term, payback month);
- ``PoolCount``: whole instances per pool and tier for every hour of the
  first week of Spotfolio's replayed plan: per pool-hour, the plan's
  instances of every workload there summed and rounded up (``ceil``; a count
  within ``COUNT_EPS`` of a whole number is that number);
- ``CostShare``: Spotfolio's billed dollars per workload and per team tag
  (``Workload.team``, else its ``team`` tag; ``NO_TEAM`` without). The bill
  charges committed dollars to the workloads that used them; the unused part
  is spread over those workloads pro rata to their committed use (one
  ``UNUSED`` row when nobody used any), so the rows add up to the billed total;
- ``Reconciliation``: the three totals shown (the plan's objective, the
  replayed plan's planned dollars, the bill) each defined, and what separates
  them, in dollars that add up.

Must not: plan, bill or sample (``broker.whatif.run``, ``billing``, ``risk``)
or print (the CLI renders ``Advice.to_dict``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from broker.planning.optimizer.savings_plans import pool_rate_usd_per_instance_hour
from broker.planning.plan import Commitment, Plan
from broker.whatif.billing import Bill
from broker.whatif.lookback import (
    LOOKBACK_DAYS,
    MIN_LOOKBACK_DAYS,
    Recommendation,
    Refusal,
    ScopeGroup,
    plan_steps,
    recommend,
)
from broker.whatif.risk import sample_demand
from broker.whatif.run import WhatIfResult
from markets.commitments import CommitmentKind, OwnedCommitment, term_hours
from markets.keys import CommitmentKey, PoolKey
from markets.model import MarketSnapshot, Tier
from policies.cost_table import CostEntry
from policies.workloads.spec import WorkloadClass, WorkloadSet

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "COUNT_EPS",
    "FIRST_WEEK_HOURS",
    "NO_TEAM",
    "UNUSED",
    "Advice",
    "CommitmentBuy",
    "CostShare",
    "PoolCount",
    "Reconciliation",
    "advise",
    "whole_instances",
]

FIRST_WEEK_HOURS = 168
COUNT_EPS = 1e-6  # 3.0000001 instances is 3 (solver tolerance), not 4
NO_TEAM = "(no team)"
UNUSED = "(unused commitments)"
SPOTFOLIO = "spotfolio"


@dataclass(frozen=True)
class CommitmentBuy:
    """One commitment to buy, with its term figures (``Commitment``'s docs)."""

    provider: str
    region: str
    instance_type: str
    family: str
    term_years: int
    payment: str
    count: int
    usd_per_instance_hour: float
    obligation_usd: float | None
    monthly_saving_usd: float | None
    utilisation: float | None
    breakeven_utilisation: float | None
    savings_plan: bool = False  # ``count`` is then $/h steps at ``usd_per_instance_hour``
    # The lookback rule's figures (``broker.whatif.lookback``); None: not sized by it.
    terms: Recommendation | None = None

    @property
    def size(self) -> str:
        """What to buy: ``count`` instances, or a Savings Plan's $/h."""
        if self.savings_plan:
            return f"${self.count * self.usd_per_instance_hour:,.3f}/h"
        return str(self.count)

    @property
    def group(self) -> str:
        return str(CommitmentKey(self.provider, self.region, self.instance_type))

    def to_dict(self) -> dict[str, object]:
        return {
            "provider": self.provider,
            "region": self.region,
            "instance_type": self.instance_type,
            "family": self.family,
            "group": self.group,
            "term_years": self.term_years,
            "payment": self.payment,
            "count": self.count,
            "kind": "savings_plan" if self.savings_plan else "instances",
            "size": self.size,
            "usd_per_instance_hour": round(self.usd_per_instance_hour, 6),
            "obligation_usd": _r(self.obligation_usd, 2),
            "monthly_saving_usd": _r(self.monthly_saving_usd, 2),
            "utilisation": _r(self.utilisation, 6),
            "breakeven_utilisation": _r(self.breakeven_utilisation, 6),
            **self._terms(),
        }

    def _terms(self) -> dict[str, object]:
        t = self.terms
        if t is None:
            return {}
        band = t.utilisation_p10_p50_p90
        return {
            "upfront_usd": round(t.upfront_usd, 2),
            "hourly_usd": round(t.hourly_usd, 6),
            "breakeven_utilisation_on_demand": _r(t.breakeven_utilisation, 6),
            "utilisation_p10": None if band is None else round(band[0], 6),
            "utilisation_p50": None if band is None else round(band[1], 6),
            "utilisation_p90": None if band is None else round(band[2], 6),
            "net_saving_term_usd": round(t.net_saving_term_usd, 2),
            "payback_month": t.payback_month,
            "usage_days": t.usage_days,
            "lookback_days": t.lookback_days,
        }


@dataclass(frozen=True)
class PoolCount:
    """Whole instances of one pool and tier, hour by hour over the first week
    (committed: of one commitment group, ``pool_key`` the group)."""

    pool_key: str
    tier: str
    instance_type: str
    units_per_instance: int
    workloads: tuple[str, ...]
    by_hour: tuple[int, ...]

    @property
    def max_instances(self) -> int:
        return max(self.by_hour, default=0)

    @property
    def instance_hours(self) -> int:
        return sum(self.by_hour)

    def to_dict(self) -> dict[str, object]:
        parts = self.pool_key.split("/")
        return {
            "pool_key": self.pool_key,  # committed: the commitment group (any zone)
            "provider": parts[0],
            "region": parts[1],
            "zone": parts[2] if len(parts) == 4 else None,
            "instance_type": self.instance_type,
            "tier": self.tier,
            "units_per_instance": self.units_per_instance,
            "workloads": list(self.workloads),
            "max_instances": self.max_instances,
            "min_instances": min(self.by_hour, default=0),
            "mean_instances": round(self.instance_hours / max(len(self.by_hour), 1), 3),
            "instance_hours": self.instance_hours,
            "instances_by_hour": list(self.by_hour),
        }


@dataclass(frozen=True)
class CostShare:
    """Billed dollars of one workload (or team): its own, and its share of
    the unused commitments."""

    name: str
    team: str | None
    total_usd: float
    unused_commitment_usd: float
    unmet_unit_hours: float

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "team": self.team,
            "total_usd": round(self.total_usd, 2),
            "unused_commitment_usd": round(self.unused_commitment_usd, 2),
            "unmet_unit_hours": round(self.unmet_unit_hours, 3),
        }


@dataclass(frozen=True)
class Reconciliation:
    """The three totals, defined, and what separates them (each list of
    (what, dollars) adds up to the difference it explains)."""

    objective_usd: float  # the whole-period plan's solver objective
    period_planned_usd: float  # that plan's own dollars at its prices
    planned_usd: float  # the replayed loop's plan at its planned prices
    billed_usd: float  # that plan billed on actual demand and market
    objective_less_planned: tuple[tuple[str, float], ...]
    billed_less_planned: tuple[tuple[str, float], ...]

    DEFINITIONS: ClassVar[dict[str, str]] = {
        "objective_usd": "the whole-period plan's solver objective: its dollars at planned "
        "prices plus penalties that are not billed (unmet demand, churn and restarts, the "
        "value of time of each job's finish hour), less a training gang's spot in the hours "
        "its pool is expected to lose it",
        "period_planned_usd": "the whole-period plan's dollars at its planned prices "
        "(commitments every hour)",
        "planned_usd": "the replayed planning loop's plan (re-planned on each step's forecast "
        "and snapshot) at its planned prices, commitments every hour",
        "billed_usd": "that plan billed on the actual demand and market, after the "
        "lifecycle's reactions to lost spot",
    }

    def to_dict(self) -> dict[str, object]:
        return {
            "objective_usd": round(self.objective_usd, 2),
            "period_planned_usd": round(self.period_planned_usd, 2),
            "planned_usd": round(self.planned_usd, 2),
            "billed_usd": round(self.billed_usd, 2),
            "objective_less_planned": [
                {"what": w, "usd": round(v, 2)} for w, v in self.objective_less_planned
            ],
            "billed_less_planned": [
                {"what": w, "usd": round(v, 2)} for w, v in self.billed_less_planned
            ],
            "definitions": dict(self.DEFINITIONS),
        }


@dataclass(frozen=True)
class Advice:
    """The "what to do" section of a what-if (module docstring)."""

    commitments: tuple[CommitmentBuy, ...]
    commitments_from: str  # "period plan" or "on top of what is owned"
    first_week_hours: int
    pools: tuple[PoolCount, ...]
    by_workload: tuple[CostShare, ...]
    by_team: tuple[CostShare, ...]
    reconciliation: Reconciliation
    # The lookback rule on every scope the plan would buy (``lookback``).
    lookback: tuple[Recommendation, ...] = ()
    refused: tuple[Refusal, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "commitments": [c.to_dict() for c in self.commitments],
            "commitments_from": self.commitments_from,
            "commitment_rule": {
                "min_usage_days": MIN_LOOKBACK_DAYS,
                "lookback_days": list(LOOKBACK_DAYS),
                "rule": "a 1- or 3-year commitment only from at least "
                f"{MIN_LOOKBACK_DAYS} days of the usage that can use it, in the regions "
                "allowed; its count the most saving over the longest lookback covered, on "
                "the hourly usage net of what is owned, at most the plan's buy",
                "sized": [r.to_dict() for r in self.lookback],
                "refused": [r.to_dict() for r in self.refused],
            },
            "first_week": {
                "hours": self.first_week_hours,
                "rounding": "whole instances: the plan's instances per pool-hour summed over "
                "workloads, rounded up; committed rows count the committed instances in use "
                "per commitment group (all bought are paid)",
                "pools": [p.to_dict() for p in self.pools],
            },
            "cost_by_workload": [c.to_dict() for c in self.by_workload],
            "cost_by_team": [c.to_dict() for c in self.by_team],
            "reconciliation": self.reconciliation.to_dict(),
        }


def advise(
    result: WhatIfResult, *, allowed_regions: frozenset[str] | None = None, seed: int = 0
) -> Advice:
    """The advice of ``result`` (its ``spotfolio`` scenario and, for the buy
    decision and the objective, the whole-period plan in ``result.inputs``).
    Every buy passes the lookback rule (``broker.whatif.lookback``):
    ``allowed_regions`` (``None``: any) bounds where, ``seed`` draws the
    expected utilisation's demand samples (``broker.whatif.risk``)."""
    if result.inputs is None:
        raise ValueError("a what-if result without its inputs (run_whatif keeps them)")
    inputs = result.inputs
    ours = result.scenario(SPOTFOLIO)
    snapshot = inputs.snapshot
    if result.owned:
        buys, source = result.next_buy, "on top of what is owned"
    else:
        buys, source = inputs.period_plan.commitments, "period plan"
    hours = min(FIRST_WEEK_HOURS, ours.plan.hours)
    # instance commitments first: a savings plan is sized net of those
    # recommended in its scope as well as those owned
    wanted = [c for c in buys if c.instances > 0]
    by_group: dict[str, Recommendation | Refusal] = {}
    for c in sorted(wanted, key=lambda c: c.is_savings_plan):
        bought = {g: r.count for g, r in by_group.items() if isinstance(r, Recommendation)}
        by_group[c.group] = _ruled(result, c, allowed_regions, seed, bought)
    ruled = [(c, by_group[c.group]) for c in wanted]
    sized = tuple(r for _, r in ruled if isinstance(r, Recommendation))
    return Advice(
        commitments=tuple(
            _buy(c, snapshot, r) for c, r in ruled if isinstance(r, Recommendation) and r.count > 0
        ),
        lookback=sized,
        refused=tuple(r for _, r in ruled if isinstance(r, Refusal)),
        commitments_from=source,
        first_week_hours=hours,
        pools=whole_instances(ours.plan, snapshot, hours),
        by_workload=(shares := _by_workload(ours.plan, ours.bill, inputs.workloads)),
        by_team=_by_team(shares),
        reconciliation=_reconcile(inputs.period_plan, ours.plan, ours.bill, inputs.workloads),
    )


def _buy(c: Commitment, snapshot: MarketSnapshot, rule: Recommendation) -> CommitmentBuy:
    k = c.key
    pools = snapshot.by_key()
    snap = pools.get(c.pool_key)
    family = snap.instance.family if snap is not None else k.instance_type.split(".")[0]
    # the plan's term figures scale with the count where the rule bought fewer
    scale = rule.count / c.instances if c.instances else 1.0
    obligation = None if c.obligation_usd is None else c.obligation_usd * scale
    return CommitmentBuy(
        k.provider, k.region, k.instance_type, family, c.term_years, c.payment, rule.count,
        c.usd_per_instance_hour, obligation, c.monthly_saving_usd if scale == 1.0 else None,
        c.utilisation, c.breakeven_utilisation, c.is_savings_plan, rule,
    )  # fmt: skip


def _ruled(
    result: WhatIfResult,
    c: Commitment,
    allowed: frozenset[str] | None,
    seed: int,
    bought: Mapping[str, int],
) -> Recommendation | Refusal:
    """The lookback rule on the plan's buy ``c``: the hourly instances of the
    serving demand that can use its group, from its first hour seen to the
    period's end, and the owned instances active each hour. A savings plan's
    usage is in its $/h steps, net of the instance commitments owned and
    ``bought`` (group -> instances recommended) in its scope (``_plan_usage``)."""
    inputs = result.inputs
    assert inputs is not None
    end = result.start + timedelta(hours=result.hours)
    index = inputs.demand.index
    keep = np.asarray(index < pd.Timestamp(end), dtype=bool)
    usable: list[tuple[str, float]] = []
    for w in inputs.workloads.of_class(WorkloadClass.SERVING):
        e = next((e for e in inputs.costs.entries(w.name) if _in_scope(e, c)), None)
        if e is not None and e.work_per_instance_hour > 0:
            usable.append((w.name, e.work_per_instance_hour))
    total = np.zeros(int(keep.sum()))
    for name, per in usable:
        s = inputs.demand.serving.get(name)
        if s is not None:
            total += np.nan_to_num(s.to_numpy(dtype=float)[keep] / per, nan=0.0)
    seen = np.flatnonzero(total > COUNT_EPS)
    first = int(seen[0]) if len(seen) else len(total)
    hours_seen = index[keep][first:]
    owned = _owned_at(result.owned, c.group, hours_seen)
    snap = inputs.snapshot.by_key().get(c.pool_key)
    od = snap.on_demand_usd_per_hour if snap is not None else 0.0
    if c.is_savings_plan:
        total, od = _plan_usage(result, c, keep, bought)
        owned = np.zeros(len(total))
    return recommend(
        c.group, c.key.region, plan_count=c.instances, savings_plan=c.is_savings_plan,
        usage=total[first:], owned=owned, usd_per_unit_hour=c.usd_per_instance_hour,
        alternative_usd=od, term_hours=term_hours(c.term_years), term_years=c.term_years,
        payment=c.payment, allowed_regions=allowed,
        samples=_samples(result, usable, c.group, seed) if usable else (),
    )  # fmt: skip


def _plan_usage(
    result: WhatIfResult, c: Commitment, keep: npt.NDArray[np.bool_], bought: Mapping[str, int]
) -> tuple[FloatArray, float]:
    """A savings plan's hourly usage in its $/h steps, and what a step of it
    would cost on-demand: per instance group in its scope, the serving
    instances there less the instances owned and ``bought`` in the group,
    each priced at the plan's rate for the group's pool (``savings_plans``)."""
    inputs = result.inputs
    assert inputs is not None
    index = inputs.demand.index[keep]
    kind = CommitmentKind.SAVINGS_PLAN_COMPUTE
    if c.key.instance_type.startswith("savings-plan-ec2-"):
        kind = CommitmentKind.SAVINGS_PLAN_EC2
    pools = inputs.snapshot.by_key()
    used: dict[str, tuple[CostEntry, FloatArray]] = {}
    for w in inputs.workloads.of_class(WorkloadClass.SERVING):
        e = next((e for e in inputs.costs.entries(w.name) if _in_scope(e, c)), None)
        s = inputs.demand.serving.get(w.name)
        if e is None or s is None or e.work_per_instance_hour <= 0:
            continue
        n = np.nan_to_num(s.to_numpy(dtype=float)[keep] / e.work_per_instance_hour, nan=0.0)
        g = str(e.key.group)
        prev = used.get(g)
        used[g] = (e, n if prev is None else prev[1] + n)
    groups = []
    for g, (e, n) in used.items():
        snap = pools.get(e.pool_key)
        if snap is None:
            continue
        od = snap.on_demand_usd_per_hour
        rate = pool_rate_usd_per_instance_hour(snap, od, kind, c.term_years, c.payment)
        if rate is not None:
            groups.append(ScopeGroup(n, _owned_at(result.owned, g, index) + bought.get(g, 0),
                                     rate, od))  # fmt: skip
    return plan_steps(groups, c.usd_per_instance_hour)


def _in_scope(e: CostEntry, c: Commitment) -> bool:
    """Whether ``e``'s pool is usage ``c`` can cover: its group (an instance
    commitment, with a committed price), or a savings plan's scope (Compute:
    any AWS pool; EC2 Instance: its family in its region)."""
    k = e.key
    if not c.is_savings_plan:
        return str(k.group) == c.group and e.usd_per_work_hour[Tier.COMMITTED] is not None
    if k.provider != c.key.provider:
        return False
    kind = c.key.instance_type
    if kind.startswith("savings-plan-ec2-"):
        family = kind.removeprefix("savings-plan-ec2-")
        return k.region == c.key.region and e.instance_type.split(".")[0] == family
    return True


def _owned_at(
    owned: tuple[OwnedCommitment, ...], group: str, hours: pd.DatetimeIndex
) -> FloatArray:
    out = np.zeros(len(hours))
    for o in owned:
        if o.group == group and o.count:
            active = (hours >= pd.Timestamp(o.start)) & (hours < pd.Timestamp(o.end))
            out += o.count * np.asarray(active, dtype=float)
    return out


SAMPLES = 20  # demand samples for a buy's expected utilisation
STREAM = 17  # their random stream, apart from the risk band's (16)


def _samples(
    result: WhatIfResult, usable: list[tuple[str, float]], group: str, seed: int
) -> list[tuple[FloatArray, FloatArray]]:
    """(instances, owned) per hour of the period in ``SAMPLES`` draws of the
    serving demand from the forecast's band (``risk.sample_demand``)."""
    inputs = result.inputs
    assert inputs is not None
    hours = pd.date_range(result.start, periods=result.hours, freq="h", tz="UTC")
    owned = _owned_at(result.owned, group, hours)
    out = []
    for i in range(SAMPLES):
        rng = np.random.default_rng(np.random.SeedSequence([seed, STREAM, i]))
        drawn = sample_demand(rng, inputs, result.hours)
        u = np.zeros(result.hours)
        for name, per in usable:
            if name in drawn:
                u += drawn[name][: result.hours] / per
        out.append((u, owned))
    return out


def whole_instances(plan: Plan, snapshot: MarketSnapshot, hours: int) -> tuple[PoolCount, ...]:
    """Whole instances per (pool, tier) for each of the plan's first ``hours``
    (module docstring: the pool-hour's instances summed, rounded up)."""
    a = plan.hourly_instances()
    a = a[a["hour"] < hours]
    counts: dict[tuple[str, str], np.ndarray] = {}
    names: dict[tuple[str, str], set[str]] = defaultdict(set)
    for key, tier, hour, n, w in zip(a["pool_key"], a["tier"], a["hour"], a["instances"],
                                     a["workload"], strict=True):  # fmt: skip
        cell = (_where(str(key), str(tier)), str(tier))
        arr = counts.setdefault(cell, np.zeros(hours))
        arr[int(hour)] += float(n)
        names[cell].add(str(w))
    units_of = {p.pool.instance_type: p.instance.units for p in snapshot.pools}
    out = []
    for (key, tier), arr in sorted(counts.items()):
        whole = tuple(math.ceil(x - COUNT_EPS) if x > COUNT_EPS else 0 for x in arr)
        itype = key.rsplit("/", 1)[-1]
        units = units_of.get(itype, 1)
        out.append(PoolCount(key, tier, itype, units, tuple(sorted(names[(key, tier)])), whole))
    return tuple(out)


def _where(pool_key: str, tier: str) -> str:
    """A pool key, or for committed capacity its commitment group: a
    commitment serves any zone of its region, and the plan's rows name a
    representative pool that may change from one re-plan to the next."""
    if tier != "committed":
        return pool_key
    k = PoolKey.parse(pool_key)
    return str(CommitmentKey(k.provider, k.region, k.instance_type))


def _team(w_team: str | None, tags: Mapping[str, str]) -> str | None:
    return w_team or tags.get("team")


def _by_workload(plan: Plan, bill: Bill, workloads: WorkloadSet) -> tuple[CostShare, ...]:
    own = {n: bill.by_workload_usd.get(n, 0.0) for n in workloads.names()}
    # committed dollars each workload used, as the bill charges them (its
    # committed rows at their price); the rest of the commitments is unused
    a = plan.hourly_instances()
    committed = a[a["tier"] == "committed"]
    usd = committed["instances"].to_numpy(dtype=float) * committed[
        "usd_per_instance_hour"
    ].to_numpy(dtype=float)
    used: dict[str, float] = defaultdict(float)
    for name, x in zip(committed["workload"], usd, strict=True):
        used[str(name)] += float(x)
    used_total = sum(used.values())
    unused = bill.total_usd - sum(own.values())
    out = []
    for w in workloads.workloads:
        share = unused * used[w.name] / used_total if used_total > 1e-9 else 0.0
        out.append(CostShare(w.name, _team(w.team, w.tags), own[w.name] + share, share,
                             bill.unmet_unit_hours.get(w.name, 0.0)))  # fmt: skip
    if used_total <= 1e-9 and abs(unused) > 0.005:
        out.append(CostShare(UNUSED, None, unused, unused, 0.0))
    return tuple(out)


def _by_team(rows: tuple[CostShare, ...]) -> tuple[CostShare, ...]:
    total: dict[str, list[float]] = {}
    for r in rows:
        team = NO_TEAM if r.name == UNUSED or r.team is None else r.team
        t = total.setdefault(team, [0.0, 0.0, 0.0])
        t[0] += r.total_usd
        t[1] += r.unused_commitment_usd
        t[2] += r.unmet_unit_hours
    return tuple(CostShare(k, k, *v) for k, v in sorted(total.items()))


def _reconcile(period: Plan, planned: Plan, bill: Bill, workloads: WorkloadSet) -> Reconciliation:
    period_planned = period.planned_cost_usd()
    unmet_penalty = 0.0
    for w in workloads.workloads:
        unmet = period.unmet_unit_hours.get(w.name, 0.0)
        unmet_penalty += unmet * w.unmet_penalty_usd_per_unit_hour
    time_usd = period.meta_number("value_of_time_usd") or 0.0  # optimizer.finish
    # The objective counts a gang's spot only in the share of hours its pool
    # holds spot (``broker.planning.optimizer.placement``); the plan's rows
    # price every planned hour.
    unheld = period.meta_number("gang_spot_unheld_usd") or 0.0
    rest = period.objective_usd - period_planned - unmet_penalty - time_usd + unheld
    obj_parts: list[tuple[str, float]] = []
    if abs(unmet_penalty) > 0.005:
        obj_parts.append(("unmet-demand penalty", unmet_penalty))
    if abs(time_usd) > 0.005:
        obj_parts.append(("value of time: each job's finish hour at its $/h", time_usd))
    if unheld > 0.005:
        obj_parts.append(("a gang's spot in the hours its pool is expected to lose it", -unheld))
    obj_parts.append(("churn, restart and other penalties", rest))
    planned_usd = planned.planned_cost_usd()
    parts = [
        ("break-glass on-demand (lifecycle)", bill.break_glass_usd),
        ("top-up for demand above the forecast", bill.forecast_error_usd),
        ("job catch-up at the deadline", bill.catch_up_usd),
        ("work carried to the next period", -bill.work_ahead_usd),
    ]
    known = sum(v for _, v in parts)
    parts.append(
        ("actual spot prices and held share, lifecycle spot replacements",
         bill.total_usd - planned_usd - known)
    )  # fmt: skip
    parts = [(w, v) for w, v in parts if abs(v) > 0.005]
    return Reconciliation(period.objective_usd, period_planned, planned_usd, bill.total_usd,
                          tuple(obj_parts), tuple(parts))  # fmt: skip


def _r(x: float | None, digits: int) -> float | None:
    return None if x is None else round(float(x), digits)
