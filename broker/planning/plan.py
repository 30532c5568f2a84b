"""A plan: what to hold, on which tier, in which pool, each period, and why.

Owns: ``Commitment``, ``WorkloadExplanation``, ``Plan`` (with its allocation
table) and the plan's own accounting (planned cost by tier, unit-hours by
tier). Billing a plan against what actually happened is ``broker.whatif.billing``.

Must not: solve or call any cloud.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from markets.blocks import CapacityBlock
from markets.keys import CommitmentKey
from markets.model import Tier

__all__ = [
    "ALLOCATION_COLUMNS",
    "PLAN_STATUSES",
    "Commitment",
    "Plan",
    "PlanMetaValue",
    "WorkloadExplanation",
    "worst_status",
]

PlanMetaValue = float | int | str | None  # a figure or a name; None: not known

# What a plan's ``status`` may say, best first: ``optimal`` only with a proven
# nil gap, ``within_gap`` proven within the asked gap, ``feasible`` nothing
# more (``broker.planning.optimizer.solve.plan_status``).
PLAN_STATUSES = ("optimal", "within_gap", "feasible")


def worst_status(statuses: list[str]) -> str:
    """The weakest of several plans' statuses (unknown ones count as feasible)."""
    rank = [PLAN_STATUSES.index(s) if s in PLAN_STATUSES else 2 for s in statuses]
    return PLAN_STATUSES[max(rank, default=2)]


# One row per (period, workload, tier, pool) with instances > 0.
ALLOCATION_COLUMNS = [
    "period",
    "hour_start",  # first hour of the period, from the plan's start
    "hour_end",  # exclusive
    "workload",
    "tier",
    "pool_key",
    "instances",
    "units",  # physical capacity units (instances x units per instance)
    "work_per_hour",  # reference units of productive work per hour
    "usd_per_instance_hour",
]


@dataclass(frozen=True)
class Commitment:
    """Committed instances bought for the horizon in one (provider, region, type)."""

    group: str  # provider/region/instance_type
    pool_key: str  # a representative pool of the group
    instances: int
    units: int
    usd_per_instance_hour: float
    term_years: int
    # Over the whole term (``broker.planning.optimizer.commitments``; None:
    # not appraised): every hour of the term at the price, the expected
    # saving against the best alternative (the spot/on-demand mix) per month,
    # the expected busy share and the share at which it pays.
    obligation_usd: float | None = None
    monthly_saving_usd: float | None = None
    utilisation: float | None = None
    breakeven_utilisation: float | None = None
    payment: str = "no_upfront"

    @property
    def key(self) -> CommitmentKey:
        return CommitmentKey.parse(self.group)

    @property
    def is_savings_plan(self) -> bool:
        """An AWS Savings Plan (``broker.planning.optimizer.savings_plans``):
        ``instances`` are $/h steps at ``usd_per_instance_hour``, no units."""
        return "savings-plan" in self.group.rsplit("/", 1)[-1]

    @property
    def usd_per_hour(self) -> float:
        """What the commitment bills every hour of its term."""
        return self.instances * self.usd_per_instance_hour

    @property
    def instance_type(self) -> str:
        return self.key.instance_type


@dataclass(frozen=True)
class WorkloadExplanation:
    """Why a workload got what it got, in words a user reads."""

    workload: str
    unit_hours_by_tier: dict[str, float]
    pools: list[tuple[str, str, float]]  # (pool key, tier, unit-hours), largest first
    ranking: list[tuple[str, str, float]]  # (pool key, tier, $ per productive unit-hour)
    binding: list[str]  # constraints that held with no slack
    unmet_unit_hours: float
    # A deadline job: wait for a better pool or run now (policies.waiting).
    waiting: str | None = None
    # A training gang: where it lives under its placement contract
    # (policies.workloads.placement.where).
    placement: str | None = None

    def lines(self) -> list[str]:
        out = [f"{self.workload}:"]
        total = sum(self.unit_hours_by_tier.values()) or 1.0
        shares = ", ".join(
            f"{t} {v / total:.0%}" for t, v in self.unit_hours_by_tier.items() if v > 0
        )
        out.append(f"  tiers: {shares or 'nothing allocated'}")
        if self.placement:
            out.append(f"  {self.placement}")
        for key, tier, uh in self.pools[:4]:
            out.append(f"  {tier:<9} {key}: {uh:,.0f} unit-hours")
        if self.ranking:
            best = "; ".join(f"{k} {t} ${p:.3f}" for k, t, p in self.ranking[:3])
            out.append(f"  cheapest effective $/productive unit-hour: {best}")
        for b in self.binding[:5]:
            out.append(f"  bound: {b}")
        if self.waiting:
            out.append(f"  {self.waiting}")
        if self.unmet_unit_hours > 1e-6:
            out.append(f"  UNMET: {self.unmet_unit_hours:,.1f} unit-hours")
        return out


