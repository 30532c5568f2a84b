"""Break-glass stretches between the lifecycle manager and the store.

Owns: ``StretchJob``: ``restore`` (after a restart, hand the lifecycle the
store's break-glass total and the stretches still open), ``upkeep`` (ask the
lifecycle's ``tick`` what to return to spot, extend or end, record each
decision, then launch and terminate for it) and ``record_cancelled`` (a
break-glass launch that found no capacity released its dollars).

The store's break-glass total is the lifecycle's ledger, written down: each
decision adds what it committed (``Decision.break_glass_usd_committed``) and
each return its net change (``SpotReturn.break_glass_usd_delta``: committed
minus released), so the sum is what ``LifecycleManager.break_glass_committed_usd``
says, and a restart restores it exactly. Each of these decisions also stores
its stretch's state (``payload["stretch"]``, ``None`` once closed): the last
one per stretch says whether it was open, and how, when the daemon stopped.

Must not: decide anything (the lifecycle does), or talk to the provider
except through the executor and the launcher.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime

from broker.daemon.executor import Executor, kv
from broker.daemon.launch import Launcher
from broker.daemon.lifecycle import Lifecycle
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.store import DecisionRecord, Store
from broker.daemon.store.tx import Json
from broker.lifecycle import SpotReturn
from markets.clock import Clock
from markets.cloud_fleet import Instance, LaunchRequest, TerminateRequest
from markets.keys import notice_key, terminate_key
from markets.model import MarketSnapshot

__all__ = ["STRETCH_KINDS", "StretchJob"]

log = logging.getLogger("spotfolio.daemon")
# Decisions whose payload carries a break-glass stretch's state ("stretch").
STRETCH_KINDS = (
    "break_glass",
    "break_glass_cancel",
    "open_on_demand",
    "return_to_spot",
    "extend",
    "end",
)


class StretchJob:
    """The daemon's side of break-glass stretches (module docstring)."""

    def __init__(
        self,
        lifecycle: Lifecycle,
        store: Store,
        executor: Executor,
        launcher: Launcher,
        clock: Clock,
        metrics: DaemonMetrics,
        *,
        owner: str,
        dry_run: bool = False,
    ) -> None:
        self._lifecycle = lifecycle
        self._store = store
        self._executor = executor
        self._launcher = launcher
        self._clock = clock
        self._metrics = metrics
        self._owner = owner
        self._dry_run = dry_run

    def restore(self) -> None:
        """Hand the lifecycle the store's break-glass total and the stretches
        still open at the last decision about each (module docstring)."""
        with self._store.transaction() as tx:
            total = tx.break_glass_usd(self._owner)
            history = tx.decisions(self._owner, kinds=STRETCH_KINDS)
        last: dict[str, Json | None] = {}
        for rec in history:
            alloc = rec.payload.get("allocation_id") or rec.notice_id
            if alloc and "stretch" in rec.payload:
                last[alloc] = rec.payload["stretch"]
        still_open = [s for s in last.values() if s is not None]
        self._lifecycle.restore_break_glass(max(0.0, total), still_open)
        log.info(kv("break_glass_restored", usd=f"{total:.2f}", open_stretches=len(still_open)))

    def record_cancelled(self, notice_id: str, workload: str | None, before: Json) -> None:
        """The stretch ``notice_id`` opened was cancelled (its launch found no
        capacity): the store releases what it had committed, as the lifecycle did."""
        usd = float(before.get("open_usd", 0.0))
        self._record(
            DecisionRecord(
                None,
                "break_glass_cancel",
                workload,
                f"break-glass launch for {notice_id} found no capacity: ${usd:,.2f} released",
                0.0,
                -usd,
                {"kind": "break_glass_cancel", "allocation_id": notice_id, "stretch": None},
                self._clock.now(),
            )
        )

    def upkeep(
        self,
        now: datetime,
        fleet: Sequence[Instance],
        snapshot: MarketSnapshot,
        generation: int,
    ) -> int:
        """The lifecycle's break-glass upkeep over ``fleet``, carried out;
        returns how many of its decisions were (the fleet changed if any)."""
        returns = self._lifecycle.tick(now, fleet, snapshot)
        by_id = {i.instance_id: i for i in fleet}
        for ret in returns:
            self._apply(ret, by_id, generation)
        return len(returns)

    def _apply(self, ret: SpotReturn, by_id: Mapping[str, Instance], generation: int) -> None:
        """One ``tick`` decision: record it (with its net break-glass dollars
        and its stretch's state), then launch, then terminate."""
        nid = f"tick:{ret.action_id}"
        kind = ret.kind.value
        launches = [
            {
                "pool_key": x.pool_key,
                "tier": x.tier.value,
                "count": int(x.count),
                "workload": ret.workload,
            }
            for x in ret.launches
        ]
        ended = [
            [by_id[i].workload, by_id[i].pool_key, by_id[i].tier.value]
            for i in ret.terminate_instance_ids
            if i in by_id
        ]
        payload: Json = {
            "kind": kind,
            "launches": launches,
            "ended_slots": ended,
            "reason": ret.reason,
            "allocation_id": ret.allocation_id,
            "stretch": self._lifecycle.stretch_state(ret.allocation_id),
            "break_glass_usd_committed": round(ret.break_glass_usd_committed, 6),
            "break_glass_usd_spent": round(ret.break_glass_usd_spent, 6),
            "break_glass_usd_released": round(ret.break_glass_usd_released, 6),
        }
        # The net change (committed - released), not the commitment alone:
        # the store's sum must fall when a stretch ends under its estimate.
        delta = float(ret.break_glass_usd_delta)
        self._record(
            DecisionRecord(
                nid, kind, ret.workload, ret.reason, 0.0, delta, payload, self._clock.now()
            )
        )
        self._metrics.decisions.labels(kind).inc()
        if ret.break_glass_usd_committed > 0:
            self._metrics.break_glass_usd.inc(ret.break_glass_usd_committed)
        for i, x in enumerate(ret.launches):
            req = LaunchRequest(
                idempotency_key=notice_key(nid, i),
                pool_key=x.pool_key,
                tier=x.tier,
                workload=ret.workload,
                count=int(x.count),
                owner=self._owner,
                plan_generation=generation,
            )
            self._launcher.launch(req, context={"source": "tick", "action_id": ret.action_id})
        ids = tuple(sorted(i for i in ret.terminate_instance_ids if i in by_id))
        if ids and not ret.after_ready:  # else reconcile ends them once the spot is ready
            self._executor.run(
                TerminateRequest(
                    idempotency_key=terminate_key(self._owner, ids),
                    instance_ids=ids,
                    owner=self._owner,
                    reason=f"lifecycle {ret.action_id}: {ret.reason}",
                )
            )
        log.info(
            kv(
                "spot_return",
                action=ret.action_id,
                kind=kind,
                workload=ret.workload,
                break_glass_usd_delta=f"{delta:.2f}",
                reason=ret.reason,
            )
        )

    def _record(self, record: DecisionRecord) -> None:
        """A decision of the daemon's own (no notice id)."""
        if not self._dry_run:
            with self._store.transaction() as tx:
                tx.record_decision(self._owner, record)
