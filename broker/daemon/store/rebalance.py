"""Store queries of the rebalance track record.

Owns: ``RebalanceTx``: per owner and pool, the counts of rebalance
recommendations resolved and followed by an interruption, read back whole
at start-up and added to as the lifecycle resolves them. Part of
``broker.daemon.store.store.Tx``.

Must not: call a provider, decide, or read the clock (callers pass ``now``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import insert, select, update

from broker.daemon.store.schema import rebalance_t
from broker.daemon.store.tx import TxBase

__all__ = ["RebalanceTx"]


class RebalanceTx(TxBase):
    """The rebalance record inside one transaction."""

    def rebalance_record(self, owner: str) -> list[tuple[str, int, int]]:
        """``(pool, hits, resolved)`` of every pool with a record, by pool."""
        t = rebalance_t
        rows = self.conn.execute(
            select(t.c.pool_key, t.c.hits, t.c.resolved)
            .where(t.c.owner == owner)
            .order_by(t.c.pool_key)
        ).all()
        return [(str(p), int(h), int(r)) for p, h, r in rows]

    def add_rebalance_outcomes(
        self, owner: str, outcomes: Iterable[tuple[str, bool]], now: datetime
    ) -> None:
        """Count each ``(pool, hit)`` resolution in its pool's row."""
        per_pool: dict[str, tuple[int, int]] = {}
        for pool, hit in outcomes:
            h, r = per_pool.get(pool, (0, 0))
            per_pool[pool] = (h + int(hit), r + 1)
        t = rebalance_t
        for pool, (hits, resolved) in sorted(per_pool.items()):
            done = self.conn.execute(
                update(t)
                .where(t.c.owner == owner, t.c.pool_key == pool)
                .values(hits=t.c.hits + hits, resolved=t.c.resolved + resolved, updated_at=now)
            )
            if done.rowcount == 0:
                self.conn.execute(
                    insert(t).values(
                        owner=owner, pool_key=pool, hits=hits, resolved=resolved, updated_at=now
                    )
                )
