"""A simulated account: the real daemon over ``SimCloud`` in accelerated time.

Owns: ``simulate_daemon`` and ``SimReport`` (what ``spotfolio daemon
--provider sim --hours H --json`` prints). The daemon, its store and its
lifecycle manager are the production ones (``broker.daemon.wiring``); only
the provider (``SimCloud``, replaying a ``HistorySource``'s hours)
and the clock (a ``ManualClock``) differ. Instead of APScheduler the loop
jumps the clock to the next moment something is due: a job's next run, or
the next notice the cloud will deliver (rounded up to the daemon's polling
grid, so notice latency includes the wait for the next poll), and runs the
daemon's job table there in its order (``broker.daemon.jobs``).

Disruption: per workload, the instances the daemon itself terminated
(re-plans moving capacity, scale-downs, returns) beside the cloud's
revocations, over the hours the workload held capacity (its job-hours):
``disruption`` in the report (``SimCloud.endings``).

Accelerated cadence: jobs run at the config's intervals in simulated time;
the lease is renewed at every reconcile (nobody else contends for it here).

Must not: use the wall clock for simulated time (``time.perf_counter`` only
measures how long decisions take).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from broker.daemon.config import DaemonConfig
from broker.daemon.daemon import Daemon
from broker.daemon.jobs import Job, daemon_jobs, run_in_order
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.store import Store
from broker.daemon.wiring import (
    LifecycleFactory,
    default_lifecycle,
    learning_market,
    open_demand_sources,
    sim_options,
)
from markets.clock import ManualClock, ensure_utc
from markets.cloud_fleet import NoticeKind
from markets.model import Tier
from markets.protocols import HistorySource, MetricSource, Provider
from markets.sim.cloud import Endings, SimCloud
from policies.workloads.spec import WorkloadClass, WorkloadSet

__all__ = ["SimReport", "simulate_daemon"]


@dataclass
class SimReport:
    start: datetime
    hours: int
    revocations: int
    decisions: dict[str, int]
    unhandled_notices: int
    duplicate_launches: int
    orphaned_instances: int
    decision_latency_ms: dict[str, float | None]
    budget_exceeded: bool
    budget_exceeded_hours: int
    cost_usd: float
    cost_by_tier_usd: dict[str, float]
    break_glass_usd: float
    break_glass_cap_usd: float | None
    window_missed: int
    counters: dict[str, int] = field(default_factory=dict)
    disruption: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The printed JSON document (its readers, the CLI's table among
        them, index its nested values by key: hence Any)."""
        return {
            "schema": "spotfolio.daemon.sim/1",
            "start": self.start.isoformat(),
            "hours": self.hours,
            "revocations": self.revocations,
            "decisions": self.decisions,
            "unhandled_notices": self.unhandled_notices,
            "duplicate_launches": self.duplicate_launches,
            "orphaned_instances": self.orphaned_instances,
            "decision_latency_ms": self.decision_latency_ms,
            "decisions_after_deadline": self.window_missed,
            "budget_exceeded": self.budget_exceeded,
            "budget_exceeded_hours": self.budget_exceeded_hours,
            "cost_usd": round(self.cost_usd, 2),
            "cost_by_tier_usd": {k: round(v, 2) for k, v in self.cost_by_tier_usd.items()},
            "break_glass_usd": round(self.break_glass_usd, 2),
            "break_glass_cap_usd": self.break_glass_cap_usd,
            "break_glass_cap_exceeded": self.break_glass_cap_usd is not None
            and self.break_glass_usd > self.break_glass_cap_usd + 1e-6,
            "counters": self.counters,
            "disruption": self.disruption,
            "seconds": round(self.seconds, 3),
        }


def _sleep(clock: ManualClock, seconds: float) -> None:
    clock.advance(seconds)  # backoff waits pass in simulated time


def _grid_ceil(t: datetime, origin: datetime, step_s: float) -> datetime:
    k = math.ceil((t - origin).total_seconds() / step_s - 1e-9)
    return origin + timedelta(seconds=k * step_s)


def _when_due(
    clock: ManualClock,
    due: dict[Job, datetime],
    job: Job,
    every: timedelta,
    run: Callable[[], object],
) -> None:
    """Run ``job`` if its grid time has come (the clock may have moved while
    an earlier job waited out a backoff), then move its grid time past now."""
    if due[job] <= clock.now():
        run()
        while due[job] <= clock.now():
            due[job] += every


