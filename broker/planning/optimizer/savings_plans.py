r"""AWS Savings Plans in the portfolio MILP: a dollars-per-hour commitment.

Owns: the Savings Plan scopes a problem can buy or already owns
(``SavingsPlans``: Compute, any AWS family and region; EC2 Instance, one
family in one region; one scope per owned plan), their rates per instance
type (``rate_usd_per_instance_hour``: the catalog rule of
``markets.catalog.savings_plan_share``, or an owned plan's own rates read
from the account), the MILP's Savings Plan rows and the appraisal of the
plans a solved plan buys (``SavingsPlans.commitments``).

Must not: build the rest of the model (``model`` calls the hooks below),
solve, or read the market (rates come from the problem's pools and cost
table).

The model. For each scope s (new: a variable ``c_s`` dollars per hour,
bought for the problem's term; owned: a constant ``c_s`` while the plan is
active in a period, 0 after its ``end``), each on-demand option ``O_{w,j,t}``
of a covered type gets ``Z_{w,j,s,t} >= 0``: the part of its instances the
plan pays for at the plan's rate ``r_{j,s}``, no longer billed on-demand:

  sum_s Z_{w,j,s,t} <= O_{w,j,t}                          only usage is covered
  sum_{w,j} r_{j,s} Z_{w,j,s,t} <= c_s                    up to the commitment
  min  ... - sum L_t o_j Z_{w,j,s,t}                      not paid on-demand
           + sum_s c_s H + term terms                     paid every hour, used or not

so an instance-hour may be partly on a plan and partly on-demand, as AWS
bills it. The term terms are ``commitments.add_term_valuation``'s with
``c_s`` as a commitment priced $1 per $/h (``OBJECTIVE_USD_PER_USD``) and
``Z`` as committed work: a finite job that ends before the term does not
justify a plan. The MILP places covered usage optimally; AWS's own order
(EC2 Instance SPs first, then the highest discount) is never cheaper. A plan
bought here is reported in steps of ``SAVINGS_PLAN_STEP_USD_PER_HOUR`` (a
``Commitment`` of ``instances`` steps at the step's price, 0 units), rounded
up so it still covers what the plan put on it; in the plan's allocation
table the covered part of an on-demand row is a committed row at the rate.

Covered types per workload: its on-demand options as the model keeps them
(the cheapest region per type, after dominance): a new EC2 Instance plan is
offered per (family, region) of those; an owned one covers them only in its
own family and region (on-demand in its region but elsewhere cheaper is not
modelled).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import pulp

from broker.planning.optimizer.aggregate import undominated_on_demand
from broker.planning.optimizer.backend import LpVariable
from broker.planning.optimizer.commitments import (
    alternative_usd_per_work_hour,
    obligation_hours,
)
from broker.planning.optimizer.problem import PlanningProblem
from broker.planning.plan import Commitment
from markets.catalog import SAVINGS_PLAN_STEP_USD_PER_HOUR, payment_ratio, savings_plan_share
from markets.commitments import CommitmentKind, OwnedCommitment, PaymentOption
from markets.keys import PoolKey
from markets.model import PoolSnapshot, Provider
from policies.cost_table import CostEntry
from policies.reservations import persists
from policies.workloads.spec import Workload, WorkloadClass

__all__ = [
    "COMPUTE_GROUP",
    "OBJECTIVE_USD_PER_USD",
    "SavingsPlans",
    "ec2_group",
    "is_savings_plan_group",
    "on_demand_to_cover",
    "pool_rate_usd_per_instance_hour",
    "rate_usd_per_instance_hour",
    "steps",
]

COMPUTE_GROUP = "aws/any-region/savings-plan-compute"
# What the objective charges per committed dollar: a hair above $1 so that,
# where a plan and reserved instances cost the same, the instances win (AWS
# applies RIs before Savings Plans, user guide "Understanding how Savings
# Plans apply"): a plan is bought where it is strictly cheaper.
OBJECTIVE_USD_PER_USD = 1.0 + 1e-6
_OWNED = "owned-sp-"
_NEW_EC2 = "savings-plan-ec2-"

Terms = list[tuple[LpVariable, float]]


def ec2_group(region: str, family: str) -> str:
    """The group key of a new EC2 Instance Savings Plan."""
    return f"aws/{region}/{_NEW_EC2}{family}"


def _owned_group(c: OwnedCommitment) -> str:
    ident = c.id.replace("/", "_")
    return f"aws/{c.region or 'any-region'}/{_OWNED}{ident}"


def is_savings_plan_group(group: str) -> bool:
    """Whether a commitment group key names a Savings Plan (bought or owned)."""
    return group == COMPUTE_GROUP or group.split("/")[-1].startswith((_NEW_EC2, _OWNED))


def steps(usd_per_hour: float) -> int:
    """A commitment in whole catalog steps, rounded up (within 1e-6 of a step
    stays put)."""
    return max(0, math.ceil(usd_per_hour / SAVINGS_PLAN_STEP_USD_PER_HOUR - 1e-6))


def rate_usd_per_instance_hour(
    problem: PlanningProblem,
    pool_key: str,
    od_usd_per_instance_hour: float,
    kind: CommitmentKind,
    term_years: int,
    payment: PaymentOption | str,
) -> float | None:
    """What a Savings Plan of ``kind`` charges per instance-hour of
    ``pool_key`` (on-demand ``od_usd_per_instance_hour``): on-demand less
    ``savings_plan_share(kind)`` of the pool's own ``term_years`` reserved
    discount, paid ``payment``'s way. ``None`` off AWS or where the pool has
    no committed price."""
    if PoolKey.parse(pool_key).provider != Provider.AWS.value:
        return None
    return pool_rate_usd_per_instance_hour(
        problem.pool(pool_key).snap, od_usd_per_instance_hour, kind, term_years, payment
    )


def pool_rate_usd_per_instance_hour(
    snap: PoolSnapshot,
    od_usd_per_instance_hour: float,
    kind: CommitmentKind,
    term_years: int,
    payment: PaymentOption | str,
) -> float | None:
    """``rate_usd_per_instance_hour`` of an AWS pool's snapshot."""
    if snap.pool.provider is not Provider.AWS:
        return None
    com = snap.committed_1y_usd_per_hour if term_years == 1 else snap.committed_3y_usd_per_hour
    if com is None or snap.on_demand_usd_per_hour <= 0:
        return None
    discount = max(0.0, 1.0 - com / snap.on_demand_usd_per_hour)
    share = savings_plan_share(kind)
    ratio = payment_ratio(Provider.AWS, term_years, payment)
    return od_usd_per_instance_hour * (1.0 - share * discount) * ratio


