"""The planning loop: plan H hours ahead, keep the first step, carry state, re-plan.

Owns: ``RollingState`` (what one re-plan hands the next), ``window_problem``
(the problem one re-plan solves, built from that state), ``advance`` (the
state after a step, from what the plan said or from what actually
happened), ``slice_problem`` and ``rolling_horizon`` (the loop itself). The
daemon's plan job calls ``window_problem`` and ``advance`` at every re-plan;
the what-if's ``spotfolio`` scenario and the portfolio bench run
``rolling_horizon`` over a past period (``broker.whatif.replay``): one loop,
one carried state:

- ``hour``: hours since the epoch the deadlines count from;
- ``generation``: how many plans were made (the daemon's plan generation);
- ``committed``: commitments, bought once (at the first step, or given) and
  then fixed;
- ``previous_instances``: what runs now, pinned through the churn cost;
- ``remaining_unit_hours``: training/batch work still to do; the deadline
  moves closer, and a uniform-progress milestone (``milestones``) makes each
  step do its share, so re-plans cannot keep pushing work past the step
  they commit; the share is counted from the job's start, so a lead taken
  while spot was cheap is kept, and a training job's work ahead is worth
  what it would cost later (``broker.planning.pacing``);
- ``spent_usd``: dollars spent so far, per workload, for the fleet
  (``FLEET``) and per tier and UTC day (``budgets.tier_day_key``), charged
  against the horizon and daily budgets (``budget_usd``,
  ``tier_budget_usd_per_day``): the budget left is the budget less what was
  spent, so no sequence of re-plans spends more than the budget
  (``broker.planning.optimizer.budgets`` states which dollars each counts).

Must not: know where forecasts or markets come from (the caller does), or
call a provider.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from broker.planning.optimizer.budgets import FLEET, spent_by_key
from broker.planning.optimizer.problem import (
    FloatArray,
    PlanningProblem,
    PlanOptions,
    PoolSeries,
    build_problem,
)
from broker.planning.pacing import ahead_usd_per_unit_hour, pacing
from broker.planning.plan import ALLOCATION_COLUMNS, Plan, worst_status
from markets.blocks import CapacityBlock
from markets.model import MarketSnapshot, Tier
from policies.cost_table import CostTable
from policies.workloads.spec import WorkloadClass, WorkloadSet

__all__ = [
    "FLEET",
    "RollingResult",
    "RollingState",
    "Slot",
    "StepOutcome",
    "advance",
    "initial_state",
    "rolling_horizon",
    "slice_problem",
    "step_done",
    "step_spent",
    "window_problem",
]

Slot = tuple[str, str, str]  # (workload, pool key, tier)


@dataclass(frozen=True)
class RollingState:
    """What is true at hour ``hour`` of the run (module docstring)."""

    hour: int = 0
    generation: int = 0
    committed: Mapping[str, int] | None = None
    previous_instances: Mapping[Slot, float] = field(default_factory=dict)
    remaining_unit_hours: Mapping[str, float] = field(default_factory=dict)
    spent_usd: Mapping[str, float] = field(default_factory=dict)

    def deadlines(self, workloads: WorkloadSet) -> dict[str, float]:
        """Each job's deadline in hours from now (at least one hour: a job
        past its deadline is planned to finish as soon as it can)."""
        return {
            w.name: max(1.0, w.deadline_hours - self.hour)
            for w in workloads.workloads
            if w.deadline_hours is not None
        }

    def releases(self, workloads: WorkloadSet) -> dict[str, float]:
        """Each job's release in hours from now (0: its work is available)."""
        return {
            w.name: max(0.0, w.release_hours - self.hour)
            for w in workloads.workloads
            if w.workload_class is not WorkloadClass.SERVING
        }

    def milestones(self, step_hours: int, workloads: WorkloadSet) -> dict[str, tuple[int, float]]:
        """Uniform progress over the next step: each job's work due by the
        step's end (``broker.planning.pacing``: the line from the job's
        start, keeping a lead, never more than its remaining work spread
        evenly over the time left)."""
        return pacing(workloads, self.remaining_unit_hours, self.hour, step_hours, step_hours)[0]

    def due(self, hours: int, workloads: WorkloadSet) -> dict[str, float]:
        """Each job's work due within ``hours`` (``broker.planning.pacing``)."""
        return pacing(workloads, self.remaining_unit_hours, self.hour, hours, hours)[1]


def initial_state(
    workloads: WorkloadSet, *, committed: Mapping[str, int] | None = None, hour: int = 0
) -> RollingState:
    """A run's first state: every job's whole work still to do."""
    remaining = {
        w.name: float(w.unit_hours or 0.0)
        for w in workloads.workloads
        if w.workload_class is not WorkloadClass.SERVING and w.unit_hours is not None
    }
    return RollingState(
        hour=hour,
        committed=None if committed is None else dict(committed),
        remaining_unit_hours=remaining,
    )


