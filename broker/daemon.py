"""The provisioning daemon: keeps one account's fleet at the plan.

Owns: ``Daemon`` (the jobs, each a method: ``refresh_market``, ``replan``,
``reconcile``, ``poll_notices``, ``renew_lease``, plus ``start``/``stop``) and
``run_scheduled`` (APScheduler 3.x wiring: the only module importing
apscheduler). Notice handling lives in ``broker.daemon_notices``, the
desired-state arithmetic in ``broker.daemon_state``.

Level-triggered: every reconcile compares the plan in force (plus the
lifecycle's decisions since it) with the cloud's own listing and closes the
gap; nothing depends on remembering what the previous tick did. Crash-safe:
actions are written ahead (``broker.executor``), notices are acknowledged only
after their decision and actions are durable, and ``start`` re-sends pending
actions and re-reads the fleet by tags before anything else. One daemon per
account: ``start`` takes the store's lease or refuses to run.

Integration with the lifecycle manager: at start the store's break-glass
total and the stretches open before a restart are handed back
(``restore_break_glass``), and the plan epoch (``set_horizon_start``) once
known; the snapshot the lifecycle sees is limited to the clouds we launch in
(``DaemonConfig.launch_providers``); while it is stale, hazards count
``stale_hazard_multiplier`` times over in the plan and the lifecycle. Each
revocation's checkpoint hook (``checkpoint_hooks``) runs on a ``HookRunner``
thread, never in the decision path (``broker.daemon_lifecycle``).

Jobs run in APScheduler's thread pool; those that change the fleet
(reconcile, notices) hold one lock, while solving a plan runs outside it and
swaps the result in. A broad ``except Exception`` exists only in
``Daemon.guarded`` (the job boundary): log, count, carry on. A ``FatalError``
(auth, quota) stops the daemon.

Must not: name a concrete cloud or market adapter (the CLI composes them).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from broker.checkpoint_hook import HookRunner
from broker.daemon_config import DaemonConfig
from broker.daemon_lifecycle import HookCalls
from broker.daemon_state import FleetBook, decision_deltas, stick, substitute
from broker.executor import Executor, Request, kv
from broker.metrics import DaemonMetrics
from broker.plan import Plan
from broker.reconcile import apply_deltas, desired_now, diff, live_ours
from broker.store import DecisionRecord, Store
from markets.clock import Clock
from markets.errors import (
    AuthError,
    FatalError,
    InfeasiblePlanError,
    InputError,
    SpotfolioError,
)
from markets.fleet import Instance, LaunchRequest, TerminateRequest
from markets.model import MarketSnapshot, Tier
from markets.protocols import PriceSource, Provider
from policies.workloads import WorkloadClass, WorkloadSet, default_workloads, load_workloads

__all__ = ["Daemon", "LeaseHeldError", "Lifecycle", "run_scheduled"]

log = logging.getLogger("spotfolio.daemon")
# Move running capacity to an equivalent pool only if it is this much cheaper
# (assumption: a cold start of ~3 min plus warm-up is worth ~10 % of an hour).
STICK_MARGIN = 0.10
_PASSES = 3  # diffs per reconcile when pools refuse capacity
_KEEP_LATENCIES = 100_000  # bounded: a daemon runs for months


class LeaseHeldError(FatalError):
    """Another daemon holds this account's lease."""


class Lifecycle(Protocol):
    """What the daemon needs of ``broker.lifecycle.LifecycleManager``."""

    def handle(self, notice: Any, fleet: Any, snapshot: MarketSnapshot) -> Any: ...

    def record_launch_failure(
        self, pool_key: str, tier: Tier = ..., *, notice_id: str | None = ...
    ) -> None: ...


@dataclass
class _PlanState:
    plan: Plan | None = None
    generation: int = 0
    created_at: datetime | None = None
    epoch: datetime | None = None  # deadline_hours count from here
    work_done: dict[str, float] = field(default_factory=dict)


