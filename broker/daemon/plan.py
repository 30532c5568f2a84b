"""The daemon's market snapshot and plan: what to keep the fleet at.

Owns: ``PlanState`` (the plan in force, its generation, the deadline epoch,
work done per job) and the daemon's planning steps as functions of the
``Daemon``: ``refresh_market`` (TTL; keep the last good snapshot marked stale
on a transient failure), ``launchable`` (only the clouds we launch in),
``restore_plan_state`` / ``sync_epoch`` (generation, epoch and progress from
the store after a restart), ``serving_demand`` (the demand file's window or
the workloads' shapes), ``replan`` (rolling horizon: plan ``horizon_hours``
from now, commit the current hour, pin running allocations through the churn
cost, carry progress and deadlines; the solve runs outside the daemon's lock)
and ``track_progress`` (work done by training and batch jobs).

Must not: call the provider's mutating API or decide about notices.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from broker.daemon.executor import kv
from broker.planning.plan import Plan
from markets.errors import AuthError, InfeasiblePlanError, InputError, SpotfolioError
from markets.fleet import Instance
from markets.model import MarketSnapshot
from policies.workloads.spec import WorkloadClass

if TYPE_CHECKING:
    from broker.daemon.daemon import Daemon

__all__ = [
    "PlanState",
    "launchable",
    "refresh_market",
    "replan",
    "restore_plan_state",
    "serving_demand",
    "solve_plan",
    "sync_epoch",
    "track_progress",
]

log = logging.getLogger("spotfolio.daemon")


@dataclass
class PlanState:
    """The plan in force, its generation and epoch, and job progress."""

    plan: Plan | None = None
    generation: int = 0
    created_at: datetime | None = None
    epoch: datetime | None = None  # deadline_hours count from here
    work_done: dict[str, float] = field(default_factory=dict)


def refresh_market(d: Daemon, force: bool = False) -> None:
    now = d.clock.now()
    s = d.snapshot
    if (
        not force
        and s is not None
        and (now - s.at).total_seconds() < d.config.intervals.refresh_market_s
    ):
        return
    try:
        snap = launchable(d, d.market.snapshot(now))
    except InputError:
        raise
    except SpotfolioError as e:
        # Keep the last good snapshot, marked stale; with none, nothing to plan on.
        if s is None or isinstance(e, AuthError):
            raise
        log.warning(kv("market_stale", error=e, kept=s.at.isoformat()))
        snap = s if s.stale else s.mark_stale()
    d.snapshot = snap
    d.book.set_snapshot(snap)
    on_market = getattr(d.lifecycle, "on_market", None)
    if on_market is not None:
        on_market(snap)


def restore_plan_state(d: Daemon) -> None:
    with d.store.transaction() as tx:
        latest = tx.latest_plan(d.owner)
    if latest is not None:
        gen, _created, summary = latest
        d.state.generation = gen
        d.state.epoch = datetime.fromisoformat(summary["epoch"]) if summary.get("epoch") else None
        d.state.work_done = {k: float(v) for k, v in (summary.get("work_done") or {}).items()}
    if d.config.horizon_start is not None:
        d.state.epoch = d.config.horizon_start
    if d.state.epoch is not None:
        sync_epoch(d, d.state.epoch)


def sync_epoch(d: Daemon, epoch: datetime) -> None:
    set_start = getattr(d.lifecycle, "set_horizon_start", None)
    if set_start is not None:
        set_start(epoch)


def launchable(d: Daemon, snap: MarketSnapshot) -> MarketSnapshot:
    """Only pools of the clouds we launch in: the plan, the fallback pool
    and the lifecycle's replacements never leave them."""
    providers = d.config.launch_providers
    if providers is None:
        return snap
    pools = tuple(p for p in snap.pools if p.pool.provider.value in providers)
    if not pools:
        raise InputError(
            "providers",
            None,
            f"clouds with pools in the market {snap.source!r}",
            got=list(providers),
        )
    return snap if len(pools) == len(snap.pools) else snap.model_copy(update={"pools": pools})


def serving_demand(d: Daemon, start: datetime, hours: int) -> dict[str, np.ndarray[Any, Any]]:
    from broker.planning.demand import DemandSet, load_demand

    ws = d.workloads
    if d.config.demand is not None:
        if d.demand_cache is None:
            d.demand_cache = load_demand(d.config.demand, ws, seed=d.config.demand_seed)
        try:
            window = d.demand_cache.window(start, hours)
            return {n: s.to_numpy(dtype=float) for n, s in window.serving.items()}
        except ValueError:
            log.warning(kv("demand_outside_file", start=start.isoformat(), fallback="shapes"))
    shapes = DemandSet.from_shapes(ws, start, hours, d.config.demand_seed)
    return {n: s.to_numpy(dtype=float) for n, s in shapes.serving.items()}


