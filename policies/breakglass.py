"""Break-glass rules: circuit breakers, preemption budgets, the dollar cap,
the return-to-spot hysteresis and the rebalance-signal precision.

Owns small, deterministic state machines that the lifecycle manager
(``broker.lifecycle``) consults inside the notice window:

- ``CircuitBreakers``: one breaker per key (a pool, or a zone). It opens when
  ``open_after`` revocations land within ``window_s`` and stays open until
  ``cooldown`` seconds after the *latest* revocation, so a storm keeps it open.
  Clustering-aware: 83-97 % of preemptions are followed by another in the same
  zone within 5 minutes (docs/concepts/market.md), so a single revocation opens
  a pool breaker and two within 5 minutes open a zone breaker by default; a
  breaker that trips again within ``memory_s`` of closing doubles its cooldown
  (up to ``max_cooldown_s``): a zone that keeps revoking is kept out longer.
- ``ChurnBudget``: at most ``max_share`` of capacity (re)placed on revocable
  capacity in any ``window_s`` (5 % in 10 minutes, docs/concepts/effective-cost.md,
  example C), with a floor so a small fleet can still replace one node.
- ``resize_block_reason``: at most one preemption-driven resize per job per
  hour, and never sooner than the job's minimum dwell (no thrashing).
- ``BreakGlassLedger``: extra dollars committed to on-demand against the
  ``break_glass_cap_usd``; a commitment beyond the cap is refused, never
  trimmed silently.
- ``return_to_spot_verdict``: hysteresis for leaving on-demand: a minimum
  dwell, and savings x expected spot lifetime > switching cost.
- ``RebalancePrecision``: per pool, the share of rebalance recommendations
  followed by an interruption of the same instance within a window.

Times are float seconds on one axis (POSIX seconds of the notices), so the
rules stay cheap; a storm of 1,000 notices costs microseconds each here.

Must not: do I/O, read the clock (callers pass ``now_s``), know the fleet or
the cloud, or choose a pool (``broker.lifecycle`` does).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict

from markets.numbers import DAY_S, Bounded

__all__ = [
    "BreakGlassLedger",
    "BreakerSettings",
    "ChurnBudget",
    "CircuitBreakers",
    "RebalancePrecision",
    "ReturnVerdict",
    "resize_block_reason",
    "return_to_spot_verdict",
]


class BreakerSettings(BaseModel):
    """When a breaker opens and how long it stays open.

    Defaults are the pool breaker's: one revocation opens it (the pool has
    just shown it has no spare capacity), and it stays shut for 15 minutes
    after the latest revocation, three times the 5-minute window in which
    83-97 % of preemptions are followed by another (docs/concepts/market.md).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # revocations within window_s (a whole number: a boolean is refused)
    open_after: Annotated[int, Bounded(ge=1, le=1_000_000, integer=True)] = 1
    window_s: Annotated[float, Bounded(gt=0, le=DAY_S, unit="seconds")] = 300.0
    cooldown_s: Annotated[float, Bounded(gt=0, le=DAY_S, unit="seconds")] = 900.0
    max_cooldown_s: Annotated[float, Bounded(gt=0, le=7 * DAY_S, unit="seconds")] = 4 * 3600.0
    memory_s: Annotated[float, Bounded(ge=0, le=7 * DAY_S, unit="seconds")] = 3600.0


@dataclass(slots=True)
class _Breaker:
    recent: list[float]  # the latest ``open_after`` revocation times, sorted
    open_until_s: float = -math.inf
    cooldown_s: float = 0.0
    trips: int = 0


