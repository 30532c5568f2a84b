"""The fleet setting's ``spotfolio``: a serving workload of ``N`` replicas
decided by the daemon's own objects over a replayed window.

Owns: ``ProductFleet`` (a ``policies.online.fleet.FleetPolicy`` the fleet
engine ``broker.simulate.fleet`` replays), ``fleet_workloads`` (the serving
workload it runs) and ``DECIDED_BY``. Per window it builds what the daemon
composes for a serving workload (``broker.daemon.wiring.default_lifecycle``:
the project's ``LifecycleManager`` on a clock of its own) and translates:

- the market: one pool per zone of the window, spot at the zone's price,
  on-demand at the setting's; ``spot_available``, the hazard (revocations
  per hour held, ``markets.hazard.posterior`` on the assumed prior), the
  trailing week's held share and a placement score from the zone's history
  before the window and the ticks seen since, as the replay market reports
  them (``markets.replay.market``). A new snapshot when a zone's spot comes
  or goes, and at least every ``SNAPSHOT_REFRESH_S``;
- the first placement: the daemon's plan, the fast path
  (``broker.planning.optimizer.fast.fast_plan``) on a one-hour problem,
  rounded as reconcile rounds it (``broker.planning.reconcile.desired_now``).
  The fast path, not the MILP: a one-workload, one-hour problem is what it
  solves exactly (fill the cheapest effective pools within the caps), in
  milliseconds, and the daemon uses it for reactions too;
- a revocation notice on a zone: one ``Notice`` per replica there, handed to
  ``LifecycleManager.handle``; the replicas of its ``LaunchIntent`` s are what
  the engine launches. A revocation the engine made without a notice (spot
  launched in a zone at its notice) is handed over when it is seen;
- a launch the engine would refuse (spot in a zone without spot): the
  daemon's launcher path (``broker.daemon.launch``): ``record_launch_failure``,
  then ``LifecycleManager.instead`` for the next pool, until none is left;
- every tick start: ``LifecycleManager.tick`` (break-glass upkeep: returns to
  spot, extensions), its launches launched and its terminations terminated.

The fleet is the daemon's book: ``Instance`` values, one per replica, a new
tuple whenever it changes (the manager indexes a sequence once).

Must not: decide anything (every choice above is the plan's or the
lifecycle manager's), or look ahead (it reads the engine's view only).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np

from broker.daemon.config import DaemonConfig
from broker.daemon.lifecycle import Lifecycle
from broker.daemon.wiring import default_lifecycle
from broker.lifecycle import LaunchIntent
from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import build_problem
from broker.planning.reconcile import desired_now
from markets.clock import ManualClock
from markets.fleet import Instance, InstanceState, Notice, NoticeKind
from markets.hazard.posterior import Exposure, estimate_hazard
from markets.hazard.prior import ASSUMED_PRIOR
from markets.model import (
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
    Tier,
)
from policies.online.fleet import FleetPlan, FleetSpec, FleetView
from policies.workloads.spec import WorkloadSet

__all__ = [
    "DECIDED_BY",
    "EPOCH",
    "INSTANCE_TYPE",
    "SNAPSHOT_REFRESH_S",
    "WORKLOAD",
    "ProductFleet",
    "fleet_workloads",
]

# The code that makes every decision after the first placement (the plan's).
DECIDED_BY = "broker.lifecycle.manager:LifecycleManager"
WORKLOAD = "fleet"
INSTANCE_TYPE = "replica"  # one replica per instance, one capacity unit each
OWNER = "spotfolio-bench"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # the fake clock's window start
# A market source refreshes its hazards about hourly; availability changes
# are seen at once (the snapshot's spot_available, as the replay market's).
SNAPSHOT_REFRESH_S = 3600.0
TRAILING_SHARE_HOURS = 168.0  # the replay market's available_share window
PLACEMENT_WINDOW_HOURS = 24.0  # and its placement score's


def fleet_workloads(replicas: int) -> WorkloadSet:
    """The serving workload of the fleet setting: ``replicas`` units all day
    on the one instance type, the serving class's defaults for the rest
    except spot, allowed for all of it (the SkyServe setting: on-demand only
    where spot fails; the class default keeps 70 % on non-revocable tiers)."""
    return WorkloadSet.model_validate(
        {
            "workloads": [
                {
                    "name": WORKLOAD,
                    "class": "serving",
                    "instance_types": [INSTANCE_TYPE],
                    "demand": {"base_units": replicas, "peak_units": replicas},
                    "max_spot_share": 1.0,
                }
            ]
        }
    )


def _region(provider: str, zone: str) -> str:
    """``us-west-2a`` -> ``us-west-2`` (AWS), ``us-central1-a`` -> ``us-central1`` (GCP)."""
    if provider == "gcp" and "-" in zone:
        return zone.rsplit("-", 1)[0]
    return zone[:-1] if zone and zone[-1].isalpha() else zone


@dataclass
class _Zone:
    """One zone's pool and what the market has seen of it, tick by tick."""

    pool_key: str
    pool: Pool
    seen: list[bool]
    events: int = 0  # revocations seen (held -> not held)
    held_hours: float = 0.0

    def observe(self, held: bool, tick_h: float) -> None:
        if self.seen:
            if self.seen[-1]:
                self.held_hours += tick_h
                if not held:
                    self.events += 1
        self.seen.append(held)


