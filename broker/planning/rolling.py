"""Rolling horizon: plan H hours ahead, keep only the first step, re-plan.

Owns: ``RollingState``, ``slice_problem`` and ``rolling_horizon``, the
reusable loop the what-if, the simulator's portfolio setting and the daemon
share. At each step ``t`` the caller's ``window(t, state)`` returns the
problem over ``[t, t + H)`` as known at ``t`` (forecast demand, the market
snapshot of then); this module solves it, keeps the first ``step_hours`` of
the plan, and carries forward:

- commitments: bought once (at the first step, or given) and then fixed;
- running allocations: pinned through the churn cost (``previous_instances``);
- training/batch progress: work done so far reduces what remains, and the
  deadline moves closer.

Must not: know where forecasts or markets come from (the caller does).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from broker.planning.optimizer.problem import PlanningProblem, PoolSeries
from broker.planning.plan import ALLOCATION_COLUMNS, Plan
from policies.workloads.spec import WorkloadClass

__all__ = ["RollingResult", "RollingState", "rolling_horizon", "slice_problem"]


@dataclass
class RollingState:
    """What is true at hour ``hour`` of the run."""

    hour: int = 0
    committed: dict[str, int] | None = None
    previous_instances: dict[tuple[str, str, str], float] = field(default_factory=dict)
    remaining_unit_hours: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RollingResult:
    plan: Plan  # the steps actually taken, stitched together
    solves: int
    seconds: float
    solve_seconds: tuple[float, ...]


def slice_problem(full: PlanningProblem, start_hour: int, hours: int,
                  state: RollingState) -> PlanningProblem:  # fmt: skip
    """The window ``[start_hour, start_hour + hours)`` of a problem whose
    arrays cover the whole run (hindsight, or a forecast fixed in advance)."""
    end = min(start_hour + hours, full.hours)
    n = end - start_hour
    pools = tuple(
        PoolSeries(p.snap, p.spot_usd_per_hour[start_hour:end],
                   p.spot_capacity_instances[start_hour:end])
        for p in full.pools
    )  # fmt: skip
    demand = {k: v[start_hour:end] for k, v in full.serving_demand.items()}
    deadlines = {}
    for w in full.workloads.workloads:
        base = full.deadline_hour.get(w.name, w.deadline_hours or math.inf)
        deadlines[w.name] = base - start_hour
    return dataclasses.replace(
        full,
        start=full.start + pd.Timedelta(hours=start_hour).to_pytimedelta(),
        hours=n,
        pools=pools,
        serving_demand=demand,
        deadline_hour=deadlines,
        remaining_unit_hours=dict(state.remaining_unit_hours),
        committed_fixed=state.committed,
        previous_instances=dict(state.previous_instances),
    )


def rolling_horizon(
    window: Callable[[int, RollingState], PlanningProblem],
    total_hours: int,
    *,
    step_hours: int = 1,
    initial: RollingState | None = None,
    solve_fn: Callable[[PlanningProblem], Plan] | None = None,
) -> RollingResult:
    """Re-plan every ``step_hours`` over ``total_hours``; see the module docstring."""
    if solve_fn is None:
        from broker.planning.optimizer.solve import solve  # PuLP only when planning

        solve_fn = solve
    state = initial or RollingState()
    t0 = time.perf_counter()
    kept: list[pd.DataFrame] = []
    times: list[float] = []
    first: Plan | None = None
    objective = 0.0
    unmet: dict[str, float] = {}
    while state.hour < total_hours:
        problem = window(state.hour, state)
        if not state.remaining_unit_hours:
            state.remaining_unit_hours = {
                w.name: float(w.unit_hours or 0.0)
                for w in problem.workloads.workloads
                if w.workload_class is not WorkloadClass.SERVING
            }
        s = time.perf_counter()
        plan = solve_fn(problem)
        times.append(time.perf_counter() - s)
        first = first or plan
        if state.committed is None:
            state.committed = plan.committed_instances()
        step = min(step_hours, total_hours - state.hour)
        a = plan.allocations
        taken = a[a["hour_start"] < step].copy()
        taken["hour_end"] = taken["hour_end"].clip(upper=step)
        taken["hour_start"] += state.hour
        taken["hour_end"] += state.hour
        taken["period"] = taken["hour_start"]
        kept.append(taken)
        _advance(state, plan, step, unmet)
        objective += float(
            (taken["instances"] * taken["usd_per_instance_hour"]
             * (taken["hour_end"] - taken["hour_start"])).sum()
        )  # fmt: skip
        state.hour += step
    assert first is not None
    table = pd.concat(kept, ignore_index=True) if kept else pd.DataFrame(columns=ALLOCATION_COLUMNS)
    stitched = Plan(
        start=first.start, hours=total_hours, period_hours=step_hours,
        commitments=tuple(
            dataclasses.replace(c, instances=(state.committed or {}).get(c.group, 0))
            for c in first.commitments
        ),
        allocations=table[ALLOCATION_COLUMNS], objective_usd=objective, status="rolling",
        solver=first.solver, solve_time_s=sum(times), integral=first.integral,
        unmet_unit_hours=unmet, meta={"solves": len(times)},
    )  # fmt: skip
    objective += stitched.committed_usd_per_hour() * total_hours
    stitched = dataclasses.replace(stitched, objective_usd=objective)
    return RollingResult(stitched, len(times), time.perf_counter() - t0, tuple(times))


def _advance(state: RollingState, plan: Plan, step: int, unmet: Mapping[str, float]) -> None:
    a = plan.allocations
    first_rows = a[a["hour_start"] < step]
    hours = (first_rows["hour_end"].clip(upper=step) - first_rows["hour_start"]).astype(float)
    done = (first_rows["work_per_hour"] * hours).groupby(first_rows["workload"]).sum()
    for name in list(state.remaining_unit_hours):
        state.remaining_unit_hours[name] = max(
            0.0, state.remaining_unit_hours[name] - float(done.get(name, 0.0))
        )
    last = a[(a["hour_start"] <= step - 1) & (a["hour_end"] > step - 1)]
    state.previous_instances = {
        (str(w), str(k), str(t)): float(n)
        for w, k, t, n in zip(
            last["workload"], last["pool_key"], last["tier"], last["instances"], strict=True
        )
    }
    for name, v in plan.unmet_unit_hours.items():
        if v > 0 and isinstance(unmet, dict):
            unmet[name] = unmet.get(name, 0.0) + v * step / max(plan.hours, 1)
