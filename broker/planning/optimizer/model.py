r"""The portfolio MILP: stated first, then built in PuLP.

Notation (period t of length L_t hours; workload w; pool p = (provider,
region, zone, type) with u_p units per instance; group g = (provider, region,
type) for commitments; zone z):

  C_g        integer >= 0   committed instances bought in group g (all horizon)
  K_{w,g,t}  >= 0           committed instances of g used by w in t
  O_{w,j,t}  >= 0           on-demand instances of option j (cheapest region
                            of each acceptable type: nothing else separates
                            on-demand pools, so they are aggregated)
  S_{w,p,t}  >= 0           spot instances of pool p
  U_{w,t}    >= 0           unmet serving demand (reference units)
  U_w        >= 0           unmet training/batch work (reference unit-hours)
  R_{w,b}    binary, N_{w,b} integer >= 0
                            training gang running / extra steps in gang block b
                            (a block spans the workload's minimum dwell, so the
                            gang is never resized sooner than that)
  D_{w,x,t}  >= 0           launches (increase of an allocation x since t-1)

  Work of an instance-hour: a_{w,p} = u_p * theta_{w,type(p)} on committed and
  on-demand, a_{w,p} / f_{w,p} on spot, where theta is the workload's
  throughput factor and f the spot time factor T_total/T_prod
  (policies.cost_table: checkpoints, lost work, restarts at the pool's hazard).
  Spot is thus priced at its *effective* cost per productive unit-hour.

Objective (dollars):

  min  sum_g C_g * c_g * H                                  committed, used or not
     + term terms (``commitments``: the rest of the term's obligation, less
       what persistent demand saves with it beyond the horizon)
     + sum_t L_t * ( sum O * o_j + sum S * s_{p,t} )        on-demand, spot
     + sum_t L_t * sum_w pi_w U_{w,t} + sum_w pi_w U_w      unmet, class weight pi
     + sum_w v_w (left_w - W_w - A_w)                       work left for later
     + sum (kappa u + r_w c) * D                            churn (launches: cold
                                                            start, and the restart
                                                            r_w hours billed at c)
     + sum_w V_w F_w                                        finish hour of each job
                                                            at its value of time
                                                            (``finish``; V = 0: none)
     + sum_w L_w M_w                                        a running gang moved: the
                                                            work since its checkpoint
                                                            (``placement``)

Constraints:

  serving (every t):      work_{w,t} + U_{w,t} >= d_{w,t}
                          work^{nonrev}_{w,t} + U_{w,t} >= (1 - sigma_w) d_{w,t}
  training (t in b):      units_{w,t} = m_w R_{w,b} + q_w N_{w,b},  N <= (M_w - m_w)/q_w R
                          units^{nonrev}_{w,t} >= m_w R_{w,b}   (if the gang minimum
                                                                 must be non-revocable)
                          units^{spot}_{w,t} <= sigma_w units_{w,t}
                          all of it inside one placement per block, whole instances:
                          R_{w,b} = sum_k R_{w,k,b}, each row above per placement k
                          (``placement`` states it: the gang placement contract)
  batch:                  units_{w,t} <= M_w (parallelism cap)
  training, batch:        sum_{t < deadline} L_t work_{w,t} + U_w >= W_w + A_w
                          (A_w <= work left - W_w: work ahead, credited at
                          v_w per unit-hour, what it is expected to cost later)
                          sum_{t < m} L_t work_{w,t} + U'_w >= W^m_w  (optional
                          milestone: a rolling horizon's uniform progress)
  diversification:        (the caps a gang's contract makes moot are not stated:
                          ``placement.caps_apply``)
                          sum_{p in z} u S_{w,p,t} <= zeta_w sum_p u S_{w,p,t}   (each z,
                          and each failure domain of zones: ``domains``)
                          u S_{w,p,t} <= rho_w sum_p u S_{w,p,t}                 (each p)
                          the same over each region at max_region_share (``regions``)
  pool capacity:          sum_w S_{w,p,t} <= cap_{p,t}
  commitments:            sum_w K_{w,g,t} <= C_g
  savings plans:          AWS $/h commitments paying for on-demand usage in their
                          scope at their rates (``savings_plans`` states them)
  quotas:                 what runs counted in an account quota <= its limit, each t
                          (``broker.planning.optimizer.quotas`` states them)
  budgets:                fleet, per-workload and per-tier cost per hour <= B^h,
                          over the horizon (or a UTC day) <= what is left of B
                          (``broker.planning.optimizer.budgets`` states them)
  churn:                  D_{w,x,t} >= X_{w,x,t} - X_{w,x,t-1}

Structure exploited: on-demand and commitments are aggregated to one option
per (workload, type) and group per type (cheapest region): no constraint
separates their pools; then options another dominates (the same coefficients
in every constraint, no dearer) are dropped, so 40 types with three sizes
leave one on-demand option per workload and three commitment groups
(``broker.planning.optimizer.aggregate``; exact: the optimum and the LP bound do not
move). Per workload only the ``max_spot_pools`` cheapest spot pools by
effective cost enter (more when the zone cap needs more zones); periods of
``period_hours`` shrink long horizons. Instance counts are integer when the
model is small (``PlanOptions.integral``), else continuous (average instances
over a period); commitments and gangs stay integer (``broker.planning.optimizer.search``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pulp

from broker.planning.optimizer.aggregate import undominated_commitments, undominated_on_demand
from broker.planning.optimizer.backend import LpExpression, LpProblem, LpVariable
from broker.planning.optimizer.blocks import BLOCK_GROUP, BlockTier, block_pool_key
from broker.planning.optimizer.budgets import milp_rows
from broker.planning.optimizer.commitments import (
    TermTerms,
    add_term_valuation,
    committed_usd_per_instance_hour,
    owned_instances,
    owned_tail_instances,
)
from broker.planning.optimizer.domains import domain_caps, spread_key
from broker.planning.optimizer.finish import FinishTerms, add_finish_terms
from broker.planning.optimizer.placement import (
    GangOption,
    GangRows,
    caps_apply,
    cheapest_per_type,
    gang_options,
    place_of,
)
from broker.planning.optimizer.problem import FloatArray, PlanningProblem
from broker.planning.optimizer.quotas import milp_rows as quota_rows
from broker.planning.optimizer.quotas import split_key
from broker.planning.optimizer.regions import region_caps, widen_regions
from broker.planning.optimizer.savings_plans import (
    OBJECTIVE_USD_PER_USD,
    SavingsPlans,
    is_savings_plan_group,
    on_demand_to_cover,
)
from markets.errors import InfeasiblePlanError
from markets.keys import PoolKey
from markets.model import Tier
from policies.cost_table import CostEntry
from policies.held import gang_held_share, gang_hour_usd_ahead
from policies.moving import lost_work_hours
from policies.workloads.spec import Workload, WorkloadClass

__all__ = ["AllocVar", "BuiltModel", "build_model"]

Terms = list[tuple[LpVariable, float]]  # (variable, coefficient) pairs of a linear expression


@dataclass(frozen=True)
class AllocVar:
    """One allocation variable: instances of ``pool_key`` (for on-demand and
    committed, the representative pool of its option/group) on ``tier``."""

    workload: str
    tier: Tier
    pool_key: str
    group: str  # commitment group or on-demand option key
    period: int
    units_per_instance: int
    work_per_instance: float  # reference units per instance-hour (spot: effective)
    usd_per_instance_hour: float
    var: LpVariable
    placement: str | None = None  # a gang's placement (``placement``), else None
    # Expected share of each hour a spot instance of a gang with a
    # non-revocable minimum is held (``gang_held_share``); 1 elsewhere. The
    # model counts its work and dollars at that share; plan rows say what a
    # held instance does and costs (the replay and the bill apply the share
    # that really happened).
    held: float = 1.0

    @property
    def expected_work(self) -> float:
        return self.work_per_instance * self.held

    @property
    def expected_usd(self) -> float:
        return self.usd_per_instance_hour * self.held


@dataclass
class BuiltModel:
    prob: LpProblem
    allocs: list[AllocVar] = field(default_factory=list)
    commit_vars: dict[str, LpVariable] = field(default_factory=dict)  # group -> C_g
    commit_price: dict[str, float] = field(default_factory=dict)  # group -> $/instance-hour
    commit_pool: dict[str, str] = field(default_factory=dict)  # group -> representative pool
    unmet_serving: dict[tuple[str, int], LpVariable] = field(default_factory=dict)
    unmet_work: dict[str, LpVariable] = field(default_factory=dict)
    gang: dict[tuple[str, int], tuple[LpVariable, LpVariable]] = field(default_factory=dict)
    # constraint name -> human description (for explanations / infeasibility)
    described: dict[str, str] = field(default_factory=dict)
    integral: bool = False
    serving_demand: dict[str, FloatArray] = field(default_factory=dict)  # per period
    spot_pools: dict[str, list[str]] = field(default_factory=dict)
    term: TermTerms | None = None  # commitments valued over their term (``commitments``)
    owned: dict[str, list[float]] = field(default_factory=dict)  # group -> owned per period
    savings_plans: SavingsPlans | None = None  # AWS Savings Plans (``savings_plans``)
    finish: FinishTerms | None = None  # jobs' finish hours at their value of time (``finish``)
    gangs: dict[str, GangRows] = field(default_factory=dict)  # gang placements (``placement``)
    spot_caps: dict[str, FloatArray] = field(default_factory=dict)  # pool -> instances per period
    blocks: BlockTier | None = None  # reserved-ahead blocks (``blocks``)


class _Namer:
    def __init__(self) -> None:
        self._n = itertools.count()

    def __call__(self, prefix: str) -> str:
        return f"{prefix}{next(self._n)}"


def _group_key(e: CostEntry) -> str:
    return str(e.key.group)


def _spot_candidates(
    problem: PlanningProblem, w: Workload, entries: Sequence[CostEntry]
) -> list[CostEntry]:
    usable = [
        e
        for e in entries
        if e.usd_per_work_hour[Tier.SPOT] is not None
        and float(problem.pool(e.pool_key).spot_capacity_instances.max(initial=0.0)) > 0
    ]
    if not usable or w.max_spot_share <= 0 or not problem.options.allow_spot:
        return []
    if w.non_revocable_min_units > 0:  # a gang's whole hour (``placement``)
        usable.sort(key=_gang_order(problem, w))
    zones_needed = math.ceil(1.0 / w.max_zone_share) + 1
    chosen: list[CostEntry] = []
    zones: set[str] = set()
    place = spread_key(  # a domain counts once
        problem.costs.snapshot.failure_domains, {e.key.zone_key for e in usable}
    )
    for e in usable:  # cheapest effective spot first
        zone = place(e.key.zone_key)
        if len(chosen) < problem.options.max_spot_pools or zone not in zones:
            chosen.append(e)
            zones.add(zone)
        if len(chosen) >= problem.options.max_spot_pools and len(zones) >= zones_needed:
            break
    return widen_regions(w, chosen, usable, "pool_key")  # enough regions for the region cap


def _gang_order(problem: PlanningProblem, w: Workload) -> Callable[[CostEntry], float]:
    """Spot entries of gang ``w``, cheapest expected gang-hour per unit of
    work over the horizon first (``policies.held.gang_hour_usd_ahead``)."""

    def rank(e: CostEntry) -> float:
        return gang_hour_usd_ahead(w, e, problem.pool(e.pool_key).snap, float(problem.hours))

    return rank


def _held(
    problem: PlanningProblem, w: Workload, spot: Sequence[CostEntry]
) -> dict[tuple[str, int], float]:
    """Per spot pool of ``w`` and period, the share the model counts its
    instances held (``policies.held.gang_held_share``; absent: 1, all but gangs
    with a non-revocable minimum)."""
    if w.non_revocable_min_units <= 0:
        return {}
    out: dict[tuple[str, int], float] = {}
    for e in spot:
        snap = problem.pool(e.pool_key).snap
        for t, (h0, h1) in enumerate(problem.period_bounds):
            out[(e.pool_key, t)] = gang_held_share(w, snap, float(h0), float(h1))
    return out


def _aggregate(
    problem: PlanningProblem,
    per_w: dict[str, tuple[list[CostEntry], list[CostEntry], list[CostEntry]]],
    *,
    integral: bool,
    gangs: frozenset[str] = frozenset(),
) -> dict[str, tuple[list[CostEntry], list[CostEntry], list[CostEntry]]]:
    """Drop dominated on-demand options and commitment groups (exact: see
    ``broker.planning.optimizer.aggregate``). A placed gang's options are
    kept: its placement rows tell them apart (``placement``)."""
    running: dict[str, set[str]] = {w: set() for w in per_w}
    for (w, key, tier), n in problem.previous_instances.items():
        if tier == Tier.ON_DEMAND.value and n > 0 and w in running:
            running[w].add(key)
    groups: dict[str, dict[str, CostEntry]] = {}
    price: dict[str, float] = {}
    for w, (_od, com, _spot) in per_w.items():
        for e in com:
            g = _group_key(e)
            groups.setdefault(g, {})[w] = e
            price.setdefault(g, committed_usd_per_instance_hour(problem, e) or 0.0)
    fixed = {g for g, n in (problem.committed_fixed or {}).items() if n > 0}
    fixed |= {c.group for c in problem.owned if c.group is not None}
    fixed |= {_group_key(e) for w in gangs for e in per_w[w][1]}
    kept = undominated_commitments(groups, price, keep=fixed,
                                   split=split_key(problem, Tier.COMMITTED))  # fmt: skip
    od_split = split_key(problem, Tier.ON_DEMAND)

    def od_of(w: str, od: list[CostEntry]) -> list[CostEntry]:
        if w in gangs:
            return od
        return undominated_on_demand(od, integral=integral, keep=running[w], split=od_split)

    return {
        w: (
            od_of(w, od),
            [e for e in com if _group_key(e) in kept],
            spot,
        )
        for w, (od, com, spot) in per_w.items()
    }


def _lin(terms: Terms) -> LpExpression:
    """A linear expression; a variable listed twice has its coefficients summed
    (``LpAffineExpression`` from pairs would keep only the last)."""
    acc: dict[LpVariable, float] = {}
    for v, c in terms:
        acc[v] = acc.get(v, 0.0) + c
    return pulp.LpAffineExpression(list(acc.items()))


def build_model(problem: PlanningProblem, *, integral: bool | None = None) -> BuiltModel:
    """Build the MILP of the module docstring for ``problem``."""
    opts = problem.options
    name = _Namer()
    prob = pulp.LpProblem("spotfolio_portfolio", pulp.LpMinimize)
    periods = problem.period_bounds
    lengths = problem.period_lengths
    n_t = len(periods)
    H = float(problem.hours)

    per_w: dict[str, tuple[list[CostEntry], list[CostEntry], list[CostEntry]]] = {}
    gang_opts: dict[str, list[GangOption]] = {}
    n_alloc = 0
    owned_groups = {c.group for c in problem.owned if c.group is not None}
    for w in problem.workloads.workloads:
        entries = problem.entries(w)
        od = cheapest_per_type(entries, Tier.ON_DEMAND, split_key(problem, Tier.ON_DEMAND))
        com = (cheapest_per_type(entries, Tier.COMMITTED, split_key(problem, Tier.COMMITTED))
               if opts.allow_committed else [])  # fmt: skip
        # Commitments already bought are usable wherever they were bought, even
        # if another region has become cheaper since.
        have = {_group_key(e) for e in com}
        for e in entries:
            g = _group_key(e)
            if (
                ((problem.committed_fixed or {}).get(g, 0) > 0 or g in owned_groups)
                and g not in have
                and (e.usd_per_work_hour[Tier.COMMITTED] is not None)
            ):
                com.append(e)
                have.add(g)
        spot = _spot_candidates(problem, w, entries)
        if w.workload_class is WorkloadClass.TRAINING:
            places = _gang_places(problem, w, entries, spot, owned_groups)
            if places:
                gang_opts[w.name] = places
                od = list({e.pool_key: e for o in places for e in o.on_demand}.values())
                com = list({_group_key(e): e for o in places for e in o.committed}.values())
                spot = list({e.pool_key: e for o in places for e in o.spot}.values())
                n_alloc += sum(len(o.spot) + len(o.on_demand) + len(o.committed)
                               for o in places) * n_t  # fmt: skip
                per_w[w.name] = (od, com, spot)
                continue
        per_w[w.name] = (od, com, spot)
        n_alloc += (len(od) + len(com) + len(spot)) * n_t
    in_use = {e.pool_key for od, com, spot in per_w.values() for e in spot}
    caps = {k: problem.period_min(problem.pool(k).spot_capacity_instances) for k in in_use}
    spot_prices = {k: problem.period_mean(problem.pool(k).spot_usd_per_hour) for k in in_use}
    if integral is None:
        integral = opts.integral if opts.integral is not None else n_alloc <= opts.integral_max_vars
    if opts.aggregate:
        od_before = {w: od for w, (od, _c, _s) in per_w.items()}
        per_w = _aggregate(problem, per_w, integral=integral, gangs=frozenset(gang_opts))
        # AWS on-demand a Savings Plan may pay for (``savings_plans``)
        per_w = {w: (od if w in gang_opts else
                     on_demand_to_cover(problem, od_before[w], od, com, integral=integral), com, sp)
                 for w, (od, com, sp) in per_w.items()}  # fmt: skip
    cat = pulp.LpInteger if integral else pulp.LpContinuous
    built = BuiltModel(prob=prob, integral=integral, spot_caps=caps)

    def new_var(prefix: str, low: float, up: float, integer: bool) -> LpVariable:
        return pulp.LpVariable(name(prefix), lowBound=low, upBound=up,
                               cat=pulp.LpInteger if integer else cat)  # fmt: skip

    blocks = built.blocks = BlockTier(problem, new_var)
    for wn, places in gang_opts.items():
        gw = problem.workloads.by_name(wn)
        running, move_usd = _running_gang(problem, gw)
        built.gangs[wn] = GangRows(gw, [o.key for o in places], running=running,
                                   move_usd=move_usd)  # fmt: skip
    built.serving_demand = {
        w.name: problem.serving_period_demand(w.name)
        for w in problem.workloads.of_class(WorkloadClass.SERVING)
    }

    # Commitment groups (one per type and region actually offered).
    for w in problem.workloads.workloads:
        for e in per_w[w.name][1]:
            g = _group_key(e)
            if g in built.commit_vars:
                continue
            price = committed_usd_per_instance_hour(problem, e)
            assert price is not None
            fixed = None if problem.committed_fixed is None else problem.committed_fixed.get(g, 0)
            built.commit_vars[g] = pulp.LpVariable(
                name("C"), lowBound=fixed or 0, upBound=fixed, cat=pulp.LpInteger
            )
            built.commit_price[g] = price
            built.commit_pool[g] = e.pool_key
    if problem.committed_fixed:
        unknown = {g for g in problem.committed_fixed if not is_savings_plan_group(g)}
        unknown -= set(built.commit_vars)
        if any(problem.committed_fixed[g] > 0 for g in unknown):
            raise InfeasiblePlanError(
                "fixed commitments name groups no workload can use",
                [f"{g}: {problem.committed_fixed[g]} instances" for g in sorted(unknown)],
            )

    objective: Terms = [(v, built.commit_price[g] * H) for g, v in built.commit_vars.items()]
    # AWS Savings Plans: $/h commitments over the types they cover
    # (broker.planning.optimizer.savings_plans).
    plans = built.savings_plans = SavingsPlans(problem, {w: od for w, (od, _c, _s) in
                                                         per_w.items()}, name)  # fmt: skip
    objective.extend((v, H * OBJECTIVE_USD_PER_USD) for v in plans.new_vars.values())
    commit_use: dict[tuple[str, int], Terms] = {}
    pool_use: dict[tuple[str, int], Terms] = {}

    for w in problem.workloads.workloads:
        od, com, spot = per_w[w.name]
        built.spot_pools[w.name] = [e.pool_key for e in spot]
        held = _held(problem, w, [e for o in gang_opts.get(w.name, ()) for e in o.spot] or spot)
        in_blocks = blocks.entries(w, problem.entries(w), _placement_of(w, w.name in gang_opts))
        prev: dict[tuple[Tier, str, str | None], LpVariable] = {}
        first = len(built.allocs)  # this workload's allocations start here
        for t, (h0, _h1) in enumerate(periods):
            if not problem.runs_in(w, h0):
                continue  # before its release or past its deadline: the job may not run
            L = float(lengths[t])
            allocs: list[AllocVar] = []
            layout: list[tuple[str | None, Sequence[CostEntry], Sequence[CostEntry],
                               Sequence[CostEntry]]] = (
                [(o.key, o.committed, o.on_demand, o.spot) for o in gang_opts[w.name]]
                if w.name in gang_opts
                else [(None, com, od, spot)]
            )  # fmt: skip
            for place, p_com, p_od, p_spot in layout:
                _period_allocs(built, w, t, place, p_com, p_od, p_spot, spot_prices, commit_use,
                               pool_use, allocs, name, cat, held)  # fmt: skip
                for b, e, b_place in in_blocks:  # a block runs as on-demand, prepaid
                    if b_place != place:
                        continue
                    v = blocks.variable(b, t, integral or place is not None)
                    if v is not None:
                        group = BLOCK_GROUP + b.block_id
                        allocs.append(AllocVar(w.name, Tier.ON_DEMAND, e.pool_key, group, t,
                                               e.units_per_instance, e.work_per_instance_hour,
                                               0.0, v, place))  # fmt: skip
            built.allocs.extend(allocs)
            plans.cover(w.name, t, L, [(a.var, a.pool_key, a.group, a.usd_per_instance_hour,
                                        a.work_per_instance)
                                       for a in allocs if a.tier is Tier.ON_DEMAND
                                       and not a.group.startswith(BLOCK_GROUP)],
                        prob, objective)  # fmt: skip
            for a in allocs:
                if a.tier is not Tier.COMMITTED:
                    objective.append((a.var, L * a.expected_usd))
                # churn on launches of on-demand and spot
                if a.tier is not Tier.COMMITTED and opts.churn_usd_per_unit > 0:
                    key = (a.tier, a.group, a.placement)
                    before = prev.get(key)
                    d = pulp.LpVariable(name("D"), lowBound=0)
                    if before is None:
                        start = float(
                            problem.previous_instances.get((w.name, a.pool_key, a.tier.value), 0.0)
                        )
                        prob += _lin([(d, 1.0), (a.var, -1.0)]) >= -start
                    else:
                        prob += _lin([(d, 1.0), (a.var, -1.0), (before, 1.0)]) >= 0
                    # A launch also pays the moved work's restart: the new
                    # instance is billed while the job restores (restart_minutes).
                    restart_usd = w.restart_hours * a.usd_per_instance_hour
                    kappa = opts.churn_usd_per_unit * a.units_per_instance
                    objective.append((d, kappa + restart_usd))
                    prev[key] = a.var
            _workload_period(problem, built, w, t, L, allocs, objective, name)
        _workload_totals(problem, built, w, built.allocs[first:], objective, name)
        rows = built.gangs.get(w.name)
        if rows is not None:  # a running gang's move loses its work since a checkpoint
            objective.extend(rows.add_move(prob, name))

    committed_work: dict[tuple[str, int], Terms] = {}
    for a in built.allocs:
        if a.tier is Tier.COMMITTED:
            committed_work.setdefault((a.workload, a.period), []).append(
                (a.var, a.work_per_instance)
            )
    # Commitments priced over their whole term, around those already owned
    # (broker.planning.optimizer.commitments).
    group_work: dict[str, float] = {}
    for a in built.allocs:
        if a.tier is Tier.COMMITTED:
            group_work[a.group] = max(group_work.get(a.group, 0.0), a.work_per_instance)
    owned = {g: owned_instances(problem, g) for g in built.commit_vars if g in owned_groups}
    tail_work = sum(owned_tail_instances(problem, g) * group_work.get(g, 0.0) for g in owned)
    tail_work += plans.owned_tail_work()
    for cell, terms in plans.committed_work().items():
        committed_work.setdefault(cell, []).extend(terms)
    group_work.update(plans.work_per_usd())  # a plan's c is dollars per hour
    built.owned = owned
    sp_price = dict.fromkeys(plans.new_vars, OBJECTIVE_USD_PER_USD)
    built.term = add_term_valuation(problem, prob, {**built.commit_vars, **plans.new_vars},
                                    {**built.commit_price, **sp_price},
                                    committed_work, objective, name,
                                    owned_tail_work=tail_work,
                                    group_work=group_work)  # fmt: skip
    plans.add_rows(prob, built.described)
    for (g, t), terms in commit_use.items():
        cname = name("commit")
        have_owned = owned[g][t] if g in owned else 0.0
        prob += _lin([*terms, (built.commit_vars[g], -1.0)]) <= have_owned, cname
        built.described[cname] = f"committed {g}: usage within what was bought"
    for (p, t), terms in pool_use.items():
        cap = float(caps[p][t])
        cname = name("cap")
        prob += _lin(terms) <= cap, cname
        built.described[cname] = f"spot capacity of {p}: {cap:g} instances"
    # Every budget (workload, fleet, tier; per hour, horizon, day): ``budgets``.
    commit_hourly = [(v, built.commit_price[g]) for g, v in built.commit_vars.items()]
    commit_hourly.extend((v, 1.0) for v in plans.new_vars.values())
    for terms, rhs, text in milp_rows(problem, built.allocs, commit_hourly):
        cname = name("budget")
        prob += _lin(terms) <= rhs, cname
        built.described[cname] = text
    # Every account quota, each period: what runs keeps to it (``quotas``).
    for terms, rhs, text in quota_rows(problem, built.allocs):
        cname = name("quota")
        prob += _lin(terms) <= rhs, cname
        built.described[cname] = text
    # The value of finishing sooner: a priced finish hour per job (``finish``).
    work_by_period: dict[str, dict[int, Terms]] = {}
    for a in built.allocs:
        cells = work_by_period.setdefault(a.workload, {})
        cells.setdefault(a.period, []).append((a.var, a.expected_work))
    built.finish = add_finish_terms(problem, prob, work_by_period, objective, name,
                                    built.described)  # fmt: skip

    # Reserved-ahead blocks: capacity in their window, bought whole (``blocks``).
    for terms, rhs, text in blocks.rows():
        cname = name("block")
        prob += _lin(terms) <= rhs, cname
        built.described[cname] = text
    objective.extend(blocks.objective())

    prob += _lin(objective)
    return built


def _placement_of(w: Workload, gang: bool) -> Callable[[CostEntry], str | None]:
    """The gang placement holding an entry's pool (``None``: not a placed gang)."""
    return (lambda e: place_of(w, e)) if gang else (lambda e: None)