def on_demand_to_cover(
    problem: PlanningProblem,
    before: Sequence[CostEntry],
    after: Sequence[CostEntry],
    committed: Sequence[CostEntry],
    *,
    integral: bool,
) -> list[CostEntry]:
    """A workload's on-demand options ``after`` dominance, plus the AWS ones
    a plan may cover though another provider's on-demand is cheaper: of
    ``before`` (every type's cheapest region), the types with a commitment
    group kept (``committed``) when plans may be bought, and the cheapest AWS
    option per throughput when an owned plan is there to pay for it."""
    aws = [e for e in before if e.key.provider == Provider.AWS.value]
    if not aws:
        return list(after)
    want: list[CostEntry] = []
    if problem.options.allow_committed or problem.committed_fixed:
        types = {e.instance_type for e in committed if e.key.provider == Provider.AWS.value}
        want += [e for e in aws if e.instance_type in types]
    if any(c.kind.is_savings_plan and c.provider is Provider.AWS for c in problem.owned):
        want += undominated_on_demand(aws, integral=integral)
    have = {e.pool_key for e in after}
    out = list(after)
    for e in want:
        if e.pool_key not in have:
            out.append(e)
            have.add(e.pool_key)
    return out


@dataclass
class _Scope:
    key: str
    kind: CommitmentKind
    region: str | None
    family: str | None
    term_years: int
    payment: str
    owned: OwnedCommitment | None = None
    var: LpVariable | None = None  # new plans: c_s
    rep_pool: str = ""
    # (workload, period) -> [(X, rate per instance-hour, work per instance-hour)]
    use: dict[tuple[str, int], list[tuple[LpVariable, float, float]]] = field(default_factory=dict)

    def covers(self, region: str, family: str) -> bool:
        if self.kind is CommitmentKind.SAVINGS_PLAN_COMPUTE:
            return True
        return region == self.region and family == self.family


