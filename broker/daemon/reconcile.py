"""The reconcile job: close the gap between the plan in force and the fleet.

Owns: ``ReconcileJob``: ``desired`` (the plan's current hour, the decisions
taken since the plan was made, pools that refused capacity swapped for the
next acceptable one, running instances kept where the plan only moved them
to an equivalent pool, a ready serving replica before one still warming up)
and ``run`` (the requests that close the gap, carried
out). The arithmetic is ``broker.planning.reconcile``'s and
``broker.daemon.book``'s; this module runs it against the fleet.

Level-triggered: every run compares the desired counts with the fleet as
listed now; nothing depends on what the previous run did. Launches go first
(serving capacity before savings), and a ready serving replica the plan no
longer wants stays until the one replacing it is ready (make before break:
``diff``'s ``warm_s``, each serving workload's ``restart_minutes``). A pool
that refuses capacity is marked unavailable and the diff is taken again, so
the next acceptable pool gets its count before anything is terminated
(``_PASSES`` at most).

Disruption budget: a re-plan that ends running spot capacity, or any
capacity of a training gang, is a broker-made move and spends the one
disruption budget the lifecycle's notice decisions spend
(``Lifecycle.disruption``, ``broker.lifecycle.disruption``): what it does not
grant stays, and the launches that would have replaced it wait
(``broker.planning.reconcile.hold``); what was ended is recorded after the
terminations are sent.

Moves that pay: a re-plan that ends running instances of a workload and
launches the same work on the same tier elsewhere moves them only when the
saving over the instance's expected remaining life exceeds the move's
price (cold start, restart, lost work; a training gang judged whole:
``broker.planning.moves``); the others stay, and the launches that would
have replaced them are held back (``hold``). The disruption budget then
rations the moves that pay.

A plan that resizes an elastic training job (its units in the plan's
current hour differ from the last reconcile's) is told to the lifecycle
(``Lifecycle.record_resize``), so the job's shrink dwell counts from the
plan's resize as from its own.

Must not: take the daemon's lock (the daemon holds it around ``run``), or
call the provider's mutating API except through the launcher and executor.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from broker.daemon.book import FleetBook, decision_deltas, stick, substitute
from broker.daemon.executor import Executor, Request
from broker.daemon.launch import Launcher
from broker.daemon.lifecycle import Lifecycle
from broker.daemon.plan_job import PlanState
from broker.daemon.store.store import Store
from broker.planning.moves import MoveCosts, need_hours, unpaid_moves
from broker.planning.optimizer.problem import PlanOptions
from broker.planning.plan import Plan
from broker.planning.reconcile import (
    Slot,
    apply_deltas,
    desired_now,
    diff,
    hold,
    leaving,
    live_ours,
    surplus,
    warm_up_seconds,
    whole_gangs,
)
from markets.cloud_fleet import Instance, LaunchRequest, TerminateRequest
from markets.keys import PoolKey
from markets.model import Tier
from markets.protocols import Provider
from policies.workloads.spec import WorkloadClass, WorkloadSet

__all__ = ["STICK_MARGIN", "ReconcileJob"]

# Move running capacity to an equivalent pool only if it is this much cheaper
# (assumption: a cold start of ~3 min plus warm-up is worth ~10 % of an hour).
STICK_MARGIN = 0.10
_PASSES = 3  # diffs per reconcile when pools refuse capacity
# A move's cold start is priced as the planner's churn term prices a launch.
_MOVE_COSTS = MoveCosts(churn_usd_per_unit=PlanOptions.churn_usd_per_unit)


class ReconcileJob:
    """Desired counts from the plan, and the requests that reach them."""

    def __init__(
        self,
        provider: Provider,
        store: Store,
        book: FleetBook,
        executor: Executor,
        launcher: Launcher,
        lifecycle: Lifecycle,
        workloads: WorkloadSet,
        *,
        owner: str,
        listing_grace_s: float,
        dry_run: bool = False,
    ) -> None:
        self._provider = provider
        self._store = store
        self._book = book
        self._executor = executor
        self._launcher = launcher
        self._lifecycle = lifecycle
        self._workloads = workloads
        self._elastic = frozenset(
            w.name
            for w in workloads.workloads
            if w.elastic and w.workload_class is WorkloadClass.TRAINING
        )
        self._plan_units: dict[str, int] = {}  # elastic training job -> units last planned
        self._gangs = frozenset(w.name for w in workloads.of_class(WorkloadClass.TRAINING))
        # Moves the disruption budget granted at the last ``desired``: id -> (workload, units)
        self._moving: dict[str, tuple[str, int]] = {}
        self._warm_s = warm_up_seconds(workloads)  # make before break (serving)
        self._priority = {w.name: w.priority for w in workloads.workloads}
        self._owner = owner
        self._grace_s = listing_grace_s
        self._dry_run = dry_run

    def view(self, now: datetime) -> list[Instance]:
        """The fleet as listed now (``FleetBook.view``; synced to the store
        unless in a dry run)."""
        return self._book.view(
            self._provider, self._store, now, self._grace_s, sync=not self._dry_run
        )

    def desired(self, state: PlanState, now: datetime) -> dict[Slot, int]:
        """The plan's current hour, the lifecycle's decisions since the plan,
        unavailable pools swapped for the next acceptable one, and the
        replacements of instances still under a notice kept
        (``FleetBook.protected``: a floor the plan and ``stick`` respect)."""
        if state.plan is None:
            return {}
        want = desired_now(state.plan, now, self._workloads)
        self._note_resizes(want, now)
        if state.created_at is not None:
            with self._store.transaction() as tx:
                decisions = tx.decisions(self._owner, since=state.created_at)
            want = apply_deltas(want, decision_deltas(decisions, want))
        book = self._book
        want = substitute(want, book, now)
        floor = book.protected(self._store, now)  # replacements inside their window
        want = {**want, **{s: max(want.get(s, 0), n) for s, n in floor.items()}}
        fleet = book.last_fleet
        ready = book.ready_counts(fleet, now, self._warm_s)
        planned = want
        want = stick(want, book.counts(fleet), book, STICK_MARGIN, ready, floor)
        want = whole_gangs(want, self._workloads, planned)  # a gang moves whole
        want = self._paying_moves(want, state.plan, now)
        want = self._within_disruption(want, now)
        return whole_gangs(want, self._workloads, book.counts(fleet))  # or waits whole

    def _paying_moves(self, want: dict[Slot, int], plan: Plan, now: datetime) -> dict[Slot, int]:
        """``want`` with the running instances whose move does not pay kept
        where they are, and the launches replacing them held back
        (``broker.planning.moves``, module docstring)."""
        snap = self._book.snapshot
        if snap is None:
            return want
        fleet, doomed = list(self._book.last_fleet), self._book.doomed_ids(now)
        kept = unpaid_moves(
            want, fleet, self._owner, self._book.workloads, snap.by_key(), need_hours(plan, now),
            gangs=self._gangs, costs=_MOVE_COSTS, doomed=doomed,
        )  # fmt: skip
        return hold(want, kept, fleet, self._owner, self._work_of, doomed=doomed)

    def _within_disruption(self, want: dict[Slot, int], now: datetime) -> dict[Slot, int]:
        """``want`` less the broker-made moves the disruption budget does not
        grant now (module docstring); remembers the granted ones."""
        fleet, doomed = list(self._book.last_fleet), self._book.doomed_ids(now)
        moves = leaving(want, fleet, self._owner, self._gangs, doomed=doomed)
        self._moving = {}
        if not moves:
            return want
        budget, now_s = self._lifecycle.disruption, now.timestamp()
        live = [i for i in live_ours(fleet, self._owner) if i.instance_id not in doomed]
        units_of: dict[str, float] = defaultdict(float)
        for i in live:
            units_of[i.workload] += i.units
        granted_units = 0.0
        kept: dict[str, list[Instance]] = {}
        for w in sorted(moves, key=lambda name: (-self._priority.get(name, 0), name)):
            insts = moves[w]
            n = budget.grant(
                w,
                [i.units for i in insts],
                capacity_units=sum(units_of.values()),
                workload_units=units_of[w],
                now_s=now_s,
                whole=w in self._gangs,
                granted_units=granted_units,
            )
            granted_units += sum(i.units for i in insts[:n])
            self._moving.update({i.instance_id: (w, i.units) for i in insts[:n]})
            if n < len(insts):
                kept[w] = insts[n:]
        return hold(want, kept, fleet, self._owner, self._work_of, doomed=doomed)

    def _work_of(self, workload: str, pool_key: str) -> float:
        """Work of one instance of ``pool_key`` for ``workload`` (its stated
        throughput factor, else 1.0): what ``hold`` trades kept for launched."""
        w = self._book.workload(workload)
        itype = PoolKey.parse(pool_key).instance_type
        factor = w.throughput.get(itype, 1.0) if w is not None else 1.0
        return self._book.units(pool_key) * factor

    def _note_resizes(self, planned: dict[Slot, int], now: datetime) -> None:
        """Tell the lifecycle of each elastic training job the plan resized."""
        if not self._elastic:
            return
        units = dict.fromkeys(self._elastic, 0)
        for (w, pool, _tier), n in planned.items():
            if w in units:
                units[w] += n * self._book.units(pool)
        for w, u in units.items():
            before = self._plan_units.get(w)
            if before is not None and before != u:
                self._lifecycle.record_resize(w, now)
            self._plan_units[w] = u

    def run(self, state: PlanState, fleet: list[Instance], now: datetime) -> list[Request]:
        """Close the gap between ``desired`` and ``fleet``; returns the
        requests sent (module docstring: launches first, then another diff
        when a pool refused, then terminations)."""
        done: list[Request] = []
        requests: list[Request] = []
        want: dict[Slot, int] = {}
        doomed: frozenset[str] = frozenset()
        for _ in range(_PASSES):
            doomed = self._book.doomed_ids(now)
            want = self.desired(state, now)
            requests = diff(
                want,
                fleet,
                state.generation,
                self._owner,
                doomed=doomed,
                now=now,
                warm_s=self._warm_s,
            )
            requests = self._book.within_budget(requests, fleet, now)
            alive = [i.instance_id for i in live_ours(fleet, self._owner)]
            refused = False
            for req in requests:
                if isinstance(req, LaunchRequest):
                    req = self._executor.resolve_launch_key(req, alive)
                    ctx = {"source": "reconcile"}
                    refused |= self._launcher.launch(req, context=ctx, fallback=False) is None
                    done.append(req)
            if not refused:
                break
            fleet = self.view(now)
        moved: dict[str, float] = defaultdict(float)
        for req in requests:
            if isinstance(req, TerminateRequest):
                self._executor.run(req, context={"source": "reconcile"})
                done.append(req)
                for iid in req.instance_ids:
                    if iid in self._moving:
                        w, n_units = self._moving[iid]
                        moved[w] += n_units
        for w, total in sorted(moved.items()):
            self._lifecycle.disruption.record(total, now.timestamp(), w)
        # What make before break keeps only until its replacement is ready:
        # the lifecycle counts it as retired (``Lifecycle.kept_until_ready``).
        ended = {i for r in done if isinstance(r, TerminateRequest) for i in r.instance_ids}
        after = [i for i in fleet if i.instance_id not in ended]
        kept = surplus(want, after, self._owner, doomed=doomed, tier=Tier.ON_DEMAND)
        self._lifecycle.kept_until_ready(kept)
        return done
