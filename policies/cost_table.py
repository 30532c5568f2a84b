"""Effective cost of every (workload, pool, tier): the price list every decision reads.

Owns: ``CostEntry`` and ``cost_entries`` — for one workload and one pool, the
throughput factor, the spot time factor (``T_total / T_prod`` from
``effective_cost.spot_time_factor``: checkpoints, lost work and restarts at the
pool's hazard) and the resulting dollars per *productive reference* unit-hour on
each tier. Pools where spot can never finish are kept with spot marked
unusable, never with an infinite or negative price.

``CostTable`` is those entries for every workload of one market snapshot under
one ``CostOptions`` (commitment term, hazard multiplier, checkpoint write
time), computed once (``CostTable.compute``) and indexed for the lookups its
readers make: a workload's entries in effective-spot order (the optimizer,
the lifecycle's rankings, the committed sweep), one (workload, pool) entry,
the cheapest entry per tier (the baselines, billing), a pool's snapshot. The
composition point that has the snapshot computes the table and hands the same
object to every part; nothing downstream recomputes it.

Must not: do I/O or choose anything (the optimizer chooses).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from markets.errors import InputError, SpotNeverFinishesError
from markets.keys import PoolKey
from markets.model import MarketSnapshot, PoolSnapshot, Tier
from policies.checkpoint import NOTICE_SECONDS
from policies.effective_cost import spot_time_factor
from policies.workloads.spec import Workload, WorkloadClass, WorkloadSet

__all__ = [
    "NEVER_HELD_SHARE",
    "CostEntry",
    "CostOptions",
    "CostTable",
    "cost_entries",
    "spot_factor",
]

# A pool whose recorded share of time holding spot is at most this offers no
# spot (``cost_entries``); ``policies.held`` and the pacing floor on it.
NEVER_HELD_SHARE = 0.05


@dataclass(frozen=True, slots=True)
class CostEntry:
    """One workload on one pool.

    ``usd_per_work_hour`` maps a tier to dollars per productive reference
    unit-hour (``None``: the tier is not offered or not usable). ``spot_factor``
    is ``T_total / T_prod`` (checkpoints, lost work and restarts per hour held).
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

    @property
    def key(self) -> PoolKey:
        """The pool as a value (parsed once per distinct key, ``markets.keys``)."""
        return PoolKey.parse(self.pool_key)


