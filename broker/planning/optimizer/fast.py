"""The fast path: a greedy allocator whose plan is feasible by construction.

Owns: ``fast_plan``. For revocations and storms there is no time for a MILP:
this fills each period's demand from the cheapest sources in effective-cost
order, honouring every rule the MILP honours (non-revocable base, gang sizes
and gang minimum on non-revocable tiers, max spot share, zone, pool and region
caps on spot, pool capacity shared between workloads, deadlines), in milliseconds.
Commitments are taken as given (``problem.committed_fixed``; none by default),
since buying them is a horizon decision, not a reaction.

Spot water-filling: for a spot target S, a pool may take at most
``min(capacity left, max_pool_share * S)`` and its zone at most
``max_zone_share * S`` (the zones of a failure domain together, as the MILP
caps them); what spot cannot take goes to on-demand. The MILP's
cost is a lower bound for this plan's objective on the same problem (the bench
reports the gap); proving none itself, a fast plan's status is ``feasible``.

Quotas: every tier's instances keep to the account quotas as they are
placed (``broker.planning.optimizer.quotas.Room``): spot a quota has no
room for goes to on-demand, on-demand to the next cheapest pool where the
cheapest has none; what no pool has room for is unmet.

Budgets: the greedy plan is then cut to every dollar limit the MILP honours
(``broker.planning.optimizer.budgets.cap_allocations``, per hour, horizon,
tier and day, less what was spent); the work cut is unmet, and the plan names
the budgets that cut it (``Plan.budget_limited``).

Held blocks (``blocks``): sunk, so deadline jobs run in them right after
commitments, at $0 an hour, inside their windows; buying one is the MILP's.

Gangs: a training gang keeps its placement contract
(``policies.workloads.placement``): one placement is chosen first (where
the gang runs now, else the cheapest estimate), every tier of the gang
comes from inside it, in whole instances and gang sizes its instances can
make; the zone, pool and region caps it overrides are not applied
(``placement.caps_apply``).

Time: a fast plan prices none (a job's value of time is the MILP's,
``broker.planning.optimizer.finish``); a job runs at the pace its deadline
needs, from the cheapest sources.

Must not: import PuLP.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from broker.planning.optimizer.blocks import block_pool_key, held_instances
from broker.planning.optimizer.budgets import cap_allocations
from broker.planning.optimizer.domains import spread_key
from broker.planning.optimizer.placement import caps_apply, place_of
from broker.planning.optimizer.problem import PlanningProblem
from broker.planning.optimizer.quotas import Room
from broker.planning.optimizer.quotas import cap_allocations as cap_to_quotas
from broker.planning.optimizer.regions import region_key, region_share_cap
from broker.planning.plan import ALLOCATION_COLUMNS, Commitment, Plan
from markets.keys import CommitmentKey
from markets.model import Tier
from policies.cost_table import CostEntry
from policies.held import gang_hour_usd_ahead
from policies.workloads.spec import Workload, WorkloadClass

__all__ = ["fast_plan"]


def _group(e: CostEntry) -> str:
    return str(e.key.group)


class _Pools:
    """Spot capacity left per (pool, period), shared by all workloads."""

    def __init__(self, problem: PlanningProblem) -> None:
        self.left = {p.key: problem.period_min(p.spot_capacity_instances) for p in problem.pools}
        self.price = {p.key: problem.period_mean(p.spot_usd_per_hour) for p in problem.pools}
        self.domains = problem.costs.snapshot.failure_domains

    def place(self, entries: Sequence[CostEntry]) -> Callable[[str], str]:
        """The zone cap counts a failure domain's zones together, as the
        MILP's domain rows do (``broker.planning.optimizer.domains``): a
        domain is one place for the cap (each of its zones is then within it
        too), unless it holds every zone of ``entries``' spot."""
        return spread_key(
            self.domains, {e.key.zone_key for e in entries if e.spot_factor is not None}
        )


