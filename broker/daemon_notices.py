"""The daemon's notice path: record, decide, record, launch, acknowledge.

Owns: ``poll_and_handle`` (drain the provider's notices) and
``handle_notice`` (one notice, exactly once). The lifecycle's own decisions
(``tick``), restarts and checkpoint hooks are ``broker.daemon_lifecycle``'s.

One notice, in this order, each step durable before the next:

1. record the notice by ``notice_id`` (a second delivery of a handled notice
   is only acknowledged again: SQS and EventBridge deliver at least once);
2. ask the lifecycle manager for a decision (unless one is already stored:
   a crash after step 3 must not decide twice);
3. in ONE transaction: the decision (audit log, UNIQUE per notice) and its
   launches as pending actions, keyed on the notice id;
4. launch (next pool on insufficient capacity, backoff on throttling);
5. mark the notice handled, then acknowledge (delete) it at the provider.

A crash anywhere before 5 leaves the message in the queue: it comes back
after the visibility timeout and resumes at the first step not yet durable.
Guards the daemon keeps on top of the lifecycle's own: a decision's launches
are dropped (and the reason recorded) if they would take the fleet over its
$/h budget or the break-glass dollars over their cap.

Must not: talk to the provider except through the daemon's executor, or
acknowledge a notice before its handling is durable.
"""

from __future__ import annotations

import hashlib
import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from broker.daemon_lifecycle import record_cancelled_stretch, stretch_state
from broker.executor import kv
from broker.reconcile import terminate_key
from broker.store import DecisionRecord
from markets.fleet import (
    Instance,
    InstanceState,
    LaunchRequest,
    Notice,
    NoticeKind,
    TerminateRequest,
)
from markets.model import Tier

if TYPE_CHECKING:
    from broker.daemon import Daemon

__all__ = ["handle_notice", "notice_key", "poll_and_handle"]

log = logging.getLogger("spotfolio.daemon")
BATCH = 10  # SQS ReceiveMessage returns at most 10 messages
_REVOKING = (NoticeKind.INTERRUPTION, NoticeKind.PREEMPTED)
_DEFAULT_WINDOW_S = 120.0  # AWS spot interruption notice


def notice_key(notice_id: str, index: int) -> str:
    """Key of the ``index``-th launch a notice's decision asks for."""
    return "sf-" + hashlib.sha256(f"notice\x1f{notice_id}\x1f{index}".encode()).hexdigest()[:40]


def poll_and_handle(d: Daemon) -> int:
    """Drain the provider's notices (batches of ``BATCH``); returns how many."""
    total = 0
    while d.active:
        batch = d.provider.poll_notices(BATCH)
        received = time.perf_counter()
        with d.lock:
            for n in batch:
                handle_notice(d, n, received)
        total += len(batch)
        if len(batch) < BATCH:
            break
    return total


def _find(d: Daemon, instance_id: str) -> Instance | None:
    for i in d.book.last_fleet:
        if i.instance_id == instance_id:
            return i
    return None


def handle_notice(d: Daemon, n: Notice, received: float) -> None:
    """One notice, exactly once (module docstring). ``received`` is the
    ``time.perf_counter()`` at which it was polled: the latency's origin."""
    now = d.clock.now()
    if d.dry_run:
        dec = d.lifecycle.handle(n, list(d.book.last_fleet), _snap(d))
        log.info(kv("dry_run_decision", notice=n.notice_id, kind=_kind(dec), reason=dec.reason))
        return
    with d.store.transaction() as tx:
        new = tx.record_notice(n.notice_id, n.kind.value, n.instance_id, n.at, now)
        handled = tx.notice_handled(n.notice_id)
        prior = tx.decisions(d.owner, notice_id=n.notice_id)
    if handled:
        d.provider.ack_notice(n)
        return
    if new and n.kind in _REVOKING:
        d.metrics.revocations.inc()
    inst = _find(d, n.instance_id)
    if inst is None and n.kind is not NoticeKind.STATE_CHANGE:
        d.book.view(d.provider, d.store, now, d.config.listing_grace_s)
        inst = _find(d, n.instance_id)
    if n.kind is NoticeKind.STATE_CHANGE and n.state is InstanceState.TERMINATED:
        with d.store.transaction() as tx:
            tx.mark_instances([n.instance_id], InstanceState.TERMINATED, now)
    if n.kind in _REVOKING and inst is not None:
        d.book.doom(n.instance_id, n.deadline or n.at + timedelta(seconds=_DEFAULT_WINDOW_S))
    payload = prior[0].payload if prior else _decide(d, n, inst, received)
    open_before = stretch_state(d, n.notice_id) if payload.get("stretch") else None
    launched: list[str] = []
    for i, x in enumerate(payload.get("launches") or []):
        req = LaunchRequest(
            idempotency_key=notice_key(n.notice_id, i),
            pool_key=x["pool_key"],
            tier=Tier(x["tier"]),
            workload=x["workload"],
            count=int(x["count"]),
            owner=d.owner,
            plan_generation=d.state.generation,
        )
        ctx = {"source": "notice", "notice_id": n.notice_id}
        launched += d.launch(req, context=ctx, notice_id=n.notice_id) or []
    if open_before is not None and stretch_state(d, n.notice_id) is None:
        record_cancelled_stretch(d, n.notice_id, payload.get("workload"), open_before)
    if payload.get("launch_before_terminate") and launched and inst is not None:
        ids = (inst.instance_id,)
        d.executor.run(
            TerminateRequest(
                idempotency_key=terminate_key(d.owner, ids),
                instance_ids=ids,
                owner=d.owner,
                reason=f"rebalance {n.notice_id}: replacement running",
            )
        )
    with d.store.transaction() as tx:
        tx.mark_notice_handled(n.notice_id, d.clock.now())
    d.provider.ack_notice(n)