def window_problem(
    snapshot: MarketSnapshot,
    workloads: WorkloadSet,
    serving_demand: Mapping[str, FloatArray],
    state: RollingState,
    *,
    hours: int,
    step_hours: int,
    options: PlanOptions | None = None,
    costs: CostTable | None = None,
    spot_capacity_instances: Mapping[str, FloatArray] | None = None,
    blocks: tuple[CapacityBlock, ...] = (),
) -> PlanningProblem:
    """The problem one re-plan solves: ``hours`` from ``snapshot`` with
    ``state``'s remaining work, deadlines, milestones, commitments, running
    instances and spent dollars, and ``blocks`` (held and offered); work a
    job does ahead of what is due is worth what it is expected to cost later
    (``broker.planning.pacing``)."""
    problem = build_problem(
        snapshot,
        workloads,
        serving_demand,
        hours=hours,
        options=options,
        costs=costs,
        spot_capacity_instances=spot_capacity_instances,
        committed_fixed=state.committed,
        previous_instances=dict(state.previous_instances),
        remaining_unit_hours=dict(state.remaining_unit_hours),
        deadline_hour=state.deadlines(workloads),
        release_hour=state.releases(workloads),
        milestones=state.milestones(step_hours, workloads),
        due_unit_hours=state.due(hours, workloads),
        spent_usd=dict(state.spent_usd),
        blocks=blocks,
    )
    ahead = ahead_usd_per_unit_hour(problem.costs, workloads)
    return dataclasses.replace(problem, ahead_usd_per_unit_hour=ahead) if ahead else problem


def _first_rows(plan: Plan, step: int) -> pd.DataFrame:
    a = plan.allocations
    taken = a[a["hour_start"] < step].copy()
    taken["hour_end"] = taken["hour_end"].clip(upper=step)
    return taken


def step_done(plan: Plan, step: int) -> dict[str, float]:
    """Work the plan's first ``step`` hours do, per workload (unit-hours)."""
    rows = _first_rows(plan, step)
    hours = (rows["hour_end"] - rows["hour_start"]).astype(float)
    done = (rows["work_per_hour"] * hours).groupby(rows["workload"]).sum()
    return {str(k): float(v) for k, v in done.items()}


def step_spent(plan: Plan, step: int) -> dict[str, float]:
    """Dollars the plan's first ``step`` hours spend under every budget's key
    (``budgets.spent_by_key``): per workload, for the fleet (``FLEET``:
    commitments as bought, once) and per tier and UTC day."""
    a = plan.hourly_instances()
    a = a[a["hour"] < step]
    usd = a["instances"].to_numpy(dtype=float) * a["usd_per_instance_hour"].to_numpy(dtype=float)
    charges = [
        (str(w), Tier(str(t)), int(h), float(x))
        for w, t, h, x in zip(a["workload"], a["tier"], a["hour"], usd, strict=True)
    ]
    return spent_by_key(plan.start, step, plan.committed_usd_per_hour(), charges)


def _running(plan: Plan, step: int) -> dict[Slot, float]:
    a = plan.allocations
    last = a[(a["hour_start"] <= step - 1) & (a["hour_end"] > step - 1)]
    return {
        (str(w), str(k), str(t)): float(n)
        for w, k, t, n in zip(
            last["workload"], last["pool_key"], last["tier"], last["instances"], strict=True
        )
    }


def advance(
    state: RollingState,
    plan: Plan,
    step: int,
    *,
    done: Mapping[str, float] | None = None,
    spent: Mapping[str, float] | None = None,
    running: Mapping[Slot, float] | None = None,
) -> RollingState:
    """The state ``step`` hours on. By default the plan's first step happened
    as planned; a caller that knows better (the daemon's measured progress,
    the fleet it lists; a replay billed on actuals) passes ``done``,
    ``spent`` and ``running``."""
    done = step_done(plan, step) if done is None else done
    spent = step_spent(plan, step) if spent is None else spent
    remaining = {
        name: max(0.0, left - float(done.get(name, 0.0)))
        for name, left in state.remaining_unit_hours.items()
    }
    total = dict(state.spent_usd)
    for name, usd in spent.items():
        total[name] = total.get(name, 0.0) + float(usd)
    return RollingState(
        hour=state.hour + step,
        generation=state.generation + 1,
        committed=(
            dict(plan.committed_instances()) if state.committed is None else state.committed
        ),
        previous_instances=_running(plan, step) if running is None else dict(running),
        remaining_unit_hours=remaining,
        spent_usd=total,
    )


@dataclass(frozen=True)
class RollingResult:
    plan: Plan  # the steps actually taken, stitched together
    solves: int
    seconds: float
    solve_seconds: tuple[float, ...]
    state: RollingState = field(default_factory=RollingState)  # the state at the end


def _worst(gaps: list[float | None]) -> float | None:
    """The largest gap any step's solve proved (``None`` if one proved none):
    every step's plan is at least that close to its own optimum."""
    return (
        None if not gaps or any(g is None for g in gaps) else max(g for g in gaps if g is not None)
    )