def _fill_spot(
    w: Workload,
    entries: Sequence[CostEntry],
    t: int,
    target_work: float,
    pools: _Pools,
    *,
    in_units: bool = False,
) -> list[tuple[CostEntry, float]]:
    """Instances per spot pool delivering at most ``target_work`` (physical
    units instead when ``in_units``: a gang is sized in GPUs), within caps."""
    out: list[tuple[CostEntry, float]] = []
    zone_used: dict[str, float] = {}
    region_used: dict[str, float] = {}
    remaining = target_work
    place = pools.place(entries)
    # Caps are shares of the spot *units* the workload ends up holding; taking
    # them as shares of the target is conservative (holding less only loosens them).
    for e in entries:
        if remaining <= 1e-9:
            break
        if e.spot_factor is None or e.usd_per_work_hour[Tier.SPOT] is None:
            continue
        price = pools.price[e.pool_key][t]
        if not math.isfinite(price):
            continue
        work_per_inst = (
            float(e.units_per_instance) if in_units else e.work_per_instance_hour / e.spot_factor
        )
        zone = place(e.key.zone_key)
        target_units = target_work / max(work_per_inst, 1e-12) * e.units_per_instance
        pool_cap = w.max_pool_share * target_units / e.units_per_instance
        zone_cap = (
            w.max_zone_share * target_units - zone_used.get(zone, 0.0)
        ) / e.units_per_instance
        region = region_key(e.pool_key)
        region_cap = (
            region_share_cap(w, target_units, region_used.get(region, 0.0)) / e.units_per_instance
        )
        n = min(
            pools.left[e.pool_key][t], pool_cap, zone_cap, region_cap, remaining / work_per_inst
        )
        if n <= 1e-9:
            continue
        zone_used[zone] = zone_used.get(zone, 0.0) + n * e.units_per_instance
        region_used[region] = region_used.get(region, 0.0) + n * e.units_per_instance
        remaining -= n * work_per_inst
        out.append((e, n))
    out = _enforce_shares(w, out, place)
    for e, n in out:
        pools.left[e.pool_key][t] -= n
    return out


def _enforce_shares(
    w: Workload, alloc: list[tuple[CostEntry, float]], place: Callable[[str], str]
) -> list[tuple[CostEntry, float]]:
    """Cut pools and zones back to their share of the spot actually held
    (the target may not have been reached, which shrinks the allowed shares);
    repeat until every cap holds, or give up spot entirely."""
    amounts = [n for _e, n in alloc]
    for _ in range(200):
        units = [n * e.units_per_instance for (e, _n), n in zip(alloc, amounts, strict=True)]
        total = sum(units)
        if total <= 1e-9:
            return []
        worst = 0.0
        by_zone: dict[str, list[int]] = {}
        by_region: dict[str, list[int]] = {}
        for i, (e, _n) in enumerate(alloc):
            by_zone.setdefault(place(e.key.zone_key), []).append(i)
            by_region.setdefault(region_key(e.pool_key), []).append(i)
            over = units[i] - w.max_pool_share * total
            if over > 1e-9:
                worst = max(worst, over)
                amounts[i] -= over / e.units_per_instance
        places = [(by_zone, w.max_zone_share)]
        if w.max_region_share < 1.0:
            places.append((by_region, w.max_region_share))
        for groups, cap in places:  # zones (a failure domain as one), then regions
            for members in groups.values():
                g_units = sum(units[i] for i in members)
                over = g_units - cap * total
                if over > 1e-9:
                    worst = max(worst, over)
                    for i in members:
                        amounts[i] *= 1.0 - over / g_units
        if worst <= 1e-9:
            return [(e, n) for (e, _n), n in zip(alloc, amounts, strict=True) if n > 1e-9]
    return []


def _gang_schedule(
    w: Workload,
    od: CostEntry,
    spot: list[CostEntry],
    periods: list[int],
    lengths: object,
    required: float,
) -> tuple[int, list[int]]:
    """The gang size with the lowest estimated dollars per unit of work (the
    minimum on on-demand where the policy says so, the rest at the cheapest
    effective spot price), run for just enough of the earliest periods."""
    # whole instances: sizes the placement's instances make
    sizes = [z for z in w.gang_sizes() if z % od.units_per_instance == 0] or w.gang_sizes()
    od_unit = (od.usd_per_work_hour[Tier.ON_DEMAND] or 0.0) * od.throughput
    spot_prices = [e.usd_per_work_hour[Tier.SPOT] for e in spot]
    spot_unit = min((p * od.throughput for p in spot_prices if p is not None), default=od_unit)
    nonrev = w.non_revocable_min_units

    def usd_per_work(size: int) -> float:
        return (nonrev * od_unit + (size - nonrev) * min(spot_unit, od_unit)) / (
            size * od.throughput
        )

    size = min(sizes, key=lambda z: (usd_per_work(z), -z))
    # Run from the start until the work is done (the caller stops there).
    return size, list(periods)


