"""The in-process HiGHS model: the same answers as CBC, held and changed in place."""

from __future__ import annotations

import importlib.util

import pulp
import pytest

from broker.planning.optimizer.backend import run_solver

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("highspy") is None, reason="highspy is not installed"
)


def _model() -> tuple[pulp.LpProblem, pulp.LpVariable, pulp.LpVariable, pulp.LpVariable]:
    prob = pulp.LpProblem("m", pulp.LpMinimize)
    x = pulp.LpVariable("x", 0, 10)
    y = pulp.LpVariable("y", 0, None)
    n = pulp.LpVariable("n", 0, 5, cat=pulp.LpInteger)
    prob += 3 * x + 2 * y + 7 * n + 1.5  # a constant in the objective
    prob += x + y + 2 * n >= 7.5, "demand"
    prob += x - y <= 2, "spread"
    prob += y <= 4 + 0 * x, "cap"
    return prob, x, y, n


def _solve(prob: pulp.LpProblem, solver: str) -> tuple[float | None, float | None]:
    out = run_solver(prob, solver, gap=1e-6, time_limit_s=30)
    assert out.has_solution
    return out.objective, out.bound


def test_highs_matches_cbc_on_an_lp_and_a_milp() -> None:
    for integral in (False, True):
        got = {}
        for solver in ("cbc", "highs"):
            prob, x, y, n = _model()
            if not integral:
                n.cat = pulp.LpContinuous
            obj, bound = _solve(prob, solver)
            cons = prob.constraints
            got[solver] = (
                round(obj or 0.0, 6),
                round(bound or 0.0, 6),
                [round(v.varValue, 6) for v in (x, y, n)],
                [round(cons[c].slack, 6) for c in ("demand", "spread", "cap")],
            )
        assert got["highs"] == got["cbc"], integral
    # the MILP rounds n: its optimum is above the LP's
    assert got["cbc"][0] > 0


def test_bounds_and_categories_change_the_model_held_in_place() -> None:
    prob, _x, _y, n = _model()
    n.cat = pulp.LpContinuous
    lp_obj, _ = _solve(prob, "highs")
    held = prob._spotfolio_highs
    n.lowBound = n.upBound = 2.0  # fixed, as rounding fixes a block
    fixed_obj, _ = _solve(prob, "highs")
    assert prob._spotfolio_highs is held  # the same HiGHS model, changed
    assert n.varValue == pytest.approx(2.0)
    assert fixed_obj is not None and lp_obj is not None and fixed_obj >= lp_obj - 1e-9
    # the same model solved afresh by CBC agrees
    cbc_obj, _ = _solve(prob, "cbc")
    assert fixed_obj == pytest.approx(cbc_obj)
    n.lowBound, n.upBound, n.cat = 0, 5, pulp.LpInteger
    milp_obj, bound = _solve(prob, "highs")
    assert prob._spotfolio_highs is held
    assert float(n.varValue or 0.0).is_integer()
    assert bound is not None and milp_obj is not None and bound <= milp_obj + 1e-6


def test_a_row_added_rebuilds_the_held_model() -> None:
    prob, x, _y, _n = _model()
    _solve(prob, "highs")
    held = prob._spotfolio_highs
    prob += x >= 6, "floor"
    obj, _ = _solve(prob, "highs")
    assert prob._spotfolio_highs is not held
    assert x.varValue == pytest.approx(6.0, abs=1e-7)
    assert obj == pytest.approx(_solve(prob, "cbc")[0])


def test_an_infeasible_model_says_so() -> None:
    prob, x, y, n = _model()
    prob += x + y + 2 * n <= 1, "too_little"
    out = run_solver(prob, "highs", gap=1e-6, time_limit_s=30)
    assert out.sol_status == pulp.LpSolutionInfeasible
    assert not out.has_solution
