"""The alternatives Spotfolio is compared with, as plans of the same shape.

Owns: ``all_on_demand``, ``committed_quantile`` (commit the discount-quantile
of each workload's demand, the rest on-demand: the textbook reservation rule,
docs/concepts/reservations.md) and ``static_mix`` (an Auto Scaling group's
mixed-instances policy: an on-demand share above a base, the rest spot spread
evenly over the cheapest spot pools by *listed* price, blind to interruption
cost). Each respects the workload's hard rules (serving's non-revocable base,
training gang sizes, deadlines) so the comparison is like for like. Each
prices from the ``CostTable`` it is handed (``committed_quantile`` buys the
table's commitment term); none recomputes effective costs.

Must not: solve a MILP (these are the rules people use without one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pandas as pd

from broker.planning.plan import ALLOCATION_COLUMNS, Commitment, Plan
from markets.commitments import term_hours
from markets.model import MarketSnapshot, Tier
from policies.cost_table import CostEntry, CostTable
from policies.reservations import committed_count, persists
from policies.workloads.spec import Workload, WorkloadClass, WorkloadSet

__all__ = ["STATIC_MIX_ON_DEMAND_SHARE", "all_on_demand", "committed_quantile", "static_mix"]

FloatArray = npt.NDArray[np.float64]

# An ASG mixed-instances policy commonly keeps some on-demand above its base
# (OnDemandPercentageAboveBaseCapacity); 30 % is our stated default, raised to
# a serving workload's non-revocable share where its policy demands more.
STATIC_MIX_ON_DEMAND_SHARE = 0.3
STATIC_MIX_SPOT_POOLS = 4


def _rows(
    hours: int,
    w: str,
    tier: Tier,
    e: CostEntry,
    instances: FloatArray,
    price: float,
    work_factor: float = 1.0,
) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for h in np.flatnonzero(instances > 1e-9):
        x = float(instances[h])
        out.append(
            (
                int(h),
                int(h),
                int(h) + 1,
                w,
                tier.value,
                e.pool_key,
                x,
                x * e.units_per_instance,
                x * e.work_per_instance_hour * work_factor,
                price,
            )
        )
    return out


def _job_units(w: Workload, hours: int, work_per_unit: float) -> tuple[FloatArray, float]:
    """Constant units per hour that finish the job's (pro-rata) work by its
    deadline, as a gang size where the job is a gang."""
    deadline = min(float(hours), w.deadline_hours or float(hours))
    release = min(float(hours), float(math.ceil(w.release_hours)))
    required = (w.unit_hours or 0.0) * w.due_share(hours)
    span = deadline - release
    units = required / (span * work_per_unit) if span > 0 else 0.0
    if w.workload_class is WorkloadClass.TRAINING:
        sizes = w.gang_sizes()
        units = next((s for s in sizes if s >= units - 1e-9), sizes[-1] if sizes else units)
    elif w.max_units is not None:
        units = min(units, float(w.max_units))
    run = np.zeros(hours)
    run[int(release) : math.ceil(deadline)] = units
    return run, required


def _serving_units(w: Workload, demand: Mapping[str, FloatArray], hours: int) -> FloatArray:
    return np.asarray(demand[w.name][:hours], dtype=float)


def _plan(
    snapshot: MarketSnapshot,
    hours: int,
    rows: list[tuple[object, ...]],
    commitments: tuple[Commitment, ...],
    name: str,
) -> Plan:
    table = pd.DataFrame(rows, columns=ALLOCATION_COLUMNS)
    p = Plan(snapshot.at, hours, 1, commitments, table, 0.0, "rule", name, 0.0, False)
    return Plan(**{**p.__dict__, "objective_usd": p.planned_cost_usd()})


def all_on_demand(
    snapshot: MarketSnapshot,
    workloads: WorkloadSet,
    demand: Mapping[str, FloatArray],
    hours: int,
    *,
    costs: CostTable,
) -> Plan:
    """Everything on the cheapest on-demand type per workload."""
    costs.check(snapshot, workloads)
    rows: list[tuple[object, ...]] = []
    for w in workloads.workloads:
        e = costs.cheapest(w.name, Tier.ON_DEMAND)
        if e is None:
            continue
        price = (e.usd_per_work_hour[Tier.ON_DEMAND] or 0.0) * e.work_per_instance_hour
        if w.workload_class is WorkloadClass.SERVING:
            inst = _serving_units(w, demand, hours) / e.work_per_instance_hour
        else:
            units, _ = _job_units(w, hours, e.throughput)
            inst = units / e.units_per_instance
        rows += _rows(hours, w.name, Tier.ON_DEMAND, e, inst, price)
    return _plan(snapshot, hours, rows, (), "on_demand")


def committed_quantile(
    snapshot: MarketSnapshot,
    workloads: WorkloadSet,
    demand: Mapping[str, FloatArray],
    hours: int,
    *,
    costs: CostTable,
) -> Plan:
    """Commit, per workload, the count the quantile rule gives against
    on-demand (``policies.reservations.committed_count``, over the term: a
    finite job's demand is nil after it ends); the rest on-demand. The term
    bought is the table's (``costs.options.term_years``)."""
    costs.check(snapshot, workloads)
    term_years = costs.options.term_years
    rows: list[tuple[object, ...]] = []
    commits: list[Commitment] = []
    for w in workloads.workloads:
        od = costs.cheapest(w.name, Tier.ON_DEMAND)
        com = costs.cheapest(w.name, Tier.COMMITTED)
        if od is None:
            continue
        od_price = (od.usd_per_work_hour[Tier.ON_DEMAND] or 0.0) * od.work_per_instance_hour
        if w.workload_class is WorkloadClass.SERVING:
            need_work = _serving_units(w, demand, hours)
        else:
            units, _ = _job_units(w, hours, od.throughput)
            need_work = units * od.throughput
        n = 0
        if com is not None:
            c_price = com.usd_per_work_hour[Tier.COMMITTED] or 0.0
            in_instances = np.ceil(need_work / com.work_per_instance_hour - 1e-9)
            # Over the term: a finite job's hours are all it would use of it.
            n = committed_count(
                in_instances,
                c_price * com.work_per_instance_hour,
                (od.usd_per_work_hour[Tier.ON_DEMAND] or 0.0) * com.work_per_instance_hour,
                term_hours=None if persists(w) else term_hours(term_years),
            )
        covered = np.zeros(hours)
        if n > 0 and com is not None:
            group = str(com.key.group)
            c_inst_price = (
                com.usd_per_work_hour[Tier.COMMITTED] or 0.0
            ) * com.work_per_instance_hour
            commits.append(
                Commitment(
                    group, com.pool_key, n, n * com.units_per_instance, c_inst_price, term_years
                )
            )
            used = np.minimum(need_work / com.work_per_instance_hour, n)
            covered = used * com.work_per_instance_hour
            rows += _rows(hours, w.name, Tier.COMMITTED, com, used, c_inst_price)
        rest = np.maximum(need_work - covered, 0.0) / od.work_per_instance_hour
        rows += _rows(hours, w.name, Tier.ON_DEMAND, od, rest, od_price)
    return _plan(snapshot, hours, rows, tuple(commits), "committed_quantile")


def static_mix(
    snapshot: MarketSnapshot,
    workloads: WorkloadSet,
    demand: Mapping[str, FloatArray],
    hours: int,
    *,
    costs: CostTable,
    on_demand_share: float = STATIC_MIX_ON_DEMAND_SHARE,
) -> Plan:
    """On-demand share on the cheapest on-demand type, the rest on spot spread
    evenly over the ``STATIC_MIX_SPOT_POOLS`` cheapest pools by listed spot
    price in distinct zones. Spot delivers its work at the effective rate."""
    costs.check(snapshot, workloads)
    rows: list[tuple[object, ...]] = []
    for w in workloads.workloads:
        entries = costs.entries(w.name)
        od = costs.cheapest(w.name, Tier.ON_DEMAND)
        if od is None:
            continue
        od_price = (od.usd_per_work_hour[Tier.ON_DEMAND] or 0.0) * od.work_per_instance_hour
        share_od = max(on_demand_share, 1.0 - w.max_spot_share)
        spot_pools: list[CostEntry] = []
        zones: set[str] = set()
        listed = sorted(
            (e for e in entries if e.spot_factor is not None),
            key=lambda e: _listed_spot(costs, e) / e.work_per_instance_hour,
        )
        for e in listed:
            zone = e.key.zone
            if zone not in zones:
                spot_pools.append(e)
                zones.add(zone)
            if len(spot_pools) >= STATIC_MIX_SPOT_POOLS:
                break
        if not spot_pools:
            share_od = 1.0
        if w.workload_class is WorkloadClass.SERVING:
            need = _serving_units(w, demand, hours)
        else:
            units, _ = _job_units(w, hours, od.throughput)
            need = units * od.throughput
            if w.non_revocable_min_units:
                share_od = max(share_od, w.non_revocable_min_units / max(units.max(), 1e-9))
        rows += _rows(
            hours, w.name, Tier.ON_DEMAND, od, need * share_od / od.work_per_instance_hour, od_price
        )
        for e in spot_pools:
            assert e.spot_factor is not None
            part = need * (1 - share_od) / len(spot_pools)
            # Spot does work at the effective rate: buy enough to deliver it.
            inst = part * e.spot_factor / e.work_per_instance_hour
            rows += _rows(
                hours,
                w.name,
                Tier.SPOT,
                e,
                inst,
                _listed_spot(costs, e),
                work_factor=1.0 / e.spot_factor,
            )
    return _plan(snapshot, hours, rows, (), "static_mix")


def _listed_spot(costs: CostTable, e: CostEntry) -> float:
    return costs.pool(e.pool_key).spot_usd_per_hour or math.inf
