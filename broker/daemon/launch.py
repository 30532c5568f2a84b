"""Launching for the daemon: one request, and the next pool when capacity is refused.

Owns: ``launch``. On ``CapacityUnavailableError`` the pool is skipped for
``backoff.unavailable_ttl_s``, the lifecycle hears of the failure (for each
decision the request carried), and, with ``fallback``, the cheapest
acceptable pool not yet tried gets the same work (``FleetBook.next_pool``)
under a new idempotency key derived from the old one and the pool, so a
retried fallback is still sent once.

Must not: decide what to launch (the plan and the lifecycle do) or bypass the
executor's write-ahead record.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from broker.daemon.executor import kv
from markets.errors import CapacityUnavailableError
from markets.fleet import LaunchRequest

if TYPE_CHECKING:
    from broker.daemon.daemon import Daemon

__all__ = ["launch"]

log = logging.getLogger("spotfolio.daemon")


def launch(
    d: Daemon,
    req: LaunchRequest,
    *,
    context: dict[str, Any],
    notice_ids: Sequence[str] = (),
    fallback: bool = True,
    written: bool = False,
) -> list[str] | None:
    """Launch; on insufficient capacity the pool is skipped for
    ``unavailable_ttl_s`` and, with ``fallback``, the next acceptable pool
    is tried. Returns the instance ids (empty in a dry run or when retries
    ran out), or None when capacity was refused and not found elsewhere."""
    tried: set[str] = set()
    while True:
        units = d.book.units(req.pool_key)
        try:
            res = d.executor.run(req, units=units, context=context, written=written)
            return list(res.instance_ids) if res is not None and res.ok else []
        except CapacityUnavailableError:
            tried.add(req.pool_key)
            d.book.mark_unavailable(
                req.pool_key, req.tier, d.clock.now(), d.config.backoff.unavailable_ttl_s
            )
            nids: Sequence[str | None] = notice_ids or [None]
            for nid in nids:  # each decision the request carried
                d.lifecycle.record_launch_failure(req.pool_key, req.tier, notice_id=nid)
            if not fallback:
                return None
            alt = d.book.next_pool(
                req.workload, req.pool_key, req.tier, req.count, tried, d.clock.now()
            )
            if alt is None:
                log.warning(
                    kv(
                        "no_pool_left",
                        workload=req.workload,
                        tier=req.tier.value,
                        tried=",".join(sorted(tried)),
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
            key = d.executor.resolve_launch_key(
                req.model_copy(update={"idempotency_key": _alt_key(req.idempotency_key, pool)}),
                (),
            )
            req = key.model_copy(update={"pool_key": pool, "count": count})
            written = False  # a new key: the executor writes it ahead


def _alt_key(key: str, pool: str) -> str:
    return "sf-" + hashlib.sha256(f"{key}@{pool}".encode()).hexdigest()[:40]