class CircuitBreakers:
    """Breakers keyed by pool key or zone key; see the module docstring."""

    def __init__(self, settings: BreakerSettings) -> None:
        self.settings = settings
        self._state: dict[str, _Breaker] = {}

    def record(self, key: str, at_s: float) -> bool:
        """Count one revocation at ``at_s``; true if this one opened the breaker.

        Out-of-order times are fine: only the latest ``open_after`` are kept.
        """
        s = self.settings
        b = self._state.get(key)
        if b is None:
            b = self._state[key] = _Breaker(recent=[])
        bisect.insort(b.recent, at_s)
        if len(b.recent) > s.open_after:
            del b.recent[0]
        if len(b.recent) < s.open_after or b.recent[-1] - b.recent[0] > s.window_s:
            return False
        was_open = at_s < b.open_until_s
        if not was_open:
            # A re-trip soon after closing: this key keeps revoking, stay out longer.
            recently_closed = at_s - b.open_until_s <= s.memory_s
            b.trips = b.trips + 1 if recently_closed else 1
            b.cooldown_s = min(s.cooldown_s * 2.0 ** (b.trips - 1), s.max_cooldown_s)
        b.open_until_s = max(b.open_until_s, at_s + b.cooldown_s)
        return not was_open

    def is_open(self, key: str, now_s: float) -> bool:
        b = self._state.get(key)
        return b is not None and now_s < b.open_until_s

    def open_until_s(self, key: str) -> float:
        """When the breaker closes (``-inf`` if it never opened)."""
        b = self._state.get(key)
        return -math.inf if b is None else b.open_until_s

    def open_keys(self, now_s: float) -> list[str]:
        return sorted(k for k, b in self._state.items() if now_s < b.open_until_s)


class ChurnBudget:
    """At most ``max_share`` of capacity (re)placed on revocable capacity in any
    ``window_s``; ``floor_units`` lets a fleet smaller than ``floor / share``
    still replace one node per window (5 % of 80 GPUs is 4, less than one
    8-GPU node)."""

    def __init__(self, window_s: float, max_share: float, floor_units: float) -> None:
        if window_s <= 0 or not 0.0 <= max_share <= 1.0 or floor_units < 0:
            raise ValueError("window_s > 0, 0 <= max_share <= 1 and floor_units >= 0")
        self.window_s = window_s
        self.max_share = max_share
        self.floor_units = floor_units
        self._events: deque[tuple[float, float]] = deque()
        self._used = 0.0

    def limit_units(self, capacity_units: float) -> float:
        return max(self.max_share * capacity_units, self.floor_units)

    def used_units(self, now_s: float) -> float:
        ev = self._events
        while ev and ev[0][0] <= now_s - self.window_s:
            self._used -= ev.popleft()[1]
        if not ev:
            self._used = 0.0  # no float drift once the window empties
        return self._used

    def allows(
        self, units: float, capacity_units: float, now_s: float, *, whole: bool = False
    ) -> bool:
        return self.allowing(capacity_units, now_s, whole=whole)(units)

    def allowing(
        self, capacity_units: float, now_s: float, *, whole: bool = False
    ) -> Callable[[float], bool]:
        """``allows`` at one instant for any number of units, the window read
        once (a placement that weighs ~300 pools asks it for each).

        ``whole``: the units move together or not at all (a synchronous
        gang's nodes, returned to spot as one): a move larger than the limit
        is let into an empty window alone, so at most one such move per
        window, as the floor lets a small fleet move one node. Without it a
        gang bigger than the limit could never leave on-demand."""
        used = self.used_units(now_s)
        limit = self.limit_units(capacity_units) + 1e-9
        if whole and used <= 1e-9:
            return lambda units: True
        return lambda units: used + units <= limit

    def record(self, units: float, now_s: float) -> None:
        self._events.append((now_s, units))
        self._used += units


