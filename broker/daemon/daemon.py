"""The provisioning daemon: keeps one account's fleet at the plan.

Owns: ``Daemon``, a composition of small jobs, each built with only the
collaborators it uses, and what holds them together: the lease, the lock,
the job boundary (``guarded``) and the values that outlive a job call (the
snapshot in force, ``PlanState``, ``Progress``), which the daemon hands to
its jobs and takes back from them. The jobs, one module each:

- ``plan.PlanJob``: market refresh, restore after a restart, progress, replan;
- ``reconcile.ReconcileJob``: the desired counts, and the requests reaching them;
- ``notices.NoticeJob``: each notice decided, recorded, launched, acknowledged once;
- ``stretches.StretchJob``: break-glass restore and upkeep (the lifecycle's ``tick``);
- ``launch.Launcher``: a launch, and the next pool when capacity is refused;
- ``checkpoints.HookCalls``: checkpoint hooks at notice time, results stored later.

``book.FleetBook`` is what they know between calls (fleet view, prices,
pools to avoid), ``executor.Executor`` carries out every action, and
``schedule`` runs the public methods below as APScheduler jobs.

Level-triggered: every reconcile compares the plan in force (plus the
lifecycle's decisions since it) with the cloud's own listing and closes the
gap. Crash-safe: actions are written ahead (``broker.daemon.executor``),
notices are acknowledged only after their decision and actions are durable,
and ``start`` re-sends pending actions and re-reads the fleet by tags before
anything else. A restart keeps what the dead process knew: the plan in force
(replanned at start only once ``replan_s`` old, so the lifecycle's decisions
since it keep counting), the instances under a revocation notice and the
pools that refused capacity (``FleetBook.restore``), the break-glass stretches
(``StretchJob.restore``): it never undoes a replacement.

One daemon per account: ``start`` takes the store's lease (a new epoch) or
refuses to run; with it, one lease per cloud account a ``lease_scope``
names, all or none, renewed and released together. Every job writes through the fenced store
(``Store.fenced``): a transaction first checks that the lease still has this
daemon's holder and epoch, and every cloud call first checks and extends it,
so a holder paused past a takeover writes and calls nothing
(``LeaseLostError``, which stops it). With ``renew_in_background`` (the
production wiring) a thread renews the lease from right after it is taken,
through start-up and plans that take longer than the TTL.

Integration with the lifecycle manager (typed by ``lifecycle.Lifecycle``):
at start the store's break-glass total and the stretches open before a
restart are handed back, and the plan epoch once known; the snapshot the
lifecycle sees is limited to the clouds we launch in
(``DaemonConfig.launch_providers``); while it is stale, hazards count
``stale_hazard_multiplier`` times over in the plan and the lifecycle.

Jobs run in APScheduler's thread pool; those that change the fleet
(reconcile, notices, upkeep) hold one lock, while solving a plan runs outside
it and swaps the result in. A broad ``except Exception`` exists only in
``Daemon.guarded`` (the job boundary): log, count, carry on. A ``FatalError``
(auth, bad input) stops the daemon; a launch a quota refuses does not (the
launcher tries the next pool, ``broker.daemon.launch``).

Must not: name a concrete cloud or market adapter (``broker.daemon.wiring``
and the CLI compose them), or let a job reach back into the daemon.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from broker.daemon.book import FleetBook
from broker.daemon.checkpoints import HookCalls
from broker.daemon.config import DaemonConfig
from broker.daemon.executor import Executor, Request, kv
from broker.daemon.health import Liveness, readiness
from broker.daemon.hooks import HookRunner
from broker.daemon.launch import Launcher
from broker.daemon.lifecycle import Lifecycle
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.notices import DrainTotals, NoticeJob
from broker.daemon.plan_job import PlanJob, PlanState, Progress, spot_returned
from broker.daemon.reconcile import ReconcileJob
from broker.daemon.store.store import Fence, LeaseLostError, Store, Tx
from broker.daemon.stretches import StretchJob
from broker.planning.autoscale import LiveDemand
from broker.planning.reconcile import Slot
from markets.clock import Clock
from markets.cloud_fleet import Instance, LaunchRequest
from markets.errors import FatalError
from markets.model import MarketSnapshot
from markets.protocols import MetricSource, PriceSource, Provider
from policies.workloads.spec import WorkloadSet

__all__ = ["Daemon", "LeaseHeldError", "LeaseLostError", "Lifecycle"]

log = logging.getLogger("spotfolio.daemon")


class LeaseHeldError(FatalError):
    """Another daemon holds this account's lease."""


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
        renew_in_background: bool = False,
        demand_sources: Mapping[str, MetricSource] | None = None,
    ) -> None:
        self.config = config
        self.provider = provider
        self.store = store  # unfenced: the lease itself, and readers
        self.lifecycle = lifecycle
        self.clock = clock
        self.owner = owner = config.owner
        self.dry_run = dry_run
        self.metrics = metrics = metrics or DaemonMetrics()
        metrics.watch_market_age(clock)
        if workloads is None:
            workloads = config.workload_set()
        config.check_workloads(workloads)
        self.workloads = workloads
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # The lease and its fencing token: every job writes through ``fenced``,
        # which refuses once another daemon took the lease over.
        self.fence = Fence(config.lease_name, self.holder, config.lease_ttl_s)
        self.cloud_epochs: dict[str, int] = {}  # lease_scope leases held: name -> epoch
        store = self.fenced_store = store.fenced(self.fence)
        self.renew_in_background = renew_in_background
        self._renewer: threading.Thread | None = None
        self.lock = threading.RLock()
        self.active = False
        self.stopped = threading.Event()
        # The error that stopped the jobs, if one did: the command exits non-zero.
        self.fatal: FatalError | None = None
        # What outlives a job call: handed to the jobs, taken back from them.
        self.snapshot: MarketSnapshot | None = None
        # What readiness (broker.daemon.health) is judged on.
        self.market_at: datetime | None = None
        self.queue_read_at: datetime | None = None
        self.queue_error: str | None = None
        self.state = PlanState()
        self.progress = Progress()

        # Live serving demand (demand_metric): None when no workload has one.
        self.live: LiveDemand | None = None
        if any(w.demand_metric is not None for w in workloads.workloads):
            self.live = LiveDemand.of(workloads, demand_sources or {})
        book = self.book = FleetBook(owner, workloads, lifecycle)
        executor = self.executor = Executor(
            provider,
            store,
            owner,
            clock,
            metrics,
            config.backoff,
            dry_run=dry_run,
            sleep=sleep or time.sleep,
            announce=announce,
            seed=config.sim.seed,
        )
        launcher = self.launcher = Launcher(executor, book, lifecycle, clock)
        self.hooks = HookCalls(
            config.checkpoint_hooks, store, clock, owner=owner, dry_run=dry_run, runner=hook_runner
        )
        self.planner = PlanJob(
            config, workloads, market, store, book, lifecycle, clock, metrics, dry_run=dry_run,
            live=self.live,
        )  # fmt: skip
        self.stretches = StretchJob(
            lifecycle, store, executor, launcher, clock, metrics, owner=owner, dry_run=dry_run
        )
        self.reconciler = ReconcileJob(
            provider,
            store,
            book,
            executor,
            launcher,
            lifecycle,
            workloads,
            owner=owner,
            listing_grace_s=config.listing_grace_s,
            dry_run=dry_run,
        )
        self.notices = NoticeJob(
            provider,
            store,
            book,
            lifecycle,
            executor,
            launcher,
            self.hooks,
            self.stretches,
            clock,
            metrics,
            workloads,
            owner=owner,
            listing_grace_s=config.listing_grace_s,
            dry_run=dry_run,
        )

    # --- life ---------------------------------------------------------------------
    def start(self) -> None:
        """Take the lease, recover pending actions, read the fleet, plan, reconcile."""
        now = self.clock.now()
        if not self.dry_run:
            with self.store.transaction() as tx:
                for name in self.config.lease_names:  # one order: no two starts deadlock
                    tx.lock_lease(name)
                now = self.clock.now()  # the row is ours: a wait for it does not shorten the TTL
                epoch = tx.acquire_lease(
                    self.config.lease_name, self.holder, self.config.lease_ttl_s, now
                )
                holder = None if epoch is not None else tx.lease_holder(self.fence.name, now)
                if epoch is not None:
                    self._take_cloud_leases(tx, now)  # raises: none of them is kept
            if epoch is None:
                raise LeaseHeldError(
                    f"lease {self.config.lease_name} is held by {holder}; refusing to run"
                )
            self.fence.epoch = epoch
            self.metrics.lease_held.set(1)
            log.info(
                kv("lease_acquired", lease=self.config.lease_name, holder=self.holder, epoch=epoch)
            )
            if self.renew_in_background:
                self._start_renewer()
            recovered = self.executor.recover()
            log.info(kv("recovered", pending_actions=recovered))
        self.active = True
        self.state, self.progress = self.planner.restore()
        doomed, refused = self.book.restore(self.fenced_store, now)
        log.info(
            kv(
                "restored",
                doomed=doomed,
                refused_pools=refused,
                plan_generation=self.state.generation,
                plan_kept=self.state.plan is not None,
            )
        )
        self.stretches.restore()
        self._restore_rebalance_record()
        self.refresh_market(force=True)
        self._sense(now)  # the first plan holds the live demand, not the minimum
        if self._replan_due(now):
            self.replan()
        self.reconcile()

    def _take_cloud_leases(self, tx: Tx, now: datetime) -> None:
        """The lease of each cloud account acted in (``lease_scope``), in the
        transaction that takes the account's: another daemon acting in one
        of those clouds refuses this one a start."""
        for name in self.config.lease_names[1:]:
            epoch = tx.acquire_lease(name, self.holder, self.config.lease_ttl_s, now)
            if epoch is None:
                holder = tx.lease_holder(name, now)
                raise LeaseHeldError(f"lease {name} is held by {holder}; refusing to run")
            self.cloud_epochs[name] = epoch

    def _replan_due(self, now: datetime) -> bool:
        """A start-up plan unless the store's plan in force is younger than
        ``replan_s``: a restart keeps it, and with it the decisions counted
        since it was made (a new plan, made from a fleet inside a notice
        window, would count the revoked capacity as healthy and end the
        replacement launched for it)."""
        made = self.state.created_at
        if self.state.plan is None or made is None:
            return True
        return (now - made).total_seconds() >= self.config.intervals.replan_s

    def _start_renewer(self) -> None:
        """Renew the lease every ``lease_renew_s`` on a thread of its own,
        from right after it is taken: through start-up (recover, market
        refresh, plan, reconcile) and through plans that take longer than
        the TTL. It stops with the daemon, or when the lease is lost."""

        def loop() -> None:
            every = self.config.intervals.lease_renew_s
            while not self.stopped.wait(every):
                try:
                    self.renew_lease()
                except LeaseHeldError as e:
                    log.critical(kv("lease_lost", lease=self.fence.name, error=e))
                    self.active = False
                    self.stopped.set()
                except Exception as e:  # a store hiccup: the next renewal retries
                    log.warning(kv("lease_renew_failed", error_type=type(e).__name__, error=e))

        self._renewer = threading.Thread(target=loop, name="lease-renewer", daemon=True)
        self._renewer.start()

    def stop(self) -> None:
        self.active = False
        self.stopped.set()
        self.hooks.shutdown()  # waits: each hook is bounded by its notice window
        with self.lock:
            try:
                self.hooks.drain()
            except LeaseLostError as e:  # another daemon took over: it stores nothing more
                log.warning(kv("hook_results_dropped", error=e))
        if not self.dry_run and self.fence.epoch is not None:
            with self.store.transaction() as tx:
                for name in self.config.lease_names:
                    tx.release_lease(name, self.holder, self.clock.now())
            self.metrics.lease_held.set(0)
            log.info(kv("lease_released", lease=self.config.lease_name))

    def readiness(self) -> str | None:
        """None while the daemon does its job, else why not
        (``broker.daemon.health.readiness``; ``/readyz``)."""
        iv = self.config.intervals
        return readiness(
            Liveness(
                now=self.clock.now(),
                running=self.active and not self.stopped.is_set(),
                lease_required=not self.dry_run,
                lease_held=self.fence.epoch is not None
                and self.metrics.value("spotfolio_lease_held") == 1,
                market_at=self.market_at,
                refresh_market_s=iv.refresh_market_s,
                queue_read_at=self.queue_read_at,
                queue_error=self.queue_error,
                poll_notices_s=iv.poll_notices_s,
            )
        )

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
                self.fatal = e
                self.active = False
                self.stopped.set()
            except Exception as e:  # the job boundary: log, count, carry on
                log.exception(kv("job_error", job=name, error_type=type(e).__name__, error=e))
                self.metrics.job_errors.labels(name).inc()

        return run

    def renew_lease(self) -> None:
        if self.dry_run:
            return
        epochs = {self.config.lease_name: self.fence.epoch, **self.cloud_epochs}
        with self.store.transaction() as tx:
            for name in epochs:
                tx.lock_lease(name)  # then the clock: the wait is not the TTL's
            now = self.clock.now()
            lost = [
                name
                for name, epoch in epochs.items()
                if not tx.renew_lease(name, self.holder, self.config.lease_ttl_s, now, epoch)
            ]
        if lost:
            self.metrics.lease_held.set(0)
            raise LeaseHeldError(f"lost the lease {lost[0]}: stopping")

    # --- market and plan -------------------------------------------------------
    def refresh_market(self, force: bool = False) -> None:
        """Job: a new market snapshot once the last is ``refresh_market_s`` old.
        When it offers spot in a pool the last did not, and a plan is in
        force, re-plan and reconcile now (``broker.daemon.plan_job.spot_returned``:
        the plan was made on a market without that spot)."""
        last = self.snapshot
        self.snapshot = snap = self.planner.refresh_market(last, force=force)
        if snap is not last and not snap.stale:  # a new, complete snapshot
            self.market_at = self.clock.now()
            self.metrics.market_refreshed(self.market_at)
            now = self.clock.now()
            back = spot_returned(last, snap, self.state.plan, now, self.workloads)
            if back and not force:
                log.info(kv("spot_returned", pools=list(back)))
                self.replan()
                self.reconcile()

    def current_snapshot(self) -> MarketSnapshot:
        """The snapshot in force (fetched now if there is none yet)."""
        snap = self.snapshot
        if snap is None:
            self.refresh_market(force=True)
            snap = self.snapshot
            assert snap is not None
        return snap

    def replan(self) -> None:
        """Job: re-plan the rolling horizon (``PlanJob.propose``); the solve
        runs outside the lock, and its plan is swapped in under it."""
        snap = self.current_snapshot()
        now = self.clock.now()
        with self.lock:
            fleet = self.book.view(
                self.provider, self.fenced_store, now, self.config.listing_grace_s
            )
            self.progress = self.planner.track_progress(self.progress, fleet, now)
            running = self.book.counts(fleet)
        proposal = self.planner.propose(snap, self.state, self.progress, running, now)
        if proposal is None:
            return
        with self.lock:
            self.state = self.planner.commit(proposal, self.state, self.progress)

    # --- live serving demand -------------------------------------------------
    def sense_demand(self) -> None:
        """Job: read the live demand metrics (``broker.planning.autoscale``);
        when a workload's replicas move (up at once, down after its
        cooldown), re-plan and reconcile now instead of at the next run."""
        if self._sense(self.clock.now()):
            self.replan()
            self.reconcile()

    def _sense(self, now: datetime) -> bool:
        """Read the metrics; True when some workload's replicas moved."""
        if self.live is None:
            return False
        moved = False
        for t in self.live.sense(now):
            if t.error:
                log.warning(kv("demand_metric_kept", workload=t.workload, replicas=t.replicas,
                               error=t.error))  # fmt: skip
            if t.changed:
                moved = True
                log.info(
                    kv("demand_replicas", workload=t.workload, replicas=t.replicas,
                       recommended=t.recommended, forecast=t.forecast)
                )  # fmt: skip
        return moved

    # --- reconcile --------------------------------------------------------------
    def desired(self, now: datetime) -> dict[Slot, int]:
        """What reconcile keeps the fleet at now (``ReconcileJob.desired``)."""
        return self.reconciler.desired(self.state, now)

    def reconcile(self) -> list[Request]:
        """Job: close the gap between the plan and the fleet; returns the
        requests (``ReconcileJob.run``)."""
        now = self.clock.now()
        with self.lock:
            self.hooks.drain()
            fleet = self.reconciler.view(now)
            self.progress = self.planner.track_progress(self.progress, fleet, now)
            fleet = self._upkeep(now, fleet)
            done = self.reconciler.run(self.state, fleet, now)
            self.reconciler.view(now)
            self.update_fleet_metrics(now)
            self._save_rebalance_outcomes(now)
        return done

    def _restore_rebalance_record(self) -> None:
        """The rebalance track record the store kept, back in the lifecycle."""
        with self.fenced_store.transaction() as tx:
            rows = tx.rebalance_record(self.owner)
        for pool, hits, resolved in rows:
            self.lifecycle.seed_rebalance_history(pool, hits, resolved)

    def _save_rebalance_outcomes(self, now: datetime) -> None:
        """The recommendations the lifecycle resolved since the last save,
        into the store's record (nothing written in a dry run)."""
        outcomes = self.lifecycle.rebalance_outcomes()
        if outcomes and not self.dry_run:
            with self.fenced_store.transaction() as tx:
                tx.add_rebalance_outcomes(self.owner, outcomes, now)

    def _upkeep(self, now: datetime, fleet: list[Instance]) -> list[Instance]:
        """The lifecycle's break-glass upkeep, carried out; the fleet after it."""
        if self.snapshot is None:
            return fleet
        if not self.stretches.upkeep(now, fleet, self.snapshot, self.state.generation):
            return fleet
        return self.reconciler.view(now)

    def upkeep_due_at(self) -> datetime | None:
        """When a break-glass stretch must be extended or ended (``None``: none open)."""
        return self.lifecycle.upkeep_due_at()

    def upkeep(self) -> None:
        """Job: extend or end break-glass stretches whose committed dollars
        are about to run out. Reconcile ticks too, but it may run less often
        than the lifecycle's ``return_lead_s``; without this job a stretch
        would keep on-demand past what the cap paid for (measured: a 30-day
        trace run with hourly reconciles spent $11.44 against a $10 cap)."""
        now = self.clock.now()
        due = self.upkeep_due_at()
        if due is None or due > now:
            return
        with self.lock:
            self._upkeep(now, self.reconciler.view(now))
            self.update_fleet_metrics(now)

    def launch(
        self,
        req: LaunchRequest,
        *,
        context: Mapping[str, object],
        notice_ids: Sequence[str] = (),
        fallback: bool = True,
        written: bool = False,
    ) -> list[str] | None:
        """Launch, moving to the next acceptable pool on insufficient capacity
        (``Launcher.launch``): the instance ids, or None when capacity was
        refused and not found elsewhere."""
        return self.launcher.launch(
            req, context=context, notice_ids=notice_ids, fallback=fallback, written=written
        )

    def update_fleet_metrics(self, now: datetime) -> None:
        rates, spot_share = self.book.cost_rates()
        self.metrics.fleet_cost_rates(rates, spot_share)
        self.metrics.observe_fleet(now, self.book.pool_rates())
        self.metrics.observe_quotas(self.book.snapshot, self.book.last_fleet)
        self.metrics.replacements_seen(self.book.last_fleet, now)
        self.metrics.break_glass_committed_usd.set(self.lifecycle.break_glass_committed_usd)
        if self.workloads.break_glass_cap_usd is not None:
            self.metrics.break_glass_cap_usd.set(self.workloads.break_glass_cap_usd)

    # --- notices ----------------------------------------------------------------
    def poll_notices(self) -> int:
        """Job: drain the provider's notices (``NoticeJob``); returns how many.
        A storm's batches share one ``DrainTotals`` for the budget and cap."""
        total = 0
        totals = DrainTotals()
        while self.active:
            try:
                batch = self.notices.receive()
            except Exception as e:  # readiness says so; the job boundary logs it
                self.queue_error = type(e).__name__
                raise
            self.queue_read_at, self.queue_error = self.clock.now(), None
            with self.lock:
                self.hooks.drain()
                self.notices.handle(
                    batch.notices,
                    batch.received,
                    self.current_snapshot,
                    self.state.generation,
                    totals,
                )
            total += len(batch.notices)
            if not batch.more:
                break
        if total:
            self.update_fleet_metrics(self.clock.now())
            with self.lock:
                self._save_rebalance_outcomes(self.clock.now())
        return total

    # --- what the notice job measured (for the simulation's report and bench) ---
    @property
    def decision_latencies_s(self) -> deque[float]:
        """Notice polled -> decision durable (s), the latest decisions."""
        return self.notices.latencies_s

    @property
    def decisions_durable_at(self) -> deque[tuple[str, float]]:
        """(notice id, ``time.perf_counter()`` its decision became durable)."""
        return self.notices.durable_at

    @property
    def window_missed(self) -> int:
        """Decisions made after their notice's deadline."""
        return self.notices.window_missed
