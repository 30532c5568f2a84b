"""Lost spot in the what-if, handed to the daemon's lifecycle manager.

Owns: ``react`` and its result ``Reaction``: a plan's hours replayed against
the actual spot market (``MarketActuals``) through a real
``broker.lifecycle.LifecycleManager``, built as the daemon's
``broker.daemon.wiring.default_lifecycle`` builds it (a ``LifecycleConfig``
whose plan epoch is the plan's start; the simulated account launches in every
provider) on a ``ManualClock`` set to simulated times. What the manager
decides is carried out as the daemon's launcher carries it out; nothing here
decides anything.

The replay, hour by hour (``t_h`` = the plan's start + h hours), its steps
run in the daemon's job order (``broker.daemon.jobs``: at ``t_h`` progress
and the fleet at the plan's hour first, then the revocations and upkeep):

1. **The fleet.** The plan's hour in force, in whole instances per
   (workload, pool, tier) as the daemon's reconciler rounds it
   (``broker.planning.reconcile.desired_now``), committed and on-demand
   included (the manager sizes and spreads against the whole fleet), each an
   ``Instance``. An instance stays the same instance (id, launch time) from
   hour to hour while the plan keeps it and spot held it; one that was
   revoked comes back at the next hour start as a new instance if the plan
   still has it. A plan slot covered by an open break-glass stretch is left
   out while the stretch lasts (its work is on on-demand already: the daemon's
   book takes a decided slot out the same way). An hour whose plan ends
   running nodes of a training gang (a re-plan moving or shrinking it) is a
   broker-made move: its units are recorded in the manager's disruption
   budget (``broker.lifecycle.disruption``) at the hour start, as the
   daemon's reconcile records the gang moves it carries out, so the job's
   move interval and the fleet's churn window start there. The replay
   carries the plan's move out without asking the budget's ``grant`` (the
   daemon's reconcile would hold a move it refuses, ``hold``), and records
   no plan-ended spot of other workloads (the daemon's reconcile does).
2. **Revocations.** In a pool whose actual held share ``s`` is below 1 that
   hour, ``floor(n (1 - s) + 1/2)`` of the ``n`` spot instances there are
   revoked at ``t_h`` (the newest first), each as an interruption notice
   (``PREEMPTED`` on GCP) with the provider's notice window, handed to
   ``LifecycleManager.handle`` in pool order, all against one listing (a
   storm's notices see one fleet, as in the daemon). The notice window is
   not billed: a revoked instance holds nothing that hour.
3. **Launches.** A decision's launches join the fleet at ``t_h``. On-demand
   always launches. A spot launch of ``k`` instances in a pool with held share
   ``s`` that hour gets ``floor(k s + 1/2)`` of them; the rest is refused, and,
   as ``broker.daemon.launch.Launcher`` does, the refusal is told to the
   manager (``record_launch_failure``) and the manager's placement rule
   (``LifecycleManager.instead``) names the next pool, until none is left.
   Spot the lifecycle launched (replacements, returns to spot) lives to the
   hour's end: at the next hour start the plan's own slots are re-formed (the
   reconciler folds the decisions into the plan again), which is also when
   revoked capacity comes back. Break-glass on-demand lives until ``tick``
   returns it to spot or ends it, or until a new plan comes into force: the
   daemon's reconcile applies only the decisions made since the plan in
   force, so the new plan's on-demand slots in its pool take it over and
   reconcile ends the rest (``_fold_glass``).
4. **Upkeep.** ``tick`` runs at each hour start (after the notices), at the
   time the manager asks for (``upkeep_due_at``: a stretch whose committed
   dollars run out must be extended or ended on time) and every
   ``TICK_S`` while a stretch is open (returns to spot are opportunistic;
   the market does not change within an hour here, but the breakers and the
   dwell do). With no stretch open ``tick`` has nothing to decide, so it is
   not called between hour starts. A serving return (``after_ready``) keeps
   its on-demand until the spot it returns to is ready (make before break,
   as the daemon's reconcile does).
5. **Progress.** At each hour start the work training and batch jobs have
   done so far is reported (``report_progress``), as the daemon's plan job does.

The manager sees the snapshot the plan in force was made on (the what-if's
one snapshot; in a replayed planning loop, each step's, handed over with
``Reactor.on_market`` as the daemon's plan job hands each refresh), not
hourly ones: within it, it learns of the actual market only through
revocations and refused launches, as the daemon between two market refreshes.

Output: per hour, the whole-instance-hours held per (workload, pool, tier),
split into the plan's own instances and the lifecycle's launches, and the
decisions by kind (``SpotReturn`` kinds included).

Must not: decide (no pool choice, no tier choice: the manager's and its
placement rule's), price anything (``broker.whatif.billing``) or read the
wall clock.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from broker.daemon.jobs import Job, run_in_order
from broker.lifecycle import Decision, LifecycleConfig, LifecycleManager, SpotReturn
from broker.lifecycle.stretches import overlap_s
from broker.planning.plan import Plan
from broker.planning.reconcile import Slot
from broker.whatif.desired import DesiredByHour
from broker.whatif.phases import PhaseClock
from markets.clock import ManualClock
from markets.cloud_fleet import Instance, InstanceState, Notice, NoticeKind
from markets.keys import PoolKey
from markets.model import MarketSnapshot, Tier
from policies.cost_table import CostOptions, CostTable
from policies.workloads.spec import WorkloadClass, WorkloadSet

__all__ = [
    "DECIDED_BY",
    "TICK_S",
    "HeldKey",
    "HeldShares",
    "Reaction",
    "Reactor",
    "lifecycle_config",
    "lifecycle_cost_options",
    "react",
    "work_per_held_hour",
]

# The code that decides (reported beside the figures it decided).
DECIDED_BY = f"{LifecycleManager.__module__}:{LifecycleManager.__qualname__}"
# Upkeep cadence while a break-glass stretch is open: more often than the
# manager's default ``return_lead_s`` (300 s), as its ``tick`` asks.
TICK_S = 240.0
_NOTICE_S = {"aws": 120.0, "gcp": 30.0}  # the providers' revocation warnings
_HOUR_S = 3600.0

HeldKey = tuple[int, str, str, str]  # (hour, workload, pool key, tier)


class HeldShares(Protocol):
    """The share of an hour spot could be held in a pool (``MarketActuals``)."""

    def held(self, key: str, hour: int) -> float: ...


@dataclass(frozen=True)
class Reaction:
    """What a plan held once the lifecycle reacted to the actual market.

    ``plan_held``: instance-hours the plan's own whole instances held, and
    ``plan_instances``: the whole instances the plan had there (the daemon's
    rounding), per (hour, workload, pool, tier). ``launched``: instance-hours
    of the lifecycle's launches (replacements, break-glass, returns to spot).
    ``decisions``: count by kind (``DecisionKind`` and ``ReturnKind`` values).
    ``break_glass_committed_usd``: the manager's ledger at the end (extra
    dollars over spot, never above the fleet's cap).
    """

    plan_held: Mapping[HeldKey, float]
    plan_instances: Mapping[HeldKey, int]
    launched: Mapping[HeldKey, float]
    decisions: Mapping[str, int]
    refused_launches: int
    break_glass_committed_usd: float
    decided_by: str = DECIDED_BY

    def held(self) -> dict[HeldKey, float]:
        """Instance-hours actually held, plan and lifecycle together."""
        out: dict[HeldKey, float] = defaultdict(float)
        for src in (self.plan_held, self.launched):
            for k, v in src.items():
                out[k] += v
        return dict(out)


def work_per_held_hour(costs: CostTable, workload: str, pool_key: str, tier: Tier) -> float:
    """Productive reference work of one instance-hour *held* on ``tier``:
    on spot, the cost table's work less the checkpoint and restart overhead
    (its spot factor without the expected held share, which a held hour
    has by definition)."""
    e = costs.entry(workload, pool_key)
    if e is None:
        return 0.0
    work = e.work_per_instance_hour
    if tier is not Tier.SPOT or e.spot_factor is None:
        return work
    return work / max(e.spot_factor, 1e-12)


@dataclass
class _Live:
    """One instance in the replayed fleet and where its hour's tally started."""

    inst: Instance
    since_s: float
    slot: Slot | None  # the plan slot it is (None: a lifecycle launch)
    notice_id: str | None = None  # the decision that launched it