@dataclass(frozen=True, slots=True)
class CostOptions:
    """What an effective cost depends on besides the market and the workload.

    ``term_years``: the commitment term priced (1 or 3). ``interruption_multiplier``:
    every pool's hazard counts this many times over (a stress test, or the
    wider margin of a stale snapshot). ``checkpoint_write_seconds``: overrides
    every job's checkpoint write time (``None``: each workload's own).
    """

    term_years: int = 1
    interruption_multiplier: float = 1.0
    checkpoint_write_seconds: float | None = None


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
    """Entries for every pool whose instance type the workload accepts, in
    a provider and region its allow-lists admit (``Workload.allows``: a pool
    left out here is in no plan, baseline or replacement), cheapest effective
    spot first (pools without usable spot last)."""
    out: list[CostEntry] = []
    for snap in pools:
        itype = snap.pool.instance_type
        if itype not in workload.instance_types:
            continue
        if not workload.allows(snap.pool.provider.value, snap.pool.region):
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
                # A pool that almost never has spot is not offered. Otherwise
                # the held share is not a price: a planned spot instance does
                # a held instance's work while held and is paid only then;
                # the hours it is lost are the lifecycle's to cover (replace,
                # break-glass: ``broker.whatif.reaction`` bills them), and the
                # pool's capacity comes from its placement score.
                factor = None if snap.available_share <= NEVER_HELD_SHARE else factor
        committed = snap.price(Tier.COMMITTED, term_years=term_years)
        prices: dict[Tier, float | None] = {
            Tier.ON_DEMAND: snap.on_demand_usd_per_hour / work,
            Tier.COMMITTED: None if committed is None else committed / work,
            # spot at the price a plan holds it for: its current regime plus a
            # volatility margin where the market knows them (markets.price_analytics)
            Tier.SPOT: (
                None
                if factor is None or (spot := snap.planning_spot_usd_per_hour) is None
                else spot * factor / work
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


@dataclass(frozen=True, eq=False)
class CostTable:
    """Every workload's ``CostEntry`` list in one snapshot, under one ``CostOptions``.

    Build it with ``compute``; the fields are its indexes. ``by_workload``:
    workload name -> entries, cheapest effective spot first (as
    ``cost_entries``). ``by_pool``: (workload, pool key) -> entry.
    ``cheapest_by_tier``: (workload, tier) -> the entry with the lowest price
    per work-hour on that tier, ties to the workload's preferred type, then to
    the first listed. ``pools``: pool key -> the snapshot's ``PoolSnapshot``.
    Compared by identity: two tables are the same table only if they are one
    object.
    """

    snapshot: MarketSnapshot
    workloads: WorkloadSet
    options: CostOptions
    by_workload: Mapping[str, tuple[CostEntry, ...]]
    by_pool: Mapping[tuple[str, str], CostEntry]
    cheapest_by_tier: Mapping[tuple[str, Tier], CostEntry]
    pools: Mapping[str, PoolSnapshot]

    @classmethod
    def compute(
        cls,
        snapshot: MarketSnapshot,
        workloads: WorkloadSet,
        options: CostOptions | None = None,
    ) -> CostTable:
        """The table of ``workloads`` on ``snapshot``'s pools (one pass per workload)."""
        opts = options or CostOptions()
        by_workload: dict[str, tuple[CostEntry, ...]] = {}
        by_pool: dict[tuple[str, str], CostEntry] = {}
        cheapest: dict[tuple[str, Tier], CostEntry] = {}
        for w in workloads.workloads:
            entries = tuple(
                cost_entries(
                    w,
                    snapshot.pools,
                    term_years=opts.term_years,
                    interruption_multiplier=opts.interruption_multiplier,
                    checkpoint_write_seconds=opts.checkpoint_write_seconds,
                )
            )
            by_workload[w.name] = entries
            for e in entries:
                by_pool[(w.name, e.pool_key)] = e
            for tier in Tier:
                best = _cheapest(entries, tier)
                if best is not None:
                    cheapest[(w.name, tier)] = best
        return cls(
            snapshot=snapshot,
            workloads=workloads,
            options=opts,
            by_workload=by_workload,
            by_pool=by_pool,
            cheapest_by_tier=cheapest,
            pools=snapshot.by_key(),
        )

    def entries(self, workload: str) -> tuple[CostEntry, ...]:
        """``workload``'s entries, cheapest effective spot first."""
        found = self.by_workload.get(workload)
        if found is None:
            raise KeyError(
                f"workload {workload!r} is not in this cost table "
                f"(it has {', '.join(self.by_workload) or 'none'})"
            )
        return found

    def entry(self, workload: str, pool_key: str) -> CostEntry | None:
        """``workload`` on ``pool_key`` (``None``: the pool is not in the
        snapshot or offers no type the workload accepts)."""
        return self.by_pool.get((workload, pool_key))

    def cheapest(self, workload: str, tier: Tier) -> CostEntry | None:
        """The entry with the lowest price per work-hour on ``tier`` (``None``:
        no pool offers the tier to this workload)."""
        return self.cheapest_by_tier.get((workload, tier))

    def cheapest_usd_per_work_hour(self, workload: str, tier: Tier) -> float:
        """Dollars per productive reference unit-hour on ``tier``'s cheapest
        entry (``inf`` when the tier is not offered)."""
        e = self.cheapest(workload, tier)
        price = None if e is None else e.usd_per_work_hour[tier]
        return math.inf if price is None else price

    def pool(self, key: str) -> PoolSnapshot:
        return self.pools[key]

    def check(
        self,
        snapshot: MarketSnapshot,
        workloads: WorkloadSet,
        options: CostOptions | None = None,
    ) -> None:
        """``InputError`` unless this is the table of ``snapshot``,
        ``workloads`` (and ``options``, when given): a table handed over
        from elsewhere must price what its reader is deciding on."""
        if self.snapshot is not snapshot and self.snapshot != snapshot:
            raise InputError(
                "costs",
                "snapshot",
                f"the cost table of the snapshot at {snapshot.at.isoformat()} ({snapshot.source})",
                got=f"{self.snapshot.at.isoformat()} ({self.snapshot.source})",
            )
        if self.workloads is not workloads and self.workloads != workloads:
            raise InputError(
                "costs",
                "workloads",
                f"the cost table of workloads {', '.join(workloads.names())}",
                got=", ".join(self.workloads.names()),
            )
        if options is not None and options != self.options:
            raise InputError(
                "costs", "options", f"a cost table priced with {options}", got=self.options
            )


def _cheapest(entries: Iterable[CostEntry], tier: Tier) -> CostEntry | None:
    usable = [e for e in entries if e.usd_per_work_hour[tier] is not None]
    return min(
        usable, key=lambda e: (_or_inf(e.usd_per_work_hour[tier]), e.preference_rank), default=None
    )