@dataclass(frozen=True)
class Plan:
    """Commitments and per-period allocations over ``hours`` from ``start``."""

    start: datetime
    hours: int
    period_hours: int
    commitments: tuple[Commitment, ...]
    allocations: pd.DataFrame
    objective_usd: float
    status: str
    solver: str
    solve_time_s: float
    integral: bool
    unmet_unit_hours: dict[str, float] = field(default_factory=dict)
    explanations: dict[str, WorkloadExplanation] = field(default_factory=dict)
    # How the plan was made: build_s, gap, lower_bound_usd, method, solves, ...
    meta: dict[str, PlanMetaValue] = field(default_factory=dict)
    # Budgets the plan spends all of while demand goes unmet: the unmet part is
    # the budget's doing (``broker.planning.optimizer.budgets``), never a saving.
    budget_limited: tuple[str, ...] = ()
    # Reserved-ahead blocks the plan runs in: held (sunk) or to buy, at their
    # price (``broker.planning.optimizer.blocks``); their instance-hours are
    # on-demand rows at $0 an hour.
    blocks: tuple[CapacityBlock, ...] = ()

    def unmet_total(self) -> float:
        return float(sum(self.unmet_unit_hours.values()))

    def meta_number(self, key: str) -> float | None:
        """``meta[key]`` if it is a number (``None``: absent or not a number)."""
        value = self.meta.get(key)
        return float(value) if isinstance(value, int | float) else None

    def meta_text(self, key: str) -> str | None:
        """``meta[key]`` if it is a name (``None``: absent or not a name)."""
        value = self.meta.get(key)
        return value if isinstance(value, str) else None

    def committed_instances(self) -> dict[str, int]:
        return {c.group: c.instances for c in self.commitments if c.instances > 0}

    def committed_usd_per_hour(self) -> float:
        return sum(c.instances * c.usd_per_instance_hour for c in self.commitments)

    def planned_cost_by_tier(self) -> dict[str, float]:
        """Dollars the plan expects to pay, by tier (committed paid every hour)."""
        a = self.allocations
        hours = (a["hour_end"] - a["hour_start"]).to_numpy(dtype=float)
        usd = (
            a["instances"].to_numpy(dtype=float)
            * a["usd_per_instance_hour"].to_numpy(dtype=float)
            * hours
        )
        out = {t.value: 0.0 for t in Tier}
        for tier in (Tier.ON_DEMAND, Tier.SPOT):
            out[tier.value] = float(usd[(a["tier"] == tier.value).to_numpy()].sum())
        out[Tier.COMMITTED.value] = self.committed_usd_per_hour() * self.hours
        return out

    def blocks_usd(self) -> float:
        """What the blocks the plan buys cost (held ones: sunk, 0)."""
        return sum(b.cost_usd for b in self.blocks)

    def planned_cost_usd(self) -> float:
        return sum(self.planned_cost_by_tier().values()) + self.blocks_usd()

    def hourly_instances(self) -> pd.DataFrame:
        """The allocation table expanded to one row per hour (column ``hour``)."""
        a = self.allocations
        if a.empty:
            return a.assign(hour=pd.Series(dtype=int))
        lengths = (a["hour_end"] - a["hour_start"]).to_numpy(dtype=int)
        idx = np.repeat(np.arange(len(a)), lengths)
        out = a.iloc[idx].reset_index(drop=True)
        offsets = np.concatenate([np.arange(n) for n in lengths])
        out["hour"] = a["hour_start"].to_numpy(dtype=int)[idx] + offsets
        return out

    def explain(self) -> str:
        gap = self.meta_number("gap")
        proof = "no proven bound" if gap is None else f"proven gap {gap:.2%}"
        lines = [
            f"plan {self.status} ({proof}) by {self.solver} in {self.solve_time_s:.2f} s, "
            f"objective ${self.objective_usd:,.2f}",
        ]
        for c in self.commitments:
            if c.instances and c.is_savings_plan:
                lines.append(
                    f"commit ${c.usd_per_hour:,.3f}/h to {c.group} ({c.term_years}-year term, "
                    f"{c.payment}; covers usage in its scope at the plan's rates)"
                )
            elif c.instances:
                lines.append(
                    f"commit {c.instances} x {c.group} ({c.units} units, "
                    f"{c.term_years}-year term, ${c.usd_per_instance_hour:.3f}/instance-hour)"
                )
                if c.obligation_usd is not None and c.monthly_saving_usd is not None:
                    util = "-" if c.utilisation is None else f"{c.utilisation:.0%}"
                    be = (
                        "-" if c.breakeven_utilisation is None else f"{c.breakeven_utilisation:.0%}"
                    )
                    verb = "saves" if c.monthly_saving_usd > 0 else "COSTS"
                    lines.append(
                        f"  obligation ${c.obligation_usd:,.0f} over the term; {verb} "
                        f"${abs(c.monthly_saving_usd):,.0f}/month against the spot/on-demand mix; "
                        f"busy {util} of hours, pays above {be}"
                    )
        for b in self.blocks:  # reserved-ahead (``broker.planning.optimizer.blocks``)
            price = "held, sunk" if b.held else f"buy for ${b.cost_usd:,.2f}"
            start = b.start.astimezone(UTC)
            lines.append(f"block {b.block_id} ({b.kind.value}): {b.count} x {b.instance_type} "
                         f"in {b.zone} for {b.hours:g} h from {start:%Y-%m-%d %H:%M} UTC, "
                         f"{price}")  # fmt: skip
        if self.budget_limited:
            lines.append(
                f"BUDGET: {self.unmet_total():,.1f} unit-hours of demand left unmet by "
                + "; ".join(self.budget_limited)
            )
        for e in self.explanations.values():
            lines.extend(e.lines())
        return "\n".join(lines)
