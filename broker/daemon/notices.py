"""The daemon's notice path: record, decide, record, launch, acknowledge.

Owns: ``poll_and_handle`` (drain the provider's notices), ``handle_batch``
(one received batch, each notice exactly once) and ``handle_notice`` (a batch
of one). The lifecycle's own decisions (``tick``), restarts and checkpoint
hooks are ``broker.daemon.stretches``'s.

One batch (what one receive returned, up to 10 messages on SQS; in a storm,
while receives come back full, up to ``GATHER`` notices received within
``GATHER_S``), in this order, each step durable before the next:

1. record the notices by ``notice_id`` (one transaction); a notice already
   handled is only acknowledged again (SQS and EventBridge deliver at least
   once), and copies of one notice in the same batch are handled once;
2. ask the lifecycle manager for each decision, in order (unless one is
   already stored: a crash after step 3 must not decide twice), and start its
   checkpoint hook (``broker.daemon.stretches.HookCalls``: never waited for);
3. in ONE transaction: the decisions (audit log, UNIQUE per notice) and their
   launches as pending actions. Launches of the batch's decisions for the same
   (pool, tier, workload) are merged into one request, keyed on the notice ids
   and launch indexes it covers; each decision stores its action keys
   (``launch_keys``), so a redelivery re-sends exactly those requests;
4. launch (next pool on insufficient capacity, backoff on throttling);
5. mark the notices handled (one transaction), then acknowledge (delete) them.

A crash anywhere before 5 leaves the messages in the queue: they come back
after the visibility timeout and resume at the first step not yet durable
(pending actions are also re-sent by ``Executor.recover`` at start).
Merging is what keeps a storm cheap: a zone-wide revocation asks for the same
few pools again and again, and ten decisions cost one request per pool, not
ten. Guards the daemon keeps on top of the lifecycle's own: a decision's
launches are dropped (the reason recorded, the lifecycle told to
``withdraw``) if they would take the fleet over its $/h budget (counting the
launches decided earlier in the same drain) or the break-glass dollars over
their cap.

Must not: talk to the provider except through the daemon's executor, or
acknowledge a notice before its handling is durable.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from broker.daemon.executor import kv
from broker.daemon.store.store import DecisionRecord
from broker.daemon.stretches import record_cancelled_stretch, stretch_state
from broker.planning.reconcile import terminate_key
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
    from broker.daemon.daemon import Daemon

__all__ = ["handle_batch", "handle_notice", "merged_key", "notice_key", "poll_and_handle"]

log = logging.getLogger("spotfolio.daemon")
BATCH = 10  # SQS ReceiveMessage returns at most 10 messages
# A storm is handled GATHER notices at a time, gathered within GATHER_S (an SQS
# receive takes ~10-50 ms; the notice window is 120 s, the target 1 s).
GATHER = 50
GATHER_S = 0.1
_REVOKING = (NoticeKind.INTERRUPTION, NoticeKind.PREEMPTED)
_DEFAULT_WINDOW_S = 120.0  # AWS spot interruption notice


def notice_key(notice_id: str, index: int) -> str:
    """Key of the ``index``-th launch a notice's decision asks for."""
    return "sf-" + hashlib.sha256(f"notice\x1f{notice_id}\x1f{index}".encode()).hexdigest()[:40]


def merged_key(parts: Sequence[tuple[str, int]]) -> str:
    """Key of one request carrying several decisions' launches ((notice id,
    launch index) each); a single part keeps its own ``notice_key``."""
    if len(parts) == 1:
        return notice_key(*parts[0])
    text = "\x1e".join(f"{nid}\x1f{i}" for nid, i in sorted(parts))
    return "sf-" + hashlib.sha256(f"notices\x1d{text}".encode()).hexdigest()[:40]


@dataclass
class _Guard:
    """What one drain has committed so far (decisions not yet in the fleet)."""

    spent_usd: float | None = None  # break-glass dollars in the store, read once
    add_usd_per_hour: float = 0.0
    freed_usd_per_hour: float = 0.0


