"""What the lifecycle manager knows of the fleet and the market, indexed for speed.

Owns ``FleetView`` (per-workload tallies of units, work per hour and spot
units per zone and pool, built once per fleet sequence and then updated in
place as decisions remove lost instances and add launches not yet visible in
the fleet) and ``Candidates`` (one workload's acceptable pools in a snapshot,
ranked once per snapshot from the snapshot's ``policies.cost_table.CostTable``).

Why an overlay: in a storm the daemon hands the manager the same fleet for
many notices, and launches take a while to appear in it; without counting
decided-but-unseen launches, every replacement would pile into the same
"empty" zone.

Must not: decide anything (``broker.lifecycle.manager`` does), read a clock, or do I/O.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from markets.cloud_fleet import Instance, InstanceState
from markets.keys import PoolKey
from markets.model import Tier
from policies.cost_table import CostTable
from policies.workloads.spec import Workload

__all__ = ["LIKELY_PLACEMENT_SCORE", "Candidate", "Candidates", "FleetView", "Pending", "Tally"]

# A spot pool whose placement score is below this is tried after every pool
# at or above it (or without a score): AWS scores a request 1-10, 10 "highly
# likely to succeed", and a launch refused in the notice window costs the
# window. The lower third of the scale is our line, not AWS's.
LIKELY_PLACEMENT_SCORE = 4

# For counting only: an instance launched up to this long before a decision may
# be that decision's launch (the cloud's clock and ours may differ slightly).
_LAUNCH_MATCH_GRACE_S = 5.0


@dataclass(slots=True)
class Tally:
    """One workload's live capacity (lost instances out, pending launches in)."""

    units: float = 0.0
    work_per_hour: float = 0.0
    spot_units: float = 0.0
    spot_by_zone: dict[str, float] = field(default_factory=dict)
    spot_by_pool: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class Pending:
    """Launches decided but not yet seen in the fleet."""

    notice_id: str
    workload: str
    pool_key: str
    tier: Tier
    count: int
    units_each: int
    decided_s: float
    expires_s: float
    remaining: int = -1

    def __post_init__(self) -> None:
        if self.remaining < 0:
            self.remaining = self.count