@dataclass
class _Replica:
    instance: Instance
    zone: int  # -1: on-demand
    noticed: bool = False


@dataclass
class FleetRun:
    """One window's objects: the daemon's manager, its market and its book."""

    spec: FleetSpec
    clock: ManualClock
    manager: Lifecycle
    zones: list[_Zone]
    instance_type: InstanceType
    provider: str
    book: dict[str, _Replica] = field(default_factory=dict)
    fleet: tuple[Instance, ...] = ()
    snapshot: MarketSnapshot | None = None
    snapshot_s: float = -1.0
    snapshot_avail: tuple[bool, ...] = ()
    avail: tuple[bool, ...] = ()
    last_tick_s: float = -1.0
    started: bool = False
    ids: itertools.count[int] = field(default_factory=itertools.count)
    notices: itertools.count[int] = field(default_factory=itertools.count)


class ProductFleet:
    """The daemon's serving decisions behind the fleet engine's rule protocol
    (module docstring). Its memory is the window's ``FleetRun``."""

    name = "spotfolio"

    def start(self, spec: FleetSpec) -> FleetRun:
        provider = spec.provider or "aws"
        clock = ManualClock(EPOCH)
        workloads = fleet_workloads(spec.replicas)
        manager = default_lifecycle(workloads, clock, DaemonConfig(owner=OWNER))
        itype = InstanceType(
            provider=Provider(provider),
            name=INSTANCE_TYPE,
            family=INSTANCE_TYPE,
            units=1,
            vcpus=1,
            memory_gib=1.0,
        )
        zones = []
        past = spec.past or ((),) * len(spec.zones)
        for z, row in zip(spec.zones, past, strict=True):
            pool = Pool(
                provider=Provider(provider),
                region=_region(provider, z),
                zone=z,
                instance_type=INSTANCE_TYPE,
            )
            zone = _Zone(pool.key, pool, [])
            for held in row:
                zone.observe(bool(held), spec.tick_hours)
            zones.append(zone)
        return FleetRun(spec, clock, manager, zones, itype, provider)

    def decide(self, spec: FleetSpec, view: FleetView, memory: FleetRun) -> tuple[FleetPlan, FleetRun]:
        run = memory
        now_s = view.elapsed_hours * 3600.0
        run.clock.set(EPOCH + timedelta(seconds=now_s))
        run.avail = tuple(z.available for z in view.zones)
        if not view.at_notice and now_s > run.last_tick_s:
            for zone, ok in zip(run.zones, run.avail, strict=True):
                zone.observe(ok, spec.tick_hours)
            run.last_tick_s = now_s
        if not run.started:
            run.started = True
            self._place(run, now_s)
        elif view.at_notice:
            self._notices(run, view, now_s)
        else:
            self._revoked(run, now_s)
            self._tick(run, now_s)
        return self._plan(run), run

    # --- translation ------------------------------------------------------------

    def _market(self, run: FleetRun, now_s: float) -> MarketSnapshot:
        """The snapshot a market source would give now (module docstring)."""
        snap = run.snapshot
        if (
            snap is not None
            and run.snapshot_avail == run.avail
            and now_s - run.snapshot_s < SNAPSHOT_REFRESH_S
        ):
            return snap
        spec = run.spec
        tick_h = spec.tick_hours
        at = EPOCH + timedelta(seconds=now_s)
        pools = []
        for j, zone in enumerate(run.zones):
            share_n = max(1, round(TRAILING_SHARE_HOURS / tick_h))
            day_n = max(1, round(PLACEMENT_WINDOW_HOURS / tick_h))
            trail = zone.seen[-share_n:]
            share = sum(trail) / len(trail) if trail else None
            day = zone.seen[-day_n:]
            instant = 1.0 if run.avail[j] else 0.0
            recent = sum(day) / len(day) if day else instant
            score = min(10, max(1, 1 + round(9.0 * (0.5 * recent + 0.5 * instant))))
            est = estimate_hazard(
                Exposure(zone.events, zone.held_hours),
                prior=ASSUMED_PRIOR,
                available_share=share,
            )
            pools.append(
                PoolSnapshot(
                    pool=zone.pool,
                    instance=run.instance_type,
                    on_demand_usd_per_hour=spec.on_demand_usd_per_hour,
                    spot_usd_per_hour=spec.spot_usd_per_hour[j],
                    placement_score=score,
                    hazard=est.to_hazard(),
                    available_share=share,
                    spot_available=run.avail[j],
                    observed_at=at,
                )
            )
        snap = MarketSnapshot(at=at, pools=tuple(pools), source="fleet-window")
        run.snapshot, run.snapshot_s, run.snapshot_avail = snap, now_s, run.avail
        return snap

    def _place(self, run: FleetRun, now_s: float) -> None:
        """The first fleet: the plan's hour, rounded as reconcile rounds it."""
        snap = self._market(run, now_s)
        workloads = fleet_workloads(run.spec.replicas)
        demand = {WORKLOAD: np.full(1, float(run.spec.replicas))}
        plan = fast_plan(build_problem(snap, workloads, demand, hours=1))
        want = desired_now(plan, snap.at, workloads)
        for (_w, pool, tier), n in sorted(want.items()):
            self._launch(run, LaunchIntent(pool, Tier(tier), n), None, now_s, fallback=False)

    def _notices(self, run: FleetRun, view: FleetView, now_s: float) -> None:
        notice_s = run.spec.notice_hours * 3600.0
        at = EPOCH + timedelta(seconds=now_s)
        for j, z in enumerate(view.zones):
            if not z.noticed:
                continue
            for r in [r for r in run.book.values() if r.zone == j and not r.noticed]:
                self._handle(run, r, at, at + timedelta(seconds=notice_s), now_s)

    def _revoked(self, run: FleetRun, now_s: float) -> None:
        """Spot taken at this tick: out of the book (a loss without a notice
        is handed to the manager as it is seen)."""
        at = EPOCH + timedelta(seconds=now_s)
        gone = [r for r in run.book.values() if r.zone >= 0 and not run.avail[r.zone]]
        for r in gone:
            if not r.noticed:
                self._handle(run, r, at, at, now_s)
        for r in gone:
            del run.book[r.instance.instance_id]
        if gone:
            self._sync(run)

    def _handle(
        self, run: FleetRun, r: _Replica, at: datetime, deadline: datetime, now_s: float
    ) -> None:
        r.noticed = True
        notice = Notice(
            notice_id=f"notice-{next(run.notices)}",
            kind=NoticeKind.INTERRUPTION,
            instance_id=r.instance.instance_id,
            at=at,
            deadline=deadline,
            pool_key=r.instance.pool_key,
        )
        decision = run.manager.handle(notice, run.fleet, self._market(run, now_s))
        for intent in decision.launches:
            self._launch(run, intent, notice.notice_id, now_s)

    def _tick(self, run: FleetRun, now_s: float) -> None:
        at = EPOCH + timedelta(seconds=now_s)
        for ret in run.manager.tick(at, run.fleet, self._market(run, now_s)):
            for intent in ret.launches:
                self._launch(run, intent, None, now_s)
            ended = [i for i in ret.terminate_instance_ids if i in run.book]
            for iid in ended:
                del run.book[iid]
            if ended:
                self._sync(run)

    def _launch(
        self,
        run: FleetRun,
        intent: LaunchIntent,
        notice_id: str | None,
        now_s: float,
        *,
        fallback: bool = True,
    ) -> None:
        """The daemon's launcher: a refused pool is reported, then the next
        pool the placement rule gives (``LifecycleManager.instead``) is tried."""
        pool, tier, count = intent.pool_key, intent.tier, int(intent.count)
        tried: set[str] = set()
        zone_of = {z.pool_key: j for j, z in enumerate(run.zones)}
        at = EPOCH + timedelta(seconds=now_s)
        while True:
            j = zone_of.get(pool)
            if j is None:
                return  # not a pool of this window (cannot happen: the snapshot has no other)
            if tier is not Tier.SPOT or run.avail[j]:
                for _ in range(count):
                    iid = f"i-{next(run.ids)}"
                    inst = Instance(
                        instance_id=iid,
                        pool_key=pool,
                        tier=tier,
                        workload=WORKLOAD,
                        state=InstanceState.RUNNING,
                        units=1,
                        launched_at=at,
                    )
                    run.book[iid] = _Replica(inst, j if tier is Tier.SPOT else -1)
                self._sync(run)
                return
            tried.add(pool)
            run.manager.record_launch_failure(pool, tier, notice_id=notice_id)
            if not fallback:
                return
            alt = run.manager.instead(WORKLOAD, pool, tier, count, tried, at)
            if alt is None:
                return
            pool, count = alt

    @staticmethod
    def _sync(run: FleetRun) -> None:
        run.fleet = tuple(r.instance for r in run.book.values())

    @staticmethod
    def _plan(run: FleetRun) -> FleetPlan:
        spot = [0] * len(run.zones)
        od = 0
        for r in run.book.values():
            if r.zone < 0:
                od += 1
            else:
                spot[r.zone] += 1
        return FleetPlan(tuple(spot), od)