@dataclass
class _Item:
    notice: Notice
    inst: Instance | None
    payload: dict[str, Any]
    record: DecisionRecord | None = None  # a new decision, to be written
    open_before: dict[str, Any] | None = None
    keys: list[str] = field(default_factory=list)


def poll_and_handle(d: Daemon) -> int:
    """Drain the provider's notices; returns how many. While receives come
    back full (a storm), up to ``GATHER`` notices or ``GATHER_S`` seconds of
    receiving are handled as one batch: fewer commits and fewer, larger
    merged launches. A lone notice is handled as soon as it is received."""
    total = 0
    guard = _Guard()
    while d.active:
        batch = list(d.provider.poll_notices(BATCH))
        first = time.perf_counter()
        more = len(batch) == BATCH
        while more and len(batch) < GATHER and time.perf_counter() - first < GATHER_S:
            got = d.provider.poll_notices(BATCH)
            batch += got
            more = len(got) == BATCH
        with d.lock:
            d.hooks.drain()
            handle_batch(d, batch, first, guard)
        total += len(batch)
        if not more:
            break
    return total


def handle_notice(d: Daemon, n: Notice, received: float) -> None:
    """One notice, exactly once (a batch of one)."""
    handle_batch(d, [n], received)


def handle_batch(
    d: Daemon, notices: Sequence[Notice], received: float, guard: _Guard | None = None
) -> None:
    """Steps 1-5 of the module docstring for one batch. ``received`` is the
    ``time.perf_counter()`` at which it was polled: the latency's origin."""
    if not notices:
        return
    guard = guard or _Guard()
    now = d.clock.now()
    if d.dry_run:
        for n in notices:
            dec = d.lifecycle.handle(n, d.book.last_fleet, _snap(d))
            log.info(kv("dry_run_decision", notice=n.notice_id, kind=_kind(dec), reason=dec.reason))
        return
    copies: dict[str, list[Notice]] = {}
    for n in notices:
        copies.setdefault(n.notice_id, []).append(n)
    firsts = [c[0] for c in copies.values()]
    ids = list(copies)
    with d.store.transaction() as tx:  # step 1
        new = tx.record_notices(
            [(n.notice_id, n.kind.value, n.instance_id, n.at) for n in firsts], now
        )
        # A notice recorded just now has neither a decision nor a handled mark.
        seen = [i for i in ids if i not in new]
        handled = tx.handled_notices(seen)
        prior = tx.decisions_for_notices(d.owner, [i for i in seen if i not in handled])
    todo = [n for n in firsts if n.notice_id not in handled]
    for n in firsts:
        if n.notice_id in handled:
            for c in copies[n.notice_id]:
                d.provider.ack_notice(c)
    if not todo:
        return
    for n in todo:
        if n.notice_id in new and n.kind in _REVOKING:
            d.metrics.revocations.inc()
    fleet = d.book.by_id
    if any(n.instance_id not in fleet and n.kind is not NoticeKind.STATE_CHANGE for n in todo):
        d.book.view(d.provider, d.store, now, d.config.listing_grace_s)
        fleet = d.book.by_id
    gone = [
        n.instance_id
        for n in todo
        if n.kind is NoticeKind.STATE_CHANGE and n.state is InstanceState.TERMINATED
    ]
    if gone:
        with d.store.transaction() as tx:
            tx.mark_instances(gone, InstanceState.TERMINATED, now)
    items: list[_Item] = []
    for n in todo:  # step 2
        inst = fleet.get(n.instance_id)
        if n.kind in _REVOKING and inst is not None:
            d.book.doom(n.instance_id, n.deadline or n.at + timedelta(seconds=_DEFAULT_WINDOW_S))
        if n.notice_id in prior:
            items.append(_Item(n, inst, prior[n.notice_id].payload))
        else:
            payload, record = _decide(d, n, inst, received, guard)
            items.append(_Item(n, inst, payload, record))
    requests = _write_decisions(d, items, received)  # step 3
    launched: dict[str, list[str]] = {}
    for req, nids, written in requests:  # step 4
        ctx = {"source": "notice", "notice_ids": nids}
        launched[req.idempotency_key] = (
            d.launch(req, context=ctx, notice_ids=nids, written=written) or []
        )
    for it in items:
        n = it.notice
        if it.open_before is not None and stretch_state(d, n.notice_id) is None:
            record_cancelled_stretch(d, n.notice_id, it.payload.get("workload"), it.open_before)
        ok = any(launched.get(k) for k in it.keys)
        if it.payload.get("launch_before_terminate") and ok and it.inst is not None:
            ids_ = (it.inst.instance_id,)
            d.executor.run(
                TerminateRequest(
                    idempotency_key=terminate_key(d.owner, ids_),
                    instance_ids=ids_,
                    owner=d.owner,
                    reason=f"rebalance {n.notice_id}: replacement running",
                )
            )
    with d.store.transaction() as tx:  # step 5
        tx.mark_notices_handled([it.notice.notice_id for it in items], d.clock.now())
    for it in items:
        for c in copies[it.notice.notice_id]:
            d.provider.ack_notice(c)


