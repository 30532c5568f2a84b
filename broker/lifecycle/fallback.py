"""Which pool instead? The one placement rule, for the lifecycle and the daemon.

Owns ``UnavailableOfferings`` (the one book of pools that just refused
capacity, each skipped for ``markets.ttl.UNAVAILABLE_OFFERING_TTL_S``),
``Blockers`` (what can block a pool now: its breaker, its zone's breaker, that
book, and an account quota without room for the launch, when the caller sets
``quota``: ``broker.lifecycle.headroom``), ``options`` (a workload's pools
on one tier in rank order, each with why it is blocked, if it is) and
``instead`` (the first pool not blocked, and how many instances of it give
the lost work).

The rank is the lifecycle's (``broker.lifecycle.view.Candidates``, built from
the snapshot's ``policies.cost_table.CostTable``): spot by effective cost per
unit of work (hazard, checkpoints and restarts priced in), then hazard, then
placement score (higher first), then the workload's preference; on-demand by
cost per unit of work, then preference. Breakers apply to spot only
(on-demand is not revoked). A training gang keeps its instance type when the
caller says so (``same_type``: rigid parallel groups).

Out of capacity (``instead`` given the refused type, ``failed_type``) the
order is the workload's, not the cost rank's: the refused type in its other
pools first (what the plan chose; a gang keeps it), then the other
acceptable types in the workload's preference order (``instance_types``;
within a type, the rank above), then, if the workload has
``allow_upgrade``, larger types of the refused type's family that it does
not list (``upgrades``: the same capacity units and GPU chip, at least as
many vCPUs, as much memory and GPU memory, more of one: ``g5.xlarge ->
g5.2xlarge``, ``p4d.24xlarge -> p4de.24xlarge``), cheapest first, doing
the refused type's work per instance. For example: ``1a/p4d refused ->
1b/p4d refused -> 1a/p5 (preferred next) refused -> 1a/p4de (upgrade)``.

Callers: the lifecycle's replacement and break-glass choices
(``broker.lifecycle.choices.find_spot`` and ``pick_on_demand`` walk
``options``, adding their own churn, share and price checks), and the daemon's
substitution of a refused pool at reconcile and next-pool fallback at launch
(``broker.daemon.book``, ``broker.daemon.launch``), which reach ``instead``
through ``LifecycleManager.instead`` (the daemon's ``Lifecycle`` protocol).

Must not: change state other than the book's marks, read a clock, or do I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from broker.lifecycle.headroom import QuotaRoom
from broker.lifecycle.view import Candidate, Candidates
from markets.keys import PoolKey
from markets.model import InstanceType, PoolSnapshot, Tier
from markets.ttl import UNAVAILABLE_OFFERING_TTL_S
from policies.breakglass import CircuitBreakers

__all__ = ["Blockers", "UnavailableOfferings", "instead", "is_upgrade", "options", "upgrades"]


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
    # Set by the chooser for one decision (the fleet it counted moves on).
    quota: QuotaRoom | None = field(default=None, kw_only=True)

    def why_blocked(self, c: Candidate, tier: Tier, now_s: float, instances: int = 1) -> str | None:
        if tier is Tier.SPOT:
            if self.pool_breakers.is_open(c.pool_key, now_s):
                return "pool breaker open"
            if self.zone_breakers.is_open(c.zone_key, now_s):
                return "zone breaker open"
        if self.unavailable.is_unavailable(c.pool_key, tier, now_s):
            return "out of capacity"
        if self.quota is not None and not self.quota.fits(c.pool_key, tier, instances):
            return "over quota"
        return None


def _chip(t: InstanceType) -> str | None:
    """The GPU chip without its memory size (``A100-80GB`` -> ``A100``)."""
    return None if t.gpu_model is None else t.gpu_model.split("-", 1)[0]


def is_upgrade(small: InstanceType, big: InstanceType) -> bool:
    """``big`` is a larger type of ``small``'s family (module docstring)."""
    if big.name == small.name or big.provider != small.provider:
        return False
    if not big.family.startswith(small.family) or big.units != small.units:
        return False
    if _chip(big) != _chip(small) or big.gpus != small.gpus:
        return False
    mine = (small.vcpus, small.memory_gib, small.gpu_memory_gib or 0.0)
    theirs = (big.vcpus, big.memory_gib, big.gpu_memory_gib or 0.0)
    return all(b >= a for a, b in zip(mine, theirs, strict=True)) and theirs != mine


