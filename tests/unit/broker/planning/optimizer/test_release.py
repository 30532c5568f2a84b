"""A job's release (``release_hours``): no planner, re-plan, pacing line or
baseline runs its work before it, and the work is still done by the deadline."""

from __future__ import annotations

import pytest

from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from broker.planning.pacing import due_unit_hours
from broker.planning.rolling import RollingState, slice_problem, window_problem
from broker.whatif.baselines import all_on_demand
from markets.errors import InputError
from policies.cost_table import CostTable
from policies.workloads.spec import WorkloadSet, parse_workloads
from tests.unit.broker.planning.optimizer.test_solve import _market, _pool

RELEASE = 7


def _jobs(release: float = RELEASE) -> WorkloadSet:
    return parse_workloads({"workloads": [
        {"name": "train", "class": "training", "instance_types": ["g1"], "min_units": 2,
         "max_units": 2, "unit_hours": 20, "deadline_hours": 20, "release_hours": release,
         "max_zone_share": 1.0, "max_pool_share": 1.0},
        {"name": "sweep", "class": "batch", "instance_types": ["g1"], "unit_hours": 12,
         "deadline_hours": 20, "release_hours": release, "max_units": 4},
    ]})  # fmt: skip


def _work_before(plan: object, name: str, hour: float) -> float:
    a = plan.allocations  # type: ignore[attr-defined]
    a = a[a.workload == name]
    return float(
        (a.work_per_hour * (a.hour_end.clip(upper=hour) - a.hour_start)).clip(lower=0).sum()
    )


def _work(plan: object, name: str) -> float:
    a = plan.allocations  # type: ignore[attr-defined]
    a = a[a.workload == name]
    return float((a.work_per_hour * (a.hour_end - a.hour_start)).sum())


@pytest.mark.parametrize("planner", ["milp", "milp-integral", "fast"])
def test_no_planner_runs_a_job_before_its_release_and_each_meets_its_work(planner: str) -> None:
    snap = _market(_pool("us-east-1a", committed=None), _pool("us-east-1b", committed=None))
    options = PlanOptions(integral=planner == "milp-integral", period_hours=0)
    problem = build_problem(snap, _jobs(), {}, hours=24, options=options)
    assert RELEASE in [s for s, _e in problem.period_bounds]  # a period starts at the release
    plan = fast_plan(problem) if planner == "fast" else solve(problem)
    for name, work in (("train", 20.0), ("sweep", 12.0)):
        assert _work_before(plan, name, RELEASE) == 0.0
        assert _work(plan, name) >= work - 1e-6
        assert plan.unmet_unit_hours[name] == pytest.approx(0.0, abs=1e-6)
        a = plan.allocations[plan.allocations.workload == name]
        assert a.hour_start.min() >= RELEASE
        assert a.hour_end.max() <= 20


def test_without_a_release_the_same_jobs_start_at_once() -> None:
    snap = _market(_pool("us-east-1a", committed=None))
    plan = fast_plan(build_problem(snap, _jobs(0.0), {}, hours=24))
    assert _work_before(plan, "sweep", RELEASE) > 0  # the check above can fail


def test_a_re_plan_counts_the_release_from_its_own_start() -> None:
    ws = _jobs()
    snap = _market(_pool("us-east-1a", committed=None))
    early = window_problem(snap, ws, {}, RollingState(hour=3), hours=24, step_hours=1)
    late = window_problem(snap, ws, {}, RollingState(hour=10), hours=24, step_hours=1)
    w = ws.by_name("sweep")
    assert early.first_hour(w) == RELEASE - 3
    assert late.first_hour(w) == 0.0
    full = build_problem(snap, ws, {}, hours=24)
    assert slice_problem(full, 5, 10, RollingState(hour=5)).first_hour(w) == RELEASE - 5
    assert early.required_unit_hours(w) == pytest.approx(12.0)  # the deadline is inside
    # a window ending before the release owes nothing of it
    short = window_problem(snap, ws, {}, RollingState(hour=0), hours=5, step_hours=1)
    assert short.required_unit_hours(w) == 0.0


def test_nothing_is_due_before_the_release_and_the_line_runs_from_it() -> None:
    w = _jobs().by_name("sweep")
    assert due_unit_hours(w, 12.0, 0.0, 5.0) == 0.0
    assert w.due_share(RELEASE) == 0.0
    assert w.due_share((RELEASE + 20) / 2) == pytest.approx(0.5)
    assert w.due_share(20) == 1.0
    # two hours past the release: the line's share of the work, nothing done yet
    assert due_unit_hours(w, 12.0, 0.0, RELEASE + 2) == pytest.approx(12.0 * 2 / 13)


def test_the_on_demand_baseline_runs_the_job_from_its_release() -> None:
    snap = _market(_pool("us-east-1a", committed=None))
    ws = _jobs()
    plan = all_on_demand(snap, ws, {}, 24, costs=CostTable.compute(snap, ws))
    for name in ("train", "sweep"):
        assert _work_before(plan, name, RELEASE) == 0.0
        assert _work(plan, name) >= {"train": 20.0, "sweep": 12.0}[name] - 1e-6


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"release_hours": 20}, "release_hours"),
        ({"release_hours": -1}, "release_hours"),
        ({"release_hours": 15, "max_units": 1}, "deadline_hours"),  # 12 h of work in 5 h
    ],
)
def test_a_release_the_deadline_cannot_follow_is_refused(
    fields: dict[str, float], says: str
) -> None:
    row = {"name": "sweep", "class": "batch", "instance_types": ["g1"], "unit_hours": 12,
           "deadline_hours": 20, **fields}  # fmt: skip
    with pytest.raises(InputError, match=says):
        parse_workloads({"workloads": [row]})


def test_a_release_on_serving_is_refused() -> None:
    row = {"name": "api", "class": "serving", "instance_types": ["g1"], "release_hours": 3}
    with pytest.raises(InputError, match="release_hours"):
        parse_workloads({"workloads": [row]}, demand_supplied=True)
