"""A plan's status says what was proven: "optimal" only with a nil gap to a
proven bound, "within_gap" when the asked gap is met, else "feasible"; a time
limit that ends with no plan is reported as a time limit, not infeasibility."""

from __future__ import annotations

import numpy as np
import pulp
import pytest

from broker.bench.solver import synthetic_problem
from broker.planning.optimizer import solve as solve_module
from broker.planning.optimizer.backend import Outcome, run_solver
from broker.planning.optimizer.fast import fast_plan
from broker.planning.optimizer.problem import PlanOptions
from broker.planning.optimizer.solve import plan_status, solve
from markets.errors import InfeasiblePlanError, SolverTimeLimitError


@pytest.mark.parametrize(
    ("gap", "target", "status"),
    [
        pytest.param(None, 0.005, "feasible", id="nothing-proven"),
        pytest.param(0.0, 0.005, "optimal", id="nil-gap"),
        pytest.param(0.003, 0.005, "within_gap", id="inside-the-target"),
        pytest.param(0.016, 0.005, "feasible", id="above-the-target"),
    ],
)
def test_status_follows_the_proven_gap(gap: float | None, target: float, status: str) -> None:
    assert plan_status(gap, target) == status


def test_a_quick_plan_above_its_bound_is_not_labelled_optimal() -> None:
    # Relax-and-fix without a proof: the rounded plan sits above the LP bound.
    plan = solve(synthetic_problem(4, 3, 12, seed=0, options=PlanOptions()))
    gap = plan.meta_number("gap")
    assert gap is not None and gap > 1e-6
    assert plan.status != "optimal"
    assert plan.status == plan_status(gap, 0.005)
    assert plan.meta["gap_met"] is (gap <= 0.005)
    assert f"proven gap {gap:.2%}" in plan.explain().splitlines()[0]


def test_a_missed_gap_target_is_feasible_with_gap_met_false() -> None:
    # A 1e-9 target the quick solve cannot prove.
    plan = solve(synthetic_problem(4, 3, 12, seed=0, options=PlanOptions(gap=1e-9)))
    assert plan.status == "feasible" and plan.meta["gap_met"] is False


def test_a_fast_plan_is_never_optimal() -> None:
    plan = fast_plan(synthetic_problem(4, 3, 12, seed=0))
    assert plan.status == "feasible" and plan.meta["gap"] is None


def _market_split(m: int = 5, n: int = 50) -> pulp.LpProblem:
    """Cornuejols-Dawande market split: equality knapsacks over binaries that
    branch and bound cannot settle in seconds (feasible or not)."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 100, size=(m, n))
    prob = pulp.LpProblem("market_split", pulp.LpMinimize)
    x = [pulp.LpVariable(f"x{i}", cat=pulp.LpBinary) for i in range(n)]
    prob += pulp.lpSum(x)
    for r in range(m):
        prob += pulp.lpSum(int(a[r, i]) * x[i] for i in range(n)) == int(a[r].sum() // 2)
    return prob


def test_a_time_limit_with_no_solution_is_not_reported_as_infeasible() -> None:
    out = run_solver(_market_split(), "cbc", gap=0.0, time_limit_s=1.0)
    assert not out.has_solution
    assert out.stopped_without_plan and out.sol_status != pulp.LpSolutionInfeasible


def test_solve_says_the_time_limit_was_hit(monkeypatch: pytest.MonkeyPatch) -> None:
    # The solver's answer of the test above ("not solved"), for a planning
    # model: solve names the time limit and nothing infeasible.
    def stopped(*_args: object, **_kw: object) -> Outcome:
        return Outcome(pulp.LpSolutionNoSolutionFound, None, None)

    monkeypatch.setattr(solve_module, "run_solver", stopped)
    problem = synthetic_problem(
        2, 2, 4, seed=0, options=PlanOptions(integral=True, time_limit_s=7.0)
    )
    with pytest.raises(SolverTimeLimitError) as err:
        solve(problem)
    assert not isinstance(err.value, InfeasiblePlanError)
    assert "time limit (7 s)" in str(err.value) and "\n" not in str(err.value)
