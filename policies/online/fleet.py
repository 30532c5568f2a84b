"""Serving-fleet rules: how many replicas to hold on spot in which zone, and on
on-demand, so that ``N`` are ready (docs/benchmarks.md, the SkyServe /
SpotHedge setting, EuroSys 2025).

Owns: the view a rule gets (``FleetView``: per zone whether spot can be had,
whether a revocation notice is out, the replicas held and warming), the plan
it returns (``FleetPlan``: spot replicas wanted per zone, on-demand wanted),
and the rules: ``on_demand``, ``static_mix`` (an AWS Auto Scaling group with a
mixed-instances policy), ``even_spread``, ``spothedge`` (SpotHedge as
published). Rules are pure: ``decide(view, memory) -> (plan, memory)``.

The bench's ``spotfolio`` entry is not here: it is the daemon's own decision
code (its plan and ``broker.lifecycle.LifecycleManager``) behind this
protocol, ``broker.bench.product.fleet``.

Must not: launch, bill or measure (``broker.simulate.fleet``), or see the
future. Asking for spot in a zone without spot is allowed: the simulated cloud
refuses it, as a real one would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "EvenSpread",
    "FleetPlan",
    "FleetPolicy",
    "FleetSpec",
    "FleetView",
    "OnDemandFleet",
    "SpotHedge",
    "StaticMix",
    "ZoneView",
    "keep_noticed",
    "spread",
]


@dataclass(frozen=True)
class FleetSpec:
    """The service's terms: ``replicas`` ready wanted, the zones in play (in
    the order of every per-zone tuple). ``past``: each zone's history before
    the window, tick by tick (spot held or not, ``tick_hours`` apart, oldest
    first; empty where nothing was watched), for a rule that reads it the way
    a market does; ``provider``: the zones' cloud (``None``: not known)."""

    replicas: int
    zones: tuple[str, ...]
    cold_start_hours: float
    notice_hours: float
    tick_hours: float
    on_demand_usd_per_hour: float
    spot_usd_per_hour: tuple[float, ...]
    past: tuple[tuple[bool, ...], ...] = field(default=(), repr=False, compare=False)
    provider: str | None = None


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
    """A pure fleet rule with explicit memory (``Any``: each rule's own
    memory type, opaque to the simulator, as for ``DeadlinePolicy``)."""

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
    """SpotHedge's state: which zones are on the active list (the rest are on
    the preempted list), and the spot replicas it last placed per zone (to
    see a preemption at the next decision)."""

    active: tuple[bool, ...]
    placed: tuple[int, ...]


def _mark(active: list[bool], zone: int, ok: bool) -> None:
    """Move ``zone`` to the active (``ok``) or the preempted list; fewer than
    2 active zones -> every zone active again."""
    active[zone] = ok
    if sum(active) < 2:
        active[:] = [True] * len(active)


class SpotHedge:
    """SpotHedge, as published: SkyServe (Mao et al., EuroSys 2025), section 4.

    Rules, at each decision point:

    1. zone lists: every zone starts *active*; a preemption in a zone moves it
       to *preempted*, a successful launch in a zone moves it back to active;
       fewer than 2 active zones -> all active. A preemption is seen as a
       revocation notice on a zone holding our replicas, or our replicas gone
       from a zone that has lost spot. A launch in a zone whose spot cannot be
       had now (or is under notice) fails, and counts as a preemption there
       (SkyServe's launcher does the same with a zone that refuses capacity);
       within one decision the launch is then retried elsewhere, never in a
       zone that just refused it;
    2. placement: ``N + N_EXTRA`` spot replicas; replicas held stay where they
       are (those under notice serve until taken, and do not count); each new
       one goes to the cheapest active zone not in use, else the cheapest
       active zone (ties by zone order);
    3. on-demand: ``min(N, BASE + max(0, N + N_EXTRA - BASE - ready spot))``
       with ready spot not under notice; it is recomputed at every decision,
       so on-demand scales down as spot replicas become ready.
    """

    name = "spothedge"
    N_EXTRA = 2  # "+1-2 extra spot replicas" (docs/benchmarks.md)
    BASE = 0  # on-demand base replicas (SkyServe's base on-demand fallback)

    def start(self, spec: FleetSpec) -> HedgeMemory:
        z = len(spec.zones)
        return HedgeMemory(active=(True,) * z, placed=(0,) * z)

    def decide(
        self, spec: FleetSpec, view: FleetView, memory: HedgeMemory
    ) -> tuple[FleetPlan, HedgeMemory]:
        n, zones = spec.replicas, view.zones
        active = list(memory.active)
        for j, (z, had) in enumerate(zip(zones, memory.placed, strict=True)):
            if had > 0 and (z.noticed or not z.available):  # 1: a preemption
                _mark(active, j, False)
        open_ = [z.available and not z.noticed for z in zones]
        plan = [z.spot_held if ok else 0 for z, ok in zip(zones, open_, strict=True)]
        rank = sorted(range(len(zones)), key=lambda j: (spec.spot_usd_per_hour[j], j))
        target = n + self.N_EXTRA
        for j in reversed(rank):  # too many (an on-demand base, a smaller N): dearest first
            cut = min(plan[j], sum(plan) - target)
            if cut > 0:
                plan[j] -= cut
        failed: set[int] = set()
        while sum(plan) < target:  # 2: one new replica at a time
            pick = self._place(rank, active, plan, zones, failed)
            if pick is None:
                break
            if open_[pick]:
                plan[pick] += 1
                _mark(active, pick, True)
            else:  # the launch fails: a preemption there
                failed.add(pick)
                _mark(active, pick, False)
        ready = sum(z.spot_ready for z, ok in zip(zones, open_, strict=True) if ok)
        od = min(n, self.BASE + max(0, target - self.BASE - ready))  # 3
        memory = HedgeMemory(active=tuple(active), placed=tuple(plan))
        return FleetPlan(keep_noticed(view, plan), od), memory

    @staticmethod
    def _place(
        rank: list[int],
        active: list[bool],
        plan: list[int],
        zones: tuple[ZoneView, ...],
        failed: set[int],
    ) -> int | None:
        """The cheapest active zone not in use, else the cheapest active one
        (never one that refused a launch in this decision)."""
        usable = [j for j in rank if active[j] and j not in failed]
        free = [j for j in usable if plan[j] == 0 and zones[j].spot_held == 0]
        choices = free or usable
        return choices[0] if choices else None