def resize_block_reason(
    last_resize_s: float | None, now_s: float, min_dwell_s: float, budget_interval_s: float
) -> str | None:
    """Why a preemption-driven resize may not happen now (``None``: it may).

    Two rules: the job's own minimum dwell between resizes (rendezvous and
    re-sharding cost, docs/concepts/tiers.md) and the preemption budget of one
    preemption-driven resize per job per ``budget_interval_s`` (section 1, C).
    """
    if last_resize_s is None:
        return None
    since_s = now_s - last_resize_s
    if since_s < min_dwell_s:
        return f"resized {since_s / 60:.0f} min ago, minimum dwell {min_dwell_s / 60:.0f} min"
    if since_s < budget_interval_s:
        return (
            f"preemption budget: one resize per {budget_interval_s / 60:.0f} min, "
            f"last {since_s / 60:.0f} min ago"
        )
    return None


class BreakGlassLedger:
    """Extra on-demand dollars committed against the break-glass cap.

    ``cap_usd=None`` means no cap is configured (unbounded); ``0`` disables
    break-glass. A commitment is an estimate of extra dollars for a stretch of
    time; settling it with the dollars actually spent releases the rest.
    ``committed_usd`` (open commitments plus settled spend) never exceeds the
    cap through ``try_commit``.
    """

    def __init__(self, cap_usd: float | None) -> None:
        if cap_usd is not None and (cap_usd < 0 or not math.isfinite(cap_usd)):
            raise ValueError("cap_usd must be a finite number >= 0 or None")
        self.cap_usd = cap_usd
        self._open: dict[str, float] = {}
        self._settled_usd = 0.0

    @property
    def committed_usd(self) -> float:
        return self._settled_usd + sum(self._open.values())

    @property
    def remaining_usd(self) -> float:
        return math.inf if self.cap_usd is None else max(0.0, self.cap_usd - self.committed_usd)

    def restore(self, usd: float) -> None:
        """Count dollars committed before a restart (from the store) as spent."""
        if usd < 0 or not math.isfinite(usd):
            raise ValueError(f"restored dollars are a finite amount >= 0, got {usd!r}")
        self._settled_usd += usd

    def reopen(self, key: str, usd: float) -> None:
        """After a restart: an open commitment the store recorded, taken back
        as is (it was within the cap when committed)."""
        if usd < 0 or not math.isfinite(usd):
            raise ValueError(f"a commitment is a finite amount >= 0, got {usd!r}")
        self._open[key] = self._open.get(key, 0.0) + usd

    def open_usd(self, key: str) -> float:
        return self._open.get(key, 0.0)

    def try_commit(self, key: str, usd: float) -> bool:
        """Add ``usd`` to ``key``'s open commitment if the cap allows all of it."""
        if usd < 0 or not math.isfinite(usd):
            raise ValueError(f"a commitment is a finite amount >= 0, got {usd!r}")
        if usd > self.remaining_usd + 1e-9:
            return False
        self._open[key] = self._open.get(key, 0.0) + usd
        return True

    def settle(self, key: str, spent_usd: float) -> float:
        """Close ``key`` having spent ``spent_usd``; return the dollars released."""
        committed = self._open.pop(key, 0.0)
        spent = max(0.0, spent_usd)
        self._settled_usd += spent
        return committed - spent


@dataclass(frozen=True, slots=True)
class ReturnVerdict:
    go: bool
    reason: str
    savings_usd_per_hour: float
    expected_lifetime_hours: float
    switching_cost_usd: float


