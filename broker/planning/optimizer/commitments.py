r"""Commitments valued over their whole term, not over the planning horizon.

Owns: the alternative a committed unit replaces
(``alternative_usd_per_work_hour``: the spot/on-demand mix, not on-demand
alone), the MILP's term terms (``add_term_valuation``, the hook
``broker.planning.optimizer.model`` calls once the allocations exist) and the
appraisal of a solved plan's commitments (``appraise``: obligation, monthly
saving, utilisation and break-even utilisation over the term).

Which demand outlives the horizon is ``policies.reservations.persists``
(serving, and jobs marked ``recurring``).

Must not: solve, build the horizon's constraints (``model`` does) or read the
market (prices come from the problem's ``CostTable``).

The model. A commitment bought now bills ``c_g`` per instance-hour for its
term of ``T`` hours (``markets.commitments.TERM_HOURS``), used or not; the
horizon sees ``H`` of them. Write ``O = max(T, H)`` (a horizon longer than the
term renews it) and ``f = (O - H) / H``. Beyond the horizon only demand that
persists is there to use it; its pattern is taken to repeat the horizon's, so
every committed unit-hour a persistent workload uses in period ``t`` of the
horizon is used ``f`` more times over the rest of the term, each time
replacing what the workload would otherwise buy:

  min  ... + sum_g C_g c_g (O - H)                           the rest of the obligation
           - f sum_{w persists} sum_t L_t (p^b_w Y^b_{w,t} + p^m_w Y^m_{w,t})

  Y^b_{w,t} + Y^m_{w,t} <= sum_{g free} a_{w,g} K_{w,g,t}    only committed work counts
  0 <= Y^b_{w,t} <= (1 - sigma_w) n_{w,t}                    the non-revocable base
  0 <= Y^m_{w,t} <= sigma_w n_{w,t}                          the revocable top

where ``n_{w,t}`` is the work the workload needs (serving demand; a recurring
job's average rate), ``p^b`` the cheapest on-demand price per work-hour (what
the base must otherwise buy) and ``p^m`` the cheaper of on-demand and the
cheapest *effective* spot price (what the top otherwise buys). The horizon's
own part (``C_g c_g H`` against the horizon's allocations) is the model's, as
above, so a finite job's use of a commitment is worth only its own hours: a
2-day plan never buys a 1-year commitment for a job, since ``c_g O`` exceeds
anything ``H`` hours of use can save (``c_g / p_alt > H / O``). With spot ruled
out the rule is the discount quantile of the horizon's demand
(docs/concepts/reservations.md), whatever ``H`` is: the unit pays iff it is busy more than
``c_g / p_OD`` of the hours.

Commitments already fixed (a committed sweep, a rolling horizon's later steps,
a baseline) are sunk: no term terms, the horizon charges their hourly share.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import pulp

from broker.planning.optimizer.backend import LpVariable
from broker.planning.optimizer.problem import PlanningProblem
from markets.catalog import payment_ratio
from markets.commitments import HOURS_PER_MONTH, TERM_HOURS
from markets.model import Tier
from policies.cost_table import CostEntry
from policies.reservations import persists
from policies.workloads.spec import Workload, WorkloadClass

__all__ = [
    "CommitmentValue",
    "TermTerms",
    "add_term_valuation",
    "alternative_usd_per_work_hour",
    "appraise",
    "committed_usd_per_instance_hour",
    "obligation_hours",
    "owned_instances",
    "owned_tail_instances",
]

Terms = list[tuple[LpVariable, float]]


def committed_usd_per_instance_hour(problem: PlanningProblem, e: CostEntry) -> float | None:
    """The effective hourly price of one committed instance of ``e``'s group,
    paid the problem's way (``PlanOptions.payment``, ``markets.catalog.payment_ratio``)."""
    price = e.usd_per_work_hour[Tier.COMMITTED]
    if price is None:
        return None
    opts = problem.options
    ratio = payment_ratio(e.key.provider, opts.term_years, opts.payment)
    return price * e.work_per_instance_hour * ratio


def obligation_hours(problem: PlanningProblem) -> int:
    """Hours a commitment bought for ``problem`` bills: its term, or the
    horizon if longer (renewed)."""
    return max(TERM_HOURS[problem.options.term_years], problem.hours)


def alternative_usd_per_work_hour(problem: PlanningProblem, w: Workload) -> tuple[float, float]:
    """(base, top): dollars per productive work-hour a committed unit-hour of
    ``w`` replaces, in its non-revocable base (the cheapest on-demand) and
    above it (the cheaper of that and the cheapest effective spot, where the
    workload may use spot). ``inf`` where no tier is offered."""
    costs = problem.costs
    od = costs.cheapest_usd_per_work_hour(w.name, Tier.ON_DEMAND)
    spot = math.inf
    if problem.options.allow_spot and w.max_spot_share > 0:
        spot = costs.cheapest_usd_per_work_hour(w.name, Tier.SPOT)
    return od, min(od, spot)