@dataclass
class _Replay:
    start: datetime  # hour 0 of the replay
    plan: Plan  # the plan in force (its hour 0 is ``plan.start``)
    workloads: WorkloadSet
    snapshot: MarketSnapshot
    actuals: HeldShares
    costs: CostTable
    manager: LifecycleManager
    clock: ManualClock
    desired: DesiredByHour | None = None  # the plan's rounded hours (``plan``'s)
    slots: dict[Slot, list[_Live]] = field(default_factory=dict)
    spot_launched: list[_Live] = field(default_factory=list)
    glass: dict[str, list[_Live]] = field(default_factory=dict)  # notice id -> on-demand
    taken_out: dict[str, Slot] = field(default_factory=dict)  # stretch -> the slot it covers
    plan_held: dict[HeldKey, float] = field(default_factory=lambda: defaultdict(float))
    plan_instances: dict[HeldKey, int] = field(default_factory=dict)
    launched: dict[HeldKey, float] = field(default_factory=lambda: defaultdict(float))
    kinds: Counter[str] = field(default_factory=Counter)
    refused: int = 0
    done: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    serial: int = 0
    hour: int = 0
    # work_per_held_hour per (workload, pool, tier): every instance's every
    # hour is credited (~10^7 times in a year's risk band)
    work: dict[tuple[str, str, Tier], float] = field(default_factory=dict)
    gangs: frozenset[str] = field(init=False, default=frozenset())  # training: synchronous gangs
    replanned: bool = False  # a new plan is in force from the next hour formed

    def __post_init__(self) -> None:
        self.gangs = frozenset(w.name for w in self.workloads.of_class(WorkloadClass.TRAINING))

    # --- the fleet ------------------------------------------------------------------
    def _new_id(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}#{self.serial}"

    def _instance(self, w: str, pool: str, tier: Tier, at: datetime, iid: str) -> Instance:
        snap = self.costs.pools.get(pool)
        units = 1 if snap is None else snap.instance.units
        return Instance(
            instance_id=iid,
            pool_key=pool,
            tier=tier,
            workload=w,
            state=InstanceState.RUNNING,
            units=units,
            launched_at=at,
        )

    def fleet(self) -> tuple[Instance, ...]:
        out = [x.inst for xs in self.slots.values() for x in xs]
        out += [x.inst for x in self.spot_launched]
        out += [x.inst for xs in self.glass.values() for x in xs]
        return tuple(out)

    def _close(self, x: _Live, until_s: float) -> None:
        """Credit ``x`` its held time this hour up to ``until_s``."""
        held_h = max(0.0, until_s - x.since_s) / _HOUR_S
        i = x.inst
        key = (self.hour, i.workload, i.pool_key, i.tier.value)
        if x.slot is not None:
            self.plan_held[key] += held_h
        else:
            self.launched[key] += held_h
        wk = (i.workload, i.pool_key, i.tier)
        work = self.work.get(wk)
        if work is None:  # the table's figure, looked up once per slot
            work = self.work[wk] = work_per_held_hour(self.costs, *wk)
        self.done[i.workload] += held_h * work
        x.since_s = until_s

    # --- one hour ---------------------------------------------------------------
    def run_hour(self, h: int) -> None:
        self.hour = h
        t0 = self.start + timedelta(hours=h)
        t0_s = t0.timestamp()
        self.clock.set(t0)
        # The daemon's job order (``broker.daemon.jobs``), twice at the hour
        # start: the plan's new hour reconciled, then the hour's revocations.
        # Unlike the daemon, whose notices name instances that exist, the hour's
        # revocations are drawn on the fleet formed for it, so that comes first.
        run_in_order({Job.PROGRESS: self._progress, Job.RECONCILE: lambda: self._form(t0, h)})
        run_in_order({Job.NOTICES: lambda: self._storm(t0, h),
                      Job.STRETCHES: lambda: self._upkeep(t0)})  # fmt: skip
        end = t0_s + _HOUR_S
        while True:
            due = self.manager.upkeep_due_at()
            if due is None:
                break
            now_s = self.clock.now().timestamp()
            # On the grid, or when the manager asks; never standing still.
            nxt = max(min(due.timestamp(), now_s + TICK_S), now_s + 1.0)
            if nxt >= end:
                break
            self.clock.set(datetime.fromtimestamp(nxt, t0.tzinfo))
            self._upkeep(self.clock.now())
        for x in [*self._all_live()]:
            self._close(x, end)
        self.spot_launched.clear()  # folded back into the plan at the next hour

    def _progress(self) -> None:
        """The work training and batch jobs have done so far, reported."""
        for w in self.workloads.workloads:
            if w.workload_class is not WorkloadClass.SERVING:
                self.manager.report_progress(w.name, self.done[w.name])

    def _all_live(self) -> Iterable[_Live]:
        for xs in self.slots.values():
            yield from xs
        yield from self.spot_launched
        for xs in self.glass.values():
            yield from xs

    def _terminate(self, iid: str, alloc_id: str, now_s: float) -> None:
        """Carry out one termination ``tick`` named. On-demand instances are
        alike: when the manager names one of the plan's own (``FleetView.retire``
        takes any on-demand of the pool launched since the stretch began), the
        reconciler would launch it again at once to meet the plan, so the
        stretch's own break-glass instance goes instead."""
        for xs in self.glass.values():
            for x in xs:
                if x.inst.instance_id == iid:
                    self._close(x, now_s)
                    xs.remove(x)
                    return
        for xs in self.slots.values():
            for x in xs:
                if x.inst.instance_id != iid:
                    continue
                twin = self._glass_twin(x.inst, alloc_id)
                victim, home = (x, xs) if twin is None else twin
                self._close(victim, now_s)
                home.remove(victim)
                return

    def _glass_twin(self, inst: Instance, alloc_id: str) -> tuple[_Live, list[_Live]] | None:
        order = sorted(self.glass, key=lambda n: n != alloc_id)  # the stretch's own first
        for nid in order:
            xs = self.glass[nid]
            for x in xs:
                if (x.inst.workload, x.inst.pool_key) == (inst.workload, inst.pool_key):
                    return x, xs
        return None

    def _settle(self) -> None:
        self.glass = {n: xs for n, xs in self.glass.items() if xs}
        # A slot stays out of the plan while capacity that covers it runs.
        self.taken_out = {n: s for n, s in self.taken_out.items() if n in self.glass}

    def _reconcile_glass(self, t0_s: float) -> None:
        """At the hour start the reconciler ends on-demand capacity no open
        decision wants: break-glass instances whose stretch the manager no
        longer keeps (``stretch_state`` is ``None``)."""
        for nid in [n for n in self.glass if self.manager.stretch_state(n) is None]:
            for x in self.glass[nid]:
                self._close(x, t0_s)
            del self.glass[nid]
        self._settle()

    def _fold_glass(self, want: Mapping[Slot, int], t0_s: float, ended: dict[str, float]) -> None:
        """A new plan comes into force: the daemon's reconcile adjusts a plan
        only by the decisions made since it (``broker.daemon.reconcile``,
        ``desired``), so break-glass on-demand launched before it is no longer
        a decision's but an instance like any other. Where the new plan wants
        on-demand of that workload in that pool beyond what its slot holds,
        the instance is one of the plan's (same id and launch time); elsewhere
        reconcile ends it (a gang's node counts as a broker-made move). Kept
        until its stretch returned or ended instead, on portfolio seed 2 a
        fine-tune node would stay on on-demand 25 hours in the zone the
        re-plan had moved the gang from, alone. The manager's stretch stays
        open, as in the daemon (its ``tick`` finds what is left of it)."""
        room = {slot: n - len(self.slots.get(slot, ())) for slot, n in want.items()}
        for nid in sorted(self.glass):
            for x in self.glass[nid]:
                self._close(x, t0_s)
                slot = (x.inst.workload, x.inst.pool_key, x.inst.tier.value)
                if room.get(slot, 0) > 0:
                    room[slot] -= 1
                    x.slot = slot
                    self.slots.setdefault(slot, []).append(x)
                elif slot[0] in self.gangs:
                    ended[slot[0]] += x.inst.units
        self.glass.clear()
        self.taken_out.clear()

    def _form(self, t0: datetime, h: int) -> None:
        self._reconcile_glass(t0.timestamp())
        if self.desired is None or self.desired.plan is not self.plan:
            self.desired = DesiredByHour(self.plan, self.workloads)
        want = self.desired.at(t0)
        ended: dict[str, float] = defaultdict(float)  # gang -> units of its nodes the plan ends
        if self.replanned:
            self.replanned = False
            self._fold_glass(want, t0.timestamp(), ended)
        out_count = Counter(self.taken_out.values())
        for slot in sorted(set(self.slots) | set(want)):  # ids in one order every run
            n = want.get(slot, 0)
            if n:
                self.plan_instances[(h, *slot)] = n
            n = max(0, n - out_count.get(slot, 0))
            live = self.slots.setdefault(slot, [])
            if slot[0] in self.gangs:
                ended[slot[0]] += sum(x.inst.units for x in live[n:])
            del live[n:]
            w, pool, tier = slot
            while len(live) < n:
                iid = self._new_id(f"plan:{w}:{pool}:{tier}")
                inst = self._instance(w, pool, Tier(tier), t0, iid)
                live.append(_Live(inst, t0.timestamp(), slot))
            if not live:
                del self.slots[slot]
        for w, units in sorted(ended.items()):
            if units > 0:  # a broker-made move: the one disruption budget counts it
                self.manager.disruption.record(units, t0.timestamp(), w)

    def _storm(self, t0: datetime, h: int) -> None:
        """Revoke the lost share of every spot pool; one decision per notice."""
        fleet = self.fleet()
        lost: list[tuple[_Live, Notice]] = []
        for slot in sorted(self.slots):
            _, pool, tier = slot
            if tier != Tier.SPOT.value:
                continue
            live = self.slots[slot]
            held = self.actuals.held(pool, h)
            k = min(len(live), math.floor(len(live) * (1.0 - held) + 0.5))
            for x in live[len(live) - k :]:
                provider = PoolKey.parse(pool).provider
                notice = Notice(
                    notice_id=f"revoke:{x.inst.instance_id}:{h}",
                    kind=NoticeKind.PREEMPTED if provider == "gcp" else NoticeKind.INTERRUPTION,
                    instance_id=x.inst.instance_id,
                    at=t0,
                    deadline=t0 + timedelta(seconds=_NOTICE_S.get(provider, 120.0)),
                    pool_key=pool,
                )
                lost.append((x, notice))
            del live[len(live) - k :]
        for x, notice in lost:
            d = self.manager.handle(notice, fleet, self.snapshot)
            self.kinds[d.kind.value] += 1
            self._carry_out(d, x.slot, t0)

    def _carry_out(self, d: Decision, slot: Slot | None, at: datetime) -> None:
        if d.workload is None:
            return
        # On-demand the manager took back instead of launching (``Decision.kept``)
        # is, here, never a retired break-glass instance (a return's is ended at
        # once: ``_apply``) but one the plan's slots hold (``_terminate`` ended
        # its twin): the daemon's reconcile makes up the kept count with a launch.
        for x in (*d.launches, *d.kept):
            got = self._launch(d.notice_id, d.workload, x.pool_key, x.tier, x.count, at)
            if x.tier is Tier.ON_DEMAND and got:
                self.glass.setdefault(d.notice_id, []).extend(got)
        if d.notice_id in self.glass and slot is not None:
            self.taken_out[d.notice_id] = slot

    def _launch(
        self, nid: str, workload: str, pool: str, tier: Tier, count: int, at: datetime
    ) -> list[_Live]:
        """Launch as the daemon's launcher does: refused capacity is told to
        the manager and the next pool is the manager's placement rule's."""
        out: list[_Live] = []
        tried: set[str] = set()
        while count > 0:
            ok = count
            if tier is Tier.SPOT:
                ok = min(count, math.floor(count * self.actuals.held(pool, self.hour) + 0.5))
            for _ in range(ok):
                inst = self._instance(workload, pool, tier, at, self._new_id(f"{nid}:{pool}"))
                x = _Live(inst, at.timestamp(), None, nid)
                out.append(x)
                if tier is Tier.SPOT:
                    self.spot_launched.append(x)
            left = count - ok
            if left <= 0:
                break
            self.refused += 1
            tried.add(pool)
            self.manager.record_launch_failure(pool, tier, notice_id=nid)
            alt = self.manager.instead(workload, pool, tier, left, tried, at)
            if alt is None:
                break
            pool, count = alt
        return out

    def _upkeep(self, now: datetime) -> None:
        returns = self.manager.tick(now, self.fleet(), self.snapshot)
        for r in returns:
            self.kinds[r.kind.value] += 1
            self._apply(r, now)

    def _apply(self, r: SpotReturn, now: datetime) -> None:
        now_s = now.timestamp()
        end_s = now_s
        w = next((x for x in self.workloads.workloads if x.name == r.workload), None)
        if r.after_ready and w is not None:
            end_s += overlap_s(w)  # make before break: held until the spot is ready
        for iid in r.terminate_instance_ids:
            self._terminate(iid, r.allocation_id, end_s)
        self._settle()
        for li in r.launches:
            self._launch(
                f"{r.allocation_id}:return", r.workload, li.pool_key, li.tier, li.count, now
            )


