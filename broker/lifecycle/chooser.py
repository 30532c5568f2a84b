"""The choices for one loss, made and recorded: replace, break glass, shrink.

Owns ``Outcome`` and ``Chooser``, which applies the pure rules of
``broker.lifecycle.choices`` to the manager's state and records what it
chose: a launch counted until the fleet shows it (and against the churn budget
when on spot), a break-glass stretch opened in the ``BreakGlassBook``, a
resize time. Each method returns an ``Outcome``, or why it cannot.

At reaction time the ranking reads the current placement scores
(``broker.lifecycle.placement.CurrentScores``, asked per its TTL:
``refresh_placement``), and a replacement avoids the failure domain of the
pool just lost (``MarketSnapshot.failure_domains``); its reason says both.

Must not: decide the order of the choices (``broker.lifecycle.manager`` does
per workload class), read a clock, or do I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from broker.lifecycle.choices import (
    Guards,
    deadline_slack,
    find_spot,
    pick_on_demand,
    shrink_size,
)
from broker.lifecycle.headroom import QuotaRoom
from broker.lifecycle.placement import CurrentScores, PlacementReader, ScoreReading
from broker.lifecycle.stretches import BreakGlassBook
from broker.lifecycle.values import DecisionKind, LaunchIntent, LifecycleConfig
from broker.lifecycle.view import Candidate, Candidates, FleetView, Pending
from markets.cloud_fleet import Instance
from markets.keys import PoolKey
from markets.model import MarketSnapshot, PoolSnapshot, Tier
from policies.breakglass import resize_block_reason
from policies.cost_table import CostOptions, CostTable
from policies.workloads.spec import Workload, WorkloadClass, WorkloadSet

__all__ = ["Chooser", "Outcome"]


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: DecisionKind
    reason: str
    launches: tuple[LaunchIntent, ...] = ()
    new_size: int | None = None
    usd: float = 0.0
    kept: tuple[LaunchIntent, ...] = ()  # on-demand taken back instead of launched
    kept_instance_ids: tuple[str, ...] = ()


class Chooser:
    """The recorded choices; the state they read and write lives here.

    ``on_market`` takes a snapshot: a new one (another object) gets its cost
    table computed there, once, for every workload (the stale multiplier on
    its hazards when the snapshot is stale); each workload's ranking is then
    read from that table on first use."""

    def __init__(
        self,
        workloads: WorkloadSet,
        config: LifecycleConfig,
        guards: Guards,
        book: BreakGlassBook,
        horizon_s: float,
        placement: PlacementReader | None = None,
    ) -> None:
        self.workloads = workloads
        self.config = config
        self.guards = guards
        self.book = book
        self.horizon_s = horizon_s
        self.last_resize: dict[str, float] = {}  # workload -> when (s)
        self.progress: dict[str, float] = {}  # workload -> unit-hours done
        self._snapshot: MarketSnapshot | None = None
        self._costs: CostTable | None = None
        self._cands: dict[str, Candidates] = {}
        self._by_key: dict[str, PoolSnapshot] = {}
        self.scores = CurrentScores(placement)
        self._reading: ScoreReading | None = None

    def refresh_placement(self, now_s: float) -> ScoreReading | None:
        """The placement scores in force at ``now_s`` (the reader asked when
        its TTL has run out); a new reading re-ranks the candidates."""
        if self._snapshot is None:
            return None
        reading = self.scores.at(now_s, self._snapshot)
        if reading is not self._reading:
            self._reading, self._cands = reading, {}
        return reading

    def on_market(self, snapshot: MarketSnapshot, costs: CostTable | None = None) -> None:
        if snapshot is not self._snapshot:
            mult = self.config.stale_hazard_multiplier if snapshot.stale else 1.0
            options = CostOptions(interruption_multiplier=mult)
            if costs is None:
                costs = CostTable.compute(snapshot, self.workloads, options)
            else:
                costs.check(snapshot, self.workloads, options)
            self._costs = costs
            self._snapshot, self._cands = snapshot, {}
            self._by_key = snapshot.by_key()
            self._reading = None

    def pool(self, pool_key: str) -> PoolSnapshot | None:
        """A pool of the snapshot last handed to ``on_market`` (``None``: not in it)."""
        return self._by_key.get(pool_key)

    @property
    def has_market(self) -> bool:
        return self._costs is not None

    def units(self, pool_key: str) -> int:
        """Units per instance of a pool in the snapshot (1 if not in it)."""
        p = self._by_key.get(pool_key)
        return 1 if p is None else p.instance.units

    @property
    def costs(self) -> CostTable:
        """The cost table of the snapshot last handed to ``on_market``."""
        if self._costs is None:
            raise RuntimeError("no market snapshot yet: call on_market first")
        return self._costs

    def replace(
        self,
        nid: str,
        w: Workload,
        inst: Instance,
        lost_work: float,
        view: FleetView,
        now_s: float,
        max_usd_per_work_hour: float | None = None,
        *,
        avoid: Collection[str] = (),
    ) -> Outcome | str:
        reading = self.refresh_placement(now_s)
        lost_key = PoolKey.parse(inst.pool_key)
        domain = None if self._snapshot is None else self._snapshot.domain_of(lost_key.zone_key)
        domain_zones = frozenset(domain.zones) if domain is not None else frozenset()
        found = self.find_spot(
            w,
            lost_work,
            view,
            now_s,
            lost_key.instance_type,
            max_usd_per_work_hour,
            avoid_zones=domain_zones,
            avoid=avoid,
            from_pool=inst.pool_key,
        )
        if isinstance(found, str):
            return found
        c, n, over_share = found
        self.launch(nid, w, c, Tier.SPOT, n, view, now_s)
        eff = c.spot_usd_per_work_hour or 0.0
        note = ", above its zone/pool share until the next plan" if over_share else ""
        if reading is not None:
            note += f", {reading.describe(c.pool_key, now_s)}"
        if domain is not None:
            where = "inside" if c.zone_key in domain_zones else "outside"
            note += f", {where} failure domain {'+'.join(domain.zones)} that just revoked"
            if where == "inside":
                note += ": no pool outside it passes"
        reason = (
            f"replace {inst.units} units lost in {inst.pool_key} with {n} x {c.instance_type} "
            f"spot in {c.pool_key} (${eff:.2f} per work-hour effective, "
            f"hazard {c.hazard_per_hour:.3f}/h{note})"
        )
        return Outcome(DecisionKind.REPLACE, reason, (LaunchIntent(c.pool_key, Tier.SPOT, n),))

    def break_glass(
        self, nid: str, w: Workload, inst: Instance, lost_work: float, view: FleetView, now_s: float
    ) -> Outcome | str:
        return self.open_on_demand(nid, w, inst.pool_key, lost_work, view, now_s)

    def open_on_demand(
        self, nid: str, w: Workload, pool_key: str, lost_work: float, view: FleetView, now_s: float
    ) -> Outcome | str:
        """A break-glass stretch ``nid`` for ``lost_work`` of spot in
        ``pool_key`` (lost, or that a waiting job would run on): on-demand
        there or in the cheapest pool of its type, if the cap pays."""
        cands = self.candidates(w)
        with self.quotas_of(view):
            od = pick_on_demand(
                cands,
                self.guards,
                now_s=now_s,
                same_type=self.same_type(w, PoolKey.parse(pool_key).instance_type),
                prefer_pool=pool_key,
                workload=w if w.workload_class is WorkloadClass.TRAINING else None,
                work_per_hour=lost_work,
            )
        if od is None:
            return "no acceptable pool has on-demand capacity"
        n = od.instances_for(lost_work)
        usd, hours = self._commit(nid, w, od, n, lost_work, cands, pool_key, now_s)
        if isinstance(usd, str):
            return usd
        self.launch(nid, w, od, Tier.ON_DEMAND, n, view, now_s)
        reason = (
            f"break glass: {n} x {od.instance_type} on-demand in {od.pool_key}, "
            f"${usd:,.0f} committed for {hours:.1f} h (cap left "
            f"${self.book.ledger.remaining_usd:,.0f})"
        )
        return Outcome(
            DecisionKind.BREAK_GLASS,
            reason,
            (LaunchIntent(od.pool_key, Tier.ON_DEMAND, n),),
            usd=usd,
        )

    def _commit(
        self,
        nid: str,
        w: Workload,
        od: Candidate,
        n: int,
        lost_work: float,
        cands: Candidates,
        pool_key: str,
        now_s: float,
        *,
        kept: tuple[str, ...] = (),
    ) -> tuple[float | str, float]:
        """Commit break-glass stretch ``nid`` (``n`` x ``od`` for
        ``lost_work`` of spot lost in ``pool_key``) against the cap, over the
        hours until the pool is calm: its dollars or why not, and those hours."""
        hours = self._calm_hours(pool_key, now_s)
        usd = self.book.open(
            nid,
            w.name,
            od,
            n,
            work_per_hour=lost_work,
            lost_spot_usd_per_hour=self._spot_price(cands, pool_key),
            hours=hours,
            now_s=now_s,
            kept=kept,
        )
        return usd, hours

    def take_back(
        self,
        nid: str,
        w: Workload,
        pool_key: str,
        retired: Sequence[Instance],
        lost_work: float,
        view: FleetView,
        now_s: float,
    ) -> Outcome | str:
        """Break glass for ``lost_work`` of spot in ``pool_key`` onto on-demand
        that still runs: ``retired``, instances of one on-demand pool that a
        return to spot retired and keeps until its spot is ready (make
        before break). A stretch for as many of them as the work needs,
        against the cap as ``open_on_demand``'s; nothing is launched: they
        serve now, where a launch would be ready a cold start later and
        would run beside them until reconcile ends the surplus."""
        if not retired:
            return "no on-demand a return retired still runs"
        cands = self.candidates(w)
        od = cands.by_pool.get(retired[0].pool_key)
        if od is None:
            return f"{retired[0].pool_key} is not in the market"
        n = od.instances_for(lost_work)
        if n > len(retired):
            return f"{len(retired)} retired on-demand still run, {n} needed"
        kept = tuple(retired[:n])
        ids = tuple(i.instance_id for i in kept)
        usd, hours = self._commit(nid, w, od, n, lost_work, cands, pool_key, now_s, kept=ids)
        if isinstance(usd, str):
            return usd
        for inst in kept:
            view.restore(inst)
        reason = (
            f"break glass onto {n} x {od.instance_type} on-demand in {od.pool_key} that a "
            f"return to spot retired and that still runs: nothing launched, ${usd:,.0f} "
            f"committed for {hours:.1f} h (cap left ${self.book.ledger.remaining_usd:,.0f})"
        )
        return Outcome(
            DecisionKind.BREAK_GLASS,
            reason,
            usd=usd,
            kept=(LaunchIntent(od.pool_key, Tier.ON_DEMAND, n),),
            kept_instance_ids=ids,
        )

    def _calm_hours(self, pool_key: str, now_s: float) -> float:
        """Hours a break-glass stretch for spot lost in ``pool_key`` commits:
        until its breakers close plus the return dwell, at least the minimum."""
        g = self.guards
        calm_s = max(
            g.pool_breakers.open_until_s(pool_key),
            g.zone_breakers.open_until_s(PoolKey.parse(pool_key).zone_key),
        )
        return max(
            self.config.break_glass_min_hours,
            (max(0.0, calm_s - now_s) + self.config.return_min_dwell_s) / 3600.0,
        )

    @staticmethod
    def _spot_price(cands: Candidates, pool_key: str) -> float:
        lost = cands.by_pool.get(pool_key)
        return 0.0 if lost is None else (lost.spot_usd_per_hour or 0.0)

    def shrink(
        self, w: Workload, inst: Instance, view: FleetView, now_s: float, *, forced: bool = False
    ) -> Outcome | str:
        """Run on what is left, at the largest allowed size. ``forced``: the
        dwell and the preemption budget do not hold it back, for a gang
        that must re-form anyway (a replacement or break-glass node joining
        is a resize too: docs/concepts/tiers.md, "otherwise shrink")."""
        if not w.elastic:
            return "the gang is not elastic"
        tally = view.tally(w.name)
        size = shrink_size(w, tally.units)
        if size is None:
            return f"{tally.units:.0f} units left is below min_units {w.min_units}"
        block = resize_block_reason(
            self.last_resize.get(w.name),
            now_s,
            w.min_dwell_minutes * 60.0,
            self.config.resize_budget_interval_s,
        )
        if block is not None and not forced:
            return block
        work = tally.work_per_hour * size / tally.units if tally.units > 0 else 0.0
        slack = self.slack(w, work, now_s, inst.pool_key, can_grow=False)
        if slack is not None and slack[0] < slack[1]:
            return f"at {size} units deadline slack would be {slack[0]:.1f} h < {slack[1]:.1f} h"
        self.last_resize[w.name] = now_s
        extra = round(tally.units) - size
        release = f", releasing {extra} more" if extra > 0 else ""
        slack_note = "" if slack is None else f"; deadline slack {slack[0]:.0f} h"
        forced_note = (
            f"; the revocation re-forms the gang within its dwell ({block}): no on-demand"
            " while the deadline allows"
            if block is not None
            else ""
        )
        reason = (
            f"shrink {w.name} to {size} units after losing {inst.units}{release} "
            f"(min {w.min_units}, step {w.step_units}{slack_note}{forced_note})"
        )
        return Outcome(DecisionKind.SHRINK, reason, new_size=size)

    def same_type(self, w: Workload, itype: str) -> str | None:
        """Training gangs keep their instance type (rigid parallel groups),
        unless their contract says ``mixed_types``."""
        if (
            w.workload_class is WorkloadClass.TRAINING
            and self.config.training_same_instance_type
            and not w.mixed_types
        ):
            return itype
        return None

    def find_spot(
        self,
        w: Workload,
        work_per_hour: float,
        view: FleetView,
        now_s: float,
        lost_type: str,
        max_usd_per_work_hour: float | None = None,
        *,
        avoid_zones: frozenset[str] = frozenset(),
        avoid: Collection[str] = (),
        from_pool: str | None = None,
    ) -> tuple[Candidate, int, bool] | str:
        """Spot for ``work_per_hour`` (``choices.find_spot``); ``from_pool``:
        where a training gang is (its lost or break-glass pool): the spot
        stays in that gang's placement."""
        gang = w.workload_class is WorkloadClass.TRAINING
        with self.quotas_of(view):
            return find_spot(
                w,
                work_per_hour,
                self.candidates(w),
                view.tally(w.name),
                self.guards,
                now_s=now_s,
                capacity_units=view.total_units,
                same_type=self.same_type(w, lost_type),
                max_usd_per_work_hour=max_usd_per_work_hour,
                avoid_zones=avoid_zones,
                avoid=avoid,
                inside=from_pool if gang else None,
            )

    @contextmanager
    def quotas_of(self, view: FleetView | None) -> Iterator[None]:
        """Within: the placement rule keeps to the snapshot's quotas, less what
        ``view``'s live fleet and pending launches take (no view: the whole
        limits; no quotas: no check)."""
        snap = self._snapshot
        if snap is None or not snap.quotas:
            yield
            return
        live: list[Instance] = []
        pending: list[tuple[str, Tier, int]] = []
        if view is not None:
            live = [i for i in view.source if i.instance_id not in view.removed]
            pending = [(p.pool_key, p.tier, p.remaining) for p in view.pending]
        self.guards.quota = QuotaRoom(snap, live, pending)
        try:
            yield
        finally:
            self.guards.quota = None

    def domain_pools(self, cands: Candidates, pool_key: str) -> set[str]:
        """Pools of ``cands`` in the failure domain of ``pool_key`` (empty: none known)."""
        zone = PoolKey.parse(pool_key).zone_key
        d = None if self._snapshot is None else self._snapshot.domain_of(zone)
        if d is None:
            return set()
        return {k for k, c in cands.by_pool.items() if c.zone_key in d.zones}

    def candidates(self, w: Workload) -> Candidates:
        c = self._cands.get(w.name)
        if c is None:
            scores = None if self._reading is None else self._reading.scores
            c = self._cands[w.name] = Candidates(w, self.costs, self.config.providers, scores)
        return c

    def slack(
        self,
        w: Workload,
        work_per_hour: float,
        now_s: float,
        pool_key: str,
        *,
        can_grow: bool = True,
    ) -> tuple[float, float] | None:
        """Deadline slack and margin, at the hazard of the pool just lost."""
        lost = self.candidates(w).by_pool.get(pool_key)
        return deadline_slack(
            w,
            work_per_hour,
            now_s=now_s,
            horizon_start_s=self.horizon_s,
            done_unit_hours=self.progress.get(w.name),
            hazard_per_hour=0.0 if lost is None else lost.hazard_per_hour,
            min_margin_hours=self.config.deadline_margin_min_hours,
            can_grow=can_grow,
        )

    def batch_price_cap(self, w: Workload, inst: Instance) -> float | None:
        """Batch replaces only at most ``batch_replace_max_premium`` above what
        the lost pool cost per unit of work (effective spot, else on-demand)."""
        lost = self.candidates(w).by_pool.get(inst.pool_key)
        if lost is None:
            return None
        ref = lost.spot_usd_per_work_hour or lost.on_demand_usd_per_work_hour
        return ref * (1.0 + self.config.batch_replace_max_premium)

    def launch(
        self, nid: str, w: Workload, c: Candidate, tier: Tier, n: int, view: FleetView, now_s: float
    ) -> None:
        """Count a decided launch until it shows in the fleet; spot counts as churn."""
        view.add_pending(
            Pending(
                notice_id=nid,
                workload=w.name,
                pool_key=c.pool_key,
                tier=tier,
                count=n,
                units_each=c.units,
                decided_s=now_s,
                expires_s=now_s + self.config.pending_launch_ttl_s,
            )
        )
        if tier is Tier.SPOT:
            self.guards.churn.record(n * c.units, now_s, w.name)
