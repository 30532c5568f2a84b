"""Do rebalance recommendations predict interruptions? A track record per
pool, with a confidence that borrows the fleet's.

Owns ``RebalanceRecord``. A recommendation is a *hit* when an interruption
of the same instance follows within ``window_s``, a *miss* when the window
passes without one; it counts once resolved. AWS states that the signal
marks an *elevated risk* of interruption, can come sooner than the
two-minute notice, sometimes comes with it or not at all, and is sent on a
best-effort basis (EC2 User Guide, "EC2 instance rebalance
recommendations"): how often it is followed by an interruption is not
published, so it is learned.

Confidence (beta-binomial shrinkage): the fleet's rate is
``(H + 1) / (N + 2)`` over every pool's ``H`` hits of ``N`` resolved (a
uniform prior); a pool's confidence is ``(h + k p) / (n + k)`` with its own
``h`` of ``n`` and ``k = prior_samples`` pseudo-samples at the fleet's rate
``p``. A pool with no record of its own gets the fleet's rate, and its own
record outweighs it once ``n`` passes ``k``: no pool needs ten samples of its
own. ``acts(pool)``: the fleet has ``min_fleet_samples`` resolved and the
confidence is above ``min_precision``.

A recommendation acted on (``acted``: the caller replaces the instance and
ends it) resolves as a hit if its interruption is still seen, and otherwise
not at all: that it would have been interrupted is never known.

``outcomes()`` hands out the resolutions since the last call, for the
caller to persist; ``seed`` takes persisted counts back after a restart.

Must not: do I/O, read the clock (callers pass times), or decide what to do
about a recommendation (``broker.lifecycle`` does).
"""

from __future__ import annotations

from collections import deque

__all__ = ["RebalanceRecord"]


class RebalanceRecord:
    """Hits and resolved recommendations per pool; see the module docstring."""

    def __init__(
        self,
        window_s: float,
        *,
        prior_samples: float = 5.0,
        min_fleet_samples: int = 10,
        min_precision: float = 0.5,
    ) -> None:
        if window_s <= 0 or prior_samples < 0 or min_fleet_samples < 0:
            raise ValueError("window_s > 0, prior_samples >= 0 and min_fleet_samples >= 0")
        self.window_s = window_s
        self.prior_samples = prior_samples
        self.min_fleet_samples = min_fleet_samples
        self.min_precision = min_precision
        self._hits: dict[str, int] = {}
        self._resolved: dict[str, int] = {}
        self._fleet = [0, 0]  # hits, resolved
        self._pending: dict[str, tuple[str, float]] = {}  # instance -> (pool, at)
        self._order: deque[tuple[float, str]] = deque()
        self._new: list[tuple[str, bool]] = []
        self._acted: set[str] = set()

    def seed(self, pool_key: str, hits: int, resolved: int) -> None:
        """Counts recorded before (the store's), added to the pool's."""
        if not 0 <= hits <= resolved:
            raise ValueError("0 <= hits <= resolved")
        self._add(pool_key, hits, resolved)

    def _add(self, pool: str, hits: int, resolved: int) -> None:
        self._hits[pool] = self._hits.get(pool, 0) + hits
        self._resolved[pool] = self._resolved.get(pool, 0) + resolved
        self._fleet[0] += hits
        self._fleet[1] += resolved

    def _resolve(self, pool: str, hit: bool) -> None:
        self._add(pool, int(hit), 1)
        self._new.append((pool, hit))

    def record_rebalance(self, instance_id: str, pool_key: str, at_s: float) -> None:
        if instance_id not in self._pending:
            self._pending[instance_id] = (pool_key, at_s)
            self._order.append((at_s, instance_id))

    def record_interruption(self, instance_id: str, at_s: float) -> None:
        pending = self._pending.pop(instance_id, None)
        self._acted.discard(instance_id)
        if pending is not None:
            pool, rb_at = pending
            self._resolve(pool, 0.0 <= at_s - rb_at <= self.window_s)

    def acted(self, instance_id: str) -> None:
        """The caller acted on this recommendation (it ends the instance
        itself): an interruption seen before that still counts as a hit, but
        a window that passes is no miss, only an outcome never seen."""
        if instance_id in self._pending:
            self._acted.add(instance_id)

    def expire(self, now_s: float) -> None:
        """Resolve, as misses, recommendations whose window has passed."""
        while self._order and self._order[0][0] < now_s - self.window_s:
            at_s, iid = self._order.popleft()
            pending = self._pending.get(iid)
            if pending is not None and pending[1] == at_s:
                del self._pending[iid]
                if iid in self._acted:
                    self._acted.discard(iid)  # ended by the caller: not seen
                else:
                    self._resolve(pending[0], False)

    def outcomes(self) -> list[tuple[str, bool]]:
        """``(pool, hit)`` resolved since the last call (then forgotten here)."""
        out, self._new = self._new, []
        return out

    def counts(self, pool_key: str) -> tuple[int, int]:
        """(hits, resolved) of a pool."""
        return self._hits.get(pool_key, 0), self._resolved.get(pool_key, 0)

    def fleet_rate(self) -> float:
        hits, resolved = self._fleet
        return (hits + 1.0) / (resolved + 2.0)

    def confidence(self, pool_key: str) -> float:
        """The probability that the pool's next recommendation is followed by
        an interruption: its record shrunk to the fleet's rate."""
        hits, resolved = self.counts(pool_key)
        k = self.prior_samples
        return (hits + k * self.fleet_rate()) / (resolved + k)

    def acts(self, pool_key: str) -> bool:
        return self._fleet[1] >= self.min_fleet_samples and (
            self.confidence(pool_key) > self.min_precision
        )
