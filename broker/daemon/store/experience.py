"""Store queries of the account's own hazard evidence: revocations seen and
spot hours held, per pool.

Owns ``ExperienceTx`` (part of ``broker.daemon.store.store.Tx``):
``count_experience`` adds what happened since the last count (the owner's
spot instances' hours held in ``[counted_to, now)``, from the ``fleet``
table's launch and end times, and the revocation notices dated in it, joined
to their instance's pool) and moves ``counted_to`` to ``now``, in one
transaction, so a restart neither loses nor double-counts; ``experience``
reads the totals back as ``(revocations, held_hours)`` per pool key;
``revocation_times`` the account's spot revocations per pool, in Unix
seconds (what its failure domains are found in).

Must not: call a provider, decide, estimate a hazard
(``markets.hazard.learning`` turns the totals into one), or read the clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, insert, select

from broker.daemon.store.schema import fleet_t, notices_t, pool_experience_t
from broker.daemon.store.tx import TxBase
from markets.cloud_fleet import InstanceState
from markets.model import Tier

__all__ = ["ExperienceTx"]

_HOUR_S = 3600.0


class ExperienceTx(TxBase):
    """The account's revocations and spot hours per pool."""

    def experience(self, owner: str | None) -> dict[str, tuple[int, float]]:
        """``pool_key -> (revocations, held_hours)`` counted so far (``None``:
        every owner's, added: one account's daemons in turn)."""
        q = select(
            pool_experience_t.c.pool_key,
            pool_experience_t.c.revocations,
            pool_experience_t.c.held_hours,
        )
        if owner is not None:
            q = q.where(pool_experience_t.c.owner == owner)
        out: dict[str, tuple[int, float]] = {}
        for k, n, h in self.conn.execute(q):
            n0, h0 = out.get(str(k), (0, 0.0))
            out[str(k)] = (n0 + int(n), h0 + float(h))
        return out

    def counted_to(self, owner: str | None) -> datetime | None:
        q = select(pool_experience_t.c.counted_to)
        if owner is not None:
            q = q.where(pool_experience_t.c.owner == owner)
        times = [r[0] for r in self.conn.execute(q)]
        return max(times) if times else None

    def count_experience(
        self, owner: str, now: datetime, revocation_kinds: Sequence[str]
    ) -> dict[str, tuple[int, float]]:
        """Add the evidence of ``[counted_to, now)`` and return the totals
        (the first count takes everything the fleet table holds)."""
        since = self.counted_to(owner)
        if since is not None and since >= now:
            return self.experience(owner)
        totals = self.experience(owner)
        spot = self.conn.execute(
            select(
                fleet_t.c.instance_id,
                fleet_t.c.pool_key,
                fleet_t.c.state,
                fleet_t.c.launched_at,
                fleet_t.c.updated_at,
            ).where(fleet_t.c.owner == owner, fleet_t.c.tier == Tier.SPOT.value)
        ).all()
        pool_of: dict[str, str] = {}
        for iid, pool, state, launched, updated in spot:
            pool_of[str(iid)] = str(pool)
            # a terminated row's last update is when it ended (the daemon marks it)
            end = updated if state == InstanceState.TERMINATED.value else now
            start = launched if since is None else max(launched, since)
            held_s = (min(end, now) - start).total_seconds()
            if held_s > 0:
                n, h = totals.get(str(pool), (0, 0.0))
                totals[str(pool)] = (n, h + held_s / _HOUR_S)
        q = select(notices_t.c.instance_id).where(
            notices_t.c.kind.in_(list(revocation_kinds)), notices_t.c.at < now
        )
        if since is not None:
            q = q.where(notices_t.c.at >= since)
        for (iid,) in self.conn.execute(q):
            pool = pool_of.get(str(iid))
            if pool is not None:  # a notice for an instance not ours, or not spot
                n, h = totals.get(pool, (0, 0.0))
                totals[pool] = (n + 1, h)
        self.conn.execute(delete(pool_experience_t).where(pool_experience_t.c.owner == owner))
        if totals:
            self.conn.execute(
                insert(pool_experience_t),
                [
                    {
                        "owner": owner,
                        "pool_key": k,
                        "revocations": n,
                        "held_hours": h,
                        "counted_to": now,
                    }
                    for k, (n, h) in sorted(totals.items())
                ],
            )
        return totals

    def revocation_times(
        self, owner: str | None, revocation_kinds: Sequence[str]
    ) -> tuple[dict[str, list[float]], float]:
        """``pool_key -> [unix seconds]`` of the revocation notices on the
        owner's spot instances (``None``: every owner's), and the seconds of
        record (first launch to the last count; 0 without one)."""
        q = (
            select(fleet_t.c.pool_key, notices_t.c.at)
            .join(notices_t, notices_t.c.instance_id == fleet_t.c.instance_id)
            .where(
                fleet_t.c.tier == Tier.SPOT.value,
                notices_t.c.kind.in_(list(revocation_kinds)),
            )
        )
        if owner is not None:
            q = q.where(fleet_t.c.owner == owner)
        out: dict[str, list[float]] = {}
        for pool, at in self.conn.execute(q):
            out.setdefault(str(pool), []).append(at.timestamp())
        fq = select(fleet_t.c.launched_at)
        if owner is not None:
            fq = fq.where(fleet_t.c.owner == owner)
        first = self.conn.execute(fq.order_by(fleet_t.c.launched_at).limit(1)).scalar_one_or_none()
        to = self.counted_to(owner)
        span_s = (to - first).total_seconds() if first is not None and to is not None else 0.0
        return out, max(0.0, span_s)
