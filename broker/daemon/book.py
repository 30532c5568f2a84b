"""What the daemon knows between jobs: the fleet view, prices, pools to avoid.

Owns: ``FleetBook`` (the fleet as listed by the cloud, merged with the
store's in-flight launches; instances under a revocation notice; pools that
refused capacity, read from and written to the lifecycle's one book; prices
from the snapshot in force; the fleet budget check; the next acceptable pool,
asked of the lifecycle's placement rule, ``broker.lifecycle.fallback``),
``decision_deltas`` (how the lifecycle's decisions since the plan adjust its
counts) and ``substitute``.

After a restart ``restore`` reads back what lived only in memory: the
instances under a revocation notice still in its window (the store's
notices) and the pools that refused capacity within their TTL (its failed
launches).

The fleet view: the cloud's listing is the truth, but a just-launched
instance may not be listed yet (EC2's listing is eventually consistent), so
an instance the store recorded from a done launch within ``grace_s`` counts
as present; an older store row the cloud no longer lists is marked
terminated. Every listed instance of ours is written to the store, so nothing
alive stays unknown (no orphans).

Must not: call a mutating provider API, decide what a notice means, or rank
pools to fall back to itself (the lifecycle's rule does, for both).
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt

from broker.daemon.executor import kv
from broker.daemon.lifecycle import Lifecycle
from broker.daemon.store.store import DecisionRecord, FleetRow, Store
from broker.planning.reconcile import Slot, live_ours
from markets.cloud_fleet import OWNER_TAG, Instance, InstanceState, LaunchRequest, TerminateRequest
from markets.keys import PoolKey
from markets.model import MarketSnapshot, PoolSnapshot, Tier
from markets.protocols import Provider
from markets.ttl import UNAVAILABLE_OFFERING_TTL_S
from policies.workloads.spec import Workload, WorkloadSet

__all__ = ["FleetBook", "decision_deltas", "substitute"]

log = logging.getLogger("spotfolio.daemon")
# Decisions that take the noticed instance's place out of the plan until the
# next plan (it is being revoked; refilling the same pool would undo them).
_TAKE_OUT = frozenset({"shrink", "replace", "break_glass", "checkpoint_only"})
_DOOM_KEEP = timedelta(minutes=10)  # remember a doomed id a while past its deadline
# A revoking notice's window when a restart restores it (the store keeps the
# notice's time, not its deadline): AWS gives 120 s, GCP 30 s; the longer one
# keeps an instance doomed a little past a GCP deadline, which is harmless
# (it is gone by then).
_RESTORED_WINDOW = timedelta(seconds=120)
# the notices that doom their instance: revocations, and scheduled changes
# (AWS Health) whose deadline is the change's start
_DOOMING_KINDS = ("interruption", "preempted", "scheduled")


class FleetBook:
    def __init__(self, owner: str, workloads: WorkloadSet, lifecycle: Lifecycle) -> None:
        self.owner = owner
        # The placement rule and the one book of refused pools are the lifecycle's.
        self._lifecycle = lifecycle
        self.unavailable = lifecycle.unavailable
        self.workloads = {w.name: w for w in workloads.workloads}
        self.budget_usd_per_hour = workloads.budget_usd_per_hour
        self.priority = {w.name: w.priority for w in workloads.workloads}
        self.snapshot: MarketSnapshot | None = None
        self._pools: dict[str, PoolSnapshot] = {}
        self.doomed: dict[str, datetime] = {}
        self.noticed_at: dict[str, datetime] = {}  # doomed instance -> when its notice came
        # Immutable: the lifecycle keeps its fleet index while it is handed
        # the very same tuple (a storm's notices all see one listing).
        self.last_fleet: tuple[Instance, ...] = ()
        self.by_id: dict[str, Instance] = {}  # last_fleet by instance id
        # Slots whose launch the budget refused at the last reconcile: a
        # refusal is a warning when it starts, not at every pass it lasts.
        self.budget_refused: set[tuple[str, str, str]] = set()

    # --- inputs ---------------------------------------------------------------
    def set_snapshot(self, snap: MarketSnapshot) -> None:
        self.snapshot = snap
        self._pools = snap.by_key()

    def workload(self, name: str) -> Workload | None:
        return self.workloads.get(name)

    def units(self, pool_key: str) -> int:
        p = self._pools.get(pool_key)
        return 1 if p is None else p.instance.units

    def price(self, pool_key: str, tier: Tier) -> float:
        p = self._pools.get(pool_key)
        if p is None:
            return 0.0
        usd = p.price(tier)
        return p.on_demand_usd_per_hour if usd is None else usd

    def doom(
        self, instance_id: str, deadline: datetime, noticed_at: datetime | None = None
    ) -> None:
        """``instance_id`` goes at ``deadline`` (its notice came at ``noticed_at``)."""
        self.doomed[instance_id] = deadline
        if noticed_at is not None:
            self.noticed_at[instance_id] = min(
                noticed_at, self.noticed_at.get(instance_id, noticed_at)
            )

    def restore(self, store: Store, now: datetime) -> tuple[int, int]:
        """After a restart: the instances under a revocation notice still in
        its window, and the pools that refused capacity within their TTL,
        read back from the store (notices and failed launches), so the first
        reconcile does not count the noticed instance as healthy nor send
        its replacement back to a refused pool. Returns how many of each."""
        since = now - _RESTORED_WINDOW - _DOOM_KEEP
        ttl = timedelta(seconds=UNAVAILABLE_OFFERING_TTL_S)
        with store.transaction() as tx:
            revoked = tx.revocations(_DOOMING_KINDS, since, now)
            refused = tx.capacity_failures(self.owner, now - ttl)
        for iid, at, deadline in revoked:
            # the notice's own deadline (a scheduled change's start), else the window
            until = deadline if deadline is not None else at + _RESTORED_WINDOW
            self.doom(iid, max(self.doomed.get(iid, until), until), at)
        for pool, tier, at in refused:
            self.mark_unavailable(pool, Tier(tier), at)
        return len(revoked), len(refused)

    def protected(self, store: Store, now: datetime) -> dict[Slot, int]:
        """The floor under reconcile's desired counts: each slot that holds
        an instance launched for a notice whose instance is still doomed
        (its revocation has not landed yet), with what it holds now. A plan
        made inside the window (a restart with the plan due, a re-plan) may
        move that capacity, and reconcile ends the newest instances of a
        slot first, the replacement itself: measured in the crash test,
        plans made at restarts ended 38 replacements in 100 kills and sent
        their capacity back to the pool being revoked. Such a slot is not
        shrunk until the deadline, by the plan or by ``stick`` (its ``floor``);
        past it the replacement is ordinary capacity. Never asks for a
        launch: the floor is what the slot holds."""
        open_ = {iid for iid, deadline in self.doomed.items() if deadline >= now}
        if not open_:
            return {}
        # from the earliest open notice (a scheduled change's replacement may
        # have been launched days before its start)
        since = min(
            (self.noticed_at.get(i, now - _RESTORED_WINDOW) for i in open_),
            default=now - _RESTORED_WINDOW,
        )
        with store.transaction() as tx:
            served = tx.notice_launches(self.owner, min(since, now - _RESTORED_WINDOW) - _DOOM_KEEP)
        slots = {
            (inst.workload, inst.pool_key, inst.tier.value)
            for noticed, ids in served
            if noticed in open_
            for iid in ids
            if (inst := self.by_id.get(iid)) is not None and iid not in self.doomed
        }
        if not slots:
            return {}
        held = self.counts(self.last_fleet)
        return {slot: int(held.get(slot, 0)) for slot in sorted(slots)}

    def doomed_ids(self, now: datetime) -> frozenset[str]:
        for iid in [i for i, t in self.doomed.items() if t + _DOOM_KEEP < now]:
            del self.doomed[iid]
            self.noticed_at.pop(iid, None)
        return frozenset(self.doomed)

    def mark_unavailable(self, pool_key: str, tier: Tier, now: datetime) -> None:
        """Skip ``(pool_key, tier)`` for ``markets.ttl.UNAVAILABLE_OFFERING_TTL_S``."""
        self.unavailable.mark(pool_key, tier, now.timestamp())

    def is_unavailable(self, pool_key: str, tier: Tier, now: datetime) -> bool:
        return self.unavailable.is_unavailable(pool_key, tier, now.timestamp())

    def unavailable_capacity(self, now: datetime, hours: int) -> dict[str, npt.NDArray[np.float64]]:
        """Zero spot capacity for pools that just refused it (for the optimizer)."""
        return {
            pool: np.zeros(hours) for pool in self.unavailable.pools(Tier.SPOT, now.timestamp())
        }

    # --- the fleet ------------------------------------------------------------------
    def view(
        self, provider: Provider, store: Store, now: datetime, grace_s: float, *, sync: bool = True
    ) -> list[Instance]:
        listed = [i for i in provider.list_fleet(self.owner) if i.tags.get(OWNER_TAG) == self.owner]
        ids = {i.instance_id for i in listed}
        fleet = list(listed)
        with store.transaction() as tx:
            if sync:
                tx.upsert_instances(self.owner, listed, now)
            gone = []
            for row in tx.fleet(self.owner):
                if row.instance_id in ids:
                    continue
                if (now - row.launched_at).total_seconds() < grace_s:
                    fleet.append(_from_row(row, self.owner))
                else:
                    gone.append(row.instance_id)
            if sync and gone:
                tx.mark_instances(gone, InstanceState.TERMINATED, now)
        self.last_fleet = tuple(fleet)
        self.by_id = {i.instance_id: i for i in fleet}
        return fleet

    def counts(self, fleet: Iterable[Instance]) -> dict[tuple[str, str, str], float]:
        out: dict[tuple[str, str, str], float] = defaultdict(float)
        for i in live_ours(fleet, self.owner):
            if i.instance_id not in self.doomed:
                out[(i.workload, i.pool_key, i.tier.value)] += 1.0
        return dict(out)

    def ready_counts(
        self, fleet: Iterable[Instance], now: datetime, warm_s: Mapping[str, float]
    ) -> dict[tuple[str, str, str], float]:
        """``counts`` of the instances past their workload's warm-up
        (``warm_s``, seconds; a workload not in it is ready once running),
        none in a pool with an instance under a revocation notice (the pool
        a replacement was sent away from: ``stick`` must not send it back)."""
        out: dict[tuple[str, str, str], float] = defaultdict(float)
        live = live_ours(fleet, self.owner)
        at_risk = {i.pool_key for i in live if i.instance_id in self.doomed}
        for i in live:
            if i.pool_key in at_risk:
                continue
            if (now - i.launched_at).total_seconds() >= warm_s.get(i.workload, 0.0):
                out[(i.workload, i.pool_key, i.tier.value)] += 1.0
        return dict(out)

    def cost_rates(self) -> tuple[dict[str, float], float]:
        """$/h of the last fleet view by tier, and the share of units on spot."""
        rates = {t.value: 0.0 for t in Tier}
        units = {t.value: 0 for t in Tier}
        for i in live_ours(self.last_fleet, self.owner):
            rates[i.tier.value] += self.price(i.pool_key, i.tier)
            units[i.tier.value] += i.units
        total = sum(units.values())
        return rates, (units[Tier.SPOT.value] / total if total else 0.0)

    def pool_rates(self) -> dict[tuple[str, str], tuple[float, int]]:
        """``(pool, tier) -> ($/h, units)`` of the last fleet view (the metrics' per-pool
        series and spend)."""
        out: dict[tuple[str, str], tuple[float, int]] = {}
        for i in live_ours(self.last_fleet, self.owner):
            usd, units = out.get((i.pool_key, i.tier.value), (0.0, 0))
            out[(i.pool_key, i.tier.value)] = (
                usd + self.price(i.pool_key, i.tier),
                units + i.units,
            )
        return out

    # --- choices the daemon makes itself ------------------------------------------------
    def next_pool(
        self,
        workload: str,
        failed_pool: str,
        tier: Tier,
        count: int,
        tried: set[str],
        now: datetime,
    ) -> tuple[str, int] | None:
        """The pool for the work of ``count`` instances of ``failed_pool`` on
        ``tier``, none of ``tried``, and its instance count: the lifecycle's
        placement rule decides (``broker.lifecycle.fallback.instead``)."""
        if workload not in self.workloads or self.snapshot is None:
            return None
        return self._lifecycle.instead(workload, failed_pool, tier, count, tried, now)

    def within_budget(
        self,
        requests: Sequence[LaunchRequest | TerminateRequest],
        fleet: Sequence[Instance],
        now: datetime,
    ) -> list[LaunchRequest | TerminateRequest]:
        """Drop launches that would take the fleet's $/h over the fleet budget
        (terminations count first; higher-priority workloads launch first)."""
        if self.budget_usd_per_hour is None:
            return list(requests)
        live = {i.instance_id: i for i in live_ours(fleet, self.owner)}
        ends = [r for r in requests if isinstance(r, TerminateRequest)]
        ending = {iid for r in ends for iid in r.instance_ids}
        rate = sum(self.price(i.pool_key, i.tier) for k, i in live.items() if k not in ending)
        launches = [r for r in requests if isinstance(r, LaunchRequest)]
        kept: list[LaunchRequest] = []
        refused: set[tuple[str, str, str]] = set()
        for r in sorted(launches, key=lambda r: -self.priority.get(r.workload, 0)):
            add = r.count * self.price(r.pool_key, r.tier)
            if rate + add > self.budget_usd_per_hour:
                slot = (r.workload, r.pool_key, r.tier.value)
                refused.add(slot)
                log.log(
                    logging.DEBUG if slot in self.budget_refused else logging.WARNING,
                    kv(
                        "budget_refused",
                        workload=r.workload,
                        pool=r.pool_key,
                        usd_per_hour=f"{add:.2f}",
                        fleet_usd_per_hour=f"{rate:.2f}",
                        budget=self.budget_usd_per_hour,
                    ),
                )
                continue
            rate += add
            kept.append(r)
        self.budget_refused = refused
        order = {r.idempotency_key: i for i, r in enumerate(launches)}
        kept.sort(key=lambda r: order[r.idempotency_key])
        return [*kept, *ends]

    def budget_allows(self, add_usd_per_hour: float, freed_usd_per_hour: float = 0.0) -> bool:
        if self.budget_usd_per_hour is None:
            return True
        rates, _ = self.cost_rates()
        return (
            sum(rates.values()) - freed_usd_per_hour + add_usd_per_hour <= self.budget_usd_per_hour
        )


def _from_row(row: FleetRow, owner: str) -> Instance:
    return Instance(
        instance_id=row.instance_id,
        pool_key=row.pool_key,
        tier=Tier(row.tier),
        workload=row.workload,
        state=InstanceState(row.state)
        if row.state in ("pending", "running")
        else InstanceState.PENDING,
        units=row.units,
        launched_at=row.launched_at,
        tags={OWNER_TAG: owner},
    )


def decision_deltas(
    decisions: Iterable[DecisionRecord], planned: Mapping[Slot, int] | None = None
) -> dict[Slot, int]:
    """Count changes the decisions since the plan imply (see ``_TAKE_OUT``).

    With ``planned`` (the plan's whole counts in force), the decisions are
    applied in order and a count never goes below zero, and a move (a
    decision that ends instances and launches others: a return to spot)
    launches only for the ended instances the plan in force still holds: a
    re-plan that already put the workload back on spot dropped the
    break-glass on-demand from its counts, and the return's spot would run on
    top of the plan's (one more fleet of spot until the next plan)."""
    out: dict[Slot, int] = defaultdict(int)
    have: dict[Slot, int] | None = None if planned is None else defaultdict(int, planned)

    def add(slot: Slot, n: int) -> int:
        """Apply ``n`` to ``slot``; what was applied (a cut stops at zero)."""
        if have is not None and n < 0:
            n = -min(-n, have[slot])
        if have is not None:
            have[slot] += n
        out[slot] += n
        return n

    for d in decisions:
        p = d.payload
        lost = p.get("lost_slot")
        if lost and (d.kind in _TAKE_OUT or p.get("taken_out")):
            add((lost[0], lost[1], lost[2]), -int(p.get("lost_count", 1)))
        # break-glass onto on-demand a return had ended that still runs: the
        # ended count comes back (``Decision.kept``)
        for x in p.get("kept") or []:
            workload = x.get("workload") or d.workload
            if workload:
                add((workload, x["pool_key"], x["tier"]), int(x["count"]))
        ended = p.get("ended_slots") or []
        held = -sum(add((s[0], s[1], s[2]), -1) for s in ended)
        for x in p.get("launches") or []:
            workload = x.get("workload") or d.workload
            if workload:
                n = int(x["count"])
                if have is not None and ended:
                    n = min(n, math.ceil(n * held / len(ended)))
                add((workload, x["pool_key"], x["tier"]), n)
    return {k: v for k, v in out.items() if v or planned is None}


def substitute(want: Mapping[Slot, int], book: FleetBook, now: datetime) -> dict[Slot, int]:
    """Move counts of pools that refused capacity to the pool the placement
    rule puts first instead (``FleetBook.next_pool``: the lifecycle's rule)."""
    out: dict[Slot, int] = defaultdict(int)
    for (w, pool, tier), n in want.items():
        t = Tier(tier)
        if book.is_unavailable(pool, t, now):
            alt = book.next_pool(w, pool, t, n, {pool}, now)
            if alt is not None:
                out[(w, alt[0], tier)] += alt[1]
                continue
        out[(w, pool, tier)] += n
    return dict(out)


def stick(
    want: Mapping[Slot, int],
    running: Mapping[Slot, float],
    book: FleetBook,
    margin: float,
    ready: Mapping[Slot, float] | None = None,
    floor: Mapping[Slot, int] | None = None,
) -> dict[Slot, int]:
    """Keep running instances where the plan only moved them to an equivalent
    pool: the same instance type and tier, priced less than ``margin`` cheaper
    (a 24-hour plan re-solved every hour flips between near-equal zones, and
    every flip is a cold start; the MILP charges churn, the fast path does not).

    With ``ready`` (per slot, the running instances past their warm-up), a
    wanted instance still warming up gives way to a ready surplus one of an
    equivalent pool: a serving replacement launched at a notice in one zone
    while make before break still keeps a ready replica in another (the
    reconcile before the notice moved it, and the move's replacement is the
    one being revoked) would otherwise run beside it until both are ready,
    and then one of them ends; the ready one serves now, at the same price.
    ``diff`` then ends the warming one (not-ready surplus goes first).

    ``floor`` (``FleetBook.protected``): no slot gives counts away below
    it, so a notice's replacement gives way (above) only once the
    revocation it replaces has landed. Without it, a replacement whose pool
    another notice hit since counts as not ready (``ready_counts``) and
    gave way to a ready surplus instance elsewhere, ended inside its
    window (the 100-kill crash test under load: a merged replacement of
    two instances, ended by the two restarts that followed a third notice
    in its pool).
    """
    out = dict(want)
    keep = floor or {}
    groups: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    # Sorted, with pool names breaking price ties: the same inputs give the
    # same moves in every process (set order follows PYTHONHASHSEED).
    for w, pool, tier in sorted(set(want) | set(running)):
        groups[(w, tier, PoolKey.parse(pool).instance_type)].append(pool)
    for (w, tier, _itype), pools in groups.items():
        slots = [(w, p, tier) for p in pools]
        held = {s: int(running.get(s, 0)) for s in slots}
        _shift(
            out,
            {s: out.get(s, 0) - held[s] for s in slots},
            {s: held[s] - out.get(s, 0) for s in slots if held[s] > out.get(s, 0)},
            book,
            margin,
            keep,
        )
        if ready is None:
            continue
        # The wanted instances running but not ready yet, against the ready
        # instances beyond what their slot wants.
        up = {s: int(ready.get(s, 0)) for s in slots}
        _shift(
            out,
            {s: min(out.get(s, 0), held[s]) - up[s] for s in slots},
            {s: up[s] - out.get(s, 0) for s in slots if up[s] > out.get(s, 0)},
            book,
            margin,
            keep,
        )
    return {k: v for k, v in out.items() if v > 0}


def _shift(
    out: dict[Slot, int],
    need: Mapping[Slot, int],
    surplus: dict[Slot, int],
    book: FleetBook,
    margin: float,
    floor: Mapping[Slot, int],
) -> None:
    """Move counts of ``out`` from slots that ``need`` instances to slots
    with ``surplus`` ones of one (workload, tier, type) group: the dearest
    needy slot first, the cheapest surplus first, never to a pool priced
    more than ``margin`` above the needy one, never a slot below its ``floor``."""
    for q in sorted(need, key=lambda s: (-book.price(s[1], Tier(s[2])), s)):
        left = min(need[q], out.get(q, 0) - floor.get(q, 0))
        for p in sorted(surplus, key=lambda s: (book.price(s[1], Tier(s[2])), s)):
            if left <= 0:
                break
            t = Tier(q[2])
            if surplus[p] <= 0 or book.price(q[1], t) < book.price(p[1], t) * (1 - margin):
                continue
            k = min(left, surplus[p])
            out[q] = out.get(q, 0) - k
            out[p] = out.get(p, 0) + k
            surplus[p] -= k
            left -= k
