"""Carrying out launches and terminations: write-ahead, retried, idempotent.

Owns: ``Executor``. Every request goes through the same steps:

1. record the action ``pending`` in the store under its idempotency key
   (a key already ``done`` returns the stored result and calls nothing);
2. call the provider, retrying throttling and transient faults with jittered
   exponential backoff (``Backoff``: full jitter, ``base * 2**attempt`` capped);
3. in one transaction, mark the action ``done`` (or ``failed``) and record
   the launched instances in the store's fleet (or the terminated ones).

Fencing: the store is the daemon's fenced one (``Store.fenced``): steps 1
and 3 are refused once another daemon took the lease over, and before each
call to the provider the lease is checked and extended (``Store.hold_lease``).

A crash between 1 and 3 leaves the action ``pending``; ``recover`` re-sends
every pending key on start, and the provider answers with the instances it
already launched. ``CapacityUnavailableError`` marks the action failed and is
re-raised (the caller tries the next pool); ``FatalError`` is re-raised.

Keys: ``resolve_launch_key`` makes a launch key unique to the *state* it was
derived from: if the derived key is already ``done`` and none of its instances
is still alive (they were revoked or ended) or it ``failed``, the next key in
the sequence ``key, key#1, key#2, ...`` is used. The sequence depends only on
the store, so a restart derives the same key again.

Dry run: nothing is recorded and nothing mutating is called; the request is
handed to ``announce`` (the CLI prints it).

Must not: decide what to launch (reconcile, lifecycle) or read the wall
clock (backoff sleeps through the injected ``sleep``).
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from broker.daemon.config import Backoff
from broker.daemon.logline import LogLine
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.store import ActionRecord, Store
from markets.clock import Clock
from markets.cloud_fleet import (
    GENERATION_TAG,
    OWNER_TAG,
    POOL_TAG,
    WORKLOAD_TAG,
    ActionResult,
    ErrorKind,
    Instance,
    InstanceState,
    LaunchRequest,
    TerminateRequest,
)
from markets.errors import CapacityUnavailableError, QuotaExceededError, TransientError
from markets.keys import next_attempt_key
from markets.protocols import Provider

__all__ = ["Executor", "Request", "kv"]

Request = LaunchRequest | TerminateRequest
log = logging.getLogger("spotfolio.daemon")


def kv(event: str, **fields: object) -> str:
    """One structured log line: ``event key=value ...`` (values with spaces
    quoted), keeping its typed fields for the JSON log (``LogLine``)."""
    return LogLine(event, fields)


class Executor:
    def __init__(
        self,
        provider: Provider,
        store: Store,
        owner: str,
        clock: Clock,
        metrics: DaemonMetrics,
        backoff: Backoff,
        *,
        dry_run: bool = False,
        sleep: Callable[[float], None] | None = None,
        announce: Callable[[Request], None] | None = None,
        seed: int = 0,
    ) -> None:
        self.provider = provider
        self.store = store
        self.owner = owner
        self.clock = clock
        self.metrics = metrics
        self.backoff = backoff
        self.dry_run = dry_run
        self.sleep = sleep or (lambda _s: None)
        self.announce = announce or (lambda r: log.info(kv("dry_run", request=r)))
        self.rng = random.Random(seed)

    # --- keys -----------------------------------------------------------------
    def resolve_launch_key(self, request: LaunchRequest, alive_ids: Iterable[str]) -> LaunchRequest:
        """``request`` with the first key of its sequence still usable (module doc)."""
        alive = set(alive_ids)
        key, n = request.idempotency_key, 0
        with self.store.transaction() as tx:
            while True:
                rec = tx.action(key)
                if rec is None or rec.status == "pending":
                    break
                ids = (rec.result or {}).get("instance_ids") or []
                if rec.status == "done" and any(i in alive for i in ids):
                    break
                n += 1
                key = next_attempt_key(request.idempotency_key, n)
        return request if n == 0 else request.model_copy(update={"idempotency_key": key})

    # --- running ----------------------------------------------------------------
    def run(
        self,
        request: Request,
        *,
        units: int = 1,
        context: Mapping[str, object] | None = None,
        written: bool = False,
    ) -> ActionResult | None:
        """Carry out ``request`` (module doc). ``units`` per instance is recorded
        with launched instances. ``written``: the caller has just recorded this
        new key ``pending`` itself (in the transaction of the decision that
        asked for it), so step 1 is done. Returns None in a dry run or when
        retries ran out (the action stays pending and is re-sent later)."""
        kind = "launch" if isinstance(request, LaunchRequest) else "terminate"
        if self.dry_run:
            self.metrics.actions.labels(kind, "dry_run").inc()
            self.announce(request)
            return None
        if written:
            return self._send(request, units)
        payload = {"request": request.model_dump(mode="json"), "units": units, **(context or {})}
        with self.store.transaction() as tx:
            rec = tx.record_action(
                request.idempotency_key, self.owner, kind, payload, self.clock.now()
            )
        if rec.status == "done":
            self.metrics.actions.labels(kind, "replayed").inc()
            return _stored_result(rec)
        return self._send(request, units)

    def _send(self, request: Request, units: int) -> ActionResult | None:
        kind = "launch" if isinstance(request, LaunchRequest) else "terminate"
        key = request.idempotency_key
        try:
            result = self._call(request)
        except (CapacityUnavailableError, QuotaExceededError) as e:
            # An account quota refuses a launch like a pool out of capacity:
            # the launcher tries elsewhere (``broker.daemon.launch``).
            quota = isinstance(e, QuotaExceededError)
            self.metrics.actions.labels(kind, "quota" if quota else "capacity").inc()
            with self.store.transaction() as tx:
                tx.finish_action(
                    key,
                    "failed",
                    {
                        "error": str(e),
                        "error_kind": ErrorKind.QUOTA if quota else ErrorKind.CAPACITY,
                    },
                    self.clock.now(),
                )
            raise
        if result is None:
            return None
        now = self.clock.now()
        with self.store.transaction() as tx:
            tx.finish_action(
                key, "done" if result.ok else "failed", result.model_dump(mode="json"), now
            )
            if result.ok and isinstance(request, LaunchRequest):
                tx.upsert_instances(self.owner, _instances(request, result, units, now), now, key)
            elif isinstance(request, TerminateRequest) and result.instance_ids:
                # A partly refused terminate (ids not ours: ErrorKind.INPUT) still
                # ended the ids it lists: the store says so now, not at the next listing.
                tx.mark_instances(result.instance_ids, InstanceState.TERMINATED, now)
        outcome = "replayed" if result.replayed else ("done" if result.ok else "failed")
        self.metrics.actions.labels(kind, outcome).inc()
        log.info(
            kv(
                kind,
                key=key,
                outcome=outcome,
                instances=list(result.instance_ids),
                error=result.error or "-",
            )
        )
        return result

    def _call(self, request: Request) -> ActionResult | None:
        b = self.backoff
        for attempt in range(b.max_attempts):
            # The lease is checked and extended before every call: a daemon
            # that lost it (LeaseLostError) calls nothing.
            self.store.hold_lease(self.clock.now)
            try:
                if isinstance(request, LaunchRequest):
                    return self.provider.launch(request)
                return self.provider.terminate(request)
            except TransientError as e:
                self.metrics.actions.labels(
                    "launch" if isinstance(request, LaunchRequest) else "terminate", "throttled"
                ).inc()
                if attempt + 1 == b.max_attempts:
                    log.warning(kv("backoff_exhausted", key=request.idempotency_key, error=e))
                    return None
                # Full jitter (AWS Architecture Blog, "Exponential Backoff And Jitter").
                delay = self.rng.uniform(0, min(b.cap_s, b.base_s * 2**attempt))
                log.info(
                    kv(
                        "backoff",
                        key=request.idempotency_key,
                        attempt=attempt + 1,
                        delay_s=f"{delay:.2f}",
                    )
                )
                self.sleep(delay)
        return None

    def recover(self) -> int:
        """Re-send every pending action with its own key (after a crash)."""
        with self.store.transaction() as tx:
            pending = tx.pending_actions(self.owner)
        n = 0
        for rec in pending:
            req_data = rec.payload["request"]
            request: Request = (
                LaunchRequest.model_validate(req_data)
                if rec.kind == "launch"
                else TerminateRequest.model_validate(req_data)
            )
            log.info(kv("recover", key=rec.idempotency_key, kind=rec.kind))
            # Capacity: marked failed, and reconcile chooses again.
            with contextlib.suppress(CapacityUnavailableError):
                self._send(request, int(rec.payload.get("units", 1)))
            n += 1
        return n


def _stored_result(rec: ActionRecord) -> ActionResult:
    data = dict(rec.result or {})
    data.update(idempotency_key=rec.idempotency_key, replayed=True)
    data.setdefault("ok", True)
    return ActionResult.model_validate(data)


def _instances(
    request: LaunchRequest, result: ActionResult, units: int, now: datetime
) -> list[Instance]:
    tags = {
        OWNER_TAG: request.owner,
        WORKLOAD_TAG: request.workload,
        POOL_TAG: request.pool_key,
        GENERATION_TAG: str(request.plan_generation),
    }
    return [
        Instance(
            instance_id=i,
            pool_key=request.pool_key,
            tier=request.tier,
            workload=request.workload,
            state=InstanceState.PENDING,
            units=units,
            launched_at=now,
            tags=tags,
        )
        for i in result.instance_ids
    ]
