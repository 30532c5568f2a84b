"""The planning loop's carried state: work, dollars against budgets, milestones."""

from __future__ import annotations

import pytest

from broker.planning.optimizer.model import build_model
from broker.planning.optimizer.problem import PlanOptions, build_problem
from broker.planning.optimizer.solve import solve
from broker.planning.rolling import (
    FLEET,
    RollingState,
    advance,
    initial_state,
    rolling_horizon,
    slice_problem,
    window_problem,
)
from policies.workloads.spec import parse_workloads
from tests.unit.broker.planning.optimizer.test_solve import _market, _pool


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


def test_a_horizon_budget_is_never_exceeded_across_re_plans() -> None:
    # 48 unit-hours on on-demand at $1: $48 of work, a $30 budget. Each 6-hour
    # window alone fits under $30, so without carrying what was spent every
    # re-plan would spend up to the whole budget again.
    ws = parse_workloads({"workloads": [_batch(budget_usd=30.0)]}, demand_supplied=True)
    snap = _market(_pool("us-east-1a", spot=None, committed=None))
    full = build_problem(snap, ws, {}, hours=24, options=PlanOptions(integral=True))
    result = rolling_horizon(lambda t, state: slice_problem(full, t, 6, state), 24, step_hours=3)
    spent = result.state.spent_usd
    assert spent["job"] <= 30.0 + 1e-6 and spent[FLEET] <= 30.0 + 1e-6
    assert result.plan.planned_cost_usd() == pytest.approx(spent[FLEET])
    assert result.plan.planned_cost_usd() > 20.0  # it did spend: the budget bound, not idling


def test_the_window_problem_charges_what_was_spent_against_the_budget() -> None:
    ws = parse_workloads({"workloads": [_batch(budget_usd=30.0)]}, demand_supplied=True)
    snap = _market(_pool("us-east-1a", spot=None, committed=None))
    state = RollingState(hour=6, remaining_unit_hours={"job": 40.0}, spent_usd={"job": 25.0})
    problem = window_problem(snap, ws, {}, state, hours=6, step_hours=3)
    assert problem.spent_usd == {"job": 25.0}
    assert problem.deadline_hour == {"job": 18.0}
    # uniform progress over the step: 40 left, 18 h to go, a 3-hour step
    assert problem.milestones["job"] == (3, pytest.approx(40.0 * 3 / 18))
    built = build_model(problem)
    assert any("$5.00 left to spend" in text for text in built.described.values())


def test_advance_takes_what_happened_over_what_was_planned() -> None:
    ws = parse_workloads({"workloads": [_batch()]}, demand_supplied=True)
    snap = _market(_pool("us-east-1a", spot=None, committed=None))
    first = initial_state(ws)
    assert first.remaining_unit_hours == {"job": 48.0} and first.generation == 0
    plan = solve(
        window_problem(
            snap, ws, {}, first, hours=6, step_hours=3, options=PlanOptions(integral=True)
        )
    )
    planned = advance(first, plan, 3)
    happened = advance(first, plan, 3, done={"job": 1.0}, spent={"job": 2.0, FLEET: 2.0})
    assert planned.remaining_unit_hours["job"] < 48.0 - 1.0
    assert happened.remaining_unit_hours == {"job": 47.0}
    assert happened.spent_usd == {"job": 2.0, FLEET: 2.0}
    assert happened.hour == planned.hour == 3 and happened.generation == 1
    # what runs at the step's end is pinned into the next window
    assert happened.previous_instances == planned.previous_instances
    assert sum(happened.previous_instances.values()) >= 1