def fast_plan(problem: PlanningProblem) -> Plan:
    """A feasible plan in one greedy pass (see the module docstring)."""
    t0 = time.perf_counter()
    pools = _Pools(problem)
    room = Room(problem)  # account quotas left, per period (``quotas``)
    periods = problem.period_bounds
    lengths = problem.period_lengths
    bought: dict[str, float] = {g: float(n) for g, n in (problem.committed_fixed or {}).items()}
    used: dict[tuple[str, int], float] = {}  # committed instances in use per (group, period)
    committed_price: dict[str, float] = {}
    rows: list[tuple[object, ...]] = []
    unmet: dict[str, float] = {}
    commit_pool: dict[str, CostEntry] = {}
    held: dict[tuple[str, int], float] = {}  # held block instances left per (pool, period)
    runs_in: set[str] = set()  # pools of held blocks the plan runs in
    for w in sorted(problem.workloads.workloads, key=lambda x: -x.priority):
        entries: Sequence[CostEntry] = problem.entries(w)
        if w.workload_class is WorkloadClass.TRAINING:
            entries = _gang_placement(problem, w, entries, pools)
        on_demand = [e for e in entries if e.usd_per_work_hour[Tier.ON_DEMAND] is not None]
        if not on_demand:  # no pool of the market offers its types: all of it unmet
            unmet[w.name] = _all_demand(problem, w)
            continue
        od = min(on_demand, key=lambda e: (e.usd_per_work_hour[Tier.ON_DEMAND], e.preference_rank))
        od_next: list[CostEntry] = []  # where quotas leave ``od`` no room
        if problem.quotas:
            od_next = sorted((e for e in on_demand if e is not od and (
                not gang_mode_of(w) or e.units_per_instance == od.units_per_instance)),
                key=lambda e: (e.usd_per_work_hour[Tier.ON_DEMAND], e.preference_rank))  # fmt: skip
        com = [e for e in entries if e.usd_per_work_hour[Tier.COMMITTED] is not None
               and bought.get(_group(e), 0) > 0]  # fmt: skip
        spot_order = [e for e in entries if e.spot_factor is not None and w.max_spot_share > 0
                      and problem.options.allow_spot]  # fmt: skip
        held_pools = {block_pool_key(b) for b in problem.blocks if b.held}
        in_blocks = [] if w.workload_class is WorkloadClass.SERVING else [
            e for e in entries if e.pool_key in held_pools]  # fmt: skip
        if w.workload_class is WorkloadClass.TRAINING:  # whole instances of one size
            com = [e for e in com if e.units_per_instance == od.units_per_instance]
            in_blocks = [e for e in in_blocks if e.units_per_instance == od.units_per_instance]
            spot_order = [e for e in spot_order if e.units_per_instance == od.units_per_instance]
        required = problem.required_unit_hours(w)
        run_periods = [t for t, (h0, _h1) in enumerate(periods)
                       if problem.runs_in(w, h0)]  # fmt: skip
        hours_avail = float(sum(lengths[t] for t in run_periods))
        per_hour_work = required / hours_avail if hours_avail > 0 else 0.0
        gang = 0
        if w.workload_class is WorkloadClass.TRAINING:
            gang, run_periods = _gang_schedule(w, od, spot_order, run_periods, lengths, required)
        gang_mode = w.workload_class is WorkloadClass.TRAINING

        def measure(e: CostEntry, gang_mode: bool = gang_mode) -> float:
            return float(e.units_per_instance) if gang_mode else e.work_per_instance_hour

        done = 0.0
        short = 0.0
        for t in run_periods:
            if gang_mode and done >= required - 1e-9:
                break  # the gang has done its work: stop paying for it
            h0, h1 = periods[t]
            if w.workload_class is WorkloadClass.SERVING:
                need = float(problem.serving_period_demand(w.name)[t])
                base = (1.0 - w.max_spot_share) * need
            elif w.workload_class is WorkloadClass.TRAINING:
                need = float(gang)  # a gang is counted in physical units
                base = float(w.non_revocable_min_units)
            else:
                cap = (w.max_units or math.inf) * od.throughput
                need = min(per_hour_work, cap)
                base = (1.0 - w.max_spot_share) * need
            got_nonrev = 0.0
            committed_work = 0.0
            for e in com:  # committed first: already paid for, base and above
                g = _group(e)
                left = bought[g] - used.get((g, t), 0.0)
                take = min(left, (need - got_nonrev) / measure(e),
                           room.fits(e.pool_key, Tier.COMMITTED, t))  # fmt: skip
                if gang_mode:
                    take = float(math.floor(take + 1e-9))
                if take <= 1e-9:
                    continue
                used[(g, t)] = used.get((g, t), 0.0) + take
                room.take(e.pool_key, Tier.COMMITTED, t, take)
                price = (e.usd_per_work_hour[Tier.COMMITTED] or 0.0) * e.work_per_instance_hour
                committed_price[g] = price
                commit_pool[g] = e
                rows.append((t, h0, h1, w.name, Tier.COMMITTED.value, e.pool_key, take,
                             take * e.units_per_instance, take * e.work_per_instance_hour,
                             price))  # fmt: skip
                got_nonrev += take * measure(e)
                committed_work += take * e.work_per_instance_hour
            for e in in_blocks:  # then held blocks: sunk, at $0 an hour (``blocks``)
                left = held.setdefault((e.pool_key, t), held_instances(problem, e.pool_key, t))
                take = min(left, (need - got_nonrev) / measure(e),
                           room.fits(e.pool_key, Tier.ON_DEMAND, t))  # fmt: skip
                if gang_mode:
                    take = float(math.floor(take + 1e-9))
                if take <= 1e-9:
                    continue
                held[(e.pool_key, t)] = left - take
                room.take(e.pool_key, Tier.ON_DEMAND, t, take)
                rows.append((t, h0, h1, w.name, Tier.ON_DEMAND.value, e.pool_key, take,
                             take * e.units_per_instance, take * e.work_per_instance_hour,
                             0.0))  # fmt: skip
                got_nonrev += take * measure(e)
                committed_work += take * e.work_per_instance_hour
                runs_in.add(e.pool_key)
            od_base = max(base - got_nonrev, 0.0) / measure(od)
            spot_target = min(need - max(base, got_nonrev), w.max_spot_share * need)
            spot = _fill_spot(_capped(w), spot_order, t, max(spot_target, 0.0), pools,
                              in_units=gang_mode)  # fmt: skip
            if gang_mode:  # whole instances; the fraction back to the pool
                whole = [(e, float(math.floor(n + 1e-9))) for e, n in spot]
                for (e, n), (_e, k) in zip(spot, whole, strict=True):
                    pools.left[e.pool_key][t] += n - k
                spot = [(e, k) for e, k in whole if k > 0]
                od_base = float(math.ceil(od_base - 1e-9))
            spot = _within_quotas(spot, room, pools, t, whole=gang_mode)
            spot_work = sum(
                n
                * (
                    e.units_per_instance
                    if gang_mode
                    else e.work_per_instance_hour / (e.spot_factor or 1.0)
                )
                for e, n in spot
            )
            od_rest = max(need - max(base, got_nonrev) - spot_work, 0.0) / measure(od)
            od_total = od_base + od_rest
            # On-demand from the cheapest pool, then the next ones where an
            # account quota leaves no room there; what none takes goes unmet.
            od_taken: list[tuple[CostEntry, float]] = []
            left_m = od_total * measure(od)
            for e in [od, *od_next] if od_total > 1e-9 else []:
                n = left_m / measure(e)
                fit = room.fits(e.pool_key, Tier.ON_DEMAND, t)
                if fit < n:  # whole instances for a gang
                    n = float(math.floor(fit + 1e-9)) if gang_mode else fit
                if n <= 1e-9:
                    continue
                room.take(e.pool_key, Tier.ON_DEMAND, t, n)
                od_taken.append((e, n))
                left_m -= n * measure(e)
                if left_m <= 1e-9:
                    break
            for e, n in od_taken:
                e_price = (e.usd_per_work_hour[Tier.ON_DEMAND] or 0.0) * e.work_per_instance_hour
                rows.append((t, h0, h1, w.name, Tier.ON_DEMAND.value, e.pool_key, n,
                             n * e.units_per_instance, n * e.work_per_instance_hour,
                             e_price))  # fmt: skip
            for e, n in spot:
                assert e.spot_factor is not None
                rows.append((t, h0, h1, w.name, Tier.SPOT.value, e.pool_key, n,
                             n * e.units_per_instance,
                             n * e.work_per_instance_hour / e.spot_factor,
                             float(pools.price[e.pool_key][t])))  # fmt: skip
            delivered = committed_work + sum(n * e.work_per_instance_hour for e, n in od_taken)
            delivered += sum(n * e.work_per_instance_hour / (e.spot_factor or 1.0) for e, n in spot)
            done += delivered * float(lengths[t])
            if w.workload_class is WorkloadClass.SERVING and delivered < need - 1e-7 * max(
                1.0, need
            ):
                short += (need - delivered) * float(lengths[t])  # no quota had room
        if w.workload_class is not WorkloadClass.SERVING:
            unmet[w.name] = max(required - done, 0.0)
        else:
            unmet[w.name] = short
    table = pd.DataFrame(rows, columns=ALLOCATION_COLUMNS)
    fixed_usd_h = sum(n * committed_price.get(g, _fixed_price(problem, g))
                      for g, n in bought.items())  # fmt: skip
    capped, limited = cap_allocations(problem, table, fixed_usd_h)
    if limited:
        _cut_unmet(problem, table, capped, unmet)
        table = capped
    # The greedy pass keeps to quotas; this cut holds them for any row it
    # could not route (a gang's whole rows of a period).
    within, quota_cut = cap_to_quotas(problem, table)
    if quota_cut:
        _cut_unmet(problem, table, within, unmet)
        table = within
        limited = [*limited, *quota_cut]
    commitments = tuple(
        Commitment(g, commit_pool[g].pool_key if g in commit_pool else "", n, 0,
                   committed_price.get(g, _fixed_price(problem, g)), problem.options.term_years)
        for g, n in sorted((problem.committed_fixed or {}).items())
    )  # fmt: skip
    # No bound is proven here: a fast plan is only ever "feasible".
    plan = Plan(problem.start, problem.hours, problem.options.period_hours, commitments, table,
                0.0, "feasible", "fast", time.perf_counter() - t0, False,
                unmet_unit_hours=unmet,
                meta={"method": "greedy", "gap": None, "lower_bound_usd": None},
                budget_limited=tuple(limited) if sum(unmet.values()) > 1e-6 else (),
                blocks=tuple(b for b in problem.blocks
                             if b.held and block_pool_key(b) in runs_in))  # fmt: skip
    cost = plan.planned_cost_usd() + sum(
        unmet[w.name] * w.unmet_penalty_usd_per_unit_hour for w in problem.workloads.workloads
    )
    return Plan(**{**plan.__dict__, "objective_usd": cost})


