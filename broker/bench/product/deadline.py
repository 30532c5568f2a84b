"""The deadline setting's ``spotfolio``: the daemon's lifecycle manager on a replayed trace.

Owns ``ProductDeadline``, a ``policies.online.deadline.DeadlinePolicy`` that,
per window, builds a real ``broker.lifecycle.LifecycleManager`` (a manual
clock at the window's ticks, a one-pool ``MarketSnapshot`` with spot at 1 and
on-demand at ``k``, a one-job ``WorkloadSet``: training, ``unit_hours`` the
setting's compute, ``deadline_hours`` the window's, restart the changeover,
no break-glass cap) and ``DECIDED_BY``, the code that decides.

Each tick, in the daemon's job order (``broker.daemon.jobs``):

1. the plan job reports the job's progress (``report_progress``);
2. a spot instance the trace revoked becomes a ``Notice`` for ``handle``;
   its launches are made (a refused spot launch is ``record_launch_failure``);
3. ``tick``: its returns, opens, extensions and ends are carried out
   (launches first, then terminations), as ``broker.daemon.stretches`` does;
4. the reconcile's part: the plan runs the job on spot, so with nothing
   holding the job and the offering not marked unavailable, spot is launched
   (refused: ``record_launch_failure``).

The mode returned is what the fleet then holds. The snapshot's
``spot_available`` is the trace at the tick, as the replay market publishes
it; its ``available_share`` and hazard are the window's prior (the week
watched before the job), and the spells of that week are reported to
``observe_spot`` before the first tick, as a daemon watching the market
would have seen them.

Must not: decide anything (no rule here: every choice is the manager's), or
look past the tick it is at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from broker.daemon.jobs import Job, run_in_order
from broker.lifecycle import LifecycleConfig, LifecycleManager
from broker.lifecycle.values import LaunchIntent
from markets.clock import ManualClock
from markets.cloud_fleet import Instance, InstanceState, Notice, NoticeKind
from markets.model import (
    Hazard,
    HazardSource,
    InstanceType,
    MarketSnapshot,
    Pool,
    PoolSnapshot,
    Provider,
    Tier,
)
from policies.online.deadline import JobSpec, Mode, PoolHistory, TickView
from policies.workloads.spec import Workload, WorkloadSet

__all__ = ["DECIDED_BY", "ProductDeadline", "job_workloads"]

DECIDED_BY = "broker.lifecycle.manager:LifecycleManager"
T0 = datetime(2026, 1, 1, tzinfo=UTC)  # the job's start (any instant: only differences count)
JOB = "job"
_ITYPE = InstanceType(
    provider=Provider.AWS,
    name="p3.2xlarge",
    family="p3",
    units=1,
    gpus=1,
    vcpus=8,
    memory_gib=61.0,
)
_POOL = Pool(
    provider=Provider.AWS, region="us-east-1", zone="us-east-1a", instance_type="p3.2xlarge"
)
POOL_KEY = _POOL.key


def job_workloads(job: JobSpec) -> WorkloadSet:
    """The one training job of ``job``: a rigid gang of one unit of
    throughput 1 (work in hours of the job) allowed wholly on spot, its
    restart the changeover, no checkpoint write, no break-glass cap (the
    setting bills on-demand, it does not cap it)."""
    w = Workload.model_validate(
        {
            "name": JOB,
            "class": "training",
            "instance_types": [_ITYPE.name],
            "throughput": {_ITYPE.name: 1.0},
            "min_units": 1,
            "max_units": 1,
            "min_on_non_revocable": False,  # the setting's job may run on spot whole
            "unit_hours": job.compute_hours,
            "deadline_hours": job.deadline_hours,
            "restart_minutes": job.changeover_hours * 60.0,
            "checkpoint_write_seconds": 0.0,
            "max_zone_share": 1.0,
            "max_pool_share": 1.0,
        }
    )
    return WorkloadSet(workloads=[w])


def _snapshot(job: JobSpec, available: bool) -> MarketSnapshot:
    p = job.prior
    hazard = Hazard(rate_per_hour=0.0)
    share = None
    if p is not None and p.hours > 0:
        rate = p.losses_per_held_hour
        hazard = Hazard(
            rate_per_hour=0.0 if rate is None else rate,
            source=HazardSource.OBSERVED,
            observed_hours=p.hours,
        )
        share = p.held_share
    pool = PoolSnapshot(
        pool=_POOL,
        instance=_ITYPE,
        on_demand_usd_per_hour=job.price_ratio,
        spot_usd_per_hour=1.0,
        hazard=hazard,
        available_share=share,
        spot_available=available,
        observed_at=T0,
    )
    return MarketSnapshot(at=T0, pools=(pool,))


def _report_history(m: LifecycleManager, p: PoolHistory | None) -> None:
    """The prior's completed spells as the market's reports before ``T0``
    (alternating; the longer list first, which is the order they came in)."""
    if p is None or not (p.up_spells_hours or p.down_spells_hours):
        return
    up, down = list(p.up_spells_hours), list(p.down_spells_hours)
    state = len(up) >= len(down)  # the first complete spell has spot
    spells: list[tuple[bool, float]] = []
    while up or down:
        src = up if state else down
        if not src:
            break
        spells.append((state, src.pop(0)))
        state = not state
    at = T0 - timedelta(hours=sum(h for _, h in spells) + 1e-3)
    m.observe_spot(POOL_KEY, not spells[0][0], at - timedelta(seconds=1))
    for avail, hours in spells:
        m.observe_spot(POOL_KEY, avail, at)
        at += timedelta(hours=hours)
    m.observe_spot(POOL_KEY, not spells[-1][0], at)


@dataclass
class _Run:
    """One window's manager and the fleet the daemon's book would hold."""

    manager: LifecycleManager
    clock: ManualClock
    snapshots: dict[bool, MarketSnapshot]
    fleet: tuple[Instance, ...] = ()
    launched: int = 0
    notices: int = 0
    decisions: list[str] = field(default_factory=list)


class ProductDeadline:
    """``spotfolio`` in the deadline setting: ``LifecycleManager`` decides
    (module docstring); this class only translates."""

    name = "spotfolio"
    decided_by = DECIDED_BY

    def start(self, job: JobSpec) -> _Run:
        clock = ManualClock(T0)
        config = LifecycleConfig(horizon_start=T0, deadline_tick_s=job.tick_hours * 3600.0)
        m = LifecycleManager(job_workloads(job), clock, config)
        _report_history(m, job.prior)
        return _Run(m, clock, {a: _snapshot(job, a) for a in (True, False)})

    def decide(self, job: JobSpec, view: TickView, memory: _Run) -> tuple[Mode, _Run]:
        run, m = memory, memory.manager
        now = T0 + timedelta(hours=view.elapsed_hours)
        run.clock.set(now)
        snap = run.snapshots[view.spot_available]
        run_in_order(
            {
                Job.PROGRESS: lambda: m.report_progress(JOB, view.progress_hours),
                Job.NOTICES: lambda: self._notices(run, view, snap, now),
                Job.STRETCHES: lambda: self._upkeep(run, view, snap, now),
                Job.RECONCILE: lambda: self._reconcile(run, view, now),
            }
        )
        return self._mode(run), run

    def _notices(self, run: _Run, view: TickView, snap: MarketSnapshot, now: datetime) -> None:
        """The spot instance the trace revoked, as a notice for ``handle``."""
        held = run.fleet[0] if run.fleet else None
        if held is None or held.tier is not Tier.SPOT or view.mode is not Mode.IDLE:
            return
        run.notices += 1
        notice = Notice(
            notice_id=f"preempted-{run.notices}",
            kind=NoticeKind.PREEMPTED,
            instance_id=held.instance_id,
            at=now,
            pool_key=held.pool_key,
        )
        d = run.manager.handle(notice, run.fleet, snap)
        run.decisions.append(d.kind.value)
        run.fleet = tuple(i for i in run.fleet if i.instance_id != held.instance_id)
        for x in d.launches:
            self._launch(run, x, view.spot_available, now, notice.notice_id)

    def _upkeep(self, run: _Run, view: TickView, snap: MarketSnapshot, now: datetime) -> None:
        """``tick``'s returns, opens, extensions and ends, launches first."""
        for ret in run.manager.tick(now, run.fleet, snap):
            run.decisions.append(ret.kind.value)
            for x in ret.launches:
                self._launch(run, x, view.spot_available, now, ret.allocation_id)
            gone = set(ret.terminate_instance_ids)
            if gone:
                run.fleet = tuple(i for i in run.fleet if i.instance_id not in gone)

    def _reconcile(self, run: _Run, view: TickView, now: datetime) -> None:
        """The plan runs the job on spot: launched when nothing holds it and
        the offering is not marked unavailable."""
        if run.fleet:
            return
        if run.manager.unavailable.is_unavailable(POOL_KEY, Tier.SPOT, now.timestamp()):
            return
        self._launch(run, LaunchIntent(POOL_KEY, Tier.SPOT, 1), view.spot_available, now, None)

    @staticmethod
    def _mode(run: _Run) -> Mode:
        tiers = {i.tier for i in run.fleet}
        if Tier.ON_DEMAND in tiers:
            return Mode.ON_DEMAND
        return Mode.SPOT if Tier.SPOT in tiers else Mode.IDLE

    @staticmethod
    def _launch(
        run: _Run, x: LaunchIntent, spot_available: bool, now: datetime, notice_id: str | None
    ) -> None:
        """The simulated cloud: spot only while the trace has it; on-demand always."""
        if x.tier is Tier.SPOT and not spot_available:
            run.manager.record_launch_failure(x.pool_key, Tier.SPOT, notice_id=notice_id)
            return
        new = []
        for _ in range(x.count):
            run.launched += 1
            new.append(
                Instance(
                    instance_id=f"i-{run.launched:06d}",
                    pool_key=x.pool_key,
                    tier=x.tier,
                    workload=JOB,
                    state=InstanceState.RUNNING,
                    units=1,
                    launched_at=now,
                )
            )
        run.fleet = (*run.fleet, *new)