def _need(problem: PlanningProblem, w: Workload, t: int) -> float:
    """Work per hour ``w`` needs in period ``t``."""
    if w.workload_class is WorkloadClass.SERVING:
        demand = problem.serving_period_demand(w.name)
        return float(demand[t])
    first = problem.first_hour(w)
    if problem.period_bounds[t][0] + 1e-9 < first:
        return 0.0  # not released yet
    span = problem.last_hour(w) - first
    return problem.required_unit_hours(w) / span if span > 0 else 0.0


def owned_instances(problem: PlanningProblem, group: str) -> list[float]:
    """Instances of ``group`` already owned and active through each period
    (an instance commitment counts in a period it covers whole: one expiring
    mid-period no longer does)."""
    out = []
    for h0, h1 in problem.period_bounds:
        t0 = problem.start + timedelta(hours=h0)
        t1 = problem.start + timedelta(hours=h1)
        out.append(
            float(
                sum(
                    c.count
                    for c in problem.owned
                    if c.group == group and c.start <= t0 and c.end >= t1
                )
            )
        )
    return out


def owned_tail_instances(problem: PlanningProblem, group: str) -> float:
    """Owned instances of ``group`` over the rest of a new term (hours ``H``
    to ``O``), weighted by the share of it each is still active."""
    H = problem.hours
    rest = obligation_hours(problem) - H
    if rest <= 0:
        return 0.0
    t0 = problem.start + timedelta(hours=H)
    t1 = problem.start + timedelta(hours=H + rest)
    total = 0.0
    for c in problem.owned:
        if c.group != group:
            continue
        lo, hi = max(c.start, t0), min(c.end, t1)
        if hi > lo:
            total += c.count * (hi - lo).total_seconds() / 3600.0 / rest
    return total


@dataclass(frozen=True)
class TermTerms:
    """What ``add_term_valuation`` added: the factor ``f`` and the credit
    variables per (workload, period) (base, top)."""

    factor: float
    credits: Mapping[tuple[str, int], tuple[LpVariable, LpVariable]]


def add_term_valuation(
    problem: PlanningProblem,
    prob: pulp.LpProblem,
    commit_vars: Mapping[str, LpVariable],
    commit_price: Mapping[str, float],
    committed_work: Mapping[tuple[str, int], Terms],
    objective: Terms,
    name: Callable[[str], str],
    *,
    owned_tail_work: float = 0.0,
    group_work: Mapping[str, float] | None = None,
) -> TermTerms | None:
    """Add the module docstring's term terms for ``problem``'s free
    commitments. ``committed_work`` maps (workload, period) to its committed
    allocations as (variable, work per instance-hour); ``owned_tail_work``
    the work per hour owned commitments still do after the horizon
    (``owned_tail_instances``), ``group_work`` the most work per hour one
    instance of each group does. ``None`` when nothing is bought here (every
    commitment fixed, or the horizon covers the term)."""
    if problem.committed_fixed is not None or not commit_vars:
        return None
    H = float(problem.hours)
    rest = float(obligation_hours(problem)) - H
    if rest <= 0:
        return None
    factor = rest / H
    group_work = group_work or {}
    for g, v in commit_vars.items():
        objective.append((v, commit_price[g] * rest))
    lengths = problem.period_lengths
    credits: dict[tuple[str, int], tuple[LpVariable, LpVariable]] = {}
    # The credits' most (every persistent need covered), added back as a
    # constant so the objective stays a cost >= 0: a relative gap near a zero
    # objective would never close.
    ceiling = 0.0
    for w in problem.workloads.workloads:
        if not persists(w):
            continue
        base_usd, top_usd = alternative_usd_per_work_hour(problem, w)
        if not math.isfinite(base_usd):
            continue
        for t in range(len(lengths)):
            work = committed_work.get((w.name, t))
            if not work:
                continue
            need = _need(problem, w, t)
            base = (1.0 - w.max_spot_share) * need
            yb = pulp.LpVariable(name("YB"), lowBound=0, upBound=base)
            ym = pulp.LpVariable(name("YM"), lowBound=0, upBound=max(0.0, need - base))
            prob += (
                pulp.LpAffineExpression([(yb, 1.0), (ym, 1.0), *[(k, -a) for k, a in work]]) <= 0
            )
            L = float(lengths[t])
            objective.append((yb, -factor * L * base_usd))
            objective.append((ym, -factor * L * top_usd))
            credits[(w.name, t)] = (yb, ym)
            ceiling += factor * L * (base_usd * base + top_usd * max(0.0, need - base))
    if problem.owned:
        # Owned commitments still active after the horizon cover persistent
        # demand first: new ones earn only the need they leave, and no more
        # than the new instances can do (in the horizon the owned ones did).
        new_work = [(v, group_work.get(g, 0.0)) for g, v in commit_vars.items()]
        for t in range(len(lengths)):
            cell = [(w, t) for w in problem.workloads.names() if (w, t) in credits]
            if not cell:
                continue
            need_t = sum(_need(problem, problem.workloads.by_name(w), t) for w, _t in cell)
            terms = [(y, 1.0) for key in cell for y in credits[key]]
            prob += pulp.LpAffineExpression(terms) <= max(0.0, need_t - owned_tail_work)
            prob += pulp.LpAffineExpression([*terms, *[(v, -a) for v, a in new_work]]) <= 0
    if ceiling > 0:
        one = pulp.LpVariable(name("TERM"), lowBound=1, upBound=1)
        objective.append((one, ceiling))
    return TermTerms(factor, credits)