def return_to_spot_verdict(
    *,
    held_s: float,
    min_dwell_s: float,
    on_demand_usd_per_hour: float,
    spot_usd_per_hour: float,
    spot_hazard_per_hour: float,
    switching_cost_usd: float,
    max_lifetime_hours: float,
    margin: float = 1.0,
) -> ReturnVerdict:
    """Hysteresis for moving break-glass capacity back to spot.

    Go only when the on-demand stretch has lasted ``min_dwell_s`` (no flapping
    back at the first quiet minute) and the savings over the spot capacity's
    expected lifetime (``1 / hazard``, capped at ``max_lifetime_hours``) pay
    for the move ``margin`` times over: a move stalls the job for its restart,
    which costs ``switching_cost_usd``.
    """
    savings = on_demand_usd_per_hour - spot_usd_per_hour
    lifetime = (
        max_lifetime_hours
        if spot_hazard_per_hour <= 0
        else min(1.0 / spot_hazard_per_hour, max_lifetime_hours)
    )

    def verdict(go: bool, reason: str) -> ReturnVerdict:
        return ReturnVerdict(go, reason, savings, lifetime, switching_cost_usd)

    if held_s < min_dwell_s:
        return verdict(
            False, f"on on-demand {held_s / 60:.0f} min of a {min_dwell_s / 60:.0f}-min dwell"
        )
    gain = savings * lifetime
    if gain <= margin * switching_cost_usd:
        return verdict(
            False,
            f"saving ${savings:,.2f}/h over an expected {lifetime:.1f} h on spot "
            f"(${gain:,.0f}) does not beat the ${switching_cost_usd:,.0f} cost of moving",
        )
    return verdict(
        True,
        f"saving ${savings:,.2f}/h over an expected {lifetime:.1f} h on spot "
        f"(${gain:,.0f}) beats the ${switching_cost_usd:,.0f} cost of moving",
    )


class RebalancePrecision:
    """Does a rebalance recommendation predict an interruption, per pool?

    A recommendation is a *hit* when an interruption of the same instance
    follows within ``window_s``, a *miss* when the window passes without one;
    it counts only once resolved. ``precision(pool)`` is hits / resolved;
    ``predictive(pool)`` needs ``min_samples`` resolved and ``min_precision``.
    Seed with recorded counts (``seed``) so a restart keeps the history.
    """

    def __init__(self, window_s: float, min_samples: int, min_precision: float) -> None:
        self.window_s = window_s
        self.min_samples = min_samples
        self.min_precision = min_precision
        self._hits: dict[str, int] = {}
        self._resolved: dict[str, int] = {}
        self._pending: dict[str, tuple[str, float]] = {}  # instance -> (pool, at)
        self._order: deque[tuple[float, str]] = deque()

    def seed(self, pool_key: str, hits: int, resolved: int) -> None:
        if not 0 <= hits <= resolved:
            raise ValueError("0 <= hits <= resolved")
        self._hits[pool_key] = self._hits.get(pool_key, 0) + hits
        self._resolved[pool_key] = self._resolved.get(pool_key, 0) + resolved

    def record_rebalance(self, instance_id: str, pool_key: str, at_s: float) -> None:
        if instance_id not in self._pending:
            self._pending[instance_id] = (pool_key, at_s)
            self._order.append((at_s, instance_id))

    def record_interruption(self, instance_id: str, at_s: float) -> None:
        pending = self._pending.pop(instance_id, None)
        if pending is None:
            return
        pool, rb_at = pending
        hit = 0.0 <= at_s - rb_at <= self.window_s
        self._resolved[pool] = self._resolved.get(pool, 0) + 1
        self._hits[pool] = self._hits.get(pool, 0) + int(hit)

    def expire(self, now_s: float) -> None:
        """Resolve, as misses, recommendations whose window has passed."""
        while self._order and self._order[0][0] < now_s - self.window_s:
            at_s, iid = self._order.popleft()
            pending = self._pending.get(iid)
            if pending is not None and pending[1] == at_s:
                del self._pending[iid]
                self._resolved[pending[0]] = self._resolved.get(pending[0], 0) + 1

    def counts(self, pool_key: str) -> tuple[int, int]:
        """(hits, resolved) for a pool."""
        return self._hits.get(pool_key, 0), self._resolved.get(pool_key, 0)

    def precision(self, pool_key: str) -> float | None:
        hits, resolved = self.counts(pool_key)
        return None if resolved == 0 else hits / resolved

    def predictive(self, pool_key: str) -> bool:
        hits, resolved = self.counts(pool_key)
        return resolved >= self.min_samples and hits >= self.min_precision * resolved
