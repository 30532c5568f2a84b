"""Effective cost of every (workload, pool, tier): the optimizer's price list.

Owns: ``CostEntry`` and ``cost_entries`` — for one workload and one pool, the
throughput factor, the spot time factor (``T_total / T_prod`` from
``effective_cost.spot_time_factor``: checkpoints, lost work and restarts at the
pool's hazard) and the resulting dollars per *productive reference* unit-hour on
each tier. Pools where spot can never finish are kept with spot marked
unusable, never with an infinite or negative price.

Must not: do I/O or choose anything (the optimizer chooses).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from markets.errors import SpotNeverFinishesError
from markets.model import PoolSnapshot, Tier
from policies.checkpoint import NOTICE_SECONDS
from policies.effective_cost import spot_time_factor
from policies.workloads.spec import Workload, WorkloadClass

__all__ = ["CostEntry", "cost_entries", "spot_factor"]


@dataclass(frozen=True, slots=True)
class CostEntry:
    """One workload on one pool.

    ``usd_per_work_hour`` maps a tier to dollars per productive reference
    unit-hour (``None``: the tier is not offered or not usable). ``spot_factor``
    is ``T_total / T_prod`` divided by the pool's expected held share.
    """

    workload: str
    pool_key: str
    instance_type: str
    units_per_instance: int
    throughput: float
    spot_factor: float | None  # None: spot never finishes or is not offered
    usd_per_work_hour: dict[Tier, float | None]
    preference_rank: int

    @property
    def work_per_instance_hour(self) -> float:
        return self.units_per_instance * self.throughput


def spot_factor(
    workload: Workload,
    snap: PoolSnapshot,
    *,
    interruption_multiplier: float = 1.0,
    checkpoint_write_seconds: float | None = None,
) -> float | None:
    """``T_total / T_prod`` of ``workload`` on ``snap``'s spot market, or ``None``
    when spot can never finish there (interruptions outpace restarts).

    Serving replicas are stateless: nothing to checkpoint, no work lost beyond
    the cold start, so only the restart counts.
    """
    hazard = snap.hazard.rate_per_hour * interruption_multiplier
    write_s = (
        workload.checkpoint_write_seconds
        if checkpoint_write_seconds is None
        else checkpoint_write_seconds
    )
    stateless = workload.workload_class is WorkloadClass.SERVING
    if stateless:
        write_s = 0.0
    interval_h = (
        None
        if workload.checkpoint_interval_minutes is None
        else workload.checkpoint_interval_minutes / 60.0
    )
    notice_s = NOTICE_SECONDS[snap.pool.provider.value]
    try:
        if stateless or write_s == 0.0:
            # No checkpoints: only restarts cost time (lost work is nil for a
            # stateless replica, and counted in restart_minutes otherwise).
            denominator = 1.0 - hazard * workload.restart_hours
            if denominator <= 0:
                raise SpotNeverFinishesError("restarts outpace work")
            return 1.0 / denominator
        return spot_time_factor(
            hazard,
            workload.restart_hours,
            write_s / 3600.0,
            interval_h,
            notice_seconds=notice_s,
            # A checkpoint started at the notice is a full write of the same size.
            notice_checkpoint_write_seconds=write_s,
        )
    except SpotNeverFinishesError:
        return None


def cost_entries(
    workload: Workload,
    pools: Iterable[PoolSnapshot],
    *,
    term_years: int = 1,
    interruption_multiplier: float = 1.0,
    checkpoint_write_seconds: float | None = None,
) -> list[CostEntry]:
    """Entries for every pool whose instance type the workload accepts,
    cheapest effective spot first (pools without usable spot last)."""
    out: list[CostEntry] = []
    for snap in pools:
        itype = snap.pool.instance_type
        if itype not in workload.instance_types:
            continue
        thr = workload.throughput_of(itype)
        work = snap.instance.units * thr
        factor = None
        if snap.spot_usd_per_hour is not None and snap.spot_available:
            factor = spot_factor(
                workload,
                snap,
                interruption_multiplier=interruption_multiplier,
                checkpoint_write_seconds=checkpoint_write_seconds,
            )
            if factor is not None and snap.available_share is not None:
                # Capacity held only part of the time delivers only that part:
                # a pool available 40 % of the time costs 1/0.4 per delivered hour.
                factor = None if snap.available_share <= 0.05 else factor / snap.available_share
        committed = snap.price(Tier.COMMITTED, term_years=term_years)
        prices: dict[Tier, float | None] = {
            Tier.ON_DEMAND: snap.on_demand_usd_per_hour / work,
            Tier.COMMITTED: None if committed is None else committed / work,
            Tier.SPOT: (
                None
                if factor is None or snap.spot_usd_per_hour is None
                else snap.spot_usd_per_hour * factor / work
            ),
        }
        out.append(
            CostEntry(
                workload=workload.name,
                pool_key=snap.pool.key,
                instance_type=itype,
                units_per_instance=snap.instance.units,
                throughput=thr,
                spot_factor=factor,
                usd_per_work_hour=prices,
                preference_rank=workload.preference_rank(itype),
            )
        )
    out.sort(key=lambda e: (_or_inf(e.usd_per_work_hour[Tier.SPOT]), e.preference_rank))
    return out


def _or_inf(x: float | None) -> float:
    return math.inf if x is None else x
