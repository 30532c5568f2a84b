"""Serving-fleet rules: how many replicas to hold on spot in which zone, and on
on-demand, so that ``N`` are ready (benchmarks.md section 2, the SkyServe /
SpotHedge setting, EuroSys 2025).

Owns: the view a rule gets (``FleetView``: per zone whether spot can be had,
whether a revocation notice is out, the replicas held and warming), the plan
it returns (``FleetPlan``: spot replicas wanted per zone, on-demand wanted),
and the rules: ``on_demand``, ``static_mix`` (an AWS Auto Scaling group with a
mixed-instances policy), ``even_spread``, ``spothedge`` (SpotHedge-like) and
``spotfolio`` (``policies.online.fleet_spotfolio`` is not a module: ours is
here too). Rules are pure: ``decide(view, memory) -> (plan, memory)``.

Must not: launch, bill or measure (``broker.simulate.fleet``), or see the
future. Asking for spot in a zone without spot is allowed: the simulated cloud
refuses it, as a real one would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Protocol

from markets.errors import InputError
from policies.online.deadline import PoolHistory

__all__ = [
    "FLEET_POLICIES",
    "EvenSpread",
    "FleetPlan",
    "FleetPolicy",
    "FleetSpec",
    "FleetView",
    "OnDemandFleet",
    "SpotHedge",
    "StaticMix",
    "ZoneView",
    "fleet_policy",
    "keep_noticed",
    "spread",
]


@dataclass(frozen=True)
class FleetSpec:
    """The service's terms: ``replicas`` ready wanted, the zones in play (in
    the order of every per-zone tuple), and each zone's history before the
    window (``None`` where nothing was watched)."""

    replicas: int
    zones: tuple[str, ...]
    cold_start_hours: float
    notice_hours: float
    tick_hours: float
    on_demand_usd_per_hour: float
    spot_usd_per_hour: tuple[float, ...]
    prior: tuple[PoolHistory | None, ...] = ()


@dataclass(frozen=True)
class ZoneView:
    """One zone now. ``available``: a spot request would be fulfilled.
    ``noticed``: its spot replicas are revoked at the next tick."""

    available: bool
    noticed: bool
    spot_ready: int
    spot_warming: int

    @property
    def spot_held(self) -> int:
        return self.spot_ready + self.spot_warming


@dataclass(frozen=True)
class FleetView:
    """What a rule knows at a decision point (a tick start, or a notice)."""

    elapsed_hours: float
    zones: tuple[ZoneView, ...]
    on_demand_ready: int
    on_demand_warming: int
    at_notice: bool = False

    @property
    def spot_ready(self) -> int:
        return sum(z.spot_ready for z in self.zones)

    @property
    def on_demand_held(self) -> int:
        return self.on_demand_ready + self.on_demand_warming


@dataclass(frozen=True)
class FleetPlan:
    """Replicas wanted: spot per zone (``FleetSpec.zones`` order), on-demand."""

    spot: tuple[int, ...]
    on_demand: int


class FleetPolicy(Protocol):
    name: str

    def start(self, spec: FleetSpec) -> Any: ...

    def decide(self, spec: FleetSpec, view: FleetView, memory: Any) -> tuple[FleetPlan, Any]: ...


def spread(total: int, current: list[int], allowed: list[bool], order: list[int]) -> list[int]:
    """Keep what is held in ``allowed`` zones, then add one at a time to the
    allowed zone holding fewest (ties by ``order``) until ``total``, or take
    from the one holding most. Zones not allowed get 0."""
    out = [c if ok else 0 for c, ok in zip(current, allowed, strict=True)]
    rank = {z: r for r, z in enumerate(order)}
    ok_zones = [z for z in order if allowed[z]]
    if not ok_zones:
        return [0] * len(current)
    while sum(out) < total:
        z = min(ok_zones, key=lambda j: (out[j], rank[j]))
        out[z] += 1
    while sum(out) > total:
        z = max(ok_zones, key=lambda j: (out[j], -rank[j]))
        out[z] -= 1
    return out


def keep_noticed(view: FleetView, spot: list[int]) -> tuple[int, ...]:
    """Replicas under a revocation notice keep serving until they are taken:
    the plan holds them where a rule planned none there."""
    return tuple(
        z.spot_held if z.noticed and want == 0 else want
        for z, want in zip(view.zones, spot, strict=True)
    )


class OnDemandFleet:
    """All on-demand: the cost every ratio is measured against."""

    name = "on_demand"

    def start(self, spec: FleetSpec) -> None:
        return None

    def decide(self, spec: FleetSpec, view: FleetView, memory: None) -> tuple[FleetPlan, None]:
        return FleetPlan((0,) * len(spec.zones), spec.replicas), None


class StaticMix:
    """An Auto Scaling group with a mixed-instances policy: ``OD_BASE``
    on-demand, then ``OD_PERCENT_ABOVE_BASE`` of the rest on-demand, the rest
    spot spread evenly over the zones where spot can be had (capacity
    rebalancing moves lost spot to other zones; there is no on-demand
    fallback: the group keeps its mix)."""

    name = "static_mix"
    OD_BASE = 1
    OD_PERCENT_ABOVE_BASE = 0.2

    def start(self, spec: FleetSpec) -> None:
        return None

    def decide(self, spec: FleetSpec, view: FleetView, memory: None) -> tuple[FleetPlan, None]:
        n = spec.replicas
        base = min(self.OD_BASE, n)
        od = base + round(self.OD_PERCENT_ABOVE_BASE * (n - base))
        ok = [z.available and not z.noticed for z in view.zones]
        cur = [z.spot_held for z in view.zones]
        order = sorted(range(len(ok)), key=lambda j: spec.spot_usd_per_hour[j])
        return FleetPlan(keep_noticed(view, spread(n - od, cur, ok, order)), od), None


class EvenSpread:
    """``N`` spot replicas spread evenly over every zone, each zone refilled
    only when its spot returns (SkyServe's even-spread baseline)."""

    name = "even_spread"

    def start(self, spec: FleetSpec) -> None:
        return None

    def decide(self, spec: FleetSpec, view: FleetView, memory: None) -> tuple[FleetPlan, None]:
        z = len(spec.zones)
        per = [spec.replicas // z + (1 if j < spec.replicas % z else 0) for j in range(z)]
        return FleetPlan(tuple(per), 0), None


@dataclass(frozen=True)
class HedgeMemory:
    active: tuple[bool, ...]


class SpotHedge:
    """SpotHedge-like (SkyServe, EuroSys 2025): ``N + EXTRA`` spot replicas
    spread over the cheapest *active* zones; a zone that revokes or refuses a
    launch turns inactive, and all turn active again when none is left;
    on-demand fallback = the shortfall of ready spot replicas below ``N``."""

    name = "spothedge"
    EXTRA = 2  # "+1-2 extra spot replicas" (benchmarks.md section 2)

    def start(self, spec: FleetSpec) -> HedgeMemory:
        return HedgeMemory(active=(True,) * len(spec.zones))

    def decide(
        self, spec: FleetSpec, view: FleetView, memory: HedgeMemory
    ) -> tuple[FleetPlan, HedgeMemory]:
        active = [
            a and z.available and not z.noticed
            for a, z in zip(memory.active, view.zones, strict=True)
        ]
        if not any(active):  # every zone tried: start over with those that can serve
            active = [z.available and not z.noticed for z in view.zones]
        cur = [z.spot_held for z in view.zones]
        order = sorted(range(len(active)), key=lambda j: spec.spot_usd_per_hour[j])
        spot = spread(spec.replicas + self.EXTRA, cur, active, order)
        ready_kept = sum(z.spot_ready for z, keep in zip(view.zones, active, strict=True) if keep)
        od = max(0, spec.replicas - ready_kept)
        return FleetPlan(keep_noticed(view, spot), od), replace(memory, active=tuple(active))


@dataclass(frozen=True)
class SpotfolioFleetMemory:
    """Per zone: hours watched with spot, losses seen, hours since the last."""

    held_hours: tuple[float, ...]
    losses: tuple[float, ...]
    since_loss: tuple[float, ...]
    last_available: tuple[bool | None, ...]
    seen_at: float = -1.0


PRIOR_WEIGHT_HOURS = 24.0
UNINFORMED_LOSSES_PER_HELD_HOUR = 1.0


class SpotfolioFleet:
    """Spotfolio's fleet rule (draft)."""

    name = "spotfolio"

    def start(self, spec: FleetSpec) -> SpotfolioFleetMemory:
        held, losses = [], []
        for h in spec.prior or (None,) * len(spec.zones):
            if h is None or h.hours <= 0:
                held.append(1.0)
                losses.append(UNINFORMED_LOSSES_PER_HELD_HOUR)
                continue
            w = min(1.0, PRIOR_WEIGHT_HOURS / h.hours)
            held.append(w * h.hours * h.held_share)
            losses.append(w * len(h.up_spells_hours))
        n = len(spec.zones)
        return SpotfolioFleetMemory(tuple(held), tuple(losses), (math.inf,) * n, (None,) * n)

    def observe(
        self, spec: FleetSpec, view: FleetView, m: SpotfolioFleetMemory
    ) -> SpotfolioFleetMemory:
        if view.at_notice or view.elapsed_hours <= m.seen_at:
            return m
        held, losses, since, last = (
            list(m.held_hours),
            list(m.losses),
            list(m.since_loss),
            list(m.last_available),
        )
        for j, z in enumerate(view.zones):
            if z.available:
                held[j] += spec.tick_hours
            if last[j] is True and not z.available:
                losses[j] += 1.0
                since[j] = 0.0
            else:
                since[j] += spec.tick_hours
            last[j] = z.available
        return SpotfolioFleetMemory(
            tuple(held), tuple(losses), tuple(since), tuple(last), view.elapsed_hours
        )

    def hazard(self, m: SpotfolioFleetMemory, j: int) -> float:
        return m.losses[j] / max(m.held_hours[j], 1e-6)

    def decide(
        self, spec: FleetSpec, view: FleetView, memory: SpotfolioFleetMemory
    ) -> tuple[FleetPlan, SpotfolioFleetMemory]:
        memory = self.observe(spec, view, memory)
        n = spec.replicas
        safe = [z.available and not z.noticed for z in view.zones]
        cur = [z.spot_held if ok else 0 for z, ok in zip(view.zones, safe, strict=True)]
        want = list(cur)
        # trim to N, dropping from the riskiest zones first
        order = sorted(
            range(len(safe)), key=lambda j: (self.hazard(memory, j), spec.spot_usd_per_hour[j])
        )
        for j in reversed(order):
            while sum(want) > n and want[j] > 0:
                want[j] -= 1
        cands = [j for j in order if safe[j]]
        if cands and sum(want) < n:
            best = cands[0]
            held_zones = [j for j in cands if want[j] > 0]
            if held_zones:
                best = (
                    held_zones[0]
                    if self.hazard(memory, held_zones[0])
                    <= 2 * self.hazard(memory, cands[0]) + 1e-9
                    else cands[0]
                )
            want[best] += n - sum(want)
        ready_safe = sum(z.spot_ready for z, ok in zip(view.zones, safe, strict=True) if ok)
        held_safe = sum(want)
        od = max(min(view.on_demand_held, n - ready_safe), n - held_safe, 0)
        return FleetPlan(keep_noticed(view, want), od), memory


FLEET_POLICIES: dict[str, type[Any]] = {
    "on_demand": OnDemandFleet,
    "static_mix": StaticMix,
    "even_spread": EvenSpread,
    "spothedge": SpotHedge,
    "spotfolio": SpotfolioFleet,
}


def fleet_policy(name: str) -> FleetPolicy:
    """A fresh fleet rule by name (``InputError`` lists the valid names)."""
    try:
        cls = FLEET_POLICIES[name]
    except KeyError:
        raise InputError(
            "--policy", None, f"one of {', '.join(sorted(FLEET_POLICIES))}", got=name
        ) from None
    policy: FleetPolicy = cls()
    return policy


_ = math  # used by the spotfolio rule below once it exists
