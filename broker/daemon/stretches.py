"""What the daemon does for the lifecycle manager besides asking it about notices.

Owns: ``restore_lifecycle`` (after a restart, hand back the store's
break-glass total and the stretches still open), ``apply_returns`` (carry out
``tick``'s return-to-spot / extend / end decisions and record them),
``record_cancelled_stretch`` (a break-glass launch that found no capacity
released its dollars) and ``HookCalls`` (checkpoint hooks at notice time).

The store's break-glass total is the lifecycle's ledger, written down: each
decision adds what it committed (``Decision.break_glass_usd_committed``) and
each return its net change (``SpotReturn.break_glass_usd_delta``: committed
minus released), so the sum is what ``LifecycleManager.break_glass_committed_usd``
says, and a restart restores it exactly. Each of these decisions also stores
its stretch's state (``payload["stretch"]``, ``None`` once closed): the last
one per stretch says whether it was open, and how, when the daemon stopped.

Checkpoint hooks run on a ``HookRunner`` thread (bounded by what is left of
the notice window): ``HookCalls.call`` returns at once, and the results are
written to the store (``hook_results``) by the daemon's own thread at its
next poll, reconcile or stop, so the store is never written from two threads.

Must not: decide anything (the lifecycle does), or talk to the provider
except through the daemon's executor.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from broker.daemon.executor import kv
from broker.daemon.hooks import HookResult, HookRunner
from broker.daemon.store.store import DecisionRecord
from broker.planning.reconcile import terminate_key
from markets.fleet import LaunchRequest, Notice, TerminateRequest
from markets.model import Tier

if TYPE_CHECKING:
    from broker.daemon.daemon import Daemon

__all__ = [
    "STRETCH_KINDS",
    "HookCalls",
    "apply_returns",
    "record_cancelled_stretch",
    "restore_lifecycle",
]

log = logging.getLogger("spotfolio.daemon")
# Decisions whose payload carries a break-glass stretch's state ("stretch").
STRETCH_KINDS = ("break_glass", "break_glass_cancel", "return_to_spot", "extend", "end")


def _kind(x: Any) -> str:
    k = x.kind
    return str(getattr(k, "value", k))


def restore_lifecycle(d: Daemon) -> None:
    """Hand the lifecycle the store's break-glass total and the stretches
    still open at the last decision about each (module docstring)."""
    restore = getattr(d.lifecycle, "restore_break_glass", None)
    if restore is None:
        return
    with d.store.transaction() as tx:
        total = tx.break_glass_usd(d.owner)
        history = tx.decisions(d.owner, kinds=STRETCH_KINDS)
    last: dict[str, dict[str, Any] | None] = {}
    for rec in history:
        alloc = rec.payload.get("allocation_id") or rec.notice_id
        if alloc and "stretch" in rec.payload:
            last[alloc] = rec.payload["stretch"]
    still_open = [s for s in last.values() if s is not None]
    restore(max(0.0, total), still_open)
    log.info(kv("break_glass_restored", usd=f"{total:.2f}", open_stretches=len(still_open)))


def stretch_state(d: Daemon, alloc_id: str) -> dict[str, Any] | None:
    get = getattr(d.lifecycle, "stretch_state", None)
    return None if get is None else get(alloc_id)


def record_cancelled_stretch(
    d: Daemon, notice_id: str, workload: str | None, before: dict[str, Any]
) -> None:
    """The stretch ``notice_id`` opened was cancelled (its launch found no
    capacity): the store releases what it had committed, as the lifecycle did."""
    usd = float(before.get("open_usd", 0.0))
    d.record_own_decision(
        DecisionRecord(
            None,
            "break_glass_cancel",
            workload,
            f"break-glass launch for {notice_id} found no capacity: ${usd:,.2f} released",
            0.0,
            -usd,
            {"kind": "break_glass_cancel", "allocation_id": notice_id, "stretch": None},
            d.clock.now(),
        )
    )


def apply_returns(d: Daemon, returns: Sequence[Any]) -> None:
    """Carry out ``tick``'s decisions: record each (with its net break-glass
    dollars and its stretch's state), then launch, then terminate."""
    from broker.daemon.notices import notice_key  # it imports this module

    by_id = {i.instance_id: i for i in d.book.last_fleet}
    for ret in returns:
        nid = f"tick:{ret.action_id}"
        launches = [
            {
                "pool_key": x.pool_key,
                "tier": Tier(x.tier).value,
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
        payload = {
            "kind": _kind(ret),
            "launches": launches,
            "ended_slots": ended,
            "reason": ret.reason,
            "allocation_id": ret.allocation_id,
            "stretch": stretch_state(d, ret.allocation_id),
            "break_glass_usd_committed": round(ret.break_glass_usd_committed, 6),
            "break_glass_usd_spent": round(ret.break_glass_usd_spent, 6),
            "break_glass_usd_released": round(ret.break_glass_usd_released, 6),
        }
        # The net change (committed - released), not the commitment alone:
        # the store's sum must fall when a stretch ends under its estimate.
        delta = float(ret.break_glass_usd_delta)
        d.record_own_decision(
            DecisionRecord(
                nid, _kind(ret), ret.workload, ret.reason, 0.0, delta, payload, d.clock.now()
            )
        )
        d.metrics.decisions.labels(_kind(ret)).inc()
        if ret.break_glass_usd_committed > 0:
            d.metrics.break_glass_usd.inc(ret.break_glass_usd_committed)
        for i, x in enumerate(launches):
            req = LaunchRequest(
                idempotency_key=notice_key(nid, i),
                pool_key=x["pool_key"],
                tier=Tier(x["tier"]),
                workload=ret.workload,
                count=x["count"],
                owner=d.owner,
                plan_generation=d.state.generation,
            )
            d.launch(req, context={"source": "tick", "action_id": ret.action_id})
        ids = tuple(sorted(i for i in ret.terminate_instance_ids if i in by_id))
        if ids:
            d.executor.run(
                TerminateRequest(
                    idempotency_key=terminate_key(d.owner, ids),
                    instance_ids=ids,
                    owner=d.owner,
                    reason=f"lifecycle {ret.action_id}: {ret.reason}",
                )
            )
        log.info(
            kv(
                "spot_return",
                action=ret.action_id,
                kind=_kind(ret),
                workload=ret.workload,
                break_glass_usd_delta=f"{delta:.2f}",
                reason=ret.reason,
            )
        )


class HookCalls:
    """Checkpoint hooks started at notice time, and their results stored later."""

    def __init__(self, d: Daemon, runner: HookRunner | None = None) -> None:
        self._d = d
        self._runner = runner
        # (notice id, workload, result) put by hook threads, taken by the daemon's.
        self._done: queue.SimpleQueue[tuple[str, str, HookResult]] = queue.SimpleQueue()
        self.in_flight = 0
        self.started = 0

    def call(self, notice: Notice, decision: Any) -> bool:
        """Start the decision's workload's hook, if configured, for a
        revocation (the lifecycle gave it a ``CheckpointVerdict``); returns at
        once. Its budget is what the lifecycle left of the notice window."""
        d = self._d
        cp = getattr(decision, "checkpoint", None)
        workload = getattr(decision, "workload", None)
        if cp is None or workload is None:
            return False
        hook = d.config.checkpoint_hooks.get(workload)
        if hook is None:
            return False
        if d.dry_run:
            log.info(kv("dry_run_hook", notice=notice.notice_id, workload=workload))
            return False
        if self._runner is None:
            self._runner = HookRunner()
        fut = self._runner.submit(
            hook,
            notice_id=notice.notice_id,
            workload=workload,
            instance_id=notice.instance_id,
            deadline=notice.deadline,
            budget_s=float(cp.hook_budget_s),
        )
        self.in_flight += 1
        self.started += 1
        nid, budget_s, at = notice.notice_id, float(cp.hook_budget_s), d.clock.now()

        def done(f: Future[HookResult]) -> None:
            try:
                res = f.result()
            except Exception as e:  # a hook thread's boundary: run_checkpoint_hook should not raise
                res = HookResult("error", False, False, 0.0, budget_s, at, f"hook crashed: {e}")
            self._done.put((nid, workload, res))

        fut.add_done_callback(done)
        return True

    def drain(self) -> int:
        """Store the results of hooks that finished (call under the daemon's lock)."""
        d, n = self._d, 0
        while True:
            try:
                nid, workload, res = self._done.get_nowait()
            except queue.Empty:
                return n
            self.in_flight -= 1
            if not d.dry_run:
                with d.store.transaction() as tx:
                    tx.record_hook_result(d.owner, nid, workload, res.as_record(), d.clock.now())
            log.log(
                logging.INFO if res.ok else logging.WARNING,
                kv(
                    "checkpoint_hook",
                    notice=nid,
                    workload=workload,
                    ok=res.ok,
                    timed_out=res.timed_out,
                    elapsed_s=f"{res.elapsed_s:.2f}",
                    detail=res.detail,
                ),
            )
            n += 1

    def shutdown(self) -> None:
        """Wait for running hooks (each bounded by its budget)."""
        if self._runner is not None:
            self._runner.shutdown(wait=True)
            self._runner = None