def slice_problem(full: PlanningProblem, start_hour: int, hours: int,
                  state: RollingState) -> PlanningProblem:  # fmt: skip
    """The window ``[start_hour, start_hour + hours)`` of a problem whose
    arrays cover the whole run (hindsight, or a forecast fixed in advance)."""
    end = min(start_hour + hours, full.hours)
    pools = tuple(
        PoolSeries(p.snap, p.spot_usd_per_hour[start_hour:end],
                   p.spot_capacity_instances[start_hour:end])
        for p in full.pools
    )  # fmt: skip
    demand = {k: v[start_hour:end] for k, v in full.serving_demand.items()}
    deadlines = {}
    releases = {}
    for w in full.workloads.workloads:
        base = full.deadline_hour.get(w.name, w.deadline_hours or math.inf)
        deadlines[w.name] = base - start_hour
        releases[w.name] = max(0.0, full.first_hour(w) - start_hour)
    return dataclasses.replace(
        full,
        start=full.start + pd.Timedelta(hours=start_hour).to_pytimedelta(),
        hours=end - start_hour,
        pools=pools,
        serving_demand=demand,
        deadline_hour=deadlines,
        release_hour=releases,
        remaining_unit_hours=dict(state.remaining_unit_hours),
        committed_fixed=state.committed,
        previous_instances=dict(state.previous_instances),
        spent_usd=dict(state.spent_usd),
    )


StepOutcome = tuple[Mapping[str, float], Mapping[str, float]]  # (done, spent)


def rolling_horizon(
    window: Callable[[int, RollingState], PlanningProblem],
    total_hours: int,
    *,
    step_hours: int = 1,
    initial: RollingState | None = None,
    solve_fn: Callable[[PlanningProblem], Plan] | None = None,
    happened: Callable[[RollingState, Plan, int], StepOutcome] | None = None,
) -> RollingResult:
    """Re-plan every ``step_hours`` over ``total_hours``: ``window(t, state)``
    is the problem known at hour ``t``; ``happened(state, plan, step)``, when
    given, says what the step really did (work, dollars) instead of the plan."""
    if solve_fn is None:
        from broker.planning.optimizer.solve import solve  # PuLP only when planning

        solve_fn = solve
    state = initial if initial is not None else RollingState()
    start_hour = state.hour
    t0 = time.perf_counter()
    kept: list[pd.DataFrame] = []
    times: list[float] = []
    first: Plan | None = None
    unmet: dict[str, float] = {}
    gaps: list[float | None] = []
    statuses: list[str] = []
    met: list[bool] = []  # whether each step's solve proved the asked gap
    limited: dict[str, None] = {}  # budgets that left a step's demand unmet, first first
    while state.hour - start_hour < total_hours:
        problem = window(state.hour - start_hour, state)
        if not state.remaining_unit_hours and state.generation == 0:
            state = dataclasses.replace(
                state, remaining_unit_hours=initial_state(problem.workloads).remaining_unit_hours
            )
        s = time.perf_counter()
        plan = solve_fn(problem)
        times.append(time.perf_counter() - s)
        gaps.append(plan.meta_number("gap"))
        statuses.append(plan.status)
        met.append(plan.meta.get("gap_met") is True)
        for text in plan.budget_limited:  # the budget, not what was left of it then
            limited.setdefault(text.split(" ($")[0], None)
        first = first or plan
        step = min(step_hours, total_hours - (state.hour - start_hour))
        taken = _first_rows(plan, step)
        offset = state.hour - start_hour
        taken["hour_start"] += offset
        taken["hour_end"] += offset
        taken["period"] = taken["hour_start"]
        kept.append(taken)
        for name, v in plan.unmet_unit_hours.items():
            if v > 0:
                unmet[name] = unmet.get(name, 0.0) + v * step / max(plan.hours, 1)
        if happened is None:
            state = advance(state, plan, step)
        else:
            done, spent = happened(state, plan, step)
            state = advance(state, plan, step, done=done, spent=spent)
    assert first is not None
    table = pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=ALLOCATION_COLUMNS)
    committed = state.committed or {}
    stitched = Plan(
        start=first.start, hours=total_hours, period_hours=step_hours,
        commitments=tuple(
            dataclasses.replace(c, instances=committed.get(c.group, 0)) for c in first.commitments
        ),
        allocations=table[ALLOCATION_COLUMNS], objective_usd=0.0, status=worst_status(statuses),
        solver=first.solver, solve_time_s=sum(times), integral=first.integral,
        unmet_unit_hours=unmet, meta={"solves": len(times), "gap": _worst(gaps),
                                       "gap_met": all(met)},
        budget_limited=tuple(limited),
    )  # fmt: skip
    objective = stitched.planned_cost_usd()
    stitched = dataclasses.replace(stitched, objective_usd=objective)
    return RollingResult(stitched, len(times), time.perf_counter() - t0, tuple(times), state)