class Daemon:
    def __init__(
        self,
        config: DaemonConfig,
        provider: Provider,
        market: PriceSource,
        store: Store,
        lifecycle: Lifecycle,
        clock: Clock,
        *,
        workloads: WorkloadSet | None = None,
        metrics: DaemonMetrics | None = None,
        dry_run: bool = False,
        sleep: Callable[[float], None] | None = None,
        announce: Callable[[Request], None] | None = None,
        holder: str | None = None,
        hook_runner: HookRunner | None = None,
    ) -> None:
        self.config = config
        self.provider = provider
        self.market = market
        self.store = store
        self.lifecycle = lifecycle
        self.clock = clock
        self.owner = config.owner
        self.dry_run = dry_run
        self.metrics = metrics or DaemonMetrics()
        if workloads is None:
            workloads = (
                load_workloads(config.workloads) if config.workloads else default_workloads()
            )
        config.check_workloads(workloads)
        self.workloads = workloads
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.executor = Executor(
            provider,
            store,
            self.owner,
            clock,
            self.metrics,
            config.backoff,
            dry_run=dry_run,
            sleep=sleep or time.sleep,
            announce=announce,
            seed=config.sim.seed,
        )
        self.lock = threading.RLock()
        self.active = False
        self.stopped = threading.Event()
        self.snapshot: MarketSnapshot | None = None
        self.state = _PlanState()
        self.book = FleetBook(self.owner, workloads)
        self._demand: Any = None
        self._progress_at: datetime | None = None
        # Notice polled -> decision durable (s), and when each became durable
        # (time.perf_counter(), for the reaction benchmark); the latest only.
        self.decision_latencies_s: deque[float] = deque(maxlen=_KEEP_LATENCIES)
        self.decisions_durable_at: deque[tuple[str, float]] = deque(maxlen=_KEEP_LATENCIES)
        self.window_missed = 0  # decisions made after the notice's deadline
        self.hooks = HookCalls(self, hook_runner)

    # --- life ---------------------------------------------------------------------
    def start(self) -> None:
        """Take the lease, recover pending actions, read the fleet, plan, reconcile."""
        now = self.clock.now()
        if not self.dry_run:
            with self.store.transaction() as tx:
                if not tx.acquire_lease(
                    self.config.lease_name, self.holder, self.config.lease_ttl_s, now
                ):
                    holder = tx.lease_holder(self.config.lease_name, now)
                    raise LeaseHeldError(
                        f"lease {self.config.lease_name} is held by {holder}; refusing to run"
                    )
            self.metrics.lease_held.set(1)
            log.info(kv("lease_acquired", lease=self.config.lease_name, holder=self.holder))
            recovered = self.executor.recover()
            log.info(kv("recovered", pending_actions=recovered))
        self.active = True
        self._restore_plan_state()
        self._restore_lifecycle()
        self.refresh_market(force=True)
        self.replan()
        self.reconcile()

    def stop(self) -> None:
        self.active = False
        self.stopped.set()
        self.hooks.shutdown()  # waits: each hook is bounded by its notice window
        with self.lock:
            self.hooks.drain()
        if not self.dry_run:
            with self.store.transaction() as tx:
                tx.release_lease(self.config.lease_name, self.holder, self.clock.now())
            self.metrics.lease_held.set(0)
            log.info(kv("lease_released", lease=self.config.lease_name))

    def guarded(self, name: str, job: Callable[[], object]) -> Callable[[], None]:
        """The job boundary: the only broad ``except`` in the daemon."""

        def run() -> None:
            if not self.active:
                return
            try:
                job()
            except FatalError as e:
                log.critical(kv("fatal", job=name, error_type=type(e).__name__, error=e))
                self.metrics.job_errors.labels(name).inc()
                self.active = False
                self.stopped.set()
            except Exception as e:  # the job boundary: log, count, carry on
                log.exception(kv("job_error", job=name, error_type=type(e).__name__, error=e))
                self.metrics.job_errors.labels(name).inc()

        return run

    def renew_lease(self) -> None:
        if self.dry_run:
            return
        with self.store.transaction() as tx:
            ok = tx.renew_lease(
                self.config.lease_name, self.holder, self.config.lease_ttl_s, self.clock.now()
            )
        if not ok:
            self.metrics.lease_held.set(0)
            raise LeaseHeldError(f"lost the lease {self.config.lease_name}: stopping")

    # --- market and plan -------------------------------------------------------
    def refresh_market(self, force: bool = False) -> None:
        now = self.clock.now()
        s = self.snapshot
        if (
            not force
            and s is not None
            and (now - s.at).total_seconds() < self.config.intervals.refresh_market_s
        ):
            return
        try:
            snap = self._launchable(self.market.snapshot(now))
        except InputError:
            raise
        except SpotfolioError as e:
            # Keep the last good snapshot, marked stale; with none, nothing to plan on.
            if s is None or isinstance(e, AuthError):
                raise
            log.warning(kv("market_stale", error=e, kept=s.at.isoformat()))
            snap = s if s.stale else s.mark_stale()
        self.snapshot = snap
        self.book.set_snapshot(snap)
        on_market = getattr(self.lifecycle, "on_market", None)
        if on_market is not None:
            on_market(snap)

    def _restore_plan_state(self) -> None:
        with self.store.transaction() as tx:
            latest = tx.latest_plan(self.owner)
        if latest is not None:
            gen, _created, summary = latest
            self.state.generation = gen
            self.state.epoch = (
                datetime.fromisoformat(summary["epoch"]) if summary.get("epoch") else None
            )
            self.state.work_done = {
                k: float(v) for k, v in (summary.get("work_done") or {}).items()
            }
        if self.config.horizon_start is not None:
            self.state.epoch = self.config.horizon_start
        if self.state.epoch is not None:
            self._sync_epoch(self.state.epoch)

    def _sync_epoch(self, epoch: datetime) -> None:
        set_start = getattr(self.lifecycle, "set_horizon_start", None)
        if set_start is not None:
            set_start(epoch)

    def _restore_lifecycle(self) -> None:
        from broker.daemon_lifecycle import restore_lifecycle

        restore_lifecycle(self)

    def _launchable(self, snap: MarketSnapshot) -> MarketSnapshot:
        """Only pools of the clouds we launch in: the plan, the fallback pool
        and the lifecycle's replacements never leave them."""
        providers = self.config.launch_providers
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

    def record_own_decision(self, record: DecisionRecord) -> None:
        """A decision of the daemon's own (no notice id)."""
        if not self.dry_run:
            with self.store.transaction() as tx:
                tx.record_decision(self.owner, record)

    def _serving_demand(self, start: datetime, hours: int) -> dict[str, np.ndarray[Any, Any]]:
        from broker.demand import DemandSet, load_demand

        ws = self.workloads
        if self.config.demand is not None:
            if self._demand is None:
                self._demand = load_demand(self.config.demand, ws, seed=self.config.demand_seed)
            try:
                window = self._demand.window(start, hours)
                return {n: s.to_numpy(dtype=float) for n, s in window.serving.items()}
            except ValueError:
                log.warning(kv("demand_outside_file", start=start.isoformat(), fallback="shapes"))
        d = DemandSet.from_shapes(ws, start, hours, self.config.demand_seed)
        return {n: s.to_numpy(dtype=float) for n, s in d.serving.items()}

    def replan(self) -> None:
        """Rolling horizon: plan ``horizon_hours`` from now, commit the current
        hour (reconcile acts on it only), pin running allocations through the
        churn cost, carry job progress and deadlines."""
        from broker.optimizer import PlanOptions, build_problem

        if self.snapshot is None:
            self.refresh_market(force=True)
        snap = self.snapshot
        assert snap is not None
        now = self.clock.now()
        hours = self.config.horizon_hours
        start = snap.at.replace(minute=0, second=0, microsecond=0)
        with self.lock:
            fleet = self.book.view(self.provider, self.store, now, self.config.listing_grace_s)
            self._track_progress(fleet, now)
            prev = self.book.counts(fleet)
        epoch = self.state.epoch or start
        if self.state.epoch is None:
            self._sync_epoch(epoch)
        elapsed_h = (start - epoch).total_seconds() / 3600.0
        remaining, deadlines = {}, {}
        for w in self.workloads.workloads:
            if w.unit_hours is not None:
                remaining[w.name] = max(0.0, w.unit_hours - self.state.work_done.get(w.name, 0.0))
            if w.deadline_hours is not None:
                deadlines[w.name] = max(1.0, w.deadline_hours - elapsed_h)
        caps = self.book.unavailable_capacity(now, hours)
        multiplier = self.config.stale_hazard_multiplier if snap.stale else 1.0
        problem = build_problem(
            snap,
            self.workloads,
            self._serving_demand(start, hours),
            hours=hours,
            # Stale market data: widen the risk margin (ARCHITECTURE.md).
            options=PlanOptions(period_hours=1, interruption_multiplier=multiplier),
            spot_capacity_instances=caps or None,
            committed_fixed=dict(self.config.committed),
            previous_instances=prev,
            remaining_unit_hours=remaining,
            deadline_hour=deadlines,
        )
        try:
            plan = self._solve(problem)
        except InfeasiblePlanError as e:
            log.error(kv("plan_infeasible", error=e, kept_generation=self.state.generation))
            return
        summary = {
            "start": plan.start.isoformat(),
            "hours": plan.hours,
            "status": plan.status,
            "solver": plan.solver,
            "objective_usd": plan.objective_usd,
            "planned_cost_by_tier": plan.planned_cost_by_tier(),
            "epoch": epoch.isoformat(),
            "work_done": self.state.work_done,
            "stale_market": snap.stale,
            "interruption_multiplier": multiplier,
        }
        with self.lock:
            if self.dry_run:
                gen = self.state.generation + 1
            else:
                with self.store.transaction() as tx:
                    gen = tx.record_plan(self.owner, summary, now)
            self.state = _PlanState(plan, gen, now, epoch, self.state.work_done)
        self.metrics.plan_generation.set(gen)
        log.info(
            kv(
                "plan",
                generation=gen,
                status=plan.status,
                objective_usd=f"{plan.objective_usd:.2f}",
                solve_s=f"{plan.solve_time_s:.3f}",
            )
        )

    def _solve(self, problem: Any) -> Plan:
        if self.config.planner == "fast":
            from broker.optimizer.fast import fast_plan

            return fast_plan(problem)
        from broker.optimizer.solve import solve

        return solve(problem)

    def _track_progress(self, fleet: list[Instance], now: datetime) -> None:
        """Work done by training/batch jobs: live units x throughput x time."""
        last, self._progress_at = self._progress_at, now
        if last is None or now <= last:
            return
        hours = (now - last).total_seconds() / 3600.0
        for inst in fleet:
            w = self.book.workload(inst.workload)
            if w is None or w.workload_class is WorkloadClass.SERVING:
                continue
            itype = inst.pool_key.split("/")[-1]
            work = inst.units * w.throughput_of(itype) * hours
            self.state.work_done[w.name] = self.state.work_done.get(w.name, 0.0) + work
        report = getattr(self.lifecycle, "report_progress", None)
        if report is not None:
            for name, done in self.state.work_done.items():
                report(name, done)

    # --- reconcile --------------------------------------------------------------
    def desired(self, now: datetime) -> dict[tuple[str, str, str], int]:
        """The plan's current hour, the lifecycle's decisions since the plan,
        and unavailable pools swapped for the next acceptable one."""
        st = self.state
        if st.plan is None:
            return {}
        want = desired_now(st.plan, now, self.workloads)
        if st.created_at is not None:
            with self.store.transaction() as tx:
                decisions = tx.decisions(self.owner, since=st.created_at)
            want = apply_deltas(want, decision_deltas(decisions))
        want = substitute(want, self.book, now)
        return stick(want, self.book.counts(self.book.last_fleet), self.book, STICK_MARGIN)

    def _view(self, now: datetime) -> list[Instance]:
        grace = self.config.listing_grace_s
        return self.book.view(self.provider, self.store, now, grace, sync=not self.dry_run)

    def reconcile(self) -> list[Request]:
        """Close the gap between the plan and the fleet; returns the requests.

        Launches go first (serving capacity before savings). A pool that
        refuses capacity is marked unavailable and the diff is taken again,
        so the next acceptable pool gets its count before anything is
        terminated (a second pass, at most ``_PASSES``)."""
        now = self.clock.now()
        done: list[Request] = []
        with self.lock:
            self.hooks.drain()
            fleet = self._view(now)
            self._track_progress(fleet, now)
            fleet = self._tick(now, fleet)
            for _ in range(_PASSES):
                doomed = self.book.doomed_ids(now)
                gen = self.state.generation
                requests = diff(self.desired(now), fleet, gen, self.owner, doomed=doomed)
                requests = self.book.within_budget(requests, fleet, now)
                alive = [i.instance_id for i in live_ours(fleet, self.owner)]
                refused = False
                for req in requests:
                    if isinstance(req, LaunchRequest):
                        req = self.executor.resolve_launch_key(req, alive)
                        ctx = {"source": "reconcile"}
                        refused |= self.launch(req, context=ctx, fallback=False) is None
                        done.append(req)
                if not refused:
                    break
                fleet = self._view(now)
            for req in requests:
                if isinstance(req, TerminateRequest):
                    self.executor.run(req, context={"source": "reconcile"})
                    done.append(req)
            self._view(now)
            self.update_fleet_metrics(now)
        return done

    def _tick(self, now: datetime, fleet: list[Instance]) -> list[Instance]:
        """The lifecycle's break-glass upkeep, carried out; the fleet after it."""
        tick = getattr(self.lifecycle, "tick", None)
        if tick is None or self.snapshot is None:
            return fleet
        from broker.daemon_lifecycle import apply_returns

        returns = tick(now, fleet, self.snapshot) or ()
        if not returns:
            return fleet
        apply_returns(self, returns)
        return self._view(now)

    def upkeep_due_at(self) -> datetime | None:
        """When a break-glass stretch must be extended or ended (``None``: none open)."""
        due = getattr(self.lifecycle, "upkeep_due_at", None)
        return due() if due is not None else None

    def upkeep(self) -> None:
        """Extend or end break-glass stretches whose committed dollars are about
        to run out. Reconcile ticks too, but it may run less often than the
        lifecycle's ``return_lead_s``; without this job a stretch would keep
        on-demand past what the cap paid for (measured: a 30-day trace run
        with hourly reconciles spent $11.44 against a $10 cap)."""
        now = self.clock.now()
        due = self.upkeep_due_at()
        if due is None or due > now:
            return
        with self.lock:
            self._tick(now, self._view(now))
            self.update_fleet_metrics(now)

    def launch(
        self,
        req: LaunchRequest,
        *,
        context: dict[str, Any],
        notice_ids: Sequence[str] = (),
        fallback: bool = True,
        written: bool = False,
    ) -> list[str] | None:
        """Launch; on insufficient capacity the pool is skipped for
        ``unavailable_ttl_s`` and, with ``fallback``, the next acceptable pool
        is tried. Returns the instance ids (empty in a dry run or when retries
        ran out), or None when capacity was refused and not found elsewhere."""
        from markets.errors import CapacityUnavailableError

        tried: set[str] = set()
        while True:
            units = self.book.units(req.pool_key)
            try:
                res = self.executor.run(req, units=units, context=context, written=written)
                return list(res.instance_ids) if res is not None and res.ok else []
            except CapacityUnavailableError:
                tried.add(req.pool_key)
                self.book.mark_unavailable(
                    req.pool_key, req.tier, self.clock.now(), self.config.backoff.unavailable_ttl_s
                )
                nids: Sequence[str | None] = notice_ids or [None]
                for nid in nids:  # each decision the request carried
                    self.lifecycle.record_launch_failure(req.pool_key, req.tier, notice_id=nid)
                if not fallback:
                    return None
                alt = self.book.next_pool(
                    req.workload, req.pool_key, req.tier, req.count, tried, self.clock.now()
                )
                if alt is None:
                    log.warning(
                        kv(
                            "no_pool_left",
                            workload=req.workload,
                            tier=req.tier.value,
                            tried=",".join(sorted(tried)),
                        )
                    )
                    return None
                pool, count = alt
                log.info(
                    kv(
                        "next_pool",
                        workload=req.workload,
                        failed=req.pool_key,
                        pool=pool,
                        count=count,
                    )
                )
                key = self.executor.resolve_launch_key(
                    req.model_copy(update={"idempotency_key": _alt_key(req.idempotency_key, pool)}),
                    (),
                )
                req = key.model_copy(update={"pool_key": pool, "count": count})
                written = False  # a new key: the executor writes it ahead

    def update_fleet_metrics(self, now: datetime) -> None:
        rates, spot_share = self.book.cost_rates()
        for tier, usd in rates.items():
            self.metrics.cost_rate.labels(tier).set(usd)
        self.metrics.spot_share.set(spot_share)
        committed = getattr(self.lifecycle, "break_glass_committed_usd", None)
        if committed is not None:
            self.metrics.break_glass_committed_usd.set(committed)
        if self.workloads.break_glass_cap_usd is not None:
            self.metrics.break_glass_cap_usd.set(self.workloads.break_glass_cap_usd)

    # --- notices ----------------------------------------------------------------
    def poll_notices(self) -> int:
        from broker.daemon_notices import poll_and_handle

        handled = poll_and_handle(self)
        if handled:
            self.update_fleet_metrics(self.clock.now())
        return handled


