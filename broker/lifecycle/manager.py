"""``LifecycleManager``: one decision per notice, and break-glass upkeep.

Owns the manager's state (breakers, churn budget, rebalance record, resize
times, decided notices, launches not yet seen in the fleet, break-glass
stretches, the deadline rule's per-job memory) and the order in which each
workload class tries the choices of ``broker.lifecycle.choices`` (see the
package docstring for the rules), and where the deadline rule
(``broker.lifecycle.deadline``) decides instead of the slack test.

Must not: call a provider, run a checkpoint hook, persist, or solve a plan.
Pure and deterministic given the clock, the notices, fleets and snapshots.
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from broker.lifecycle.choices import Guards, checkpoint_verdict
from broker.lifecycle.chooser import Chooser, Outcome
from broker.lifecycle.disruption import DisruptionBudget
from broker.lifecycle.fallback import UnavailableOfferings, instead, upgrades
from broker.lifecycle.placement import PlacementReader
from broker.lifecycle.stretches import (
    BreakGlassBook,
    Step,
    Stretch,
    overlap_s,
    stretch_from_record,
    stretch_record,
)
from broker.lifecycle.tiers import DeadlineJobs
from broker.lifecycle.values import (
    CheckpointVerdict,
    Decision,
    DecisionKind,
    LaunchIntent,
    LifecycleConfig,
    ReturnKind,
    SpotReturn,
)
from broker.lifecycle.view import Candidate, FleetView, Pending
from markets.clock import Clock, ensure_utc
from markets.cloud_fleet import Instance, Notice, NoticeKind
from markets.keys import PoolKey
from markets.model import MarketSnapshot, PoolSnapshot, Tier
from policies.breakglass import CircuitBreakers
from policies.cost_table import CostTable
from policies.online.deadline import Mode
from policies.rebalance import RebalanceRecord
from policies.workloads.spec import Workload, WorkloadClass, WorkloadSet

__all__ = ["LifecycleManager"]

_REVOCATIONS = (NoticeKind.INTERRUPTION, NoticeKind.PREEMPTED)
# What ``_handled`` says of an on-demand instance a stretch's return retired.
_RETIRED = ":retired"
# What it says of on-demand reconcile keeps only until its replacement is
# ready (``kept_until_ready``): retired as a return's is.
_SURPLUS = f"reconcile{_RETIRED}"


class LifecycleManager:
    """Decides what to do about each notice (``handle``) and about break-glass
    capacity over time (``tick``). See the package docstring."""

    def __init__(
        self,
        workloads: WorkloadSet,
        clock: Clock,
        config: LifecycleConfig | None = None,
        placement: PlacementReader | None = None,
    ) -> None:
        cfg = self.config = config or LifecycleConfig()
        self._clock = clock
        self._workloads = {w.name: w for w in workloads.workloads}
        start = cfg.horizon_start if cfg.horizon_start is not None else clock.now()
        self._horizon_s = ensure_utc(start).timestamp()
        self._guards = Guards(
            pool_breakers=CircuitBreakers(cfg.pool_breaker),
            zone_breakers=CircuitBreakers(cfg.zone_breaker),
            unavailable=UnavailableOfferings(),
            churn=DisruptionBudget(
                cfg.churn_window_s,
                cfg.churn_max_share,
                cfg.churn_floor_units,
                cfg.resize_budget_interval_s,
                workloads.workloads,
            ),
        )
        self._book = BreakGlassBook(workloads.break_glass_cap_usd, cfg)
        self._rebalance = RebalanceRecord(
            cfg.rebalance_window_s,
            prior_samples=cfg.rebalance_prior_samples,
            min_fleet_samples=cfg.rebalance_min_samples,
            min_precision=cfg.rebalance_min_precision,
        )
        self._choose = Chooser(workloads, cfg, self._guards, self._book, self._horizon_s, placement)
        self._decisions: OrderedDict[str, Decision] = OrderedDict()
        self._handled: dict[str, str] = {}  # instance id -> the notice that decided for it
        self._pending: list[Pending] = []
        self._view: FleetView | None = None
        self._deadline = DeadlineJobs(cfg.deadline_tick_s)
        self._opened = 0  # on-demand stretches the deadline rule opened for waiting jobs

    # --- inputs besides notices --------------------------------------------------

    def on_market(self, snapshot: MarketSnapshot, costs: CostTable | None = None) -> None:
        """Take a snapshot. A new one (another object than the last) has its
        cost table computed here, once, unless the caller hands the one it
        already computed (the daemon's plan job: checked to price this
        snapshot with this manager's options); the same snapshot again costs
        nothing, so ``handle`` and ``tick``, which pass theirs through here,
        recompute nothing while the market has not changed."""
        self._choose.on_market(snapshot, costs)

    def record_launch_failure(
        self, pool_key: str, tier: Tier = Tier.SPOT, *, notice_id: str | None = None
    ) -> None:
        """Insufficient capacity: skip ``(pool_key, tier)`` for
        ``markets.ttl.UNAVAILABLE_OFFERING_TTL_S`` (the one book, ``unavailable``).
        Given the ``notice_id`` whose launch failed, its launch is no longer
        counted and a break-glass stretch it opened there is released."""
        self._guards.unavailable.mark(pool_key, tier, self._clock.now().timestamp())
        if notice_id is None:
            return
        s = self._book.stretches.get(notice_id)
        if s is not None and s.pool_key == pool_key and tier is Tier.ON_DEMAND:
            self._book.cancel(notice_id)
        if self._view is not None:
            self._view.drop_pending(notice_id, pool_key)
        else:
            self._pending[:] = [
                p for p in self._pending if (p.notice_id, p.pool_key) != (notice_id, pool_key)
            ]

    def report_progress(self, workload: str, done_unit_hours: float) -> None:
        """Work done so far; without it a job is taken as on schedule (pro rata)."""
        self._choose.progress[workload] = max(0.0, done_unit_hours)

    def observe_spot(self, pool_key: str, available: bool, at: datetime | None = None) -> None:
        """The market reported whether spot can be held in ``pool_key`` (a
        snapshot's ``spot_available``: the replay and default markets publish
        it from their traces, the cloud markets whether spot is offered). The
        deadline rule learns the pool's spells from these reports; ``tick``
        makes one for each governed job's pool from its snapshot, so a caller
        only adds the reports seen before (a daemon watching the market)."""
        self._deadline.watch(pool_key, available, ensure_utc(at or self._clock.now()).timestamp())

    def record_resize(self, workload: str, at: datetime | None = None) -> None:
        """A resize made elsewhere (by the plan) starts the dwell too."""
        self._choose.last_resize[workload] = ensure_utc(at or self._clock.now()).timestamp()

    def kept_until_ready(self, instance_ids: Collection[str]) -> None:
        """The on-demand reconcile keeps only until what replaces it is ready
        (make before break: surplus to the plan and the decisions since,
        ``broker.planning.reconcile.surplus``), all of it, after each
        reconcile pass. The manager counts it as it counts the on-demand a
        return to spot retired: out of the tallies, and what a serving
        break-glass takes back instead of launching (``_take_back``). A plan
        that moves serving capacity back to spot while break-glass stretches
        hold it on on-demand (a market refresh that finds spot back) leaves
        that on-demand running until the spot is ready; when that spot is
        revoked first, the notice keeps it rather than launch beside it.
        Named before and not now: counted again (the counts hold it)."""
        named = set(instance_ids)
        changed = False
        for iid in [i for i, why in self._handled.items() if why == _SURPLUS]:
            if iid not in named:
                del self._handled[iid]
                changed = True
        for iid in named:
            if iid not in self._handled:
                self._handled[iid] = _SURPLUS
                changed = True
        if changed:
            self._view = None  # the tallies are rebuilt without them

    def set_horizon_start(self, at: datetime) -> None:
        """The plan epoch (``deadline_hours`` count from here), once the daemon
        knows it: from its config, its store, or its first plan."""
        self._horizon_s = ensure_utc(at).timestamp()
        self._choose.horizon_s = self._horizon_s

    def withdraw(self, notice_id: str) -> None:
        """The daemon refused ``notice_id``'s decision (its own budget or cap
        guard): forget its launches and release any stretch it opened."""
        s = self._book.stretches.get(notice_id)
        if s is not None and s.kept:  # what it took back is retired again
            for iid in s.kept:
                self._handled[iid] = f"{notice_id}{_RETIRED}"
                inst = None if self._view is None else self._view.by_id.get(iid)
                if inst is not None and self._view is not None:
                    self._view.remove(inst)
        self._book.cancel(notice_id)
        if self._view is not None:
            for p in [p for p in self._view.pending if p.notice_id == notice_id]:
                self._view.drop_pending(notice_id, p.pool_key)
        else:
            self._pending[:] = [p for p in self._pending if p.notice_id != notice_id]

    def stretch_state(self, alloc_id: str) -> dict[str, object] | None:
        """An open stretch as JSON (``None``: not open), for the store: handed
        back to ``restore_break_glass`` after a restart."""
        s = self._book.stretches.get(alloc_id)
        if s is None:
            return None
        return {**stretch_record(s), "open_usd": self._book.ledger.open_usd(alloc_id)}

    def restore_break_glass(
        self, committed_usd: float, stretches: Sequence[Mapping[str, Any]] = ()
    ) -> None:
        """After a restart: break-glass dollars the store says were committed
        (decisions' commitments plus returns' deltas) count against the cap,
        and the ``stretches`` open then (``stretch_state`` records) are resumed
        with their open commitment, so ``tick`` returns, extends or ends them
        as if nothing had happened. The records come back from JSON (the
        store's JSON column: Any values)."""
        resumed = [stretch_from_record(r) for r in stretches]
        open_usd = [max(0.0, float(r.get("open_usd", 0.0))) for r in stretches]
        self._book.ledger.restore(max(0.0, committed_usd - sum(open_usd)))
        for s, usd in zip(resumed, open_usd, strict=True):
            self._book.ledger.reopen(s.alloc_id, usd)
        self._book.resume(resumed, self._clock.now().timestamp(), self._guards.unavailable.ttl_s)

    def seed_rebalance_history(self, pool_key: str, hits: int, resolved: int) -> None:
        """Recorded rebalance outcomes of a pool (from the store, after a restart)."""
        self._rebalance.seed(pool_key, hits, resolved)

    def rebalance_outcomes(self) -> list[tuple[str, bool]]:
        """``(pool, followed by an interruption)`` of the recommendations
        resolved since the last call: for the daemon to persist."""
        return self._rebalance.outcomes()

    # --- what the daemon reads -----------------------------------------------------

    @property
    def unavailable(self) -> UnavailableOfferings:
        """The one book of pools that refused capacity (the daemon marks and
        reads this same object)."""
        return self._guards.unavailable

    @property
    def disruption(self) -> DisruptionBudget:
        """The one disruption budget (``broker.lifecycle.disruption``): the
        lifecycle's spot (re)placements and the daemon's plan-driven moves
        spend the same one."""
        return self._guards.churn

    def instead(
        self,
        workload: str,
        failed_pool: str,
        tier: Tier,
        count: int,
        tried: Collection[str],
        now: datetime | None = None,
    ) -> tuple[str, int] | None:
        """The placement rule (``broker.lifecycle.fallback.instead``) for the
        work of ``count`` instances of ``failed_pool``: the pool to use
        instead on ``tier`` and its instance count, never one of ``tried``
        (``None``: no pool is left, or no snapshot yet). In the
        out-of-capacity order (the refused type elsewhere, the workload's
        preference, then upgrades if it allows them), ranked on the cost
        table of the snapshot last handed to ``on_market``."""
        w = self._workloads.get(workload)
        if w is None or not self._choose.has_market:
            return None
        now_s = ensure_utc(now or self._clock.now()).timestamp()
        self._choose.refresh_placement(now_s)  # rank with the score now (per its TTL)
        cands = self._choose.candidates(w)
        itype = PoolKey.parse(failed_pool).instance_type
        lost = cands.by_pool.get(failed_pool)
        per_instance = (
            lost.work_per_instance
            if lost is not None
            else self._choose.units(failed_pool) * w.throughput_of(itype)
        )
        snap = self._choose.pool(failed_pool)
        ups = (
            upgrades(lost, snap.instance, self._allowed_pools(w), w.instance_types)
            if w.allow_upgrade and lost is not None and snap is not None
            else ()
        )
        if w.workload_class is WorkloadClass.TRAINING:  # a gang stays in its placement
            tried = [*tried, *(c.pool_key for c in (*cands.spot, *cands.on_demand, *ups)
                               if not w.same_placement(failed_pool, c.pool_key))]  # fmt: skip
        # The failure domain of the pool that refused is tried last: its other
        # zones are short or revoking too (``markets.model.FailureDomain``).
        suspect = self._choose.domain_pools(cands, failed_pool) if tier is Tier.SPOT else set()
        found = None
        with self._choose.quotas_of(self._view):  # no pool whose quota has no room
            for skip in ([*tried, *suspect], tried) if suspect else (tried,):
                found = instead(
                    cands,
                    self._guards,
                    tier,
                    count * per_instance,
                    now_s=now_s,
                    same_type=self._choose.same_type(w, itype),
                    tried=skip,
                    failed_type=itype,  # out of capacity: the workload's order, then upgrades
                    extra=ups,
                )
                if found is not None:
                    break
        return None if found is None else (found[0].pool_key, found[1])

    @property
    def break_glass_committed_usd(self) -> float:
        """Extra dollars committed or spent on break-glass so far (<= the cap)."""
        return self._book.ledger.committed_usd

    @property
    def horizon_start(self) -> datetime:
        """Where ``deadline_hours`` count from."""
        return datetime.fromtimestamp(self._horizon_s, UTC)

    @property
    def break_glass_cap_usd(self) -> float | None:
        return self._book.ledger.cap_usd

    def open_breakers(self, now: datetime | None = None) -> dict[str, list[str]]:
        now_s = ensure_utc(now or self._clock.now()).timestamp()
        return {
            "pools": self._guards.pool_breakers.open_keys(now_s),
            "zones": self._guards.zone_breakers.open_keys(now_s),
        }

    def rebalance_counts(self, pool_key: str) -> tuple[int, int]:
        """(rebalances followed by an interruption, rebalances resolved)."""
        return self._rebalance.counts(pool_key)

    def break_glass_stretches(self) -> dict[str, tuple[str, str, int]]:
        """Open stretches: notice id -> (workload, on-demand pool, instances)."""
        return {
            s.alloc_id: (s.workload, s.pool_key, s.count) for s in self._book.stretches.values()
        }

    # --- notices -----------------------------------------------------------------

    def handle(
        self, notice: Notice, fleet: Sequence[Instance], snapshot: MarketSnapshot
    ) -> Decision:
        """One decision for ``notice``; a repeated ``notice_id`` is ignored.

        ``fleet`` is our instances as last listed. The manager indexes it once
        and, while the *same* sequence object is passed again, keeps that index
        and its own overlay (lost instances out, decided launches in): pass a
        new sequence whenever the fleet changes, never one mutated in place.
        """
        prior = self._decisions.get(notice.notice_id)
        if prior is not None:
            why = (
                f"duplicate of notice {notice.notice_id}: already decided "
                f"'{prior.kind.value}' at {prior.decided_at:%Y-%m-%d %H:%M:%S}"
            )
            return self._decision(notice, Outcome(DecisionKind.IGNORE, why), prior.workload)
        now_s = self._clock.now().timestamp()
        self.on_market(snapshot)
        view = self._view_for(fleet, now_s)
        decision = self._handle(notice, view, now_s)
        self._decisions[notice.notice_id] = decision
        if len(self._decisions) > self.config.remembered_notices:
            self._decisions.popitem(last=False)
        return decision

    def _handle(self, notice: Notice, view: FleetView, now_s: float) -> Decision:
        iid = notice.instance_id
        if notice.kind is NoticeKind.STATE_CHANGE:
            state = notice.state.value if notice.state else "unknown"
            return self._ignore(notice, f"state change to {state}: the reconciler follows it")
        inst = view.by_id.get(iid)
        if inst is None:
            return self._ignore(notice, f"instance {iid} is not in our fleet (not ours, or gone)")
        w = self._workloads.get(inst.workload)
        if w is None:
            return self._ignore(notice, f"workload {inst.workload!r} of {iid} is not configured")
        if inst.tier is not Tier.SPOT:
            return self._ignore(notice, f"{iid} is {inst.tier.value}: nothing revokes it", w)
        at_s = notice.at.timestamp()
        if notice.kind in _REVOCATIONS:
            # Every revocation counts, even of an instance handled before: the
            # breakers and the rebalance record need them all.
            self._guards.pool_breakers.record(inst.pool_key, at_s)
            self._guards.zone_breakers.record(PoolKey.parse(inst.pool_key).zone_key, at_s)
            self._rebalance.record_interruption(iid, at_s)
        earlier = self._handled.get(iid)
        if earlier is not None:
            return self._ignore(notice, f"{iid} was already handled by notice {earlier}", w)
        if notice.kind is NoticeKind.REBALANCE:
            return self._on_rebalance(notice, inst, w, view, now_s, at_s)
        return self._on_revocation(notice, inst, w, view, now_s)

    def _on_rebalance(
        self,
        notice: Notice,
        inst: Instance,
        w: Workload,
        view: FleetView,
        now_s: float,
        at_s: float,
    ) -> Decision:
        cfg = self.config
        if now_s - at_s > cfg.rebalance_stale_s:
            return self._ignore(
                notice, f"stale rebalance recommendation, {now_s - at_s:.0f} s old", w
            )
        self._rebalance.expire(now_s)
        self._rebalance.record_rebalance(inst.instance_id, inst.pool_key, at_s)
        rb = self._rebalance
        hits, resolved = rb.counts(inst.pool_key)
        record = (
            f"{hits} of {resolved} rebalances in {inst.pool_key} were followed by an "
            f"interruption within {cfg.rebalance_window_s / 60:.0f} min; confidence "
            f"{rb.confidence(inst.pool_key):.0%} with the fleet's {rb.fleet_rate():.0%}"
        )
        if not rb.acts(inst.pool_key):
            need = (
                f"acting needs {cfg.rebalance_min_samples} resolved in the fleet and "
                f"over {cfg.rebalance_min_precision:.0%}"
            )
            return self._ignore(notice, f"rebalance recommendation ignored: {record} ({need})", w)
        view.remove(inst)
        lost_work = inst.units * view.throughput(w.name, PoolKey.parse(inst.pool_key).instance_type)
        # The pool and its zone are at risk: the replacement goes elsewhere.
        at_risk = (inst.pool_key, PoolKey.parse(inst.pool_key).zone_key)
        out = self._choose.replace(notice.notice_id, w, inst, lost_work, view, now_s, avoid=at_risk)
        if isinstance(out, str):
            view.restore(inst)
            return self._ignore(notice, f"rebalance: {record}, but {out}; awaiting a notice", w)
        self._handled[inst.instance_id] = notice.notice_id
        # We end it ourselves: unless its interruption comes first, whether it
        # would have been interrupted is never seen (no miss).
        rb.acted(inst.instance_id)
        out = Outcome(out.kind, f"launch before terminate ({record}): {out.reason}", out.launches)
        return self._decision(notice, out, w.name, inst, lbt=True)

    def _on_revocation(
        self, notice: Notice, inst: Instance, w: Workload, view: FleetView, now_s: float
    ) -> Decision:
        view.remove(inst)
        self._handled[inst.instance_id] = notice.notice_id
        latency_s = now_s - notice.at.timestamp()
        window_s = (
            None if notice.deadline is None else (notice.deadline - notice.at).total_seconds()
        )
        cp = checkpoint_verdict(
            w,
            inst.pool_key,
            window_s=window_s,
            latency_s=latency_s,
            margin_s=self.config.checkpoint_margin_s,
        )
        lost_work = inst.units * view.throughput(w.name, PoolKey.parse(inst.pool_key).instance_type)
        nid, tally = notice.notice_id, view.tally(w.name)

        def replace(max_usd: float | None = None) -> Outcome | str:
            return self._choose.replace(nid, w, inst, lost_work, view, now_s, max_usd)

        def glass() -> Outcome | str:
            if w.workload_class is WorkloadClass.SERVING:
                kept = self._take_back(nid, w, inst, lost_work, view, now_s)
                if not isinstance(kept, str):
                    return kept
            return self._choose.break_glass(nid, w, inst, lost_work, view, now_s)

        def shrink() -> Outcome | str:
            return self._choose.shrink(w, inst, view, now_s)

        def forced_shrink() -> Outcome | str:
            return self._choose.shrink(w, inst, view, now_s, forced=True)

        if self._governed(w):
            return self._on_deadline_revocation(notice, inst, w, view, now_s, cp, lost_work)
        slack = self._choose.slack(w, tally.work_per_hour + lost_work, now_s, inst.pool_key)
        tight = slack is not None and slack[0] < slack[1]
        refusals: list[str] = []
        if tight and slack is not None:
            refusals.append(f"deadline slack {slack[0]:.1f} h is under its {slack[1]:.1f} h margin")
        wc = w.workload_class
        steps: list[tuple[str, Callable[[], Outcome | str]]]
        if wc is WorkloadClass.SERVING:
            steps = [("replace", replace), ("break-glass", glass)]
        elif tight:
            steps = [("break-glass", glass), ("replace", replace)]
        elif wc is WorkloadClass.TRAINING:
            # On-demand when the deadline requires it, otherwise shrink
            # (docs/concepts/tiers.md): a shrink the dwell held back is taken
            # after all before breaking glass, unless it would put the deadline
            # at risk (its slack check refuses it, and break-glass follows).
            steps = [
                ("shrink", shrink),
                ("replace", replace),
                ("shrink within the dwell", forced_shrink),
                ("break-glass", glass),
            ]
        else:
            cap = self._choose.batch_price_cap(w, inst)
            steps = [("replace", lambda: replace(cap))]
        for name, step in steps:
            out = step()
            if not isinstance(out, str):
                if refusals:
                    reason = f"{out.reason} ({'; '.join(refusals)})"
                    out = dataclasses.replace(out, reason=reason)
                return self._decision(notice, out, w.name, inst, cp)
            refusals.append(f"no {name}: {out}")
        why = "; ".join(refusals)
        if wc is WorkloadClass.SERVING:
            size = round(tally.units)
            reason = f"{w.name} keeps {size} units, its spot hedge smaller, base intact ({why})"
            out = Outcome(DecisionKind.SHRINK, reason, new_size=size)
        elif wc is WorkloadClass.BATCH and not tight:
            reason = f"batch waits for a better market, restart-tolerant ({why})"
            out = Outcome(DecisionKind.CHECKPOINT_ONLY, reason)
        else:
            reason = f"{inst.units} units left unmet until the reconciler can act ({why})"
            out = Outcome(DecisionKind.CHECKPOINT_ONLY, reason)
        return self._decision(notice, out, w.name, inst, cp)

    # --- the deadline rule (broker.lifecycle.deadline) ------------------------------

    def _allowed_pools(self, w: Workload) -> list[PoolSnapshot]:
        """The market's pools in a provider and region ``w``'s allow-lists
        admit: an upgrade is a replacement and goes nowhere else."""
        return [
            p
            for p in self._choose.costs.pools.values()
            if w.allows(p.pool.provider.value, p.pool.region)
        ]

    def _retired_running(
        self, view: FleetView, workload: str, itype: str | None, first_pool: str
    ) -> list[Instance]:
        """On-demand of ``workload`` (of ``itype`` if given) that a return to
        spot retired and that still runs, ``first_pool``'s first."""
        kept = [
            inst
            for inst in view.by_id.values()
            if inst.workload == workload
            and inst.tier is Tier.ON_DEMAND
            and self._handled.get(inst.instance_id, "").endswith(_RETIRED)
            and (itype is None or PoolKey.parse(inst.pool_key).instance_type == itype)
        ]
        kept.sort(key=lambda i: i.pool_key != first_pool)
        return kept

    def _take_back(
        self, nid: str, w: Workload, inst: Instance, lost_work: float, view: FleetView, now_s: float
    ) -> Outcome | str:
        """Serving spot lost while on-demand a return to spot retired still
        runs: break glass onto that on-demand, not onto a launch.

        A serving return keeps the on-demand it retires until its spot is
        ready (make before break). When that spot, or other spot of the
        workload, is revoked meanwhile, the retired on-demand is ready and
        serving; a break-glass launch beside it would be ready only a cold
        start later (after a 2-minute notice has run out) and would cost its
        on-demand price until reconcile ends the surplus. So the stretch
        takes the running on-demand back, of one pool (the lost pool's
        first) and as many instances as the lost work needs; a later return
        retires them again (``Stretch.kept``)."""
        retired = self._retired_running(view, w.name, None, inst.pool_key)
        if not retired:
            return "no on-demand a return retired still runs"
        pool = retired[0].pool_key
        same_pool = [i for i in retired if i.pool_key == pool]
        out = self._choose.take_back(nid, w, inst.pool_key, same_pool, lost_work, view, now_s)
        if not isinstance(out, str):
            for iid in out.kept_instance_ids:
                self._handled.pop(iid, None)  # serving again, counted in the tallies
        return out

    def _serving_in_stead(self, view: FleetView, s: Stretch) -> tuple[str, ...]:
        """The on-demand a serving stretch's return retires when its own is
        gone: on-demand of the same workload and instance type (its own pool
        first) that an earlier return retired and that still runs.

        Reconcile ends the newest surplus of a slot first. When a return's
        spot is revoked while it warms up, the ready on-demand that return
        kept (make before break) is still running, and the break-glass
        on-demand the notice launches beside it is the surplus: it ends and
        the older on-demand serves in the stretch's stead. (Never on-demand
        no return retired: a re-plan's own base is not the stretch's.)
        Retiring nothing, the return launched no spot and reported nothing ended, so the
        stretch's break-glass count kept the workload on on-demand until the
        next plan (fleet bench, seed 1: an hour at a time, with spot back in
        every zone). A serving return ends nothing itself (``after_ready``:
        reconcile ends the surplus once the spot is ready), so what it
        reports only moves counts, which ``broker.daemon.book.decision_deltas``
        never takes below what the plan and the decisions since hold."""
        itype = PoolKey.parse(s.pool_key).instance_type
        kept = self._retired_running(view, s.workload, itype, s.pool_key)  # its own pool first
        # out of the view's tallies already: handled instances are built out
        return tuple(i.instance_id for i in kept[: s.count])

    def _governed(self, w: Workload) -> bool:
        """The deadline rule decides for ``w`` (``broker.lifecycle.tiers``)."""
        return DeadlineJobs.applies(w) and w.name in self._choose.progress

    def _spot_now(self, pool_key: str, now_s: float) -> bool:
        """Spot can be held in ``pool_key`` now, as far as the daemon knows:
        the snapshot offers it and no launch there was refused within the
        unavailable-offerings TTL."""
        p = self._choose.pool(pool_key)
        return (
            p is not None
            and p.spot_usd_per_hour is not None
            and p.spot_available
            and not self._guards.unavailable.is_unavailable(pool_key, Tier.SPOT, now_s)
        )

    def _look(self, w: Workload, pool_key: str, work_per_hour: float, now_s: float) -> bool:
        """Watch ``pool_key`` for ``w`` now; whether spot is there."""
        available = self._spot_now(pool_key, now_s)
        if work_per_hour <= 0 and w.max_units is not None:
            work_per_hour = w.max_units * max(w.throughput.values(), default=1.0)
        # The job's memory first: it starts from the spells watched before now.
        self._deadline.observe(
            w, pool_key, work_per_hour, available, now_s, self._choose.pool(pool_key)
        )
        self._deadline.watch(pool_key, available, now_s)
        return available

    def _tier(self, w: Workload, pool_key: str, mode: Mode, available: bool, now_s: float) -> Mode:
        """The deadline rule's tier for ``w`` (``IDLE`` when it cannot tell:
        the manager then does what it would without the rule: wait)."""
        p = self._choose.pool(pool_key)
        spot = None if p is None else p.spot_usd_per_hour
        k = p.on_demand_usd_per_hour / spot if p is not None and spot else 3.0
        choice = self._deadline.decide(
            w,
            mode=mode,
            available=available,
            elapsed_hours=(now_s - self._horizon_s) / 3600.0,
            done_unit_hours=self._choose.progress.get(w.name, 0.0),
            price_ratio=k,
        )
        return Mode.IDLE if choice is None else choice

    @staticmethod
    def _mode_of(view: FleetView, w: Workload) -> Mode:
        t = view.tally(w.name)
        if t.units - t.spot_units > 1e-9:
            return Mode.ON_DEMAND
        return Mode.SPOT if t.spot_units > 1e-9 else Mode.IDLE

    def _on_deadline_revocation(
        self,
        notice: Notice,
        inst: Instance,
        w: Workload,
        view: FleetView,
        now_s: float,
        cp: CheckpointVerdict,
        lost_work: float,
    ) -> Decision:
        """A governed job lost spot: shrink (elastic training) or replace as
        for any job; failing both, break glass only if the deadline rule
        says on-demand now, else wait (checkpoint only)."""
        nid = notice.notice_id
        refusals: list[str] = []
        if w.workload_class is WorkloadClass.TRAINING:
            out = self._choose.shrink(w, inst, view, now_s)
            if not isinstance(out, str):
                return self._decision(notice, out, w.name, inst, cp)
            refusals.append(f"no shrink: {out}")
        cap = (
            self._choose.batch_price_cap(w, inst)
            if w.workload_class is WorkloadClass.BATCH
            else None
        )
        out = self._choose.replace(nid, w, inst, lost_work, view, now_s, cap)
        if not isinstance(out, str):
            return self._decision(notice, out, w.name, inst, cp)
        refusals.append(f"no replace: {out}")
        work = view.tally(w.name).work_per_hour + lost_work
        self._look(w, inst.pool_key, work, now_s)
        mode = self._tier(w, inst.pool_key, self._mode_of(view, w), False, now_s)
        if mode is Mode.ON_DEMAND:
            out = self._choose.break_glass(nid, w, inst, lost_work, view, now_s)
            if not isinstance(out, str):
                reason = f"{out.reason} (the deadline rule: on-demand now; {'; '.join(refusals)})"
                out = dataclasses.replace(out, reason=reason)
                return self._decision(notice, out, w.name, inst, cp)
            refusals.append(f"no break-glass: {out}")
            why = "the deadline rule asks for on-demand, but " + "; ".join(refusals)
        else:
            why = "the deadline rule waits for spot (on schedule for its target); " + "; ".join(
                refusals
            )
        return self._decision(notice, Outcome(DecisionKind.CHECKPOINT_ONLY, why), w.name, inst, cp)

    def _deadline_step(
        self, s: Stretch, w: Workload, view: FleetView, now_s: float
    ) -> tuple[Step | None, tuple[Candidate, int] | None]:
        """A governed job's stretch: the deadline rule says back to spot,
        stay on on-demand (extended within the cap when due) or end."""
        available = self._look(w, s.pool_key, s.work_per_hour, now_s)
        mode = self._tier(w, s.pool_key, Mode.ON_DEMAND, available, now_s)
        found: tuple[Candidate, int, bool] | str
        own = self._choose.candidates(w).by_pool.get(s.pool_key)
        if available and own is not None:
            # The job's own pool while the market has spot there: the rule's
            # watch of its spells stands in for the pool breaker and the
            # 7-day share (a rarely-held pool is still worth its spells).
            found = (own, own.instances_for(s.work_per_hour), False)
        else:
            found = self._choose.find_spot(
                w, s.work_per_hour, view, now_s, PoolKey.parse(s.pool_key).instance_type,
                from_pool=s.pool_key,  # a gang's return stays in its placement
            )  # fmt: skip
        target = None if isinstance(found, str) else found[:2]
        if mode is Mode.IDLE:
            return self._book.close(
                s, ReturnKind.END, "the deadline rule: wait for spot", now_s
            ), None
        if mode is Mode.SPOT and target is not None:
            step = self._book.close(
                s, ReturnKind.RETURN_TO_SPOT, "the deadline rule: back to spot", now_s
            )
            return step, target
        why = (
            "the deadline rule keeps on-demand"
            if mode is Mode.ON_DEMAND
            else f"the deadline rule would go back to spot, but {found}"
        )
        return self._book.keep(s, target, why, now_s), target

    def _deadline_opens(self, view: FleetView, now_s: float, now_dt: datetime) -> list[SpotReturn]:
        """Governed jobs holding nothing: watch their pool; where the rule
        says on-demand (behind its target, or the safety net), open a
        break-glass stretch for the job's rate within the cap."""
        out: list[SpotReturn] = []
        busy = {s.workload for s in self._book.stretches.values()}
        for w in self._workloads.values():
            if not self._governed(w):
                continue
            t = view.tally(w.name)
            pool = self._job_pool(w, view)
            if pool is None:
                continue
            available = self._look(w, pool, t.work_per_hour, now_s)
            if w.name in busy or t.units > 1e-9:
                continue
            rate = self._deadline.rate_of(w.name)
            if rate is None or rate <= 0:
                continue
            if self._tier(w, pool, Mode.IDLE, available, now_s) is not Mode.ON_DEMAND:
                continue
            nid = f"{w.name}:deadline:{self._opened}"
            got = self._choose.open_on_demand(nid, w, pool, rate, view, now_s)
            if isinstance(got, str):
                continue  # the cap or capacity says no: the job waits (tried again next tick)
            self._opened += 1
            out.append(
                SpotReturn(
                    action_id=f"{nid}:{ReturnKind.OPEN_ON_DEMAND.value}:0",
                    allocation_id=nid,
                    kind=ReturnKind.OPEN_ON_DEMAND,
                    workload=w.name,
                    launches=got.launches,
                    terminate_instance_ids=(),
                    reason=f"the deadline rule: on-demand while waiting for spot; {got.reason}",
                    decided_at=now_dt,
                    break_glass_usd_committed=got.usd,
                )
            )
        return out

    def _job_pool(self, w: Workload, view: FleetView) -> str | None:
        """The pool a governed job runs in: where its spot is now, else where
        it last ran, else its best-ranked pool."""
        t = view.tally(w.name)
        for pool, units in t.spot_by_pool.items():
            if units > 1e-9:
                return pool
        known = self._deadline.pool_of(w.name)
        if known is not None:
            return known
        cands = self._choose.candidates(w)
        ranked = cands.spot or cands.on_demand
        return ranked[0].pool_key if ranked else None

    def _view_for(self, fleet: Sequence[Instance], now_s: float) -> FleetView:
        v = self._view
        if v is not None and v.same_source(fleet):
            v.expire(now_s)
            return v
        v = FleetView.build(fleet, self._workloads, self._handled.keys(), self._pending, now_s)
        # Forget handled instances the fleet no longer lists: bounded memory.
        self._handled = {i: n for i, n in self._handled.items() if i in v.by_id}
        self._view = v
        return v

    def _ignore(self, notice: Notice, reason: str, w: Workload | None = None) -> Decision:
        name = None if w is None else w.name
        return self._decision(notice, Outcome(DecisionKind.IGNORE, reason), name)

    def _decision(
        self,
        notice: Notice,
        out: Outcome,
        workload: str | None,
        inst: Instance | None = None,
        cp: CheckpointVerdict | None = None,
        *,
        lbt: bool = False,
    ) -> Decision:
        decided_at = self._clock.now()
        return Decision(
            notice_id=notice.notice_id,
            notice_kind=notice.kind.value,
            kind=out.kind,
            workload=workload,
            lost_instance_id=notice.instance_id,
            lost_units=0 if inst is None else inst.units,
            launches=out.launches,
            new_size=out.new_size,
            reason=out.reason,
            decided_at=decided_at,
            latency_s=max(0.0, (decided_at - notice.at).total_seconds()),
            checkpoint=cp,
            break_glass_usd_committed=out.usd,
            launch_before_terminate=lbt,
            kept=out.kept,
            kept_instance_ids=out.kept_instance_ids,
        )

    # --- break-glass upkeep --------------------------------------------------------

    def upkeep_due_at(self) -> datetime | None:
        """When ``tick`` must next run so that no stretch outlives its
        committed dollars: ``return_lead_s`` before the earliest expiry
        (``None`` with no stretch open). Returns to spot are opportunistic and
        need no deadline; an extension or an end does."""
        due = self._book.next_due_s()
        return None if due is None else datetime.fromtimestamp(due, UTC)

    def tick(
        self, now: datetime | None, fleet: Sequence[Instance], snapshot: MarketSnapshot
    ) -> tuple[SpotReturn, ...]:
        """Return calm break-glass capacity to spot, extend or end stretches
        within the cap (see ``broker.lifecycle.stretches``). Call it every few
        seconds to a minute: more often than ``return_lead_s``."""
        now_dt = ensure_utc(now) if now is not None else self._clock.now()
        now_s = now_dt.timestamp()
        self._rebalance.expire(now_s)
        self.on_market(snapshot)
        view = self._view_for(fleet, now_s)
        out: list[SpotReturn] = []
        for s in sorted(self._book.stretches.values(), key=lambda x: x.started_s):
            w = self._workloads.get(s.workload)
            if w is None:
                continue
            if self._governed(w):
                step, target = self._deadline_step(s, w, view, now_s)
            else:
                found = self._choose.find_spot(
                    w, s.work_per_hour, view, now_s, PoolKey.parse(s.pool_key).instance_type,
                    from_pool=s.pool_key,  # a gang's return stays in its placement
                )  # fmt: skip
                target = None if isinstance(found, str) else found[:2]
                step = self._book.step(s, w, target, found if isinstance(found, str) else "", now_s)
            if step is None:
                continue
            s.steps += 1
            launches: tuple[LaunchIntent, ...] = ()
            ids: tuple[str, ...] = ()
            if step.kind is not ReturnKind.EXTEND:
                ids = view.retire(
                    s.workload, s.pool_key, s.count, s.started_s, self._handled,
                    newest_first=overlap_s(w) > 0,  # reconcile ends them: the newest first
                )  # fmt: skip
                if len(ids) < s.count and s.kept:  # the on-demand it took back
                    ids += view.retire_ids(s.kept, s.count - len(ids), self._handled)
                if not ids and step.kind is ReturnKind.RETURN_TO_SPOT and overlap_s(w) > 0:
                    ids = self._serving_in_stead(view, s)
                for iid in ids:
                    self._handled[iid] = f"{s.alloc_id}{_RETIRED}"
                view.drop_pending(s.alloc_id, s.pool_key)
            if step.kind is ReturnKind.RETURN_TO_SPOT and target is not None and ids:
                c, n = target
                # Replace only the on-demand still there: a re-plan may have
                # ended some of it (its count is the plan's again), and spot
                # for what is gone would run on top of the plan.
                n = min(n, math.ceil(n * len(ids) / max(s.count, 1)))
                self._choose.launch(f"{s.alloc_id}:return", w, c, Tier.SPOT, n, view, now_s)
                launches = (LaunchIntent(c.pool_key, Tier.SPOT, n),)
            out.append(
                SpotReturn(
                    action_id=f"{s.alloc_id}:{step.kind.value}:{s.steps}",
                    allocation_id=s.alloc_id,
                    kind=step.kind,
                    workload=s.workload,
                    launches=launches,
                    terminate_instance_ids=ids,
                    reason=step.reason,
                    decided_at=now_dt,
                    break_glass_usd_committed=step.committed_usd,
                    break_glass_usd_spent=step.spent_usd,
                    break_glass_usd_released=step.released_usd,
                    after_ready=bool(launches) and overlap_s(w) > 0,
                )
            )
        if any(self._governed(w) for w in self._workloads.values()):
            out.extend(self._deadline_opens(view, now_s, now_dt))
        return tuple(out)
