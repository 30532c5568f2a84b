"""The daemon's notice path: record, decide, record, launch, acknowledge.

Owns: ``NoticeJob`` (``receive``: one batch from the provider; ``handle``:
one batch, each notice exactly once), the values it passes back (``Batch``,
``DrainTotals``) and the reaction times it measures (``latencies_s``,
``durable_at``, ``window_missed``). The daemon drains the queue by calling
``receive`` and ``handle`` under its lock until a receive comes back short.
The lifecycle's own decisions (``tick``) and restarts are
``broker.daemon.stretches``'s; checkpoint hooks ``broker.daemon.checkpoints``'s.

One batch (what one receive returned, up to 10 messages on SQS; in a storm,
while receives come back full, up to ``GATHER`` notices received within
``GATHER_S``), in this order, each step durable before the next:

1. record the notices by ``notice_id`` (one transaction); a notice already
   handled is only acknowledged again (SQS and EventBridge deliver at least
   once), and copies of one notice in the same batch are handled once;
2. ask the lifecycle manager for each decision, in order (unless one is
   already stored: a crash after step 3 must not decide twice), and start its
   checkpoint hook (``HookCalls.call``: never waited for);
3. in ONE transaction: the decisions (audit log, UNIQUE per notice) and their
   launches as pending actions. Launches of the batch's decisions for the same
   (pool, tier, workload) are merged into one request, keyed on the notice ids
   and launch indexes it covers (``markets.keys.merged_notice_key``); each decision stores
   its action keys (``launch_keys``), so a redelivery re-sends exactly those
   requests;
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
launches decided earlier in the same drain: ``DrainTotals``) or the
break-glass dollars over their cap.

What the provider dropped before handing notices over (unreadable, spoofed,
foreign messages: ``DropCounts``) is carried into
``spotfolio_notices_dropped_total{reason}`` after each receive. Every field of
the job's log lines passes ``markets.escape.log_safe``: ids and reasons come
from queue messages.

Must not: talk to the provider except to receive and acknowledge notices
(launches and terminations go through the launcher and the executor), or
acknowledge a notice before its handling is durable.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol, runtime_checkable

from broker.daemon.book import FleetBook
from broker.daemon.checkpoints import HookCalls
from broker.daemon.executor import Executor, kv
from broker.daemon.launch import Launcher
from broker.daemon.lifecycle import Lifecycle
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.preemption import revocation_tax
from broker.daemon.store.store import DecisionRecord, Store
from broker.daemon.store.tx import Json
from broker.daemon.stretches import StretchJob
from markets.clock import Clock
from markets.cloud_fleet import (
    Instance,
    InstanceState,
    LaunchRequest,
    Notice,
    NoticeKind,
    TerminateRequest,
)
from markets.escape import log_safe
from markets.keys import merged_notice_key, notice_key, terminate_key
from markets.model import MarketSnapshot, Tier
from markets.protocols import Provider
from policies.workloads.spec import WorkloadSet

__all__ = ["BATCH", "GATHER", "GATHER_S", "Batch", "DrainTotals", "DropCounts", "NoticeJob"]

log = logging.getLogger("spotfolio.daemon")
BATCH = 10  # SQS ReceiveMessage returns at most 10 messages
# A storm is handled GATHER notices at a time, gathered within GATHER_S (an SQS
# receive takes ~10-50 ms; the notice window is 120 s, the target 1 s).
GATHER = 50
GATHER_S = 0.1
_REVOKING = (NoticeKind.INTERRUPTION, NoticeKind.PREEMPTED)
# The instance goes at the notice's deadline: held as doomed until then, so a
# reconcile does not undo its replacement. A scheduled change (AWS Health
# retirement or maintenance) is no market revocation: not counted as one.
_DOOMING = (*_REVOKING, NoticeKind.SCHEDULED)
_DEFAULT_WINDOW_S = 120.0  # AWS spot interruption notice
_KEEP_LATENCIES = 100_000  # bounded: a daemon runs for months


@runtime_checkable
class DropCounts(Protocol):
    """A provider that counts the queue messages it did not hand over as
    notices (``markets.aws.provider.AwsProvider``): reason -> count so far."""

    def dropped_notices(self) -> Mapping[str, int]: ...


def _kv(event: str, **fields: object) -> str:
    """``kv`` with every field escaped: notice and instance ids and reasons
    come from queue messages, and must not start a log line of their own."""
    return kv(event, **{k: log_safe(v) for k, v in fields.items()})


@dataclass(frozen=True, slots=True)
class Batch:
    """What one ``receive`` gathered."""

    notices: tuple[Notice, ...]
    received: float  # time.perf_counter() of the first receive: the latency's origin
    more: bool  # the last receive came back full: more are waiting


@dataclass
class DrainTotals:
    """What one drain of the queue has committed so far (decisions whose
    launches are not in the fleet yet), for the budget and cap guards."""

    spent_usd: float | None = None  # break-glass dollars in the store, read once
    add_usd_per_hour: float = 0.0
    freed_usd_per_hour: float = 0.0


@dataclass
class _Item:
    notice: Notice
    inst: Instance | None
    payload: Json
    record: DecisionRecord | None = None  # a new decision, to be written
    open_before: Json | None = None
    keys: list[str] = field(default_factory=list)


class NoticeJob:
    """Receives notices and handles each batch exactly once (module docstring)."""

    def __init__(
        self,
        provider: Provider,
        store: Store,
        book: FleetBook,
        lifecycle: Lifecycle,
        executor: Executor,
        launcher: Launcher,
        hooks: HookCalls,
        stretches: StretchJob,
        clock: Clock,
        metrics: DaemonMetrics,
        workloads: WorkloadSet,
        *,
        owner: str,
        listing_grace_s: float,
        dry_run: bool = False,
    ) -> None:
        self._provider = provider
        self._store = store
        self._book = book
        self._lifecycle = lifecycle
        self._executor = executor
        self._launcher = launcher
        self._hooks = hooks
        self._stretches = stretches
        self._clock = clock
        self._metrics = metrics
        self._workloads = workloads
        self._owner = owner
        self._grace_s = listing_grace_s
        self._dry_run = dry_run
        # Notice polled -> decision durable (s), and when each became durable
        # (time.perf_counter(), for the reaction benchmark); the latest only.
        self.latencies_s: deque[float] = deque(maxlen=_KEEP_LATENCIES)
        self.durable_at: deque[tuple[str, float]] = deque(maxlen=_KEEP_LATENCIES)
        self.window_missed = 0  # decisions made after the notice's deadline
        self._dropped: dict[str, int] = {}  # the provider's dropped counts, as last carried

    def receive(self) -> Batch:
        """One batch: while receives come back full (a storm), up to
        ``GATHER`` notices or ``GATHER_S`` seconds of receiving; a lone
        notice is handed over as soon as it is received."""
        batch = list(self._provider.poll_notices(BATCH))
        first = time.perf_counter()
        more = len(batch) >= BATCH  # >=: one AWS Health message can hold several
        while more and len(batch) < GATHER and time.perf_counter() - first < GATHER_S:
            got = self._provider.poll_notices(BATCH)
            batch += got
            more = len(got) >= BATCH
        self._count_dropped()
        return Batch(tuple(batch), first, more)

    def _count_dropped(self) -> None:
        """Carry the provider's dropped-message counts (if it keeps any) into
        ``spotfolio_notices_dropped_total``, by the increase since last time."""
        if not isinstance(self._provider, DropCounts):
            return
        for reason, count in self._provider.dropped_notices().items():
            seen = self._dropped.get(reason, 0)
            if count > seen:
                self._metrics.notices_dropped.labels(reason).inc(count - seen)
                self._dropped[reason] = count

    def handle(
        self,
        notices: Sequence[Notice],
        received: float,
        snapshot: Callable[[], MarketSnapshot],
        generation: int,
        totals: DrainTotals | None = None,
    ) -> None:
        """Steps 1-5 of the module docstring for one batch (call under the
        daemon's lock). ``received`` is the ``time.perf_counter()`` at which
        it was polled; ``snapshot`` gives the market the lifecycle decides
        on; launches carry the plan ``generation``."""
        if not notices:
            return
        totals = totals or DrainTotals()
        now = self._clock.now()
        if self._dry_run:
            for n in notices:
                dec = self._lifecycle.handle(n, self._book.last_fleet, snapshot())
                log.info(
                    _kv(
                        "dry_run_decision",
                        notice=n.notice_id,
                        kind=dec.kind.value,
                        reason=dec.reason,
                    )
                )
            return
        copies: dict[str, list[Notice]] = {}
        for n in notices:
            copies.setdefault(n.notice_id, []).append(n)
        firsts = [c[0] for c in copies.values()]
        ids = list(copies)
        with self._store.transaction() as tx:  # step 1
            new = tx.record_notices(
                [(n.notice_id, n.kind.value, n.instance_id, n.at, n.deadline) for n in firsts], now
            )
            # A notice recorded just now has neither a decision nor a handled mark.
            seen = [i for i in ids if i not in new]
            handled = tx.handled_notices(seen)
            prior = tx.decisions_for_notices(self._owner, [i for i in seen if i not in handled])
        todo = [n for n in firsts if n.notice_id not in handled]
        for n in firsts:
            if n.notice_id in handled:
                for c in copies[n.notice_id]:
                    self._provider.ack_notice(c)
        if not todo:
            return
        for n in todo:
            if n.notice_id in new and n.kind in _REVOKING:
                self._metrics.revocations.inc()
        fleet = self._book.by_id
        if any(n.instance_id not in fleet and n.kind is not NoticeKind.STATE_CHANGE for n in todo):
            self._book.view(self._provider, self._store, now, self._grace_s)
            fleet = self._book.by_id
        gone = [
            n.instance_id
            for n in todo
            if n.kind is NoticeKind.STATE_CHANGE and n.state is InstanceState.TERMINATED
        ]
        if gone:
            with self._store.transaction() as tx:
                tx.mark_instances(gone, InstanceState.TERMINATED, now)
        items: list[_Item] = []
        for n in todo:  # step 2
            inst = fleet.get(n.instance_id)
            if n.kind in _DOOMING and inst is not None:
                self._book.doom(
                    n.instance_id, n.deadline or n.at + timedelta(seconds=_DEFAULT_WINDOW_S), n.at
                )
            if n.notice_id in prior:
                items.append(_Item(n, inst, prior[n.notice_id].payload))
            else:
                payload, record = self._decide(n, inst, snapshot(), received, totals)
                items.append(_Item(n, inst, payload, record))
        requests = self._write_decisions(items, received, generation)  # step 3
        launched: dict[str, list[str]] = {}
        for req, nids, written in requests:  # step 4
            ctx = {"source": "notice", "notice_ids": nids}
            launched[req.idempotency_key] = (
                self._launcher.launch(req, context=ctx, notice_ids=nids, written=written) or []
            )
        for it in items:
            n = it.notice
            if it.open_before is not None and self._lifecycle.stretch_state(n.notice_id) is None:
                self._stretches.record_cancelled(
                    n.notice_id, it.payload.get("workload"), it.open_before
                )
            ok = any(launched.get(k) for k in it.keys)
            if ok and n.kind in _REVOKING:
                ids = [i for k in it.keys for i in launched.get(k) or []]
                self._metrics.replacement_launched(n.notice_id, n.at, ids)
            if it.payload.get("launch_before_terminate") and ok and it.inst is not None:
                ids_ = (it.inst.instance_id,)
                self._executor.run(
                    TerminateRequest(
                        idempotency_key=terminate_key(self._owner, ids_),
                        instance_ids=ids_,
                        owner=self._owner,
                        reason=f"rebalance {n.notice_id}: replacement running",
                    )
                )
        with self._store.transaction() as tx:  # step 5
            tx.mark_notices_handled([it.notice.notice_id for it in items], self._clock.now())
        for it in items:
            for c in copies[it.notice.notice_id]:
                self._provider.ack_notice(c)

    def _write_decisions(
        self, items: list[_Item], received: float, generation: int
    ) -> list[tuple[LaunchRequest, list[str], bool]]:
        """Step 3: new decisions and their (merged) launches in one transaction;
        returns every request the batch's decisions need, with the notices each
        serves (prior decisions' requests are read back from the store)."""
        groups: dict[tuple[str, str, str], list[tuple[_Item, int, Json]]] = {}
        for it in items:
            if it.record is None:
                continue
            for i, x in enumerate(it.payload.get("launches") or []):
                groups.setdefault((x["workload"], x["pool_key"], x["tier"]), []).append((it, i, x))
        out: list[tuple[LaunchRequest, list[str], bool]] = []
        bodies: list[tuple[str, str, Json]] = []
        for (workload, pool, tier), parts in groups.items():
            key = merged_notice_key([(it.notice.notice_id, i) for it, i, _ in parts])
            nids = list(dict.fromkeys(it.notice.notice_id for it, _, _ in parts))
            req = LaunchRequest(
                idempotency_key=key,
                pool_key=pool,
                tier=Tier(tier),
                workload=workload,
                count=sum(int(x["count"]) for _, _, x in parts),
                owner=self._owner,
                plan_generation=generation,
            )
            for it, _, _ in parts:
                if key not in it.keys:
                    it.keys.append(key)
            body = {
                "request": req.model_dump(mode="json"),
                "units": self._book.units(pool),
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
            with self._store.transaction() as tx:
                tx.record_decisions(self._owner, [it.record for it in new if it.record is not None])
                tx.record_actions(self._owner, bodies, self._clock.now())
            durable = time.perf_counter()  # the decisions and their launches are committed
            for it in new:
                self._decided(it, durable - received, durable)
        seen = {req.idempotency_key for req, _, _ in out}
        for it in items:
            if it.record is None:
                for req in self._prior_requests(it, generation):
                    it.keys.append(req.idempotency_key)
                    if req.idempotency_key not in seen:
                        seen.add(req.idempotency_key)
                        out.append((req, [it.notice.notice_id], False))
                if it.payload.get("stretch"):
                    state = self._lifecycle.stretch_state(it.notice.notice_id)
                    if state is not None:
                        it.open_before = state
        return out

    def _prior_requests(self, it: _Item, generation: int) -> list[LaunchRequest]:
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
                    owner=self._owner,
                    plan_generation=generation,
                )
                for i, x in enumerate(it.payload.get("launches") or [])
            ]
        out: list[LaunchRequest] = []
        with self._store.transaction() as tx:
            for key in keys:
                rec = tx.action(key)
                if rec is not None:
                    out.append(LaunchRequest.model_validate(rec.payload["request"]))
        return out

    def _decide(
        self,
        n: Notice,
        inst: Instance | None,
        snapshot: MarketSnapshot,
        received: float,
        totals: DrainTotals,
    ) -> tuple[Json, DecisionRecord]:
        """Step 2: the lifecycle's decision, its hook started, the daemon's guards."""
        book = self._book
        dec = self._lifecycle.handle(n, book.last_fleet, snapshot)
        self._hooks.call(n, dec)  # at once: the checkpoint races the notice window
        kind = dec.kind.value
        workload = dec.workload or (inst.workload if inst else None)
        launches: list[Json] = [
            {
                "pool_key": x.pool_key,
                "tier": x.tier.value,
                "count": int(x.count),
                "workload": workload,
            }
            for x in dec.launches
            if workload is not None
        ]
        bg_usd = float(dec.break_glass_usd_committed)
        refused = None
        cap = self._workloads.break_glass_cap_usd
        if cap is not None and bg_usd > 0:  # one writer (the lease holder, under its lock)
            if totals.spent_usd is None:
                with self._store.transaction() as tx:
                    totals.spent_usd = tx.break_glass_usd(self._owner)
            if totals.spent_usd + bg_usd > cap + 1e-6:
                spent = totals.spent_usd
                refused = f"break-glass cap ${cap:,.0f} (spent ${spent:,.0f})"
                launches, bg_usd = [], 0.0
        add = sum(x["count"] * book.price(x["pool_key"], Tier(x["tier"])) for x in launches)
        revoked = inst is not None and n.kind in _REVOKING
        freed = book.price(inst.pool_key, inst.tier) if inst is not None and revoked else 0.0
        tax = None
        if inst is not None and revoked:  # the preemption tax (broker.daemon.preemption)
            tax = revocation_tax(
                self._workloads,
                inst,
                at=n.at,
                checkpoint=dec.checkpoint,
                snapshot=snapshot,
                price_usd_per_hour=freed,
            )
            if tax is not None:
                self._metrics.revoked(
                    inst.pool_key, inst.tier.value, unit_hours=tax.unit_hours, usd=tax.usd
                )
        if launches and not book.budget_allows(
            totals.add_usd_per_hour + add, totals.freed_usd_per_hour + freed
        ):
            refused = f"fleet budget ${self._workloads.budget_usd_per_hour}/h"
            launches, bg_usd = [], 0.0
        if refused:
            self._lifecycle.withdraw(n.notice_id)  # it releases what it counted for it
        if launches:
            totals.add_usd_per_hour += add
        totals.freed_usd_per_hour += freed
        if bg_usd and totals.spent_usd is not None:
            totals.spent_usd += bg_usd
        payload: Json = {
            **dec.as_record(),
            "kind": kind,
            "launches": launches,
            "lost_slot": None if inst is None else [inst.workload, inst.pool_key, inst.tier.value],
            "lost_count": 1,
            "taken_out": n.kind in _DOOMING and kind != "ignore",
            "launch_before_terminate": dec.launch_before_terminate,
            # on-demand taken back instead of launched (``Decision.kept``)
            "kept": [
                {
                    "pool_key": x.pool_key,
                    "tier": x.tier.value,
                    "count": int(x.count),
                    "workload": workload,
                }
                for x in dec.kept
                if workload is not None and not refused
            ],
            "refused": refused,
            "preemption_tax": None if tax is None else tax.as_record(),
        }
        if kind == "break_glass":
            payload["stretch"] = self._lifecycle.stretch_state(n.notice_id)
        # Stored with the decision: received -> decided (the commit follows).
        latency_s = time.perf_counter() - received
        reason = dec.reason + (f"; refused: {refused}" if refused else "")
        rec = DecisionRecord(
            n.notice_id, kind, workload, reason, latency_s, bg_usd, payload, self._clock.now()
        )
        return payload, rec

    def _decided(self, it: _Item, latency_s: float, durable: float) -> None:
        """Metrics and the log line of a decision now durable."""
        assert it.record is not None
        n, r = it.notice, it.record
        self._metrics.decisions.labels(r.kind).inc()
        self._metrics.notice_latency.observe(latency_s)
        if r.break_glass_usd:
            self._metrics.break_glass_usd.inc(r.break_glass_usd)
        self.latencies_s.append(latency_s)
        self.durable_at.append((n.notice_id, durable))
        if n.deadline is not None and self._clock.now() > n.deadline:
            self.window_missed += 1
        log.info(
            _kv(
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