def _gang_places(
    problem: PlanningProblem,
    w: Workload,
    entries: Sequence[CostEntry],
    spot: Sequence[CostEntry],
    owned_groups: set[str],
) -> list[GangOption]:
    """A training gang's candidate placements (``placement``)."""
    keep = {g for g, n in (problem.committed_fixed or {}).items() if n > 0}
    keep |= owned_groups
    running = {key for (wn, key, _tier), n in problem.previous_instances.items()
               if wn == w.name and n > 0}  # fmt: skip
    running |= {block_pool_key(b) for b in problem.blocks}  # a block's zone is a placement
    usable = [] if not spot else sorted(
        (e for e in entries if e.usd_per_work_hour[Tier.SPOT] is not None
         and e.spot_factor is not None
         and float(problem.pool(e.pool_key).spot_capacity_instances.max(initial=0.0)) > 0),
        key=_gang_order(problem, w),
    )  # fmt: skip
    return gang_options(w, entries, spot, committed=problem.options.allow_committed,
                        keep_groups=keep, running_pools=running, usable_spot=usable,
                        per_place=problem.options.max_spot_pools,
                        split=(lambda e, tier: split_key(problem, tier)(e))
                        if problem.quotas else None)  # fmt: skip


def _running_gang(problem: PlanningProblem, w: Workload) -> tuple[frozenset[str], float]:
    """Where gang ``w`` runs now (its placements, from ``previous_instances``)
    and what moving it loses (``placement``'s L_w): half a checkpoint
    interval (``policies.moving``, the longest of its pools') of the whole
    running gang, at what it costs an hour there now."""
    places: set[str] = set()
    usd_per_hour, lost_h = 0.0, 0.0
    for (wn, key, tier), n in problem.previous_instances.items():
        if wn != w.name or n <= 0:
            continue
        try:
            snap = problem.pool(key).snap
        except KeyError:
            continue  # a pool the market no longer lists: nothing to stay in
        k = PoolKey.parse(key)
        places.add(w.gang_placement_key(provider=k.provider, region=k.region, zone=k.zone,
                                        instance_type=k.instance_type) or "")  # fmt: skip
        price = snap.price(Tier(tier), term_years=problem.options.term_years)
        if price is None or not math.isfinite(price):
            price = snap.on_demand_usd_per_hour
        usd_per_hour += float(n) * price
        lost_h = max(lost_h, lost_work_hours(w, snap))
    return frozenset(places), lost_h * usd_per_hour