def upgrades(
    failed: Candidate,
    failed_type: InstanceType,
    pools: Iterable[PoolSnapshot],
    listed: Collection[str],
) -> list[Candidate]:
    """Pools of larger types of ``failed_type``'s family (``is_upgrade``) not
    among the workload's ``listed`` types, as candidates doing ``failed``'s
    work per instance at their own prices (``failed``'s effective spot
    factor: the same chip, the pool's own hazard unknown to the table),
    cheapest on-demand per work first."""
    out: list[Candidate] = []
    work = failed.work_per_instance
    spot_factor = (
        failed.spot_usd_per_work_hour * work / failed.spot_usd_per_hour
        if failed.spot_usd_per_work_hour is not None and failed.spot_usd_per_hour
        else None
    )
    for p in pools:
        t = p.instance
        if t.name in listed or not is_upgrade(failed_type, t):
            continue
        key = p.pool.key
        spot = p.spot_usd_per_hour
        out.append(
            Candidate(
                pool_key=key,
                zone_key=PoolKey.parse(key).zone_key,
                instance_type=t.name,
                units=t.units,
                work_per_instance=work,
                spot_usd_per_hour=spot,
                on_demand_usd_per_hour=p.on_demand_usd_per_hour,
                spot_usd_per_work_hour=(
                    None if spot is None or spot_factor is None else spot * spot_factor / work
                ),
                on_demand_usd_per_work_hour=p.on_demand_usd_per_hour / work,
                hazard_per_hour=p.hazard.rate_per_hour,
                preference_rank=len(listed),
                placement_score=p.placement_score,
            )
        )
    out.sort(key=lambda c: (c.on_demand_usd_per_work_hour, c.pool_key))
    return out


def _fallback_order(
    ranked: Sequence[Candidate], failed_type: str, extra: Sequence[Candidate]
) -> list[Candidate]:
    """The refused type's pools, then the other types by preference, then ``extra``."""
    own = [c for c in ranked if c.instance_type == failed_type]
    others = sorted(
        (c for c in ranked if c.instance_type != failed_type),
        key=lambda c: c.preference_rank,  # stable: the rank order within a type
    )
    return [*own, *others, *extra]


def options(
    cands: Candidates,
    blockers: Blockers,
    tier: Tier,
    *,
    now_s: float,
    same_type: str | None = None,
    tried: Collection[str] = (),
    failed_type: str | None = None,
    extra: Sequence[Candidate] = (),
    work_per_hour: float | None = None,
) -> Iterator[tuple[Candidate, str | None]]:
    """The workload's pools usable on ``tier`` in rank order (module
    docstring), ``same_type`` only if given, none of ``tried`` (pool or zone
    keys: a zone's every pool is out); each with why
    it is blocked now (``None``: it is not). With ``failed_type`` (out of
    capacity), in the fallback order instead, ``extra`` (upgrades) last.
    ``work_per_hour``: the work to place, so a quota is checked for the
    instances it takes (else for one)."""
    ranked: Sequence[Candidate] = cands.spot if tier is Tier.SPOT else cands.on_demand
    if failed_type is not None:
        if tier is Tier.SPOT:
            extra = [c for c in extra if c.spot_usd_per_work_hour is not None]
        ranked = _fallback_order(ranked, failed_type, extra)
        if same_type is not None:  # a gang keeps its type, or its upgrade
            keep = {same_type, *(c.instance_type for c in extra)}
            same_type = None
            ranked = [c for c in ranked if c.instance_type in keep]
    for c in ranked:
        if same_type is not None and c.instance_type != same_type:
            continue
        if c.pool_key in tried or c.zone_key in tried:
            continue
        n = 1 if work_per_hour is None or blockers.quota is None else c.instances_for(work_per_hour)
        yield c, blockers.why_blocked(c, tier, now_s, n)


def instead(
    cands: Candidates,
    blockers: Blockers,
    tier: Tier,
    work_per_hour: float,
    *,
    now_s: float,
    same_type: str | None = None,
    tried: Collection[str] = (),
    failed_type: str | None = None,
    extra: Sequence[Candidate] = (),
) -> tuple[Candidate, int] | None:
    """The first pool of ``options`` not blocked, and the instances of it
    that supply ``work_per_hour`` (``None``: every pool is blocked or tried).
    ``failed_type`` and ``extra``: the out-of-capacity order (``options``)."""
    found = options(
        cands,
        blockers,
        tier,
        now_s=now_s,
        same_type=same_type,
        tried=tried,
        failed_type=failed_type,
        extra=extra,
        work_per_hour=work_per_hour,
    )
    for c, why in found:
        if why is None:
            return c, c.instances_for(work_per_hour)
    return None
