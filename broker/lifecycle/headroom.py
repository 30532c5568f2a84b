"""What each account quota has left for the lifecycle's next launch.

Owns ``QuotaRoom``: the snapshot's quotas less what the live fleet and the
launches decided but not yet seen take (``markets.quotas.quota_use_of``), and
``fits`` (whether a number of instances of a pool on a tier stays within
every quota). The placement rule (``broker.lifecycle.fallback.Blockers``)
reads it, so a replacement or a break-glass launch looks ahead to a quota
rather than learning of it from a refused launch.

Must not: read a cloud or a clock, or hold on past one decision (the fleet
and the pending launches it counted move on; the chooser builds a new one).
"""

from __future__ import annotations

from collections.abc import Sequence

from markets.cloud_fleet import Instance
from markets.model import MarketSnapshot, PoolSnapshot, Quota, Tier
from markets.quotas import quota_use, quota_use_of

__all__ = ["QuotaRoom"]

_EPS = 1e-9


class QuotaRoom:
    """The room left in each of a snapshot's quotas."""

    __slots__ = ("_left", "_pools", "_quotas")

    def __init__(
        self,
        snapshot: MarketSnapshot,
        running: Sequence[Instance],
        pending: Sequence[tuple[str, Tier, int]] = (),
    ) -> None:
        counted = [(i.pool_key, i.tier, 1.0) for i in running]
        counted += [(key, tier, float(n)) for key, tier, n in pending if n > 0]
        used = quota_use_of(snapshot, counted)
        self._quotas: tuple[Quota, ...] = snapshot.quotas
        self._left = {q.key: q.limit - used[q.key] for q in snapshot.quotas}
        self._pools: dict[str, PoolSnapshot] = snapshot.by_key()

    def left(self, quota_key: str) -> float:
        """What ``quota_key`` has left (its unit: vCPUs or GPUs)."""
        return self._left[quota_key]

    def fits(self, pool_key: str, tier: Tier, instances: int) -> bool:
        """Whether ``instances`` more of ``pool_key`` on ``tier`` stay within
        every quota (a pool the snapshot does not know takes nothing)."""
        snap = self._pools.get(pool_key)
        if snap is None:
            return True
        for q in self._quotas:
            take = instances * quota_use(q, snap.pool, snap.instance, tier)
            if take > 0 and take > self._left[q.key] + _EPS:
                return False
        return True
