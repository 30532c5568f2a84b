"""The daemon's market snapshot and plan: what to keep the fleet at.

Owns: the values that outlive a job call, ``PlanState`` (the plan in force,
its generation, when it was made, the deadline epoch) and ``Progress`` (work
done per training or batch job, counted up to a time), and ``PlanJob``, which
computes new ones from old ones and returns them (the ``Daemon`` holds them):

- ``refresh_market``: a new snapshot once the last is
  ``refresh_market_s`` old, limited to the clouds we launch in; on a
  transient failure the last good snapshot is kept, marked stale. Before
  asking, the account's revocations and spot hours since the last count are
  added to the store's ``pool_experience`` (``Tx.count_experience``): the
  market the wiring hands in (``broker.daemon.wiring.learning_market``)
  prices each pool's spot at the hazard learned from them;
- ``restore``: generation, epoch and progress from the store after a restart
  (a configured ``horizon_start`` wins), the epoch handed to the lifecycle,
  and the plan in force itself (``plan_record``: the allocation columns
  reconcile reads, kept only if made for the same workloads and planning
  settings), so a restart does not replan from a fleet mid-notice-window;
- ``track_progress``: live units x throughput x time since the last count,
  and the dollars those instances cost at the snapshot's prices, under every
  budget's key (per workload with its committed usage, the fleet with
  commitments as bought, per tier and UTC day);
- ``propose`` and ``commit``: one step of the planning loop
  (``broker.planning.rolling``, the loop the what-if and the benches
  replay). ``rolling_state`` says where the loop stands (hours since the
  epoch, plan generation, fixed commitments, running instances, work left,
  dollars spent), ``window_problem`` plans ``horizon_hours`` from the hour
  of the snapshot with it (a uniform-progress milestone over the re-plan
  interval, budgets less what was spent); while the snapshot is stale,
  hazards count ``stale_hazard_multiplier`` times over. ``propose`` solves
  (the daemon calls it outside its lock: solving takes seconds); ``commit``
  records the plan under the next generation and returns it in force.

Must not: call the provider, take the daemon's lock, or decide about notices.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np
import numpy.typing as npt
import pandas as pd

from broker.daemon.book import FleetBook
from broker.daemon.config import DaemonConfig
from broker.daemon.executor import kv
from broker.daemon.lifecycle import Lifecycle
from broker.daemon.metrics import DaemonMetrics
from broker.daemon.store.store import Store
from broker.daemon.store.tx import Json
from broker.planning.autoscale import LiveDemand
from broker.planning.demand import DemandSet, load_demand
from broker.planning.optimizer import PlanningProblem, PlanOptions

# Both solvers are imported here (PuLP with the MILP one, ~0.1 s at start-up):
# the daemon picks one by its config, and a daemon starts once.
from broker.planning.optimizer.budgets import tier_day_key
from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.solve import solve
from broker.planning.plan import Plan
from broker.planning.reconcile import desired_now
from broker.planning.rolling import FLEET, RollingState, window_problem
from markets.blocks import load_blocks
from markets.clock import Clock
from markets.cloud_fleet import Instance, NoticeKind
from markets.errors import (
    AuthError,
    InfeasiblePlanError,
    InputError,
    SolverTimeLimitError,
    SpotfolioError,
)
from markets.keys import CommitmentKey, PoolKey
from markets.model import MarketSnapshot, Tier
from markets.protocols import PriceSource
from policies.cost_table import CostTable
from policies.workloads.spec import WorkloadClass, WorkloadSet

# The notices that are a revocation of the instance they name (the account's
# hazard evidence); a rebalance recommendation is a warning, not a loss.
REVOCATION_KINDS = (NoticeKind.INTERRUPTION.value, NoticeKind.PREEMPTED.value)

__all__ = [
    "REVOCATION_KINDS",
    "PlanJob",
    "PlanState",
    "Progress",
    "Proposal",
    "launchable",
    "plan_from_record",
    "plan_record",
    "spot_returned",
]

log = logging.getLogger("spotfolio.daemon")
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class PlanState:
    """The plan in force, its generation, when it was made, and the epoch."""

    plan: Plan | None = None
    generation: int = 0
    created_at: datetime | None = None
    epoch: datetime | None = None  # deadline_hours count from here


@dataclass(frozen=True, slots=True)
class Progress:
    """Work done by training and batch jobs (unit-hours) and dollars spent
    per workload (and the fleet's total under ``FLEET``, committed capacity
    the config lists included), counted up to ``at``."""

    work_done: Mapping[str, float] = field(default_factory=dict)
    at: datetime | None = None
    spent_usd: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Proposal:
    """A solved plan, not yet in force, and what its summary records."""

    plan: Plan
    made_at: datetime  # when the fleet it starts from was counted
    epoch: datetime
    stale_market: bool
    interruption_multiplier: float


def launchable(snap: MarketSnapshot, providers: Sequence[str] | None) -> MarketSnapshot:
    """Only pools of the clouds we launch in: the plan, the fallback pool
    and the lifecycle's replacements never leave them."""
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