def replan(d: Daemon) -> None:
    """Rolling horizon: plan ``horizon_hours`` from now, commit the current
    hour (reconcile acts on it only), pin running allocations through the
    churn cost, carry job progress and deadlines."""
    from broker.planning.optimizer import PlanOptions, build_problem

    if d.snapshot is None:
        refresh_market(d, force=True)
    snap = d.snapshot
    assert snap is not None
    now = d.clock.now()
    hours = d.config.horizon_hours
    start = snap.at.replace(minute=0, second=0, microsecond=0)
    with d.lock:
        fleet = d.book.view(d.provider, d.store, now, d.config.listing_grace_s)
        track_progress(d, fleet, now)
        prev = d.book.counts(fleet)
    epoch = d.state.epoch or start
    if d.state.epoch is None:
        sync_epoch(d, epoch)
    elapsed_h = (start - epoch).total_seconds() / 3600.0
    remaining, deadlines = {}, {}
    for w in d.workloads.workloads:
        if w.unit_hours is not None:
            remaining[w.name] = max(0.0, w.unit_hours - d.state.work_done.get(w.name, 0.0))
        if w.deadline_hours is not None:
            deadlines[w.name] = max(1.0, w.deadline_hours - elapsed_h)
    caps = d.book.unavailable_capacity(now, hours)
    multiplier = d.config.stale_hazard_multiplier if snap.stale else 1.0
    problem = build_problem(
        snap,
        d.workloads,
        serving_demand(d, start, hours),
        hours=hours,
        # Stale market data: widen the risk margin (ARCHITECTURE.md).
        options=PlanOptions(period_hours=1, interruption_multiplier=multiplier),
        spot_capacity_instances=caps or None,
        committed_fixed=dict(d.config.committed),
        previous_instances=prev,
        remaining_unit_hours=remaining,
        deadline_hour=deadlines,
    )
    try:
        plan = solve_plan(d, problem)
    except InfeasiblePlanError as e:
        log.error(kv("plan_infeasible", error=e, kept_generation=d.state.generation))
        return
    summary = {
        "start": plan.start.isoformat(),
        "hours": plan.hours,
        "status": plan.status,
        "solver": plan.solver,
        "objective_usd": plan.objective_usd,
        "planned_cost_by_tier": plan.planned_cost_by_tier(),
        "epoch": epoch.isoformat(),
        "work_done": d.state.work_done,
        "stale_market": snap.stale,
        "interruption_multiplier": multiplier,
    }
    with d.lock:
        if d.dry_run:
            gen = d.state.generation + 1
        else:
            with d.store.transaction() as tx:
                gen = tx.record_plan(d.owner, summary, now)
        d.state = PlanState(plan, gen, now, epoch, d.state.work_done)
    d.metrics.plan_generation.set(gen)
    log.info(
        kv(
            "plan",
            generation=gen,
            status=plan.status,
            objective_usd=f"{plan.objective_usd:.2f}",
            solve_s=f"{plan.solve_time_s:.3f}",
        )
    )


def solve_plan(d: Daemon, problem: Any) -> Plan:
    if d.config.planner == "fast":
        from broker.planning.optimizer.fast import fast_plan

        return fast_plan(problem)
    from broker.planning.optimizer.solve import solve

    return solve(problem)


def track_progress(d: Daemon, fleet: list[Instance], now: datetime) -> None:
    """Work done by training/batch jobs: live units x throughput x time."""
    last, d.progress_at = d.progress_at, now
    if last is None or now <= last:
        return
    hours = (now - last).total_seconds() / 3600.0
    for inst in fleet:
        w = d.book.workload(inst.workload)
        if w is None or w.workload_class is WorkloadClass.SERVING:
            continue
        itype = inst.pool_key.split("/")[-1]
        work = inst.units * w.throughput_of(itype) * hours
        d.state.work_done[w.name] = d.state.work_done.get(w.name, 0.0) + work
    report = getattr(d.lifecycle, "report_progress", None)
    if report is not None:
        for name, done in d.state.work_done.items():
            report(name, done)