def _write_decisions(
    d: Daemon, items: list[_Item], received: float
) -> list[tuple[LaunchRequest, list[str], bool]]:
    """Step 3: new decisions and their (merged) launches in one transaction;
    returns every request the batch's decisions need, with the notices each
    serves (prior decisions' requests are read back from the store)."""
    groups: dict[tuple[str, str, str], list[tuple[_Item, int, dict[str, Any]]]] = {}
    for it in items:
        if it.record is None:
            continue
        for i, x in enumerate(it.payload.get("launches") or []):
            groups.setdefault((x["workload"], x["pool_key"], x["tier"]), []).append((it, i, x))
    out: list[tuple[LaunchRequest, list[str], bool]] = []
    bodies: list[tuple[str, str, dict[str, Any]]] = []
    for (workload, pool, tier), parts in groups.items():
        key = merged_key([(it.notice.notice_id, i) for it, i, _ in parts])
        nids = list(dict.fromkeys(it.notice.notice_id for it, _, _ in parts))
        req = LaunchRequest(
            idempotency_key=key,
            pool_key=pool,
            tier=Tier(tier),
            workload=workload,
            count=sum(int(x["count"]) for _, _, x in parts),
            owner=d.owner,
            plan_generation=d.state.generation,
        )
        for it, _, _ in parts:
            if key not in it.keys:
                it.keys.append(key)
        body = {
            "request": req.model_dump(mode="json"),
            "units": d.book.units(pool),
            "source": "notice",
            "notice_ids": nids,
        }
        bodies.append((key, "launch", body))
        out.append((req, nids, True))
    new = [it for it in items if it.record is not None]
    for it in new:
        it.payload["launch_keys"] = it.keys
        if it.payload.get("stretch"):
            it.open_before = it.payload["stretch"]
    if new:
        with d.store.transaction() as tx:
            tx.record_decisions(d.owner, [it.record for it in new if it.record is not None])
            tx.record_actions(d.owner, bodies, d.clock.now())
        durable = time.perf_counter()  # the decisions and their launches are committed
        for it in new:
            _decided(d, it, durable - received, durable)
    seen = {req.idempotency_key for req, _, _ in out}
    for it in items:
        if it.record is None:
            for req in _prior_requests(d, it):
                it.keys.append(req.idempotency_key)
                if req.idempotency_key not in seen:
                    seen.add(req.idempotency_key)
                    out.append((req, [it.notice.notice_id], False))
            if it.payload.get("stretch") and stretch_state(d, it.notice.notice_id) is not None:
                it.open_before = stretch_state(d, it.notice.notice_id)
    return out


