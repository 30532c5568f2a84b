"""``LifecycleManager``: one decision per notice, and break-glass upkeep.

Owns the manager's state (breakers, churn budget, rebalance record, resize
times, decided notices, launches not yet seen in the fleet, break-glass
stretches) and the order in which each workload class tries the choices of
``broker.lifecycle.choices`` (see the package docstring for the rules).

Must not: call a provider, run a checkpoint hook, persist, or solve a plan.
Pure and deterministic given the clock, the notices, fleets and snapshots.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from broker.lifecycle.choices import Guards, checkpoint_verdict
from broker.lifecycle.chooser import Chooser, Outcome
from broker.lifecycle.fallback import UnavailableOfferings, instead
from broker.lifecycle.stretches import BreakGlassBook, stretch_from_record, stretch_record
from broker.lifecycle.values import (
    CheckpointVerdict,
    Decision,
    DecisionKind,
    LaunchIntent,
    LifecycleConfig,
    ReturnKind,
    SpotReturn,
)
from broker.lifecycle.view import FleetView, Pending
from markets.clock import Clock, ensure_utc
from markets.fleet import Instance, Notice, NoticeKind
from markets.keys import PoolKey
from markets.model import MarketSnapshot, Tier
from policies.breakglass import ChurnBudget, CircuitBreakers, RebalancePrecision
from policies.cost_table import CostTable
from policies.workloads.spec import Workload, WorkloadClass, WorkloadSet

__all__ = ["LifecycleManager"]

_REVOCATIONS = (NoticeKind.INTERRUPTION, NoticeKind.PREEMPTED)


class LifecycleManager:
    """Decides what to do about each notice (``handle``) and about break-glass
    capacity over time (``tick``). See the package docstring."""

    def __init__(
        self, workloads: WorkloadSet, clock: Clock, config: LifecycleConfig | None = None
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
            churn=ChurnBudget(cfg.churn_window_s, cfg.churn_max_share, cfg.churn_floor_units),
        )
        self._book = BreakGlassBook(workloads.break_glass_cap_usd, cfg)
        self._rebalance = RebalancePrecision(
            cfg.rebalance_window_s, cfg.rebalance_min_samples, cfg.rebalance_min_precision
        )
        self._choose = Chooser(workloads, cfg, self._guards, self._book, self._horizon_s)
        self._decisions: OrderedDict[str, Decision] = OrderedDict()
        self._handled: dict[str, str] = {}  # instance id -> the notice that decided for it
        self._pending: list[Pending] = []
        self._view: FleetView | None = None

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

    def record_resize(self, workload: str, at: datetime | None = None) -> None:
        """A resize made elsewhere (by the plan) starts the dwell too."""
        self._choose.last_resize[workload] = ensure_utc(at or self._clock.now()).timestamp()

    def set_horizon_start(self, at: datetime) -> None:
        """The plan epoch (``deadline_hours`` count from here), once the daemon
        knows it: from its config, its store, or its first plan."""
        self._horizon_s = ensure_utc(at).timestamp()
        self._choose.horizon_s = self._horizon_s

    def withdraw(self, notice_id: str) -> None:
        """The daemon refused ``notice_id``'s decision (its own budget or cap
        guard): forget its launches and release any stretch it opened."""
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
            self._book.stretches[s.alloc_id] = s

    def seed_rebalance_history(self, pool_key: str, hits: int, resolved: int) -> None:
        """Recorded rebalance outcomes of a pool (from the store, after a restart)."""
        self._rebalance.seed(pool_key, hits, resolved)

    # --- what the daemon reads -----------------------------------------------------

    @property
    def unavailable(self) -> UnavailableOfferings:
        """The one book of pools that refused capacity (the daemon marks and
        reads this same object)."""
        return self._guards.unavailable

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
        (``None``: no pool is left, or no snapshot yet). Ranked on the cost
        table of the snapshot last handed to ``on_market``."""
        w = self._workloads.get(workload)
        if w is None or not self._choose.has_market:
            return None
        cands = self._choose.candidates(w)
        itype = PoolKey.parse(failed_pool).instance_type
        lost = cands.by_pool.get(failed_pool)
        per_instance = (
            lost.work_per_instance
            if lost is not None
            else self._choose.units(failed_pool) * w.throughput_of(itype)
        )
        now_s = ensure_utc(now or self._clock.now()).timestamp()
        found = instead(
            cands,
            self._guards,
            tier,
            count * per_instance,
            now_s=now_s,
            same_type=self._choose.same_type(w, itype),
            tried=tried,
        )
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
        hits, resolved = self._rebalance.counts(inst.pool_key)
        record = (
            f"{hits} of {resolved} rebalances in {inst.pool_key} were followed by an "
            f"interruption within {cfg.rebalance_window_s / 60:.0f} min"
        )
        if not self._rebalance.predictive(inst.pool_key):
            need = f"acting needs {cfg.rebalance_min_samples} and {cfg.rebalance_min_precision:.0%}"
            return self._ignore(notice, f"rebalance recommendation ignored: {record} ({need})", w)
        view.remove(inst)
        lost_work = inst.units * view.throughput(w.name, PoolKey.parse(inst.pool_key).instance_type)
        out = self._choose.replace(notice.notice_id, w, inst, lost_work, view, now_s)
        if isinstance(out, str):
            view.restore(inst)
            return self._ignore(notice, f"rebalance: {record}, but {out}; awaiting a notice", w)
        self._handled[inst.instance_id] = notice.notice_id
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
            return self._choose.break_glass(nid, w, inst, lost_work, view, now_s)

        def shrink() -> Outcome | str:
            return self._choose.shrink(w, inst, view, now_s)

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
            steps = [("shrink", shrink), ("replace", replace), ("break-glass", glass)]
        else:
            cap = self._choose.batch_price_cap(w, inst)
            steps = [("replace", lambda: replace(cap))]
        for name, step in steps:
            out = step()
            if not isinstance(out, str):
                if refusals:
                    reason = f"{out.reason} ({'; '.join(refusals)})"
                    out = Outcome(out.kind, reason, out.launches, out.new_size, out.usd)
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
            found = self._choose.find_spot(
                w, s.work_per_hour, view, now_s, PoolKey.parse(s.pool_key).instance_type
            )
            target = None if isinstance(found, str) else found[:2]
            step = self._book.step(s, w, target, found if isinstance(found, str) else "", now_s)
            if step is None:
                continue
            s.steps += 1
            launches: tuple[LaunchIntent, ...] = ()
            ids: tuple[str, ...] = ()
            if step.kind is not ReturnKind.EXTEND:
                ids = view.retire(s.workload, s.pool_key, s.count, s.started_s, self._handled)
                for iid in ids:
                    self._handled[iid] = f"{s.alloc_id}:retired"
                view.drop_pending(s.alloc_id, s.pool_key)
            if step.kind is ReturnKind.RETURN_TO_SPOT and target is not None:
                c, n = target
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
                )
            )
        return tuple(out)