class FleetView:
    """Tallies of one fleet sequence plus the manager's overlay."""

    def __init__(self, fleet: Sequence[Instance], workloads: dict[str, Workload]) -> None:
        self.source: tuple[Instance, ...] = fleet if isinstance(fleet, tuple) else tuple(fleet)
        self.by_id: dict[str, Instance] = {}
        self.tallies: dict[str, Tally] = {}
        self.total_units = 0.0
        self._workloads = workloads
        self._thr: dict[tuple[str, str], float] = {}
        self.pending: list[Pending] = []
        self._next_expiry_s = math.inf
        self.removed: set[str] = set()

    @classmethod
    def build(
        cls,
        fleet: Sequence[Instance],
        workloads: dict[str, Workload],
        lost: Collection[str],
        pending: list[Pending],
        now_s: float,
    ) -> FleetView:
        """Index ``fleet`` without the ``lost`` instances, then add what of
        ``pending`` the fleet does not show yet (matched by workload, pool and
        tier, launched at or after the decision).

        One cheap pass groups instances by (workload, pool, tier); tallies are
        summed per group, and launch times are read only for groups with
        pending launches: a few microseconds per instance.
        """
        view = cls(fleet, workloads)
        groups: dict[tuple[str, str, Tier], list[Instance]] = {}
        by_id = view.by_id
        terminated = InstanceState.TERMINATED
        for inst in fleet:
            if inst.state is terminated:
                continue
            by_id[inst.instance_id] = inst
            k = (inst.workload, inst.pool_key, inst.tier)
            g = groups.get(k)
            if g is None:
                groups[k] = [inst]
            else:
                g.append(inst)
        view.removed = {i for i in lost if i in by_id}
        removed = view.removed
        for (wl, pool_key, tier), insts in groups.items():
            if removed:
                units = sum(i.units for i in insts if i.instance_id not in removed)
            else:
                units = sum(i.units for i in insts)
            if units:
                view.add(wl, pool_key, tier, units, 1)
        view.pending = pending  # the manager's list, updated in place from here on
        live: list[Pending] = []
        next_free: dict[tuple[str, str, Tier], int] = {}
        times_of: dict[tuple[str, str, Tier], list[float]] = {}
        for p in sorted(pending, key=lambda q: q.decided_s):
            if p.expires_s <= now_s:
                continue
            key = (p.workload, p.pool_key, p.tier)
            times = times_of.get(key)
            if times is None:
                # A launch that appeared and was then lost still counts as appeared.
                times = times_of[key] = sorted(
                    i.launched_at.timestamp() for i in groups.get(key, ())
                )
            first = bisect.bisect_left(times, p.decided_s - _LAUNCH_MATCH_GRACE_S)
            idx = max(first, next_free.get(key, 0))
            seen = min(p.count, len(times) - idx)
            next_free[key] = idx + seen
            p.remaining = min(p.remaining, p.count - seen)
            if p.remaining > 0:
                live.append(p)
        pending.clear()
        for p in live:
            view.add_pending(p)
        return view

    def same_source(self, fleet: Sequence[Instance]) -> bool:
        """Is ``fleet`` what this view indexed: the same sequence, or one
        holding the very same instance objects in the same order?"""
        src = self.source  # our own tuple: a list mutated in place cannot fool it
        if fleet is src:
            return True
        return len(fleet) == len(src) and all(a is b for a, b in zip(fleet, src, strict=True))

    def throughput(self, workload: str, itype: str) -> float:
        key = (workload, itype)
        thr = self._thr.get(key)
        if thr is None:
            w = self._workloads.get(workload)
            thr = w.throughput_of(itype) if w is not None and itype in w.instance_types else 1.0
            self._thr[key] = thr
        return thr

    def add(self, workload: str, pool_key: str, tier: Tier, units: float, sign: int) -> None:
        t = self.tallies.get(workload)
        if t is None:
            t = self.tallies[workload] = Tally()
        u = sign * units
        key = PoolKey.parse(pool_key)
        t.units += u
        t.work_per_hour += u * self.throughput(workload, key.instance_type)
        self.total_units += u
        if tier is Tier.SPOT:
            t.spot_units += u
            z = key.zone_key
            t.spot_by_zone[z] = t.spot_by_zone.get(z, 0.0) + u
            t.spot_by_pool[pool_key] = t.spot_by_pool.get(pool_key, 0.0) + u

    def add_pending(self, p: Pending) -> None:
        self.pending.append(p)
        self._next_expiry_s = min(self._next_expiry_s, p.expires_s)
        self.add(p.workload, p.pool_key, p.tier, p.remaining * p.units_each, 1)

    def expire(self, now_s: float) -> None:
        """Stop counting pending launches whose time to appear has passed."""
        if now_s < self._next_expiry_s:
            return  # the common case, O(1): nothing is due yet
        keep: list[Pending] = []
        for p in self.pending:
            if p.expires_s > now_s:
                keep.append(p)
            else:
                self.add(p.workload, p.pool_key, p.tier, p.remaining * p.units_each, -1)
        self.pending[:] = keep  # in place: the manager holds this same list
        self._next_expiry_s = min((p.expires_s for p in keep), default=math.inf)

    def drop_pending(self, notice_id: str, pool_key: str) -> None:
        keep: list[Pending] = []
        for p in self.pending:
            if p.notice_id == notice_id and p.pool_key == pool_key:
                self.add(p.workload, p.pool_key, p.tier, p.remaining * p.units_each, -1)
            else:
                keep.append(p)
        self.pending[:] = keep

    def remove(self, inst: Instance) -> None:
        if inst.instance_id not in self.removed:
            self.removed.add(inst.instance_id)
            self.add(inst.workload, inst.pool_key, inst.tier, inst.units, -1)

    def restore(self, inst: Instance) -> None:
        if inst.instance_id in self.removed:
            self.removed.discard(inst.instance_id)
            self.add(inst.workload, inst.pool_key, inst.tier, inst.units, 1)

    def retire(
        self,
        workload: str,
        pool_key: str,
        count: int,
        since_s: float,
        skip: Collection[str],
        *,
        newest_first: bool = False,
    ) -> tuple[str, ...]:
        """Up to ``count`` on-demand instances of ``workload`` in ``pool_key``
        launched at or after ``since_s`` (never capacity that was there before
        a break-glass stretch began), taken out of the tallies.
        ``newest_first``: the newest of them, as reconcile ends a slot's
        surplus (``broker.planning.reconcile.diff``), for a return whose
        on-demand reconcile ends (a serving return, after its spot is
        ready): the instances named are then the ones that end."""
        found: Iterable[Instance] = (
            inst
            for inst in self.by_id.values()
            if inst.workload == workload
            and inst.pool_key == pool_key
            and inst.tier is Tier.ON_DEMAND
            and inst.instance_id not in skip
            and inst.instance_id not in self.removed
            and inst.launched_at.timestamp() >= since_s
        )
        if newest_first:
            found = sorted(found, key=lambda i: (i.launched_at, i.instance_id), reverse=True)
        ids: list[str] = []
        for inst in found:
            if len(ids) == count:
                break
            ids.append(inst.instance_id)
            self.remove(inst)
        return tuple(ids)

    def retire_ids(
        self, ids: Collection[str], count: int, skip: Collection[str]
    ) -> tuple[str, ...]:
        """Up to ``count`` of ``ids`` still in the fleet and counted (none
        of ``skip``), taken out of the tallies."""
        out: list[str] = []
        for iid in ids:
            inst = self.by_id.get(iid)
            if len(out) == count:
                break
            if inst is None or iid in skip or iid in self.removed:
                continue
            out.append(iid)
            self.remove(inst)
        return tuple(out)

    def tally(self, workload: str) -> Tally:
        t = self.tallies.get(workload)
        if t is None:
            t = self.tallies[workload] = Tally()
        return t


