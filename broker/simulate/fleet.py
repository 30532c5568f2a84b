"""The serving-fleet engine: ``N`` replicas kept ready across zones, replayed
over the availability traces of those zones together.

Owns: ``FleetSetting`` (replicas, cold start, notice, prices), ``FleetWindow``
(zones x ticks of availability), ``simulate_fleet`` (one rule over one
window) and ``FleetOutcome`` (availability, unserved replica-hours, money).

Must not: decide (``policies.online.fleet``) or look ahead for a rule.

Time runs in seconds from the window start; decisions happen at each tick
start and at each revocation notice:

1. at a tick start, spot replicas in a zone whose trace says spot cannot be
   held in this tick are revoked (all of them: "all or none");
2. the rule sees ``FleetView`` and returns a ``FleetPlan``; the engine
   launches what is missing (a spot request in a zone without spot is
   refused) and terminates the surplus, replicas not yet ready first;
3. if a zone holding spot now loses it at the next tick, a notice arrives
   before (AWS: 120 s, GCP: 30 s, ``NOTICE_S``): the rule decides again, then;
4. a replica is ready ``cold_start_s`` after launch (~3 min for a large
   model: it outlasts the notice) and is billed per second from launch to
   termination or revocation, at its tier's price.

Measurement starts at ``cold_start_s`` (every rule, the optimum included,
starts cold). Availability is the share of measured time with ``>= N``
replicas ready; unserved replica-hours integrate the shortfall. Money is
conserved: every billed second belongs to one replica, tier and zone.
``cover_usd`` prices patching the run into a fully available one (per tick,
the worst shortfall on on-demand for the tick plus a cold start), the term
that makes the hindsight optimum a lower bound even for rules that miss.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from policies.online.fleet import FleetPlan, FleetPolicy, FleetSpec, FleetView, ZoneView

__all__ = [
    "NOTICE_S",
    "FleetOutcome",
    "FleetSetting",
    "FleetWindow",
    "fleet_spec",
    "simulate_fleet",
    "spot_prices",
]

# Revocation notice per provider (docs/concepts/market.md: AWS 2 minutes, best
# effort; GCP 30 seconds).
NOTICE_S = {"aws": 120, "gcp": 30}

BoolMatrix = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class FleetSetting:
    """docs/docs/benchmarks.md: cold start ~3 min, spot at ``1 / k`` of on-demand."""

    replicas: int = 4
    cold_start_s: int = 180
    notice_s: int = 120  # when the window does not name its provider's
    price_ratio: float = 3.0
    on_demand_usd_per_hour: float = 1.0


@dataclass(frozen=True)
class FleetWindow:
    """Zones x ticks of spot availability (``held``), and the zones' ticks
    before the window (``past``, same zones, possibly zero columns)."""

    group: str
    zones: tuple[str, ...]
    tick_s: int
    held: BoolMatrix = field(repr=False, compare=False)
    past: BoolMatrix = field(repr=False, compare=False)
    spot_price_ratio: tuple[float | None, ...] = ()
    start_tick: int = 0
    notice_s: int | None = None  # the zones' provider's notice (``NOTICE_S``)
    provider: str | None = None  # the zones' cloud ("aws", "gcp"), if known

    @property
    def ticks(self) -> int:
        return int(self.held.shape[1])

    @property
    def hours(self) -> float:
        return self.ticks * self.tick_s / 3600.0


def spot_prices(setting: FleetSetting, window: FleetWindow) -> tuple[float, ...]:
    """Spot $/h per zone: the zone's own ratio when known, else ``1 / k``."""
    ratios = window.spot_price_ratio or (None,) * len(window.zones)
    return tuple(
        setting.on_demand_usd_per_hour * (r if r is not None else 1.0 / setting.price_ratio)
        for r in ratios
    )


def notice_seconds(setting: FleetSetting, window: FleetWindow) -> int:
    return setting.notice_s if window.notice_s is None else window.notice_s


def fleet_spec(setting: FleetSetting, window: FleetWindow) -> FleetSpec:
    tick_h = window.tick_s / 3600.0
    return FleetSpec(
        replicas=setting.replicas,
        zones=window.zones,
        cold_start_hours=setting.cold_start_s / 3600.0,
        notice_hours=notice_seconds(setting, window) / 3600.0,
        tick_hours=tick_h,
        on_demand_usd_per_hour=setting.on_demand_usd_per_hour,
        spot_usd_per_hour=spot_prices(setting, window),
        past=tuple(tuple(row.tolist()) for row in window.past),
        provider=window.provider,
    )


@dataclass
class _Replica:
    zone: int  # -1 for on-demand
    launch_s: float
    ready_s: float
    end_s: float | None = None


@dataclass(frozen=True)
class FleetOutcome:
    policy: str
    hours: float
    available_hours: float
    unserved_replica_hours: float
    cost_usd: float
    spot_usd: float
    on_demand_usd: float
    spot_hours: float
    on_demand_hours: float
    cover_usd: float
    launches: int
    revocations: int

    @property
    def availability(self) -> float:
        return self.available_hours / self.hours if self.hours > 0 else 1.0