def _snap(d: Daemon) -> Any:
    if d.snapshot is None:
        d.refresh_market(force=True)
    return d.snapshot


def _kind(dec: Any) -> str:
    k = dec.kind
    return str(getattr(k, "value", k))


def _decide(d: Daemon, n: Notice, inst: Instance | None, received: float) -> dict[str, Any]:
    """Steps 2 and 3: the decision and its launches, durable together."""
    dec = d.lifecycle.handle(n, list(d.book.last_fleet), _snap(d))
    d.hooks.call(n, dec)  # at once: the checkpoint races the notice window
    kind = _kind(dec)
    record = dec.as_record() if hasattr(dec, "as_record") else {}
    workload = getattr(dec, "workload", None) or (inst.workload if inst else None)
    launches = [
        {
            "pool_key": x.pool_key,
            "tier": Tier(x.tier).value,
            "count": int(x.count),
            "workload": workload,
        }
        for x in (getattr(dec, "launches", None) or ())
        if workload is not None
    ]
    bg_usd = float(getattr(dec, "break_glass_usd_committed", 0.0) or 0.0)
    refused = None
    cap = d.workloads.break_glass_cap_usd
    spent = 0.0
    if cap is not None and bg_usd > 0:  # one writer (the lease holder, under d.lock)
        with d.store.transaction() as tx:
            spent = tx.break_glass_usd(d.owner)
    if cap is not None and bg_usd > 0 and spent + bg_usd > cap + 1e-6:
        refused, launches, bg_usd = f"break-glass cap ${cap:,.0f} (spent ${spent:,.0f})", [], 0.0
    add = sum(x["count"] * d.book.price(x["pool_key"], Tier(x["tier"])) for x in launches)
    freed = (
        d.book.price(inst.pool_key, inst.tier) if inst is not None and n.kind in _REVOKING else 0.0
    )
    if launches and not d.book.budget_allows(add, freed):
        refused, launches, bg_usd = f"fleet budget ${d.workloads.budget_usd_per_hour}/h", [], 0.0
    withdraw = getattr(d.lifecycle, "withdraw", None)
    if refused and withdraw is not None:
        withdraw(n.notice_id)  # the lifecycle releases what it counted for it
    payload = {
        **record,
        "kind": kind,
        "launches": launches,
        "lost_slot": [inst.workload, inst.pool_key, inst.tier.value] if inst is not None else None,
        "lost_count": 1,
        "taken_out": n.kind in _REVOKING and kind != "ignore",
        "launch_before_terminate": bool(getattr(dec, "launch_before_terminate", False)),
        "refused": refused,
    }
    if kind == "break_glass":
        payload["stretch"] = stretch_state(d, n.notice_id)
    latency_s = time.perf_counter() - received
    units = {x["pool_key"]: d.book.units(x["pool_key"]) for x in launches}
    with d.store.transaction() as tx:
        tx.record_decision(
            d.owner,
            DecisionRecord(
                n.notice_id,
                kind,
                workload,
                str(dec.reason) + (f"; refused: {refused}" if refused else ""),
                latency_s,
                bg_usd,
                payload,
                d.clock.now(),
            ),
        )
        for i, x in enumerate(launches):
            req = LaunchRequest(
                idempotency_key=notice_key(n.notice_id, i),
                pool_key=x["pool_key"],
                tier=Tier(x["tier"]),
                workload=x["workload"],
                count=x["count"],
                owner=d.owner,
                plan_generation=d.state.generation,
            )
            body = {
                "request": req.model_dump(mode="json"),
                "units": units[x["pool_key"]],
                "source": "notice",
                "notice_id": n.notice_id,
            }
            tx.record_action(req.idempotency_key, d.owner, "launch", body, d.clock.now())
    d.metrics.decisions.labels(kind).inc()
    d.metrics.notice_latency.observe(latency_s)
    if bg_usd:
        d.metrics.break_glass_usd.inc(bg_usd)
    d.decision_latencies_s.append(latency_s)
    if n.deadline is not None and d.clock.now() > n.deadline:
        d.window_missed += 1
    log.info(
        kv(
            "decision",
            notice=n.notice_id,
            notice_kind=n.kind.value,
            kind=kind,
            workload=workload or "-",
            instance=n.instance_id,
            launches=len(launches),
            latency_ms=f"{latency_s * 1e3:.2f}",
            break_glass_usd=f"{bg_usd:.2f}",
            reason=dec.reason,
        )
    )
    return payload
