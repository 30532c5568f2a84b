"""The fleet setting's ``spotfolio``: a serving workload of ``N`` replicas
decided by the daemon's own objects over a replayed window.

Owns: ``ProductFleet`` (a ``policies.online.fleet.FleetPolicy`` the fleet
engine ``broker.simulate.fleet`` replays), ``fleet_workloads`` (the serving
workload it runs) and ``DECIDED_BY``. Per window it builds what the daemon
composes for a serving workload (``broker.daemon.wiring.default_lifecycle``:
the project's ``LifecycleManager`` on a clock of its own) and translates:

- the market: one pool per zone of the window, spot at the zone's price,
  on-demand at the setting's; ``spot_available``, the hazard (revocations
  per hour held: ``markets.hazard.posterior``'s mean on the assumed prior), the
  trailing week's held share and a placement score from the zone's history
  before the window and the ticks seen since, as the replay market reports
  them (``markets.replay.market``). A new snapshot when a zone's spot comes
  or goes, and at least every ``SNAPSHOT_REFRESH_S``. With
  ``failure_domains=True`` the snapshot also carries the zones whose
  revocations came together in that same record (the week before and the
  window so far: ``markets.hazard.clustering.failure_domains``), which the
  lifecycle's replacements avoid after a revocation in one of them;
- the plan: every ``REPLAN_S`` (the daemon's hourly replan), and at a new
  snapshot that offers spot in a zone the last did not while the plan in
  force holds on-demand (the daemon's market refresh,
  ``broker.daemon.plan_job.spot_returned``), the fast path
  (``broker.planning.optimizer.fast.fast_plan``) on a one-hour problem from
  the snapshot in force, pools that just refused spot at zero capacity. The
  fast path, not the MILP: a one-workload, one-hour problem is what it solves
  exactly (the cheapest effective pools within the caps), in milliseconds,
  where a MILP per window-hour would take the bench hours;
- reconcile, at every tick start (``broker.daemon.reconcile``, with its
  functions): the plan's hour rounded as reconcile rounds it
  (``desired_now``), the decisions since the plan (``decision_deltas`` over
  the records the daemon stores for them, applied to the plan's counts as
  the daemon's reconcile applies them), refused pools substituted
  (``substitute``), running replicas kept in equivalent pools, a ready one
  before a warming one (``stick`` with ``FleetBook.ready_counts``),
  then ``diff``: launches first (another pass when a pool refused), then
  terminations, a ready replica kept while the one replacing it warms up
  (make before break, ``warm_up_seconds``); the on-demand so kept is told
  to the manager (``surplus``, ``LifecycleManager.kept_until_ready``);
- a revocation notice on a zone: one ``Notice`` per replica there, handed to
  ``LifecycleManager.handle``; the replicas of its ``LaunchIntent`` s are what
  the engine launches. A revocation the engine made without a notice (spot
  launched in a zone at its notice) is handed over when it is seen;
- a launch the engine would refuse (spot in a zone without spot): the
  daemon's launcher path (``broker.daemon.launch``): ``record_launch_failure``,
  then ``LifecycleManager.instead`` for the next pool, until none is left;
- every tick start: ``LifecycleManager.tick`` (break-glass upkeep: returns to
  spot, extensions), its launches launched and its terminations terminated
  (a serving return's, ``after_ready``, left to reconcile as the daemon's
  ``broker.daemon.stretches`` leaves them).

The fleet is the daemon's book: ``Instance`` values, one per replica, a new
tuple whenever it changes (the manager indexes a sequence once).

At a tick start, in the daemon's job order (``broker.daemon.jobs``): the
revoked replicas leave the fleet (notices), the lifecycle's upkeep, the plan
when due, reconcile; at a notice, the notices alone. The window's first tick
is the daemon's start: no fleet, a plan, a reconcile.

Must not: decide anything (every choice above is the plan's, reconcile's or
the lifecycle manager's), or look ahead (it reads the engine's view only).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np

from broker.daemon.book import FleetBook, decision_deltas, stick, substitute
from broker.daemon.config import DaemonConfig
from broker.daemon.jobs import Job, run_in_order
from broker.daemon.lifecycle import Lifecycle
from broker.daemon.plan_job import spot_returned
from broker.daemon.reconcile import STICK_MARGIN
from broker.daemon.store.notices import DecisionRecord
from broker.daemon.store.tx import Json
from broker.daemon.wiring import default_lifecycle
from broker.lifecycle import LaunchIntent
from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import build_problem
from broker.planning.plan import Plan
from broker.planning.reconcile import (
    Slot,
    apply_deltas,
    desired_now,
    diff,
    surplus,
    warm_up_seconds,
)
from markets.clock import ManualClock
from markets.cloud_fleet import (
    OWNER_TAG,
    Instance,
    InstanceState,
    LaunchRequest,
    Notice,
    NoticeKind,
    TerminateRequest,
)
from markets.hazard.clustering import failure_domains
from markets.hazard.prior import ASSUMED_PRIOR
from markets.model import (
    FailureDomain,
    Hazard,
    HazardSource,
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
REPLAN_S = 3600.0  # the daemon's replan interval (``Intervals.replan_s``)
RECONCILE_PASSES = 3  # diffs per reconcile when pools refuse (``broker.daemon.reconcile``)


def fleet_workloads(replicas: int, **contract: float) -> WorkloadSet:
    """The serving workload of the fleet setting: ``replicas`` units all day
    on the one instance type, the serving class's defaults for the rest
    (its 3-minute replica warm-up, ``restart_minutes``) except spot, allowed
    for all of it and in any one zone or pool (the SkyServe setting:
    on-demand only where spot fails, no diversification cap; the class
    default keeps 70 % on non-revocable tiers and at most half of its spot in
    one zone, which leaves half on on-demand whenever one zone alone has
    spot). ``contract``: other workload fields (``max_zone_share=0.5``...),
    for a what-if on the contract."""
    return WorkloadSet.model_validate(
        {
            "workloads": [
                {
                    "name": WORKLOAD,
                    "class": "serving",
                    "instance_types": [INSTANCE_TYPE],
                    "demand": {"base_units": replicas, "peak_units": replicas},
                    "max_spot_share": 1.0,
                    "max_zone_share": 1.0,
                    "max_pool_share": 1.0,
                    **contract,
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
    event_ticks: list[int] = field(default_factory=list)  # when, in ticks seen

    def observe(self, held: bool, tick_h: float) -> None:
        if self.seen and self.seen[-1]:
            self.held_hours += tick_h
            if not held:
                self.events += 1
                self.event_ticks.append(len(self.seen))
        self.seen.append(held)


@dataclass
class _Replica:
    instance: Instance
    zone: int  # -1: on-demand
    noticed: bool = False


@dataclass
class FleetRun:
    """One window's objects: the daemon's manager, its book, its plan in
    force, the market it sees and the fleet (the cloud's listing)."""

    spec: FleetSpec
    clock: ManualClock
    manager: Lifecycle
    book: FleetBook
    workloads: WorkloadSet
    zones: list[_Zone]
    instance_type: InstanceType
    replicas: dict[str, _Replica] = field(default_factory=dict)
    fleet: tuple[Instance, ...] = ()
    snapshot: MarketSnapshot | None = None
    snapshot_s: float = -1.0
    snapshot_avail: tuple[bool, ...] = ()
    avail: tuple[bool, ...] = ()
    last_tick_s: float = -1.0
    plan: Plan | None = None
    plan_s: float = -1.0
    planned: dict[Slot, int] = field(default_factory=dict)  # the plan's hour, whole
    generation: int = 0
    spot_back: bool = False  # a snapshot since the plan offers spot its market did not
    decisions: list[DecisionRecord] = field(default_factory=list)
    ids: itertools.count[int] = field(default_factory=itertools.count)
    notices: itertools.count[int] = field(default_factory=itertools.count)


class ProductFleet:
    """The daemon's serving decisions behind the fleet engine's rule protocol
    (module docstring). Its memory is the window's ``FleetRun``."""

    name = "spotfolio"

    def __init__(self, *, failure_domains: bool = False, **contract: float) -> None:
        self.contract = contract  # workload fields over ``fleet_workloads``'s
        self.failure_domains = failure_domains  # snapshots carry them (module docstring)

    def start(self, spec: FleetSpec) -> FleetRun:
        provider = spec.provider or "aws"
        clock = ManualClock(EPOCH)
        workloads = fleet_workloads(spec.replicas, **self.contract)
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
        book = FleetBook(OWNER, workloads, manager)
        return FleetRun(spec, clock, manager, book, workloads, zones, itype)

    def decide(
        self, spec: FleetSpec, view: FleetView, memory: FleetRun
    ) -> tuple[FleetPlan, FleetRun]:
        run = memory
        now_s = view.elapsed_hours * 3600.0
        run.clock.set(EPOCH + timedelta(seconds=now_s))
        run.avail = tuple(z.available for z in view.zones)
        if view.at_notice:
            run_in_order({Job.NOTICES: lambda: self._notices(run, view, now_s)})
            return self._plan(run), run
        if now_s > run.last_tick_s:
            for zone, ok in zip(run.zones, run.avail, strict=True):
                zone.observe(ok, spec.tick_hours)
            run.last_tick_s = now_s
        run_in_order(
            {
                Job.NOTICES: lambda: self._revoked(run, now_s),
                Job.STRETCHES: lambda: self._tick(run, now_s),
                Job.PLAN: lambda: self._replan_if_due(run, now_s),
                Job.RECONCILE: lambda: self._reconcile(run, now_s),
            }
        )
        return self._plan(run), run

    # --- the market ---------------------------------------------------------------

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
        share_n = max(1, round(TRAILING_SHARE_HOURS / tick_h))
        day_n = max(1, round(PLACEMENT_WINDOW_HOURS / tick_h))
        pools = []
        for j, zone in enumerate(run.zones):
            trail = zone.seen[-share_n:]
            share = sum(trail) / len(trail) if trail else None
            day = zone.seen[-day_n:]
            instant = 1.0 if run.avail[j] else 0.0
            recent = sum(day) / len(day) if day else instant
            score = min(10, max(1, 1 + round(9.0 * (0.5 * recent + 0.5 * instant))))
            hazard = _hazard(zone.events, zone.held_hours)
            pools.append(
                PoolSnapshot(
                    pool=zone.pool,
                    instance=run.instance_type,
                    on_demand_usd_per_hour=spec.on_demand_usd_per_hour,
                    spot_usd_per_hour=spec.spot_usd_per_hour[j],
                    placement_score=score,
                    hazard=hazard,
                    available_share=share,
                    spot_available=run.avail[j],
                    observed_at=at,
                )
            )
        domains = self._domains(run) if self.failure_domains else ()
        snap = MarketSnapshot(
            at=at, pools=tuple(pools), source="fleet-window", failure_domains=domains
        )
        run.spot_back |= bool(spot_returned(run.snapshot, snap, run.plan, at, run.workloads))
        run.snapshot, run.snapshot_s, run.snapshot_avail = snap, now_s, run.avail
        run.book.set_snapshot(snap)
        run.manager.on_market(snap)
        return snap

    @staticmethod
    def _domains(run: FleetRun) -> tuple[FailureDomain, ...]:
        """Zones whose revocations came together in the record seen so far."""
        tick_s = run.spec.tick_hours * 3600.0
        ticks = max((len(z.seen) for z in run.zones), default=0)
        if ticks == 0:
            return ()
        events = {z.pool_key: np.asarray(z.event_ticks, dtype=float) * tick_s for z in run.zones}
        return failure_domains(events, span_s=ticks * tick_s, resolution_s=tick_s, source="account")

    # --- the plan and reconcile (broker.daemon.plan_job, broker.daemon.reconcile) -------

    def _replan_if_due(self, run: FleetRun, now_s: float) -> None:
        """Due: no plan yet, spot back since the plan, or ``REPLAN_S`` passed."""
        if run.plan is None or run.spot_back or now_s - run.plan_s >= REPLAN_S - 1e-6:
            self._replan(run, now_s)

    def _replan(self, run: FleetRun, now_s: float) -> None:
        """The plan job: the fast path over the next hour, on the market now,
        pools that just refused spot at zero capacity."""
        snap = self._market(run, now_s)
        demand = {WORKLOAD: np.full(1, float(run.spec.replicas))}
        at = EPOCH + timedelta(seconds=now_s)
        problem = build_problem(
            snap,
            run.workloads,
            demand,
            hours=1,
            spot_capacity_instances=run.book.unavailable_capacity(at, 1) or None,
        )
        run.plan = fast_plan(problem)
        run.plan_s = now_s
        # The plan covers one hour: its whole counts hold until the next plan.
        run.planned = desired_now(run.plan, at, run.workloads)
        run.generation += 1
        run.spot_back = False
        run.decisions.clear()  # deltas count from the plan in force

    def _reconcile(self, run: FleetRun, now_s: float) -> None:
        """The reconcile job: the plan's hour plus the decisions since it,
        refused pools substituted, running replicas kept in equivalent pools;
        launches first (another diff when a pool refused), then terminations."""
        assert run.plan is not None
        at = EPOCH + timedelta(seconds=now_s)
        requests: list[LaunchRequest | TerminateRequest] = []
        warm_s = warm_up_seconds(run.workloads)
        for _ in range(RECONCILE_PASSES):
            want = apply_deltas(run.planned, decision_deltas(run.decisions, run.planned))
            want = substitute(want, run.book, at)
            ready = run.book.ready_counts(run.fleet, at, warm_s)
            want = stick(want, run.book.counts(run.fleet), run.book, STICK_MARGIN, ready)
            doomed = frozenset(i for i, r in run.replicas.items() if r.noticed)
            requests = diff(
                want,
                run.fleet,
                run.generation,
                OWNER,
                doomed=doomed,
                now=at,
                warm_s=warm_s,
            )
            refused = False
            for req in requests:
                if isinstance(req, LaunchRequest):
                    intent = LaunchIntent(req.pool_key, req.tier, req.count)
                    refused |= not self._launch(run, intent, None, now_s, fallback=False)
            if not refused:
                break
        for req in requests:
            if isinstance(req, TerminateRequest):
                self._terminate(run, req.instance_ids)
        # what make before break keeps only until its replacement is ready
        kept = surplus(want, run.fleet, OWNER, doomed=doomed, tier=Tier.ON_DEMAND)
        run.manager.kept_until_ready(kept)

    # --- notices and upkeep (broker.daemon.notices, broker.daemon.stretches) ---------

    def _notices(self, run: FleetRun, view: FleetView, now_s: float) -> None:
        notice_s = run.spec.notice_hours * 3600.0
        at = EPOCH + timedelta(seconds=now_s)
        for j, z in enumerate(view.zones):
            if not z.noticed:
                continue
            for r in [r for r in run.replicas.values() if r.zone == j and not r.noticed]:
                self._handle(run, r, at, at + timedelta(seconds=notice_s), now_s)

    def _revoked(self, run: FleetRun, now_s: float) -> None:
        """Spot taken at this tick: out of the fleet (a loss without a notice
        is handed to the manager as it is seen)."""
        at = EPOCH + timedelta(seconds=now_s)
        gone = [r for r in run.replicas.values() if r.zone >= 0 and not run.avail[r.zone]]
        for r in gone:
            if not r.noticed:
                self._handle(run, r, at, at, now_s)
        self._terminate(run, [r.instance.instance_id for r in gone])

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
        inst = r.instance
        kind = decision.kind.value
        payload: Json = {
            "kind": kind,
            "launches": [_launch_json(x) for x in decision.launches],
            "kept": [_launch_json(x) for x in decision.kept],
            "lost_slot": [inst.workload, inst.pool_key, inst.tier.value],
            "lost_count": 1,
            "taken_out": kind != "ignore",
        }
        run.decisions.append(
            DecisionRecord(notice.notice_id, kind, WORKLOAD, decision.reason, 0.0, 0.0, payload, at)
        )
        for intent in decision.launches:
            self._launch(run, intent, notice.notice_id, now_s)

    def _tick(self, run: FleetRun, now_s: float) -> None:
        at = EPOCH + timedelta(seconds=now_s)
        for ret in run.manager.tick(at, run.fleet, self._market(run, now_s)):
            by_id = {i: r.instance for i, r in run.replicas.items()}
            ended = [i for i in ret.terminate_instance_ids if i in by_id]
            payload: Json = {
                "kind": ret.kind.value,
                "launches": [_launch_json(x) for x in ret.launches],
                "ended_slots": [
                    [by_id[i].workload, by_id[i].pool_key, by_id[i].tier.value] for i in ended
                ],
            }
            run.decisions.append(
                DecisionRecord(None, ret.kind.value, WORKLOAD, ret.reason, 0.0, 0.0, payload, at)
            )
            for intent in ret.launches:
                self._launch(run, intent, None, now_s)
            if not ret.after_ready:  # else reconcile ends them once the spot is ready
                self._terminate(run, ended)

    # --- the cloud ------------------------------------------------------------------

    def _launch(
        self,
        run: FleetRun,
        intent: LaunchIntent,
        notice_id: str | None,
        now_s: float,
        *,
        fallback: bool = True,
    ) -> bool:
        """The daemon's launcher: a refused pool is reported, then (with
        ``fallback``) the next pool the placement rule gives
        (``LifecycleManager.instead``) is tried. False: nothing launched."""
        pool, tier, count = intent.pool_key, intent.tier, int(intent.count)
        tried: set[str] = set()
        zone_of = {z.pool_key: j for j, z in enumerate(run.zones)}
        at = EPOCH + timedelta(seconds=now_s)
        while True:
            j = zone_of.get(pool)
            if j is not None and (tier is not Tier.SPOT or run.avail[j]):
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
                        tags={OWNER_TAG: OWNER},
                    )
                    run.replicas[iid] = _Replica(inst, j if tier is Tier.SPOT else -1)
                self._sync(run)
                return True
            tried.add(pool)
            run.manager.record_launch_failure(pool, tier, notice_id=notice_id)
            if not fallback:
                return False
            alt = run.manager.instead(WORKLOAD, pool, tier, count, tried, at)
            if alt is None:
                return False
            pool, count = alt

    def _terminate(self, run: FleetRun, ids: Sequence[str]) -> None:
        gone = [i for i in ids if i in run.replicas]
        for iid in gone:
            del run.replicas[iid]
        if gone:
            self._sync(run)

    @staticmethod
    def _sync(run: FleetRun) -> None:
        run.fleet = tuple(r.instance for r in run.replicas.values())
        run.book.last_fleet = run.fleet

    @staticmethod
    def _plan(run: FleetRun) -> FleetPlan:
        spot = [0] * len(run.zones)
        od = 0
        for r in run.replicas.values():
            if r.zone < 0:
                od += 1
            else:
                spot[r.zone] += 1
        return FleetPlan(tuple(spot), od)


def _hazard(events: int, held_hours: float) -> Hazard:
    """The posterior mean of ``markets.hazard.posterior.estimate_hazard`` on
    the assumed prior (what a snapshot's ``Hazard`` carries), without the
    credible interval it also computes (gamma quantiles: most of this
    adapter's time, and no decision reads them)."""
    prior = ASSUMED_PRIOR
    hours = prior.pseudo_hours + held_hours
    return Hazard(
        rate_per_hour=(prior.pseudo_events + events) / hours,
        source=HazardSource.OBSERVED if held_hours > 0 else prior.source,
        confidence=held_hours / hours,
        observed_hours=held_hours,
    )


def _launch_json(x: LaunchIntent) -> Json:
    return {"pool_key": x.pool_key, "tier": x.tier.value, "count": int(x.count)}