def simulate_daemon(
    config: DaemonConfig,
    market: HistorySource,
    *,
    hours: int,
    start: datetime | None = None,
    workloads: WorkloadSet | None = None,
    store_url: str = "sqlite://",
    lifecycle: LifecycleFactory = default_lifecycle,
    wrap_provider: Callable[[SimCloud], Provider] | None = None,
    demand_sources: Mapping[str, MetricSource] | None = None,
    learn_from_account: bool = True,
) -> SimReport:
    """Run a simulated account for ``hours`` from ``start`` (default: the
    market's first whole hour; see the module docstring). Live serving
    demand (``demand_metric``) is read from ``demand_sources``, by default
    the readers the workloads name (``open_demand_sources``): a metric
    server queried at simulated times. ``learn_from_account`` False: the
    market's hazards as they are, without the account's own record
    (``broker.daemon.wiring.learning_market``), for a comparison."""
    t_wall = time.perf_counter()
    if workloads is None:
        workloads = config.workload_set()
    t0 = ensure_utc(start or market.span()[0])
    whole = t0.replace(minute=0, second=0, microsecond=0)
    # The first whole hour inside the market's data (a recording rarely starts on one).
    t0 = whole if whole == t0 else whole + timedelta(hours=1)
    clock = ManualClock(t0)
    cloud = SimCloud(market, clock, sim_options(config))
    provider: Provider = wrap_provider(cloud) if wrap_provider else cloud
    if demand_sources is None:
        demand_sources = open_demand_sources(workloads)
    store = Store(store_url)
    learned = learning_market(market, store, config.owner) if learn_from_account else market
    daemon = Daemon(
        config, provider, learned, store, lifecycle(workloads, clock, config), clock,
        workloads=workloads, metrics=DaemonMetrics(), sleep=lambda s: _sleep(clock, s),
        demand_sources=demand_sources,
    )  # fmt: skip
    daemon.start()
    iv = config.intervals
    end = t0 + timedelta(hours=hours)
    # The daemon's job table on the simulated clock: notices and break-glass
    # upkeep at every instant the loop stops at, the rest on their grids (the
    # lease at every reconcile: nobody else contends for it here).
    grid = {Job.LEASE: iv.reconcile_s}
    due: dict[Job, datetime] = {}
    steps: dict[Job, Callable[[], object]] = {}
    for j in daemon_jobs(daemon):
        run = daemon.guarded(j.job.value, j.run)
        if j.job in (Job.NOTICES, Job.STRETCHES):
            steps[j.job] = run
            continue
        every = timedelta(seconds=grid.get(j.job, j.every_s))
        due[j.job] = t0 + every
        steps[j.job] = functools.partial(_when_due, clock, due, j.job, every, run)
    poll = steps[Job.NOTICES]
    while daemon.active:
        nxt = cloud.next_event_at()
        poll_at = _grid_ceil(nxt, t0, iv.poll_notices_s) if nxt is not None else None
        # Break-glass upkeep runs when a stretch is due, not on a grid: the
        # simulated clock jumps there (the running daemon polls every upkeep_s).
        upkeep_at = daemon.upkeep_due_at()
        t = min([*due.values(), *(x for x in (poll_at, upkeep_at) if x is not None)])
        if t >= end:
            break
        clock.set(max(t, clock.now()))
        run_in_order(steps)
    clock.set(max(end, clock.now()))
    poll()
    report = _report(daemon, cloud, store, t0, hours, workloads, time.perf_counter() - t_wall)
    store.close()  # (on an exception, the Store's finalizer closes it)
    return report


def _report(
    d: Daemon, cloud: SimCloud, store: Store, t0: datetime, hours: int, ws: WorkloadSet, secs: float
) -> SimReport:
    with store.transaction() as tx:
        counts = tx.decision_counts(d.owner)
        known = tx.known_instance_ids(d.owner)
        bg = tx.break_glass_usd(d.owner)
    decisions = {k: counts.get(k, 0) for k in ("shrink", "replace", "break_glass")}
    decisions.update({k: v for k, v in counts.items() if k not in decisions})
    lat = np.array(d.decision_latencies_s) * 1e3
    pct: dict[str, float | None] = {"p50": None, "p99": None}
    if lat.size:
        pct = {
            "p50": round(float(np.percentile(lat, 50)), 3),
            "p99": round(float(np.percentile(lat, 99)), 3),
        }
    hourly, by_tier = cloud.hourly_cost_usd(t0, hours)
    budget = ws.budget_usd_per_hour
    over = int(np.sum(hourly > budget + 1e-6)) if budget is not None else 0
    c = cloud.counters
    return SimReport(
        start=t0,
        hours=hours,
        revocations=c.revocations,
        decisions=decisions,
        unhandled_notices=cloud.unacked(kinds=(NoticeKind.INTERRUPTION, NoticeKind.REBALANCE)),
        duplicate_launches=c.duplicate_launches,
        orphaned_instances=len(cloud.orphaned(known)),
        decision_latency_ms=pct,
        budget_exceeded=over > 0,
        budget_exceeded_hours=over,
        cost_usd=float(hourly.sum()),
        cost_by_tier_usd=by_tier,
        break_glass_usd=bg,
        break_glass_cap_usd=ws.break_glass_cap_usd,
        window_missed=d.window_missed,
        counters={
            "launch_requests": c.launch_requests,
            "launches": c.launches,
            "instances_launched": c.instances_launched,
            "replays": c.replays,
            "terminations": c.terminations,
            "notices_sent": c.notices_sent,
            "throttled": c.throttled,
            "capacity_refusals": c.capacity_refusals,
            "plan_generation": d.state.generation,
        },
        disruption=_disruption(cloud.endings(t0, hours), ws),
        seconds=secs,
    )


def _disruption(endings: dict[str, Endings], ws: WorkloadSet) -> dict[str, dict[str, Any]]:
    """Per workload (and ``"fleet"``): broker-made terminations (of running
    spot or, for a training gang, of any tier: the ones that disrupt work)
    beside revocations, per job-hour."""
    out: dict[str, dict[str, Any]] = {}
    fleet = {"broker_terminations": 0, "revocations": 0, "job_hours": 0}
    for name, e in sorted(endings.items()):
        w = ws.by_name(name) if name in ws.names() else None
        gang = w is not None and w.workload_class is WorkloadClass.TRAINING
        moved = e.terminated if gang else e.terminated_by_tier.get(Tier.SPOT.value, 0)
        out[name] = {
            "broker_terminations": moved,
            "broker_terminations_all_tiers": e.terminated,
            "revocations": e.revoked,
            "job_hours": e.hours_live,
            "hours_with_broker_terminations": e.hours_terminating,
            "broker_terminations_per_job_hour": round(moved / max(e.hours_live, 1), 4),
        }
        fleet["broker_terminations"] += moved
        fleet["revocations"] += e.revoked
        fleet["job_hours"] += e.hours_live
    out["fleet"] = {
        **fleet,
        "broker_terminations_per_job_hour": round(
            fleet["broker_terminations"] / max(fleet["job_hours"], 1), 4
        ),
    }
    return out