@dataclass(frozen=True)
class CommitmentValue:
    """One commitment group's appraisal over its term.

    ``obligation_usd``: every hour of the term (the horizon's renewals
    included) at the effective hourly price. ``value_usd``: what the work it
    is expected to do would cost on the best alternative (the spot/on-demand
    mix; a finite job's work counts once, persistent demand's over the whole
    term). ``utilisation``: expected busy share of its instance-hours;
    ``breakeven_utilisation``: the share at which it pays (price over the
    alternative's price per busy instance-hour). It pays iff
    ``utilisation > breakeven_utilisation``, iff ``monthly_saving_usd > 0``."""

    group: str
    instances: int
    term_years: int
    obligation_usd: float
    value_usd: float
    utilisation: float | None
    breakeven_utilisation: float | None

    @property
    def saving_usd(self) -> float:
        return self.value_usd - self.obligation_usd

    def monthly_saving_usd(self, term_hours: float) -> float:
        return self.saving_usd / (term_hours / HOURS_PER_MONTH)


def appraise(
    problem: PlanningProblem,
    group: str,
    instances: int,
    usd_per_instance_hour: float,
    used: Mapping[tuple[str, int], float],
    owned: Sequence[float] = (),
) -> CommitmentValue:
    """Appraise ``instances`` of ``group`` given the committed instances each
    (workload, period) of the solved horizon ran on it (``used``); ``owned``
    per period are used first (``owned_instances``), the rest is the new
    ones'."""
    left = list(owned)
    term_h = float(obligation_hours(problem))
    H = float(problem.hours)
    lengths = problem.period_lengths
    value = 0.0
    busy = 0.0
    for (wname, t), n_used in sorted(used.items(), key=lambda kv: kv[0][1]):
        take = min(n_used, left[t]) if t < len(left) else 0.0
        if t < len(left):
            left[t] -= take
        n = n_used - take
        if n <= 1e-9:
            continue
        w = problem.workloads.by_name(wname)
        entry = next(
            (
                e
                for e in problem.entries(w)
                if str(e.key.group) == group and e.usd_per_work_hour[Tier.COMMITTED] is not None
            ),
            None,
        )
        if entry is None:
            continue
        base_usd, top_usd = alternative_usd_per_work_hour(problem, w)
        if not math.isfinite(base_usd):
            continue
        need = _need(problem, w, t)
        base = (1.0 - w.max_spot_share) * need
        work = n * entry.work_per_instance_hour
        hour_value = base_usd * min(work, base) + top_usd * max(0.0, min(work, need) - base)
        repeat = term_h / H if persists(w) else 1.0
        L = float(lengths[t])
        value += hour_value * L * repeat
        # busy: the instances doing needed work (a plan may hold idle
        # committed instances: they cost nothing more in the horizon)
        busy += min(n, need / entry.work_per_instance_hour) * L * repeat
    obligation = instances * usd_per_instance_hour * term_h
    utilisation = None if instances == 0 else min(1.0, busy / (instances * term_h))
    per_busy_hour = value / busy if busy > 0 else None
    breakeven = (
        None
        if per_busy_hour is None or per_busy_hour <= 0
        else usd_per_instance_hour / per_busy_hour
    )
    return CommitmentValue(
        group,
        instances,
        problem.options.term_years,
        obligation,
        value,
        utilisation,
        breakeven,
    )