def lifecycle_config(plan: Plan, config: LifecycleConfig | None = None) -> LifecycleConfig:
    """The manager's settings for a replay of ``plan``: ``config`` (the
    daemon's, if the caller has one) with the plan's start as the plan epoch,
    unless it names one."""
    cfg = config or LifecycleConfig()
    if cfg.horizon_start is None:
        cfg = cfg.model_copy(update={"horizon_start": plan.start})
    return cfg


def lifecycle_cost_options(
    snapshot: MarketSnapshot, config: LifecycleConfig | None = None
) -> CostOptions:
    """The options the manager prices ``snapshot`` with (its stale-market
    hazard multiplier, nothing else): a caller that holds that table hands
    it to ``react`` as ``lifecycle_costs``."""
    cfg = config or LifecycleConfig()
    return CostOptions(
        interruption_multiplier=cfg.stale_hazard_multiplier if snapshot.stale else 1.0
    )


class Reactor:
    """The lifecycle manager and the replayed fleet, driven a stretch of
    hours at a time: ``run(plan, first_hour, hours)`` replays those hours of
    the run (hour 0 at ``start``) with ``plan`` in force (its own hour 0 at
    ``first_hour``), so a planning loop hands each step's plan to the same
    manager the daemon's plan job would keep across re-plans. ``done`` is
    the work each job's held capacity did so far (the lifecycle's launches
    included), ``result()`` the whole ``Reaction``. ``react`` is one plan
    run through it from start to end."""

    def __init__(
        self,
        start: datetime,
        workloads: WorkloadSet,
        snapshot: MarketSnapshot,
        actuals: HeldShares,
        *,
        costs: CostTable,
        lifecycle_costs: CostTable | None = None,
        config: LifecycleConfig | None = None,
        timings: PhaseClock | None = None,
    ) -> None:
        cfg = config or LifecycleConfig()
        self._timings = timings  # the manager's hours timed as "reaction"
        if cfg.horizon_start is None:
            cfg = cfg.model_copy(update={"horizon_start": start})
        self.start = start
        self.costs = costs
        clock = ManualClock(start)
        self.manager = LifecycleManager(workloads, clock, cfg)
        if lifecycle_costs is None and costs.options == lifecycle_cost_options(snapshot, cfg):
            lifecycle_costs = costs
        self.manager.on_market(snapshot, lifecycle_costs)
        self._args = (workloads, snapshot, actuals, costs, self.manager, clock)
        self._config = cfg
        self._snapshot = snapshot
        self._replay: _Replay | None = None
        self._given: Plan | None = None  # the plan last handed to ``run``

    def on_market(self, snapshot: MarketSnapshot, costs: CostTable | None = None) -> None:
        """The market from the next hour on: as the daemon's plan job hands
        each refreshed snapshot to its manager, a planning loop hands the
        snapshot each step planned on, and its table (``costs``, used when
        priced with the manager's options; else the manager prices it once).
        The work done stays measured on the table the reactor was built
        with, as the bill measures it."""
        if costs is not None and costs.options == lifecycle_cost_options(snapshot, self._config):
            self.manager.on_market(snapshot, costs)
        self._snapshot = snapshot  # the replay takes it up at the next ``run``

    def run(
        self, plan: Plan, first_hour: int, hours: int, desired: DesiredByHour | None = None
    ) -> None:
        """``desired``: ``plan``'s rounded hours when the caller holds them
        (a plan replayed more than once, the risk band's samples)."""
        at = self.start + timedelta(hours=first_hour)
        given = plan
        if plan.start != at:
            plan = dataclasses.replace(plan, start=at)
        if self._replay is None:
            self._replay = _Replay(self.start, plan, *self._args)
        elif given is not self._given:
            self._replay.replanned = True
        self._given = given
        self._replay.plan = plan
        self._replay.snapshot = self._snapshot
        if desired is not None and desired.plan is plan and desired.workloads is self._args[0]:
            self._replay.desired = desired
        with self._timings.phase("reaction") if self._timings is not None else nullcontext():
            for h in range(first_hour, first_hour + hours):
                self._replay.run_hour(h)

    @property
    def plan_held(self) -> Mapping[HeldKey, float]:
        return {} if self._replay is None else self._replay.plan_held

    @property
    def plan_instances(self) -> Mapping[HeldKey, int]:
        return {} if self._replay is None else self._replay.plan_instances

    @property
    def launched(self) -> Mapping[HeldKey, float]:
        return {} if self._replay is None else self._replay.launched

    def result(self) -> Reaction:
        r = self._replay
        return Reaction(
            plan_held={} if r is None else dict(r.plan_held),
            plan_instances={} if r is None else dict(r.plan_instances),
            launched={} if r is None else dict(r.launched),
            decisions={} if r is None else dict(sorted(r.kinds.items())),
            refused_launches=0 if r is None else r.refused,
            break_glass_committed_usd=self.manager.break_glass_committed_usd,
        )


def react(
    plan: Plan,
    workloads: WorkloadSet,
    snapshot: MarketSnapshot,
    actuals: HeldShares,
    *,
    costs: CostTable,
    lifecycle_costs: CostTable | None = None,
    config: LifecycleConfig | None = None,
    desired: DesiredByHour | None = None,
) -> Reaction:
    """Replay ``plan``'s hours against ``actuals`` through a lifecycle
    manager (see the module docstring). ``costs`` is ``snapshot``'s table (any
    options): it measures the work done. The manager ranks on a table of its
    own options (``lifecycle_cost_options``): ``lifecycle_costs`` if given,
    else ``costs`` when the options agree, else one it computes.
    ``desired``: ``plan``'s rounded hours, to share between replays of it."""
    cfg = lifecycle_config(plan, config)
    reactor = Reactor(plan.start, workloads, snapshot, actuals, costs=costs,
                      lifecycle_costs=lifecycle_costs, config=cfg)  # fmt: skip
    reactor.run(plan, 0, plan.hours, desired)
    return reactor.result()