def _alt_key(key: str, pool: str) -> str:
    import hashlib

    return "sf-" + hashlib.sha256(f"{key}@{pool}".encode()).hexdigest()[:40]


def run_scheduled(daemon: Daemon, *, metrics_port: int | None = None) -> None:
    """Run the daemon's jobs on APScheduler until stopped (SIGTERM/SIGINT or a
    fatal error); releases the lease on the way out."""
    import signal

    from apscheduler.schedulers.background import BackgroundScheduler

    iv = daemon.config.intervals
    if metrics_port:
        daemon.metrics.serve(metrics_port)
    daemon.start()
    sched = BackgroundScheduler(
        timezone="UTC",
        # One run of a job at a time; a late run is merged, not queued.
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30},
    )
    jobs: list[tuple[str, Callable[[], object], float]] = [
        ("renew_lease", daemon.renew_lease, iv.lease_renew_s),
        ("refresh_market", daemon.refresh_market, iv.refresh_market_s),
        ("replan", daemon.replan, iv.replan_s),
        ("reconcile", daemon.reconcile, iv.reconcile_s),
        ("poll_notices", daemon.poll_notices, iv.poll_notices_s),
        ("break_glass_upkeep", daemon.upkeep, iv.upkeep_s),
    ]
    for name, fn, seconds in jobs:
        sched.add_job(daemon.guarded(name, fn), "interval", seconds=seconds, id=name, name=name)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: daemon.stopped.set())
    sched.start()
    log.info(kv("daemon_running", owner=daemon.owner, jobs=",".join(n for n, _, _ in jobs)))
    try:
        daemon.stopped.wait()
    finally:
        sched.shutdown(wait=True)
        daemon.stop()
