"""The solver benchmark reports, per size, a proven gap with its bound, the
quick relax-and-fix, the fast path and the naive formulation side by side."""

from __future__ import annotations

import pytest

from broker.bench.solver import PROVE, run


def test_solver_bench_reports_the_proven_gap_and_its_bound() -> None:
    out = run(((4, 3, 12),), naive=True, naive_time_limit_s=10.0, highs=False)
    assert set(out) == {"4x3x12"}
    row = out["4x3x12"]
    assert row["solver"] == "cbc" and row["method"] == "relax-and-fix" and row["seconds"] > 0
    assert row["lower_bound_usd"] <= row["objective_usd"] + 0.01  # type: ignore[operator]
    assert row["gap"] == pytest.approx(
        (row["objective_usd"] - row["lower_bound_usd"]) / row["objective_usd"],  # type: ignore[operator]
        abs=1e-4,
    )
    assert row["gap_met"] == (row["gap"] <= PROVE.gap)  # type: ignore[operator]
    assert row["bound_from"] in ("lp", "milp")
    assert set(row["phases_s"]) >= {"build_s", "lp_s"}
    # the quick path's bound is the LP's: never above the proven one
    quick = row["quick"]
    assert quick["lower_bound_usd"] <= row["lower_bound_usd"] + 0.01  # type: ignore[operator]
    assert quick["objective_usd"] >= quick["lower_bound_usd"] - 0.01  # type: ignore[operator]
    # the naive integer formulation, solved in the same run
    assert row["naive_status"] in ("optimal", "within_gap", "feasible")
    assert row["naive_variables"] > row["variables"]
    assert row["objective_vs_naive"] == pytest.approx(
        row["objective_usd"] / row["naive_objective_usd"], abs=1e-3
    )
    assert row["fast_cost_vs_milp"] > 0