class _Fleet:
    def __init__(self, n_zones: int, cold_s: float) -> None:
        self.alive: list[_Replica] = []
        self.done: list[_Replica] = []
        self.cold_s = cold_s
        self.n_zones = n_zones
        self.launches = 0
        self.revocations = 0

    def view(
        self, now: float, available: list[bool], noticed: list[bool], at_notice: bool
    ) -> FleetView:
        ready = [0] * (self.n_zones + 1)
        warming = [0] * (self.n_zones + 1)
        for r in self.alive:
            (ready if r.ready_s <= now else warming)[r.zone] += 1
        zones = tuple(
            ZoneView(available[z], noticed[z], ready[z], warming[z]) for z in range(self.n_zones)
        )
        return FleetView(now / 3600.0, zones, ready[-1], warming[-1], at_notice)

    def end(self, r: _Replica, at: float) -> None:
        r.end_s = at
        self.alive.remove(r)
        self.done.append(r)

    def apply(self, plan: FleetPlan, now: float, available: list[bool]) -> None:
        wanted = [*plan.spot, plan.on_demand]
        for z in range(self.n_zones + 1):
            mine = [r for r in self.alive if r.zone == (z if z < self.n_zones else -1)]
            want = max(0, int(wanted[z]))
            if len(mine) > want:
                # drop what is not ready yet first, newest first
                mine.sort(key=lambda r: (r.ready_s <= now, -r.launch_s))
                for r in mine[: len(mine) - want]:
                    self.end(r, now)
            elif len(mine) < want and (z == self.n_zones or available[z]):
                zone = z if z < self.n_zones else -1
                for _ in range(want - len(mine)):
                    self.alive.append(_Replica(zone, now, now + self.cold_s))
                    self.launches += 1


def simulate_fleet(setting: FleetSetting, window: FleetWindow, policy: FleetPolicy) -> FleetOutcome:
    """Run ``policy`` over ``window`` (see the module docstring)."""
    spec = fleet_spec(setting, window)
    if len(spec.zones) != window.held.shape[0]:
        raise ValueError("window.zones and window.held disagree")
    n_z, ticks, tick = len(spec.zones), window.ticks, float(window.tick_s)
    held = window.held
    fleet = _Fleet(n_z, float(setting.cold_start_s))
    memory = policy.start(spec)
    measure_from = float(setting.cold_start_s)
    notice_s = notice_seconds(setting, window)
    n = setting.replicas
    available_s = unserved_s = cover = 0.0
    no_notice = [False] * n_z
    for i in range(ticks):
        t0, t1 = i * tick, (i + 1) * tick
        ended_before = len(fleet.done)
        avail = [bool(held[z, i]) for z in range(n_z)]
        for r in list(fleet.alive):
            if r.zone >= 0 and not avail[r.zone]:
                fleet.end(r, t0)
                fleet.revocations += 1
        plan, memory = policy.decide(spec, fleet.view(t0, avail, no_notice, False), memory)
        fleet.apply(plan, t0, avail)
        if i + 1 < ticks:
            noticed = [avail[z] and not held[z, i + 1] for z in range(n_z)]
            if any(noticed[r.zone] for r in fleet.alive if r.zone >= 0):
                at = max(t0, t1 - notice_s)
                view = fleet.view(at, avail, noticed, True)
                plan, memory = policy.decide(spec, view, memory)
                fleet.apply(plan, at, avail)
        a, u, worst = _ready_profile(
            [*fleet.alive, *fleet.done[ended_before:]], max(t0, measure_from), t1, n
        )
        available_s += a
        unserved_s += u
        if worst > 0:
            span = t1 - max(t0, measure_from)
            cover += worst * (span + setting.cold_start_s) / 3600.0 * setting.on_demand_usd_per_hour
    end = ticks * tick
    for r in list(fleet.alive):
        fleet.end(r, end)
    prices = spec.spot_usd_per_hour
    spot_h = od_h = spot_usd = od_usd = 0.0
    for r in fleet.done:
        assert r.end_s is not None
        billed = max(0.0, r.end_s - max(r.launch_s, measure_from)) / 3600.0
        if r.zone < 0:
            od_h += billed
            od_usd += billed * setting.on_demand_usd_per_hour
        else:
            spot_h += billed
            spot_usd += billed * prices[r.zone]
    return FleetOutcome(
        policy=policy.name,
        hours=(end - measure_from) / 3600.0,
        available_hours=available_s / 3600.0,
        unserved_replica_hours=unserved_s / 3600.0,
        cost_usd=spot_usd + od_usd,
        spot_usd=spot_usd,
        on_demand_usd=od_usd,
        spot_hours=spot_h,
        on_demand_hours=od_h,
        cover_usd=cover,
        launches=fleet.launches,
        revocations=fleet.revocations,
    )


def _ready_profile(
    replicas: list[_Replica], a: float, b: float, n: int
) -> tuple[float, float, int]:
    """Over ``[a, b)``: seconds with ``>= n`` of ``replicas`` ready,
    replica-seconds short of ``n``, and the worst shortfall."""
    if b <= a:
        return 0.0, 0.0, 0
    edges = {a, b}
    spans = []
    for r in replicas:
        lo, hi = max(r.ready_s, a), min(r.end_s if r.end_s is not None else b, b)
        if hi > lo:
            spans.append((lo, hi))
            edges.update((lo, hi))
    cuts = sorted(edges)
    ok = short = 0.0
    worst = 0
    for lo, hi in itertools.pairwise(cuts):
        mid = (lo + hi) / 2.0
        count = sum(1 for s, e in spans if s <= mid < e)
        gap = max(0, n - count)
        worst = max(worst, gap)
        if gap == 0:
            ok += hi - lo
        else:
            short += gap * (hi - lo)
    return ok, short, worst