def gang_mode_of(w: Workload) -> bool:
    return w.workload_class is WorkloadClass.TRAINING


def _within_quotas(
    spot: list[tuple[CostEntry, float]], room: Room, pools: _Pools, t: int, *, whole: bool
) -> list[tuple[CostEntry, float]]:
    """``spot`` cut to the quotas' room (the rest back to its pool's
    capacity, and on to on-demand), taking what stays."""
    out = []
    for e, n in spot:
        k = n
        fit = room.fits(e.pool_key, Tier.SPOT, t)
        if fit < n:
            k = float(math.floor(fit + 1e-9)) if whole else fit
        pools.left[e.pool_key][t] += n - k
        if k > 1e-9:
            room.take(e.pool_key, Tier.SPOT, t, k)
            out.append((e, k))
    return out


def _capped(w: Workload) -> Workload:
    """``w`` with the spot caps its placement contract overrides lifted."""
    zone_caps, region_cap = caps_apply(w)
    lift: dict[str, float] = {}
    if not zone_caps:
        lift |= {"max_zone_share": 1.0, "max_pool_share": 1.0}
    if not region_cap:
        lift["max_region_share"] = 1.0
    return w.model_copy(update=lift) if lift else w


def _gang_placement(
    problem: PlanningProblem, w: Workload, entries: Sequence[CostEntry], pools: _Pools
) -> list[CostEntry]:
    """The entries of the one placement the gang gets: where it runs now
    (``previous_instances``), else the one with the cheapest estimated
    dollars per unit of work: a gang with a non-revocable minimum at full
    size, its spot held the share the pool is expected to hold it
    (``policies.held.gang_hour_usd``, the MILP's ranking); any other gang at
    its cheapest spot with capacity (or on-demand, if cheaper)."""
    by_place: dict[str, list[CostEntry]] = {}
    for e in entries:
        by_place.setdefault(place_of(w, e), []).append(e)
    running = {
        place_of(w, e)
        for e in entries
        for tier in Tier
        if problem.previous_instances.get((w.name, e.pool_key, tier.value), 0.0) > 0
    }

    def estimate(place: str) -> float:
        es = by_place[place]
        od = [p for e in es if (p := e.usd_per_work_hour[Tier.ON_DEMAND]) is not None]
        if not od:
            return math.inf
        spot = [e for e in es if e.usd_per_work_hour[Tier.SPOT] is not None
                and e.spot_factor is not None
                and float(pools.left[e.pool_key].max()) > 0]  # fmt: skip
        if w.max_spot_share <= 0 or not spot:
            return min(od)
        if w.non_revocable_min_units > 0:
            # The whole gang-hour, its spot at the share the pool is
            # expected to hold it (``policies.held.gang_hour_usd_ahead``, as the MILP ranks).
            hours = float(problem.hours)
            return min(min(od), *(gang_hour_usd_ahead(w, e, problem.pool(e.pool_key).snap, hours)
                                  for e in spot))  # fmt: skip
        return min(min(od), *(e.usd_per_work_hour[Tier.SPOT] or math.inf for e in spot))

    if not by_place:
        return []
    stay = [p for p in running if p in by_place and math.isfinite(estimate(p))]
    chosen = stay[0] if len(stay) == 1 else min(sorted(by_place), key=estimate)
    return by_place[chosen]


