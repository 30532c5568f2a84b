"""Budgets that hold: every dollar limit (workload, fleet, tier; per hour,
horizon, UTC day) is held by the MILP, the fast path and any sequence of
re-plans, and a budget that leaves demand unmet says so."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.planning.optimizer.budgets import exceeded, limits, spend
from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import PlanningProblem, PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from broker.planning.plan import Plan
from broker.planning.rolling import FLEET, rolling_horizon, slice_problem, step_spent
from markets.errors import InfeasiblePlanError
from policies.workloads.spec import parse_workloads
from tests.unit.broker.planning.optimizer.test_solve import _market, _pool

INTEGRAL = PlanOptions(integral=True, time_limit_s=120.0)


def _serving(**extra: object) -> dict[str, object]:
    return {
        "name": "api",
        "class": "serving",
        "instance_types": ["g1"],
        "max_spot_share": 0.0,
        **extra,
    }


def _batch(**extra: object) -> dict[str, object]:
    return {
        "name": "job",
        "class": "batch",
        "instance_types": ["g1"],
        "unit_hours": 48,
        "deadline_hours": 24,
        "max_zone_share": 1.0,
        "max_pool_share": 1.0,
        "max_units": 8,
        **extra,
    }


def _broken(problem: PlanningProblem, plan: Plan) -> list[str]:
    return [
        f"{lim.text}: spent {got:.4f}"
        for lim, got in exceeded(problem, plan.allocations, plan.committed_usd_per_hour())
    ]


def test_the_fast_path_holds_the_fleet_hourly_budget_and_says_what_is_unmet() -> None:
    # 10 units of serving on on-demand at $1/h against $5/h: a greedy plan
    # would spend $10/h; this one holds $5/h and leaves the rest unmet.
    ws = parse_workloads(
        {"budget_usd_per_hour": 5, "workloads": [_serving()]}, demand_supplied=True
    )
    snap = _market(_pool("us-east-1a", spot=None, committed=None))
    problem = build_problem(snap, ws, {"api": np.full(6, 10.0)}, hours=6)
    plan = fast_plan(problem)
    assert _broken(problem, plan) == []
    [fleet] = [lim for lim in limits(problem) if lim.text.startswith("fleet")]
    assert spend(fleet, plan.allocations, 0.0) == pytest.approx(5.0, rel=1e-6)
    assert plan.unmet_unit_hours["api"] == pytest.approx(6 * 5.0, rel=1e-6)
    assert plan.budget_limited == ("fleet budget $5.00/h",)


def test_the_fast_path_holds_a_workload_horizon_budget() -> None:
    ws = parse_workloads({"workloads": [_batch(budget_usd=30.0)]}, demand_supplied=True)
    snap = _market(_pool("us-east-1a", spot=None, committed=None))
    plan = fast_plan(build_problem(snap, ws, {}, hours=24))
    assert plan.planned_cost_usd() == pytest.approx(30.0, rel=1e-6)
    assert plan.unmet_unit_hours["job"] == pytest.approx(18.0, rel=1e-6)
    assert plan.budget_limited and "budget $30.00 over the horizon" in plan.budget_limited[0]


@pytest.mark.parametrize(
    "planner", [pytest.param(solve, id="milp"), pytest.param(fast_plan, id="fast")]
)
def test_an_on_demand_budget_per_day_holds_on_each_utc_day(planner: object) -> None:
    # 2 units all day on on-demand at $1 is $48 a day; on-demand may spend $30.
    ws = parse_workloads(
        {"tier_budget_usd_per_day": {"on_demand": 30}, "workloads": [_serving()]},
        demand_supplied=True,
    )
    snap = _market(_pool("us-east-1a", spot=None, committed=None))
    problem = build_problem(snap, ws, {"api": np.full(48, 2.0)}, hours=48, options=INTEGRAL)
    assert callable(planner)
    plan = planner(problem)
    assert isinstance(plan, Plan)
    assert _broken(problem, plan) == []
    a = plan.hourly_instances()
    by_day = (a["instances"] * a["usd_per_instance_hour"]).groupby(a["hour"] // 24).sum()
    assert list(by_day) == [pytest.approx(30.0, rel=1e-6)] * 2
    assert plan.unmet_unit_hours["api"] == pytest.approx(2 * 18.0, rel=1e-6)
    assert any("on_demand budget $30.00/day" in b for b in plan.budget_limited)
    assert "BUDGET: 36.0 unit-hours of demand left unmet" in plan.explain()


def test_a_day_budget_carries_what_earlier_re_plans_spent_that_day() -> None:
    # Each 6-hour window alone fits under $30; the day must not.
    ws = parse_workloads(
        {"tier_budget_usd_per_day": {"on_demand": 30}, "workloads": [_batch()]},
        demand_supplied=True,
    )
    snap = _market(_pool("us-east-1a", spot=None, committed=None))
    full = build_problem(snap, ws, {}, hours=24, options=INTEGRAL)
    result = rolling_horizon(lambda t, state: slice_problem(full, t, 6, state), 24, step_hours=3)
    assert result.plan.planned_cost_usd() <= 30.0 + 1e-6
    assert result.plan.planned_cost_usd() > 20.0  # the budget bound, not idling
    assert _broken(full, result.plan) == []


def test_step_spent_counts_commitments_once_for_the_fleet() -> None:
    # 4 committed instances in use at $0.6 and 2 on-demand at $1 for 3 hours.
    ws = parse_workloads({"workloads": [_serving()]}, demand_supplied=True)
    snap = _market(_pool("us-east-1a", spot=None))
    problem = build_problem(
        snap,
        ws,
        {"api": np.array([4, 4, 4, 6, 6, 6.0])},
        hours=6,
        options=PlanOptions(integral=True, churn_usd_per_unit=0.0),
        committed_fixed={"aws/us-east-1/g1": 4},
    )
    plan = solve(problem)
    spent = step_spent(plan, 6)
    committed = 4 * 0.6 * 6
    assert spent[FLEET] == pytest.approx(committed + 2 * 1.0 * 3)  # main: + 14.4 again
    assert spent["api"] == pytest.approx(committed + 2 * 1.0 * 3)  # usage at committed price
    assert spent["on_demand@2026-03-02"] == pytest.approx(6.0)
    assert spent["committed@2026-03-02"] == pytest.approx(committed)


_BUDGETS = st.fixed_dictionaries(
    {},
    optional={
        "budget_usd_per_hour": st.floats(0.5, 12.0),
        "budget_usd": st.floats(5.0, 200.0),
        "tier_budget_usd_per_hour": st.fixed_dictionaries(
            {}, optional={"on_demand": st.floats(0.5, 8.0), "spot": st.floats(0.2, 4.0)}
        ),
        "tier_budget_usd_per_day": st.fixed_dictionaries(
            {}, optional={"on_demand": st.floats(2.0, 80.0), "committed": st.floats(5.0, 60.0)}
        ),
    },
)
_WORKLOAD_BUDGETS = st.fixed_dictionaries(
    {}, optional={"budget_usd_per_hour": st.floats(0.5, 6.0), "budget_usd": st.floats(5.0, 90.0)}
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fleet=_BUDGETS,
    api=_WORKLOAD_BUDGETS,
    job=_WORKLOAD_BUDGETS,
    demand=st.lists(st.integers(0, 6), min_size=30, max_size=30),
    start_hour=st.integers(0, 23),
)
def test_no_plan_or_re_plan_sequence_exceeds_a_budget(
    fleet: dict[str, object],
    api: dict[str, object],
    job: dict[str, object],
    demand: list[int],
    start_hour: int,
) -> None:
    from datetime import timedelta

    ws = parse_workloads(
        {
            **fleet,
            "workloads": [
                _serving(max_spot_share=0.5, **api),
                _batch(unit_hours=30, deadline_hours=30, **job),
            ],
        },
        demand_supplied=True,
    )
    snap = _market(_pool("us-east-1a"), _pool("us-east-1b", spot=0.4))
    snap = snap.model_copy(update={"at": snap.at + timedelta(hours=start_hour)})
    arr = np.asarray(demand, dtype=float)
    # Continuous instance counts (commitments stay integer): LPs, solved fast.
    opts = PlanOptions(integral=False, time_limit_s=120.0)
    full = build_problem(snap, ws, {"api": arr}, hours=30, options=opts)
    for planner in (solve, fast_plan):
        try:
            plan = planner(full)
        except InfeasiblePlanError:
            continue  # no plan at all: nothing spent over a budget
        assert _broken(full, plan) == []
    try:
        rolled = rolling_horizon(
            lambda t, state: slice_problem(full, t, 12, state), 30, step_hours=6
        )
    except InfeasiblePlanError:
        return
    assert _broken(full, rolled.plan) == []


def test_a_budget_cut_takes_a_gang_whole_or_not_at_all() -> None:
    # The gang's 4-unit minimum must sit on on-demand at $1/unit-hour; the
    # on-demand tier may spend $2/h: no gang fits, and none runs half-sized
    # on the spot it would otherwise add.
    train = {
        "name": "train",
        "class": "training",
        "instance_types": ["g1"],
        "min_units": 4,
        "max_units": 8,
        "step_units": 4,
        "elastic": True,
        "unit_hours": 40,
        "deadline_hours": 24,
        "min_on_non_revocable": True,
        "max_zone_share": 1.0,
        "max_pool_share": 1.0,
    }
    ws = parse_workloads(
        {"tier_budget_usd_per_hour": {"on_demand": 2}, "workloads": [train]}, demand_supplied=True
    )
    problem = build_problem(_market(_pool("us-east-1a", committed=None)), ws, {}, hours=12)
    plan = fast_plan(problem)
    assert _broken(problem, plan) == []
    assert plan.allocations.empty  # no spot-only remnant of a gang without its minimum
    assert plan.unmet_unit_hours["train"] == pytest.approx(40.0 * 12 / 24)
    assert plan.budget_limited == ("fleet on_demand budget $2.00/h",)