def _period_allocs(
    built: BuiltModel,
    w: Workload,
    t: int,
    place: str | None,
    com: Sequence[CostEntry],
    od: Sequence[CostEntry],
    spot: Sequence[CostEntry],
    spot_prices: dict[str, FloatArray],
    commit_use: dict[tuple[str, int], Terms],
    pool_use: dict[tuple[str, int], Terms],
    allocs: list[AllocVar],
    name: _Namer,
    cat: str,
    held: Mapping[tuple[str, int], float],
) -> None:
    """Allocation variables of ``w`` in period ``t`` (inside gang placement
    ``place``, if any), appended to ``allocs``. A placed gang is whole
    instances even in a relaxed model (its contract). ``held``: (spot pool,
    period) -> the share its instances are counted held (``_held``; absent: 1)."""
    if place is not None:
        cat = pulp.LpInteger
    for e in com:
        g = _group_key(e)
        v = pulp.LpVariable(name("K"), lowBound=0, cat=cat)
        allocs.append(
            AllocVar(
                w.name,
                Tier.COMMITTED,
                e.pool_key,
                g,
                t,
                e.units_per_instance,
                e.work_per_instance_hour,
                built.commit_price[g],
                v,
                place,
            )
        )
        commit_use.setdefault((g, t), []).append((v, 1.0))
    for e in od:
        price = (e.usd_per_work_hour[Tier.ON_DEMAND] or 0.0) * e.work_per_instance_hour
        v = pulp.LpVariable(name("O"), lowBound=0, cat=cat)
        allocs.append(
            AllocVar(
                w.name,
                Tier.ON_DEMAND,
                e.pool_key,
                e.instance_type,
                t,
                e.units_per_instance,
                e.work_per_instance_hour,
                price,
                v,
                place,
            )
        )
    for e in spot:
        cap = float(built.spot_caps[e.pool_key][t])
        sp = float(spot_prices[e.pool_key][t])
        if cap <= 0 or not math.isfinite(sp) or e.spot_factor is None:
            continue
        v = pulp.LpVariable(name("S"), lowBound=0, upBound=cap, cat=cat)
        allocs.append(
            AllocVar(
                w.name,
                Tier.SPOT,
                e.pool_key,
                e.pool_key,
                t,
                e.units_per_instance,
                e.work_per_instance_hour / e.spot_factor,
                sp,
                v,
                place,
                held.get((e.pool_key, t), 1.0),
            )
        )
        pool_use.setdefault((e.pool_key, t), []).append((v, 1.0))