def _prior_requests(d: Daemon, it: _Item) -> list[LaunchRequest]:
    """A stored decision's launch requests, as first written (its keys)."""
    keys = it.payload.get("launch_keys")
    if keys is None:  # written before launch_keys existed: one key per launch
        return [
            LaunchRequest(
                idempotency_key=notice_key(it.notice.notice_id, i),
                pool_key=x["pool_key"],
                tier=Tier(x["tier"]),
                workload=x["workload"],
                count=int(x["count"]),
                owner=d.owner,
                plan_generation=d.state.generation,
            )
            for i, x in enumerate(it.payload.get("launches") or [])
        ]
    out: list[LaunchRequest] = []
    with d.store.transaction() as tx:
        for key in keys:
            rec = tx.action(key)
            if rec is not None:
                out.append(LaunchRequest.model_validate(rec.payload["request"]))
    return out


def _snap(d: Daemon) -> Any:
    if d.snapshot is None:
        d.refresh_market(force=True)
    return d.snapshot


def _kind(dec: Any) -> str:
    k = dec.kind
    return str(getattr(k, "value", k))


def _decide(
    d: Daemon, n: Notice, inst: Instance | None, received: float, guard: _Guard
) -> tuple[dict[str, Any], DecisionRecord]:
    """Step 2: the lifecycle's decision, its hook started, the daemon's guards."""
    dec = d.lifecycle.handle(n, d.book.last_fleet, _snap(d))
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
    if cap is not None and bg_usd > 0:  # one writer (the lease holder, under d.lock)
        if guard.spent_usd is None:
            with d.store.transaction() as tx:
                guard.spent_usd = tx.break_glass_usd(d.owner)
        if guard.spent_usd + bg_usd > cap + 1e-6:
            spent = guard.spent_usd
            refused, launches, bg_usd = f"break-glass cap ${cap:,.0f} (spent ${spent:,.0f})", [], 0
    add = sum(x["count"] * d.book.price(x["pool_key"], Tier(x["tier"])) for x in launches)
    freed = (
        d.book.price(inst.pool_key, inst.tier) if inst is not None and n.kind in _REVOKING else 0.0
    )
    if launches and not d.book.budget_allows(
        guard.add_usd_per_hour + add, guard.freed_usd_per_hour + freed
    ):
        refused, launches, bg_usd = f"fleet budget ${d.workloads.budget_usd_per_hour}/h", [], 0.0
    withdraw = getattr(d.lifecycle, "withdraw", None)
    if refused and withdraw is not None:
        withdraw(n.notice_id)  # the lifecycle releases what it counted for it
    if launches:
        guard.add_usd_per_hour += add
    guard.freed_usd_per_hour += freed
    if bg_usd and guard.spent_usd is not None:
        guard.spent_usd += bg_usd
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
    # Stored with the decision: received -> decided (the commit follows).
    latency_s = time.perf_counter() - received
    reason = str(dec.reason) + (f"; refused: {refused}" if refused else "")
    rec = DecisionRecord(
        n.notice_id, kind, workload, reason, latency_s, bg_usd, payload, d.clock.now()
    )
    return payload, rec


def _decided(d: Daemon, it: _Item, latency_s: float, durable: float) -> None:
    """Metrics and the log line of a decision now durable."""
    assert it.record is not None
    n, r = it.notice, it.record
    d.metrics.decisions.labels(r.kind).inc()
    d.metrics.notice_latency.observe(latency_s)
    if r.break_glass_usd:
        d.metrics.break_glass_usd.inc(r.break_glass_usd)
    d.decision_latencies_s.append(latency_s)
    d.decisions_durable_at.append((n.notice_id, durable))
    if n.deadline is not None and d.clock.now() > n.deadline:
        d.window_missed += 1
    log.info(
        kv(
            "decision",
            notice=n.notice_id,
            notice_kind=n.kind.value,
            kind=r.kind,
            workload=r.workload or "-",
            instance=n.instance_id,
            launches=len(it.payload.get("launches") or []),
            latency_ms=f"{latency_s * 1e3:.2f}",
            break_glass_usd=f"{r.break_glass_usd:.2f}",
            reason=r.reason,
        )
    )
