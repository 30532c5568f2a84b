"""The provisioning daemon: keeps one account's fleet at the plan.

Owns: ``Daemon`` (the jobs, each a method: ``refresh_market``, ``replan``,
``reconcile``, ``poll_notices``, ``upkeep``, ``renew_lease``, plus
``start``/``stop``). The market and plan steps live in
``broker.daemon.plan``, notice handling in ``broker.daemon.notices``, the
desired-state arithmetic in ``broker.daemon.book``, break-glass upkeep and
hooks in ``broker.daemon.stretches``, and the APScheduler wiring in
``broker.daemon.schedule``.

Level-triggered: every reconcile compares the plan in force (plus the
lifecycle's decisions since it) with the cloud's own listing and closes the
gap; nothing depends on remembering what the previous tick did. Crash-safe:
actions are written ahead (``broker.daemon.executor``), notices are acknowledged only
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
thread, never in the decision path (``broker.daemon.stretches``).

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
from datetime import datetime
from typing import Any, Protocol

from broker.daemon.book import FleetBook, decision_deltas, stick, substitute
from broker.daemon.config import DaemonConfig
from broker.daemon.executor import Executor, Request, kv
from broker.daemon.hooks import HookRunner
from broker.daemon.launch import launch
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.plan import (
    PlanState,
    refresh_market,
    replan,
    restore_plan_state,
    track_progress,
)
from broker.daemon.store.store import DecisionRecord, Store
from broker.daemon.stretches import HookCalls
from broker.planning.reconcile import apply_deltas, desired_now, diff, live_ours
from markets.clock import Clock
from markets.errors import (
    FatalError,
)
from markets.fleet import Instance, LaunchRequest, TerminateRequest
from markets.model import MarketSnapshot, Tier
from markets.protocols import PriceSource, Provider
from policies.workloads.spec import WorkloadSet, default_workloads, load_workloads

__all__ = ["Daemon", "LeaseHeldError", "Lifecycle"]

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
        self.state = PlanState()
        self.book = FleetBook(self.owner, workloads)
        self.demand_cache: Any = None  # the demand file, loaded once
        self.progress_at: datetime | None = None  # job progress counted up to here
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
        restore_plan_state(self)
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
        """Job: a new market snapshot once the last is ``refresh_market_s`` old."""
        refresh_market(self, force)

    def replan(self) -> None:
        """Job: re-plan the rolling horizon (``broker.daemon.plan.replan``)."""
        replan(self)

    def _restore_lifecycle(self) -> None:
        from broker.daemon.stretches import restore_lifecycle

        restore_lifecycle(self)

    def record_own_decision(self, record: DecisionRecord) -> None:
        """A decision of the daemon's own (no notice id)."""
        if not self.dry_run:
            with self.store.transaction() as tx:
                tx.record_decision(self.owner, record)

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
            track_progress(self, fleet, now)
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
        from broker.daemon.stretches import apply_returns

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
        """Launch, moving to the next acceptable pool on insufficient capacity
        (``broker.daemon.launch.launch``): the instance ids, or None when
        capacity was refused and not found elsewhere."""
        return launch(
            self, req, context=context, notice_ids=notice_ids, fallback=fallback, written=written
        )

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
        from broker.daemon.notices import poll_and_handle

        handled = poll_and_handle(self)
        if handled:
            self.update_fleet_metrics(self.clock.now())
        return handled