def _workload_period(
    problem: PlanningProblem,
    built: BuiltModel,
    w: Workload,
    t: int,
    L: float,
    allocs: list[AllocVar],
    objective: Terms,
    name: _Namer,
) -> None:
    prob = built.prob
    work = [(a.var, a.expected_work) for a in allocs]
    nonrev_work = [(a.var, a.work_per_instance) for a in allocs if a.tier is not Tier.SPOT]
    units = [(a.var, float(a.units_per_instance)) for a in allocs]
    spot = [a for a in allocs if a.tier is Tier.SPOT]
    spot_units = [(a.var, float(a.units_per_instance)) for a in spot]
    if w.workload_class is WorkloadClass.SERVING:
        d = float(built.serving_demand[w.name][t])
        u = pulp.LpVariable(name("U"), lowBound=0)
        built.unmet_serving[(w.name, t)] = u
        objective.append((u, L * w.unmet_penalty_usd_per_unit_hour))
        cname = name("serve")
        prob += _lin([*work, (u, 1.0)]) >= d, cname
        built.described[cname] = f"{w.name}: demand {d:g} units in period {t}"
        if w.max_spot_share < 1.0:
            cname = name("base")
            prob += _lin([*nonrev_work, (u, 1.0)]) >= (1.0 - w.max_spot_share) * d, cname
            built.described[cname] = (
                f"{w.name}: {1 - w.max_spot_share:.0%} of demand on non-revocable tiers"
            )
    elif w.workload_class is WorkloadClass.TRAINING:
        assert w.max_units is not None
        dwell_h = max(
            w.min_dwell_minutes / 60.0,
            float(problem.options.period_hours),
            math.ceil(problem.hours / max(1, problem.options.gang_blocks)),
        )
        block = int(problem.period_bounds[t][0] // dwell_h)
        key = (w.name, block)
        rows = built.gangs.get(w.name)
        if key not in built.gang:
            steps = (w.max_units - w.min_units) // w.step_units
            r = pulp.LpVariable(name("R"), cat=pulp.LpBinary)
            n = pulp.LpVariable(name("N"), lowBound=0, upBound=steps, cat=pulp.LpInteger)
            prob += _lin([(n, 1.0), (r, -float(steps))]) <= 0
            built.gang[key] = (r, n)
            if rows is not None:
                rows.add_block(prob, name, block, r, n)
        r, n = built.gang[key]
        if rows is not None:  # the gang's rows, per placement (``placement``)
            cells = [(a.placement or "", a.tier, a.var, float(a.units_per_instance),
                      float(built.spot_caps[a.pool_key][t]) if a.tier is Tier.SPOT else 0.0)
                     for a in allocs]  # fmt: skip
            rows.add_period(prob, name, built.described, block, cells)
        else:
            _gang_rows(built, w, allocs, units, spot_units, r, n, name)
    elif w.max_units is not None:
        cname = name("par")
        prob += _lin(units) <= float(w.max_units), cname
        built.described[cname] = f"{w.name}: at most {w.max_units} units at once"
    if (
        w.workload_class is not WorkloadClass.TRAINING
        and w.max_spot_share < 1.0
        and w.workload_class is not WorkloadClass.SERVING
        and spot_units
    ):
        prob += _lin([*spot_units, *[(v, -w.max_spot_share * c) for v, c in units]]) <= 0
    zone_caps, region_cap = caps_apply(w)  # a gang's contract overrides them (``placement``)
    # A placed gang's caps hold inside each placement (only one runs at a
    # time): stated over all of them, the relaxation met them by spreading
    # the gang over two regions at once.
    groups: dict[str | None, list[AllocVar]] = {}
    for a in spot:
        groups.setdefault(a.placement, []).append(a)
    for members in groups.values():
        units_k = [(a.var, float(a.units_per_instance)) for a in members]
        if zone_caps:
            _diversify(built, w, members, units_k, name)
            _domains(problem, built, w, members, units_k, name)
        if region_cap:
            _regions(built, w, members, units_k, name)


def _gang_rows(
    built: BuiltModel,
    w: Workload,
    allocs: list[AllocVar],
    units: Terms,
    spot_units: Terms,
    r: LpVariable,
    n: LpVariable,
    name: _Namer,
) -> None:
    """A gang with no placement options (no pool offers its types): its size
    rows over whatever allocations it has (none: it cannot run)."""
    prob = built.prob
    cname = name("gang")
    prob += _lin([*units, (r, -float(w.min_units)), (n, -float(w.step_units))]) == 0, cname
    built.described[cname] = (
        f"{w.name}: gang of {w.min_units}..{w.max_units} units in steps of {w.step_units}"
    )
    if w.non_revocable_min_units > 0:
        nonrev_units = [
            (a.var, float(a.units_per_instance)) for a in allocs if a.tier is not Tier.SPOT
        ]
        cname = name("gangmin")
        prob += _lin([*nonrev_units, (r, -float(w.min_units))]) >= 0, cname
        built.described[cname] = f"{w.name}: gang minimum {w.min_units} on non-revocable tiers"
    if w.max_spot_share < 1.0 and spot_units:
        prob += _lin([*spot_units, *[(v, -w.max_spot_share * c) for v, c in units]]) <= 0


def _regions(
    built: BuiltModel, w: Workload, spot: list[AllocVar], spot_units: Terms, name: _Namer
) -> None:
    """The region cap beside zone and pool (``broker.planning.optimizer.regions``)."""
    rows = [(a.pool_key, a.var, float(a.units_per_instance)) for a in spot]
    for cap in region_caps(w, rows):
        cname = name("region")
        built.prob += (
            _lin([*cap.terms, *[(v, -cap.share * c) for v, c in spot_units]]) <= 0,
            cname,
        )
        built.described[cname] = cap.description


def _domains(
    problem: PlanningProblem,
    built: BuiltModel,
    w: Workload,
    spot: list[AllocVar],
    spot_units: Terms,
    name: _Namer,
) -> None:
    """The zone cap over failure domains (``broker.planning.optimizer.domains``)."""
    rows = [(a.pool_key, a.var, float(a.units_per_instance)) for a in spot]
    for cap in domain_caps(w, rows, problem.costs.snapshot.failure_domains):
        cname = name("domain")
        built.prob += (
            _lin([*cap.terms, *[(v, -w.max_zone_share * c) for v, c in spot_units]]) <= 0,
            cname,
        )
        built.described[cname] = cap.description


def _diversify(
    built: BuiltModel,
    w: Workload,
    spot: list[AllocVar],
    spot_units: Terms,
    name: _Namer,
) -> None:
    if not spot:
        return
    prob = built.prob
    by_zone: dict[str, list[AllocVar]] = {}
    for a in spot:
        by_zone.setdefault(PoolKey.parse(a.pool_key).zone, []).append(a)
    if w.max_zone_share < 1.0:
        for zone, members in by_zone.items():
            cname = name("zone")
            terms = [(a.var, float(a.units_per_instance)) for a in members]
            prob += _lin([*terms, *[(v, -w.max_zone_share * c) for v, c in spot_units]]) <= 0, cname
            built.described[cname] = f"{w.name}: at most {w.max_zone_share:.0%} of spot in {zone}"
    if w.max_pool_share < 1.0 and len(spot) > 1:
        for a in spot:
            if len(by_zone[PoolKey.parse(a.pool_key).zone]) == 1 and (
                w.max_zone_share <= w.max_pool_share
            ):
                continue  # implied by the zone cap
            cname = name("pool")
            prob += (
                _lin(
                    [
                        (a.var, float(a.units_per_instance)),
                        *[(v, -w.max_pool_share * c) for v, c in spot_units],
                    ]
                )
                <= 0,
                cname,
            )
            built.described[cname] = (
                f"{w.name}: at most {w.max_pool_share:.0%} of spot in {a.pool_key}"
            )


def _workload_totals(
    problem: PlanningProblem,
    built: BuiltModel,
    w: Workload,
    mine: Sequence[AllocVar],
    objective: Terms,
    name: _Namer,
) -> None:
    """``mine``: ``w``'s allocations (all of them, in the model's order)."""
    if w.workload_class is WorkloadClass.SERVING:
        return
    required = problem.required_unit_hours(w)
    lengths = problem.period_lengths
    u = pulp.LpVariable(name("UW"), lowBound=0)
    built.unmet_work[w.name] = u
    objective.append((u, w.unmet_penalty_usd_per_unit_hour))
    terms = [(a.var, a.expected_work * float(lengths[a.period])) for a in mine]
    # Work left beyond what is due, not done here, costs what it is expected
    # to cost later (v_w (room - A_w) in the docstring, kept >= 0 so the gap
    # stays relative to a positive objective).
    later: Terms = []
    room = problem.remaining(w) - required
    value = problem.ahead_usd_per_unit_hour.get(w.name, 0.0)
    if value > 0 and room > 1e-9:
        b = pulp.LpVariable(name("B"), lowBound=0, upBound=room)
        objective.append((b, value))
        later.append((b, 1.0))
    cname = name("work")
    built.prob += _lin([*terms, (u, 1.0), *later]) >= required + (room if later else 0.0), cname
    built.described[cname] = f"{w.name}: {required:,.0f} unit-hours of work by its deadline"
    milestone = problem.milestones.get(w.name)
    if milestone is not None and milestone[1] > 0:
        hour, due = milestone
        bounds = problem.period_bounds
        early = [
            (
                a.var,
                a.expected_work * float(min(bounds[a.period][1], hour) - bounds[a.period][0]),
            )
            for a in mine
            if bounds[a.period][0] < hour
        ]
        late = pulp.LpVariable(name("UM"), lowBound=0)
        objective.append((late, w.unmet_penalty_usd_per_unit_hour))
        cname = name("milestone")
        built.prob += _lin([*early, (late, 1.0)]) >= min(due, required), cname
        built.described[cname] = f"{w.name}: {due:,.0f} unit-hours done by hour {hour}"