class PlanJob:
    """Market refresh, plan, progress and restore (module docstring)."""

    def __init__(
        self,
        config: DaemonConfig,
        workloads: WorkloadSet,
        market: PriceSource,
        store: Store,
        book: FleetBook,
        lifecycle: Lifecycle,
        clock: Clock,
        metrics: DaemonMetrics,
        *,
        dry_run: bool = False,
        live: LiveDemand | None = None,
    ) -> None:
        self._config = config
        self._live = live
        self._workloads = workloads
        self._market = market
        self._store = store
        self._book = book
        self._lifecycle = lifecycle
        self._clock = clock
        self._metrics = metrics
        self._owner = config.owner
        self._dry_run = dry_run
        self._demand: DemandSet | None = None  # the demand file, loaded once
        # The cost table of the snapshot in force: computed once per snapshot,
        # handed to the lifecycle and to every plan made on that snapshot.
        self._costs: CostTable | None = None
        # A restored plan is kept in force only if it was made for these
        # workloads and this planning configuration.
        self._digest = _digest(config, workloads)
        # Reserved-ahead blocks (``config.blocks``), read once: the plans run
        # in the held ones; the offerings are weighed once, by a plan that may
        # buy them, and the ones it buys are recommended (never bought here).
        blocks = () if config.blocks is None else load_blocks(config.blocks)
        self._held = tuple(b for b in blocks if b.held)
        self._offers = tuple(b for b in blocks if not b.held)

    # --- the market -------------------------------------------------------------
    def refresh_market(self, last: MarketSnapshot | None, *, force: bool) -> MarketSnapshot:
        """The snapshot in force: ``last`` while it is fresh enough (unless
        ``force``), else a new one, else ``last`` marked stale on a transient
        failure. A new or stale one goes to the book and the lifecycle."""
        now = self._clock.now()
        if (
            not force
            and last is not None
            and (now - last.at).total_seconds() < self._config.intervals.refresh_market_s
        ):
            return last
        if not self._dry_run:  # the account's own evidence, for the learned hazards
            with self._store.transaction() as tx:
                tx.count_experience(self._owner, now, REVOCATION_KINDS)
        try:
            snap = launchable(self._market.snapshot(now), self._config.launch_providers)
        except InputError:
            raise
        except SpotfolioError as e:
            # Keep the last good snapshot, marked stale; with none, nothing to plan on.
            if last is None or isinstance(e, AuthError):
                raise
            log.warning(kv("market_stale", error=e, kept=last.at.isoformat()))
            snap = last if last.stale else last.mark_stale()
        self._book.set_snapshot(snap)
        self._lifecycle.on_market(snap, self.costs(snap))
        return snap

    def _options(self, snap: MarketSnapshot) -> PlanOptions:
        # Stale market data: widen the risk margin (docs/concepts/market.md).
        multiplier = self._config.stale_hazard_multiplier if snap.stale else 1.0
        return PlanOptions(period_hours=1, interruption_multiplier=multiplier)

    def costs(self, snap: MarketSnapshot) -> CostTable:
        """The cost table of ``snap`` (computed on the first call for it)."""
        if self._costs is None or self._costs.snapshot is not snap:
            opts = self._options(snap).cost_options
            self._costs = CostTable.compute(snap, self._workloads, opts)
        return self._costs

    # --- after a restart ----------------------------------------------------------
    def restore(self) -> tuple[PlanState, Progress]:
        """Generation, epoch and work done from the store's latest plan; a
        configured ``horizon_start`` wins; the epoch goes to the lifecycle."""
        with self._store.transaction() as tx:
            latest = tx.latest_plan(self._owner)
        state, progress = PlanState(), Progress()
        if latest is not None:
            gen, created, summary = latest
            epoch = summary.get("epoch")
            state = PlanState(
                plan=plan_from_record(summary.get("in_force"), self._digest),
                generation=gen,
                created_at=created,
                epoch=datetime.fromisoformat(epoch) if epoch else None,
            )
            if state.plan is None:  # nothing to keep in force: only the counters
                state = PlanState(generation=gen, epoch=state.epoch)
            done = summary.get("work_done") or {}
            spent = summary.get("spent_usd") or {}
            progress = Progress(
                {k: float(v) for k, v in done.items()},
                spent_usd={k: float(v) for k, v in spent.items()},
            )
        if self._config.horizon_start is not None:
            state = replace(state, epoch=self._config.horizon_start)
        if state.epoch is not None:
            self._lifecycle.set_horizon_start(state.epoch)
        return state, progress

    # --- progress -----------------------------------------------------------------
    def track_progress(
        self, progress: Progress, fleet: Sequence[Instance], now: datetime
    ) -> Progress:
        """Work done by training/batch jobs since ``progress.at``: live units
        x throughput x time; each job's total goes to the lifecycle. Dollars:
        each instance at its tier's price in the snapshot in force (the
        configured commitments at their committed price, used or not)."""
        last = progress.at
        if last is None or now <= last:
            return Progress(progress.work_done, now, progress.spent_usd)
        hours = (now - last).total_seconds() / 3600.0
        done = dict(progress.work_done)
        spent = dict(progress.spent_usd)
        snap = self._book.snapshot
        day = last.date()  # the interval's dollars count on the day it began
        for inst in fleet:
            w = self._book.workload(inst.workload)
            if w is None:
                continue
            if snap is not None:
                usd = self._book.price(inst.pool_key, inst.tier) * hours
                # A workload's budgets charge its committed usage; the fleet's
                # and the tiers' charge commitments as bought (below).
                spent[w.name] = spent.get(w.name, 0.0) + usd
                if inst.tier is not Tier.COMMITTED:
                    spent[FLEET] = spent.get(FLEET, 0.0) + usd
                    key = tier_day_key(inst.tier, day)
                    spent[key] = spent.get(key, 0.0) + usd
            if w.workload_class is WorkloadClass.SERVING:
                continue
            itype = PoolKey.parse(inst.pool_key).instance_type
            work = inst.units * w.throughput_of(itype) * hours
            done[w.name] = done.get(w.name, 0.0) + work
        if snap is not None and self._config.committed:
            committed = _committed_usd_per_hour(snap, self._config.committed)
            spent[FLEET] = spent.get(FLEET, 0.0) + committed * hours
            key = tier_day_key(Tier.COMMITTED, day)
            spent[key] = spent.get(key, 0.0) + committed * hours
        for name, total in done.items():
            self._lifecycle.report_progress(name, total)
        return Progress(done, now, spent)

    def rolling_state(
        self,
        snap: MarketSnapshot,
        state: PlanState,
        progress: Progress,
        running: Mapping[tuple[str, str, str], float],
    ) -> tuple[RollingState, datetime]:
        """Where the planning loop stands at the snapshot's hour, and the
        epoch (set from that hour by the first plan)."""
        start = snap.at.replace(minute=0, second=0, microsecond=0)
        epoch = state.epoch or start
        elapsed_h = int(max(0.0, (start - epoch).total_seconds()) // 3600)
        remaining = {
            w.name: max(0.0, w.unit_hours - progress.work_done.get(w.name, 0.0))
            for w in self._workloads.workloads
            if w.unit_hours is not None
        }
        rolling = RollingState(
            hour=elapsed_h,
            generation=state.generation,
            committed=dict(self._config.committed),
            previous_instances=dict(running),
            remaining_unit_hours=remaining,
            spent_usd=dict(progress.spent_usd),
        )
        return rolling, epoch

    # --- the plan -----------------------------------------------------------------
    def propose(
        self,
        snap: MarketSnapshot,
        state: PlanState,
        progress: Progress,
        running: Mapping[tuple[str, str, str], float],
        now: datetime,
    ) -> Proposal | None:
        """Solve the rolling horizon from the snapshot's hour (module
        docstring); ``running`` is the fleet's counts per slot, pinned
        through the churn cost. None: infeasible (the plan in force stays)."""
        hours = self._config.horizon_hours
        if state.epoch is None:
            self._lifecycle.set_horizon_start(snap.at.replace(minute=0, second=0, microsecond=0))
        rolling, epoch = self.rolling_state(snap, state, progress, running)
        start = snap.at.replace(minute=0, second=0, microsecond=0)
        caps = self._book.unavailable_capacity(now, hours)
        options = self._options(snap)
        try:
            # An allow-list the market of now cannot serve (a region missing
            # from a live snapshot) is refused here: the plan in force stays.
            problem = window_problem(
                snap,
                self._workloads,
                self._serving_demand(start, hours),
                rolling,
                hours=hours,
                step_hours=self.step_hours,
                options=options,
                costs=self.costs(snap),
                spot_capacity_instances=caps or None,
                blocks=self._held,
            )
        except InputError as e:
            log.error(kv("plan_refused", error=e, kept_generation=state.generation))
            return None
        try:
            plan = self._solve(problem)
        except (InfeasiblePlanError, SolverTimeLimitError) as e:
            log.error(kv("plan_infeasible", error=e, kept_generation=state.generation))
            return None
        if self._offers:
            self._recommend(problem)
        if plan.budget_limited:
            log.warning(kv("plan_budget_limited", unmet_unit_hours=f"{plan.unmet_total():.1f}",
                           budgets="; ".join(plan.budget_limited)))  # fmt: skip
        return Proposal(plan, now, epoch, snap.stale, options.interruption_multiplier)

    def commit(self, proposal: Proposal, state: PlanState, progress: Progress) -> PlanState:
        """Record ``proposal`` under the next generation: the plan in force
        from when it was made (call under the daemon's lock): the decisions
        taken while it was solved count on top of it."""
        plan, now = proposal.plan, proposal.made_at
        summary: Json = {
            "start": plan.start.isoformat(),
            "hours": plan.hours,
            "status": plan.status,
            "solver": plan.solver,
            "objective_usd": plan.objective_usd,
            "planned_cost_by_tier": plan.planned_cost_by_tier(),
            "epoch": proposal.epoch.isoformat(),
            "work_done": dict(progress.work_done),
            "spent_usd": dict(progress.spent_usd),
            "stale_market": proposal.stale_market,
            "interruption_multiplier": proposal.interruption_multiplier,
            # What reconcile reads of the plan, so that a restart keeps the
            # plan in force (and the decisions counted since it) instead of
            # making a new one from a fleet in the middle of a notice window.
            "in_force": plan_record(plan, self._digest),
        }
        if self._dry_run:
            gen = state.generation + 1
        else:
            with self._store.transaction() as tx:
                gen = tx.record_plan(self._owner, summary, now)
        self._metrics.plan_generation.set(gen)
        log.info(
            kv(
                "plan",
                generation=gen,
                status=plan.status,
                objective_usd=f"{plan.objective_usd:.2f}",
                solve_s=f"{plan.solve_time_s:.3f}",
            )
        )
        return PlanState(plan, gen, now, proposal.epoch)

    def _recommend(self, problem: PlanningProblem) -> None:
        """Plan once more with the offerings and log each one that plan buys
        (``block_recommended``); then the offerings are done with."""
        offers, self._offers = self._offers, ()
        try:
            plan = solve(replace(problem, blocks=problem.blocks + offers))  # the MILP buys
        except (InfeasiblePlanError, SolverTimeLimitError) as e:
            log.error(kv("blocks_not_weighed", error=e))
            return
        for b in plan.blocks:
            if b.held:
                continue
            log.warning(kv("block_recommended", block=b.block_id, kind=b.kind.value,
                           instances=f"{b.count} x {b.instance_type}", zone=b.zone,
                           start=b.start.isoformat(), hours=f"{b.hours:g}",
                           price_usd=f"{b.cost_usd:.2f}"))  # fmt: skip

    @property
    def step_hours(self) -> int:
        """The planning loop's step: the re-plan interval, in whole hours."""
        return max(1, math.ceil(self._config.intervals.replan_s / 3600.0))

    def _solve(self, problem: PlanningProblem) -> Plan:
        return fast_plan(problem) if self._config.planner == "fast" else solve(problem)

    def _serving_demand(self, start: datetime, hours: int) -> dict[str, FloatArray]:
        """Serving demand per workload: the demand file's window, else (or
        outside the file) the workloads' own shapes; a live-demand workload
        (``demand_metric``) holds its replicas now over the whole horizon
        (the next change re-plans: ``Daemon.sense_demand``)."""
        return {**self._file_or_shapes(start, hours), **self._live_demand(hours)}

    def _live_demand(self, hours: int) -> dict[str, FloatArray]:
        live = self._live
        if live is None:
            return {}
        return {n: np.full(hours, live.units(n), dtype=float) for n in live.names()}

    def _file_or_shapes(self, start: datetime, hours: int) -> dict[str, FloatArray]:
        ws, cfg = self._workloads, self._config
        if cfg.demand is not None:
            if self._demand is None:
                self._demand = load_demand(cfg.demand, ws, seed=cfg.demand_seed)
            try:
                window = self._demand.window(start, hours)
                return {n: s.to_numpy(dtype=float) for n, s in window.serving.items()}
            except ValueError:
                log.warning(kv("demand_outside_file", start=start.isoformat(), fallback="shapes"))
        shapes = DemandSet.from_shapes(ws, start, hours, cfg.demand_seed, live_elsewhere=True)
        return {n: s.to_numpy(dtype=float) for n, s in shapes.serving.items()}


def _committed_usd_per_hour(snap: MarketSnapshot, committed: Mapping[str, int]) -> float:
    """The hourly price of the configured commitments (group key ->
    instances), each at its region's committed price in the snapshot."""
    price: dict[str, float] = {}
    for p in snap.pools:
        usd = p.price(Tier.COMMITTED)
        if usd is None:
            continue
        key = str(CommitmentKey(p.pool.provider.value, p.pool.region, p.pool.instance_type))
        price[key] = min(usd, price.get(key, usd))
    return sum(n * price.get(group, 0.0) for group, n in committed.items())


# The allocation columns reconcile reads (``broker.planning.reconcile.desired_now``:
# ``units`` and ``work_per_hour`` size a serving spot row's hazard overhead; a
# record written before they were kept restores without them, rounded up).
_KEPT_COLUMNS = (
    "hour_start", "hour_end", "workload", "tier", "pool_key", "instances", "units",
    "work_per_hour",
)  # fmt: skip


def _digest(config: DaemonConfig, workloads: WorkloadSet) -> str:
    """What a stored plan must have been made for to stay in force after a restart."""
    basis = {
        "workloads": workloads.model_dump(mode="json"),
        "planner": config.planner,
        "horizon_hours": config.horizon_hours,
        "committed": config.committed,
        "providers": config.launch_providers,
        "demand": str(config.demand),
        **({} if config.blocks is None else {"blocks": str(config.blocks)}),
    }
    return hashlib.sha256(json.dumps(basis, sort_keys=True, default=str).encode()).hexdigest()[:16]


def plan_record(plan: Plan, digest: str) -> Json:
    """The part of ``plan`` reconcile needs, as JSON for the plan's store row."""
    a = plan.allocations
    rows = [] if a.empty else a[list(_KEPT_COLUMNS)].to_dict(orient="split")["data"]
    return {
        "digest": digest,
        "start": plan.start.isoformat(),
        "hours": plan.hours,
        "period_hours": plan.period_hours,
        "status": plan.status,
        "solver": plan.solver,
        "objective_usd": plan.objective_usd,
        "rows": rows,
    }


def plan_from_record(rec: Json | None, digest: str) -> Plan | None:
    """The plan ``plan_record`` wrote (None: none, or made for other workloads)."""
    if not rec or rec.get("digest") != digest:
        return None
    width = min((len(r) for r in rec["rows"]), default=len(_KEPT_COLUMNS))
    rows = pd.DataFrame([r[:width] for r in rec["rows"]], columns=list(_KEPT_COLUMNS[:width]))
    rows = rows.astype({"hour_start": int, "hour_end": int, "instances": float})
    return Plan(
        start=datetime.fromisoformat(rec["start"]),
        hours=int(rec["hours"]),
        period_hours=int(rec["period_hours"]),
        commitments=(),
        allocations=rows,
        objective_usd=float(rec["objective_usd"]),
        status=str(rec["status"]),
        solver=str(rec["solver"]),
        solve_time_s=0.0,
        integral=False,
        meta={"restored": "store"},
    )


def spot_returned(
    before: MarketSnapshot | None,
    after: MarketSnapshot,
    plan: Plan | None,
    at: datetime,
    workloads: WorkloadSet,
) -> tuple[str, ...]:
    """Pools whose spot ``after`` offers and ``before`` did not (a pool
    ``before`` did not list counts as new), when the plan in force holds
    on-demand in its hour at ``at``; else none. Such a plan may have been
    made on a market without that spot: its on-demand hours are then a
    choice the market no longer forces, so the daemon replans now instead of
    at the next ``replan_s`` (``Daemon.refresh_market``). Measured on the
    fleet bench: a plan made while every zone was out kept its replicas on
    on-demand for the rest of its hour, up to 0.022 x the on-demand cost in
    ticks where spot was back (seed 0, 5 windows per group)."""
    if before is None or plan is None:
        return ()
    if not any(tier == Tier.ON_DEMAND.value for _w, _p, tier in desired_now(plan, at, workloads)):
        return ()
    had = {p.pool.key for p in before.pools if p.spot_available and p.spot_usd_per_hour is not None}
    return tuple(
        sorted(
            p.pool.key
            for p in after.pools
            if p.spot_available and p.spot_usd_per_hour is not None and p.pool.key not in had
        )
    )