def _fixed_price(problem: PlanningProblem, group: str) -> float:
    """Dollars per instance-hour of a commitment group no workload used."""
    prices = [
        float(price)
        for p in problem.pools
        if (price := p.snap.price(Tier.COMMITTED)) is not None
        and str(CommitmentKey(p.snap.pool.provider.value, p.snap.pool.region,
                              p.snap.pool.instance_type)) == group
    ]  # fmt: skip
    return min(prices, default=0.0)


def _cut_unmet(
    problem: PlanningProblem, before: pd.DataFrame, after: pd.DataFrame, unmet: dict[str, float]
) -> None:
    """Add the work a budget cut to ``unmet`` (unit-hours): serving per
    period, jobs against what they must finish."""

    def work(table: pd.DataFrame) -> pd.Series:
        hours = (table["hour_end"] - table["hour_start"]).astype(float)
        return (table["work_per_hour"] * hours).groupby(table["workload"]).sum()

    was, now = work(before), work(after)
    for w in problem.workloads.workloads:
        lost = float(was.get(w.name, 0.0)) - float(now.get(w.name, 0.0))
        if w.workload_class is WorkloadClass.SERVING:
            unmet[w.name] = unmet.get(w.name, 0.0) + max(lost, 0.0)
        else:
            required = problem.required_unit_hours(w)
            unmet[w.name] = max(required - float(now.get(w.name, 0.0)), 0.0)


def _all_demand(problem: PlanningProblem, w: Workload) -> float:
    """Unit-hours the workload asks for over the horizon."""
    if w.workload_class is WorkloadClass.SERVING:
        demand = problem.serving_period_demand(w.name)
        return float(np.dot(demand, problem.period_lengths))
    return float(problem.required_unit_hours(w))


_ = np  # numpy arrays flow through _Pools