def _owned_term(c: OwnedCommitment) -> int:
    return 3 if (c.end - c.start) > timedelta(days=2 * 365) else 1


class SavingsPlans:
    """The Savings Plan part of one built model (see the module docstring).
    ``model`` calls ``cover`` per (workload, period), then ``add_rows``
    once; ``solve`` calls ``covered`` and ``commitments``."""

    def __init__(
        self,
        problem: PlanningProblem,
        kept: Mapping[str, Sequence[CostEntry]],
        name: Callable[[str], str],
    ) -> None:
        self.problem = problem
        self._name = name
        opts = problem.options
        self.scopes: dict[str, _Scope] = {}
        fixed = problem.committed_fixed
        new_ok = opts.allow_committed
        # per workload: the AWS on-demand options the model keeps
        self._cands: dict[str, list[CostEntry]] = {
            w: [e for e in entries if e.key.provider == Provider.AWS.value]
            for w, entries in kept.items()
        }
        for c in problem.owned:
            if c.kind.is_savings_plan and c.provider is Provider.AWS:
                key = _owned_group(c)
                self.scopes[key] = _Scope(key, c.kind, c.region, c.family, _owned_term(c),
                                          c.payment.value, owned=c)  # fmt: skip
        if any(self._cands.values()) and (new_ok or fixed):
            self._new_scope(COMPUTE_GROUP, CommitmentKind.SAVINGS_PLAN_COMPUTE, None, None)
            for cands in self._cands.values():
                for e in cands:
                    family = self._family(e)
                    g = ec2_group(e.key.region, family)
                    if g not in self.scopes:
                        self._new_scope(g, CommitmentKind.SAVINGS_PLAN_EC2, e.key.region, family)
        # Fixed plans (a committed sweep, a re-plan's later steps) keep their
        # scopes even where no type of theirs is kept any more.
        for g in fixed or {}:
            if is_savings_plan_group(g) and g not in self.scopes and (fixed or {}).get(g, 0) > 0:
                parts = g.split("/")
                fam = parts[2][len(_NEW_EC2) :] if parts[2].startswith(_NEW_EC2) else None
                kind = (CommitmentKind.SAVINGS_PLAN_EC2 if fam
                        else CommitmentKind.SAVINGS_PLAN_COMPUTE)  # fmt: skip
                self._new_scope(g, kind, parts[1] if fam else None, fam)
        self._rates: dict[tuple[str, str], float | None] = {}
        self._covered: dict[str, list[tuple[str, LpVariable, float]]] = {}

    def _family(self, e: CostEntry) -> str:
        return self.problem.pool(e.pool_key).snap.instance.family

    def _new_scope(
        self, key: str, kind: CommitmentKind, region: str | None, family: str | None
    ) -> None:
        opts = self.problem.options
        fixed = self.problem.committed_fixed
        lo: float = 0.0
        hi: float | None = None
        if fixed is not None:
            lo = hi = fixed.get(key, 0) * SAVINGS_PLAN_STEP_USD_PER_HOUR
        elif not opts.allow_committed:
            hi = 0.0
        var = pulp.LpVariable(self._name("SPC"), lowBound=lo, upBound=hi)
        self.scopes[key] = _Scope(key, kind, region, family, opts.term_years, opts.payment,
                                  var=var)  # fmt: skip

    # --- hooks --------------------------------------------------------------

    @property
    def new_vars(self) -> dict[str, LpVariable]:
        """New plans' ``c_s`` (dollars per hour) by group."""
        return {k: s.var for k, s in self.scopes.items() if s.var is not None}

    def _rate(self, s: _Scope, pool_key: str, od_usd: float, itype: str) -> float | None:
        key = (s.key, pool_key)
        if key not in self._rates:
            region = PoolKey.parse(pool_key).region
            rate: float | None = None
            if s.owned is not None and s.owned.rates:
                found = [u for t, r, u in s.owned.rates if t == itype and r == region]
                rate = found[0] if found else None
            else:
                rate = rate_usd_per_instance_hour(self.problem, pool_key, od_usd, s.kind,
                                                  s.term_years, s.payment)  # fmt: skip
            self._rates[key] = rate
        return self._rates[key]

    def _active(self, s: _Scope, t: int) -> float:
        """Dollars per hour scope ``s`` can spend in period ``t``."""
        if s.owned is None:
            return math.inf
        h0, h1 = self.problem.period_bounds[t]
        t0 = self.problem.start + timedelta(hours=h0)
        t1 = self.problem.start + timedelta(hours=h1)
        return s.owned.usd_per_hour if s.owned.start <= t0 and s.owned.end >= t1 else 0.0

    def cover(
        self,
        workload: str,
        t: int,
        length: float,
        on_demand: Sequence[tuple[LpVariable, str, str, float, float]],
        prob: pulp.LpProblem,
        objective: Terms,
    ) -> None:
        """Let every scope active in period ``t`` pay for part of
        ``workload``'s on-demand instances ``on_demand`` (variable, pool key,
        instance type, on-demand $ per instance-hour, work per
        instance-hour): ``Z`` instances of an option on the plans, at most the
        option's ``O``, no longer billed on-demand."""
        for o, pool_key, itype, od_usd, work in on_demand:
            if PoolKey.parse(pool_key).provider != Provider.AWS.value:
                continue
            family = self.problem.pool(pool_key).snap.instance.family
            region = PoolKey.parse(pool_key).region
            zs: Terms = []
            for s in self.scopes.values():
                if not s.covers(region, family) or self._active(s, t) <= 0:
                    continue
                rate = self._rate(s, pool_key, od_usd, itype)
                if rate is None or rate >= od_usd:
                    continue
                z = pulp.LpVariable(self._name("Z"), lowBound=0)
                s.use.setdefault((workload, t), []).append((z, rate, work))
                s.rep_pool = s.rep_pool or pool_key
                self._covered.setdefault(o.name, []).append((s.key, z, rate))
                objective.append((z, -length * od_usd))
                zs.append((z, 1.0))
            if zs:
                prob += pulp.LpAffineExpression([*zs, (o, -1.0)]) <= 0

    def covered(
        self, o: LpVariable, value: Callable[[LpVariable], float]
    ) -> list[tuple[str, float, float]]:
        """(group, instances, rate) of on-demand option ``o`` the plans paid."""
        out = []
        for g, z, rate in self._covered.get(o.name, ()):
            x = value(z)
            if x > 1e-9:
                out.append((g, x, rate))
        return out

    def committed_work(self) -> dict[tuple[str, int], Terms]:
        """(workload, period) -> the plans' covered instances as (Z, work per
        instance-hour): committed work for ``commitments``' term terms."""
        out: dict[tuple[str, int], Terms] = {}
        for s in self.scopes.values():
            for key, rows in s.use.items():
                out.setdefault(key, []).extend((z, a) for z, _r, a in rows)
        return out

    def add_rows(self, prob: pulp.LpProblem, described: dict[str, str]) -> None:
        """Each scope's cover within its commitment, per period."""
        for s in self.scopes.values():
            by_t: dict[int, Terms] = {}
            for (_w, t), rows in s.use.items():
                by_t.setdefault(t, []).extend((x, r) for x, r, _a in rows)
            for t, terms in by_t.items():
                cname = self._name("sp")
                if s.var is not None:
                    prob += pulp.LpAffineExpression([*terms, (s.var, -1.0)]) <= 0, cname
                else:
                    prob += pulp.LpAffineExpression(terms) <= self._active(s, t), cname
                described[cname] = f"savings plan {s.key}: usage at its rates within its $/h"

    def work_per_usd(self) -> dict[str, float]:
        """The most work per hour one committed dollar per hour does, by group."""
        out: dict[str, float] = {}
        for s in self.scopes.values():
            for rows in s.use.values():
                for _x, r, a in rows:
                    if r > 0:
                        out[s.key] = max(out.get(s.key, 0.0), a / r)
        return out

    def owned_tail_work(self) -> float:
        """Work per hour owned plans still do after the horizon, over the rest
        of a new term (as ``commitments.owned_tail_instances``)."""
        problem = self.problem
        H = problem.hours
        rest = obligation_hours(problem) - H
        if rest <= 0:
            return 0.0
        t0 = problem.start + timedelta(hours=H)
        t1 = t0 + timedelta(hours=rest)
        per_usd = self.work_per_usd()
        total = 0.0
        for s in self.scopes.values():
            c = s.owned
            if c is None:
                continue
            lo, hi = max(c.start, t0), min(c.end, t1)
            if hi > lo:
                share = (hi - lo).total_seconds() / 3600.0 / rest
                total += c.usd_per_hour * share * per_usd.get(s.key, 0.0)
        return total

    # --- after the solve ----------------------------------------------------

    def commitments(self, value: Callable[[LpVariable], float]) -> list[Commitment]:
        """The new plans of the solved model, appraised over their term."""
        out = []
        for s in self.scopes.values():
            if s.var is None:
                continue
            n = steps(value(s.var))
            out.append(self._appraise(s, n, value))
        return out

    def _appraise(self, s: _Scope, n: int, value: Callable[[LpVariable], float]) -> Commitment:
        problem = self.problem
        c = n * SAVINGS_PLAN_STEP_USD_PER_HOUR
        term_h = float(obligation_hours(problem))
        H = float(problem.hours)
        lengths = problem.period_lengths
        worth = 0.0
        busy_usd = 0.0
        for (wname, t), rows in s.use.items():
            w = problem.workloads.by_name(wname)
            base_usd, top_usd = alternative_usd_per_work_hour(problem, w)
            if not math.isfinite(base_usd):
                continue
            need = _need(problem, w, t)
            base = (1.0 - w.max_spot_share) * need
            work = sum(value(x) * a for x, _r, a in rows)
            spent = sum(value(x) * r for x, r, _a in rows)
            if work <= 1e-9:
                continue
            done = min(work, need)
            hour_value = base_usd * min(done, base) + top_usd * max(0.0, done - base)
            repeat = term_h / H if persists(w) else 1.0
            L = float(lengths[t])
            worth += hour_value * L * repeat
            busy_usd += spent * (done / work) * L * repeat
        obligation = c * term_h
        util = None if c <= 0 else min(1.0, busy_usd / obligation)
        breakeven = None if worth <= 0 or busy_usd <= 0 else busy_usd / worth
        months = term_h / 730.0
        return Commitment(
            s.key,
            s.rep_pool or _any_aws_pool(problem),
            n,
            0,
            SAVINGS_PLAN_STEP_USD_PER_HOUR,
            s.term_years,
            obligation_usd=obligation,
            monthly_saving_usd=(worth - obligation) / months if months > 0 else None,
            utilisation=util,
            breakeven_utilisation=breakeven,
            payment=s.payment,
        )


def _any_aws_pool(problem: PlanningProblem) -> str:
    for p in problem.pools:
        if PoolKey.parse(p.key).provider == Provider.AWS.value:
            return p.key
    return problem.pools[0].key if problem.pools else ""


def _need(problem: PlanningProblem, w: Workload, t: int) -> float:
    """Work per hour ``w`` needs in period ``t`` (``commitments._need``)."""
    if w.workload_class is WorkloadClass.SERVING:
        return float(problem.serving_period_demand(w.name)[t])
    first = problem.first_hour(w)
    if problem.period_bounds[t][0] + 1e-9 < first:
        return 0.0  # not released yet
    span = problem.last_hour(w) - first
    return problem.required_unit_hours(w) / span if span > 0 else 0.0
