"""Launching for the daemon: one request, and the next pool when capacity is refused.

Owns: ``Launcher``. On ``CapacityUnavailableError`` the pool is skipped for
``markets.ttl.UNAVAILABLE_OFFERING_TTL_S`` (``FleetBook.mark_unavailable``:
the lifecycle's one book), the lifecycle hears of the failure (for each
decision the request carried), and, with ``fallback``, the pool the
lifecycle's placement rule ranks first among those not yet tried gets the
same work (``FleetBook.next_pool``, ``broker.lifecycle.fallback``) under a
new idempotency key derived from the old one and the pool
(``markets.keys.alternate_pool_key``), so a retried fallback is still sent
once. For example: ``1a/p3 refused -> 1a/p3 skipped for the TTL ->
1b/p3 (same work) refused -> 1c/p3 ok``. A launch an account quota refuses
(``QuotaExceededError``, ``ErrorKind.QUOTA``) is handled the same way: the
pool is skipped and the next one tried (another region, another tier's
pool), never a stop of the daemon.

Must not: decide what to launch (the plan and the lifecycle do) or bypass the
executor's write-ahead record.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from broker.daemon.book import FleetBook
from broker.daemon.executor import Executor, kv
from broker.daemon.lifecycle import Lifecycle
from markets.clock import Clock
from markets.cloud_fleet import LaunchRequest
from markets.errors import CapacityUnavailableError, QuotaExceededError
from markets.keys import alternate_pool_key

__all__ = ["Launcher"]

log = logging.getLogger("spotfolio.daemon")


class Launcher:
    """Sends launches through the executor, moving on to the next pool."""

    def __init__(
        self,
        executor: Executor,
        book: FleetBook,
        lifecycle: Lifecycle,
        clock: Clock,
    ) -> None:
        self._executor = executor
        self._book = book
        self._lifecycle = lifecycle
        self._clock = clock

    def launch(
        self,
        req: LaunchRequest,
        *,
        context: Mapping[str, object],
        notice_ids: Sequence[str] = (),
        fallback: bool = True,
        written: bool = False,
    ) -> list[str] | None:
        """Launch; on insufficient capacity the pool is skipped for
        ``UNAVAILABLE_OFFERING_TTL_S`` and, with ``fallback``, the next acceptable pool
        is tried. Returns the instance ids (empty in a dry run or when retries
        ran out), or None when capacity was refused and not found elsewhere.
        ``written``: the caller recorded ``req`` pending itself."""
        tried: set[str] = set()
        book = self._book
        while True:
            units = book.units(req.pool_key)
            try:
                res = self._executor.run(req, units=units, context=context, written=written)
                return list(res.instance_ids) if res is not None and res.ok else []
            except (CapacityUnavailableError, QuotaExceededError):
                tried.add(req.pool_key)
                book.mark_unavailable(req.pool_key, req.tier, self._clock.now())
                nids: Sequence[str | None] = notice_ids or [None]
                for nid in nids:  # each decision the request carried
                    self._lifecycle.record_launch_failure(req.pool_key, req.tier, notice_id=nid)
                if not fallback:
                    return None
                alt = book.next_pool(
                    req.workload, req.pool_key, req.tier, req.count, tried, self._clock.now()
                )
                if alt is None:
                    log.warning(
                        kv(
                            "no_pool_left",
                            workload=req.workload,
                            tier=req.tier.value,
                            tried=sorted(tried),
                        )
                    )
                    return None
                pool, count = alt
                log.info(
                    kv(
                        "next_pool",
                        workload=req.workload,
                        failed=req.pool_key,
                        pool=pool,
                        count=count,
                    )
                )
                moved = req.model_copy(
                    update={"idempotency_key": alternate_pool_key(req.idempotency_key, pool)}
                )
                key = self._executor.resolve_launch_key(moved, ())
                req = key.model_copy(update={"pool_key": pool, "count": count})
                written = False  # a new key: the executor writes it ahead