@dataclass(frozen=True, slots=True)
class Candidate:
    """One acceptable pool of one workload, with what ranking needs."""

    pool_key: str
    zone_key: str
    instance_type: str
    units: int
    work_per_instance: float
    spot_usd_per_hour: float | None
    on_demand_usd_per_hour: float
    spot_usd_per_work_hour: float | None  # effective: hazard, checkpoints, restarts
    on_demand_usd_per_work_hour: float
    hazard_per_hour: float
    preference_rank: int
    placement_score: int | None = None  # 1-10, where the cloud publishes one

    def instances_for(self, work_per_hour: float) -> int:
        """Instances that supply at least ``work_per_hour``."""
        return max(1, math.ceil(work_per_hour / self.work_per_instance - 1e-9))


class Candidates:
    """A workload's pools in one snapshot's cost table (of ``providers`` only,
    if given): spot-usable ranked by (placement score below
    ``LIKELY_PLACEMENT_SCORE`` last, effective cost, hazard, placement score
    highest first, preference); on-demand ranked by (cost per work,
    preference). ``scores``: the placement scores at reaction time
    (``broker.lifecycle.placement``) in place of the snapshot's. Every hazard
    counts the table's ``interruption_multiplier`` times over (in the
    effective cost too): the manager widens risk margins this way while the
    snapshot is stale."""

    def __init__(
        self,
        workload: Workload,
        costs: CostTable,
        providers: Collection[str] | None = None,
        scores: Mapping[str, int] | None = None,
    ) -> None:
        hazard_multiplier = costs.options.interruption_multiplier
        self.by_pool: dict[str, Candidate] = {}
        for e in costs.entries(workload.name):
            key = e.key
            if providers is not None and key.provider not in providers:
                continue
            s = costs.pool(e.pool_key)
            od = e.usd_per_work_hour[Tier.ON_DEMAND]
            assert od is not None  # on-demand is always priced in a snapshot
            self.by_pool[e.pool_key] = Candidate(
                pool_key=e.pool_key,
                zone_key=key.zone_key,
                instance_type=e.instance_type,
                units=e.units_per_instance,
                work_per_instance=e.work_per_instance_hour,
                spot_usd_per_hour=s.spot_usd_per_hour,
                on_demand_usd_per_hour=s.on_demand_usd_per_hour,
                spot_usd_per_work_hour=e.usd_per_work_hour[Tier.SPOT],
                on_demand_usd_per_work_hour=od,
                hazard_per_hour=s.hazard.rate_per_hour * hazard_multiplier,
                preference_rank=e.preference_rank,
                placement_score=s.placement_score if scores is None else scores.get(e.pool_key),
            )
        cands = list(self.by_pool.values())
        self.spot = sorted(
            (c for c in cands if c.spot_usd_per_work_hour is not None),
            key=lambda c: (
                c.placement_score is not None and c.placement_score < LIKELY_PLACEMENT_SCORE,
                c.spot_usd_per_work_hour,
                c.hazard_per_hour,
                -(c.placement_score or 0),  # a likelier fulfilment first
                c.preference_rank,
            ),
        )
        self.on_demand = sorted(
            cands, key=lambda c: (c.on_demand_usd_per_work_hour, c.preference_rank)
        )
        # Bounds on the capacity units a spot launch here takes: one instance
        # of the smallest type, and the fewest units per unit of work
        # (``instances_for`` rounds up): a churn window without room for
        # either has room for no spot launch (``spot_units_at_least``).
        self._spot_min_units = min((c.units for c in self.spot), default=0.0)
        self._spot_units_per_work = min(
            (c.units / c.work_per_instance for c in self.spot if c.work_per_instance > 0),
            default=0.0,
        )

    def spot_units_at_least(self, work_per_hour: float) -> float:
        """No spot launch of these pools that supplies ``work_per_hour``
        takes fewer capacity units than this."""
        return max(self._spot_min_units, work_per_hour * self._spot_units_per_work * (1 - 1e-9))
