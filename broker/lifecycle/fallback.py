"""Which pool instead? The one placement rule, for the lifecycle and the daemon.

Owns ``UnavailableOfferings`` (the one book of pools that just refused
capacity, each skipped for ``markets.ttl.UNAVAILABLE_OFFERING_TTL_S``),
``Blockers`` (what can block a pool now: its breaker, its zone's breaker, that
book), ``options`` (a workload's pools on one tier in rank order, each with
why it is blocked, if it is) and ``instead`` (the first pool not blocked, and
how many instances of it give the lost work).

The rank is the lifecycle's (``broker.lifecycle.view.Candidates``, built from
the snapshot's ``policies.cost_table.CostTable``): spot by effective cost per
unit of work (hazard, checkpoints and restarts priced in), then hazard, then
placement score (higher first), then the workload's preference; on-demand by
cost per unit of work, then preference. Breakers apply to spot only
(on-demand is not revoked). A training gang keeps its instance type when the
caller says so (``same_type``: rigid parallel groups).

Callers: the lifecycle's replacement and break-glass choices
(``broker.lifecycle.choices.find_spot`` and ``pick_on_demand`` walk
``options``, adding their own churn, share and price checks), and the daemon's
substitution of a refused pool at reconcile and next-pool fallback at launch
(``broker.daemon.book``, ``broker.daemon.launch``), which reach ``instead``
through ``LifecycleManager.instead`` (the daemon's ``Lifecycle`` protocol).

Must not: change state other than the book's marks, read a clock, or do I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from broker.lifecycle.view import Candidate, Candidates
from markets.model import Tier
from markets.ttl import UNAVAILABLE_OFFERING_TTL_S
from policies.breakglass import CircuitBreakers

__all__ = ["Blockers", "UnavailableOfferings", "instead", "options"]


@dataclass(slots=True)
class UnavailableOfferings:
    """Pools (with their tier) that refused capacity, and until when (epoch s).

    One book for the whole process: the daemon's launcher marks it on
    ``CapacityUnavailableError``, the lifecycle reads and marks the same
    object. The TTL is not configurable (``markets.ttl``)."""

    ttl_s: float = UNAVAILABLE_OFFERING_TTL_S
    until: dict[tuple[str, Tier], float] = field(default_factory=dict)

    def mark(self, pool_key: str, tier: Tier, now_s: float) -> None:
        self.until[(pool_key, tier)] = now_s + self.ttl_s

    def is_unavailable(self, pool_key: str, tier: Tier, now_s: float) -> bool:
        until = self.until.get((pool_key, tier))
        return until is not None and now_s < until

    def pools(self, tier: Tier, now_s: float) -> frozenset[str]:
        """The pools on ``tier`` skipped now (expired marks are forgotten)."""
        for k in [k for k, t in self.until.items() if t <= now_s]:
            del self.until[k]
        return frozenset(p for p, t in self.until if t is tier)


@dataclass(slots=True)
class Blockers:
    """What can block a pool now, shared by every caller of the rule."""

    pool_breakers: CircuitBreakers
    zone_breakers: CircuitBreakers
    unavailable: UnavailableOfferings

    def why_blocked(self, c: Candidate, tier: Tier, now_s: float) -> str | None:
        if tier is Tier.SPOT:
            if self.pool_breakers.is_open(c.pool_key, now_s):
                return "pool breaker open"
            if self.zone_breakers.is_open(c.zone_key, now_s):
                return "zone breaker open"
        if self.unavailable.is_unavailable(c.pool_key, tier, now_s):
            return "out of capacity"
        return None


def options(
    cands: Candidates,
    blockers: Blockers,
    tier: Tier,
    *,
    now_s: float,
    same_type: str | None = None,
    tried: Collection[str] = (),
) -> Iterator[tuple[Candidate, str | None]]:
    """The workload's pools usable on ``tier`` in rank order (module
    docstring), ``same_type`` only if given, none of ``tried``; each with why
    it is blocked now (``None``: it is not)."""
    ranked = cands.spot if tier is Tier.SPOT else cands.on_demand
    for c in ranked:
        if (same_type is not None and c.instance_type != same_type) or c.pool_key in tried:
            continue
        yield c, blockers.why_blocked(c, tier, now_s)


def instead(
    cands: Candidates,
    blockers: Blockers,
    tier: Tier,
    work_per_hour: float,
    *,
    now_s: float,
    same_type: str | None = None,
    tried: Collection[str] = (),
) -> tuple[Candidate, int] | None:
    """The first pool of ``options`` not blocked, and the instances of it
    that supply ``work_per_hour`` (``None``: every pool is blocked or tried)."""
    for c, why in options(cands, blockers, tier, now_s=now_s, same_type=same_type, tried=tried):
        if why is None:
            return c, c.instances_for(work_per_hour)
    return None
